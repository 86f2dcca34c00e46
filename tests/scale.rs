//! Many conversations through the real mount: the root, `sessions.json`
//! and `sessionfs ls` list them alike; `created` comes from the stores;
//! one `ls` of a big directory is not disturbed by sessions made during it.

mod common;

use common::{sh_ok, wait_for, Host};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

const N: usize = 10_000;
const PROJECTS: usize = 50;
/// 2026-01-01T00:00:00Z.
const BASE_MS: u64 = 1_767_225_600_000;

fn id_of(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-{i:012x}")
}

fn rfc3339(ms: u64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .unwrap();
    format!(
        "{}.{:03}Z",
        String::from_utf8(out.stdout).unwrap().trim(),
        ms % 1000
    )
}

/// `n` Claude conversations in `PROJECTS` project folders. Conversation `i`
/// starts at `BASE + i minutes` and was last written 30 s later, so the
/// newest is the last one.
fn generate(claude_root: &Path, n: usize) {
    let t0 = rfc3339(BASE_MS);
    for i in 0..n {
        let dir = claude_root.join(format!("projects/-work-p{}", i % PROJECTS));
        std::fs::create_dir_all(&dir).unwrap();
        let id = id_of(i);
        let created = BASE_MS + i as u64 * 60_000;
        // The first row's time, written as the store does; only its offset
        // from t0 varies, which keeps generation fast.
        let ts = t0.replace(
            "2026-01-01T00:00:00",
            &format!(
                "2026-01-{:02}T{:02}:{:02}:00",
                1 + i / 1440,
                (i / 60) % 24,
                i % 60
            ),
        );
        let body = format!(
            concat!(
                r#"{{"type":"user","sessionId":"{id}","cwd":"/work/p{p}","timestamp":"{ts}","uuid":"u{i}","message":{{"role":"user","content":"prompt number {i}"}}}}"#,
                "\n",
                r#"{{"type":"assistant","sessionId":"{id}","timestamp":"{ts}","uuid":"a{i}","message":{{"role":"assistant","content":[{{"type":"text","text":"reply {i}"}}]}}}}"#,
                "\n"
            ),
            id = id,
            p = i % PROJECTS,
            ts = ts,
            i = i
        );
        let path = dir.join(format!("{id}.jsonl"));
        std::fs::write(&path, body).unwrap();
        let f = std::fs::File::options().append(true).open(&path).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_millis(created + 30_000))
            .unwrap();
    }
}

fn host_with(n: usize) -> Host {
    let host = Host::new();
    generate(&host.path("claude"), n);
    let root = host.path("claude");
    let codex = host.path("codex");
    host.with_env("CLAUDE_CONFIG_DIR", root.to_str().unwrap())
        .with_env("CODEX_HOME", codex.to_str().unwrap())
}

fn session_names(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|l| l.contains(':'))
        .map(str::to_string)
        .collect()
}

fn keys_of(doc: &Value) -> Vec<String> {
    doc["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect()
}

/// The environment that makes `sessionfs ls` see this host's state.
fn cli_env(host: &Host) -> String {
    format!(
        "HOME='{}' XDG_STATE_HOME='{}' XDG_RUNTIME_DIR='{}' CLAUDE_CONFIG_DIR='{}' CODEX_HOME='{}'",
        host.path("home").display(),
        host.path("state").display(),
        host.path("run").display(),
        host.path("claude").display(),
        host.path("codex").display(),
    )
}

#[test]
fn ten_thousand_conversations_list_alike_everywhere_with_created_from_the_store() {
    let host = host_with(N);
    let m = host.mount("mnt");

    // Directory order is listing order: newest activity first.
    let root = session_names(&sh_ok(&format!("ls -f {}", m.q(""))));
    let expected: Vec<String> = (0..N)
        .rev()
        .map(|i| format!("claude:{}", id_of(i)))
        .collect();
    assert_eq!(root.len(), N);
    assert_eq!(root, expected);
    let sorted = session_names(&sh_ok(&format!("ls {}", m.q(""))));
    let mut by_name = expected.clone();
    by_name.sort();
    assert_eq!(sorted, by_name);

    // The counter has read every store (it began at the mount), so the
    // listing and each meta.json are of one count.
    wait_for(60, "usage counted", || {
        m.json("status")["usage"]["settled"] == true
    });
    let json = m.json("sessions.json");
    assert_eq!(json["total"], N);
    assert_eq!(keys_of(&json), root);
    assert_eq!(json["facets"]["engines"]["claude"], N);

    let env = cli_env(&host);
    let bin = env!("CARGO_BIN_EXE_sessionfs");
    let cli: Value = serde_json::from_str(&sh_ok(&format!("{env} {bin} ls --json"))).unwrap();
    assert_eq!(keys_of(&cli), root);
    assert_eq!(cli["facets"], json["facets"]);
    let page: Value = serde_json::from_str(&sh_ok(&format!(
        "{env} {bin} ls --json --limit 20 --offset 100"
    )))
    .unwrap();
    assert_eq!(keys_of(&page), root[100..120]);

    // `created` is the store's first row, in meta.json and sessions.json alike.
    let sessions = json["sessions"].as_array().unwrap();
    for i in [0, 1, 777, N / 2, N - 1] {
        let key = format!("claude:{}", id_of(i));
        let created = rfc3339(BASE_MS + i as u64 * 60_000);
        let meta = m.json(&format!("{key}/meta.json"));
        assert_eq!(meta["created"], created.as_str(), "{meta}");
        assert_eq!(meta["title"], format!("prompt number {i}"));
        assert_eq!(meta["workspace"], format!("/work/p{}", i % PROJECTS));
        assert_eq!(
            meta["last_activity"],
            rfc3339(BASE_MS + i as u64 * 60_000 + 30_000)
        );
        let listed = sessions.iter().find(|s| s["key"] == key.as_str()).unwrap();
        assert_eq!(listed, &meta, "sessions.json and meta.json differ");
    }
    assert!(sessions
        .iter()
        .all(|s| s["created"] != "1970-01-01T00:00:00.000Z"));

    // A view of them all, looked up one by one (`ls -l` stats each link).
    let links = sh_ok(&format!("ls -l {}", m.q("engines/claude")));
    assert_eq!(
        links
            .lines()
            .filter(|l| l.contains(" -> ../../claude:"))
            .count(),
        N
    );

    // Nothing per session was made for listing: no session is live, and
    // the daemon stayed small.
    for i in [3, 4] {
        let key = format!("claude:{}", id_of(i));
        let status = m.json(&format!("{key}/status"));
        assert_eq!(status["state"], "stopped");
        m.read(&format!("{key}/screen"));
        m.read(&format!("{key}/title"));
        // `ls -l` stats every file, `scrollback` too.
        sh_ok(&format!("ls -l {} >/dev/null", m.q(&key)));
        assert_eq!(
            sh_ok(&format!("stat -c %s {}", m.q(&format!("{key}/scrollback")))),
            "0\n"
        );
    }
    // Reading every session's scrollback (`grep -r` does) keeps none of
    // the runtimes it makes, once the reader closed.
    let grep = common::sh(&format!(
        "cd {} && grep -r --include=scrollback -l . claude:* | wc -l",
        m.q("")
    ));
    assert!(grep.status.success(), "{grep:?}");
    // The kernel sends a file's release after close() returns, so the
    // last runtime may still be going a moment after grep ended.
    let mut status = m.json("status");
    common::wait_until(10, || {
        status = m.json("status");
        status["runtimes"] == 0
    });
    assert_eq!(status["live"], serde_json::json!([]));
    assert_eq!(status["sessions"], N);
    assert_eq!(status["runtimes"], 0, "{status}");
    let rss_kib: u64 = std::fs::read_to_string(format!("/proc/{}/status", m.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert!(rss_kib < 128 * 1024, "daemon RSS {rss_kib} KiB");
}

#[test]
fn a_restart_reads_no_conversation_again() {
    let host = host_with(500);
    let mut m = host.mount("mnt");
    wait_for(30, "every summary saved", || {
        let c = &m.json("status")["catalog"];
        c["summarised"] == 500 && c["saved"] == true
    });
    m.terminate();
    let m = host.mount("mnt2");
    let status = m.json("status");
    assert_eq!(status["catalog"]["conversations"], 500);
    assert_eq!(status["catalog"]["summarised"], 500);
    let json = m.json("sessions.json");
    assert_eq!(json["total"], 500);
    assert_eq!(m.json("status")["catalog"]["files_read"], 0);
}

#[test]
fn readdir_offsets_hold_while_sessions_are_made_during_one_ls() {
    let host = host_with(N);
    let m = host.mount("mnt");
    let before: Vec<String> = session_names(&sh_ok(&format!("ls -f {}", m.q(""))));
    assert_eq!(before.len(), N);

    // One directory stream, read in small steps; between steps new
    // sessions appear, each sorting first (newest activity), which would
    // shift every later offset of a listing made per call.
    let mut seen = Vec::new();
    let mut made = 0;
    for entry in std::fs::read_dir(m.path("")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.contains(':') {
            seen.push(name);
        }
        if seen.len() % 500 == 1 && made < 40 {
            for _ in 0..4 {
                sh_ok(&format!("mkdir {}", m.q(&format!("shell:new-{made}"))));
                made += 1;
            }
        }
    }
    assert_eq!(made, 40);
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "an entry came twice");
    for key in &before {
        assert!(unique.contains(key), "{key} went missing during the ls");
    }
    // The stream showed the directory as it was when opened.
    assert_eq!(seen, before);
    // A new listing shows the new sessions, first.
    let after = session_names(&sh_ok(&format!("ls -f {}", m.q(""))));
    assert_eq!(after.len(), N + 40);
    assert!(after[..40].iter().all(|k| k.starts_with("shell:new-")));
}

#[test]
fn sessionfs_ls_asks_the_daemon_that_knows_the_live_sessions() {
    let host = host_with(20);
    let m = host.mount("mnt");
    // `old` is made first, then `new`; typing into `old` makes it the
    // newest activity, which only the daemon knows.
    sh_ok(&format!("mkdir {}", m.q("shell:old")));
    std::thread::sleep(Duration::from_millis(20));
    m.live_shell("shell:new");
    // `new` prints its prompt after its first command; from then on it is
    // quiet, so no late output of its own can make it the newest again.
    wait_for(10, "shell:new's prompt after its first command", || {
        let text = m.read("shell:new/scrollback");
        text.rsplit("ready")
            .next()
            .is_some_and(|after| !after.trim().is_empty())
    });
    m.type_line("shell:old", "echo typed");
    m.wait_output_line("shell:old", "typed");

    let json = m.json("sessions.json");
    let keys = keys_of(&json);
    assert_eq!(&keys[..2], ["shell:old", "shell:new"], "{json}");
    let env = cli_env(&host);
    let bin = env!("CARGO_BIN_EXE_sessionfs");
    // The same document, byte for byte, as the mount serves it (once the
    // shell's prompt, which counts as activity, has been printed).
    let mut cli_text = String::new();
    wait_for(10, "sessionfs ls --json to equal sessions.json", || {
        cli_text = sh_ok(&format!("{env} {bin} ls --json"));
        cli_text.trim_end() == m.read("sessions.json").trim_end()
    });
    let cli: Value = serde_json::from_str(&cli_text).unwrap();
    assert_eq!(keys_of(&cli), keys);
    let old = &cli["sessions"][0];
    assert_eq!(old["state"], "live");
    let page: Value =
        serde_json::from_str(&sh_ok(&format!("{env} {bin} ls --json --engine shell"))).unwrap();
    assert_eq!(keys_of(&page), ["shell:old", "shell:new"]);
    assert_eq!(page["facets"], json["facets"]);
}

#[test]
fn a_view_of_a_project_is_walked_without_listing_while_a_session_talks() {
    const LINKS: usize = 1_000;
    // The debug log tells each listing gathered.
    let host = Host::new().with_env("RUST_LOG", "debug");
    // Records with a project, as `echo web > KEY/project` leaves them.
    let sessions: serde_json::Map<String, Value> = (0..LINKS * 2)
        .map(|i| {
            let project = if i % 2 == 0 { "web" } else { "api" };
            let meta = serde_json::json!({"created_ms": BASE_MS + i as u64, "project": project});
            (format!("shell:s{i}"), meta)
        })
        .collect();
    let state = host.path("state/sessionfs");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(
        state.join("sidecar.json"),
        serde_json::to_vec(&serde_json::json!({ "sessions": sessions })).unwrap(),
    )
    .unwrap();
    let m = host.mount("mnt");
    // A session printing a line every 2 ms: the listing changes all along.
    m.live_shell("shell:talker");
    m.type_line("shell:talker", "while :; do echo tick; sleep 0.002; done");
    m.wait_output_line("shell:talker", "tick");
    let scrollback = m.q("shell:talker/scrollback");
    let size = || -> u64 {
        sh_ok(&format!("stat -c %s {scrollback}"))
            .trim()
            .parse()
            .unwrap()
    };

    let gathered = || m.log_text().matches("listing: gathered").count();
    let (before, talked) = (gathered(), size());
    let links = sh_ok(&format!("ls -l {}", m.q("projects/web")));
    let (after, talked_since) = (gathered(), size());
    assert_eq!(
        links
            .lines()
            .filter(|l| l.contains(" -> ../../shell:s"))
            .count(),
        LINKS
    );
    assert!(talked_since > talked, "the session talked during the ls");
    // The directory's listing, and the views' members taken again at most
    // once; none per link, however often the session printed meanwhile.
    let gathers = after - before;
    assert!(gathers <= 2, "{gathers} listings gathered for one ls -l");
}
