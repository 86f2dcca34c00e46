//! A terminal agent driven by a config file's engine entry alone: the real
//! Qwen Code 0.24.4, offline against the model API stand-in's chat
//! completions, described by `docs/engines/qwen.json` (no code for it).

mod common;

use common::agent_host::Agents;
use common::model_api::Answer;
use common::*;
use std::path::PathBuf;
use std::time::Duration;

fn qwen_entry() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/engines/qwen.json")
}

fn start(test: &str) -> Option<Agents> {
    let config = qwen_entry();
    let a = Agents::start_mounted(test, "mnt", &[], &["--config", config.to_str().unwrap()])?;
    assert!(
        a.env.bin.join("qwen").exists(),
        "qwen is missing from {}: run scripts/agents",
        a.env.bin.display()
    );
    Some(a)
}

#[test]
fn a_qwen_session_from_the_config_answers_works_slowly_and_resumes_after_a_stop() {
    let Some(a) =
        start("a_qwen_session_from_the_config_answers_works_slowly_and_resumes_after_a_stop")
    else {
        return;
    };
    let key = a.session("qwen", "9e000000-0000-4000-8000-000000000001");
    assert_eq!(a.read(&key, "state"), "stopped\n");
    a.api.push_text("Qwen stand-in answer: the zebra is noted.");
    a.prompt(&key, "remember the word zebra");
    assert_eq!(a.wait(&key, 90), "idle\n");
    wait_for(20, "the answer on the screen", || {
        a.read(&key, "screen").contains("the zebra is noted")
    });
    assert!(a.read(&key, "scrollback").contains("the zebra is noted"));

    // A slow turn reads busy while the answer streams.
    a.api.push(
        Answer::Text("Slow qwen answer.".into()),
        Duration::from_secs(8),
    );
    a.prompt(&key, "take your time");
    wait_for(20, "busy during the slow turn", || {
        a.read(&key, "state") == "busy\n"
    });
    assert_eq!(a.wait(&key, 90), "idle\n");
    assert!(a.read(&key, "screen").contains("Slow qwen answer."));

    // Stopped, a prompt launches it again with `--resume ID`: the agent
    // sends the history.
    sh_ok(&format!("echo stop > {}", a.m.q(&format!("{key}/ctl"))));
    assert_eq!(a.read(&key, "state"), "stopped\n");
    a.api.push_text("Second: it was zebra.");
    let out = sh(&format!(
        "env printf 'which word was it\\n' > {}",
        a.m.q(&format!("{key}/prompt"))
    ));
    assert!(
        out.status.success(),
        "prompt after the stop: {}\nscreen:\n{}\nlog:\n{}",
        a.read(&key, "status"),
        a.read(&key, "screen"),
        a.m.log_text()
    );
    assert_eq!(a.wait(&key, 90), "idle\n");
    let turns = a.api.turns();
    let last = turns
        .iter()
        .rfind(|r| r.body.contains("which word was it"))
        .unwrap_or_else(|| panic!("the second prompt never came:\n{}", a.api.log()));
    assert!(
        last.body.contains("remember the word zebra"),
        "the resumed agent sent no history:\n{}",
        last.body
    );
    let argv = a.m.log_text();
    assert!(argv.contains("--resume"), "{argv}");
    let seen = a.states(&key);
    assert!(
        seen.iter().filter(|s| *s == "busy").count() >= 3,
        "{seen:?}"
    );
}

#[test]
fn a_qwen_permission_waits_for_approve_and_interrupt_ends_a_turn() {
    let Some(a) = start("a_qwen_permission_waits_for_approve_and_interrupt_ends_a_turn") else {
        return;
    };
    let marker = a.host.path("qwen-tool-ran");
    a.api.push_bash(&format!("touch {}", marker.display()));
    a.api.push_text("The qwen tool ran.");
    let key = a.session("qwen", "9e000000-0000-4000-8000-000000000002");
    a.prompt(&key, "run the tool please");
    assert_eq!(a.wait(&key, 90), "waiting\n");
    let asked = a.waiting_for(&key);
    assert_eq!(asked["kind"], "permission", "{asked}");
    assert!(
        asked["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Allow execution"),
        "{asked}"
    );
    // A prompt now would answer the question: refused.
    let refused = sh(&format!(
        "env printf 'x\\n' > {}",
        a.m.q(&format!("{key}/prompt"))
    ));
    assert!(!refused.status.success());
    sh_ok(&format!("echo approve > {}", a.m.q(&format!("{key}/ctl"))));
    assert_eq!(a.wait(&key, 90), "idle\n");
    assert!(marker.exists(), "the approved command ran");
    wait_for(20, "the answer after the tool", || {
        a.read(&key, "screen").contains("The qwen tool ran.")
    });
    let seen = a.states(&key);
    assert_eq!(
        a.last_states(&key, 3),
        ["waiting", "busy", "idle"],
        "{seen:?}"
    );

    // `interrupt` ends a running turn (Esc): idle once the screen no
    // longer shows it running.
    a.api.push(
        Answer::Text("A very slow answer.".into()),
        Duration::from_secs(30),
    );
    a.prompt(&key, "take a long time");
    wait_for(20, "busy during the long turn", || {
        a.read(&key, "state") == "busy\n"
    });
    sh_ok(&format!(
        "echo interrupt > {}",
        a.m.q(&format!("{key}/ctl"))
    ));
    wait_for(15, "idle after the interrupt", || {
        a.read(&key, "state") == "idle\n"
    });
}

/// `scripts/bench agents`: Qwen Code from its config entry, judged by its
/// screen alone.
#[test]
#[ignore = "a benchmark: scripts/bench agents"]
fn bench_qwen_prompt_to_busy_and_last_byte_to_idle() {
    let Some(a) = start("bench_qwen_prompt_to_busy_and_last_byte_to_idle") else {
        return;
    };
    let key = a.session("qwen", "9e000000-0000-4000-8000-0000000000b1");
    println!("{}", a.bench_turns("qwen", &key, 5));
}
