//! The questions the real agents ask, answered from a script through a real
//! mount: Claude's first-run offer on a stock config, its trust question in
//! an untrusted workspace, its auto-mode approval, Codex's approval of a
//! command that leaves its sandbox, and a model API that keeps failing.

mod common;

use common::agent_host::Agents;
use common::model_api::Answer;
use common::*;
use std::time::{Duration, Instant};

/// `echo open > KEY/ctl`: starts the session's program.
fn open(a: &Agents, key: &str) {
    sh_ok(&format!("echo open > {}", a.m.q(&format!("{key}/ctl"))));
}

/// Claude opens on "Make auto mode your default permission mode?" when the
/// user's settings ask for the classic mode and the offer was never seen:
/// `waiting_for` names the offer, `deny` declines it (Claude records only
/// that it was seen; the settings stay), and the next prompt is answered.
#[test]
fn claudes_auto_mode_offer_is_named_and_declined_from_a_script() {
    let Some(a) = Agents::start("claudes_auto_mode_offer_is_named_and_declined_from_a_script")
    else {
        return;
    };
    a.env.claude_config_with_the_offer();
    let key = a.session("claude", "c1a0de00-0000-4000-8000-00000000f0f1");
    open(&a, &key);
    // The offer comes about 2 s after Claude is ready: `idle` first.
    wait_for(60, "the offer to be waited on", || {
        a.read(&key, "state") == "waiting\n"
    });
    assert_eq!(a.wait(&key, 60), "waiting\n", "{}", a.read(&key, "screen"));
    let asked = a.waiting_for(&key);
    assert_eq!(asked["kind"], "offer", "{asked}");
    assert!(
        asked["text"]
            .as_str()
            .is_some_and(|t| t.contains("auto mode")),
        "{asked}"
    );
    // A prompt now is refused at once, naming the question.
    let t0 = Instant::now();
    let out = sh(&format!(
        "env printf 'hi\\n' > {}",
        a.m.q(&format!("{key}/prompt"))
    ));
    assert!(!out.status.success());
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());

    let (code, _, said) = a.cli(&["deny", &key]);
    assert_eq!(code, 0, "{said}\n{}", a.read(&key, "screen"));
    assert_eq!(a.wait(&key, 30), "idle\n", "{}", a.read(&key, "screen"));
    assert_eq!(a.waiting_for(&key), serde_json::Value::Null);
    a.api.push_text("Hello after the offer.");
    a.prompt(&key, "say hello");
    assert_eq!(a.wait(&key, 60), "idle\n");
    wait_for(10, "the answer in transcript/last", || {
        a.read(&key, "transcript/last")
            .contains("Hello after the offer.")
    });
    // Declined: the offer is marked seen, the user's mode is as it was.
    assert_eq!(a.env.claude_state()["hasSeenAutoDefaultNudge"], true);
    let settings = std::fs::read_to_string(a.env.claude_dir.join("settings.json")).unwrap();
    assert!(
        settings.contains("\"defaultMode\":\"default\""),
        "{settings}"
    );
}

/// A session whose workspace Claude was never told to trust opens on the
/// trust question: `waiting_for` is `trust`, `approve` trusts the folder,
/// and the prompt is then answered.
#[test]
fn claudes_trust_question_is_approved_from_a_script() {
    let Some(a) = Agents::start("claudes_trust_question_is_approved_from_a_script") else {
        return;
    };
    let untrusted = a.host.path("untrusted");
    std::fs::create_dir_all(&untrusted).unwrap();
    let key = a.session_in("claude", "c1a0de00-0000-4000-8000-00000000f0f2", &untrusted);
    open(&a, &key);
    assert_eq!(a.wait(&key, 60), "waiting\n", "{}", a.read(&key, "screen"));
    let asked = a.waiting_for(&key);
    assert_eq!(asked["kind"], "trust", "{asked}");
    let listed = a.host.ls(&[]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&key) && l.contains("waiting: trust")),
        "{listed}"
    );
    let (code, _, said) = a.cli(&["approve", &key]);
    assert_eq!(code, 0, "{said}\n{}", a.read(&key, "screen"));
    a.api.push_text("Trusted and answering.");
    a.prompt(&key, "are you there");
    assert_eq!(a.wait(&key, 60), "idle\n");
    wait_for(10, "the answer in transcript/last", || {
        a.read(&key, "transcript/last")
            .contains("Trusted and answering.")
    });
    let trusted = &a.env.claude_state()["projects"][untrusted.to_str().unwrap()];
    assert_eq!(trusted["hasTrustDialogAccepted"], true, "{trusted}");
}

/// With a stock config (no settings: auto mode), Claude's safety check
/// cannot reach the model stand-in: it first asks whether to stay in auto
/// mode and approve each action, then asks for this command ("needs your
/// approval"). Both are permissions in `waiting_for`; `approve` stays in
/// auto mode (it changes no mode) and runs the command.
#[test]
fn a_stock_claudes_auto_mode_approval_is_answered_from_a_script() {
    let Some(a) = Agents::start("a_stock_claudes_auto_mode_approval_is_answered_from_a_script")
    else {
        return;
    };
    a.env.stock_claude_config();
    let key = a.session("claude", "c1a0de00-0000-4000-8000-00000000f0f3");
    let marker = a.host.path("ran-in-auto-mode");
    a.api.push_bash(&format!("echo ran > {}", marker.display()));
    a.api.push_text("The command ran.");
    a.prompt(&key, "run the command");
    let mut asked_for = vec![];
    loop {
        let state = a.wait(&key, 90);
        if state == "idle\n" {
            break;
        }
        assert_eq!(state, "waiting\n", "{}", a.read(&key, "screen"));
        assert!(asked_for.len() < 3, "asked again and again: {asked_for:?}");
        let asked = a.waiting_for(&key);
        assert_eq!(
            asked["kind"],
            "permission",
            "{asked}\n{}",
            a.read(&key, "screen")
        );
        asked_for.push(asked);
        let (code, _, said) = a.cli(&["approve", &key]);
        assert_eq!(code, 0, "{said}\n{}", a.read(&key, "screen"));
    }
    assert!(marker.exists(), "the approved command ran: {asked_for:?}");
    assert!(
        asked_for.iter().any(|q| q["text"]
            .as_str()
            .is_some_and(|t| t.contains("Auto mode can't check actions"))),
        "{asked_for:?}"
    );
    // Still in auto mode: nothing was switched for the user.
    assert!(!a.env.claude_dir.join("settings.json").exists());
}

/// Codex in a read-only sandbox with an `on-request` policy: a command
/// that asks to leave the sandbox shows its approval. `waiting_for` names
/// the command; `approve` runs it, `deny` does not, and each returns with
/// Codex out of the dialog.
#[test]
fn codexs_approval_is_answered_from_a_script() {
    let Some(a) = Agents::start("codexs_approval_is_answered_from_a_script") else {
        return;
    };
    a.env.codex_read_only();
    let key = a.session("codex", "c0de0000-0000-4000-8000-00000000f0f4");
    for (round, answer) in ["approve", "deny", "approve"].iter().enumerate() {
        let marker = a.host.path(&format!("codex-ran-{round}"));
        a.api.push(
            Answer::Escalated(format!("echo ran > {}", marker.display())),
            Duration::ZERO,
        );
        // A refusal ends Codex's turn: only an approved command is followed
        // by another request.
        if *answer == "approve" {
            a.api.push_text(&format!("Round {round} done."));
        }
        a.prompt(&key, &format!("write the marker, round {round}"));
        assert_eq!(
            a.wait(&key, 90),
            "waiting\n",
            "round {round}\n{}",
            a.read(&key, "screen")
        );
        let asked = a.waiting_for(&key);
        assert_eq!(asked["kind"], "permission", "{asked}");
        assert!(
            asked["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&marker.display().to_string())),
            "{asked}"
        );
        let (code, _, said) = a.cli(&[answer, &key]);
        assert_eq!(code, 0, "round {round}: {said}\n{}", a.read(&key, "screen"));
        assert_ne!(a.read(&key, "state"), "waiting\n", "round {round}");
        assert_eq!(a.wait(&key, 60), "idle\n", "round {round}");
        assert_eq!(marker.exists(), *answer == "approve", "round {round}");
    }
}

/// The model API answers every request with an error (HTTP 500, then
/// 529 "overloaded"): Claude retries (twice here, by its own
/// `CLAUDE_CODE_MAX_RETRIES`), gives up (its `StopFailure`), and the
/// session leaves `busy` within 60 s; once the API answers again, so does
/// the session.
#[test]
fn a_failing_model_api_never_leaves_the_session_busy() {
    let Some(a) = Agents::start_with(
        "a_failing_model_api_never_leaves_the_session_busy",
        &[("CLAUDE_CODE_MAX_RETRIES", "2")],
    ) else {
        return;
    };
    let key = a.session("claude", "c1a0de00-0000-4000-8000-00000000f0f5");
    for status in [500, 529] {
        a.api.fail_with(Some(status));
        let before = a.api.turns().len();
        let seen = a.events(&key).len();
        a.prompt(&key, &format!("this fails with {status}"));
        a.api.wait_requests(30, "a failed request", |r| {
            r.iter().filter(|r| r.is_turn()).count() > before
        });
        let t0 = Instant::now();
        // Claude says it gave up (its StopFailure), and the session is
        // `idle` then; it stays so. (Claude runs its hooks side by side, so
        // a prompt's own hook may land after the failure's: the screen
        // then ends the turn again.)
        let gave_up = |a: &Agents| {
            a.events(&key)[seen..].iter().any(|e| {
                e["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("StopFailure"))
            })
        };
        let settled = wait_until(60, || gave_up(&a) && a.read(&key, "state") == "idle\n");
        assert!(
            settled,
            "{status}: still {} after 60 s\n{:?}\n{}",
            a.read(&key, "state"),
            a.events(&key)[seen..].to_vec(),
            a.read(&key, "screen")
        );
        let out = sh(&format!("timeout 60 cat {}", a.m.q(&format!("{key}/wait"))));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "idle\n");
        eprintln!(
            "HTTP {status}: idle {:?} after the first failure",
            t0.elapsed()
        );
        a.api.fail_with(None);
        a.api.push_text(&format!("Back after {status}."));
        a.prompt(&key, "try again");
        assert_eq!(a.wait(&key, 60), "idle\n");
        wait_for(10, "the answer in transcript/last", || {
            a.read(&key, "transcript/last")
                .contains(&format!("Back after {status}."))
        });
    }
}
