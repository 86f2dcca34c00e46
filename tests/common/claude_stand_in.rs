//! A Claude Code stand-in for fast tests: a small program that speaks
//! through the hooks sessionfs gives it and draws Claude's prompt box and
//! permission dialog as the real one does, so the daemon's logic can be
//! driven without the real CLI (which the agent tests use).
#![allow(dead_code)]

use super::{sh_ok, Host};

/// A Claude stand-in that speaks through the hooks sessionfs gives it, as
/// the real one does: `SessionStart` at start, and on a typed `/clear` a
/// `SessionEnd` (reason `clear`) and a `SessionStart` (source `clear`) for
/// a new conversation, whose store it starts; on `/resume ID` the same for
/// conversation ID, as Claude's own picker does. It shows Claude's prompt
/// box with what is typed in it; a prompt is a turn (`UserPromptSubmit`,
/// `Stop`); `/ask COMMAND` asks leave to run COMMAND (`PermissionRequest`
/// and Claude's dialog), which Enter or `1` grants (the command runs,
/// `PostToolUse`, `Stop`) and Esc or `3` refuses (`Stop`).
pub fn claude_with_clear(host: &Host) -> std::path::PathBuf {
    let path = host.path("fake-claude.py");
    std::fs::write(
        &path,
        r#"import json, os, subprocess, sys, tty, uuid
args = sys.argv[1:]
def arg(name):
    return args[args.index(name) + 1] if name in args else None
settings = arg("--settings")
sid = arg("--session-id") or arg("--resume") or str(uuid.uuid4())
def hook(event, **fields):
    if not settings:
        return
    command = json.load(open(settings))["hooks"][event][0]["hooks"][0]["command"]
    payload = dict(hook_event_name=event, session_id=sid, **fields)
    env = dict(os.environ, CLAUDE_PID=str(os.getpid()))
    subprocess.run(["sh", "-c", command], input=json.dumps(payload).encode(), env=env)
def store(text):
    folder = os.path.join(os.environ["CLAUDE_CONFIG_DIR"], "projects", "p")
    os.makedirs(folder, exist_ok=True)
    row = {"type": "user", "sessionId": sid, "cwd": os.getcwd(),
           "timestamp": "2026-01-01T00:00:00.000Z",
           "message": {"role": "user", "content": text}}
    with open(os.path.join(folder, sid + ".jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")
rule = "\u2500" * 30
def draw(typed=""):
    sys.stdout.write("\x1b[2J\x1b[H" + rule + "\r\n\u276f " + typed + "\r\n" + rule + "\r\n")
    sys.stdout.flush()
asking = None
def ask(command):
    global asking
    asking = command
    hook("PermissionRequest", tool_name="Bash")
    sys.stdout.write("\x1b[2J\x1b[H Bash command\r\n\r\n   " + command + "\r\n\r\n"
                     " Do you want to proceed?\r\n \u276f 1. Yes\r\n   2. Yes, and don't ask again\r\n"
                     "   3. No, and tell Claude what to do differently (esc)\r\n\r\n"
                     " Esc to cancel\r\n")
    sys.stdout.flush()
def answered(yes):
    global asking
    if yes:
        os.system(asking)
        hook("PostToolUse", tool_name="Bash")
    asking = None
    hook("Stop")
    draw()
hook("SessionStart", source="startup")
draw()
tty.setcbreak(0)
line = ""
while True:
    c = os.read(0, 1).decode(errors="replace")
    if not c:
        break
    if asking is not None:
        if c in "\r\n1":
            answered(True)
        elif c in "\x1b3":
            answered(False)
        continue
    if c not in "\r\n":
        line += c
        draw(line)
        continue
    text, line = line.strip(), ""
    if text == "/clear":
        hook("SessionEnd", reason="clear")
        sid = str(uuid.uuid4())
        store("/clear")
        hook("SessionStart", source="clear")
    elif text.startswith("/resume "):
        hook("SessionEnd", reason="resume")
        sid = text.split()[1]
        store("/resume")
        hook("SessionStart", source="resume")
    elif text.startswith("/ask "):
        hook("UserPromptSubmit")
        store(text)
        ask(text[5:])
        continue
    elif text:
        hook("UserPromptSubmit")
        store(text)
        hook("Stop")
    draw()
"#,
    )
    .unwrap();
    let program = host.path("fake-claude");
    std::fs::write(
        &program,
        format!("#!/bin/sh\nexec python3 '{}' \"$@\"\n", path.display()),
    )
    .unwrap();
    sh_ok(&format!("chmod +x '{}'", program.display()));
    program
}

/// A host whose Claude is [`claude_with_clear`], with a store of its own.
pub fn host_with_claude_stand_in() -> Host {
    let host = Host::new();
    let claude_dir = host.path("claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    let program = claude_with_clear(&host);
    host.with_env("SESSIONFS_ENGINE_CLAUDE", &program.display().to_string())
        .with_env("CLAUDE_CONFIG_DIR", &claude_dir.display().to_string())
}
