//! The request lifecycle driven as the adapter drives it, without a mount:
//! editors' save sequences (docs/SEMANTICS.md, "Editing metadata"), caps, and directory
//! snapshots.

use crate::core::tree::node::{Kind, ROOT};
use crate::core::{Access, Core, Files, SetAttr};
use std::ffi::OsStr;

struct Mount {
    files: Files,
    _dir: tempfile::TempDir,
}

fn mount() -> Mount {
    mount_with(&[])
}

/// [`mount`] with more settings.
fn mount_with(settings: &[(&str, &str)]) -> Mount {
    let (core, dir) = Core::for_tests(settings);
    Mount {
        files: Files::new(core),
        _dir: dir,
    }
}

const PID: u32 = 0;
const NONE: SetAttr = SetAttr {
    owner_or_mode: false,
    size: None,
};
const TRUNCATE: SetAttr = SetAttr {
    owner_or_mode: false,
    size: Some(0),
};
const REPLACE: Access = Access {
    reads: false,
    writes: true,
    truncates: true,
};

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

impl Mount {
    /// `mkdir KEY`: the session directory's inode.
    fn session(&self, key: &str) -> u64 {
        self.files.mkdir(ROOT, os(key), PID).unwrap().ino
    }

    fn ino(&self, dir: u64, name: &str) -> u64 {
        self.files.lookup(dir, os(name), PID).unwrap().ino
    }

    fn read_all(&self, dir: u64, name: &str) -> Vec<u8> {
        let fh = self
            .files
            .open(self.ino(dir, name), Access::READ, PID)
            .unwrap();
        let bytes = self.files.read(fh, 0, 1 << 20).unwrap();
        self.files.release(fh);
        bytes
    }

    fn meta(&self, dir: u64) -> serde_json::Value {
        serde_json::from_slice(&self.read_all(dir, "meta.json")).unwrap()
    }

    fn title(&self, dir: u64) -> serde_json::Value {
        self.meta(dir)["title"].clone()
    }

    /// `meta.json` as read, with `title` changed: what an editor saves.
    fn edited(&self, dir: u64, title: &str) -> Vec<u8> {
        let mut doc = self.meta(dir);
        doc["title"] = title.into();
        let mut text = serde_json::to_vec_pretty(&doc).unwrap();
        text.push(b'\n');
        text
    }

    /// A listing with attributes from `offset`, as a reply with room for
    /// `room` entries takes it: (offset after, name, attributes).
    fn plus(&self, dir: u64, offset: u64, room: usize) -> Vec<(u64, String, crate::core::Attr)> {
        let fh = self.files.opendir(dir).unwrap();
        let mut got = Vec::new();
        self.files
            .readdir_plus(dir, fh, offset, PID, |next, name, a| {
                if got.len() == room {
                    return true;
                }
                got.push((next, name.to_string(), *a));
                false
            })
            .unwrap();
        self.files.releasedir(fh);
        got
    }

    /// Every reply of a listing with attributes, on from where each one
    /// ended, as the kernel asks, to an empty one; and where each began.
    fn plus_all(&self, dir: u64) -> (Vec<(u64, String, crate::core::Attr)>, Vec<u64>) {
        let (mut all, mut starts) = (Vec::new(), Vec::new());
        loop {
            let from = all.len() as u64;
            let reply = self.plus(dir, from, usize::MAX);
            if reply.is_empty() {
                return (all, starts);
            }
            starts.push(from);
            all.extend(reply);
        }
    }

    fn names(&self, dir: u64) -> Vec<String> {
        let fh = self.files.opendir(dir).unwrap();
        let names = self
            .files
            .readdir(dir, fh)
            .unwrap()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        self.files.releasedir(fh);
        names
    }
}

#[test]
fn a_scrollback_stat_looks_at_its_own_sessions_handles_only() {
    use crate::key::SessionKey;
    use std::sync::atomic::Ordering;
    let m = mount_with(&[("AGENT_SESSIONS_SCROLLBACK_BYTES", "262144")]);
    let (busy, quiet) = (m.session("shell:busy"), m.session("shell:quiet"));
    let me = std::process::id();
    // Another session followed many times over (`tail -F` of each).
    let busy_scrollback = m.ino(busy, "scrollback");
    for _ in 0..500 {
        m.files.open(busy_scrollback, Access::READ, me).unwrap();
    }
    let scrollback = m.ino(quiet, "scrollback");
    let fh = m.files.open(scrollback, Access::READ, me).unwrap();
    // Past the ring's cap: the handle's view is longer than what is held.
    let rt = m
        .files
        .core
        .session_runtime(&SessionKey::parse("shell:quiet").unwrap())
        .unwrap();
    rt.take_output(&[b'x'; 300 * 1024]);
    let held = rt.scrollback().len() as u64;
    assert!(held < 300 * 1024);

    let visited = &m.files.handles.scrollbacks_visited;
    visited.store(0, Ordering::Relaxed);
    let size = |fh, pid| m.files.getattr(scrollback, fh, pid).unwrap().size;
    assert_eq!(size(Some(fh), me), 300 * 1024, "its own handle's view");
    assert_eq!(size(None, me), 300 * 1024, "by name: its process's newest");
    // Process 1 holds none of it open: the bytes held.
    assert_eq!(size(None, 1), held);
    assert!(
        visited.load(Ordering::Relaxed) <= 1,
        "{} handles looked at",
        visited.load(Ordering::Relaxed)
    );
    // Closed, it is the bytes held for everyone.
    m.files.release(fh);
    assert_eq!(size(None, me), held);
}

#[test]
fn vim_saving_in_place_commits_at_fsync_and_keeps_the_inode() {
    let m = mount();
    let dir = m.session("shell:vim");
    let meta = m.ino(dir, "meta.json");
    let text = m.edited(dir, "from vim");
    // Swap file, then the probe `4913`: created, stat'ed, removed.
    for scratch in [".meta.json.swp", "4913"] {
        let (attr, fh) = m.files.create(dir, os(scratch)).unwrap();
        assert_eq!((attr.kind, attr.size), (Kind::File, 0));
        m.files.release(fh);
    }
    m.files.unlink(dir, os("4913")).unwrap();
    // open(O_WRONLY|O_CREAT), ftruncate(0), write, fsync, fchmod, close.
    let fh = m.files.open(meta, Access::WRITE, PID).unwrap();
    m.files.setattr(meta, TRUNCATE, Some(fh), PID).unwrap();
    // The empty state between ftruncate and write is never a commit.
    m.files.finish(fh).unwrap();
    assert_eq!(m.title(dir), serde_json::Value::Null);
    m.files.write(fh, 0, &text).unwrap();
    assert_eq!(
        m.title(dir),
        serde_json::Value::Null,
        "applied before fsync"
    );
    m.files.finish(fh).unwrap();
    assert_eq!(m.title(dir), "from vim");
    let chmod = SetAttr {
        owner_or_mode: true,
        size: None,
    };
    m.files.setattr(meta, chmod, Some(fh), PID).unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    m.files.unlink(dir, os(".meta.json.swp")).unwrap();
    assert_eq!(m.ino(dir, "meta.json"), meta);
    assert_eq!(m.title(dir), "from vim");
    assert!(!m.names(dir).iter().any(|n| n.contains("swp")));
}

#[test]
fn sed_and_vim_renames_commit_and_leave_backups_unlisted() {
    let m = mount();
    let dir = m.session("shell:sed");
    let meta = m.ino(dir, "meta.json");
    // sed -i: a temporary file, written whole, renamed over.
    let (_, fh) = m.files.create(dir, os("sedAb12Z")).unwrap();
    let text = m.edited(dir, "from sed");
    m.files.write(fh, 0, &text).unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    m.files
        .rename(dir, os("sedAb12Z"), dir, os("meta.json"))
        .unwrap();
    assert_eq!(m.title(dir), "from sed");
    assert!(m.files.lookup(dir, os("sedAb12Z"), PID).is_err());
    assert_eq!(m.ino(dir, "meta.json"), meta);
    // vim with a backup: meta.json -> meta.json~ leaves a copy, then writes anew.
    m.files
        .rename(dir, os("meta.json"), dir, os("meta.json~"))
        .unwrap();
    let backup = m.read_all(dir, "meta.json~");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&backup).unwrap()["title"],
        "from sed"
    );
    let text = m.edited(dir, "from vim");
    let fh = m.files.open(meta, REPLACE, PID).unwrap();
    m.files.write(fh, 0, &text).unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    assert_eq!(m.title(dir), "from vim");
    let names = m.names(dir);
    assert!(names.contains(&"meta.json".to_string()));
    assert!(!names.iter().any(|n| n.ends_with('~')), "{names:?}");
    m.files.unlink(dir, os("meta.json~")).unwrap();
}

#[test]
fn emacs_lock_link_autosave_and_backup() {
    let m = mount();
    let dir = m.session("shell:emacs");
    let lock = m
        .files
        .symlink(
            dir,
            os(".#meta.json"),
            std::path::Path::new("me@host.1:2"),
            PID,
        )
        .unwrap();
    assert_eq!(lock.kind, Kind::Symlink);
    assert_eq!(m.files.readlink(lock.ino).unwrap(), b"me@host.1:2");
    assert!(m.names(dir).contains(&".#meta.json".to_string()));
    let (_, fh) = m.files.create(dir, os("#meta.json#")).unwrap();
    m.files.write(fh, 0, b"{ half").unwrap();
    m.files.release(fh);
    m.files
        .rename(dir, os("meta.json"), dir, os("meta.json~"))
        .unwrap();
    let text = m.edited(dir, "from emacs");
    let fh = m.files.open(m.ino(dir, "meta.json"), REPLACE, PID).unwrap();
    // Written in two pieces: the first half waits for the rest.
    let (a, b) = text.split_at(text.len() / 2);
    m.files.write(fh, 0, a).unwrap();
    m.files.write(fh, a.len() as u64, b).unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    assert_eq!(m.title(dir), "from emacs");
    for litter in ["#meta.json#", ".#meta.json", "meta.json~"] {
        m.files.unlink(dir, os(litter)).unwrap();
    }
    assert!(!m.names(dir).iter().any(|n| n.contains('#')));
}

#[test]
fn nano_and_echo_replace_a_field_at_close() {
    let m = mount();
    let dir = m.session("shell:nano");
    let title = m.ino(dir, "title");
    // `echo x > title`: open without O_TRUNC, setattr(size=0, fh=None), write.
    let fh = m.files.open(title, Access::WRITE, PID).unwrap();
    m.files.setattr(title, TRUNCATE, None, PID).unwrap();
    m.files.write(fh, 0, b"from echo\n").unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    assert_eq!(m.read_all(dir, "title"), b"from echo\n");
    // nano truncates at open and writes.
    let fh = m.files.open(title, REPLACE, PID).unwrap();
    m.files.write(fh, 0, b"from nano\n").unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    assert_eq!(m.title(dir), "from nano");
}

#[test]
fn a_bad_save_is_refused_at_write_and_changes_nothing() {
    let m = mount();
    let dir = m.session("shell:bad");
    let meta = m.ino(dir, "meta.json");
    let before = m.read_all(dir, "meta.json");
    let fh = m.files.open(meta, REPLACE, PID).unwrap();
    let err = m.files.write(fh, 0, b"{\"title\": 1,,}").unwrap_err();
    assert_eq!(err.errno, libc::EINVAL);
    // Nothing is left to apply at close.
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    // A changed field that is not the user's to change.
    let mut doc = m.meta(dir);
    doc["engine"] = "codex".into();
    let fh = m.files.open(meta, REPLACE, PID).unwrap();
    let err = m
        .files
        .write(fh, 0, &serde_json::to_vec(&doc).unwrap())
        .unwrap_err();
    assert_eq!(err.errno, libc::EINVAL);
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    assert_eq!(m.read_all(dir, "meta.json"), before);
    // Read and write at once: refused at open.
    let both = Access {
        reads: true,
        writes: true,
        truncates: false,
    };
    assert_eq!(
        m.files.open(meta, both, PID).unwrap_err().errno,
        libc::EINVAL
    );
}

#[test]
fn offsets_and_sizes_past_a_cap_are_efbig() {
    let m = mount();
    let dir = m.session("shell:caps");
    let meta = m.ino(dir, "meta.json");
    let fh = m.files.open(meta, REPLACE, PID).unwrap();
    let err = m.files.write(fh, 1 << 40, b"x").unwrap_err();
    assert_eq!(err.errno, libc::EFBIG);
    m.files.release(fh);
    let huge = SetAttr {
        owner_or_mode: false,
        size: Some(1 << 60),
    };
    assert_eq!(
        m.files.setattr(meta, huge, None, PID).unwrap_err().errno,
        libc::EFBIG
    );
    let (attr, fh) = m.files.create(dir, os("scratch")).unwrap();
    assert_eq!(
        m.files.write(fh, 1 << 40, b"x").unwrap_err().errno,
        libc::EFBIG
    );
    assert_eq!(
        m.files
            .setattr(attr.ino, huge, Some(fh), PID)
            .unwrap_err()
            .errno,
        libc::EFBIG
    );
    m.files.release(fh);
    // A stream holds nothing: only 0 is a size.
    let input = m.ino(dir, "input");
    m.files.setattr(input, TRUNCATE, None, PID).unwrap();
    let one = SetAttr {
        owner_or_mode: false,
        size: Some(1),
    };
    assert_eq!(
        m.files.setattr(input, one, None, PID).unwrap_err().errno,
        libc::EFBIG
    );
    // Read-only files take no size and no mode.
    let status = m.ino(dir, "status");
    assert_eq!(
        m.files
            .setattr(status, TRUNCATE, None, PID)
            .unwrap_err()
            .errno,
        libc::EACCES
    );
    let chmod = SetAttr {
        owner_or_mode: true,
        size: None,
    };
    assert_eq!(
        m.files.setattr(status, chmod, None, PID).unwrap_err().errno,
        libc::EPERM
    );
    assert_eq!(
        m.files.setattr(status, NONE, None, PID).unwrap().ino,
        status
    );
}

#[test]
fn the_node_table_decides_what_open_takes() {
    let m = mount();
    let dir = m.session("shell:open");
    let errno = |name: &str, access: Access| {
        m.files
            .open(m.ino(dir, name), access, PID)
            .map(|fh| m.files.release(fh))
            .map_err(|e| e.errno)
    };
    assert_eq!(errno("status", Access::WRITE), Err(libc::EACCES));
    // Only root passes the kernel's mode check to read a 0200 file: it reads nothing.
    assert_eq!(errno("input", Access::READ), Ok(()));
    assert_eq!(errno("ctl", Access::READ), Ok(()));
    let both = Access {
        reads: true,
        writes: true,
        truncates: false,
    };
    assert_eq!(errno("input", both), Err(libc::EACCES));
    assert_eq!(errno("status", Access::READ), Ok(()));
    assert_eq!(errno("meta.json", Access::READ), Ok(()));
    assert_eq!(
        m.files.open(dir, Access::READ, PID).unwrap_err().errno,
        libc::EISDIR
    );
    assert_eq!(
        m.files.open(ROOT, Access::READ, PID).unwrap_err().errno,
        libc::EISDIR
    );
    // A malformed ctl command fails at the write, before any pool.
    let fh = m.files.open(m.ino(dir, "ctl"), Access::WRITE, PID).unwrap();
    let slow = m.files.slow_write(fh, b"\n\n").unwrap();
    assert_eq!(slow.unwrap_err().errno, libc::EINVAL);
    assert!(m.files.slow_write(fh, b"stop\n").unwrap().unwrap().urgent());
    m.files.release(fh);
}

#[test]
fn a_directory_listing_is_the_snapshot_opendir_took() {
    let m = mount();
    m.session("shell:one");
    let fh = m.files.opendir(ROOT).unwrap();
    let first = m.files.readdir(ROOT, fh).unwrap();
    for name in [
        ".",
        "..",
        "README",
        "status",
        "ctl",
        "sessions.json",
        "archived",
        "slots",
        "shell:one",
    ] {
        assert!(first.iter().any(|e| e.name == name), "{name} in {first:?}");
    }
    m.session("shell:two");
    // The same handle pages through the same entries.
    assert_eq!(m.files.readdir(ROOT, fh).unwrap(), first);
    m.files.releasedir(fh);
    // A new opendir sees it (a listing may be served from a cache for up
    // to a second when the sidecar's mtime has not moved on).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let names = loop {
        let names = m.names(ROOT);
        if names.contains(&"shell:two".to_string()) || std::time::Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(names.contains(&"shell:two".to_string()), "{names:?}");
    assert_eq!(names.len(), first.len() + 1);
    // Inodes in a listing are the ones lookup gives.
    let two = first.iter().find(|e| e.name == "shell:one").unwrap();
    assert_eq!(two.ino, m.ino(ROOT, "shell:one"));
    assert_eq!(two.kind, Kind::Dir);
}

#[test]
fn views_sessions_json_and_the_root_list_the_same_sessions() {
    let m = mount();
    let write = |dir: u64, name: &str, text: &[u8]| {
        let fh = m.files.open(m.ino(dir, name), REPLACE, PID).unwrap();
        m.files.write(fh, 0, text).unwrap();
        m.files.finish(fh).unwrap();
        m.files.release(fh);
    };
    let a = m.session("shell:a");
    let b = m.session("shell:b");
    m.session("shell:c");
    write(a, "favourite", b"1\n");
    write(a, "project", b"web\n");
    write(b, "project", b"web\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    // Listings may be served from a one-second cache: wait for the change.
    let favourites = m.ino(ROOT, "favourites");
    while m.names(favourites).len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(m.names(favourites), [".", "..", "shell:a"]);
    let projects = m.ino(ROOT, "projects");
    assert_eq!(m.names(projects), [".", "..", "web"]);
    let web = m.ino(projects, "web");
    let mut linked = m.names(web);
    linked.sort();
    assert_eq!(linked, [".", "..", "shell:a", "shell:b"]);
    let link = m.files.lookup(web, os("shell:a"), PID).unwrap();
    assert_eq!(link.kind, Kind::Symlink);
    assert_eq!(m.files.readlink(link.ino).unwrap(), b"../../shell:a");
    // A link's attributes hold for its life, its entry until its session
    // leaves the view (the kernel is told then).
    assert_eq!(link.fixed, crate::core::tree::requests::Fixed::Member);
    assert_eq!(
        link.mtime,
        m.files.getattr(link.ino, None, PID).unwrap().mtime
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&m.read_all(ROOT, "sessions.json")).unwrap();
    let mut in_json: Vec<String> = doc["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect();
    let mut in_root: Vec<String> = m
        .names(ROOT)
        .into_iter()
        .filter(|n| n.starts_with("shell:"))
        .collect();
    in_json.sort();
    in_root.sort();
    assert_eq!(in_json, ["shell:a", "shell:b", "shell:c"]);
    assert_eq!(in_root, in_json);
}

/// Readers of one version of `sessions.json` share its text: a crowd of
/// open handles holds one copy, not one each.
#[test]
fn open_handles_of_sessions_json_share_one_text() {
    let m = mount();
    m.session("shell:a");
    let ino = m.ino(ROOT, "sessions.json");
    let handles: Vec<u64> = (0..3)
        .map(|_| m.files.open(ino, Access::READ, PID).unwrap())
        .collect();
    let texts: Vec<_> = handles
        .iter()
        .map(|fh| m.files.listing_of(*fh).expect("a listing"))
        .collect();
    assert!(texts[0].len() > 2);
    assert!(texts.iter().all(|t| std::sync::Arc::ptr_eq(t, &texts[0])));
    // A change makes a new version for the next opener only.
    m.session("shell:b");
    let later = m.files.open(ino, Access::READ, PID).unwrap();
    let newer = m.files.listing_of(later).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&newer, &texts[0]));
    assert!(String::from_utf8_lossy(&newer.to_vec()).contains("shell:b"));
    assert!(!String::from_utf8_lossy(&texts[1].to_vec()).contains("shell:b"));
    for fh in handles.into_iter().chain([later]) {
        m.files.release(fh);
    }
}

#[test]
fn a_record_and_transcript_lines_written_a_byte_at_a_time_arrive_whole() {
    let m = mount();
    let slots = m.ino(ROOT, "slots");
    let world = m
        .files
        .mkdir(slots, os("0f8fad5b-d9cb-469f-a165-70867728950e"), PID)
        .unwrap()
        .ino;
    let name = "n".repeat(20_000);
    let record = format!(r#"{{"sessionId":"s-1","name":"{name}"}}"#);
    let (_, fh) = m.files.create(world, os("3")).unwrap();
    for (at, b) in record.bytes().enumerate() {
        m.files.write(fh, at as u64, &[b]).unwrap();
    }
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    let stored: serde_json::Value = serde_json::from_slice(&m.read_all(world, "3")).unwrap();
    assert_eq!(stored["name"], name);
    // Text that is not JSON, sent after the last parse, is named so at close.
    let (_, fh) = m.files.create(world, os("4")).unwrap();
    let head = format!(r#"{{"sessionId":"s-2","name":"{name}""#);
    m.files.write(fh, 0, head.as_bytes()).unwrap();
    m.files.write(fh, head.len() as u64, b" x").unwrap();
    let err = m.files.finish(fh).unwrap_err();
    assert_eq!(err.errno, libc::EINVAL);
    assert!(err.message.contains("not JSON"), "{}", err.message);
    m.files.release(fh);

    let transcripts = m.ino(ROOT, "agent-transcripts");
    let (_, fh) = m.files.create(transcripts, os("run-1.jsonl")).unwrap();
    let lines =
        format!("{{\"type\":\"a\"}}\n\n{{\"type\":\"b\",\"t\":\"{name}\"}}\n{{\"type\":\"c\"}}");
    for (at, b) in lines.bytes().enumerate() {
        m.files.write(fh, at as u64, &[b]).unwrap();
    }
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    let text = m.read_all(transcripts, "run-1.jsonl");
    let types: Vec<String> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice::<serde_json::Value>(l).unwrap()["type"].to_string())
        .collect();
    assert_eq!(types, ["\"a\"", "\"b\"", "\"c\""]);
}

/// The root `status`'s `open_files`, read through a handle of its own.
fn open_files(m: &Mount) -> serde_json::Value {
    let status: serde_json::Value = serde_json::from_slice(&m.read_all(ROOT, "status")).unwrap();
    status["open_files"].clone()
}

#[test]
fn what_open_files_hold_together_is_capped_and_closing_frees_it() {
    let m = mount_with(&[("AGENT_SESSIONS_OPEN_BYTES", "4194304")]);
    let dir = m.session("shell:a");
    let (meta, status) = (m.ino(dir, "meta.json"), m.ino(dir, "status"));
    // Writers that never close: each holds 60 KiB, within its own cap.
    let chunk = vec![b' '; 60 << 10];
    let mut writers = Vec::new();
    let full = loop {
        assert!(writers.len() < 100, "never refused");
        let fh = m.files.open(meta, Access::WRITE, PID).unwrap();
        match m.files.write(fh, 0, &chunk) {
            Ok(_) => writers.push(fh),
            Err(e) => {
                m.files.release(fh);
                break e;
            }
        }
    };
    assert_eq!(full.errno, libc::ENOSPC, "{}", full.message);
    assert!(
        full.message.contains("AGENT_SESSIONS_OPEN_BYTES"),
        "{}",
        full.message
    );
    // 4 MiB, less the 1 MiB only `status` files may use.
    assert!(
        (45..55).contains(&writers.len()),
        "{} writers",
        writers.len()
    );
    // Readers are then refused at open: each `meta.json` is a text of its own.
    let mut readers = Vec::new();
    let refused = loop {
        assert!(readers.len() < 10_000, "never refused");
        match m.files.open(meta, Access::READ, PID) {
            Ok(fh) => readers.push(fh),
            Err(e) => break e,
        }
    };
    assert_eq!(refused.errno, libc::ENOMEM, "{}", refused.message);
    // The reason can still be read.
    let fh = m.files.open(status, Access::READ, PID).unwrap();
    let text = String::from_utf8(m.files.read(fh, 0, 1 << 16).unwrap()).unwrap();
    assert!(text.contains("AGENT_SESSIONS_OPEN_BYTES"), "{text}");
    readers.push(fh);
    for fh in writers.drain(..).chain(readers.drain(..)) {
        m.files.release(fh);
    }
    // Everything freed: only the handle reading `status` is held.
    let held = open_files(&m);
    assert_eq!(held["limit_mib"], 4);
    assert_eq!(held["mib"], 0, "{held}");
    let fh = m.files.open(meta, Access::WRITE, PID).unwrap();
    assert_eq!(m.files.write(fh, 0, &chunk).unwrap(), chunk.len());
    m.files.release(fh);
}

#[test]
fn handles_sharing_one_text_charge_it_once() {
    let m = mount_with(&[("AGENT_SESSIONS_OPEN_BYTES", "4194304")]);
    for n in 0..50 {
        m.session(&format!("shell:s{n}"));
    }
    let listing = m.ino(ROOT, "sessions.json");
    let first = m.files.open(listing, Access::READ, PID).unwrap();
    let one = m.files.handles.memory_bytes().0;
    let more: Vec<u64> = (0..100)
        .map(|_| m.files.open(listing, Access::READ, PID).unwrap())
        .collect();
    let after = m.files.handles.memory_bytes().0;
    assert_eq!(
        after - one,
        100 * crate::core::tree::handle_memory::HANDLE_OVERHEAD,
        "{one} → {after}"
    );
    for fh in more.into_iter().chain([first]) {
        m.files.release(fh);
    }
}

/// A rename whose session moved after the kernel looked it up (archived
/// through a file, by another daemon): the name is no longer where the
/// kernel found it, ENOENT; EXDEV would have `mv` copy the tree instead.
#[test]
fn a_rename_of_a_session_that_moved_meanwhile_is_enoent() {
    let m = mount();
    m.session("shell:moved");
    let archived = crate::core::tree::node::ViewDir::Archived.ino();
    let key = crate::key::SessionKey::parse("shell:moved").unwrap();
    m.files.core().archive(&key).unwrap();
    let err = m
        .files
        .rename(ROOT, os("shell:moved"), archived, os("shell:moved"))
        .unwrap_err();
    assert_eq!(err.errno, libc::ENOENT, "{err:?}");
    m.files.core().unarchive(&key).unwrap();
    let err = m
        .files
        .rename(archived, os("shell:moved"), ROOT, os("shell:moved"))
        .unwrap_err();
    assert_eq!(err.errno, libc::ENOENT, "{err:?}");
    // A view is still another directory.
    let favourites = crate::core::tree::node::ViewDir::Favourites.ino();
    let err = m
        .files
        .rename(ROOT, os("shell:moved"), favourites, os("shell:moved"))
        .unwrap_err();
    assert_eq!(err.errno, libc::EXDEV, "{err:?}");
}

#[test]
fn a_listing_with_attributes_counts_what_it_sent_as_lookups() {
    let m = mount();
    let dir = m.session("shell:a");
    let (made, fh) = m.files.create_by(dir, os("notes"), PID).unwrap();
    m.files.release(fh);
    m.files.forget(made.ino, 1);
    let (all, starts) = m.plus_all(dir);
    let names: Vec<&str> = all.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, m.names(dir), "the whole directory");
    // The second reply begins at `screen`, which comes only at a head.
    let second = starts[1] as usize;
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(all[second].1, "screen");
    let offsets: Vec<u64> = all.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(offsets, (1..=all.len() as u64).collect::<Vec<_>>());
    // Each entry as a lookup gives it.
    for (_, name, attr) in &all[2..] {
        let looked_up = m.files.lookup(dir, os(name), PID).unwrap();
        assert_eq!(*attr, looked_up, "{name}");
        m.files.forget(looked_up.ino, 1);
    }
    // The scratch file is numbered while the kernel holds it: the listing
    // counted one lookup of it, and a lookup one more.
    let notes = all.last().unwrap().2.ino;
    assert_eq!(all.last().unwrap().1, "notes");
    m.files.lookup(dir, os("notes"), PID).unwrap();
    m.files.forget(notes, 1);
    assert!(
        m.files.known_node(notes).is_some(),
        "the listing's lookup is held"
    );
    m.files.forget(notes, 1);
    assert!(m.files.known_node(notes).is_none(), "and no more");
    // An entry that does not fit is not sent, nor counted.
    let short = m.plus(dir, second as u64, 1);
    assert_eq!(short.len(), 1);
    m.files.forget(short[0].2.ino, 1);
    m.files.lookup(dir, os("notes"), PID).unwrap();
    m.files.forget(notes, 1);
    assert!(
        m.files.known_node(notes).is_none(),
        "nothing held past the lookup"
    );
    // From where the kernel asks next.
    let rest = m.plus(dir, second as u64 + 1, usize::MAX);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].1, "notes");
    m.files.forget(rest[0].2.ino, 1);
    assert!(
        m.plus(dir, all.len() as u64, usize::MAX).is_empty(),
        "the end"
    );
}

/// `ls KEY` (whose first batch the kernel asks with attributes) makes no
/// VT mirror: `screen` comes only at the head of a reply.
#[test]
fn a_listing_with_attributes_gives_screen_only_at_the_head_of_a_reply() {
    let m = mount();
    let dir = m.session("shell:a");
    let first = m.plus(dir, 0, usize::MAX);
    let names: Vec<&str> = first.iter().map(|(_, n, _)| n.as_str()).collect();
    assert!(!names.contains(&"screen"), "{names:?}");
    let rest = m.plus(dir, first.len() as u64, usize::MAX);
    assert_eq!(rest[0].1, "screen");
    let (_, _, screen) = &rest[0];
    assert_eq!(*screen, m.files.lookup(dir, os("screen"), PID).unwrap());
}

#[test]
fn a_listing_with_attributes_gives_sessions_json_only_at_the_head_of_a_reply() {
    let m = mount();
    m.session("shell:a");
    m.session("shell:b");
    let first = m.plus(ROOT, 0, usize::MAX);
    let names: Vec<&str> = first.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, [".", "..", "README", "status", "ctl"]);
    let rest = m.plus(ROOT, first.len() as u64, usize::MAX);
    assert_eq!(rest[0].1, "sessions.json");
    let names: Vec<&str> = rest.iter().map(|(_, n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"shell:a") && names.contains(&"shell:b"),
        "{names:?}"
    );
    let (_, _, a) = rest.iter().find(|(_, n, _)| n == "shell:a").unwrap();
    assert_eq!(a.kind, Kind::Dir);
    assert_eq!(*a, m.files.lookup(ROOT, os("shell:a"), PID).unwrap());
    // A session gone since the listing began (archived) is left out.
    let fh = m.files.opendir(ROOT).unwrap();
    let archived = crate::core::tree::node::ViewDir::Archived.ino();
    m.files
        .rename(ROOT, os("shell:b"), archived, os("shell:b"))
        .unwrap();
    // As the kernel asks: on from where each reply ended, to an empty one.
    let (mut after, mut offset) = (Vec::new(), first.len() as u64);
    loop {
        let before = after.len();
        m.files
            .readdir_plus(ROOT, fh, offset, PID, |next, name, _| {
                after.push(name.to_string());
                offset = next;
                false
            })
            .unwrap();
        if after.len() == before {
            break;
        }
    }
    m.files.releasedir(fh);
    assert!(after.contains(&"shell:a".to_string()), "{after:?}");
    assert!(!after.contains(&"shell:b".to_string()), "{after:?}");
}

/// An editor's save onto `title` refused by the check under it: one
/// warning, with the words the check gave; the status says which call.
#[test]
fn a_refused_save_is_one_warning_and_the_status_names_the_rename() {
    let m = mount();
    let dir = m.session("shell:ed");
    let (_, fh) = m.files.create(dir, os("t.tmp")).unwrap();
    m.files.write(fh, 0, b"a\tb\n").unwrap();
    m.files.finish(fh).unwrap();
    m.files.release(fh);
    let (err, lines) = crate::core::warnings::capture_log(|| {
        m.files
            .rename(dir, os("t.tmp"), dir, os("title"))
            .unwrap_err()
    });
    assert_eq!(err.errno, libc::EINVAL);
    let warnings: Vec<_> = lines
        .iter()
        .filter(|(level, _)| *level <= log::Level::Warn)
        .collect();
    assert_eq!(warnings.len(), 1, "{lines:?}");
    assert!(warnings[0].1.starts_with("shell:ed: title "), "{lines:?}");
    // Passed up through the rename: in the debug log only.
    assert!(
        lines
            .iter()
            .any(|(level, line)| *level == log::Level::Debug && line.contains("rename")),
        "{lines:?}"
    );
    let status: serde_json::Value = serde_json::from_slice(&m.read_all(dir, "status")).unwrap();
    let reason = status["error"].as_str().unwrap();
    assert_eq!(reason, err.message);
    assert!(
        reason.starts_with("rename \"t.tmp\" -> \"title\": title "),
        "{reason}"
    );
}
