//! The mount as the everyday tools see a file tree: times that hold still
//! while nothing changes (`stat`, `tar`, `rsync`), transcripts that follow
//! their store (`tail -f`), moves from another filesystem onto metadata
//! files (`mv`), `mmap`, and a quiet log for a `grep -r`.

mod common;

use common::*;
use sessionfs::transcript::testgen::{claude, Shape};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ID: &str = "21212121-3434-5656-7878-909090909090";

/// A host whose Claude store holds one conversation of `turns` turns.
fn store_host(turns: usize) -> (Host, PathBuf) {
    let host = Host::new();
    let file = host.path(&format!("claude/projects/-work-proj/{ID}.jsonl"));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, claude(&Shape::new(turns, 7))).unwrap();
    let root = host.path("claude");
    let host = host.with_env("CLAUDE_CONFIG_DIR", root.to_str().unwrap());
    (host, file)
}

/// A conversation of `turns` turns without the generator's closing title
/// line, so a longer one extends it.
fn turns_text(turns: usize) -> Vec<u8> {
    let mut text = claude(&Shape::new(turns, 7));
    text.pop();
    let cut = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    text.truncate(cut);
    text
}

/// Appends turns `from..to` to the store, as the agent does (the store's
/// closing title line stays where it was, as a title set mid-conversation).
/// `tail -n +1 FLAG` of `page` (through sshfs): shows the store's `turns`
/// turns, then the one appended while it follows.
fn tail_follows(flag: &str, page: &Path, out: &Path, store: &PathBuf, turns: usize) {
    let mut tail = Command::new("tail")
        .args(["-n", "+1", flag, "-s", "0.2"])
        .arg(page)
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let shown = || String::from_utf8_lossy(&std::fs::read(out).unwrap_or_default()).into_owned();
    let (last, next) = (format!("prompt #{}", turns - 1), format!("prompt #{turns}"));
    wait_for(10, "tail over sshfs to print the page", || {
        shown().contains(&last)
    });
    append_turns(store, turns, turns + 1);
    wait_for(10, "tail over sshfs to show the new turn", || {
        shown().contains(&next)
    });
    let _ = tail.kill();
    let _ = tail.wait();
}

fn append_turns(file: &PathBuf, from: usize, to: usize) {
    let (old, new) = (turns_text(from), turns_text(to));
    assert!(new.starts_with(&old), "the generator extends");
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    f.write_all(&new[old.len()..]).unwrap();
}

/// A real `tail ARGS PATH` whose output goes to `out`.
fn tail_into(args: &[&str], path: &Path, out: &Path) -> std::process::Child {
    Command::new("tail")
        .args(args)
        .arg(path)
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `d` has passed, checking the clock (no fixed sleep).
fn let_pass(d: Duration) {
    let until = Instant::now() + d;
    wait_for(d.as_secs() + 5, "the time to pass", || {
        Instant::now() >= until
    });
}

/// Size, mtime and ctime (nanoseconds) of every path under `rel`.
fn stats(m: &Mount, rel: &str) -> String {
    sh_ok(&format!(
        "cd {} && find . -print0 | sort -z | xargs -0 stat -c '%n %s %y %z'",
        m.q(rel)
    ))
}

#[test]
fn times_hold_still_while_idle_and_tar_and_rsync_are_clean() {
    let (host, _store) = store_host(3);
    let m = host.mount("mnt");
    let key = "shell:times";
    std::fs::create_dir(m.path(key)).unwrap();
    std::fs::create_dir(m.path("shell:quiet")).unwrap();
    m.type_line(key, "echo rea''dy");
    m.wait_output_line(key, "ready");
    let transcript = format!("claude:{ID}");

    // The counter reads the stores from the daemon's start; once it has,
    // a stored conversation's `usage` holds still.
    wait_for(30, "the stored conversation's usage counted", || {
        m.read(&format!("{transcript}/usage")) != "null\n"
    });
    // A session that never ran and a stored conversation: their times
    // agree at once, two stats 2 s apart.
    for dir in ["shell:quiet", transcript.as_str()] {
        let before = stats(&m, dir);
        let_pass(Duration::from_secs(2));
        assert_eq!(before, stats(&m, dir), "{dir} moved while idle");
    }
    // The whole mount, once the live shell has printed its prompt.
    wait_for(30, "two stats of the mount 2 s apart to agree", || {
        let before = stats(&m, "");
        let_pass(Duration::from_secs(2));
        before == stats(&m, "")
    });

    // tar reads every file (as root, the write-only ones read as empty)
    // and finds nothing changed under it.
    let out = host.path("all.tar");
    for dir in [key, transcript.as_str(), "."] {
        let tar = sh(&format!("tar cf {} -C {} {dir}", out.display(), m.q("")));
        assert!(
            tar.status.success(),
            "tar of {dir}: {}\n{}",
            tar.status,
            String::from_utf8_lossy(&tar.stderr)
        );
    }

    // A second rsync copies nothing.
    let copy = host.path("copy");
    let rsync = |what: &str| {
        sh_ok(&format!(
            "rsync -a --itemize-changes {}/ {}/",
            m.q(""),
            copy.display()
        ))
        .lines()
        .map(str::to_string)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
            + what
    };
    assert!(!rsync("").is_empty(), "the first rsync copies");
    assert_eq!(rsync(""), "", "the second rsync copied something");
    assert_eq!(
        std::fs::read(copy.join(format!("{transcript}/transcript/page-0"))).unwrap(),
        std::fs::read(m.path(&format!("{transcript}/transcript/page-0"))).unwrap()
    );

    // ctime follows mtime; a session's metadata files share its record's time.
    let t = |rel: &str| {
        sh_ok(&format!("stat -c '%y|%z' {}", m.q(rel)))
            .trim()
            .to_string()
    };
    let meta = t(&format!("{key}/meta.json"));
    let (mtime, ctime) = meta.split_once('|').unwrap();
    assert_eq!(mtime, ctime);
    assert_eq!(t(&format!("{key}/title")), meta);
}

/// Nothing recorded yet: the root, the views and `sessions.json` take
/// the program's time, as `README` does, and stay there.
#[test]
fn an_empty_mount_is_dated_by_its_program_not_1970() {
    let host = Host::new();
    let m = host.mount("mnt");
    let mtime = |rel: &str| std::fs::metadata(m.path(rel)).unwrap().modified().unwrap();
    let program = mtime("README");
    assert!(program > std::time::UNIX_EPOCH + Duration::from_secs(86_400 * 365));
    for rel in [
        "",
        "sessions.json",
        "archived",
        "favourites",
        "projects",
        "engines",
    ] {
        assert_eq!(mtime(rel), program, "{rel:?}");
    }
    // The first session moves the root past its creation (the attributes
    // may be kept for 1 s).
    std::fs::create_dir(m.path("shell:first")).unwrap();
    let made = mtime("shell:first");
    assert!(made >= program);
    wait_for(5, "the root to be dated by the new session", || {
        mtime("") >= made
    });
}

#[test]
fn a_title_edit_moves_only_that_sessions_times() {
    let host = Host::new();
    let m = host.mount("mnt");
    for key in ["shell:one", "shell:two"] {
        std::fs::create_dir(m.path(key)).unwrap();
    }
    let mtime = |rel: &str| std::fs::metadata(m.path(rel)).unwrap().modified().unwrap();
    let other = mtime("shell:two/meta.json");
    let other_dir = mtime("shell:two");
    let before = mtime("shell:one/meta.json");
    let_pass(Duration::from_millis(20));
    sh_ok(&format!("echo renamed > {}", m.q("shell:one/title")));
    assert_eq!(m.read("shell:one/title"), "renamed\n");
    let after = mtime("shell:one/meta.json");
    assert!(
        after > before,
        "the edited session's meta.json kept its time"
    );
    assert_eq!(mtime("shell:one/title"), after);
    assert_eq!(
        mtime("shell:two/meta.json"),
        other,
        "another session's meta.json moved"
    );
    assert_eq!(mtime("shell:two/title"), other);
    assert_eq!(mtime("shell:two"), other_dir);
}

#[test]
fn tail_f_on_latest_shows_an_appended_turn_and_an_open_handle_reads_it() {
    let (host, store) = store_host(3);
    let m = host.mount("mnt");
    let latest = m.path(&format!("claude:{ID}/transcript/latest"));
    let page = std::fs::read_to_string(&latest).unwrap();
    assert!(page.contains("prompt #2"), "{page}");
    assert!(!page.contains("prompt #3"));

    // A handle kept open reads on past its old end once the store grows.
    let mut held = std::fs::File::open(&latest).unwrap();
    let mut seen = String::new();
    held.read_to_string(&mut seen).unwrap();

    let out = host.path("tail.out");
    let mut tail = tail_into(&["-n", "+1", "-f"], &latest, &out);
    let shown = || String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned();
    wait_for(10, "tail to print the page", || {
        shown().contains("prompt #2")
    });

    append_turns(&store, 3, 4);
    let appended = Instant::now();
    wait_for(10, "tail -f to show the new turn", || {
        shown().contains("prompt #3")
    });
    let took = appended.elapsed();
    let _ = tail.kill();
    let _ = tail.wait();
    // tail polls once a second on a FUSE mount.
    assert!(took < Duration::from_millis(2500), "tail took {took:?}");

    let mut more = String::new();
    held.read_to_string(&mut more).unwrap();
    assert!(more.contains("prompt #3"), "the open handle read {more:?}");
    assert_eq!(
        format!("{seen}{more}").len() as u64,
        std::fs::metadata(&latest).unwrap().len(),
        "stat and the handle agree"
    );
}

/// The rows of one Claude turn, in the order Claude writes them while it
/// answers: the prompt, thinking, two tool calls made side by side (each
/// its own row of one message), their results, then the reply; each with
/// the text a follower must see once that row is written.
fn turn_rows(k: usize) -> Vec<(serde_json::Value, String)> {
    use serde_json::json;
    let row = |i: usize, ty: &str, message: serde_json::Value| {
        json!({"parentUuid": null, "isSidechain": false, "type": ty, "message": message,
               "uuid": format!("row-{k}-{i}"), "timestamp": "2026-01-02T03:04:05.000Z",
               "sessionId": ID, "cwd": "/work/proj"})
    };
    let assistant = |i: usize, block: serde_json::Value| {
        row(
            i,
            "assistant",
            json!({"id": format!("msg-{k}"), "role": "assistant", "content": [block]}),
        )
    };
    let result = |i: usize, call: &str, out: &str| {
        row(
            i,
            "user",
            json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": out}]}),
        )
    };
    vec![
        (
            row(
                0,
                "user",
                json!({"role": "user", "content": format!("streamed prompt {k}")}),
            ),
            format!("> streamed prompt {k}"),
        ),
        (
            assistant(
                1,
                json!({"type": "thinking", "thinking": format!("pondering {k}")}),
            ),
            format!("✻ thinking… pondering {k}"),
        ),
        (
            assistant(
                2,
                json!({"type": "tool_use", "id": format!("a{k}"), "name": "Bash", "input": {"command": format!("ls one{k}")}}),
            ),
            format!("● Bash(ls one{k})"),
        ),
        (
            assistant(
                3,
                json!({"type": "tool_use", "id": format!("b{k}"), "name": "Bash", "input": {"command": format!("ls two{k}")}}),
            ),
            format!("● Bash(ls two{k})"),
        ),
        (
            result(4, &format!("a{k}"), &format!("first out {k}")),
            format!("first out {k}"),
        ),
        (
            result(5, &format!("b{k}"), &format!("second out {k}")),
            format!("second out {k}"),
        ),
        (
            row(
                6,
                "assistant",
                json!({"id": format!("reply-{k}"), "role": "assistant",
              "content": [{"type": "text", "text": format!("the answer {k}")}]}),
            ),
            format!("● the answer {k}"),
        ),
    ]
}

#[test]
fn tail_f_on_latest_shows_a_turn_row_by_row_as_the_agent_writes_it() {
    let (host, store) = store_host(2);
    let m = host.mount("mnt");
    let latest = m.path(&format!("claude:{ID}/transcript/latest"));
    let out = host.path("tail.out");
    let mut tail = tail_into(&["-n", "+1", "-f", "-s", "0.2"], &latest, &out);
    let shown = || String::from_utf8_lossy(&std::fs::read(&out).unwrap_or_default()).into_owned();
    wait_for(10, "tail to print the page", || {
        shown().contains("prompt #1")
    });
    // Two turns, each written a row at a time; after every row the follower
    // shows exactly what the page holds now, that row's line at its end.
    for k in 0..2 {
        for (row, line) in turn_rows(k) {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&store)
                .unwrap();
            f.write_all(format!("{row}\n").as_bytes()).unwrap();
            drop(f);
            wait_for(10, &format!("tail -f to show {line:?}"), || {
                shown().contains(&line)
            });
            let page = std::fs::read_to_string(&latest).unwrap();
            assert!(page.contains(&line), "{page}");
            wait_for(10, "tail -f to show the whole page", || shown() == page);
        }
    }
    let _ = tail.kill();
    let _ = tail.wait();
    let page = std::fs::read_to_string(&latest).unwrap();
    assert!(
        page.contains("● Bash(ls two1)\n  ⎿  Bash(ls one1): first out 1\n  ⎿  Bash(ls two1): second out 1\n● the answer 1\n"),
        "{page}"
    );
}

#[test]
fn mv_from_another_filesystem_onto_meta_json_and_title_applies_it() {
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:moved";
    std::fs::create_dir(m.path(key)).unwrap();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();

    // The habit: edit a copy with jq elsewhere, move it back.
    let edited = shm.path().join("meta.json");
    sh_ok(&format!(
        "jq '.title = \"from jq\" | .project = \"p1\"' {} > {}",
        m.q(&format!("{key}/meta.json")),
        edited.display()
    ));
    sh_ok(&format!(
        "mv {} {}",
        edited.display(),
        m.q(&format!("{key}/meta.json"))
    ));
    let meta = m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["title"], "from jq");
    assert_eq!(meta["project"], "p1");

    let line = shm.path().join("title");
    std::fs::write(&line, "moved title\n").unwrap();
    sh_ok(&format!(
        "mv {} {}",
        line.display(),
        m.q(&format!("{key}/title"))
    ));
    assert_eq!(m.read(&format!("{key}/title")), "moved title\n");
    assert_eq!(m.json(&format!("{key}/meta.json"))["project"], "p1");

    // A removal alone changes nothing.
    sh_ok(&format!("rm {}", m.q(&format!("{key}/project"))));
    assert_eq!(m.json(&format!("{key}/meta.json"))["project"], "p1");
    assert_eq!(m.json(&format!("{key}/meta.json"))["title"], "moved title");
}

#[test]
fn mmap_reads_a_transcript_page_and_the_generated_files() {
    let (host, _store) = store_host(3);
    let m = host.mount("mnt");
    std::fs::create_dir(m.path("shell:mapped")).unwrap();
    m.type_line("shell:mapped", "echo map''ped");
    m.wait_output_line("shell:mapped", "mapped");
    for rel in [
        "shell:mapped/scrollback".to_string(),
        format!("claude:{ID}/transcript/page-0"),
        "shell:mapped/meta.json".to_string(),
        "shell:mapped/status".to_string(),
        "sessions.json".to_string(),
    ] {
        let path = m.path(&rel);
        let script = "import mmap, sys\n\
            with open(sys.argv[1], 'rb') as f:\n\
            \x20   m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n\
            \x20   sys.stdout.buffer.write(m[:])\n";
        let out = Command::new("python3")
            .args(["-c", script])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mmap of {rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty(), "{rel} mapped empty");
        if rel.contains("page-0") {
            assert_eq!(out.stdout, std::fs::read(&path).unwrap());
        }
    }
}

#[test]
fn grep_r_over_the_mount_logs_no_warning() {
    let host = Host::new();
    let m = host.mount("mnt");
    std::fs::create_dir(m.path("shell:grep")).unwrap();
    m.type_line("shell:grep", "echo nee''dle");
    m.wait_output_line("shell:grep", "needle");
    // `wait` of a session that is starting or busy blocks, as a pipe does
    // (EAGAIN for grep's non-blocking open): grep runs once it is idle.
    wait_for(20, "the shell to be idle", || {
        m.read("shell:grep/state").trim() == "idle"
    });
    let out = sh(&format!("grep -r needle {}", m.q("")));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("scrollback"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.stderr.is_empty(),
        "grep: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = m.log_text();
    assert!(!log.contains("WARN"), "{log}");
}

#[test]
fn the_debug_log_tells_sessionfs_decisions_not_fusers_requests() {
    let (host, _store) = store_host(2);
    let host = host.with_env("RUST_LOG", "debug");
    let m = host.mount("mnt");
    let key = "shell:logged";
    std::fs::create_dir(m.path(key)).unwrap();
    m.type_line(key, "echo lo''gged");
    m.wait_output_line(key, "logged");
    sh_ok(&format!("echo named > {}", m.q(&format!("{key}/title"))));
    let refused = sh(&format!("echo 7 > {}", m.q(&format!("{key}/favourite"))));
    assert!(!refused.status.success());
    sh_ok(&format!(
        "cat {} > /dev/null",
        m.q(&format!("claude:{ID}/transcript/latest"))
    ));
    let log = m.log_text();
    for decision in [
        &format!("claude:{ID}: found in") as &str,
        "shell:logged: created",
        "shell:logged: LAUNCH",
        "shell:logged: metadata committed",
        "shell:logged: expected 1 or 0",
    ] {
        assert!(log.contains(decision), "no {decision:?} in the log:\n{log}");
    }
    assert!(
        !log.contains(" fuser"),
        "fuser's requests in the log:\n{log}"
    );
}

/// An sshd on a free loopback port that lets root in with a key made for
/// the test; killed on drop.
struct Sshd {
    child: std::process::Child,
    port: u16,
    key: PathBuf,
}

impl Sshd {
    fn start(dir: &std::path::Path) -> Sshd {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let key = dir.join("id");
        for k in ["hostkey", "id"] {
            sh_ok(&format!(
                "ssh-keygen -q -t ed25519 -N '' -f {}",
                dir.join(k).display()
            ));
        }
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/hostkey\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nStrictModes no\nUsePAM no\n\
                 PidFile {d}/sshd.pid\nSubsystem sftp internal-sftp\n",
                d = dir.display()
            ),
        )
        .unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-f"])
            .arg(&config)
            .arg("-E")
            .arg(dir.join("sshd.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for(10, "sshd to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Sshd { child, port, key }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sshfs_over_loopback_lists_follows_and_survives_a_daemon_restart() {
    let test = "sshfs_over_loopback_lists_follows_and_survives_a_daemon_restart";
    if !require_root(test, "runs sshd and logs in as root") {
        return;
    }
    require_tool(test, "/usr/sbin/sshd", "openssh-server");
    require_tool(test, "sshfs", "sshfs");
    require_tool(test, "ssh-keygen", "openssh-client");
    let (host, store) = store_host(3);
    let mut m = host.mount("mnt");
    let key = "shell:remote";
    std::fs::create_dir(m.path(key)).unwrap();
    let ssh_dir = host.path("ssh");
    std::fs::create_dir(&ssh_dir).unwrap();
    let sshd = Sshd::start(&ssh_dir);
    let remote = host.path("remote");
    std::fs::create_dir(&remote).unwrap();
    sh_ok(&format!(
        "sshfs -p {} -o IdentityFile={},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,\
         dir_cache=no,direct_io root@127.0.0.1:{} {}",
        sshd.port,
        sshd.key.display(),
        m.q(""),
        remote.display()
    ));
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&self.0)
                .status();
        }
    }
    let _unmount = Unmount(remote.clone());

    let listing = sh_ok(&format!("ls -R {}", remote.display()));
    for name in [key, "meta.json", "page-0", "sessions.json"] {
        assert!(listing.contains(name), "no {name} in ls -R:\n{listing}");
    }

    // tail -F through sshfs: a turn appended before and one after a restart.
    let page = remote.join(format!("claude:{ID}/transcript/page-0"));
    tail_follows("-F", &page, &host.path("tail.out"), &store, 3);

    // A restart ends the old daemon's open files (the kernel's connection
    // goes with it); paths, numbers and new opens carry on.
    let before = sh_ok(&format!("stat -c %i {}", m.q(&format!("{key}/meta.json"))));
    m.terminate();
    let m = host.mount("mnt");
    tail_follows("-f", &page, &host.path("tail2.out"), &store, 4);
    let listing = sh_ok(&format!("ls -R {}", remote.display()));
    assert!(listing.contains(key), "{listing}");
    assert_eq!(
        sh_ok(&format!("stat -c %i {}", m.q(&format!("{key}/meta.json")))),
        before
    );
    assert_eq!(
        std::fs::read_to_string(remote.join(format!("{key}/title"))).unwrap(),
        "\n"
    );
}

#[test]
fn less_plus_f_on_latest_shows_an_appended_turn() {
    let (host, store) = store_host(3);
    let m = host.mount("mnt");
    let pager = "shell:pager";
    std::fs::create_dir(m.path(pager)).unwrap();
    let latest = m.path(&format!("claude:{ID}/transcript/latest"));
    // less runs in a session of this same mount; its screen is the VT mirror's.
    m.type_line(pager, &format!("less +F '{}'", latest.display()));
    let screen = || m.read(&format!("{pager}/screen"));
    wait_for(15, "less to show the page's end", || {
        screen().contains("reply #2 done")
    });
    append_turns(&store, 3, 4);
    let appended = Instant::now();
    wait_for(10, "less +F to show the new turn", || {
        screen().contains("reply #3 done")
    });
    let took = appended.elapsed();
    m.type_line(pager, "\x03q");
    assert!(took < Duration::from_millis(2500), "less took {took:?}");
}

/// `state` is dated by the last change of state, seen or not: a job that
/// ran while nobody looked moves it to the `events` line of its end.
#[test]
fn state_is_dated_by_its_last_change_even_unseen() {
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:dated";
    std::fs::create_dir(m.path(key)).unwrap();
    m.type_line(key, "echo rea''dy");
    m.wait_output_line(key, "ready");
    wait_for(20, "the shell to be idle", || {
        m.read(&format!("{key}/state")) == "idle\n"
    });
    let mtime = |rel: &str| -> i64 {
        sh_ok(&format!("stat -c %Y {}", m.q(rel)))
            .trim()
            .parse()
            .unwrap()
    };
    let before = mtime(&format!("{key}/state"));
    let_pass(Duration::from_millis(1100));
    // A job, and its end, with no look at `state` meanwhile.
    m.type_line(key, "sleep 0.5; echo do''ne");
    m.wait_output_line(key, "done");
    let events = |m: &Mount| m.read(&format!("{key}/events"));
    wait_for(20, "the job's end in events", || {
        events(&m)
            .lines()
            .last()
            .is_some_and(|l| l.contains("\"idle\""))
            && events(&m).contains("\"busy\"")
    });
    let after = mtime(&format!("{key}/state"));
    assert!(
        after > before,
        "state still dated {before}, after a busy/idle cycle"
    );
    assert_eq!(after, mtime(&format!("{key}/events")));
}
