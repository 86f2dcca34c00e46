//! The scrollback ring at its 256 KiB floor under several MiB of output,
//! read by the ordinary tools through a real mount.

mod common;

use common::*;
use std::io::{Read, Write};
use std::process::{Command, Stdio};

const RING: usize = 256 * 1024;
const LINES: usize = 45_000;

/// Numbers of the `L0000001 ...` lines in `text`, in order.
fn numbered_lines(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| {
            // A terminal line may start with control output before a carriage return.
            let l = l.trim_end_matches('\r').rsplit('\r').next()?;
            let rest = l.strip_prefix('L')?;
            let (num, pad) = rest.split_once(' ')?;
            (num.len() == 7 && pad.len() == 90).then(|| num.parse().ok())?
        })
        .collect()
}

fn assert_every_line_in_order(what: &str, numbers: &[usize]) {
    assert_eq!(numbers.first(), Some(&1), "{what} does not start at line 1");
    for pair in numbers.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "{what}: gap or duplicate after line {}",
            pair[0]
        );
    }
    assert_eq!(
        numbers.last(),
        Some(&LINES),
        "{what} does not end at the last line"
    );
}

/// Runs `less +G FILE` on a pseudo-terminal and returns what it painted.
fn less_end_of(file: &str, want: &str) -> String {
    let script = format!(
        r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.environ.update(TERM="xterm", LESS="", LINES="24", COLUMNS="200")
    os.execvp("less", ["less", "+G", {file:?}])
seen = b""
deadline = time.time() + 30
while time.time() < deadline and {want:?}.encode() not in seen:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            seen += os.read(fd, 65536)
        except OSError:
            break
os.write(fd, b"q")
os.waitpid(pid, 0)
sys.stdout.write(seen.decode("utf-8", "replace"))
"#
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_tool_agrees_and_tail_follows_past_the_wrap_without_gaps() {
    let host = Host::new().with_env("AGENT_SESSIONS_SCROLLBACK_BYTES", "1000");
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:big")));
    sh_ok(&format!("echo open > {}", m.q("shell:big/ctl")));
    let scrollback = m.path("shell:big/scrollback");

    // Followers start before the output and read from the first byte held.
    let follow = |flag: &str, name: &str| {
        Command::new("tail")
            .args(["-c", "+1", flag, "-s", "0.1"])
            .arg(&scrollback)
            .stdout(std::fs::File::create(host.path(&format!("{name}.out"))).unwrap())
            .stderr(std::fs::File::create(host.path(&format!("{name}.err"))).unwrap())
            .spawn()
            .unwrap()
    };
    let mut tail_f = follow("-f", "tail-f");
    let mut tail_big_f = follow("-F", "tail-F");

    // About 4.4 MiB, paced like a busy build so a polling reader can keep up.
    let producer = host.path("produce.sh");
    let pad = "x".repeat(90);
    std::fs::write(
        &producer,
        format!(
            "for ((i = 1; i <= {LINES}; i++)); do printf 'L%07d %s\\n' $i {pad}; \
             if ((i % 100 == 0)); then sleep 0.05; fi; done; printf 'EN''D-OF-RUN\\n'\n"
        ),
    )
    .unwrap();
    m.type_line("shell:big", &format!("bash {}", producer.display()));
    let done = |name: &str| {
        std::fs::read(host.path(&format!("{name}.out")))
            .map(|b| b.windows(10).any(|w| w == b"END-OF-RUN"))
            .unwrap_or(false)
    };
    wait_for(180, "tail -f to see the end of the run", || {
        done("tail-f") && done("tail-F")
    });
    for t in [&mut tail_f, &mut tail_big_f] {
        t.kill().unwrap();
        t.wait().unwrap();
    }
    for name in ["tail-f", "tail-F"] {
        let out =
            String::from_utf8_lossy(&std::fs::read(host.path(&format!("{name}.out"))).unwrap())
                .into_owned();
        assert_every_line_in_order(name, &numbered_lines(&out));
        let err = std::fs::read_to_string(host.path(&format!("{name}.err"))).unwrap();
        assert!(err.is_empty(), "{name} complained: {err}");
    }

    // The ring holds its floor, far less than was written.
    let status = m.json("shell:big/status");
    let held = status["scrollback_bytes"].as_u64().unwrap() as usize;
    assert!(held <= RING && held > RING / 2, "ring holds {held}");

    // Idle now: every reader must agree with cat.
    m.wait_output("shell:big", "END-OF-RUN");
    let file = format!("'{}'", scrollback.display());
    let cat = sh(&format!("cat {file}")).stdout;
    assert_eq!(cat.len(), held);
    let numbers = numbered_lines(&String::from_utf8_lossy(&cat));
    assert_eq!(numbers.last(), Some(&LINES));
    for pair in numbers.windows(2) {
        assert_eq!(pair[1], pair[0] + 1);
    }
    assert_eq!(
        sh_ok(&format!("wc -c < {file}")).trim(),
        cat.len().to_string()
    );
    assert_eq!(
        sh_ok(&format!("stat -c %s {file}")).trim(),
        cat.len().to_string()
    );
    assert_eq!(
        sh_ok(&format!("ls -l {file}"))
            .split_whitespace()
            .nth(4)
            .unwrap(),
        cat.len().to_string()
    );
    let tail_n = sh(&format!("tail -n 20 {file}")).stdout;
    let cat_lines: Vec<&[u8]> = cat.split_inclusive(|b| *b == b'\n').collect();
    assert_eq!(tail_n, cat_lines[cat_lines.len() - 20..].concat());
    let grep_count: usize = sh_ok(&format!("grep -c '^L[0-9]\\{{7\\}} x' {file}"))
        .trim()
        .parse()
        .unwrap();
    let starting_with_l = cat_lines
        .iter()
        .filter(|l| {
            l.len() > 10
                && l[0] == b'L'
                && l[1..8].iter().all(u8::is_ascii_digit)
                && &l[8..10] == b" x"
        })
        .count();
    assert_eq!(grep_count, starting_with_l);
    assert!(grep_count > 1000);
    let copy = host.path("copy");
    sh_ok(&format!("cp {file} '{}'", copy.display()));
    assert_eq!(std::fs::read(&copy).unwrap(), cat);
    let mut python = Command::new("python3")
        .args([
            "-c",
            "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())",
        ])
        .arg(&scrollback)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut py = Vec::new();
    python.stdout.take().unwrap().read_to_end(&mut py).unwrap();
    python.wait().unwrap();
    assert_eq!(py, cat);
    let last = format!("L{LINES:07}");
    let painted = less_end_of(&scrollback.to_string_lossy(), "END-OF-RUN");
    assert!(
        painted.contains(&last),
        "less +G did not show the last line"
    );
    assert!(painted.contains("END-OF-RUN"));
}

#[test]
fn a_reader_that_falls_behind_loses_evicted_bytes_once_and_never_sees_duplicates() {
    let host = Host::new().with_env("AGENT_SESSIONS_SCROLLBACK_BYTES", "1000");
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:lag")));
    sh_ok(&format!("echo open > {}", m.q("shell:lag/ctl")));
    // Open, read a little, then stop reading while far more than the ring is written.
    let mut reader = std::fs::File::open(m.path("shell:lag/scrollback")).unwrap();
    let mut seen = Vec::new();
    let producer = host.path("produce.sh");
    std::fs::write(
        &producer,
        format!(
            "for ((i = 1; i <= {LINES}; i++)); do printf 'L%07d %s\\n' $i {}; done; printf 'EN''D-OF-RUN\\n'\n",
            "x".repeat(90)
        ),
    )
    .unwrap();
    m.type_line("shell:lag", &format!("bash {}", producer.display()));
    m.wait_output("shell:lag", "END-OF-RUN");
    let mut buf = vec![0u8; 65536];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let numbers = numbered_lines(&String::from_utf8_lossy(&seen));
    let gaps = numbers.windows(2).filter(|p| p[1] != p[0] + 1).count();
    assert!(
        numbers.windows(2).all(|p| p[1] > p[0]),
        "duplicates or disorder"
    );
    assert!(gaps <= 1, "{gaps} gaps");
    assert_eq!(numbers.last(), Some(&LINES));
    assert!(
        seen.len() <= RING,
        "read {} bytes from a {RING} ring",
        seen.len()
    );
    // Reading on after the end returns nothing and does not block.
    assert_eq!(reader.read(&mut buf).unwrap(), 0);
    std::io::stdout().flush().unwrap();
}

/// A reader that asks again and again at the end (an agent manager's loop)
/// is held there for a moment instead of spinning, and still gets every byte
/// once, in order; `cat`'s single read at the end and `O_NONBLOCK` readers
/// are answered at once.
#[test]
fn a_reader_polling_at_the_end_waits_a_moment_and_loses_nothing() {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    use std::time::{Duration, Instant};
    const HOLD: Duration = Duration::from_millis(5);
    let host = Host::new();
    let m = host.mount("mnt");
    m.live_shell("shell:follow");
    let path = m.path("shell:follow/scrollback");

    // A quiet session: twenty reads at the end, each after the first two
    // held for the whole moment.
    let follower = std::fs::File::open(&path).unwrap();
    let end = follower.metadata().unwrap().len();
    let mut buf = vec![0u8; 64 * 1024];
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(follower.read_at(&mut buf, end).unwrap(), 0);
    }
    assert!(
        started.elapsed() >= HOLD * 18,
        "twenty reads at the end took {:?}: the follower was not held",
        started.elapsed()
    );
    // Each hold ends by itself: the first one wakes the timer from its long
    // sleep, the later ones come while it is awake and must not need to.
    assert!(
        started.elapsed() < HOLD * 20 + Duration::from_secs(2),
        "twenty reads at the end took {:?}: a hold outlasted its moment",
        started.elapsed()
    );

    // `cat`'s pattern (read what is there, then once at the end) and
    // O_NONBLOCK readers are never held: fifty of each take far less than
    // one hold each.
    let started = Instant::now();
    for _ in 0..50 {
        let f = std::fs::File::open(&path).unwrap();
        let mut all = Vec::new();
        (&f).read_to_end(&mut all).unwrap();
        assert!(!all.is_empty());
    }
    let nonblocking = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .unwrap();
    for _ in 0..50 {
        assert_eq!(nonblocking.read_at(&mut buf, end).unwrap(), 0);
    }
    assert!(
        started.elapsed() < HOLD * 100,
        "readers that never follow waited: {:?}",
        started.elapsed()
    );

    // While output comes, a follower spinning at the end gets every byte
    // exactly once, in order.
    // Opened, and its end taken, before anything is typed.
    let f = std::fs::File::open(&path).unwrap();
    let pos = f.metadata().unwrap().len();
    let reader = std::thread::spawn(move || follow_until(&f, pos, "L0300 done"));
    m.type_line(
        "shell:follow",
        "for i in $(seq -w 1 300); do echo L0$i; done; echo L0300 do''ne",
    );
    let seen = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    let numbers: Vec<u32> = seen
        .split(['\r', '\n'])
        .filter_map(|l| l.strip_prefix("L0")?.parse().ok())
        .collect();
    assert_eq!(numbers, (1..=300).collect::<Vec<u32>>(), "{seen}");
}

/// Forty readers following one session all get the same new output: the
/// output reader answers a few of them itself and hands the rest on.
#[test]
fn many_followers_of_one_session_all_see_its_output() {
    use std::os::unix::fs::FileExt;
    let host = Host::new();
    let m = host.mount("mnt");
    m.live_shell("shell:crowd");
    let path = m.path("shell:crowd/scrollback");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(41));
    let readers: Vec<_> = (0..40)
        .map(|_| {
            let f = std::fs::File::open(&path).unwrap();
            let start = f.metadata().unwrap().len();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 4096];
                // Following before the output comes.
                for _ in 0..2 {
                    assert_eq!(f.read_at(&mut buf, start).unwrap(), 0);
                }
                barrier.wait();
                follow_until(&f, start, "crowd-done")
            })
        })
        .collect();
    barrier.wait();
    m.type_line("shell:crowd", "seq 1 200; echo crowd-do''ne");
    let seen: Vec<Vec<u8>> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let first = String::from_utf8_lossy(&seen[0]).into_owned();
    assert!(first.contains("\r\n200\r\n"), "{first}");
    for other in &seen[1..] {
        let other = String::from_utf8_lossy(other);
        let end = |t: &str| t[..t.find("crowd-done").unwrap()].to_string();
        assert_eq!(
            end(&other),
            end(&first),
            "two followers saw different bytes"
        );
    }
}

/// Reads `f` from `pos` on, asking again at once at the end, until `marker`
/// has been read; returns all it read.
fn follow_until(f: &std::fs::File, mut pos: u64, marker: &str) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 4096];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !String::from_utf8_lossy(&seen).contains(marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "no {marker:?} within 60 s"
        );
        let n = f.read_at(&mut buf, pos).unwrap();
        pos += n as u64;
        seen.extend_from_slice(&buf[..n]);
    }
    seen
}
