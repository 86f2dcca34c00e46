//! Hostile input through a real mount: huge offsets and sizes, a scratch
//! file written far past its cap, a screen too small for the emulator, and
//! panics inside the daemon. It answers each with an errno and lives on.

mod common;

use common::*;
use serde_json::Value;

const WORLD: &str = "0b5d4e6f-1a2b-4c3d-8e9f-001122334455";

/// `truncate -s 1E` and `os.pwrite` at each huge offset on each path: the
/// errno name of each call ("ok" when it succeeded), as JSON
/// `{path: {"truncate": .., "2^33": .., ..}}`.
fn hostile_writes(paths: &[String], data: &str) -> Value {
    let script = r#"
import errno, json, os, subprocess, sys
data = sys.argv[1].encode()
out = {}
for p in sys.argv[2:]:
    r = {}
    t = subprocess.run(["truncate", "-s", "1E", p], capture_output=True, text=True)
    r["truncate"] = "ok" if t.returncode == 0 else t.stderr.strip().rsplit(": ", 1)[-1]
    for n in (33, 40, 62):
        fd = os.open(p, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 1 << n)
            r["2^%d" % n] = "ok"
        except OSError as e:
            r["2^%d" % n] = errno.errorcode[e.errno]
        finally:
            try:
                os.close(fd)
            except OSError as e:
                r["close 2^%d" % n] = errno.errorcode[e.errno]
    out[p] = r
print(json.dumps(out))
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", script, data]).args(paths);
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The daemon's peak resident memory, in KiB.
fn vm_hwm_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

fn assert_alive(m: &Mount) {
    assert!(m.json("status")["pid"].is_u64(), "the daemon answers");
}

#[test]
fn huge_offsets_and_sizes_are_efbig_on_every_file_with_content() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:cap")));
    sh_ok(&format!("echo 'a title' > {}", m.q("shell:cap/title")));
    sh_ok(&format!("echo proj > {}", m.q("shell:cap/project")));
    sh_ok(&format!("printf 'hello' > {}", m.q("shell:cap/notes.tmp")));
    let slot = format!("slots/{WORLD}/1");
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"s-1\",\"name\":\"n\"}}' > {}",
        m.q(&slot)
    ));
    sh_ok(&format!(
        "echo '{{\"type\":\"start\"}}' >> {}",
        m.q("agent-transcripts/run-1.jsonl")
    ));
    let files = [
        "shell:cap/meta.json",
        "shell:cap/title",
        "shell:cap/project",
        "shell:cap/favourite",
        "shell:cap/archive",
        "shell:cap/notes.tmp",
        &slot,
        "agent-transcripts/run-1.jsonl",
    ];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(m.path(f)).unwrap())
        .collect();
    let paths: Vec<String> = files
        .iter()
        .map(|f| m.path(f).display().to_string())
        .collect();
    // A complete line, so nothing waits for the rest of it at close.
    let results = hostile_writes(&paths, "{\"type\":\"x\"}\n");
    for (file, path) in files.iter().zip(&paths) {
        let r = &results[path];
        assert_eq!(
            r["truncate"], "File too large",
            "truncate -s 1E {file}: {r}"
        );
        for n in ["2^33", "2^40", "2^62"] {
            assert_eq!(r[n], "EFBIG", "pwrite at {n} to {file}: {r}");
        }
        assert!(r["close 2^33"].is_null(), "close after {file}: {r}");
    }
    assert_alive(&m);
    for (file, old) in files.iter().zip(&before) {
        assert_eq!(&std::fs::read(m.path(file)).unwrap(), old, "{file} changed");
    }
    let status = m.json("shell:cap/status");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("over its limit")),
        "{status}"
    );
    let log = m.log_text();
    assert!(log.contains("over its limit"), "refusals are logged");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn streams_ignore_offsets_and_take_no_size() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:st")));
    sh_ok(&format!("echo 'kept' > {}", m.q("shell:st/title")));
    sh_ok(&format!("echo open > {}", m.q("shell:st/ctl")));
    let meta = |m: &Mount| {
        let mut v = m.json("shell:st/meta.json");
        for moving in ["last_activity", "pid", "state", "agent_state"] {
            v.as_object_mut().unwrap().remove(moving);
        }
        v
    };
    let before = meta(&m);
    let files = ["shell:st/input", "shell:st/ctl", "agent-transcripts/run"];
    let paths: Vec<String> = files
        .iter()
        .map(|f| m.path(f).display().to_string())
        .collect();
    // One line each stream takes: a newline to the shell, a ctl command
    // (`redraw` of a live session), a run entry.
    let results = hostile_writes(&paths[..1], "\n");
    let ctl = hostile_writes(&paths[1..2], "redraw\n");
    let run = hostile_writes(&paths[2..], "{\"type\":\"step\"}\n");
    for (file, r) in files
        .iter()
        .zip([&results[&paths[0]], &ctl[&paths[1]], &run[&paths[2]]])
    {
        assert_eq!(
            r["truncate"], "File too large",
            "truncate -s 1E {file}: {r}"
        );
        for n in ["2^33", "2^40", "2^62"] {
            assert_eq!(r[n], "ok", "pwrite at {n} to {file}: {r}");
        }
    }
    assert_alive(&m);
    assert_eq!(meta(&m), before, "metadata changed");
    assert_eq!(m.json("shell:st/status")["state"], "live");
    // `>` truncates to 0 first: still accepted.
    m.type_line("shell:st", r#"echo still""-here"#);
    m.wait_output("shell:st", "still-here");
}

#[test]
fn a_600_mb_scratch_write_stops_at_the_cap_with_memory_bounded() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:big")));
    let big = m.q("shell:big/big.tmp");
    let out = sh(&format!(
        "dd if=/dev/zero of={big} bs=1M count=600 status=none"
    ));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("File too large"), "{err}");
    let len = std::fs::metadata(m.path("shell:big/big.tmp"))
        .unwrap()
        .len();
    assert_eq!(len, 16 << 20, "kept up to the 16 MiB cap");
    // More files fill the daemon-wide 64 MiB: ENOSPC.
    let mut nospc = None;
    for i in 0..5 {
        let out = sh(&format!(
            "dd if=/dev/zero of={} bs=1M count=16 status=none",
            m.q(&format!("shell:big/more{i}.tmp"))
        ));
        if !out.status.success() {
            nospc = Some((i, String::from_utf8_lossy(&out.stderr).into_owned()));
            break;
        }
    }
    let (i, err) = nospc.expect("the total cap is reached");
    // 64 MiB in all, and each file costs its name besides: the fourth
    // stops just short.
    assert_eq!(i, 2, "64 MiB in all");
    let short = std::fs::metadata(m.path("shell:big/more2.tmp"))
        .unwrap()
        .len();
    assert!((15 << 20..16 << 20).contains(&short), "{short}");
    assert!(err.contains("No space left on device"), "{err}");
    assert_alive(&m);
    let hwm = vm_hwm_kib(m.pid());
    // 64 MiB held plus the daemon itself; unbounded it would be 600 MB and more.
    assert!(hwm < 128 << 10, "daemon peaked at {hwm} KiB");
    let status = m.json("shell:big/status");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("limit")),
        "{status}"
    );
    // Removing them gives the room back.
    sh_ok(&format!("rm {}/*.tmp", m.q("shell:big")));
    sh_ok(&format!(
        "dd if=/dev/zero of={big} bs=1M count=16 status=none"
    ));
}

#[test]
fn a_screen_too_small_is_refused_and_output_keeps_flowing() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:tiny")));
    let ctl = m.q("shell:tiny/ctl");
    sh_ok(&format!("echo open > {ctl}"));
    for bad in ["1x1", "1x40", "120x1", "1001x10", "1000x1000"] {
        let out = sh(&format!("echo 'resize {bad}' > {ctl}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Invalid argument"), "resize {bad}: {err}");
        assert_eq!(m.json("shell:tiny/status")["size"], "120x40");
    }
    let status = m.json("shell:tiny/status");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("largest screen")),
        "{status}"
    );
    // The smallest size taken, then output that panics vt100 below it:
    // wide characters at the last column, scroll regions.
    sh_ok(&format!("echo 'resize 2x2' > {ctl}"));
    assert_eq!(m.json("shell:tiny/status")["size"], "2x2");
    m.type_line(
        "shell:tiny",
        r#"printf '\033[999;999H\344\270\255a\344\270\255\033[1;2r\n\n\033[r\033[L\033M'; echo wide""-done"#,
    );
    m.wait_output("shell:tiny", "wide-done");
    sh_ok(&format!("echo 'resize 120x40' > {ctl}"));
    m.type_line("shell:tiny", r#"clear; echo after""-wide"#);
    m.wait_output("shell:tiny", "after-wide");
    wait_for(20, "the screen to show new output", || {
        m.read("shell:tiny/screen").contains("after-wide")
    });
    let status = m.json("shell:tiny/status");
    assert_eq!(status["state"], "live");
    assert!(
        !status["error"]
            .as_str()
            .unwrap_or("")
            .contains("internal error"),
        "{status}"
    );
    assert!(!m.log_text().contains("panicked"), "{}", m.log_text());
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "panics are injected in debug builds only"
)]
fn a_panic_in_a_handler_is_eio_and_the_daemon_lives_on() {
    let host = Host::new().with_env("SESSIONFS_TEST_PANIC", "lookup:boom");
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:pan")));
    // More times than there are request threads: none is lost.
    for _ in 0..6 {
        let out = sh(&format!("stat {}", m.q("shell:pan/boom")));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Input/output error"), "{err}");
        assert_alive(&m);
    }
    let status = m.json("shell:pan/status");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("internal error in lookup")),
        "{status}"
    );
    assert!(m.log_text().contains("internal error in lookup"));
    sh_ok(&format!("echo 'still works' > {}", m.q("shell:pan/title")));
    assert_eq!(m.json("shell:pan/meta.json")["title"], "still works");
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "panics are injected in debug builds only"
)]
fn a_panic_in_a_session_reader_is_reported_and_the_session_recovers() {
    let host = Host::new().with_env("SESSIONFS_TEST_PANIC", "output:PANIC-NOW");
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:rd")));
    sh_ok(&format!("echo open > {}", m.q("shell:rd/ctl")));
    m.type_line("shell:rd", r#"echo PANIC""-NOW"#);
    wait_for(20, "the reader's panic in status", || {
        m.json("shell:rd/status")["error"]
            .as_str()
            .is_some_and(|e| e.contains("output reader stopped"))
    });
    assert_eq!(m.json("shell:rd/status")["state"], "live");
    assert_alive(&m);
    // The next input joins the master again, with a new reader.
    m.type_line("shell:rd", r#"echo back""-again"#);
    m.wait_output("shell:rd", "back-again");
    assert_eq!(m.json("shell:rd/status")["outcome"], "ATTACH");
}

/// Many open files together: past `AGENT_SESSIONS_OPEN_BYTES` a write that
/// would buffer more is ENOSPC and an open or a listing ENOMEM, the reason
/// is in `status`, which still opens, and closing frees it all.
#[test]
fn what_open_files_hold_together_is_capped() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let host = Host::new().with_env("AGENT_SESSIONS_OPEN_BYTES", "4194304");
    let m = host.mount("mnt");
    std::fs::create_dir(m.path("shell:held")).unwrap();
    let chunk = vec![b' '; 60 << 10];
    let mut held = Vec::new();
    let full = loop {
        assert!(held.len() < 100, "never refused");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(m.path("shell:held/meta.json"))
            .unwrap();
        match f.write(&chunk) {
            Ok(n) => {
                assert_eq!(n, chunk.len());
                held.push(f);
            }
            Err(e) => break e,
        }
    };
    assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");
    let refused = loop {
        assert!(held.len() < 10_000, "never refused");
        match std::fs::File::open(m.path("shell:held/meta.json")) {
            Ok(f) => held.push(f),
            Err(e) => break e,
        }
    };
    assert_eq!(refused.raw_os_error(), Some(libc::ENOMEM), "{refused}");
    let ls = sh(&format!("ls {}", m.q("")));
    assert!(!ls.status.success(), "a listing is refused too");
    // The reason is where the user looks, and it can be read.
    let error = m.json("shell:held/status")["error"].to_string();
    assert!(error.contains("AGENT_SESSIONS_OPEN_BYTES"), "{error}");
    let open_files = m.json("status")["open_files"].clone();
    assert_eq!(open_files["limit_mib"], 4, "{open_files}");
    assert!(open_files["mib"].as_u64() >= Some(2), "{open_files}");
    drop(held);
    wait_for(10, "closed files to be freed", || {
        m.json("status")["open_files"]["mib"] == 0
    });
    let listed = sh_ok(&format!("ls {}", m.q("")));
    assert!(listed.contains("shell:held"), "{listed}");
    assert_alive(&m);
}
