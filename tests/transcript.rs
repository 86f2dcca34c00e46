//! The agents' own conversations through a real mount: discovery, pages,
//! caps, what is never shown, and resuming a discovered conversation.

mod common;

use common::*;
use sessionfs::transcript::testgen::{claude, codex, Shape};
use std::path::{Path, PathBuf};

const CLAUDE_ID: &str = "11111111-2222-3333-4444-555555555555";
const CODEX_ID: &str = "019e0000-0000-7000-8000-000000000000";

/// Lays out generated stores as the agents do, under the host's directory.
fn write_stores(host: &Host, turns: usize, huge_line: Option<usize>) -> (PathBuf, PathBuf) {
    let mut shape = Shape::new(turns, 7);
    shape.huge_line = huge_line;
    shape.half_line = true;
    let claude_file = host.path(&format!("claude/projects/-work-proj/{CLAUDE_ID}.jsonl"));
    std::fs::create_dir_all(claude_file.parent().unwrap()).unwrap();
    std::fs::write(&claude_file, claude(&shape)).unwrap();
    let codex_file = host.path(&format!(
        "codex/sessions/2026/01/01/rollout-2026-01-01T00-00-00-{CODEX_ID}.jsonl"
    ));
    std::fs::create_dir_all(codex_file.parent().unwrap()).unwrap();
    std::fs::write(&codex_file, codex(&shape)).unwrap();
    (claude_file, codex_file)
}

fn store_host() -> Host {
    let host = Host::new();
    let claude_root = host.path("claude");
    let codex_root = host.path("codex");
    host.with_env("CLAUDE_CONFIG_DIR", claude_root.to_str().unwrap())
        .with_env("CODEX_HOME", codex_root.to_str().unwrap())
}

/// The `prompt #K` numbers a page shows, in order.
fn prompts(page: &str) -> Vec<usize> {
    page.lines()
        .filter_map(|l| l.strip_prefix("> ").or_else(|| l.strip_prefix("> /run ")))
        .filter_map(|l| l.trim_start_matches("/run ").strip_prefix("prompt #"))
        .filter_map(|n| n.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .collect()
}

#[test]
fn pages_hold_exactly_their_turns_and_show_nothing_injected() {
    let host = store_host();
    write_stores(&host, 120, Some(40 << 20));
    let m = host.mount("mnt");
    let root = sh_ok(&format!("ls {}", m.q("")));
    for key in [format!("claude:{CLAUDE_ID}"), format!("codex:{CODEX_ID}")] {
        assert!(root.lines().any(|l| l == key), "{key} not listed: {root}");
        let dir = format!("{key}/transcript");
        let listing = sh_ok(&format!("ls {}", m.q(&dir)));
        assert_eq!(
            listing.lines().collect::<Vec<_>>(),
            vec!["last", "latest", "page-0", "page-1", "page-2"],
            "{key}"
        );
        assert_eq!(
            sh_ok(&format!("readlink {}", m.q(&format!("{dir}/latest")))).trim(),
            "page-2"
        );
        for n in 0..3 {
            let page = sh_ok(&format!("cat {}", m.q(&format!("{dir}/page-{n}"))));
            let want: Vec<usize> = (n * 50..((n + 1) * 50).min(120)).collect();
            assert_eq!(prompts(&page), want, "{key} page-{n}");
            assert!(
                !page.contains("INJECTED"),
                "{key} page-{n} shows injected text"
            );
            assert!(
                !page.contains("SIDECHAIN"),
                "{key} page-{n} shows a sidechain"
            );
            // Each visible reply once (Codex records it twice in its store).
            let reply = if key.starts_with("codex") {
                "text"
            } else {
                "done"
            };
            for k in want {
                let shown = page.matches(&format!("reply #{k} {reply}")).count();
                assert_eq!(shown, 1, "{key}: reply #{k} shown {shown} times");
            }
            // stat agrees with what cat read.
            let size: usize = sh_ok(&format!("stat -c %s {}", m.q(&format!("{dir}/page-{n}"))))
                .trim()
                .parse()
                .unwrap();
            assert_eq!(size, page.len());
        }
        let latest = sh_ok(&format!("cat {}", m.q(&format!("{dir}/latest"))));
        assert_eq!(prompts(&latest), (100..120).collect::<Vec<_>>());
        let out = sh(&format!("cat {}", m.q(&format!("{dir}/page-3"))));
        assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
        // The 40 MiB line is cut to a few lines, not poured out.
        let first = sh_ok(&format!("cat {}", m.q(&format!("{dir}/page-0"))));
        assert!(first.len() < 4 << 20, "page-0 is {} bytes", first.len());
    }
    let meta = m.json(&format!("claude:{CLAUDE_ID}/meta.json"));
    assert!(meta["title"].is_string(), "{meta}");
    assert_eq!(meta["workspace"], "/work/proj");
}

#[test]
fn caps_cut_the_rendered_page_with_a_marker_and_never_move_the_cursor() {
    let host = store_host()
        .with_env("AGENT_SESSIONS_TRANSCRIPT_MAX_LINES", "40")
        .with_env("AGENT_SESSIONS_HISTORY_PAGE_TURNS", "20");
    write_stores(&host, 60, None);
    let m = host.mount("mnt");
    for key in [format!("claude:{CLAUDE_ID}"), format!("codex:{CODEX_ID}")] {
        let dir = format!("{key}/transcript");
        let listing = sh_ok(&format!("ls {}", m.q(&dir)));
        assert_eq!(
            listing.lines().count(),
            5,
            "{key}: three pages, latest and last"
        );
        for n in 0..3usize {
            let page = m.read(&format!("{dir}/page-{n}"));
            assert!(
                page.contains("lines cut"),
                "{key} page-{n} has no marker:\n{page}"
            );
            assert!(page.lines().count() <= 41, "{key} page-{n}");
            let shown = prompts(&page);
            assert!(!shown.is_empty());
            // What is kept is the end of this page's turns, nothing from others.
            assert!(
                shown.iter().all(|k| (n * 20..(n + 1) * 20).contains(k)),
                "{key} page-{n}: {shown:?}"
            );
            assert_eq!(shown.last(), Some(&(n * 20 + 19)));
        }
    }
}

/// The recorded stores of all four engines, copied under the host's
/// directory (the tests never touch the repository's copy): Claude and
/// Codex as their roots, Gemini as `gemini-home/.gemini`, opencode as
/// `data/opencode`.
fn real_stores_host() -> Host {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real");
    let host = Host::new();
    for (from, to) in [
        ("claude", "claude"),
        ("codex", "codex"),
        ("gemini", "gemini-home/.gemini"),
        ("opencode", "data/opencode"),
    ] {
        std::fs::create_dir_all(host.path(to).parent().unwrap()).unwrap();
        sh_ok(&format!(
            "cp -r '{}' '{}'",
            real.join(from).display(),
            host.path(to).display()
        ));
    }
    let var = |name: &str| host.path(name).to_string_lossy().into_owned();
    let (claude, codex, gemini, data) =
        (var("claude"), var("codex"), var("gemini-home"), var("data"));
    host.with_env("CLAUDE_CONFIG_DIR", &claude)
        .with_env("CODEX_HOME", &codex)
        .with_env("GEMINI_CLI_HOME", &gemini)
        .with_env("XDG_DATA_HOME", &data)
}

#[test]
fn every_real_store_is_found_and_renders() {
    let host = real_stores_host();
    let m = host.mount("mnt");
    // 7 Claude conversations, 1 Codex, 2 Gemini, 4 opencode. The Gemini
    // headers and opencode's mirror are read by the catalog's thread after
    // the mount is ready: their conversations come as they are read.
    let expected = [
        ("claude:", 7),
        ("codex:", 1),
        ("gemini:", 2),
        ("opencode:", 4),
    ];
    let listed = || {
        let root = sh_ok(&format!("ls {}", m.q("")));
        let sessions: Vec<String> = root
            .lines()
            .filter(|l| l.contains(':'))
            .map(str::to_string)
            .collect();
        let counts: Vec<usize> = expected
            .iter()
            .map(|(engine, _)| sessions.iter().filter(|k| k.starts_with(engine)).count())
            .collect();
        (sessions, counts)
    };
    wait_for(20, "every recorded conversation listed", || {
        listed().1 == expected.map(|(_, n)| n)
    });
    let (sessions, _) = listed();
    for key in &sessions {
        let pages = sh_ok(&format!("ls {}", m.q(&format!("{key}/transcript"))));
        assert!(pages.contains("page-0"), "{key}: {pages}");
        for page in pages.lines() {
            let out = sh(&format!("cat {}", m.q(&format!("{key}/transcript/{page}"))));
            assert!(
                out.status.success() && !out.stdout.is_empty(),
                "{key}/{page}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let meta = m.json(&format!("{key}/meta.json"));
        assert!(meta["title"].is_string(), "{key} has no title");
    }
    let codex = m.read("codex:019e1625-789d-76c0-80ab-3724b5ddb799/transcript/latest");
    assert!(!codex.contains("<environment_context>"));
    let gemini = m.read("gemini:950dc958-6f78-402e-9c17-682235d87ebc/transcript/latest");
    assert!(gemini.contains("please runcmd now"), "{gemini}");
    assert!(!gemini.contains("session_context"), "{gemini}");
}

/// A corrupt row and a half-written last row in a Gemini file and a
/// message row whose data is not JSON in opencode's database: each is
/// skipped (the log names it), never fatal; the half-written row shows once
/// its line ends.
#[test]
fn corrupt_and_half_written_gemini_and_opencode_rows_are_skipped() {
    let host = real_stores_host();
    let gemini_file =
        host.path("gemini-home/.gemini/tmp/proj/chats/session-2026-12-02T17-12-1cfc1266.jsonl");
    let half = r#"{"id":"late-prompt","timestamp":"2026-12-02T18:00:00.000Z","type":"user","content":[{"text":"a prompt written late"}]}"#;
    let (first, rest) = half.split_at(40);
    let mut bytes = std::fs::read(&gemini_file).unwrap();
    bytes.extend_from_slice(b"{\"id\":\"x\",\"type\":\"user\",\"content\n\xff not json\n");
    bytes.extend_from_slice(first.as_bytes());
    std::fs::write(&gemini_file, &bytes).unwrap();
    let db = rusqlite::Connection::open(host.path("data/opencode/opencode.db")).unwrap();
    let (session, message): (String, String) = db
        .query_row(
            "SELECT session_id, id FROM message ORDER BY id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    db.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) \
         SELECT 'msg_zzzzcorrupt', session_id, time_created, time_updated, 'not json {' \
         FROM message WHERE id = ?1",
        [&message],
    )
    .unwrap();
    drop(db);

    let m = host.mount("mnt");
    let gemini = "gemini:1cfc1266-1670-4774-a8c6-20387a7cff4c";
    let opencode = format!("opencode:{session}");
    // Both are read by the catalog's thread after the mount is ready.
    wait_for(20, "both conversations listed", || {
        m.path(gemini).is_dir() && m.path(&opencode).is_dir()
    });
    let page = m.read(&format!("{gemini}/transcript/page-0"));
    assert!(!page.contains("a prompt written late"), "{page}");
    let page = m.read(&format!("{opencode}/transcript/page-0"));
    assert!(!page.contains("not json"), "{page}");
    assert!(page.lines().any(|l| l.starts_with("> ")), "{page}");
    let meta = m.json(&format!("{opencode}/meta.json"));
    assert_eq!(meta["title"], "Greeting", "{meta}");
    let log = m.log_text();
    assert!(
        log.contains("session-2026-12-02T17-12-1cfc1266.jsonl"),
        "{log}"
    );

    // The half-written row's line ends: it shows.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&gemini_file)
        .unwrap();
    std::io::Write::write_all(&mut f, format!("{rest}\n").as_bytes()).unwrap();
    drop(f);
    wait_for(20, "the late prompt", || {
        m.read(&format!("{gemini}/transcript/latest"))
            .contains("a prompt written late")
    });
}

/// A stand-in agent: records its argv and working directory, then echoes input.
fn stand_in(host: &Host) -> PathBuf {
    let path = host.path("fake-agent");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\npwd > '{}'\nexec cat\n",
            host.path("argv").display(),
            host.path("cwd").display()
        ),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", path.display()));
    path
}

#[test]
fn input_to_a_discovered_claude_conversation_resumes_it_in_its_workspace() {
    let host = store_host();
    let workspace = host.path("home/proj");
    std::fs::create_dir_all(&workspace).unwrap();
    let (claude_file, _) = write_stores(&host, 3, None);
    let text = std::fs::read_to_string(&claude_file).unwrap().replace(
        "\"cwd\":\"/work/proj\"",
        &format!("\"cwd\":\"{}\"", workspace.display()),
    );
    std::fs::write(&claude_file, text).unwrap();
    let agent = stand_in(&host);
    let host = host.with_env("SESSIONFS_ENGINE_CLAUDE", agent.to_str().unwrap());
    let m = host.mount("mnt");
    let key = format!("claude:{CLAUDE_ID}");
    sh_ok(&format!("echo hello > {}", m.q(&format!("{key}/input"))));
    wait_for(20, "the stand-in to start", || host.path("cwd").exists());
    assert_eq!(stand_in_args(&host), format!("--resume {CLAUDE_ID}"));
    assert_eq!(
        std::fs::read_to_string(host.path("cwd")).unwrap().trim(),
        workspace.to_str().unwrap()
    );
    m.wait_output(&key, "hello");
    assert_eq!(m.json(&format!("{key}/status"))["outcome"], "LAUNCH");

    // A new conversation gets a new id.
    let fresh = "22222222-3333-4444-5555-666666666666";
    std::fs::remove_file(host.path("argv")).unwrap();
    sh_ok(&format!("mkdir {}", m.q(&format!("claude:{fresh}"))));
    sh_ok(&format!(
        "echo open > {}",
        m.q(&format!("claude:{fresh}/ctl"))
    ));
    wait_for(20, "the second stand-in", || {
        host.path("argv").exists()
            && !std::fs::read_to_string(host.path("argv"))
                .unwrap()
                .is_empty()
    });
    assert_eq!(stand_in_args(&host), format!("--session-id {fresh}"));
}

#[test]
fn a_new_codex_session_is_bound_to_its_rollout_and_resumed_by_that_id() {
    let host = store_host();
    let rollout_id = "019eaaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee";
    let agent = codex_stand_in(&host, rollout_id);
    let host = host.with_env("SESSIONFS_ENGINE_CODEX", agent.to_str().unwrap());
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("codex:mine")));
    sh_ok(&format!("echo open > {}", m.q("codex:mine/ctl")));
    wait_for(20, "the transcript to show the rollout", || {
        sh(&format!("cat {}", m.q("codex:mine/transcript/latest")))
            .stdout
            .windows(24)
            .any(|w| w == b"prompt from the stand-in")
    });
    // The rollout is this session's, not a session of its own.
    let root = sh_ok(&format!("ls {}", m.q("")));
    assert!(!root.contains(rollout_id), "{root}");
    sh_ok(&format!("echo stop > {}", m.q("codex:mine/ctl")));
    sh_ok(&format!("echo open > {}", m.q("codex:mine/ctl")));
    wait_for(20, "the resume", || {
        std::fs::read_to_string(host.path("codex-argv")).is_ok_and(|a| a.lines().count() == 2)
    });
    let argv = std::fs::read_to_string(host.path("codex-argv")).unwrap();
    assert_eq!(
        argv.lines()
            .nth(1)
            .and_then(|l| l.split(" -c notify=").next()),
        Some(format!("resume {rollout_id}").as_str())
    );
}

#[test]
fn a_claude_conversation_resumed_under_a_new_id_stays_one_session() {
    let host = store_host();
    let (claude_file, _) = write_stores(&host, 2, None);
    let new_id = "33333333-4444-5555-6666-777777777777";
    let agent = host.path("fake-claude");
    std::fs::write(
        &agent,
        format!(
            r#"#!/bin/sh
f='{folder}/{new_id}.jsonl'
printf '{{"parentUuid":"u-1-9","sessionId":"{new_id}","cwd":"/work/proj","type":"user","message":{{"role":"user","content":"prompt after the resume"}},"uuid":"n1","timestamp":"2026-03-01T00:00:00.000Z"}}\n' > "$f"
exec cat
"#,
            folder = claude_file.parent().unwrap().display()
        ),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", agent.display()));
    // The stand-in's new file refers to the old conversation's leaf.
    let text = std::fs::read_to_string(&claude_file).unwrap();
    let leaf = text
        .rsplit("\"uuid\":\"")
        .next()
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    std::fs::write(
        &agent,
        std::fs::read_to_string(&agent)
            .unwrap()
            .replace("u-1-9", &leaf),
    )
    .unwrap();
    let host = host.with_env("SESSIONFS_ENGINE_CLAUDE", agent.to_str().unwrap());
    let m = host.mount("mnt");
    let key = format!("claude:{CLAUDE_ID}");
    sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
    wait_for(20, "the transcript to follow the new id", || {
        sh(&format!("cat {}", m.q(&format!("{key}/transcript/latest"))))
            .stdout
            .windows(23)
            .any(|w| w == b"prompt after the resume")
    });
    let root = sh_ok(&format!("ls {}", m.q("")));
    assert!(!root.contains(new_id), "{root}");
}

#[test]
fn corrupt_rewritten_and_deleted_stores_never_break_a_read() {
    let host = store_host();
    let (claude_file, _) = write_stores(&host, 60, None);
    // A corrupt line and a byte that is not UTF-8 in the middle.
    let mut bytes = std::fs::read(&claude_file).unwrap();
    bytes.extend_from_slice(
        b"{\"type\":\"user\",\"message\":{\"content\":\"cut\n\xff\xfe not json\n",
    );
    std::fs::write(&claude_file, &bytes).unwrap();
    let m = host.mount("mnt");
    let dir = format!("claude:{CLAUDE_ID}/transcript");
    assert_eq!(
        prompts(&m.read(&format!("{dir}/page-1"))),
        (50..60).collect::<Vec<_>>()
    );
    let log = m.log_text();
    assert!(
        log.contains(&claude_file.display().to_string()) && log.contains("line"),
        "the log names the file and the line:\n{log}"
    );
    // Rewritten shorter while mounted: the index is rebuilt.
    let mut shape = Shape::new(10, 3);
    shape.half_line = false;
    std::fs::write(&claude_file, claude(&shape)).unwrap();
    // page-0, latest and last.
    wait_for(20, "the rewritten store to show", || {
        sh_ok(&format!("ls {}", m.q(&dir))).lines().count() == 3
    });
    assert_eq!(
        prompts(&m.read(&format!("{dir}/page-0"))),
        (0..10).collect::<Vec<_>>()
    );
    let out = sh(&format!("cat {}", m.q(&format!("{dir}/page-1"))));
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
    // Deleted: the session goes, reads fail cleanly.
    std::fs::remove_file(&claude_file).unwrap();
    wait_for(20, "the deleted store's session to go", || {
        !m.path(&format!("claude:{CLAUDE_ID}")).exists()
    });
    let out = sh(&format!("timeout 10 cat {}", m.q(&format!("{dir}/page-0"))));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
}

#[test]
fn a_compressed_codex_rollout_is_found_and_rendered() {
    let host = store_host();
    let (_, codex_file) = write_stores(&host, 4, None);
    let plain = std::fs::read(&codex_file).unwrap();
    let zst = codex_file.with_extension("jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
    std::fs::remove_file(&codex_file).unwrap();
    let m = host.mount("mnt");
    let page = m.read(&format!("codex:{CODEX_ID}/transcript/page-0"));
    assert_eq!(prompts(&page), vec![0, 1, 2, 3]);
    assert!(!page.contains("INJECTED"));
    // The store is only read: the compressed file is as it was.
    assert!(zst.exists() && !codex_file.exists());
}

#[test]
fn a_line_over_the_cap_is_skipped_and_its_page_says_so() {
    let host = store_host();
    write_stores(&host, 4, Some(sessionfs::transcript::MAX_LINE_BYTES + 1024));
    let m = host.mount("mnt");
    for key in [format!("claude:{CLAUDE_ID}"), format!("codex:{CODEX_ID}")] {
        let page = m.read(&format!("{key}/transcript/page-0"));
        assert_eq!(prompts(&page), vec![0, 1, 2, 3], "{key}");
        assert!(!page.contains("huge"), "{key} shows the line");
        assert!(
            page.contains("of the store skipped") && page.contains("a line may have"),
            "{key} does not say what was skipped:\n{page}"
        );
    }
}

#[test]
fn a_rollout_that_decodes_past_the_cap_is_refused_with_a_reason_once() {
    use std::io::Write;
    let host = store_host();
    let (_, codex_file) = write_stores(&host, 4, None);
    let plain = std::fs::read(&codex_file).unwrap();
    let zst = codex_file.with_extension("jsonl.zst");
    // The rollout, then frames of blanks that decode to more than the cap.
    let frame = zstd::encode_all(&vec![b' '; 16 << 20][..], 1).unwrap();
    let mut out = std::fs::File::create(&zst).unwrap();
    out.write_all(&zstd::encode_all(&plain[..], 3).unwrap())
        .unwrap();
    let frames = sessionfs::catalog::MAX_DECODED_BYTES / (16 << 20) + 1;
    for _ in 0..frames {
        out.write_all(&frame).unwrap();
    }
    drop(out);
    std::fs::remove_file(&codex_file).unwrap();
    let m = host.mount("mnt");
    let page = format!("codex:{CODEX_ID}/transcript/page-0");
    for _ in 0..2 {
        let out = sh(&format!("cat {}", m.q(&page)));
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("File too large"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let error = m.json(&format!("codex:{CODEX_ID}/status"))["error"].to_string();
    assert!(
        error.contains("the most a decoded copy may hold"),
        "{error}"
    );
    let log = m.log_text();
    assert_eq!(
        log.matches("the most a decoded copy may hold").count(),
        1,
        "reported once:\n{log}"
    );
    // Nothing of it is left in the runtime directory; the rollout is as it was.
    let decoded = host.runtime_dir().join("decoded");
    let left: Vec<_> = std::fs::read_dir(&decoded)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    assert!(zst.exists());
}
