//! Organising sessions through a real mount (SPEC §4, §6, §8, §10): editors
//! on meta.json, the one-line files, archive, views and the listing.

mod common;

use common::*;
use serde_json::Value;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The session directory's names, sorted, hidden ones included.
fn listing_of(m: &Mount, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(m.path(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

const SESSION_FILES: [&str; 16] = [
    "archive",
    "ctl",
    "diff",
    "events",
    "favourite",
    "input",
    "meta.json",
    "project",
    "prompt",
    "screen",
    "scrollback",
    "state",
    "status",
    "title",
    "usage",
    "wait",
];

#[test]
fn every_common_editor_changes_metadata_and_leaves_no_litter() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:ed")));
    let dir = m.q("shell:ed");
    let meta = m.q("shell:ed/meta.json");
    let title = || m.json("shell:ed/meta.json")["title"].clone();

    sh_ok(&format!(
        "cd {dir} && vim -es -c '%s/\"title\": null/\"title\": \"by vim\"/' -c wq meta.json"
    ));
    assert_eq!(title(), "by vim");
    sh_ok(&format!("sed -i 's/by vim/by sed/' {meta}"));
    assert_eq!(title(), "by sed");
    sh_ok(&format!(
        "cd {dir} && jq '.title = \"by jq\"' meta.json > tmp && mv tmp meta.json"
    ));
    assert_eq!(title(), "by jq");
    sh_ok(&format!(
        "python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); d['title']='by python'; open(sys.argv[1],'w').write(json.dumps(d))\" {meta}"
    ));
    assert_eq!(title(), "by python");
    // nano and VS Code: open without truncating, truncate, write, fsync, close.
    sh_ok(&format!(
        "python3 -c \"
import json,os,sys
p=sys.argv[1]; d=json.load(open(p)); d['title']='in place'
f=os.open(p, os.O_WRONLY); os.ftruncate(f, 0); os.write(f, json.dumps(d, indent=2).encode()); os.fsync(f); os.close(f)\" {meta}"
    ));
    assert_eq!(title(), "in place");
    // emacs: lock symlink, backup by rename, write a new file, drop the lock.
    sh_ok(&format!(
        "python3 -c \"
import json,os,sys
d=sys.argv[1]; p=os.path.join(d,'meta.json'); doc=json.load(open(p)); doc['title']='by emacs'
os.symlink('user@host.1234:1', os.path.join(d,'.#meta.json'))
os.rename(p, p+'~')
f=os.open(p, os.O_WRONLY|os.O_CREAT|os.O_TRUNC, 0o600); os.write(f, json.dumps(doc).encode()); os.close(f)
assert os.readlink(os.path.join(d,'.#meta.json')) == 'user@host.1234:1'
os.unlink(os.path.join(d,'.#meta.json'))\" {dir}"
    ));
    assert_eq!(title(), "by emacs");
    assert_eq!(listing_of(&m, "shell:ed"), SESSION_FILES);
    // The saves carried ACLs over (EOPNOTSUPP, which they ignore): that is
    // nobody's mistake, so no warning and no reason in status.
    assert_eq!(m.json("shell:ed/status")["error"], Value::Null);
    let log = m.log_text();
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "{log}");

    // The one-line files.
    sh_ok(&format!("echo 'A plain title' > {}", m.q("shell:ed/title")));
    sh_ok(&format!("echo proj > {}", m.q("shell:ed/project")));
    sh_ok(&format!("echo 1 > {}", m.q("shell:ed/favourite")));
    let doc = m.json("shell:ed/meta.json");
    assert_eq!(doc["title"], "A plain title");
    assert_eq!(doc["project"], "proj");
    assert_eq!(doc["favourite"], true);
    assert_eq!(m.read("shell:ed/favourite"), "1\n");
    sh_ok(&format!("echo no > {}", m.q("shell:ed/favourite")));
    assert_eq!(m.read("shell:ed/favourite"), "0\n");
    assert_eq!(m.read("shell:ed/title"), "A plain title\n");
    // The sidecar holds it, not an engine's store, and it survives a restart.
    let sidecar = sidecar_records(&host.path("state/sessionfs"));
    assert_eq!(sidecar["shell:ed"]["title"], "A plain title");
}

/// An editor's scratch file held open, removed and made again under the
/// same name as another type of file (a symlink where a file was): the new
/// one has a number of its own, so the kernel does not take the old inode
/// for a broken one (EIO to its holder); the old descriptor is stale.
#[test]
fn a_scratch_name_made_again_as_a_symlink_leaves_a_held_descriptor_stale_not_broken() {
    use std::os::unix::fs::MetadataExt;
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:ed")));
    let lock = m.path("shell:ed/.#meta.json");
    let held = std::fs::File::create(&lock).unwrap();
    let first = held.metadata().unwrap().ino();
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink("root@host.1:1", &lock).unwrap();
    let link = std::fs::symlink_metadata(&lock).unwrap();
    assert!(link.file_type().is_symlink());
    assert_ne!(
        link.ino(),
        first,
        "the symlink took the removed file's number"
    );
    let err = held.metadata().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    drop(held);
    assert_eq!(
        std::fs::read_link(&lock).unwrap().to_str(),
        Some("root@host.1:1")
    );
    // Renamed away and made again: the same.
    let swap = m.path("shell:ed/.meta.json.swp");
    let held = std::fs::File::create(&swap).unwrap();
    std::fs::rename(&swap, m.path("shell:ed/.meta.json.swx")).unwrap();
    std::os::unix::fs::symlink("elsewhere", &swap).unwrap();
    let err = held.metadata().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    let log = m.log_text();
    assert!(!log.contains("internal error"), "{log}");
}

#[test]
fn bad_metadata_is_refused_with_the_reason_in_status_and_nothing_changes() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:bad")));
    sh_ok(&format!("echo keep > {}", m.q("shell:bad/title")));
    let before = m.json("shell:bad/meta.json");
    let meta = m.q("shell:bad/meta.json");
    let edit = |jq: &str| {
        sh(&format!("jq '{jq}' {meta} > /tmp/sfs-edit-$$ && cat /tmp/sfs-edit-$$ > {meta}; r=$?; rm -f /tmp/sfs-edit-$$; exit $r"))
    };
    for (what, out) in [
        ("invalid JSON", sh(&format!("echo '{{not json' > {meta}"))),
        ("a wrong type", edit(".favourite = \"maybe\"")),
        ("a read-only field", edit(".state = \"live\"")),
        ("a project with a slash", edit(".project = \"a/b\"")),
        ("a title with a newline", edit(".title = \"a\\nb\"")),
        ("an unknown field", edit(".colour = \"red\"")),
        (
            "garbage to favourite",
            sh(&format!("echo maybe > {}", m.q("shell:bad/favourite"))),
        ),
        (
            "a project with a newline",
            sh(&format!("printf 'a\\nb\\n' > {}", m.q("shell:bad/project"))),
        ),
    ] {
        assert!(
            stderr(&out).contains("Invalid argument"),
            "{what}: {}",
            stderr(&out)
        );
        let now = m.json("shell:bad/meta.json");
        for field in ["title", "project", "favourite", "archived", "workspace"] {
            assert_eq!(now[field], before[field], "{what} changed {field}");
        }
        let error = m.json("shell:bad/status")["error"].clone();
        assert!(error.is_string(), "{what}: no reason in status");
    }
    let huge = host.path("huge");
    std::fs::write(&huge, "t".repeat(10 << 20)).unwrap();
    let out = sh(&format!(
        "cat '{}' > {}",
        huge.display(),
        m.q("shell:bad/title")
    ));
    assert!(stderr(&out).contains("Invalid argument") || !out.status.success());
    assert_eq!(m.json("shell:bad/meta.json")["title"], "keep");
    assert_eq!(listing_of(&m, "shell:bad"), SESSION_FILES);
}

#[test]
fn archive_reaps_the_runtime_keeps_metadata_and_unarchive_launches_again() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:arc")));
    sh_ok(&format!("echo 'keep me' > {}", m.q("shell:arc/title")));
    let child = m.start_child("shell:arc");
    let status = m.json("shell:arc/status");
    let master = status["master_pid"].as_u64().unwrap() as u32;
    let agent = status["agent_pid"].as_u64().unwrap() as u32;
    let socket = status["socket"].as_str().unwrap().to_string();

    sh_ok(&format!("echo 1 > {}", m.q("shell:arc/archive")));
    for pid in [master, agent, child] {
        wait_for(20, &format!("pid {pid} to end"), || !alive(pid));
    }
    assert!(
        !std::path::Path::new(&socket).exists(),
        "the socket is left behind"
    );
    assert!(
        !m.path("shell:arc").exists(),
        "archived sessions leave the root"
    );
    assert!(m.path("archived/shell:arc").exists());
    // A shell's ring is its history: kept, compressed, with the archive.
    assert!(m.read("archived/shell:arc/scrollback").contains("child="));
    assert_eq!(m.read("archived/shell:arc/screen"), "");
    let meta = m.json("archived/shell:arc/meta.json");
    assert_eq!(meta["title"], "keep me");
    assert_eq!(meta["archived"], true);
    assert_eq!(m.json("archived/shell:arc/status")["state"], "archived");
    let out = sh(&format!("echo hi > {}", m.q("archived/shell:arc/input")));
    assert!(
        stderr(&out).contains("Operation not permitted"),
        "{}",
        stderr(&out)
    );
    assert!(host.masters().is_empty());

    // Unarchive with mv, then input: a clean LAUNCH.
    sh_ok(&format!("mv {} {}", m.q("archived/shell:arc"), m.q("")));
    m.type_line("shell:arc", "echo back-again");
    m.wait_output("shell:arc", "back-again");
    assert_eq!(m.json("shell:arc/status")["outcome"], "LAUNCH");
    assert_eq!(m.json("shell:arc/meta.json")["title"], "keep me");
    // And archive with mv.
    sh_ok(&format!("mv {} {}", m.q("shell:arc"), m.q("archived/")));
    assert!(m.path("archived/shell:arc").exists());
    wait_for(20, "the master to end", || host.masters().is_empty());
    let out = sh(&format!("rm -r {}", m.q("archived/shell:arc")));
    assert!(!out.status.success());
    assert!(m.path("archived/shell:arc/meta.json").exists());
}

#[test]
fn an_archived_claude_conversation_survives_its_engine_deleting_it() {
    let host = Host::new();
    let id = "44444444-5555-6666-7777-888888888888";
    let store = host.path(&format!("claude/projects/-p/{id}.jsonl"));
    std::fs::create_dir_all(store.parent().unwrap()).unwrap();
    let shape = sessionfs::transcript::testgen::Shape::new(3, 1);
    std::fs::write(&store, sessionfs::transcript::testgen::claude(&shape)).unwrap();
    let agent = host.path("fake-claude");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nexec cat\n",
            host.path("argv").display()
        ),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", agent.display()));
    let claude_root = host.path("claude");
    let host = host
        .with_env("CLAUDE_CONFIG_DIR", claude_root.to_str().unwrap())
        .with_env("SESSIONFS_ENGINE_CLAUDE", agent.to_str().unwrap());
    let m = host.mount("mnt");
    let key = format!("claude:{id}");
    let page_before = m.read(&format!("{key}/transcript/page-0"));
    assert!(page_before.contains("prompt #2"));
    sh_ok(&format!("echo 1 > {}", m.q(&format!("{key}/archive"))));
    std::fs::remove_file(&store).unwrap();
    // Still listed, still readable.
    assert_eq!(
        m.read(&format!("archived/{key}/transcript/page-0")),
        page_before
    );
    sh_ok(&format!(
        "echo 0 > {}",
        m.q(&format!("archived/{key}/archive"))
    ));
    sh_ok(&format!("echo open > {}", m.q(&format!("{key}/ctl"))));
    // The file exists as soon as the shell opens it for `>>`: wait for the line.
    wait_for(20, "the stand-in's arguments", || {
        std::fs::read_to_string(host.path("argv")).is_ok_and(|t| t.ends_with('\n'))
    });
    assert_eq!(stand_in_args(&host), format!("--resume {id}"));
    assert!(
        store.exists(),
        "the conversation is back where the engine resumes it from"
    );
}

#[test]
fn an_edit_through_one_daemon_is_seen_through_the_other() {
    let host = Host::new();
    let a = host.mount("a");
    let b = host.mount("b");
    sh_ok(&format!("mkdir {}", a.q("shell:two")));
    sh_ok(&format!("echo 'from a' > {}", a.q("shell:two/title")));
    wait_for(20, "b to see a's title", || {
        b.read("shell:two/title") == "from a\n"
    });
    sh_ok(&format!("echo 1 > {}", b.q("shell:two/favourite")));
    wait_for(20, "a to see b's favourite", || {
        a.json("shell:two/meta.json")["favourite"] == true
    });
    assert_eq!(a.json("shell:two/meta.json")["title"], "from a");
}

#[test]
fn listing_views_sessions_json_and_the_command_line_agree() {
    let host = Host::new();
    let m = host.mount("mnt");
    for (key, project) in [
        ("shell:one", "alpha"),
        ("shell:two", "beta"),
        ("shell:three", "alpha"),
        ("shell:four", ""),
    ] {
        sh_ok(&format!("mkdir {}", m.q(key)));
        if !project.is_empty() {
            sh_ok(&format!(
                "echo {project} > {}",
                m.q(&format!("{key}/project"))
            ));
        }
    }
    // Newest activity first: type into one and two, two last.
    m.type_line("shell:one", "echo one");
    m.wait_output_line("shell:one", "one");
    m.type_line("shell:two", "echo two");
    m.wait_output_line("shell:two", "two");
    sh_ok(&format!("echo 1 > {}", m.q("shell:four/favourite")));
    sh_ok(&format!("echo 1 > {}", m.q("shell:three/archive")));

    let root: Vec<String> = sh_ok(&format!("ls -U {}", m.q("")))
        .lines()
        .filter(|l| l.contains(':'))
        .map(str::to_string)
        .collect();
    assert_eq!(root[0], "shell:four", "favourites first: {root:?}");
    assert_eq!(
        &root[1..3],
        ["shell:two", "shell:one"],
        "then newest activity: {root:?}"
    );
    assert!(!root.contains(&"shell:three".to_string()));

    let json = m.json("sessions.json");
    let keys: Vec<&str> = json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, root);
    assert_eq!(json["total"], 3);
    assert_eq!(json["facets"]["projects"]["alpha"], 1);
    assert_eq!(json["facets"]["engines"]["shell"], 3);

    let env = format!(
        "HOME='{}' XDG_STATE_HOME='{}' XDG_RUNTIME_DIR='{}'",
        host.path("home").display(),
        host.path("state").display(),
        host.path("run").display()
    );
    let bin = env!("CARGO_BIN_EXE_sessionfs");
    let cli: Value = serde_json::from_str(&sh_ok(&format!("{env} {bin} ls --json"))).unwrap();
    assert_eq!(cli["total"], json["total"]);
    assert_eq!(cli["facets"], json["facets"]);
    let cli_keys: Vec<&str> = cli["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(cli_keys, keys);
    // Filters before pagination; facets over the whole scope.
    let page: Value = serde_json::from_str(&sh_ok(&format!(
        "{env} {bin} ls --json --project alpha --limit 1"
    )))
    .unwrap();
    assert_eq!(page["total"], 1);
    assert_eq!(page["sessions"][0]["key"], "shell:one");
    assert_eq!(page["facets"]["projects"]["beta"], 1);
    let archived: Value =
        serde_json::from_str(&sh_ok(&format!("{env} {bin} ls --json --archived"))).unwrap();
    assert_eq!(archived["total"], 1);
    assert_eq!(archived["sessions"][0]["key"], "shell:three");
    let table = sh_ok(&format!("{env} {bin} ls"));
    assert!(
        table.contains("shell:four") && table.contains("3 of 3"),
        "{table}"
    );

    // Views.
    assert_eq!(
        sh_ok(&format!("readlink {}", m.q("favourites/shell:four"))).trim(),
        "../shell:four"
    );
    assert_eq!(listing_of(&m, "projects"), ["alpha", "beta"]);
    assert_eq!(listing_of(&m, "projects/alpha"), ["shell:one"]);
    assert_eq!(listing_of(&m, "engines/shell").len(), 3);
    assert_eq!(
        sh_ok(&format!("cat {}", m.q("projects/alpha/shell:one/project"))),
        "alpha\n"
    );
    assert_eq!(listing_of(&m, "archived"), ["shell:three"]);
}

#[test]
fn ctl_new_creates_a_session_with_a_fresh_id() {
    let host = Host::new();
    let m = host.mount("mnt");
    let ws = host.path("home");
    sh_ok(&format!(
        "echo 'new shell workspace={} title=Build box' > {}",
        ws.display(),
        m.q("ctl")
    ));
    let root = sh_ok(&format!("ls {}", m.q("")));
    let key = root
        .lines()
        .find(|l| l.starts_with("shell:"))
        .expect("a new session")
        .to_string();
    let meta = m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["title"], "Build box");
    assert_eq!(meta["workspace"], ws.to_str().unwrap());
    assert_eq!(key.len(), "shell:".len() + 36);
    let out = sh(&format!("echo 'new nosuch' > {}", m.q("ctl")));
    assert!(stderr(&out).contains("Invalid argument"));

    // A workspace may hold `title=`; the title keeps its spaces.
    let odd = host.path("subtitle=x");
    std::fs::create_dir_all(&odd).unwrap();
    let before = sh_ok(&format!("ls {}", m.q("")));
    std::fs::write(
        m.path("ctl"),
        format!(
            "new shell workspace={} title=two   spaced  words\n",
            odd.display()
        ),
    )
    .unwrap();
    let after = sh_ok(&format!("ls {}", m.q("")));
    let key = after
        .lines()
        .find(|l| l.starts_with("shell:") && !before.contains(l))
        .expect("a second new session");
    let meta = m.json(&format!("{key}/meta.json"));
    assert_eq!(meta["title"], "two   spaced  words");
    assert_eq!(meta["workspace"], odd.to_str().unwrap());
    // The root status names the key the last `new` made.
    assert_eq!(m.json("status")["new"], key, "a script finds its session");
}

#[test]
fn archive_older_archives_what_has_been_idle() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!("mkdir {}", m.q("shell:old")));
    let out = sh(&format!("echo 'archive-older yesterday' > {}", m.q("ctl")));
    assert!(stderr(&out).contains("Invalid argument"));
    sh_ok(&format!(
        "echo 'archive-older 1970-01-02T00:00:00Z' > {}",
        m.q("ctl")
    ));
    assert!(m.path("shell:old").exists(), "nothing is that old");
    sh_ok(&format!("echo 'archive-older 0h' > {}", m.q("ctl")));
    assert!(!m.path("shell:old").exists());
    assert!(m.path("archived/shell:old").exists());
}

/// The kernel keeps a session directory's entry for a moment; a session
/// archived or unarchived through a file leaves its parent at once all the
/// same, also while a file inside it is open, and can be moved back.
#[test]
fn a_session_moved_through_a_file_leaves_its_parent_at_once() {
    let host = Host::new();
    let m = host.mount("mnt");
    m.live_shell("shell:pin");
    let held = std::fs::File::open(m.path("shell:pin/scrollback")).unwrap();
    for round in 0..2 {
        assert!(m.path("shell:pin").is_dir(), "round {round}");
        sh_ok(&format!("echo 1 > {}", m.q("shell:pin/archive")));
        assert!(
            !m.path("shell:pin").exists(),
            "round {round}: still in the root"
        );
        if round == 0 {
            // Back by a rename: the kernel moves the directory it holds.
            let out = sh(&format!("mv {} {}", m.q("archived/shell:pin"), m.q("")));
            if !out.status.success() {
                let t = m.log_text();
                eprintln!("{}", &t[t.len().saturating_sub(6000)..]);
                panic!("{}", String::from_utf8_lossy(&out.stderr));
            }
        } else {
            assert!(m.path("archived/shell:pin").is_dir(), "round {round}");
            sh_ok(&format!("echo 0 > {}", m.q("archived/shell:pin/archive")));
            assert!(!m.path("archived/shell:pin").exists(), "still in archived/");
        }
        assert!(m.path("shell:pin/status").is_file(), "round {round}");
    }
    // A meta.json written whole, then a rename back again.
    let meta = m
        .read("shell:pin/meta.json")
        .replace("\"archived\": false", "\"archived\": true");
    std::fs::write(m.path("shell:pin/meta.json"), meta).unwrap();
    assert!(!m.path("shell:pin").exists());
    sh_ok(&format!("mv {} {}", m.q("archived/shell:pin"), m.q("")));
    // Many at once, from the root's ctl.
    sh_ok(&format!("echo 'archive-older 0h' > {}", m.q("ctl")));
    assert!(!m.path("shell:pin").exists());
    sh_ok(&format!("mv {} {}", m.q("archived/shell:pin"), m.q("")));
    assert!(m.path("shell:pin").is_dir());
    drop(held);
}

fn time_ms(meta: &Value, field: &str) -> i64 {
    let text = meta[field].as_str().expect(field);
    text.parse::<jiff::Timestamp>()
        .expect("RFC 3339")
        .as_millisecond()
}

/// A live session's input and output are remembered across a restart of
/// the daemon, clean or not: the next daemon neither dates the session by
/// its creation nor archives it as idle.
#[test]
fn last_activity_survives_a_daemon_restart() {
    let host = Host::new();
    for crash in [false, true] {
        let key = if crash { "shell:crash" } else { "shell:clean" };
        let mut m = host.mount("mnt");
        m.live_shell(key);
        let created = time_ms(&m.json(&format!("{key}/meta.json")), "created");
        m.type_line(key, "echo typed-later");
        m.wait_output_line(key, "typed-later");
        let before = time_ms(&m.json(&format!("{key}/meta.json")), "last_activity");
        assert!(before > created, "{key}: {before} after {created}");
        m.end(crash);
        drop(m);
        let m = host.mount("mnt");
        let after = time_ms(&m.json(&format!("{key}/meta.json")), "last_activity");
        if crash {
            // Stamped at most once per few seconds while busy: the launch's
            // output at least, never the creation alone.
            assert!(after > created, "{key}: {after} is the creation {created}");
            assert!(
                after >= before - 5_000,
                "{key}: {after} long before {before}"
            );
        } else {
            assert_eq!(after, before, "{key}: the exact last activity");
        }
        let cutoff = jiff::Timestamp::from_millisecond(created + 1).unwrap();
        sh_ok(&format!("echo 'archive-older {cutoff}' > {}", m.q("ctl")));
        assert!(
            m.path(key).is_dir(),
            "{key}: archived as idle after a restart"
        );
    }
}

/// `key`'s `last_activity` in a listing's `sessions`, in ms.
fn listed_activity(listing: &Value, key: &str) -> i64 {
    let sessions = listing["sessions"].as_array().expect("sessions");
    let meta = sessions
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("{key} listed in {listing}"));
    time_ms(meta, "last_activity")
}

/// A stopped session is dated by its last activity after a restart, clean
/// or not, in the listing and its `meta.json` alike; with no daemon
/// mounted, `sessionfs ls` dates a live session as its daemon did.
#[test]
fn a_stopped_sessions_last_activity_survives_a_daemon_restart() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    for key in ["shell:t1", "shell:t2"] {
        m.live_shell(key);
        m.type_line(key, "echo typed-later");
        m.wait_output_line(key, "typed-later");
    }
    sh_ok(&format!("echo stop > {}", m.q("shell:t1/ctl")));
    wait_for(10, "shell:t1 stopped", || {
        m.json("shell:t1/meta.json")["state"] == "stopped"
    });
    let created = time_ms(&m.json("shell:t1/meta.json"), "created");
    let stopped = listed_activity(&m.json("sessions.json"), "shell:t1");
    let live = listed_activity(&m.json("sessions.json"), "shell:t2");
    assert!(stopped > created, "{stopped} after {created}");
    assert_eq!(m.terminate(), Some(0));
    drop(m);

    let offline: Value = serde_json::from_str(&host.ls(&["--json"])).unwrap();
    assert_eq!(listed_activity(&offline, "shell:t1"), stopped, "{offline}");
    assert_eq!(listed_activity(&offline, "shell:t2"), live, "{offline}");

    for crash in [false, true] {
        let mut m = host.mount("mnt");
        let listing = m.json("sessions.json");
        assert_eq!(listed_activity(&listing, "shell:t1"), stopped, "{listing}");
        assert_eq!(listed_activity(&listing, "shell:t2"), live, "{listing}");
        let meta = m.json("shell:t1/meta.json");
        assert_eq!(time_ms(&meta, "last_activity"), stopped, "{meta}");
        m.end(crash);
    }
}

#[test]
fn a_project_view_follows_a_project_change_at_once() {
    let host = Host::new();
    let m = host.mount("mnt");
    for key in ["shell:a", "shell:b"] {
        sh_ok(&format!("mkdir {}", m.q(key)));
    }
    let is_dir = |rel: &str| m.path(rel).is_dir();
    // Each step looked at right after the write that made it, twice (the
    // second walk may be answered from what the kernel kept).
    sh_ok(&format!("echo web > {}", m.q("shell:a/project")));
    for _ in 0..2 {
        assert!(is_dir("projects/web"));
        assert!(m.path("projects/web/shell:a").is_symlink());
        assert!(!is_dir("projects/api"));
    }
    sh_ok(&format!("echo api > {}", m.q("shell:a/project")));
    for _ in 0..2 {
        assert!(!is_dir("projects/web"), "its last session left it");
        assert!(is_dir("projects/api"));
        assert!(!m.path("projects/api/shell:b").exists());
    }
    sh_ok(&format!("echo api > {}", m.q("shell:b/project")));
    assert_eq!(listing_of(&m, "projects/api"), ["shell:a", "shell:b"]);
    sh_ok(&format!("echo 1 > {}", m.q("shell:a/archive")));
    sh_ok(&format!("echo 1 > {}", m.q("shell:b/archive")));
    assert!(!is_dir("projects/api"), "archived sessions are in no view");
    assert!(!is_dir("engines/shell"));
    sh_ok(&format!("mkdir {}", m.q("shell:c")));
    assert!(is_dir("engines/shell"));
    assert_eq!(listing_of(&m, "engines/shell"), ["shell:c"]);
}

/// A view's link is kept by the kernel for a moment, and dropped the
/// moment its session leaves the view: every check right after the write
/// that changed it, twice (the second may be answered from the kernel).
#[test]
fn a_views_link_goes_at_once_when_its_session_leaves_the_view() {
    let host = Host::new();
    let m = host.mount("mnt");
    for key in ["shell:a", "shell:b"] {
        sh_ok(&format!("mkdir {}", m.q(key)));
        sh_ok(&format!("echo web > {}", m.q(&format!("{key}/project"))));
    }
    let link = |rel: &str| std::fs::read_link(m.path(rel)).ok();
    let gone = |rel: &str, why: &str| {
        for _ in 0..2 {
            assert_eq!(link(rel), None, "{rel}: {why}");
        }
    };
    sh_ok(&format!("echo 1 > {}", m.q("shell:a/favourite")));
    // Looked up, kept by the kernel.
    for _ in 0..2 {
        assert_eq!(
            link("favourites/shell:a").unwrap(),
            std::path::Path::new("../shell:a")
        );
        assert!(link("projects/web/shell:a").is_some());
        assert!(link("engines/shell/shell:a").is_some());
    }
    sh_ok(&format!("echo 0 > {}", m.q("shell:a/favourite")));
    gone("favourites/shell:a", "no longer a favourite");
    sh_ok(&format!("echo api > {}", m.q("shell:a/project")));
    gone("projects/web/shell:a", "moved to another project");
    assert!(link("projects/web/shell:b").is_some());
    assert!(link("projects/api/shell:a").is_some());
    // Through meta.json, as an editor saves it.
    let meta = m.read("shell:a/meta.json").replace("\"api\"", "\"web\"");
    std::fs::write(m.path("shell:a/meta.json"), meta).unwrap();
    gone("projects/api/shell:a", "moved back by meta.json");
    assert!(link("projects/web/shell:a").is_some());
    sh_ok(&format!("echo 1 > {}", m.q("shell:a/favourite")));
    assert!(link("favourites/shell:a").is_some());
    // Archived through its file, then by `mv`: in no view.
    sh_ok(&format!("echo 1 > {}", m.q("shell:a/archive")));
    gone("favourites/shell:a", "archived");
    gone("projects/web/shell:a", "archived");
    gone("engines/shell/shell:a", "archived");
    sh_ok(&format!("mv {} {}", m.q("archived/shell:a"), m.q("")));
    assert!(link("favourites/shell:a").is_some());
    assert!(link("engines/shell/shell:a").is_some());
    sh_ok(&format!("mv {} {}", m.q("shell:a"), m.q("archived/")));
    gone("favourites/shell:a", "archived by mv");
    gone("engines/shell/shell:a", "archived by mv");
    assert!(link("engines/shell/shell:b").is_some());
}

/// `mv KEY archived/` of a session whose program ignores HUP and TERM: the
/// rename (which holds the kernel's locks on the root and `archived/` until
/// it is answered) is answered at once, the root lists meanwhile, the
/// program is killed after the grace period, and a write that came during
/// the archive does not start the archived session again.
#[test]
fn an_archive_waits_for_no_program_and_no_write_starts_it_again() {
    use std::time::{Duration, Instant};
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:stubborn";
    m.live_shell(key);
    // `sleep` inherits the ignored signals; the shell waits for it.
    m.type_line(key, "trap '' HUP TERM; sleep 300");
    wait_for(20, "the shell to run sleep", || {
        m.read(&format!("{key}/state")) == "busy\n"
    });
    let shell = m.json(&format!("{key}/status"))["agent_pid"]
        .as_u64()
        .unwrap() as u32;
    let t0 = Instant::now();
    let mv = std::process::Command::new("mv")
        .arg(m.path(key))
        .arg(m.path("archived/"))
        .spawn()
        .unwrap();
    let writer = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "echo 'echo late' > {}",
            m.q(&format!("{key}/input"))
        ))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let listed = sh(&format!("timeout 10 ls {}", m.q("")));
    let listed_after = t0.elapsed();
    let moved = mv.wait_with_output().unwrap();
    let took = t0.elapsed();
    assert!(moved.status.success());
    assert!(listed.status.success());
    assert!(took < Duration::from_secs(2), "the archive took {took:?}");
    assert!(
        listed_after < Duration::from_secs(2),
        "ls took {listed_after:?}"
    );
    writer.wait_with_output().unwrap();
    wait_for(20, "the program to be killed", || {
        host.masters().is_empty() && !alive(shell)
    });
    let status = m.json(&format!("archived/{key}/status"));
    assert_eq!(status["state"], "archived", "{status}");
    assert!(status["master_pid"].is_null(), "{status}");
}

/// A write that waits for a `stop` under way, archived meanwhile: when the
/// stop is over the write finds the session archived (EPERM) instead of
/// starting it again.
#[test]
fn a_write_waiting_for_a_stop_does_not_start_a_session_archived_meanwhile() {
    let host = Host::new();
    let m = host.mount("mnt");
    let key = "shell:racer";
    m.live_shell(key);
    // `sleep` ignores HUP and TERM: the stop waits out its grace period.
    m.type_line(key, "trap '' HUP TERM; sleep 300");
    wait_for(20, "the shell to run sleep", || {
        m.read(&format!("{key}/state")) == "busy\n"
    });
    let in_flight = || m.json("status")["slow_ops"]["in_flight"].as_u64().unwrap();
    let bash = |cmd: String| {
        std::process::Command::new("bash")
            .args(["-c", &cmd])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let stop = bash(format!("echo stop > {}", m.q(&format!("{key}/ctl"))));
    wait_for(10, "the stop under way", || in_flight() == 1);
    let writer = bash(format!(
        "echo 'echo late' > {}",
        m.q(&format!("{key}/input"))
    ));
    wait_for(10, "the write waiting for it", || in_flight() == 2);
    sh_ok(&format!("mv {} {}", m.q(key), m.q("archived/")));
    assert!(stop.wait_with_output().unwrap().status.success());
    let written = writer.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&written.stderr);
    assert!(
        !written.status.success() && said.contains("Operation not permitted"),
        "the write: {said}"
    );
    let status = m.json(&format!("archived/{key}/status"));
    assert!(status["master_pid"].is_null(), "{status}");
    assert!(host.masters().is_empty(), "an archived session runs");
}

/// `archive-older` never stops an agent mid-turn: a session whose agent is
/// busy (or waiting) when its turn comes is skipped and named in the root
/// `status`; `--dry-run` lists the same without changing anything.
#[test]
fn archive_older_skips_busy_sessions_and_a_dry_run_changes_nothing() {
    let host = Host::new();
    let m = host.mount("mnt");
    for key in ["shell:idle-a", "shell:idle-b", "shell:working"] {
        sh_ok(&format!("mkdir {}", m.q(key)));
    }
    sh_ok(&format!(
        "echo 'sleep 120' > {}",
        m.q("shell:working/prompt")
    ));
    wait_for(10, "the shell to be busy", || {
        m.read("shell:working/state") == "busy\n"
    });
    let listed = || {
        let mut names = listing_of(&m, "");
        names.retain(|n| n.starts_with("shell:"));
        names
    };
    assert_eq!(listed().len(), 3);

    // The dry run: the keys on stdout, the skipped one on stderr, nothing moved.
    let dry = host.cli(&["archive-older", "0m", "--dry-run"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let mut would: Vec<String> = String::from_utf8_lossy(&dry.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    would.sort();
    assert_eq!(would, ["shell:idle-a", "shell:idle-b"]);
    assert!(
        stderr(&dry).contains("skipped shell:working (busy)"),
        "{}",
        stderr(&dry)
    );
    assert!(
        stderr(&dry).contains("would archive 2, skipped 1"),
        "{}",
        stderr(&dry)
    );
    assert_eq!(listed().len(), 3, "a dry run archives nothing");
    let report = &m.json("status")["archive_older"];
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["archived"], 2);

    // The real run, as a script writes it: the same two go, the busy one stays.
    sh_ok(&format!("echo 'archive-older 0m' > {}", m.q("ctl")));
    assert_eq!(listed(), ["shell:working"]);
    let report = &m.json("status")["archive_older"];
    assert_eq!(report["dry_run"], false);
    assert_eq!(report["archived"], 2);
    assert_eq!(report["skipped"][0]["key"], "shell:working");
    assert_eq!(report["skipped"][0]["state"], "busy");
    assert_eq!(m.read("shell:working/state"), "busy\n", "its job runs on");
    assert!(m.path("archived/shell:idle-a").exists());

    // Ages are minutes, hours, days or weeks, digits only; anything else is
    // refused with the reason in the root status, and nothing moves.
    for bad in ["3y", "+3d", "3.5d", "1w2d"] {
        let out = host.cli(&["archive-older", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is not a cutoff"),
            "{bad}: {}",
            stderr(&out)
        );
    }
    let weeks = host.cli(&["archive-older", "1w", "--json"]);
    assert!(weeks.status.success(), "{}", stderr(&weeks));
    let report: Value = serde_json::from_slice(&weeks.stdout).unwrap();
    assert_eq!(report["archived"], 0, "nothing is a week old");
    assert_eq!(listed(), ["shell:working"]);
    sh_ok(&format!("echo stop > {}", m.q("shell:working/ctl")));
}
