//! The generated files that report state: a session's `status` and
//! `screen`, the root `status` and `README`.

use crate::core::organize::rows;
use crate::core::{to_json_text, utc_text, Core};
use crate::error::Result;
use crate::key::SessionKey;
use crate::runtime::dtach;
use crate::runtime::launch::live_record;
use crate::runtime::record::RunRecord;
use crate::sync::lock;
use crate::terminal::vt_mirror::{DEFAULT_COLS, DEFAULT_ROWS};
use serde_json::json;

pub(in crate::core) const README: &str = "\
sessionfs: agent and shell sessions as files

  mkdir ENGINE:ID            create a session (engines: shell, claude, codex, ...)
  echo 'make' > ENGINE:ID/input    type into it (starts it under dtach if needed)
  tail -f ENGINE:ID/scrollback     follow its raw terminal output
  cat ENGINE:ID/screen       what its terminal shows now
  cat ENGINE:ID/status       live/stopped/busy/archived, last open outcome, pids, last error
  echo 'fix it' > ENGINE:ID/prompt  submit a prompt (returns once the agent took it)
  cat ENGINE:ID/wait         block until it is idle, waiting or ended; prints the state
  cat ENGINE:ID/state        stopped/starting/idle/busy/waiting/exited
  tail -f ENGINE:ID/events   its state changes, JSON lines
  cat ENGINE:ID/transcript/last    the last complete turn
  echo stop > ENGINE:ID/ctl  end it; also: open, resize COLSxROWS, redraw
  cat status                 the daemon's own state
  echo 'new shell title=build' > ctl    create a session with a fresh id

Sessions outlive the daemon: each runs under its own dtach master, so
`dtach -a` on the socket named in its status works beside this mount.
";

/// What the kernel and open files hold of the daemon.
#[derive(Debug, Clone, Copy)]
pub(in crate::core) struct Usage {
    /// Inode numbers the kernel holds.
    pub inodes: usize,
    /// What open handles hold in memory, and its cap.
    pub open_bytes: u64,
    pub open_bytes_limit: u64,
}

impl Core {
    pub(in crate::core) fn state_name(&self, key: &SessionKey) -> &'static str {
        let rt = lock(&self.sessions.runtimes).get(key).cloned();
        // A master stuck with a full listen queue still answers: never waits.
        rows::state_of(self.is_archived(key), rt.as_ref(), || {
            dtach::answers(&self.paths.socket(key))
        })
    }

    /// The session's `status` file.
    pub fn status(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        // Read, not created: a session nobody opened has no runtime.
        let rt = lock(&self.sessions.runtimes).get(key).cloned();
        let state_name = self.state_name(key);
        let live = state_name == "live";
        let (outcome, mut record, mut error, cols, rows) = match &rt {
            Some(rt) => {
                let s = lock(&rt.state);
                (s.outcome, s.record.clone(), s.error.clone(), s.cols, s.rows)
            }
            None => (None, None, None, DEFAULT_COLS, DEFAULT_ROWS),
        };
        if live && record.is_none() {
            // Joined a master whose wrapper had not written its record yet.
            // Read before taking the lock: no lock is held across I/O.
            record = live_record(&self.paths, key);
            if let (Some(rt), Some(_)) = (&rt, &record) {
                lock(&rt.state).record.clone_from(&record);
            }
        }
        if !live && error.is_none() {
            // A program that could not start leaves its reason in the run record.
            error = RunRecord::read(&self.paths.record(key)).and_then(|r| r.exec_error);
        }
        let record = if live { record } else { None };
        let meta = self.meta(key);
        let worktree = meta.worktree.as_ref().map(
            |w| json!({"path": w.path, "branch": w.branch, "base": w.base, "pruned": w.pruned}),
        );
        let earlier = meta.conversations;
        Ok(to_json_text(&json!({
            "key": key.to_string(),
            "conversation": self.conversation_id(key),
            "conversations": earlier,
            "state": state_name,
            "agent_state": self.agent_state(key).as_str(),
            "outcome": outcome,
            "master_pid": record.as_ref().map(|r| r.master_pid),
            "agent_pid": record.as_ref().map(|r| r.agent_pid),
            "socket": self.paths.socket(key),
            "lock": self.paths.lock(key),
            "size": format!("{cols}x{rows}"),
            "scrollback_bytes": rt.map_or(0, |rt| rt.scrollback.len()),
            "waiting_for": self.waiting_for(key),
            "worktree": worktree,
            "error": error,
        })))
    }

    /// The session's `screen`: the VT mirror's text.
    pub fn screen(&self, key: &SessionKey) -> Result<Vec<u8>> {
        self.require(key)?;
        // A session never opened shows a blank screen, without a mirror made for it.
        let text = match lock(&self.sessions.runtimes).get(key).cloned() {
            Some(rt) => rt.screen_text(),
            None => String::new(),
        };
        Ok(text.into_bytes())
    }

    /// The root `status`; `inodes` is how many inode numbers the mount holds.
    pub(in crate::core) fn root_status(&self, usage: Usage) -> Vec<u8> {
        let live: Vec<String> = lock(&self.sessions.runtimes)
            .iter()
            .filter(|(_, rt)| rt.live_client().is_some())
            .map(|(k, _)| k.to_string())
            .collect();
        let mut live = live;
        live.sort();
        to_json_text(&json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "mounts": [self.mountpoint],
            "started": utc_text(self.started_ms),
            // Counted by the members' index: output and writes to a
            // conversation change no member, so no gathering for them.
            "sessions": self.membership().sessions(),
            "catalog": self.catalog.stats(),
            "usage": self.usage.stats(),
            // Sessions holding a ring and a VT mirror here: only those opened.
            "runtimes": lock(&self.sessions.runtimes).len(),
            "live": live,
            "state_dir": self.config.state_dir,
            "runtime_dir": self.config.runtime_dir,
            "lock_dir": self.config.lock_dir,
            "agent": {"run": self.records.slots.agent_run()},
            "slow_ops": self.work.stats(),
            "error": self.root_error(),
            "new": lock(&self.last_new).clone(),
            "archive_older": lock(&self.organize.last_archive_older).clone(),
            "waits": self.agents.waits.len(),
            "inodes": usage.inodes,
            // In whole MiB: a count of bytes would change with every open,
            // this file's own included, and `rsync`/`tar` would see it move.
            "open_files": {"mib": usage.open_bytes >> 20, "limit_mib": usage.open_bytes_limit >> 20},
        }))
    }

    /// The root `README`.
    pub fn readme(&self) -> Vec<u8> {
        README.as_bytes().to_vec()
    }
}
