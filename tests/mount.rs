//! The core mount through a real kernel FUSE mount, with real dtach, bash
//! and the ordinary tools as clients.

mod common;

use common::*;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;

#[test]
fn input_reaches_the_shell_and_output_shows_in_scrollback_and_screen() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:build")));
    let listing = sh_ok(&format!("ls {}", m.q("shell:build")));
    for f in [
        "ctl",
        "input",
        "meta.json",
        "screen",
        "scrollback",
        "status",
    ] {
        assert!(listing.lines().any(|l| l == f), "{f} missing in {listing}");
    }
    assert!(sh_ok(&format!("ls {}", m.q("")))
        .lines()
        .any(|l| l == "shell:build"));
    sh_ok(&format!(
        "echo 'echo sum-$((6*7))' > {}",
        m.q("shell:build/input")
    ));
    m.wait_output("shell:build", "sum-42");
    wait_for(20, "sum-42 on the screen", || {
        m.read("shell:build/screen").contains("sum-42")
    });
    let status = m.json("shell:build/status");
    assert_eq!(status["state"], "live");
    assert_eq!(status["outcome"], "LAUNCH");
    assert!(alive(status["master_pid"].as_u64().unwrap() as u32));
    let meta = m.json("shell:build/meta.json");
    assert_eq!(meta["key"], "shell:build");
    assert_eq!(meta["engine"], "shell");
    assert_eq!(meta["state"], "live");
    let created = utc_ms(&meta["created"]);
    assert!(created <= utc_ms(&meta["last_activity"]));
    // Only one master, and the session is in the root status.
    assert_eq!(host.masters().len(), 1);
    let root = m.json("status");
    assert_eq!(root["live"][0], "shell:build");
    assert!(utc_ms(&root["started"]) <= created);
}

/// A time as meta.json and status write it, `2026-01-02T03:04:05.678Z`
/// exactly (UTC, milliseconds), as milliseconds since the epoch.
fn utc_ms(v: &serde_json::Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("{v} is not a string"));
    let shape = s.len() == 24 && s.as_bytes()[19] == b'.' && s.ends_with('Z');
    assert!(shape, "{s} is not YYYY-MM-DDTHH:MM:SS.mmmZ");
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

#[test]
fn the_session_survives_a_daemon_restart_and_reattaches() {
    let host = Host::new();
    let mut first = host.mount("one");
    sh_ok(&format!("mkdir {}", first.q("shell:keep")));
    first.type_line("shell:keep", "echo first-life");
    first.wait_output("shell:keep", "first-life");
    let master = first.json("shell:keep/status")["master_pid"]
        .as_u64()
        .unwrap();
    first.kill9();
    assert!(alive(master as u32), "the master died with the daemon");

    let second = host.mount("two");
    let status = second.json("shell:keep/status");
    assert_eq!(status["outcome"], "ATTACH");
    assert_eq!(status["state"], "live");
    assert_eq!(status["master_pid"].as_u64().unwrap(), master);
    second.type_line("shell:keep", "echo second-life");
    second.wait_output("shell:keep", "second-life");
    assert_eq!(host.masters(), vec![master as u32]);
}

/// A daemon that joins a master it did not launch asks the program to draw
/// its screen again, as `dtach -a` would, so `screen` shows it at once
/// after a restart, clean or not; the repaint is not the session's activity.
#[test]
fn after_a_restart_screen_shows_the_program_without_a_redraw() {
    let host = Host::new();
    // vim's empty buffer: a column of `~` (a repaint clears the file name
    // from the last line).
    let vim_shown = |screen: &str| screen.lines().filter(|l| l.starts_with('~')).count() >= 3;
    for crash in [true, false] {
        let key = if crash {
            "shell:vim-crash"
        } else {
            "shell:vim-clean"
        };
        let screen = format!("{key}/screen");
        let mut m = host.mount("mnt");
        m.live_shell(key);
        m.type_line(key, "vim -u NONE f.txt");
        wait_for(20, "vim's screen", || {
            let shown = m.read(&screen);
            vim_shown(&shown) && shown.contains("f.txt")
        });
        let before = utc_ms(&m.json(&format!("{key}/meta.json"))["last_activity"]);
        m.end(crash);
        drop(m);
        let m = host.mount("mnt");
        assert_eq!(m.json(&format!("{key}/status"))["outcome"], "ATTACH");
        wait_for(10, "vim's screen after the restart", || {
            vim_shown(&m.read(&screen))
        });
        let after = utc_ms(&m.json(&format!("{key}/meta.json"))["last_activity"]);
        if crash {
            assert!(
                after <= before,
                "{key}: the repaint moved {before} to {after}"
            );
        } else {
            assert_eq!(after, before, "{key}: the repaint is not activity");
        }
        m.type_line(key, ":q!");
    }
}

#[test]
fn a_killed_master_leaves_a_stale_socket_and_the_next_open_launches_cleanly() {
    let host = Host::new();
    let m = host.mount("mnt");
    m.live_shell("shell:crash");
    let status = m.json("shell:crash/status");
    let master = status["master_pid"].as_u64().unwrap() as u32;
    let socket = status["socket"].as_str().unwrap().to_string();
    sh_ok(&format!("kill -9 {master}"));
    wait_for(20, "the session to stop", || {
        m.json("shell:crash/status")["state"] == "stopped"
    });
    assert!(
        std::path::Path::new(&socket).exists(),
        "SIGKILL leaves the socket behind"
    );

    m.type_line("shell:crash", "echo after");
    m.wait_output("shell:crash", "after");
    let status = m.json("shell:crash/status");
    assert_eq!(status["outcome"], "LAUNCH");
    let new_master = status["master_pid"].as_u64().unwrap() as u32;
    assert_ne!(new_master, master);
    assert_eq!(host.masters(), vec![new_master]);
}

/// The paths a process holds open.
fn open_files(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_master_holds_the_lock_and_the_agent_and_daemon_do_not() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:lock")));
    // A child of the agent, started before we look.
    let child = m.start_child("shell:lock");
    let status = m.json("shell:lock/status");
    let lock = status["lock"].as_str().unwrap().to_string();
    let master = status["master_pid"].as_u64().unwrap() as u32;
    let agent = status["agent_pid"].as_u64().unwrap() as u32;
    assert!(
        open_files(master).contains(&lock),
        "master does not hold {lock}"
    );
    assert!(
        !open_files(agent).contains(&lock),
        "the agent holds the lock"
    );
    assert!(
        !open_files(m.pid()).contains(&lock),
        "the daemon kept its copy"
    );
    assert!(alive(child));
    assert!(
        !open_files(child).contains(&lock),
        "the agent's child holds the lock"
    );
    // And flock itself agrees: the lock is taken.
    let probe = sh(&format!("flock -n '{lock}' true"));
    assert!(
        !probe.status.success(),
        "the lock is free while the master lives"
    );
}

#[test]
fn two_daemons_racing_to_open_one_session_start_exactly_one_master() {
    let host = Host::new();
    let a = host.mount("a");
    let b = host.mount("b");
    sh_ok(&format!("mkdir {}", a.q("shell:race")));
    wait_for(
        20,
        "the new session to show through the second mount",
        || b.path("shell:race").exists(),
    );
    // `echo wN` plus a newline is one 8-byte dtach packet, so writers through
    // different daemons cannot interleave inside one line (longer writes
    // from two clients can: the master reads one packet at a time from each).
    let writers: Vec<_> = (0..10)
        .map(|i| {
            let target = if i % 2 == 0 {
                a.q("shell:race/input")
            } else {
                b.q("shell:race/input")
            };
            std::thread::spawn(move || sh(&format!("echo 'echo w{i}' > {target}")))
        })
        .collect();
    let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for (i, out) in results.iter().enumerate() {
        assert!(
            out.status.success(),
            "writer {i} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(host.masters().len(), 1, "more than one master");
    let launches =
        a.log_text().matches(": Launch").count() + b.log_text().matches(": Launch").count();
    assert_eq!(launches, 1, "exactly one LAUNCH across both daemons");
    let master_a = a.json("shell:race/status")["master_pid"].clone();
    let master_b = b.json("shell:race/status")["master_pid"].clone();
    assert!(master_a.is_u64());
    assert_eq!(master_a, master_b);
    for i in 0..10 {
        let mount = if i % 2 == 0 { &a } else { &b };
        mount.wait_output_line("shell:race", &format!("w{i}"));
    }
}

#[test]
fn concurrent_writes_through_one_mount_arrive_whole() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:many")));
    sh_ok(&format!("echo open > {}", m.q("shell:many/ctl")));
    // No echo and no prompt: input typed ahead while a command runs would
    // otherwise be echoed into the middle of its output line.
    m.type_line("shell:many", "stty -echo; PS1=''; echo quiet-now");
    m.wait_output_line("shell:many", "quiet-now");
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let target = m.q("shell:many/input");
            std::thread::spawn(move || {
                sh_ok(&format!(
                    "echo 'echo a-much-longer-line-from-writer-{i}-that-spans-packets' > {target}"
                ))
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for i in 0..8 {
        m.wait_output_line(
            "shell:many",
            &format!("a-much-longer-line-from-writer-{i}-that-spans-packets"),
        );
    }
}

#[test]
fn sigterm_and_fusermount_unmount_cleanly_and_sessions_keep_running() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:stay")));
    m.type_line("shell:stay", "echo up");
    m.wait_output("shell:stay", "up");
    let master = m.json("shell:stay/status")["master_pid"].as_u64().unwrap() as u32;
    assert_eq!(m.terminate(), Some(0));
    assert!(!is_mounted(&m.mnt));
    assert!(alive(master));

    let mut again = host.mount("mnt");
    assert_eq!(
        again.json("shell:stay/status")["master_pid"]
            .as_u64()
            .unwrap() as u32,
        master
    );
    sh_ok(&format!("fusermount3 -u '{}'", again.mnt.display()));
    assert_eq!(again.wait_exit(20), Some(0));
    assert!(!is_mounted(&again.mnt));
    assert!(alive(master));
}

#[test]
fn ctl_resizes_redraws_stops_and_opens() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:ctl")));
    let ctl = m.q("shell:ctl/ctl");
    sh_ok(&format!("echo open > {ctl}"));
    assert_eq!(m.json("shell:ctl/status")["state"], "live");
    sh_ok(&format!("echo 'resize 100x30' > {ctl}"));
    assert_eq!(m.json("shell:ctl/status")["size"], "100x30");
    m.type_line("shell:ctl", "echo size=$(stty size)");
    m.wait_output("shell:ctl", "size=30 100");
    sh_ok(&format!("echo redraw > {ctl}"));
    let master = m.json("shell:ctl/status")["master_pid"].as_u64().unwrap() as u32;
    sh_ok(&format!("echo stop > {ctl}"));
    wait_for(20, "the master to end", || !alive(master));
    assert_eq!(m.json("shell:ctl/status")["state"], "stopped");
    let socket = m.json("shell:ctl/status")["socket"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for(20, "the socket to go", || {
        !std::path::Path::new(&socket).exists()
    });
    sh_ok(&format!("echo open > {ctl}"));
    assert_eq!(m.json("shell:ctl/status")["outcome"], "LAUNCH");
}

#[test]
fn bad_input_gets_a_clear_errno_and_a_reason_and_changes_nothing() {
    let host = Host::new();
    let m = host.mount("mnt");
    let long = format!("shell:{}", "a".repeat(200));
    for bad in [
        "shell:a b",
        "shell:..",
        "shell:\x01x",
        long.as_str(),
        "nocolon",
        "nosuch:x",
        ":x",
    ] {
        let out = sh(&format!("mkdir {}", m.q(bad)));
        assert!(!out.status.success(), "mkdir {bad:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Invalid argument"), "mkdir {bad:?}: {err}");
    }
    assert!(
        m.log_text().contains("must match"),
        "the log names the reason"
    );
    let before = sh_ok(&format!("ls {}", m.q("")));
    assert!(
        !before.contains(':'),
        "a refused mkdir left a session: {before}"
    );

    sh_ok(&format!("mkdir {}", m.q("shell:ok")));
    let out = sh(&format!("mkdir {}", m.q("shell:ok")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("File exists"));
    for ro in ["status", "screen", "scrollback"] {
        let out = sh(&format!("echo x > {}", m.q(&format!("shell:ok/{ro}"))));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "{ro}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Write-only (0200): root alone passes the mode check, and reads nothing.
    let out = sh(&format!("cat {}", m.q("shell:ok/input")));
    assert!(out.status.success() && out.stdout.is_empty());

    let out = sh(&format!("echo frobnicate > {}", m.q("shell:ok/ctl")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid argument"));
    let status = m.json("shell:ok/status");
    assert!(
        status["error"].as_str().unwrap().contains("frobnicate"),
        "{status}"
    );
    assert_eq!(
        status["state"], "stopped",
        "a refused command starts nothing"
    );
    let out = sh(&format!("echo 'resize 0x0' > {}", m.q("shell:ok/ctl")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid argument"));
    assert_eq!(m.json("shell:ok/status")["size"], "120x40");

    let out = sh(&format!("rmdir {}", m.q("shell:ok")));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"));
    let out = sh(&format!("rm -rf {}", m.q("shell:ok")));
    assert!(!out.status.success());
    assert!(m.path("shell:ok/status").exists());
    assert!(host.masters().is_empty());
}

/// Claude takes only a UUID as a new conversation's `--session-id`: a
/// `claude:` session made by `mkdir` must be named by one, or it could never
/// start.
#[test]
fn mkdir_of_a_claude_session_takes_only_a_uuid() {
    let host = Host::new();
    let m = host.mount("mnt");
    for bad in [
        "claude:new1",
        "claude:0b7c-11.x_y",
        "claude:aaaaaaaabbbb4cccc8dddeeeeeeeeeeee",
        "claude:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeeg",
        "claude:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee0",
    ] {
        let out = sh(&format!("mkdir {}", m.q(bad)));
        assert!(!out.status.success(), "mkdir {bad:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Invalid argument"), "mkdir {bad:?}: {err}");
        assert!(!m.path(bad).exists(), "{bad}");
        let reason = m.json("status")["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(reason.contains("UUID"), "mkdir {bad:?}: {reason}");
    }
    for good in [
        "claude:aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
        "claude:AAAAAAAA-BBBB-1CCC-8DDD-EEEEEEEEEEEE",
        "codex:new1",
        "shell:new1",
    ] {
        sh_ok(&format!("mkdir {}", m.q(good)));
        assert!(m.path(good).is_dir(), "{good}");
    }
    // The root `ctl` makes one.
    sh_ok(&format!("echo new claude > {}", m.q("ctl")));
    let listing = m.json("sessions.json");
    let made: Vec<&str> = listing["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["key"].as_str())
        .filter(|k| k.starts_with("claude:") && k.len() == "claude:".len() + 36)
        .collect();
    assert_eq!(made.len(), 3, "{listing}");
}

#[test]
fn input_to_a_session_whose_lock_is_held_elsewhere_is_ebusy() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:held")));
    let lock = host.path("run/sessionfs/locks/shell:held.lock");
    // Someone else holds the lock and serves no socket.
    // In a group of its own, so that its `sleep` child goes with it; no
    // output pipe of the test's is left open behind it.
    let mut holder = std::process::Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "300"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for(20, "the lock to be taken", || {
        !sh(&format!("flock -n '{}' true", lock.display()))
            .status
            .success()
    });
    let out = sh(&format!("echo hi > {}", m.q("shell:held/input")));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Device or resource busy"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = m.json("shell:held/status");
    assert_eq!(status["state"], "busy");
    assert_eq!(status["outcome"], "BUSY");
    assert!(status["error"].as_str().unwrap().contains("locked"));
    assert!(host.masters().is_empty());
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(holder.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    holder.wait().unwrap();
    m.type_line("shell:held", "echo free");
    m.wait_output("shell:held", "free");
    assert_eq!(m.json("shell:held/status")["outcome"], "LAUNCH");
}

#[test]
fn inode_numbers_are_stable() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:ino")));
    let first = std::fs::metadata(m.path("shell:ino/meta.json"))
        .unwrap()
        .ino();
    sh_ok(&format!("mkdir {}", m.q("shell:other")));
    sh_ok(&format!("ls -l {} > /dev/null", m.q("")));
    assert_eq!(
        std::fs::metadata(m.path("shell:ino/meta.json"))
            .unwrap()
            .ino(),
        first
    );
    assert_ne!(
        std::fs::metadata(m.path("shell:other/meta.json"))
            .unwrap()
            .ino(),
        first
    );

    // The same numbers from a new daemon, asked in another order.
    let guid = "0b5e1c2a-6f1d-4c7e-9a53-2f8d7c6b5a41";
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"s1\"}}' > {}",
        m.q(&format!("slots/{guid}/1"))
    ));
    let paths = [
        "shell:ino",
        "shell:ino/meta.json",
        "shell:ino/scrollback",
        "shell:other/title",
        "status",
        &format!("slots/{guid}"),
        &format!("slots/{guid}/1"),
    ];
    let stat_all = |m: &Mount, order: &mut dyn Iterator<Item = &&str>| -> Vec<(String, String)> {
        let mut numbers: Vec<(String, String)> = order
            .map(|p| {
                (
                    p.to_string(),
                    sh_ok(&format!("stat -c %i {}", m.q(p))).trim().to_string(),
                )
            })
            .collect();
        numbers.sort();
        numbers
    };
    let before = stat_all(&m, &mut paths.iter());
    m.terminate();
    let again = host.mount("mnt");
    let after = stat_all(&again, &mut paths.iter().rev());
    assert_eq!(before, after);
}

#[test]
fn the_fstab_form_mounts_in_the_background_and_unmounts_with_umount() {
    if !require_root(
        "the_fstab_form_mounts_in_the_background_and_unmounts_with_umount",
        "mount(8) with -t fuse",
    ) {
        return;
    }
    let host = Host::new();
    let mnt = host.path("fstab");
    std::fs::create_dir_all(&mnt).unwrap();
    let out = std::process::Command::new("mount")
        .args(["-t", "fuse"])
        .arg(format!("{}#mount", env!("CARGO_BIN_EXE_sessionfs")))
        .arg(&mnt)
        .args(["-o", "nosuid,nodev,background"])
        .env("HOME", host.path("home"))
        .env("XDG_STATE_HOME", host.path("state"))
        .env("XDG_RUNTIME_DIR", host.path("run"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mount failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `background` returns once the mount is ready.
    assert!(mnt.join("status").exists());
    assert!(is_mounted(&mnt));
    sh_ok(&format!("umount '{}'", mnt.display()));
    assert!(!is_mounted(&mnt));
    assert!(host.path("state/sessionfs/sessionfs.log").exists());
}

/// Runs `sessionfs mount ARGS` with the host's directories; returns its output.
fn mount_command(host: &Host, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_sessionfs"))
        .arg("mount")
        .args(args)
        .env("HOME", host.path("home"))
        .env("XDG_STATE_HOME", host.path("state"))
        .env("XDG_RUNTIME_DIR", host.path("run"))
        .output()
        .unwrap()
}

fn mount_rows(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some(&*path.to_string_lossy()))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_mount_is_typed_and_refuses_to_stack_or_to_hide_files() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    let rows = mount_rows(&m.mnt);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let fields: Vec<&str> = rows[0].split(' ').collect();
    assert_eq!((fields[0], fields[2]), ("sessionfs", "fuse.sessionfs"));
    let found = sh_ok(&format!(
        "findmnt -n -t fuse.sessionfs -o TARGET {}",
        m.q("")
    ));
    assert_eq!(found.trim(), m.mnt.to_string_lossy());

    // A second daemon on the same directory is refused, and the first serves on.
    let out = mount_command(&host, &[m.mnt.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is already a sessionfs mount"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(mount_rows(&m.mnt).len(), 1);
    assert!(m.json("status")["pid"].is_u64());

    // A directory with files in it is refused unless -o nonempty.
    let full = host.path("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("notes.txt"), "mine").unwrap();
    let out = mount_command(&host, &[full.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not empty") && err.contains("-o nonempty"),
        "{err}"
    );
    assert!(!is_mounted(&full));
    let out = mount_command(
        &host,
        &[full.to_str().unwrap(), "-o", "nonempty,background"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(full.join("status").exists());
    sh_ok(&format!("fusermount3 -u '{}'", full.display()));
    assert_eq!(
        std::fs::read_to_string(full.join("notes.txt")).unwrap(),
        "mine"
    );

    // A normal unmount logs no warning.
    sh_ok(&format!("fusermount3 -u {}", m.q("")));
    assert_eq!(m.wait_exit(20), Some(0));
    let log = m.log_text();
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "{log}");

    // A mount whose daemon was killed is named as such.
    let mut dead = host.mount("dead");
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(dead.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    wait_for(10, "the killed daemon's mount to fail", || {
        std::fs::metadata(&dead.mnt)
            .err()
            .and_then(|e| e.raw_os_error())
            == Some(libc::ENOTCONN)
    });
    let out = mount_command(&host, &[dead.mnt.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a mount whose daemon is gone"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    dead.kill9();
}

/// A bad setting stops the daemon at start with one line naming it; it is
/// never replaced by the default.
#[test]
fn a_bad_setting_is_refused_at_start() {
    let host = Host::new();
    let mnt = host.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    for (name, value) in [
        ("AGENT_SESSIONS_PROMPT_TIMEOUT", "abc"),
        ("AGENT_SESSIONS_PROMPT_TIMEOUT", "0"),
        ("AGENT_SESSIONS_SCROLLBACK_BYTES", "8M"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sessionfs"))
            .arg("mount")
            .arg(&mnt)
            .env("HOME", host.path("home"))
            .env("XDG_STATE_HOME", host.path("state"))
            .env("XDG_RUNTIME_DIR", host.path("run"))
            .env(name, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}={value} was taken");
        assert!(err.contains(name) && err.contains(value), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!is_mounted(&mnt));
    }
}

/// A program that cannot start fails the write that launched it with its
/// errno and its reason in `status`, without waiting out the launch's
/// deadline and without taking bytes it cannot deliver; one that ends at
/// once does not hold the write either.
#[test]
fn a_program_that_cannot_start_fails_input_with_its_reason_at_once() {
    let missing = Host::new();
    let program = missing.path("no-such-program").display().to_string();
    let missing = missing.with_env("SESSIONFS_ENGINE_CLAUDE", &program);
    let m = missing.mount("mnt");
    for round in 0..3 {
        let key = format!("claude:00000000-0000-4000-8000-00000000000{round}");
        sh_ok(&format!("mkdir {}", m.q(&key)));
        let input = m.path(&format!("{key}/input"));
        let started = std::time::Instant::now();
        let err = std::fs::OpenOptions::new()
            .write(true)
            .open(&input)
            .and_then(|mut f| std::io::Write::write(&mut f, b"hi\n"))
            .expect_err("a write to a program that cannot start");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "round {round}: {:?}",
            started.elapsed()
        );
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ENOENT),
            "round {round}: {err}"
        );
        let status = m.json(&format!("{key}/status"));
        let reason = status["error"].as_str().unwrap_or_default();
        assert!(
            reason.contains("cannot run") && reason.contains("no-such-program"),
            "round {round}: {status}"
        );
    }

    let ends = Host::new().with_env("SESSIONFS_ENGINE_CLAUDE", "/bin/true");
    let m = ends.mount("mnt");
    for round in 0..3 {
        let key = format!("claude:00000000-0000-4000-8000-0000000000b{round}");
        sh_ok(&format!("mkdir {}", m.q(&key)));
        let started = std::time::Instant::now();
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(m.path(&format!("{key}/input")))
            .and_then(|mut f| std::io::Write::write(&mut f, b"hi\n"));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "round {round}: {:?}",
            started.elapsed()
        );
    }
}

/// A person running `sessionfs mount` in a terminal hears once that the
/// mount is ready (where, how many sessions, what to try) and once that it
/// is gone, however it went: a signal or `fusermount3 -u`.
#[test]
fn the_mount_says_when_it_is_ready_and_when_it_is_gone() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    let mnt = m.mnt.display().to_string();
    wait_for(10, "the ready line", || m.out_text().contains("ready at"));
    let out = m.out_text();
    assert_eq!(
        out.lines().next().unwrap(),
        format!(
            "sessionfs: ready at {mnt} with 0 sessions; try `ls {mnt}`, or `mkdir {mnt}/shell:demo && echo 'echo hi' > {mnt}/shell:demo/input && tail -f {mnt}/shell:demo/scrollback`"
        )
    );
    // The command it suggests works as written: the shell's answer shows.
    let suggested = out
        .split("or `")
        .nth(1)
        .unwrap()
        .trim_end()
        .trim_end_matches('`');
    let (make, follow) = suggested.rsplit_once(" && ").unwrap();
    assert_eq!(follow, format!("tail -f {mnt}/shell:demo/scrollback"));
    sh_ok(make);
    m.wait_output_line("shell:demo", "hi");
    sh_ok(&format!("mkdir {}", m.q("shell:second")));
    let out_before = m.out_text();
    assert_eq!(m.terminate(), Some(0));
    let out = m.out_text();
    let added: Vec<&str> = out[out_before.len()..].lines().collect();
    assert_eq!(
        added,
        [format!(
            "sessionfs: unmounted {mnt}; the sessions keep running, and the next mount reattaches them"
        )]
    );

    let mut again = host.mount("mnt");
    wait_for(10, "the ready line", || {
        again.out_text().contains("ready at")
    });
    assert!(
        again
            .out_text()
            .starts_with(&format!("sessionfs: ready at {mnt} with 2 sessions;")),
        "{}",
        again.out_text()
    );
    sh_ok(&format!("fusermount3 -u {mnt}"));
    assert_eq!(again.wait_exit(20), Some(0));
    assert_eq!(
        again
            .out_text()
            .lines()
            .filter(|l| l.contains("unmounted"))
            .count(),
        1,
        "{}",
        again.out_text()
    );
}

/// A daemon stopped the moment its mount appears still ends: nothing in
/// it waits on its own mount (a thread of the daemon asking the mount
/// something as the daemon exits would wait for ever, and the daemon with
/// it).
#[test]
fn a_daemon_stopped_as_soon_as_it_mounts_ends_every_time() {
    let host = Host::new();
    for round in 0..20 {
        let mut m = host.mount("mnt");
        let pid = m.pid();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        assert_eq!(m.wait_exit(10), Some(0), "round {round}: {}", m.log_text());
        assert!(!is_mounted(&m.mnt), "round {round}");
    }
}

/// The same with the mount slow to answer (each lookup of `status` takes
/// 3 s): a stop that comes while the kernel waits on the daemon still ends
/// the daemon, because none of its own threads is among the waiters.
#[test]
fn a_daemon_stopped_while_its_mount_is_slow_ends() {
    let host = Host::new();
    let mnt = host.path("slow");
    std::fs::create_dir_all(&mnt).unwrap();
    let log = host.path("slow.log");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sessionfs"));
    host.state_env(cmd.arg("mount").arg(&mnt))
        .env("SESSIONFS_TEST_PAUSE", "lookup:status:3000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut child = cmd.spawn().unwrap();
    wait_for(20, "the mount to appear", || is_mounted(&mnt));
    // A pause, not a wait on a condition: what is looked for is that no
    // thread of the daemon is inside the kernel's wait, which nothing
    // outside can see happen; 300 ms lets one that would be get there.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let ended = wait_until(15, || matches!(child.try_wait(), Ok(Some(_))));
    if !ended {
        // Unstick it: abort the connection, so the test leaves nothing behind.
        let _ = child.kill();
    }
    assert!(
        ended,
        "the daemon did not end after SIGTERM; its log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// `scripts/run` as a new user meets it: a first line that the first build
/// takes a while, the build's own progress, then the ready line from a
/// real mount, and one plain line at Ctrl-C. The build is a stand-in
/// `cargo` (a release build takes minutes) that prints progress and puts
/// this test build's binary where the release one goes.
#[test]
fn scripts_run_says_what_it_builds_and_when_the_mount_is_ready() {
    let host = Host::new();
    let bin = host.path("bin");
    let target = host.path("target");
    std::fs::create_dir_all(&bin).unwrap();
    let real_cargo = std::process::Command::new("bash")
        .args(["-c", "command -v cargo"])
        .output()
        .unwrap();
    let real_cargo = String::from_utf8_lossy(&real_cargo.stdout)
        .trim()
        .to_string();
    assert!(!real_cargo.is_empty(), "cargo on PATH");
    // rustc stays the real one (scripts/setup checks its version).
    let rustc = std::process::Command::new("bash")
        .args(["-c", "command -v rustc"])
        .output()
        .unwrap();
    let rustc = String::from_utf8_lossy(&rustc.stdout).trim().to_string();
    std::os::unix::fs::symlink(&rustc, bin.join("rustc")).unwrap();
    std::fs::write(
        bin.join("cargo"),
        format!(
            "#!/bin/bash\nset -e\n[ \"$1\" = build ] || exec {real_cargo} \"$@\"\n\
             echo '   Compiling sessionfs v0 (stand-in)' >&2\n\
             mkdir -p \"$CARGO_TARGET_DIR/release\"\n\
             cp {} \"$CARGO_TARGET_DIR/release/sessionfs\"\n\
             echo '    Finished `release` profile' >&2\n",
            env!("CARGO_BIN_EXE_sessionfs")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("cargo"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mnt = host.path("sessions");
    let out = host.path("run.out");
    let err = host.path("run.err");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut cmd = std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/run"),
    );
    host.state_env(cmd.arg(&mnt))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", &target)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let mut child = cmd.spawn().unwrap();
    let text = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    wait_for(60, "the ready line", || text(&out).contains("ready at"));
    let said = text(&err);
    let first = said
        .lines()
        .find(|l| l.starts_with("run: "))
        .unwrap_or_default();
    assert_eq!(
        first,
        "run: building sessionfs (release); the first build takes a few minutes"
    );
    assert!(
        said.contains("Compiling sessionfs"),
        "the build's progress shows: {said}"
    );
    assert!(
        text(&out).starts_with(&format!(
            "sessionfs: ready at {} with 0 sessions;",
            mnt.display()
        )),
        "{}",
        text(&out)
    );
    assert!(is_mounted(&mnt));
    // Ctrl-C: SIGINT to the foreground job.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    assert!(wait_until(20, || matches!(child.try_wait(), Ok(Some(_)))));
    assert_eq!(
        text(&out).lines().last().unwrap_or_default(),
        format!(
            "sessionfs: unmounted {}; the sessions keep running, and the next mount reattaches them",
            mnt.display()
        )
    );
    assert!(!is_mounted(&mnt));
}
