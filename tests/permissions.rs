//! Another user against the mount, with and without `-o allow_other`, for
//! every kind of file. Needs root (to mount for one user and act as another).

mod common;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// The other user: nobody.
const OTHER: &str = "65534";

/// One system call per line of input (`OP\tPATH\tDATA`, the data in hex), run as `nobody`;
/// prints each one's errno, 0 for success, one per line.
const PROBE: &str = r#"
import os, socket, sys
for line in sys.stdin.read().splitlines():
    op, path, *rest = line.split("\t")
    try:
        if op == "stat":
            os.stat(path)
        elif op == "lstat":
            os.lstat(path)
        elif op == "readlink":
            os.readlink(path)
        elif op == "readdir":
            os.listdir(path)
        elif op == "read":
            fd = os.open(path, os.O_RDONLY)
            try:
                os.read(fd, 1 << 16)
            finally:
                os.close(fd)
        elif op == "write":
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, bytes.fromhex(rest[0]))
                os.fsync(fd)
            finally:
                os.close(fd)
        elif op == "create":
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        elif op == "mkdir":
            os.mkdir(path)
        elif op == "rmdir":
            os.rmdir(path)
        elif op == "unlink":
            os.unlink(path)
        elif op == "rename":
            os.rename(path, bytes.fromhex(rest[0]).decode())
        elif op == "chmod":
            os.chmod(path, 0o666)
        elif op == "connect":
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(path)
            finally:
                s.close()
        else:
            raise SystemExit("unknown op " + op)
        print(0)
    except OSError as e:
        print(e.errno)
"#;

/// Runs `ops` as nobody; the errno of each.
fn as_other(ops: &[(String, String, String)]) -> Vec<i32> {
    let mut input = String::new();
    for (op, path, data) in ops {
        let hex: String = data.bytes().map(|b| format!("{b:02x}")).collect();
        input += &format!("{op}\t{path}\t{hex}\n");
    }
    // A system python: one under root's home (pyenv) is out of nobody's reach.
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3");
    let mut child = Command::new("setpriv")
        .args(["--reuid", OTHER, "--regid", OTHER, "--clear-groups"])
        .args([python, "-c", PROBE])
        .current_dir("/")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let codes: Vec<i32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(codes.len(), ops.len());
    codes
}

fn name(errno: i32) -> String {
    match errno {
        0 => "ok".into(),
        e => std::io::Error::from_raw_os_error(e)
            .to_string()
            .split(" (os error")
            .next()
            .unwrap()
            .to_string(),
    }
}

/// What the other user tries, and whether it changes something (every such
/// call must be refused whatever the mount options).
struct Try {
    what: String,
    op: &'static str,
    path: String,
    data: String,
    changes: bool,
    /// The file is private to its owner by design (mode 0600 or 0200).
    private: bool,
}

fn tries(m: &Mount, key: &str, transcript: &str) -> Vec<Try> {
    let mut list = Vec::new();
    let mut add =
        |what: &str, op: &'static str, rel: &str, data: &str, changes: bool, private: bool| {
            list.push(Try {
                what: what.to_string(),
                op,
                path: m.path(rel).to_string_lossy().into_owned(),
                data: data.to_string(),
                changes,
                private,
            })
        };
    let world = "0f8fad5b-d9cb-469f-a165-70867728950e";
    // Reading: every kind of file and directory.
    add("stat /", "stat", "", "", false, false);
    add("list /", "readdir", "", "", false, false);
    for f in ["README", "status", "sessions.json"] {
        add(&format!("read {f}"), "read", f, "", false, false);
    }
    add("read ctl", "read", "ctl", "", false, true);
    for d in [
        "archived",
        "favourites",
        "projects",
        "projects/p",
        "engines",
        "engines/shell",
        "slots",
        &format!("slots/{world}"),
        "agent-transcripts",
    ] {
        add(&format!("list {d}/"), "readdir", d, "", false, false);
    }
    add(
        "readlink favourites/KEY",
        "readlink",
        &format!("favourites/{key}"),
        "",
        false,
        false,
    );
    add("list KEY/", "readdir", key, "", false, false);
    for f in ["scrollback", "screen", "status"] {
        add(
            &format!("read KEY/{f}"),
            "read",
            &format!("{key}/{f}"),
            "",
            false,
            false,
        );
    }
    for f in [
        "meta.json",
        "title",
        "project",
        "favourite",
        "archive",
        ".scratch.swp",
    ] {
        add(
            &format!("read KEY/{f}"),
            "read",
            &format!("{key}/{f}"),
            "",
            false,
            true,
        );
    }
    for f in ["input", "ctl"] {
        add(
            &format!("read KEY/{f}"),
            "read",
            &format!("{key}/{f}"),
            "",
            false,
            true,
        );
    }
    add(
        "list T/transcript/",
        "readdir",
        &format!("{transcript}/transcript"),
        "",
        false,
        false,
    );
    add(
        "read T/transcript/page-0",
        "read",
        &format!("{transcript}/transcript/page-0"),
        "",
        false,
        false,
    );
    add(
        "readlink T/transcript/latest",
        "readlink",
        &format!("{transcript}/transcript/latest"),
        "",
        false,
        false,
    );
    add(
        "read slots/W/1",
        "read",
        &format!("slots/{world}/1"),
        "",
        false,
        true,
    );
    add(
        "read agent-transcripts/run-p.jsonl",
        "read",
        "agent-transcripts/run-p.jsonl",
        "",
        false,
        true,
    );
    add(
        "read agent-transcripts/run",
        "read",
        "agent-transcripts/run",
        "",
        false,
        true,
    );
    // Changing: every writable file, every directory operation.
    add("write ctl", "write", "ctl", "new shell\n", true, true);
    add("mkdir /shell:other", "mkdir", "shell:other", "", true, true);
    add("create /x", "create", "x", "", true, true);
    add(
        "write KEY/input",
        "write",
        &format!("{key}/input"),
        "echo from-nobody\n",
        true,
        true,
    );
    add(
        "write KEY/ctl",
        "write",
        &format!("{key}/ctl"),
        "stop\n",
        true,
        true,
    );
    add(
        "write KEY/title",
        "write",
        &format!("{key}/title"),
        "pwned\n",
        true,
        true,
    );
    add(
        "write KEY/meta.json",
        "write",
        &format!("{key}/meta.json"),
        "{}",
        true,
        true,
    );
    add(
        "write KEY/favourite",
        "write",
        &format!("{key}/favourite"),
        "0\n",
        true,
        true,
    );
    add(
        "write KEY/archive",
        "write",
        &format!("{key}/archive"),
        "1\n",
        true,
        true,
    );
    add(
        "create KEY/4913",
        "create",
        &format!("{key}/4913"),
        "",
        true,
        true,
    );
    add(
        "unlink KEY/.scratch.swp",
        "unlink",
        &format!("{key}/.scratch.swp"),
        "",
        true,
        true,
    );
    add(
        "chmod KEY/title",
        "chmod",
        &format!("{key}/title"),
        "",
        true,
        true,
    );
    add("rmdir KEY", "rmdir", key, "", true, true);
    add(
        "mv KEY archived/",
        "rename",
        key,
        &m.path(&format!("archived/{key}")).to_string_lossy(),
        true,
        true,
    );
    add(
        "mkdir slots/NEW",
        "mkdir",
        "slots/11111111-2222-3333-4444-555555555555",
        "",
        true,
        true,
    );
    add(
        "write slots/W/1",
        "write",
        &format!("slots/{world}/1"),
        "{\"sessionId\":\"x\"}\n",
        true,
        true,
    );
    add(
        "create slots/W/2",
        "create",
        &format!("slots/{world}/2"),
        "",
        true,
        true,
    );
    add(
        "unlink slots/W/1",
        "unlink",
        &format!("slots/{world}/1"),
        "",
        true,
        true,
    );
    add(
        "write agent-transcripts/run-p.jsonl",
        "write",
        "agent-transcripts/run-p.jsonl",
        "{\"type\":\"x\"}\n",
        true,
        true,
    );
    add(
        "create agent-transcripts/new.jsonl",
        "create",
        "agent-transcripts/new.jsonl",
        "",
        true,
        true,
    );
    add(
        "write agent-transcripts/run",
        "write",
        "agent-transcripts/run",
        "{\"type\":\"x\"}\n",
        true,
        true,
    );
    list
}

/// A host whose mount points nobody can reach (the state and runtime
/// directories stay the daemon's, 0700); none when not run as root and
/// `SESSIONFS_SKIP_ROOT=1` skips the test.
fn host_for_nobody(test: &str) -> Option<Host> {
    if !require_root(test, "mounts for root and acts as nobody") {
        return None;
    }
    let host = Host::new();
    std::fs::set_permissions(host.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    Some(host)
}

#[test]
fn another_user_is_refused_everything_without_allow_other_and_every_change_with_it() {
    let Some(host) = host_for_nobody(
        "another_user_is_refused_everything_without_allow_other_and_every_change_with_it",
    ) else {
        return;
    };
    let id = "13131313-2424-3535-4646-575757575757";
    let store = host.path(&format!("claude/projects/-p/{id}.jsonl"));
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    let shape = sessionfs::transcript::testgen::Shape::new(3, 1);
    std::fs::write(&store, sessionfs::transcript::testgen::claude(&shape)).unwrap();
    let claude_root = host.path("claude");
    let host = host.with_env("CLAUDE_CONFIG_DIR", claude_root.to_str().unwrap());
    let open = host.mount_with("open", &["-o", "allow_other"]);
    let closed = host.mount("closed");

    // Something of every kind, made by the owner.
    let key = "shell:mine";
    let transcript = format!("claude:{id}");
    std::fs::create_dir(open.path(key)).unwrap();
    open.type_line(key, "echo sec''ret");
    open.wait_output_line(key, "secret");
    sh_ok(&format!("echo p > {}", open.q(&format!("{key}/project"))));
    sh_ok(&format!("echo 1 > {}", open.q(&format!("{key}/favourite"))));
    sh_ok(&format!(
        "echo hidden > {}",
        open.q(&format!("{key}/.scratch.swp"))
    ));
    let world = "slots/0f8fad5b-d9cb-469f-a165-70867728950e";
    std::fs::create_dir_all(open.path(world)).unwrap();
    std::fs::write(open.path(&format!("{world}/1")), "{\"sessionId\":\"s1\"}\n").unwrap();
    std::fs::write(
        open.path("agent-transcripts/run-p.jsonl"),
        "{\"type\":\"text\",\"text\":\"hi\"}\n",
    )
    .unwrap();
    let sidecar = host.path("state/sessionfs");
    let sidecar_before = sidecar_bytes(&sidecar);
    let scroll_before = std::fs::read(open.path(&format!("{key}/scrollback"))).unwrap();

    // Without allow_other the kernel refuses the other user everything.
    let refused = tries(&closed, key, &transcript);
    let ops: Vec<_> = refused
        .iter()
        .map(|t| (t.op.to_string(), t.path.clone(), t.data.clone()))
        .collect();
    for (t, errno) in refused.iter().zip(as_other(&ops)) {
        assert_eq!(
            errno,
            libc::EACCES,
            "without allow_other, {} gave {}",
            t.what,
            name(errno)
        );
    }

    // With allow_other: every change and every private file is refused;
    // what the other user may read is reported.
    let allowed = tries(&open, key, &transcript);
    let ops: Vec<_> = allowed
        .iter()
        .map(|t| (t.op.to_string(), t.path.clone(), t.data.clone()))
        .collect();
    let mut report = String::new();
    for (t, errno) in allowed.iter().zip(as_other(&ops)) {
        report += &format!("  {:40} {}\n", t.what, name(errno));
        if t.changes || t.private {
            // `slots/GUID` exists for every GUID: its mkdir is EEXIST first.
            let exists = t.op == "mkdir" && t.what.starts_with("mkdir slots/");
            assert!(
                errno == libc::EACCES || errno == libc::EPERM || (exists && errno == libc::EEXIST),
                "with allow_other, another user's {} gave {}",
                t.what,
                name(errno)
            );
        }
    }
    eprintln!("another user with allow_other:\n{report}");

    // Nothing the other user tried changed anything.
    assert_eq!(sidecar_bytes(&sidecar), sidecar_before);
    assert_eq!(open.read(&format!("{key}/title")), "\n");
    assert_eq!(status_of(&open, key)["state"], "live");
    let scroll = std::fs::read(open.path(&format!("{key}/scrollback"))).unwrap();
    assert!(
        !String::from_utf8_lossy(&scroll).contains("from-nobody"),
        "another user typed into the session"
    );
    assert!(scroll.starts_with(&scroll_before[..scroll_before.len().min(16)]));
    assert!(!open.path("shell:other").exists());

    // The daemon's own directories and sockets are private.
    let s = status_of(&open, key);
    let socket = Path::new(s["socket"].as_str().unwrap());
    let lock = Path::new(s["lock"].as_str().unwrap());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    // dtach sets the owner's execute bit while a client is attached.
    assert_eq!(mode(socket) & 0o077, 0, "the socket is {:o}", mode(socket));
    for dir in [
        socket.parent().unwrap(),
        lock.parent().unwrap(),
        host.path("state/sessionfs").as_path(),
    ] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    let probes = vec![
        (
            "connect".to_string(),
            socket.to_string_lossy().into_owned(),
            String::new(),
        ),
        (
            "read".to_string(),
            sidecar.to_string_lossy().into_owned(),
            String::new(),
        ),
        (
            "write".to_string(),
            lock.to_string_lossy().into_owned(),
            "x".to_string(),
        ),
    ];
    assert_eq!(as_other(&probes), vec![libc::EACCES; 3]);
}

fn status_of(m: &Mount, key: &str) -> serde_json::Value {
    m.json(&format!("{key}/status"))
}

#[test]
fn a_runtime_or_lock_directory_open_to_others_is_refused_with_one_clear_line() {
    for (what, dir) in [
        ("runtime", "run/sessionfs"),
        ("lock", "run/sessionfs/locks"),
    ] {
        let host = Host::new();
        let open = host.path(dir);
        std::fs::create_dir_all(&open).unwrap();
        std::fs::set_permissions(host.path("run/sessionfs"), PermissionsExt::from_mode(0o700))
            .unwrap();
        std::fs::set_permissions(&open, PermissionsExt::from_mode(0o755)).unwrap();
        let mnt = host.path("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_sessionfs"))
            .arg("mount")
            .arg(&mnt)
            .env("HOME", host.path("home"))
            .env("XDG_STATE_HOME", host.path("state"))
            .env("XDG_RUNTIME_DIR", host.path("run"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: mounted anyway");
        assert!(
            err.contains(&format!(
                "{} is open to other users (mode 755)",
                open.display()
            )),
            "{what}: {err}"
        );
        assert!(!is_mounted(&mnt), "{what}: left a mount behind");
        let mode = std::fs::metadata(&open).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o755, "{what}: the directory was changed");
    }
}

#[test]
fn under_allow_other_files_are_the_owners_alone_unless_shared_for_reading() {
    let Some(host) =
        host_for_nobody("under_allow_other_files_are_the_owners_alone_unless_shared_for_reading")
    else {
        return;
    };
    let private = host.mount_with("private", &["-o", "allow_other"]);
    let shared = host.mount_with("shared", &["-o", "allow_other,share=read"]);
    let key = "shell:secret";
    std::fs::create_dir(private.path(key)).unwrap();
    private.type_line(key, "echo tok''en");
    private.wait_output_line(key, "token");

    let reads = |m: &Mount| -> Vec<(String, String, String)> {
        let mut ops: Vec<(String, String, String)> =
            ["scrollback", "screen", "status", "meta.json", "title"]
                .iter()
                .map(|f| {
                    (
                        "read".into(),
                        m.path(&format!("{key}/{f}")).to_string_lossy().into_owned(),
                        String::new(),
                    )
                })
                .collect();
        ops.push((
            "read".into(),
            m.path("sessions.json").to_string_lossy().into_owned(),
            String::new(),
        ));
        ops.push((
            "readdir".into(),
            m.path("").to_string_lossy().into_owned(),
            String::new(),
        ));
        ops.push((
            "readdir".into(),
            m.path(key).to_string_lossy().into_owned(),
            String::new(),
        ));
        ops
    };
    let writes = |m: &Mount| -> Vec<(String, String, String)> {
        vec![
            (
                "write".into(),
                m.path(&format!("{key}/title"))
                    .to_string_lossy()
                    .into_owned(),
                "x\n".into(),
            ),
            (
                "write".into(),
                m.path(&format!("{key}/input"))
                    .to_string_lossy()
                    .into_owned(),
                "echo from-nobody\n".into(),
            ),
            (
                "mkdir".into(),
                m.path("shell:nobodys").to_string_lossy().into_owned(),
                String::new(),
            ),
        ]
    };
    // Private (the default): nothing is readable by another user, not even the listing.
    let ops = reads(&private);
    for (op, errno) in ops.iter().zip(as_other(&ops)) {
        assert_eq!(
            errno,
            libc::EACCES,
            "private: {} {} gave {}",
            op.0,
            op.1,
            name(errno)
        );
    }
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&private.path(&format!("{key}/scrollback"))), 0o400);
    assert_eq!(mode(&private.path(&format!("{key}/meta.json"))), 0o600);
    assert_eq!(mode(&private.path(key)), 0o700);

    // share=read: reading and listing open up; writing never does.
    let ops = reads(&shared);
    for (op, errno) in ops.iter().zip(as_other(&ops)) {
        assert_eq!(errno, 0, "shared: {} {} gave {}", op.0, op.1, name(errno));
    }
    let ops = writes(&shared);
    for (op, errno) in ops.iter().zip(as_other(&ops)) {
        assert_eq!(
            errno,
            libc::EACCES,
            "shared: {} {} gave {}",
            op.0,
            op.1,
            name(errno)
        );
    }
    assert_eq!(mode(&shared.path(&format!("{key}/meta.json"))), 0o644);
    assert_eq!(mode(&shared.path(key)), 0o755);
    assert_eq!(private.read(&format!("{key}/title")), "\n");
    assert!(!private.path("shell:nobodys").exists());
}
