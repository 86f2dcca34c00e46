//! The agents' own hooks, injected per session without touching the user's
//! files: Claude Code's `--settings` file, Gemini CLI's system settings file
//! (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`), Codex's `-c notify=[...]` and an
//! opencode plugin named in the config given in its environment
//! (`OPENCODE_CONFIG_CONTENT`) all run `sessionfs hook --events FILE --session
//! KEY`, which appends one capped JSON line per event to FILE for the daemon
//! to follow.

use super::state::HookEvent;
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::path::Path;

/// The Claude Code hook events that move the state.
pub const CLAUDE_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "Notification",
    "Stop",
    // A turn that ended on an API error (after Claude's own retries).
    "StopFailure",
    "SessionEnd",
];

/// Events whose hook configuration takes a tool-name matcher.
const TOOL_EVENTS: &[&str] = &["PreToolUse", "PostToolUse", "PermissionRequest"];

/// The most of a hook's stdin that is parsed; the rest is drained unread.
const MAX_PAYLOAD: usize = 1 << 20;
/// Each recorded text field is cut to this many bytes.
const MAX_FIELD: usize = 256;
/// A hook line longer than this is never written (nor read back).
pub const MAX_LINE: usize = 4096;
/// A hook file past this size is moved aside to `FILE.1` before the next append.
pub const ROTATE_AT: u64 = 1 << 20;

/// Quotes one word for `sh -c`.
fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The hook command line: `'EXE' hook --events 'FILE' --session 'KEY'
/// --locks 'DIR'` (the lock directory, where a switch of conversation is
/// claimed).
pub fn hook_command(exe: &Path, events_file: &Path, key: &str, locks: &Path) -> String {
    [
        sh_quote(&exe.to_string_lossy()),
        "hook".into(),
        "--events".into(),
        sh_quote(&events_file.to_string_lossy()),
        "--session".into(),
        sh_quote(key),
        "--locks".into(),
        sh_quote(&locks.to_string_lossy()),
    ]
    .join(" ")
}

/// The contents of the file given to `claude --settings`: one command hook
/// per event in [`CLAUDE_EVENTS`]. Claude adds it to the user's own settings.
pub fn claude_settings(exe: &Path, events_file: &Path, key: &str, locks: &Path) -> Value {
    let command = hook_command(exe, events_file, key, locks);
    let mut hooks = Map::new();
    for event in CLAUDE_EVENTS {
        let handler = json!({"type": "command", "command": command, "timeout": 10});
        let mut entry = json!({"hooks": [handler]});
        if TOOL_EVENTS.contains(event) {
            entry["matcher"] = json!("*");
        }
        hooks.insert(event.to_string(), json!([entry]));
    }
    json!({"hooks": hooks})
}

/// Writes [`claude_settings`] to `path` (mode 0600, replaced atomically, synced).
pub fn write_claude_settings(
    path: &Path,
    exe: &Path,
    events_file: &Path,
    key: &str,
    locks: &Path,
) -> std::io::Result<()> {
    let settings = claude_settings(exe, events_file, key, locks).to_string();
    crate::atomic::replace(path, settings.as_bytes())
}

/// The Gemini CLI hook events that move the state (0.61: each verified in
/// `tests/agents_gemini.rs`).
pub const GEMINI_EVENTS: &[&str] = &["SessionStart", "BeforeAgent", "AfterAgent", "Notification"];

/// The most of the machine's own Gemini system settings that is read.
const GEMINI_SYSTEM_MAX: u64 = 1 << 20;

/// The machine's Gemini system settings (`/etc/gemini-cli/settings.json`),
/// which the per-session file given in `GEMINI_CLI_SYSTEM_SETTINGS_PATH`
/// replaces: carried over so the session runs as any other would.
pub fn gemini_machine_settings(path: &Path) -> Option<Map<String, Value>> {
    let f = std::fs::File::open(path).ok()?;
    let mut text = Vec::new();
    f.take(GEMINI_SYSTEM_MAX).read_to_end(&mut text).ok()?;
    match serde_json::from_slice(&text).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// The per-session system settings for Gemini CLI: `base` (the machine's
/// own) with one command hook per event in [`GEMINI_EVENTS`] added to the
/// hooks it has. The user's `settings.json` is left alone.
pub fn gemini_settings(
    base: Option<Map<String, Value>>,
    exe: &Path,
    events_file: &Path,
    key: &str,
    locks: &Path,
) -> Value {
    let command = hook_command(exe, events_file, key, locks);
    let mut settings = base.unwrap_or_default();
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    if !hooks.is_object() {
        *hooks = Value::Object(Map::new());
    }
    if let Value::Object(hooks) = hooks {
        for event in GEMINI_EVENTS {
            let entry = json!({"matcher": "*", "hooks": [
                {"type": "command", "command": command, "timeout": 10000}
            ]});
            match hooks.get_mut(*event) {
                Some(Value::Array(list)) => list.push(entry),
                _ => {
                    hooks.insert(event.to_string(), json!([entry]));
                }
            }
        }
    }
    Value::Object(settings)
}

/// Whether Gemini would read a settings file under `dir`: it skips one
/// when the file or any directory above it is writable by group or others
/// (so never under `/tmp`).
pub fn gemini_reads_settings_under(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors()
        .all(|d| std::fs::metadata(d).map_or(true, |m| m.permissions().mode() & 0o022 == 0))
}

/// Writes [`gemini_settings`] to `path` (mode 0600, replaced atomically,
/// synced). Gemini reads it only when neither it nor any directory above
/// it is writable by group or others.
pub fn write_gemini_settings(
    path: &Path,
    exe: &Path,
    events_file: &Path,
    key: &str,
    locks: &Path,
) -> std::io::Result<()> {
    let base = gemini_machine_settings(Path::new("/etc/gemini-cli/settings.json"));
    let settings = gemini_settings(base, exe, events_file, key, locks).to_string();
    crate::atomic::replace(path, settings.as_bytes())
}

/// The opencode events the plugin reports (1.18: each verified in
/// `tests/agents_opencode.rs`).
pub const OPENCODE_EVENTS: &[&str] = &[
    "session.created",
    "session.status",
    "session.idle",
    "session.error",
    "permission.asked",
    "permission.updated",
    "permission.replied",
];

/// The per-session opencode plugin: for each event in [`OPENCODE_EVENTS`]
/// it runs the hook command with a payload of `hook_event_name`,
/// `session_id`, `reason` (the status, the error, the reply) and
/// `tool_name` (what a permission is for) and `at` (when it came, in ms
/// since the epoch), one at a time in the order the events came. A subagent's `session.created` (it has a parent) is not
/// reported.
pub fn opencode_plugin(exe: &Path, events_file: &Path, key: &str, locks: &Path) -> String {
    let argv = json!([
        exe.to_string_lossy(),
        "hook",
        "--events",
        events_file.to_string_lossy(),
        "--session",
        key,
        "--locks",
        locks.to_string_lossy(),
    ]);
    let wanted = json!(OPENCODE_EVENTS);
    format!(
        r#"// sessionfs: reports this session's state to the sessionfs daemon.
const HOOK = {argv};
const WANTED = new Set({wanted});
let queue = Promise.resolve();
function run(payload) {{
  const argv = [...HOOK, JSON.stringify(payload)];
  try {{
    if (typeof Bun !== "undefined") {{
      const child = Bun.spawn(argv, {{ stdin: "ignore", stdout: "ignore", stderr: "ignore" }});
      return child.exited.catch(() => {{}});
    }}
  }} catch (e) {{}}
  return import("node:child_process")
    .then((cp) => new Promise((done) => {{
      const child = cp.spawn(argv[0], argv.slice(1), {{ stdio: "ignore" }});
      child.on("close", done);
      child.on("error", done);
    }}))
    .catch(() => {{}});
}}
export const SessionfsState = async () => ({{
  event: async ({{ event }}) => {{
    if (!event || !WANTED.has(event.type)) return;
    const p = event.properties || {{}};
    const info = p.info || {{}};
    if (event.type === "session.created" && info.parentID) return;
    const error = p.error || {{}};
    const payload = {{
      hook_event_name: event.type,
      session_id: p.sessionID || info.sessionID || info.id || null,
      reason: (p.status && p.status.type) || error.name || p.reply || p.response || null,
      tool_name: p.permission || p.type || null,
      at: Date.now(),
    }};
    queue = queue.then(() => run(payload));
    await queue;
  }},
}});
"#
    )
}

/// The permissions a session's opencode runs with (its
/// `OPENCODE_PERMISSION`, merged by opencode over every config it read): a
/// tool call asks before a command runs or a file is edited. The user's
/// own `OPENCODE_PERMISSION`, when it is a JSON object, is kept and wins
/// where it names the same tool; one that is not is passed on unchanged.
pub fn opencode_permission(user: Option<&str>) -> String {
    let mut merged = Map::new();
    merged.insert("bash".into(), json!("ask"));
    merged.insert("edit".into(), json!("ask"));
    match user.map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(theirs))) => merged.extend(theirs),
        Some(_) => return user.unwrap_or_default().to_string(),
        None => {}
    }
    Value::Object(merged).to_string()
}

/// The config a session's opencode is given in `OPENCODE_CONFIG_CONTENT`
/// (merged by opencode over every config file it reads): the session's
/// plugin, by its file URL, after the plugins the user's own
/// `OPENCODE_CONFIG_CONTENT` names. The rest of the user's value is kept;
/// one that is not a JSON object is left out (opencode would refuse it),
/// and the log says so.
pub fn opencode_config_content(user: Option<&str>, plugin: &Path) -> String {
    let mut config = match user.map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(theirs))) => theirs,
        Some(_) => {
            log::warn!("OPENCODE_CONFIG_CONTENT is not a JSON object: sessions are not given it");
            Map::new()
        }
        None => Map::new(),
    };
    let mut plugins = match config.remove("plugin") {
        Some(Value::Array(theirs)) => theirs,
        Some(other) => vec![other],
        None => vec![],
    };
    plugins.push(json!(file_url(plugin)));
    config.insert("plugin".into(), Value::Array(plugins));
    Value::Object(config).to_string()
}

/// `file://` and the path, each byte other than `A-Z a-z 0-9 - . _ ~ / :`
/// percent-encoded.
fn file_url(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut url = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// Writes [`opencode_plugin`] to `path` (replaced atomically). It is named
/// in the config opencode is given ([`opencode_config_content`]), not put
/// in a config directory: opencode installs its plugin SDK from npm into
/// every config directory that has plugins, seconds per new session.
pub fn write_opencode_plugin(
    path: &Path,
    exe: &Path,
    events_file: &Path,
    key: &str,
    locks: &Path,
) -> std::io::Result<()> {
    crate::atomic::replace(
        path,
        opencode_plugin(exe, events_file, key, locks).as_bytes(),
    )
}

/// The value of Codex's `-c` option that makes it run the hook on every
/// finished turn (`notify=["EXE","hook",...]`, a TOML array; Codex appends
/// the event JSON as one more argument).
pub fn codex_notify_arg(exe: &Path, events_file: &Path, key: &str) -> String {
    let words = [
        exe.to_string_lossy().into_owned(),
        "hook".into(),
        "--events".into(),
        events_file.to_string_lossy().into_owned(),
        "--session".into(),
        key.into(),
    ];
    // A JSON string array is a valid TOML array of basic strings.
    format!(
        "notify={}",
        serde_json::to_string(&words).expect("strings serialise")
    )
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Finds `"name": "value"` in raw (possibly cut-off) JSON text: the fallback
/// when a payload was too big to parse whole. Claude puts `session_id` and
/// `hook_event_name` before the large fields.
fn raw_field(raw: &str, name: &str) -> Option<String> {
    let pat = format!("\"{name}\"");
    let at = raw.find(&pat)? + pat.len();
    let rest = raw[at..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find('"')?;
    let value = &rest[..end];
    (!value.contains('\\')).then(|| value.to_string())
}

/// Reduces one hook payload (Claude's stdin JSON or Codex's notify argument)
/// to the capped line the hook file keeps.
pub fn hook_line(payload: &[u8], key: &str, ts_ms: u64) -> String {
    let raw = String::from_utf8_lossy(payload);
    let parsed: Option<Map<String, Value>> = serde_json::from_str(&raw).ok();
    let field = |names: &[&str]| -> Option<String> {
        for name in names {
            let found = match &parsed {
                Some(obj) => obj.get(*name).and_then(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Null => None,
                    other => Some(other.to_string()),
                }),
                None => raw_field(&raw, name),
            };
            if let Some(v) = found {
                return Some(cut(&v, MAX_FIELD));
            }
        }
        None
    };
    let mut line = Map::new();
    line.insert("ts_ms".into(), json!(ts_ms));
    line.insert("key".into(), json!(cut(key, MAX_FIELD)));
    let event = field(&["hook_event_name", "type"]).unwrap_or_else(|| "unknown".into());
    line.insert("event".into(), json!(event));
    // The agent process the hook speaks for: Claude names it; Codex runs
    // its notify program itself.
    let pid = std::env::var("CLAUDE_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        .unwrap_or_else(std::os::unix::process::parent_id);
    line.insert("pid".into(), json!(pid));
    // When the agent says the event happened (opencode's plugin, whose
    // hooks run one after another and may be written late).
    if let Some(at) = parsed.as_ref().and_then(|o| o.get("at")?.as_u64()) {
        line.insert("at_ms".into(), json!(at));
    }
    if let Ok(sid) = nix::unistd::getsid(None) {
        line.insert("sid".into(), json!(sid.as_raw()));
    }
    let fields: [(&str, &[&str]); 5] = [
        ("session_id", &["session_id", "thread-id", "thread_id"]),
        ("tool_name", &["tool_name"]),
        ("notification_type", &["notification_type"]),
        ("reason", &["source", "reason", "error"]),
        ("message", &["message", "last-assistant-message"]),
    ];
    for (out, names) in fields {
        if let Some(v) = field(names) {
            line.insert(out.into(), json!(v));
        }
    }
    if parsed.is_none() {
        line.insert("truncated".into(), json!(true));
    }
    let text = Value::Object(line).to_string();
    debug_assert!(text.len() < MAX_LINE);
    text
}

/// Reads a hook line back: the event and the wall-clock time it was written.
pub fn parse_hook_line(line: &str) -> Option<(u64, String, HookEvent)> {
    let v: Value = serde_json::from_str(line).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some((
        v.get("ts_ms")?.as_u64()?,
        s("key")?,
        HookEvent {
            name: s("event")?,
            session_id: s("session_id"),
            notification_type: s("notification_type"),
            tool_name: s("tool_name"),
            reason: s("reason"),
            pid: v.get("pid").and_then(Value::as_u64).map(|p| p as u32),
            sid: v.get("sid").and_then(Value::as_u64).map(|p| p as u32),
            at_ms: v.get("at_ms").and_then(Value::as_u64),
        },
    ))
}

/// Appends `line` and a newline to `file` in one write, moving a file past
/// [`ROTATE_AT`] aside to `FILE.1` first.
pub fn append_line(file: &Path, line: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if std::fs::metadata(file).is_ok_and(|m| m.len() >= ROTATE_AT) {
        let mut aside = file.as_os_str().to_owned();
        aside.push(".1");
        // Two hooks may race here; either rename wins, nothing is lost
        // beyond what the follower already read or reads from FILE.1.
        let _ = std::fs::rename(file, aside);
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(file)?;
    let mut bytes = line.as_bytes().to_vec();
    bytes.push(b'\n');
    f.write_all(&bytes)
}

/// The hidden `sessionfs hook` subcommand: reads the payload (Codex passes
/// it as the last argument, Claude on stdin), appends its line. Never fails
/// the agent: every error is swallowed, the caller exits 0.
/// Records one hook event; a switch of conversation inside the agent's own
/// process is claimed in `locks` at once (see [`super::claims`]), so that
/// no daemon launches the conversation it now writes, even while none runs.
pub fn run_hook(events_file: &Path, key: &str, arg_payload: Option<&str>, locks: Option<&Path>) {
    let payload = match arg_payload {
        Some(p) => p.as_bytes().to_vec(),
        None => read_stdin_capped(),
    };
    let ts_ms = crate::clock::now_ms();
    let line = hook_line(&payload, key, ts_ms);
    let _ = append_line(events_file, &line);
    let (Some(locks), Some((_, _, event))) = (locks, parse_hook_line(&line)) else {
        return;
    };
    let Some((engine, id)) = key.split_once(':') else {
        return;
    };
    let switched = super::claims::hook_switch(
        &event.name,
        event.reason.as_deref(),
        event.session_id.as_deref(),
    );
    if let Some(to) = switched.filter(|to| to != id) {
        let claim = super::claims::Claim {
            conversation: format!("{engine}:{to}"),
            by: key.to_string(),
            agent_pid: event.pid.unwrap_or(0),
            ts_ms,
        };
        // Refused when a master of its own writes it: the daemon says so.
        let _ = super::claims::make(locks, &claim);
    }
}

/// Reads stdin up to [`MAX_PAYLOAD`] and drains the rest so the writer sees
/// no broken pipe; a terminal on stdin is not read at all.
fn read_stdin_capped() -> Vec<u8> {
    let stdin = std::io::stdin();
    if std::io::IsTerminal::is_terminal(&stdin) {
        return vec![];
    }
    let mut lock = stdin.lock();
    let mut buf = Vec::new();
    let _ = (&mut lock).take(MAX_PAYLOAD as u64).read_to_end(&mut buf);
    if buf.len() == MAX_PAYLOAD {
        let _ = std::io::copy(&mut lock, &mut std::io::sink());
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencode_permission_asks_and_the_users_own_wins() {
        let ours: Value = serde_json::from_str(&opencode_permission(None)).unwrap();
        assert_eq!(ours, json!({"bash": "ask", "edit": "ask"}));
        let merged: Value = serde_json::from_str(&opencode_permission(Some(
            r#"{"bash":"allow","read":"deny"}"#,
        )))
        .unwrap();
        assert_eq!(
            merged,
            json!({"bash": "allow", "edit": "ask", "read": "deny"})
        );
        assert_eq!(opencode_permission(Some("not json")), "not json");
    }

    #[test]
    fn the_sessions_plugin_is_named_after_the_users_own_config_content() {
        let plugin = Path::new("/state/agents/opencode:a b/plugin.js");
        let url = "file:///state/agents/opencode:a%20b/plugin.js";
        let ours: Value = serde_json::from_str(&opencode_config_content(None, plugin)).unwrap();
        assert_eq!(ours, json!({"plugin": [url]}));
        let merged: Value = serde_json::from_str(&opencode_config_content(
            Some(r#"{"plugin":["mine"],"model":"x/y"}"#),
            plugin,
        ))
        .unwrap();
        assert_eq!(merged, json!({"plugin": ["mine", url], "model": "x/y"}));
        let bad: Value =
            serde_json::from_str(&opencode_config_content(Some("not json"), plugin)).unwrap();
        assert_eq!(bad, json!({"plugin": [url]}));
    }

    #[test]
    fn claude_settings_run_the_hook_for_every_event() {
        let v = claude_settings(
            Path::new("/usr/bin/session fs"),
            Path::new("/state/it's/hooks.jsonl"),
            "claude:abc",
            Path::new("/run/locks"),
        );
        for event in CLAUDE_EVENTS {
            let entry = &v["hooks"][event][0];
            let cmd = entry["hooks"][0]["command"].as_str().unwrap();
            assert_eq!(entry["hooks"][0]["type"], "command");
            // The command survives sh's word splitting intact.
            let out = std::process::Command::new("sh")
                .args([
                    "-c",
                    &format!("printf '%s\\n' {}", &cmd["'/usr/bin/session fs' ".len()..]),
                ])
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "hook\n--events\n/state/it's/hooks.jsonl\n--session\nclaude:abc\n--locks\n/run/locks\n"
            );
            assert!(cmd.starts_with("'/usr/bin/session fs' hook"));
            assert_eq!(entry.get("matcher").is_some(), TOOL_EVENTS.contains(event));
        }
    }

    #[test]
    fn codex_notify_is_a_toml_string_array() {
        let arg = codex_notify_arg(Path::new("/bin/sfs"), Path::new("/s/a \"b\""), "codex:x");
        assert_eq!(
            arg,
            r#"notify=["/bin/sfs","hook","--events","/s/a \"b\"","--session","codex:x"]"#
        );
    }

    #[test]
    fn claude_payloads_become_capped_lines() {
        let big = "x".repeat(100_000);
        let payload = json!({
            "session_id": "sid-1", "transcript_path": "/t.jsonl", "cwd": "/w",
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": big},
        });
        let line = hook_line(payload.to_string().as_bytes(), "claude:sid-1", 42);
        assert!(line.len() < 1024, "{}", line.len());
        let (ts, key, ev) = parse_hook_line(&line).unwrap();
        assert_eq!((ts, key.as_str()), (42, "claude:sid-1"));
        assert_eq!(ev.name, "PreToolUse");
        assert_eq!(ev.session_id.as_deref(), Some("sid-1"));
        assert_eq!(ev.tool_name.as_deref(), Some("Bash"));
        // The process session it ran in: this test's own.
        let own = nix::unistd::getsid(None).unwrap().as_raw() as u32;
        assert_eq!(ev.sid, Some(own));

        let note = json!({"session_id": "s", "hook_event_name": "Notification",
            "notification_type": "permission_prompt", "message": "m".repeat(5000)});
        let (_, _, ev) = parse_hook_line(&hook_line(note.to_string().as_bytes(), "k", 1)).unwrap();
        assert_eq!(ev.notification_type.as_deref(), Some("permission_prompt"));

        let start =
            json!({"session_id": "s", "hook_event_name": "SessionStart", "source": "resume"});
        let (_, _, ev) = parse_hook_line(&hook_line(start.to_string().as_bytes(), "k", 1)).unwrap();
        assert_eq!(ev.reason.as_deref(), Some("resume"));
    }

    #[test]
    fn a_cut_off_payload_still_names_its_event_and_session() {
        let payload = br#"{"session_id":"sid-9","transcript_path":"/t","hook_event_name":"PostToolUse","tool_response":{"stdout":"aaaa"#;
        let line = hook_line(payload, "claude:sid-9", 5);
        let (_, _, ev) = parse_hook_line(&line).unwrap();
        assert_eq!(ev.name, "PostToolUse");
        assert_eq!(ev.session_id.as_deref(), Some("sid-9"));
        assert!(line.contains("\"truncated\":true"));
        // Garbage still gives a line, never a failure.
        let (_, _, ev) = parse_hook_line(&hook_line(b"\xff\xfe not json", "k", 1)).unwrap();
        assert_eq!(ev.name, "unknown");
    }

    #[test]
    fn codex_notify_payloads_name_the_thread() {
        let payload = json!({"type": "agent-turn-complete", "thread-id": "t-1", "turn-id": "u",
            "cwd": "/w", "input-messages": ["hi"], "last-assistant-message": "done"});
        let (_, _, ev) =
            parse_hook_line(&hook_line(payload.to_string().as_bytes(), "codex:t-1", 3)).unwrap();
        assert_eq!(ev.name, "agent-turn-complete");
        assert_eq!(ev.session_id.as_deref(), Some("t-1"));
    }

    #[test]
    fn appending_rotates_a_full_file_aside() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hooks.jsonl");
        std::fs::write(&file, vec![b'a'; ROTATE_AT as usize]).unwrap();
        append_line(&file, "{\"n\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\"n\":1}\n");
        assert_eq!(
            std::fs::metadata(dir.path().join("hooks.jsonl.1"))
                .unwrap()
                .len(),
            ROTATE_AT
        );
    }

    #[test]
    fn gemini_settings_keep_the_machines_own_and_add_every_event() {
        let base = json!({"general": {"x": 1}, "hooks": {"BeforeAgent": [{"hooks": []}]}});
        let Value::Object(base) = base else {
            unreachable!()
        };
        let s = gemini_settings(
            Some(base),
            Path::new("/bin/sfs"),
            Path::new("/s/hooks.jsonl"),
            "gemini:k",
            Path::new("/l"),
        );
        assert_eq!(s["general"]["x"], 1);
        assert_eq!(s["hooks"]["BeforeAgent"].as_array().unwrap().len(), 2);
        for event in GEMINI_EVENTS {
            let entries = s["hooks"][*event].as_array().unwrap();
            let command = entries.last().unwrap()["hooks"][0]["command"]
                .as_str()
                .unwrap();
            assert!(command.contains("'gemini:k'"), "{command}");
        }
        let bare = gemini_settings(None, Path::new("/x"), Path::new("/h"), "k", Path::new("/l"));
        assert_eq!(bare.as_object().unwrap().len(), 1);
    }

    #[test]
    fn gemini_settings_are_read_only_below_private_directories() {
        // /tmp is writable by all: Gemini would skip a file below it.
        assert!(!gemini_reads_settings_under(Path::new(
            "/tmp/sessionfs/agents"
        )));
        assert!(gemini_reads_settings_under(Path::new("/")));
    }
}
