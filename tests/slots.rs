//! Slot records and hosted-run transcripts through a real mount (SPEC §9).

mod common;

use common::*;

const WORLD: &str = "0B5D4E6F-1A2B-4C3D-8E9F-001122334455";
const WORLD_LC: &str = "0b5d4e6f-1a2b-4c3d-8e9f-001122334455";

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn put_get_replace_forget_and_records_survive_a_remount() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    let slot = format!("slots/{WORLD}/2");
    // Writing works without mkdir, and mkdir -p works too.
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"s-1\",\"name\":\"Bob\",\"workspace\":\"/w\",\"harness\":\"claude\",\"extra\":7}}' > {}",
        m.q(&slot)
    ));
    sh_ok(&format!("mkdir -p {}", m.q(&format!("slots/{WORLD}"))));
    let record = m.json(&slot);
    assert_eq!(record["sessionId"], "s-1");
    assert_eq!(record["name"], "Bob");
    assert_eq!(record["workspace"], "/w");
    assert_eq!(record["harness"], "claude");
    assert!(record.get("extra").is_none());
    let stamp = record["lastSpawn"].as_str().unwrap();
    assert!(
        stamp.len() == 24 && stamp.parse::<jiff::Timestamp>().is_ok(),
        "{stamp}"
    );
    assert_eq!(sh_ok(&format!("ls {}", m.q("slots"))).trim(), WORLD_LC);
    assert_eq!(
        sh_ok(&format!("ls {}", m.q(&format!("slots/{WORLD}")))).trim(),
        "2"
    );

    // Replace: the whole record, not a merge.
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"s-2\"}}' > {}",
        m.q(&slot)
    ));
    let record = m.json(&slot);
    assert_eq!(record["sessionId"], "s-2");
    assert_eq!(record["name"], "");
    assert_eq!(record["harness"], "");

    m.terminate();
    let m = host.mount("mnt");
    assert_eq!(m.json(&slot)["sessionId"], "s-2");
    sh_ok(&format!("rm {}", m.q(&slot)));
    let out = sh(&format!("cat {}", m.q(&slot)));
    assert!(stderr(&out).contains("No such file"));
    sh_ok(&format!("rm -f {}", m.q(&slot)));
    assert_eq!(sh_ok(&format!("ls {}", m.q("slots"))).trim(), "");
}

#[test]
fn bad_slot_input_is_refused_and_changes_nothing() {
    let host = Host::new();
    let m = host.mount("mnt");
    let good = format!("slots/{WORLD}/1");
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"keep\"}}' > {}",
        m.q(&good)
    ));
    for name in ["0", "-1", "x", "01"] {
        let out = sh(&format!(
            "echo '{{\"sessionId\":\"a\"}}' > {}",
            m.q(&format!("slots/{WORLD}/{name}"))
        ));
        assert!(
            stderr(&out).contains("Invalid argument"),
            "slot {name}: {}",
            stderr(&out)
        );
    }
    for world in [
        "not-a-guid",
        "0b5d4e6f-1a2b-4c3d-8e9f-00112233445",
        "{0b5d4e6f-1a2b-4c3d-8e9f-001122334455}",
    ] {
        let out = sh(&format!("mkdir {}", m.q(&format!("slots/{world}"))));
        assert!(
            stderr(&out).contains("Invalid argument"),
            "world {world}: {}",
            stderr(&out)
        );
    }
    for body in [
        "{}",
        "{\"sessionId\":5}",
        "{\"sessionId\":\"\"}",
        "[\"sessionId\"]",
        "{not json",
        "\"text\"",
        "{\"sessionId\":\"a\",\"name\":3}",
    ] {
        let out = sh(&format!("printf '%s\\n' '{body}' > {}", m.q(&good)));
        assert!(!out.status.success(), "{body} accepted");
        assert!(
            stderr(&out).contains("Invalid argument"),
            "{body}: {}",
            stderr(&out)
        );
        assert_eq!(
            m.json(&good)["sessionId"],
            "keep",
            "{body} changed the record"
        );
    }
    assert!(
        m.log_text().contains("sessionId"),
        "the log names the reason"
    );
    assert_eq!(
        sh_ok(&format!("ls {}", m.q(&format!("slots/{WORLD}")))).trim(),
        "1"
    );
}

/// `rmdir` of an empty world succeeds, and the kernel keeps the removed
/// directory's inode dead while anything holds it (here a working
/// directory): the world, still there by name, must take records again.
#[test]
fn a_world_removed_while_a_process_sits_in_it_takes_records_again() {
    let host = Host::new();
    let m = host.mount("mnt");
    let world = format!("slots/{WORLD}");
    sh_ok(&format!("mkdir -p {}", m.q(&world)));
    let mut holder = std::process::Command::new("sleep")
        .arg("30")
        .current_dir(m.path(&world))
        .spawn()
        .unwrap();
    sh_ok(&format!("rmdir {}", m.q(&world)));
    for slot in ["1", "2"] {
        sh_ok(&format!(
            "echo '{{\"sessionId\":\"after-{slot}\"}}' > {}",
            m.q(&format!("{world}/{slot}"))
        ));
    }
    assert_eq!(m.json(&format!("{world}/1"))["sessionId"], "after-1");
    assert_eq!(sh_ok(&format!("ls {}", m.q(&world))), "1\n2\n");
    let _ = holder.kill();
    let _ = holder.wait();
    // Emptied and removed again once nothing holds it: the same.
    sh_ok(&format!("rm {}/1 {}/2", m.q(&world), m.q(&world)));
    sh_ok(&format!("rmdir {}", m.q(&world)));
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"again\"}}' > {}",
        m.q(&format!("{world}/3"))
    ));
    assert_eq!(m.json(&format!("{world}/3"))["sessionId"], "again");
}

#[test]
fn transcript_entries_are_whole_lines_with_ts_ms() {
    let host = Host::new();
    let m = host.mount("mnt");
    let file = m.q("agent-transcripts/run-7.jsonl");
    sh_ok(&format!(
        "echo '{{\"type\":\"step\",\"text\":\"first\"}}' >> {file}"
    ));
    sh_ok(&format!("echo '{{\"type\":\"step\"}}' >> {file}"));
    // One entry in several writes.
    sh_ok(&format!(
        "python3 -c \"import os,sys; f=os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND); os.write(f, b'{{\\\"type\\\":'); os.write(f, b'\\\"split\\\"}}\\n'); os.close(f)\" {file}"
    ));
    let text = sh_ok(&format!("cat {file}"));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["text"], "first");
    assert_eq!(lines[2]["type"], "split");
    assert!(lines.iter().all(|l| l["ts_ms"].is_u64()));

    for bad in ["{\"text\":\"no type\"}", "{\"type\":5}", "not json", "[1]"] {
        let out = sh(&format!("printf '%s\\n' '{bad}' >> {file}"));
        assert!(
            stderr(&out).contains("Invalid argument"),
            "{bad}: {}",
            stderr(&out)
        );
    }
    let out = sh(&format!("echo '{{\"type\":\"x\"}}' > {file}"));
    assert!(!out.status.success(), "a truncating write is refused");
    assert_eq!(
        sh_ok(&format!("cat {file}")),
        text,
        "refusals changed the transcript"
    );

    // Over 1 MiB: refused whole.
    let big = format!("{{\"type\":\"big\",\"text\":\"{}\"}}", "x".repeat(1 << 20));
    std::fs::write(host.path("big.json"), format!("{big}\n")).unwrap();
    let out = sh(&format!(
        "cat '{}' >> {file}",
        host.path("big.json").display()
    ));
    assert!(stderr(&out).contains("File too large"), "{}", stderr(&out));
    assert_eq!(sh_ok(&format!("cat {file}")), text);
}

#[test]
fn a_transcript_is_capped_at_256_mib() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!(
        "echo '{{\"type\":\"start\"}}' >> {}",
        m.q("agent-transcripts/full.jsonl")
    ));
    // Grow the file on disk to just under the cap (sparse, ending in a newline).
    let path = host.path("state/sessionfs/agent-transcripts/full.jsonl");
    let cap: u64 = 256 << 20;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(cap - 40).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, b"\n", cap - 41).unwrap();
    drop(f);
    let out = sh(&format!(
        "echo '{{\"type\":\"step\",\"text\":\"this entry would cross the cap\"}}' >> {}",
        m.q("agent-transcripts/full.jsonl")
    ));
    assert!(stderr(&out).contains("File too large"), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), cap - 40);
}

#[test]
fn two_appenders_give_whole_lines() {
    let host = Host::new();
    let m = host.mount("mnt");
    let file = m.q("agent-transcripts/busy.jsonl");
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let file = file.clone();
            std::thread::spawn(move || {
                sh_ok(&format!(
                    "for i in $(seq 1 1000); do echo \"{{\\\"type\\\":\\\"{who}\\\",\\\"i\\\":$i,\\\"pad\\\":\\\"$(printf '%0200d' $i)\\\"}}\" >> {file}; done"
                ))
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let text = sh_ok(&format!("cat {file}"));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("torn line {l:?}: {e}")))
        .collect();
    assert_eq!(lines.len(), 2000);
    for who in ["a", "b"] {
        let seq: Vec<u64> = lines
            .iter()
            .filter(|l| l["type"] == who)
            .map(|l| l["i"].as_u64().unwrap())
            .collect();
        assert_eq!(seq, (1..=1000).collect::<Vec<_>>(), "{who}'s entries");
    }
}

#[test]
fn hosted_runs_are_sessions_and_agent_run_follows_the_last_entry() {
    let host = Host::new();
    let m = host.mount("mnt");
    sh_ok(&format!(
        "echo '{{\"type\":\"run-state\",\"phase\":\"refused\"}}' > {}",
        m.q("agent-transcripts/run")
    ));
    let status = m.json("status");
    assert_eq!(status["agent"]["run"]["phase"], "refused");
    assert!(status["agent"]["run"].get("sessionId").is_none());
    assert!(
        !host.path("state/sessionfs/agent-transcripts/run").exists(),
        "run entries are stored nowhere"
    );

    let file = m.q("agent-transcripts/dot-1.jsonl");
    sh_ok(&format!(
        "echo '{{\"type\":\"prompt\",\"text\":\"build it\"}}' >> {file}"
    ));
    sh_ok(&format!(
        "echo '{{\"type\":\"tool\",\"args\":[1,2]}}' >> {file}"
    ));
    let status = m.json("status");
    assert_eq!(status["agent"]["run"]["type"], "tool");
    assert_eq!(status["agent"]["run"]["sessionId"], "dot-1");

    let root = sh_ok(&format!("ls {}", m.q("")));
    assert!(root.lines().any(|l| l == "hosted:dot-1"), "{root}");
    let page = m.read("hosted:dot-1/transcript/page-0");
    assert_eq!(page, "prompt: build it\ntool {\"args\":[1,2]}\n");
    assert_eq!(
        sh_ok(&format!(
            "readlink {}",
            m.q("hosted:dot-1/transcript/latest")
        ))
        .trim(),
        "page-0"
    );
    let out = sh(&format!("echo hi > {}", m.q("hosted:dot-1/input")));
    assert!(
        stderr(&out).contains("Operation not permitted"),
        "{}",
        stderr(&out)
    );
    assert!(host.masters().is_empty(), "a hosted run is never launched");
    assert!(m.json("hosted:dot-1/status")["error"]
        .as_str()
        .unwrap()
        .contains("hosted"));
}

#[test]
fn worlds_looked_up_by_the_thousand_are_let_go_and_keep_their_numbers() {
    use sessionfs::core::tree::node::REFERENCED_MAX;
    let host = Host::new();
    let m = host.mount("mnt");
    let slot = format!("slots/{WORLD}/1");
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"s-1\"}}' > {}",
        m.q(&slot)
    ));
    let world = format!("slots/{WORLD}");
    let numbers = || sh_ok(&format!("stat -c %i {} {}", m.q(&slot), m.q(&world)));
    let before = numbers();
    let held = || {
        m.json("status")["inodes"]
            .as_u64()
            .expect("status counts inodes")
    };
    // Every GUID names a world, so each of these is found, and the kernel
    // keeps them all; past the cap it is told to drop the oldest, and
    // forgets them, and so does the daemon.
    let worlds = 2 * REFERENCED_MAX;
    for i in 0..worlds {
        let world = format!("{i:08x}-0000-4000-8000-000000000000");
        let found = std::fs::metadata(m.path(&format!("slots/{world}")));
        assert!(found.is_ok(), "{world}: {found:?}");
    }
    wait_for(30, "the daemon to let go of the worlds' numbers", || {
        held() <= REFERENCED_MAX as u64 + 64
    });
    assert_eq!(numbers(), before, "a world's and a record's numbers held");
    assert_eq!(sh_ok(&format!("ls {}", m.q("slots"))).trim(), WORLD_LC);
}

#[test]
fn a_full_world_refuses_a_record_with_a_reason_and_keeps_what_it_holds() {
    let host = Host::new();
    let m = host.mount("mnt");
    let record = |n: u32, c: char| {
        let path = host.path(&format!("record-{n}.json"));
        let name = c.to_string().repeat(900 << 10);
        std::fs::write(
            &path,
            format!("{{\"sessionId\":\"s-{n}\",\"name\":\"{name}\"}}"),
        )
        .unwrap();
        path
    };
    // Four records of 900 KiB fit in a world's 4 MiB; a fifth does not.
    for (n, c) in [(1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')] {
        let from = record(n, c);
        sh_ok(&format!(
            "cat '{}' > {}",
            from.display(),
            m.q(&format!("slots/{WORLD}/{n}"))
        ));
    }
    let state = host.path(&format!("state/sessionfs/slots/{WORLD_LC}.json"));
    let before = std::fs::read(&state).unwrap();
    let from = record(5, 'e');
    let out = sh(&format!(
        "cat '{}' > {}",
        from.display(),
        m.q(&format!("slots/{WORLD}/5"))
    ));
    assert!(!out.status.success(), "a fifth record of 900 KiB was taken");
    assert!(
        stderr(&out).contains("No space left on device"),
        "{}",
        stderr(&out)
    );
    let error = m.json("status")["error"].to_string();
    assert!(
        error.contains(WORLD_LC) && error.contains("4194304 bytes a world may hold"),
        "{error}"
    );
    assert_eq!(std::fs::read(&state).unwrap(), before, "the world changed");
    assert_eq!(
        sh_ok(&format!("ls {}", m.q(&format!("slots/{WORLD}"))))
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["1", "2", "3", "4"]
    );
    assert_eq!(
        m.json(&format!("slots/{WORLD}/4"))["name"]
            .as_str()
            .unwrap()
            .len(),
        900 << 10
    );
    // A smaller record in place of a big one fits.
    sh_ok(&format!(
        "echo '{{\"sessionId\":\"small\"}}' > {}",
        m.q(&format!("slots/{WORLD}/1"))
    ));
    assert_eq!(m.json(&format!("slots/{WORLD}/1"))["sessionId"], "small");
}

fn utc_ms(v: &serde_json::Value) -> i64 {
    v.as_str()
        .unwrap_or_else(|| panic!("{v} is not a time"))
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_millisecond()
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A hosted session's `created` stays put while its transcript grows, and
/// across a restart: its first entry's `ts_ms`, or, for a transcript
/// written straight to disk whose entries carry none, when its file was made.
#[test]
fn a_hosted_sessions_created_time_stays_as_its_transcript_grows() {
    let host = Host::new();
    let mut m = host.mount("mnt");
    let append = |m: &Mount, text: &str| {
        sh_ok(&format!(
            "echo '{{\"type\":\"text\",\"text\":\"{text}\"}}' >> {}",
            m.q("agent-transcripts/h2.jsonl")
        ));
    };
    let created = |m: &Mount, key: &str| {
        let meta = utc_ms(&m.json(&format!("{key}/meta.json"))["created"]);
        let listing = m.json("sessions.json");
        let row = listing["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap_or_else(|| panic!("{key} in {listing}"))
            .clone();
        assert_eq!(utc_ms(&row["created"]), meta, "{key}: {row}");
        meta
    };
    append(&m, "one");
    let first: serde_json::Value =
        serde_json::from_str(m.read("agent-transcripts/h2.jsonl").lines().next().unwrap()).unwrap();
    let at = first["ts_ms"].as_i64().unwrap();
    assert_eq!(created(&m, "hosted:h2"), at);

    // Written on disk by another tool, with no `ts_ms`.
    let raw = host.path("state/sessionfs/agent-transcripts/raw.jsonl");
    std::fs::write(&raw, "{\"type\":\"text\",\"text\":\"one\"}\n").unwrap();
    let raw_created = created(&m, "hosted:raw");

    // A second later, more entries: nothing moves.
    wait_for(5, "a second to pass", || {
        now_ms() > at.max(raw_created) + 1_100
    });
    append(&m, "two");
    let mut f = std::fs::OpenOptions::new().append(true).open(&raw).unwrap();
    std::io::Write::write_all(&mut f, b"{\"type\":\"text\",\"text\":\"two\"}\n").unwrap();
    drop(f);
    assert_eq!(m.read("agent-transcripts/h2.jsonl").lines().count(), 2);
    assert_eq!(created(&m, "hosted:h2"), at);
    assert_eq!(created(&m, "hosted:raw"), raw_created);
    assert_eq!(m.terminate(), Some(0));
    drop(m);
    let m = host.mount("mnt");
    assert_eq!(created(&m, "hosted:h2"), at);
    assert_eq!(created(&m, "hosted:raw"), raw_created);
}
