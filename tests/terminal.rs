//! What the terminal data path's kernel settings promise, through a real
//! mount: what the kernel may cache never hides a session that went away,
//! and `scrollback` is read in large requests.

mod common;

use common::*;

#[test]
fn a_session_that_goes_away_is_gone_at_once_though_its_input_was_cached() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:gone")));
    // Looked up (and kept by the kernel) just before the session goes.
    m.type_line("shell:gone", "echo be''fore");
    m.wait_output("shell:gone", "before");
    sh_ok(&format!("stat {} >/dev/null", m.q("shell:gone/input")));
    sh_ok(&format!("echo 1 > {}", m.q("shell:gone/archive")));
    let gone = sh(&format!(
        "stat {} || echo x > {}",
        m.q("shell:gone"),
        m.q("shell:gone/input")
    ));
    assert!(
        !gone.status.success(),
        "the archived session is still there"
    );
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("No such file"),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
    // Back again: its input takes commands at once.
    sh_ok(&format!("mv {} {}", m.q("archived/shell:gone"), m.q("")));
    m.type_line("shell:gone", "echo af''ter");
    m.wait_output("shell:gone", "after");
}

#[test]
fn scrollback_is_read_in_one_mib_requests() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:big")));
    m.type_line(
        "shell:big",
        "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo do''ne",
    );
    m.wait_output("shell:big", "done");
    let sb = m.q("shell:big/scrollback");
    assert_eq!(sh_ok(&format!("stat -c %o {sb}")).trim(), "1048576");
    // cat takes its read size from st_blksize; each read gets all it asked for.
    let trace = sh(&format!(
        "strace -e trace=read -o /dev/fd/3 cat {sb} 3>&1 >/dev/null 2>&1; true"
    ));
    let text = String::from_utf8_lossy(&trace.stdout);
    if text.contains("read(") {
        assert!(
            text.contains(", 1048576) = 1048576"),
            "cat did not read 1 MiB at a time:\n{text}"
        );
    } else {
        eprintln!("skipped the read-size check: strace is not installed");
    }
}
