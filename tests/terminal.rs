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
    sh_ok(&format!(
        "stat {} {} >/dev/null",
        m.q("shell:gone/input"),
        m.q("shell:gone/state")
    ));
    sh_ok(&format!("echo 1 > {}", m.q("shell:gone/archive")));
    let gone = sh(&format!(
        "stat {} || cat {} || echo x > {}",
        m.q("shell:gone"),
        m.q("shell:gone/state"),
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
    require_tool("scrollback_is_read_in_one_mib_requests", "strace", "strace");
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
    assert!(
        text.contains(", 1048576) = 1048576"),
        "cat did not read 1 MiB at a time:\n{text}"
    );
}

#[test]
fn poll_on_scrollback_waits_for_output_and_wakes_when_it_comes() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:p")));
    m.type_line("shell:p", "echo rea''dy");
    m.wait_output("shell:p", "ready");
    let sb = m.path("shell:p/scrollback");
    let input = m.path("shell:p/input");
    // A handle that read everything: poll says nothing new until output
    // comes, then wakes. A fresh handle has unread bytes and is ready.
    let script = format!(
        r#"
import os, select, time
fd = os.open({sb:?}, os.O_RDONLY)
fresh = select.poll(); fresh.register(fd, select.POLLIN)
assert fresh.poll(0), "a fresh handle with bytes held is not ready"
pos = 0
while True:
    b = os.pread(fd, 1 << 20, pos)
    if not b: break
    pos += len(b)
p = select.poll(); p.register(fd, select.POLLIN)
quiet = p.poll(300)
assert not quiet, f"ready with nothing new: {{quiet}}"
with open({input:?}, "w") as f: f.write("echo wo''ke\n")
t = time.monotonic()
got = p.poll(10000)
assert got and got[0][1] & select.POLLIN, f"no wake-up: {{got}}"
assert os.pread(fd, 1 << 20, pos), "woken with nothing to read"
print("woke after %.1f ms" % ((time.monotonic() - t) * 1000))
"#,
        sb = sb.display().to_string(),
        input = input.display().to_string(),
    );
    let out = sh_ok(&format!("python3 -c '{}'", script.replace('\'', "'\\''")));
    assert!(out.contains("woke after"), "{out}");
    // Other files are ready at once, as regular files are.
    let other = sh_ok(&format!(
        "python3 -c 'import os,select; fd=os.open(\"{}\", os.O_RDONLY); p=select.poll(); p.register(fd, select.POLLIN); print(p.poll(0))'",
        m.path("shell:p/status").display()
    ));
    assert!(other.contains(", 1)"), "{other}");
}

/// A wide character in the last two columns, then `resize` one column
/// narrower, then output over it: vt100 alone panics there, and the mirror
/// would start over blank. It blanks the cut character and goes on.
/// A program saves its cursor at the far corner (as full-screen programs
/// do), the terminal is made smaller, and the program restores the cursor
/// and writes there: the mirror goes on, showing the text at the new edge.
#[test]
fn a_cursor_saved_past_a_smaller_screen_is_written_at_the_new_edge() {
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:saved";
    m.live_shell(key);
    m.type_line(
        key,
        "printf '\\e[40;120H\\e7\\e[1;1H'; sleep 1; printf '\\e8corner-%s\\n' $((40+2))",
    );
    wait_for(20, "the screen to be read once before the resize", || {
        m.read(&format!("{key}/screen")).contains("sleep 1")
    });
    sh_ok(&format!(
        "echo 'resize 80x24' > {}",
        m.q(&format!("{key}/ctl"))
    ));
    // From the last column on, wrapped: `c` at the corner, the rest below.
    wait_for(20, "the text written at the restored cursor", || {
        let screen = m.read(&format!("{key}/screen"));
        screen.lines().any(|l| l.len() == 80 && l.ends_with('c'))
            && screen.lines().any(|l| l.starts_with("orner-42"))
    });
    let status = m.json(&format!("{key}/status"));
    assert!(
        !status["error"].to_string().contains("screen mirror"),
        "{status}"
    );
    assert!(
        !m.log_text().contains("screen mirror failed"),
        "{}",
        m.log_text()
    );
}

#[test]
fn a_screen_narrowed_past_a_wide_character_at_its_edge_goes_on() {
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:wide";
    m.live_shell(key);
    // The cursor waits past the wide character while `sleep` runs; the
    // prompt that follows is written over it.
    m.type_line(key, "printf '%118s\\344\\270\\255' edge; sleep 1");
    wait_for(20, "the wide character on the screen", || {
        m.read(&format!("{key}/screen")).contains("edge\u{4e2d}")
    });
    sh_ok(&format!(
        "echo 'resize 119x40' > {}",
        m.q(&format!("{key}/ctl"))
    ));
    m.type_line(key, "echo after-$((40+2))");
    wait_for(20, "the output after the resize on the screen", || {
        m.read(&format!("{key}/screen")).contains("after-42")
    });
    let status = m.json(&format!("{key}/status"));
    assert!(
        !status["error"].to_string().contains("screen mirror"),
        "{status}"
    );
    assert!(!m.log_text().contains("panicked"), "{}", m.log_text());
}
