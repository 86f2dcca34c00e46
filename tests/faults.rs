//! Faults through a real mount: the daemon or the masters killed, daemons
//! racing, many readers through a ring wrap, a full state directory, the
//! runtime directory removed, a store changed under a reader, a stopped
//! master. Each test is bounded in time and scale (CI has two cores).

mod common;

use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn status(m: &Mount, key: &str) -> Value {
    m.json(&format!("{key}/status"))
}

fn master_of(m: &Mount, key: &str) -> u32 {
    status(m, key)["master_pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} has no master: {}", status(m, key))) as u32
}

/// Output lines of a session's scrollback, split at `\r` and `\n`.
fn output_lines(m: &Mount, key: &str) -> Vec<String> {
    let bytes = std::fs::read(m.path(&format!("{key}/scrollback"))).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .split(['\r', '\n'])
        .map(str::to_string)
        .collect()
}

/// The highest `N` of the lines `PREFIXN` in a session's scrollback.
fn highest(m: &Mount, key: &str, prefix: &str) -> Option<u64> {
    output_lines(m, key)
        .iter()
        .filter_map(|l| l.strip_prefix(prefix)?.parse().ok())
        .max()
}

/// Opens every session, all at once (one `echo open > ctl` each).
fn open_all(m: &Mount, keys: &[String]) {
    let writers: Vec<_> = keys
        .iter()
        .map(|k| {
            let ctl = m.path(&format!("{k}/ctl"));
            std::thread::spawn(move || std::fs::write(&ctl, b"open\n"))
        })
        .collect();
    for (k, w) in keys.iter().zip(writers) {
        w.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("open {k}: {e}"));
    }
}

/// What each daemon knows of a session, for a failure message.
fn explain(mounts: &[&Mount], key: &str) -> String {
    let mut out = String::new();
    for (i, m) in mounts.iter().enumerate() {
        let log: Vec<String> = m
            .log_text()
            .lines()
            .filter(|l| l.contains(key))
            .map(str::to_string)
            .collect();
        let scroll = std::fs::read(m.path(&format!("{key}/scrollback"))).unwrap_or_default();
        out += &format!(
            "daemon {i}: status {}\nlog:\n{}\nscrollback: {:?}\n",
            status(m, key),
            log.join("\n"),
            String::from_utf8_lossy(&scroll)
        );
    }
    out
}

#[test]
fn the_daemon_killed_under_twenty_printing_sessions_leaves_them_all_to_attach_again() {
    let host = Host::new();
    let mut a = host.mount("a");
    let keys: Vec<String> = (0..20).map(|i| format!("shell:p{i:02}")).collect();
    for (i, key) in keys.iter().enumerate() {
        std::fs::create_dir(a.path(key)).unwrap();
        std::fs::write(a.path(&format!("{key}/title")), format!("printer {i}\n")).unwrap();
    }
    open_all(&a, &keys);
    for (i, key) in keys.iter().enumerate() {
        // A counter that never stops printing: its numbers tell whether the
        // program after the restart is the same one.
        a.type_line(
            key,
            &format!("n=0; while :; do echo tick{i}-$((n++)); sleep 0.2; done"),
        );
    }
    let mut before = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let prefix = format!("tick{i}-");
        wait_for(30, &format!("{key} printing"), || {
            highest(&a, key, &prefix).is_some_and(|n| n >= 2)
        });
        before.push((master_of(&a, key), highest(&a, key, &prefix).unwrap()));
    }

    a.kill9();
    for (key, (master, _)) in keys.iter().zip(&before) {
        assert!(alive(*master), "the master of {key} died with the daemon");
    }

    let b = host.mount("b");
    for (i, (key, (master, seen))) in keys.iter().zip(&before).enumerate() {
        let s = status(&b, key);
        assert_eq!(s["outcome"], "ATTACH", "{key}: {s}");
        assert_eq!(s["state"], "live", "{key}: {s}");
        assert_eq!(s["master_pid"].as_u64(), Some(*master as u64), "{key}");
        assert_eq!(b.read(&format!("{key}/title")), format!("printer {i}\n"));
        // dtach keeps no history: the new daemon's scrollback holds what the
        // same program printed after the restart, its count going on.
        let prefix = format!("tick{i}-");
        wait_for(30, &format!("{key} printing on after the restart"), || {
            highest(&b, key, &prefix).is_some_and(|n| n > *seen)
        });
        assert!(
            highest(&b, key, &prefix).unwrap() < seen + 1000,
            "{key}'s counter started over"
        );
    }
    let mut masters = host.masters();
    masters.sort();
    let mut want: Vec<u32> = before.iter().map(|(m, _)| *m).collect();
    want.sort();
    assert_eq!(masters, want, "exactly the same masters, no new one");
}

#[test]
fn every_master_killed_gives_a_clean_launch_for_all_and_no_stale_socket() {
    let host = Host::new();
    let m = host.mount("mnt");
    let keys: Vec<String> = (0..20).map(|i| format!("shell:k{i:02}")).collect();
    for key in &keys {
        std::fs::create_dir(m.path(key)).unwrap();
    }
    open_all(&m, &keys);
    let first: Vec<(u32, PathBuf)> = keys
        .iter()
        .map(|k| {
            let s = status(&m, k);
            (
                s["master_pid"].as_u64().unwrap() as u32,
                PathBuf::from(s["socket"].as_str().unwrap()),
            )
        })
        .collect();
    for (master, _) in &first {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*master as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    }
    wait_for(20, "the masters to die", || host.masters().is_empty());
    // SIGKILL leaves each socket behind, with nobody listening.
    let stale: Vec<(i64, i64)> = first
        .iter()
        .map(|(_, socket)| {
            let err = std::os::unix::net::UnixStream::connect(socket).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED));
            let meta = std::fs::metadata(socket).expect("a stale socket");
            (meta.ctime(), meta.ctime_nsec())
        })
        .collect();
    for key in &keys {
        wait_for(20, &format!("{key} to stop"), || {
            status(&m, key)["state"] == "stopped"
        });
    }

    open_all(&m, &keys);
    let mut masters = Vec::new();
    for (key, ((old, socket), stale_time)) in keys.iter().zip(first.iter().zip(&stale)) {
        let s = status(&m, key);
        assert_eq!(s["outcome"], "LAUNCH", "{key}: {s}");
        let master = s["master_pid"].as_u64().unwrap() as u32;
        assert_ne!(master, *old, "{key}");
        assert!(alive(master));
        // A new socket in place of the stale one, and a master behind it.
        let meta = std::fs::metadata(socket).unwrap();
        assert_ne!(
            (meta.ctime(), meta.ctime_nsec()),
            *stale_time,
            "{key}: the stale socket is still there"
        );
        std::os::unix::net::UnixStream::connect(socket)
            .unwrap_or_else(|e| panic!("{key}: nobody answers on the new socket: {e}"));
        masters.push(master);
    }
    let mut running = host.masters();
    running.sort();
    masters.sort();
    assert_eq!(running, masters, "one new master per session");
    // Nothing else is left in the runtime directory: one socket per session.
    let sockets = std::fs::read_dir(host.runtime_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "sock"))
        .count();
    assert_eq!(sockets, keys.len());
    for key in &keys {
        m.type_line(key, "echo back-$((40+2))");
        m.wait_output_line(key, "back-42");
    }
}

#[test]
fn two_daemons_racing_first_writes_over_ten_new_keys_start_one_master_each() {
    let host = Host::new();
    let a = host.mount("a");
    let b = host.mount("b");
    let keys: Vec<String> = (0..10).map(|i| format!("shell:r{i}")).collect();
    for key in &keys {
        std::fs::create_dir(a.path(key)).unwrap();
    }
    wait_for(20, "the sessions to show through b", || {
        keys.iter().all(|k| b.path(k).exists())
    });
    // 12 writers a key, 6 through each daemon: 60 writes in flight per
    // daemon, under its bound of 64 slow operations. Each command and its
    // newline is one 8-byte dtach packet, so writes through the two
    // daemons cannot interleave inside one.
    let alphabet: Vec<char> = ('a'..='z').chain('0'..='9').collect();
    let mut writers = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        for w in 0..12 {
            let marker = format!("{}{}", alphabet[k], alphabet[w]);
            let through = if w % 2 == 0 { &a } else { &b };
            let input = through.path(&format!("{key}/input"));
            writers.push((
                key.clone(),
                marker.clone(),
                std::thread::spawn(move || {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(&input)
                        .and_then(|mut f| f.write_all(format!("echo {marker}\n").as_bytes()))
                }),
            ));
        }
    }
    let mut wanted = Vec::new();
    for (key, marker, w) in writers {
        w.join()
            .unwrap()
            .unwrap_or_else(|e| panic!("a first write to {key} failed: {e}"));
        wanted.push((key, marker));
    }
    let mut masters = host.masters();
    assert_eq!(masters.len(), keys.len(), "one master per key: {masters:?}");
    for key in &keys {
        let (sa, sb) = (status(&a, key), status(&b, key));
        assert_eq!(sa["master_pid"], sb["master_pid"], "{key}: {sa} {sb}");
        let outcomes = [sa["outcome"].clone(), sb["outcome"].clone()];
        assert!(
            outcomes.contains(&"LAUNCH".into()) && outcomes.contains(&"ATTACH".into()),
            "{key}: one daemon launches, the other attaches: {outcomes:?}"
        );
    }
    let launches =
        a.log_text().matches(": Launch").count() + b.log_text().matches(": Launch").count();
    assert_eq!(
        launches,
        keys.len(),
        "one LAUNCH per key across both daemons"
    );
    // Every command ran. dtach keeps no history, so each daemon holds the
    // output from its own ATTACH on, and the two together hold all of it.
    for (key, marker) in &wanted {
        let ran = wait_until(20, || {
            output_lines(&a, key).contains(marker) || output_lines(&b, key).contains(marker)
        });
        assert!(
            ran,
            "{marker:?} never ran in {key}:\n{}",
            explain(&[&a, &b], key)
        );
    }
    masters.sort();
    let mut after = host.masters();
    after.sort();
    assert_eq!(masters, after);
}

/// Processes of ours that must not outlive the test.
struct Reaper(Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether process `pid` holds `path` open.
fn holds_open(pid: u32, path: &Path) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .any(|e| std::fs::read_link(e.path()).is_ok_and(|p| p == path))
        })
        .unwrap_or(false)
}

#[test]
fn fifty_tail_f_readers_follow_one_session_through_a_ring_wrap_identically() {
    const READERS: usize = 50;
    const LINES: usize = 600;
    let host = Host::new().with_env("AGENT_SESSIONS_SCROLLBACK_BYTES", "262144");
    let m = host.mount("mnt");
    let key = "shell:tail";
    std::fs::create_dir(m.path(key)).unwrap();
    m.type_line(key, "stty -echo; echo rea''dy");
    m.wait_output_line(key, "ready");
    let scrollback = m.path(&format!("{key}/scrollback"));
    let out_dir = host.path("tails");
    std::fs::create_dir(&out_dir).unwrap();
    let mut tails = Reaper(Vec::new());
    for i in 0..READERS {
        let out = std::fs::File::create(out_dir.join(format!("{i}"))).unwrap();
        tails.0.push(
            Command::new("tail")
                .args(["-s", "0.1", "-n", "0", "-f"])
                .arg(&scrollback)
                .stdin(Stdio::null())
                .stdout(out)
                .spawn()
                .unwrap(),
        );
    }
    wait_for(30, "every reader to have the scrollback open", || {
        tails.0.iter().all(|t| holds_open(t.id(), &scrollback))
    });
    // About 600 KiB, more than twice the ring, at a pace the readers'
    // 0.1 s polling keeps up with.
    m.type_line(
        key,
        &format!(
            "printf 'BEG''IN\\n'; for i in $(seq 1 {LINES}); do printf 'L%04d-%01000d\\n' $i 0; \
             [ $((i % 10)) = 0 ] && sleep 0.1; done; printf 'E''ND\\n'"
        ),
    );
    let mut want = b"BEGIN\r\n".to_vec();
    for i in 1..=LINES {
        want.extend_from_slice(format!("L{i:04}-{}\r\n", "0".repeat(1000)).as_bytes());
    }
    want.extend_from_slice(b"END\r\n");
    let section = |i: usize| -> Option<Vec<u8>> {
        let got = std::fs::read(out_dir.join(format!("{i}"))).ok()?;
        let start = memchr_find(&got, b"BEGIN\r\n")?;
        let end = memchr_find(&got[start..], b"END\r\n")? + start + 5;
        Some(got[start..end].to_vec())
    };
    wait_for(60, "every reader to see the end", || {
        (0..READERS).all(|i| section(i).is_some())
    });
    assert!(
        scrollback.metadata().unwrap().len() <= 262_144,
        "the ring holds at most its size"
    );
    for i in 0..READERS {
        let got = section(i).unwrap();
        assert!(
            got == want,
            "reader {i} differs: {} bytes, {} wanted; sum {:x}, {:x} wanted",
            got.len(),
            want.len(),
            checksum(&got),
            checksum(&want)
        );
    }
}

fn append_to(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .unwrap();
}

/// Whether `page` shows the store caught while it was grown back in place
/// from `half` to `full`: the store then held a longer prefix of the full
/// one, cut at a line, and the page shows what it held: a render only
/// grows at its end as rows come, so it is a start of the full page.
fn grown_part_way(page: &[u8], half: &[u8], full: &[u8]) -> bool {
    page.len() > half.len()
        && page.len() < full.len()
        && page.ends_with(b"\n")
        && full.starts_with(page)
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Enough to tell streams apart in a message.
fn checksum(bytes: &[u8]) -> u64 {
    sessionfs::hashing::fnv1a(bytes)
}

/// A tmpfs mounted for a test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        sh_ok(&format!(
            "mount -t tmpfs -o size={size},mode=0700 tmpfs '{}'",
            at.display()
        ));
        Tmpfs(at.to_path_buf())
    }

    /// Fills it up with one file; returns the file.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling {}: {e}", path.display()),
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes `text` as `echo > file` does and asks for it to be committed
/// (`fsync`, where a metadata save reports its errors); the errno if refused.
fn save(path: &Path, text: &str) -> Result<(), i32> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| e.raw_os_error().unwrap())?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| e.raw_os_error().unwrap())
}

fn errno_of(r: std::io::Result<impl std::fmt::Debug>) -> i32 {
    match r {
        Ok(v) => panic!("succeeded: {v:?}"),
        Err(e) => e.raw_os_error().unwrap_or(0),
    }
}

#[test]
fn a_full_state_directory_refuses_every_metadata_change_and_loses_nothing() {
    if !require_root(
        "a_full_state_directory_refuses_every_metadata_change_and_loses_nothing",
        "mounts a small tmpfs as the state directory",
    ) {
        return;
    }
    let host = Host::new();
    let id = "12345678-aaaa-bbbb-cccc-1234567890ab";
    let store = host.path(&format!("claude/projects/-p/{id}.jsonl"));
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    // A conversation bigger than what will be left free.
    let conversation =
        sessionfs::transcript::testgen::claude(&sessionfs::transcript::testgen::Shape::new(300, 5));
    assert!(conversation.len() > 512 << 10, "{}", conversation.len());
    std::fs::write(&store, &conversation).unwrap();
    let agent = host.path("fake-claude");
    std::fs::write(&agent, "#!/bin/sh\nexec cat\n").unwrap();
    sh_ok(&format!("chmod +x '{}'", agent.display()));
    let claude_root = host.path("claude");
    let host = host
        .with_env("CLAUDE_CONFIG_DIR", claude_root.to_str().unwrap())
        .with_env("SESSIONFS_ENGINE_CLAUDE", agent.to_str().unwrap());
    let state = Tmpfs::mount(&host.path("state"), "4m");
    let m = host.mount("mnt");
    let live = "shell:full";
    let claude = format!("claude:{id}");
    let parked = "shell:parked";
    for key in [live, parked] {
        std::fs::create_dir(m.path(key)).unwrap();
    }
    save(&m.path(&format!("{live}/title")), "before\n").unwrap();
    sh_ok(&format!("mv {} {}", m.q(parked), m.q("archived/")));
    m.type_line(live, "echo ali''ve");
    m.wait_output_line(live, "alive");
    // `agent_state` moves on its own: let it settle before meta.json is kept.
    wait_for(10, "the shell to be idle", || {
        m.read(&format!("{live}/state")) == "idle\n"
    });
    std::fs::write(m.path(&format!("{claude}/ctl")), "open\n").unwrap();
    let live_master = master_of(&m, live);
    let claude_master = master_of(&m, &claude);

    let filler = state.fill();
    // A change appends one line to the metadata journal: a few may still
    // fit in the room its last page has left. Once one is refused, the
    // disk is full for every change.
    let mut fitted = 0;
    while save(
        &m.path(&format!("{live}/title")),
        &format!("fits {fitted}\n"),
    )
    .is_ok()
    {
        fitted += 1;
        assert!(fitted < 200, "title writes still fit after {fitted}");
    }
    let sidecar = host.path("state/sessionfs");
    let sidecar_before = sidecar_bytes(&sidecar);
    let meta_before = std::fs::read(m.path(&format!("{live}/meta.json"))).unwrap();
    let scroll_before = std::fs::read(m.path(&format!("{live}/scrollback"))).unwrap();
    let unchanged = |what: &str| {
        assert_eq!(
            sidecar_bytes(&sidecar),
            sidecar_before,
            "{what} changed the sidecar"
        );
        assert_eq!(
            String::from_utf8_lossy(&std::fs::read(m.path(&format!("{live}/meta.json"))).unwrap()),
            String::from_utf8_lossy(&meta_before),
            "{what} changed meta.json"
        );
        let error = status(&m, live)["error"].clone();
        assert!(
            error
                .as_str()
                .is_some_and(|e| e.contains("No space left on device")),
            "{what}: no reason in status.error: {error}"
        );
    };

    // Metadata writes, each way an editor or a script makes one.
    assert_eq!(
        save(&m.path(&format!("{live}/title")), "after\n"),
        Err(libc::ENOSPC)
    );
    unchanged("a title write");
    assert_eq!(
        save(&m.path(&format!("{live}/favourite")), "1\n"),
        Err(libc::ENOSPC)
    );
    unchanged("a favourite write");
    let mut doc: Value = serde_json::from_slice(&meta_before).unwrap();
    doc["project"] = "p".into();
    let scratch = m.path(&format!("{live}/.meta.json.tmp"));
    std::fs::write(&scratch, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    assert_eq!(
        errno_of(std::fs::rename(
            &scratch,
            m.path(&format!("{live}/meta.json"))
        )),
        libc::ENOSPC
    );
    unchanged("a meta.json save by rename");

    // Archive, both ways: refused, and the session is exactly as it was.
    assert_eq!(
        errno_of(std::fs::rename(
            m.path(live),
            m.path(&format!("archived/{live}"))
        )),
        libc::ENOSPC
    );
    unchanged("mv KEY archived/");
    assert_eq!(
        save(&m.path(&format!("{live}/archive")), "1\n"),
        Err(libc::ENOSPC)
    );
    unchanged("echo 1 > archive");
    let s = status(&m, live);
    assert_eq!(s["state"], "live", "{s}");
    assert_eq!(master_of(&m, live), live_master);
    assert!(alive(live_master));
    assert!(
        std::fs::read(m.path(&format!("{live}/scrollback"))).unwrap() == scroll_before,
        "the scrollback changed"
    );
    m.type_line(live, "echo still-ali''ve");
    m.wait_output_line(live, "still-alive");

    // Unarchive.
    assert_eq!(
        errno_of(std::fs::rename(
            m.path(&format!("archived/{parked}")),
            m.path(parked)
        )),
        libc::ENOSPC
    );
    assert!(m.path(&format!("archived/{parked}")).exists());
    assert_eq!(sidecar_bytes(&sidecar), sidecar_before);

    // A new session, either way.
    assert_eq!(
        errno_of(std::fs::create_dir(m.path("shell:new"))),
        libc::ENOSPC
    );
    assert_eq!(
        errno_of(std::fs::write(m.path("ctl"), "new shell title=x\n")),
        libc::ENOSPC
    );
    assert_eq!(sidecar_bytes(&sidecar), sidecar_before);
    assert!(!m.path("shell:new").exists());

    // A slot record and a hosted run's entry.
    let slot = m.path("slots/0f8fad5b-d9cb-469f-a165-70867728950e/1");
    assert_eq!(
        errno_of(std::fs::write(&slot, "{\"sessionId\":\"abc\"}\n")),
        libc::ENOSPC
    );
    assert_eq!(errno_of(std::fs::read(&slot)), libc::ENOENT);
    let entry = m.path("agent-transcripts/run-1.jsonl");
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&entry)
        .and_then(|mut f| f.write_all(b"{\"type\":\"text\",\"text\":\"hi\"}\n"));
    assert_eq!(errno_of(appended), libc::ENOSPC);
    assert!(std::fs::read(&entry).map_or(true, |b| b.is_empty()));

    // Room for the metadata but not for the copy of the conversation: the
    // archive is refused before the session is touched, and no partial
    // copy is left.
    let filler_len = filler.metadata().unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(filler_len - (256 << 10))
        .unwrap();
    assert_eq!(
        save(&m.path(&format!("{claude}/archive")), "1\n"),
        Err(libc::ENOSPC)
    );
    assert_eq!(sidecar_bytes(&sidecar), sidecar_before);
    assert_eq!(master_of(&m, &claude), claude_master);
    assert!(alive(claude_master));
    let why = status(&m, &claude)["error"].clone();
    assert!(
        why.as_str()
            .is_some_and(|e| e.contains("cannot keep a copy")),
        "{why}"
    );
    let copies = host.path("state/sessionfs/archived-transcripts");
    let left: Vec<_> = walk(&copies);
    assert!(left.is_empty(), "a partial copy is left: {left:?}");

    // With room again, everything goes through.
    std::fs::remove_file(&filler).unwrap();
    save(&m.path(&format!("{live}/title")), "after\n").unwrap();
    assert_eq!(m.read(&format!("{live}/title")), "after\n");
    std::fs::rename(m.path(live), m.path(&format!("archived/{live}"))).unwrap();
    // The archive is answered once the processes are told to end.
    wait_for(10, "the archived session's master to end", || {
        !alive(live_master) || is_zombie(live_master)
    });
    save(&m.path(&format!("{claude}/archive")), "1\n").unwrap();
    assert_eq!(
        std::fs::read(copies.join(format!("claude/{id}/{id}.jsonl"))).unwrap(),
        conversation
    );
    std::fs::rename(m.path(&format!("archived/{parked}")), m.path(parked)).unwrap();
    std::fs::create_dir(m.path("shell:new")).unwrap();
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn the_runtime_directory_removed_under_a_running_daemon() {
    let host = Host::new();
    let m = host.mount("mnt");
    let old = "shell:old";
    std::fs::create_dir(m.path(old)).unwrap();
    m.type_line(old, "echo bef''ore");
    m.wait_output_line(old, "before");
    let master = master_of(&m, old);
    std::fs::remove_dir_all(host.runtime_dir()).unwrap();

    // The daemon answers at once, and the live session goes on: its
    // connection does not need the socket's name.
    let t = Instant::now();
    let _ = m.read("status");
    assert!(t.elapsed() < Duration::from_secs(1));
    m.type_line(old, "echo aft''er");
    m.wait_output_line(old, "after");
    assert_eq!(master_of(&m, old), master);

    // A new session launches: the directories are made again.
    let new = "shell:new";
    std::fs::create_dir(m.path(new)).unwrap();
    m.type_line(new, "echo fre''sh");
    m.wait_output_line(new, "fresh");
    let s = status(&m, new);
    assert_eq!(s["outcome"], "LAUNCH", "{s}");
    assert!(Path::new(s["socket"].as_str().unwrap()).exists());

    // The old one stops cleanly, and opens again as a LAUNCH.
    std::fs::write(m.path(&format!("{old}/ctl")), "stop\n").unwrap();
    wait_for(20, "the old master to end", || !alive(master));
    assert_eq!(status(&m, old)["state"], "stopped");
    m.type_line(old, "echo aga''in");
    m.wait_output_line(old, "again");
    assert_eq!(status(&m, old)["outcome"], "LAUNCH");
    assert_eq!(host.masters().len(), 2);
}

#[test]
fn a_store_truncated_or_replaced_while_a_page_is_read() {
    let host = Host::new();
    let id = "99999999-8888-7777-6666-555555555555";
    let store = host.path(&format!("claude/projects/-p/{id}.jsonl"));
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    let shape = sessionfs::transcript::testgen::Shape::new(120, 3);
    let first = sessionfs::transcript::testgen::claude(&shape);
    // The same store with one prompt changed, byte for byte as long.
    let mut second = first.clone();
    let at = memchr_find(&first, b"prompt #1\"").unwrap();
    second[at + 8] = b'X';
    assert_eq!(first.len(), second.len());
    assert_ne!(first, second);
    std::fs::write(&store, &first).unwrap();
    let claude_root = host.path("claude");
    let host = host
        .with_env("CLAUDE_CONFIG_DIR", claude_root.to_str().unwrap())
        .with_env("AGENT_SESSIONS_HISTORY_PAGE_TURNS", "200");
    let m = host.mount("mnt");
    let page = m.path(&format!("claude:{id}/transcript/page-0"));
    let page_first = std::fs::read(&page).unwrap();
    assert!(page_first.len() > 8192, "{}", page_first.len());

    // A page is fixed at open: one being read stays whole and the same
    // whatever happens to the store meanwhile.
    let mut reader = std::fs::File::open(&page).unwrap();
    let mut head = vec![0u8; 4096];
    reader.read_exact(&mut head).unwrap();
    let replace = |with: &[u8]| {
        let tmp = store.with_extension("tmp");
        std::fs::write(&tmp, with).unwrap();
        std::fs::rename(&tmp, &store).unwrap();
    };
    replace(&second);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&store)
        .unwrap()
        .set_len(first.len() as u64 / 2)
        .unwrap();
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    head.extend_from_slice(&rest);
    assert!(head == page_first, "an open page changed under its reader");

    // A new open shows the store as it is now, even when a replacement is
    // exactly as long as what it replaced.
    std::fs::write(&store, &first).unwrap();
    assert!(std::fs::read(&page).unwrap() == page_first);
    replace(&second);
    let page_second = std::fs::read(&page).unwrap();
    assert!(
        String::from_utf8_lossy(&page_second).contains("prompt #X"),
        "the page still shows the replaced store"
    );

    // Readers while the store is replaced, truncated and grown again, over
    // and over: every open shows one whole version (or, caught while the
    // store was being grown back, the turns it held up to a line), or fails
    // with ESTALE (the file changed between indexing and reading); none
    // hangs.
    let half_len = first[..first.len() / 2]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let half = first[..half_len].to_vec();
    replace(&half);
    let page_half = std::fs::read(&page).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (page, stop) = (page.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    let got = std::fs::read(&page).map_err(|e| e.raw_os_error());
                    assert!(
                        t.elapsed() < Duration::from_secs(5),
                        "a page took {:?}",
                        t.elapsed()
                    );
                    seen.push(got);
                }
                seen
            })
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(2);
    let mut i = 0;
    while Instant::now() < until {
        match i % 4 {
            0 => replace(&second),
            1 => replace(&first),
            // Truncated to a line end: the first half.
            2 => std::fs::OpenOptions::new()
                .write(true)
                .open(&store)
                .unwrap()
                .set_len(half_len as u64)
                .unwrap(),
            // Grown back in place.
            _ => append_to(&store, &first[half_len..]),
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(7));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut stale = 0;
    let mut total = 0;
    for r in readers {
        for got in r.join().unwrap() {
            total += 1;
            match got {
                Ok(text) => assert!(
                    [&page_first, &page_second, &page_half].contains(&&text)
                        || grown_part_way(&text, &page_half, &page_first),
                    "a page that is none of the store's versions ({} bytes)",
                    text.len()
                ),
                Err(Some(libc::ESTALE)) => stale += 1,
                Err(e) => panic!("reading a page while its store changes: errno {e:?}"),
            }
        }
    }
    assert!(total > 0);
    eprintln!("{total} reads, {stale} ESTALE");
    // At rest, the page is the store's.
    std::fs::write(&store, &first).unwrap();
    assert!(std::fs::read(&page).unwrap() == page_first);
    let _ = m.read("status");
}

#[test]
fn a_stopped_master_is_still_ended_by_stop() {
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:frozen";
    std::fs::create_dir(m.path(key)).unwrap();
    m.type_line(key, "echo ru''nning");
    m.wait_output_line(key, "running");
    let s = status(&m, key);
    let master = s["master_pid"].as_u64().unwrap() as u32;
    let agent = s["agent_pid"].as_u64().unwrap() as u32;
    let socket = PathBuf::from(s["socket"].as_str().unwrap());
    let signal = |pid: u32, sig| {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap()
    };
    signal(master, nix::sys::signal::Signal::SIGSTOP);
    // Stopped processes shrug off TERM and HUP; `stop` must still end them
    // (with KILL after its grace period) and answer.
    let ctl = m.path(&format!("{key}/ctl"));
    let stopper = std::thread::spawn(move || {
        let t = Instant::now();
        (std::fs::write(&ctl, "stop\n"), t.elapsed())
    });
    // Meanwhile the daemon answers everything else at once.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let t = Instant::now();
        let _ = m.read("status");
        let _ = status(&m, key);
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "status took {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (written, took) = stopper.join().unwrap();
    written.expect("stop of a stopped master");
    assert!(took < Duration::from_secs(15), "stop took {took:?}");
    wait_for(10, "the master and the agent to be gone", || {
        !alive(master) && !alive(agent)
    });
    assert!(!socket.exists(), "the socket is left behind");
    assert_eq!(status(&m, key)["state"], "stopped");
    // And it starts again cleanly.
    m.type_line(key, "echo ag''ain");
    m.wait_output_line(key, "again");
    assert_eq!(status(&m, key)["outcome"], "LAUNCH");
}
