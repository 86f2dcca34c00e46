//! A model API stand-in for the real agent CLIs: Anthropic `POST
//! /v1/messages` and OpenAI `POST /v1/responses`, streamed as server-sent
//! events, on 127.0.0.1 only. Each test scripts the answers of its turns, may
//! slow a turn down, and reads back every request it received.
//!
//! Plain std: one thread accepts, one thread per connection, HTTP/1.1 with
//! keep-alive, chunked responses so a slow answer streams as it would.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What one model turn answers.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Plain assistant text; the turn ends (`end_turn`).
    Text(String),
    /// One shell tool call running `command`; the turn waits for its result.
    Bash(String),
    /// Codex: a shell call that asks to leave the sandbox
    /// (`sandbox_permissions: "require_escalated"` with a justification), so
    /// an `on-request` policy asks the person. Claude: as `Bash`.
    Escalated(String),
}

/// One scripted turn: the answer, and how long to pause after the first
/// streamed event before the rest (a slow turn).
#[derive(Clone, Debug)]
pub struct Turn {
    pub answer: Answer,
    pub delay: Duration,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// Path with the query string, as sent.
    pub path: String,
    pub body: String,
    pub at: Instant,
}

impl Request {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The person's words in a conversation request (either API): the last
    /// text part of the last user message that is not injected context
    /// (`<system-reminder>`, `<environment_context>`, ...).
    pub fn user_words(&self) -> Option<String> {
        let body = self.json();
        let messages = body
            .get("messages")
            .or_else(|| body.get("input"))
            .or_else(|| body.get("contents"))?
            .as_array()?;
        let last_user = messages
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
        // Gemini's contents hold `parts`, the others `content`.
        let content = last_user
            .get("content")
            .or_else(|| last_user.get("parts"))?;
        if let Some(s) = content.as_str() {
            return Some(s.to_string());
        }
        content
            .as_array()?
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .rfind(|t| !t.trim_start().starts_with('<'))
            .map(str::to_string)
    }

    /// Whether this is a conversation turn (it offers tools), as opposed to
    /// a side request such as a title or a token count.
    pub fn is_turn(&self) -> bool {
        if self.method != "POST" {
            return false;
        }
        // Side requests (Codex's task titles, token counts) offer no tools.
        (self.path.starts_with("/v1/responses")
            || self.path.starts_with("/v1/chat/completions")
            || self.path.contains(":streamGenerateContent")
            || (self.path.starts_with("/v1/messages")
                && !self.path.starts_with("/v1/messages/count_tokens")))
            && self
                .json()
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|t| !t.is_empty())
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Turn>,
    requests: Vec<Request>,
    /// When the last byte of each conversation answer went out, in order.
    answered: Vec<Instant>,
    /// Every conversation request is answered with this HTTP status (500,
    /// 529 "overloaded", or a 4xx refusal) until cleared; the queue waits.
    failing: Option<u16>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    ids: AtomicU64,
}

/// The running stand-in; stops when dropped.
pub struct ModelApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// Requests larger than this are refused (the CLIs send a few hundred KiB).
const MAX_BODY: usize = 32 << 20;

impl ModelApi {
    pub fn start() -> ModelApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            ids: AtomicU64::new(1),
        });
        let for_accept = shared.clone();
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if for_accept.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let shared = for_accept.clone();
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
        ModelApi {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL` (Codex wants `/v1` after it).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn push(&self, answer: Answer, delay: Duration) {
        let mut st = self.shared.state.lock().unwrap();
        st.queue.push_back(Turn { answer, delay });
    }

    pub fn push_text(&self, text: &str) {
        self.push(Answer::Text(text.into()), Duration::ZERO);
    }

    /// From now on every conversation request fails with HTTP `status`
    /// (None: answer again).
    pub fn fail_with(&self, status: Option<u16>) {
        self.shared.state.lock().unwrap().failing = status;
    }

    pub fn push_bash(&self, command: &str) {
        self.push(Answer::Bash(command.into()), Duration::ZERO);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The conversation requests so far.
    pub fn turns(&self) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_turn())
            .collect()
    }

    /// The last conversation request whose person's words are `words`
    /// (panics with the request log when none came).
    pub fn turn_with(&self, words: &str) -> Request {
        self.turns()
            .into_iter()
            .rfind(|r| r.user_words().as_deref() == Some(words))
            .unwrap_or_else(|| panic!("no request said {words:?}:\n{}", self.log()))
    }

    /// When the last byte of each conversation answer was sent.
    pub fn answered(&self) -> Vec<Instant> {
        self.shared.state.lock().unwrap().answered.clone()
    }

    /// Waits until `probe` holds over the requests received, up to `secs`.
    pub fn wait_requests(&self, secs: u64, what: &str, probe: impl Fn(&[Request]) -> bool) {
        let until = Instant::now() + Duration::from_secs(secs);
        let mut st = self.shared.state.lock().unwrap();
        while !probe(&st.requests) {
            let left = until.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for {what}");
            st = self.shared.changed.wait_timeout(st, left).unwrap().0;
        }
    }

    /// Waits until `n` conversation answers have been sent in full.
    pub fn wait_answered(&self, n: usize, secs: u64) {
        let until = Instant::now() + Duration::from_secs(secs);
        let mut st = self.shared.state.lock().unwrap();
        while st.answered.len() < n {
            let left = until.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "timed out waiting for {n} answers");
            st = self.shared.changed.wait_timeout(st, left).unwrap().0;
        }
    }

    /// One line per request, for failure messages.
    pub fn log(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                format!(
                    "{} {} ({} bytes) user={:?}\n",
                    r.method,
                    r.path,
                    r.body.len(),
                    r.user_words()
                )
            })
            .collect()
    }
}

impl Drop for ModelApi {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One connection: requests in a loop until the client closes it or the
/// stand-in stops.
fn serve(conn: TcpStream, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
    let _ = conn.set_nodelay(true);
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    let mut out = write_half;
    let mut reader = BufReader::new(conn);
    while !shared.stop.load(Ordering::SeqCst) {
        match read_request(&mut reader, shared) {
            Ok(Some(req)) => {
                let keep = respond(&mut out, &req, shared).is_ok();
                if !keep {
                    return;
                }
            }
            Ok(None) => return,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
    }
}

/// Reads one request; `None` when the client closed the connection.
/// A read timeout before the first byte is returned as an error to retry;
/// once a request has begun, timeouts are waited through.
fn read_request(
    reader: &mut BufReader<TcpStream>,
    shared: &Shared,
) -> std::io::Result<Option<Request>> {
    let mut head = String::new();
    // The request line; a timeout before its first byte means an idle
    // keep-alive connection, handed back to the caller to check for stop.
    while !head.ends_with('\n') {
        match reader.read_line(&mut head) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if is_timeout(&e) && !head.is_empty() && !shared.stop.load(Ordering::SeqCst) => {
            }
            Err(e) => return Err(e),
        }
    }
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if is_timeout(&e) && !shared.stop.load(Ordering::SeqCst) => continue,
            Err(e) => return Err(e),
        }
        if head.len() > 64 << 10 {
            return Err(std::io::Error::other("headers too long"));
        }
        let end = line == "\r\n" || line == "\n";
        head.push_str(&line);
        if end {
            break;
        }
    }
    let mut lines = head.lines();
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut length = 0usize;
    let mut chunked = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "content-length" {
            length = v.parse().unwrap_or(0);
        } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = if chunked {
        read_chunked(reader, shared)?
    } else {
        if length > MAX_BODY {
            return Err(std::io::Error::other("body too large"));
        }
        let mut body = vec![0; length];
        read_full(reader, &mut body, shared)?;
        body
    };
    Ok(Some(Request {
        method,
        path,
        body: String::from_utf8_lossy(&body).into_owned(),
        at: Instant::now(),
    }))
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn read_full(reader: &mut impl Read, buf: &mut [u8], shared: &Shared) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) && !shared.stop.load(Ordering::SeqCst) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_chunked(reader: &mut BufReader<TcpStream>, shared: &Shared) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        while size_line.is_empty() || !size_line.ends_with('\n') {
            match reader.read_line(&mut size_line) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) if is_timeout(&e) && !shared.stop.load(Ordering::SeqCst) => {}
                Err(e) => return Err(e),
            }
        }
        let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(std::io::Error::other)?;
        if body.len() + size > MAX_BODY {
            return Err(std::io::Error::other("body too large"));
        }
        let mut chunk = vec![0; size + 2];
        read_full(reader, &mut chunk, shared)?;
        body.extend_from_slice(&chunk[..size]);
        if size == 0 {
            return Ok(body);
        }
    }
}

fn respond(out: &mut TcpStream, req: &Request, shared: &Shared) -> std::io::Result<()> {
    let turn = req.is_turn();
    let (scripted, failing) = {
        let mut st = shared.state.lock().unwrap();
        st.requests.push(req.clone());
        shared.changed.notify_all();
        match st.failing {
            Some(status) if turn => (None, Some(status)),
            _ if turn => (st.queue.pop_front(), None),
            _ => (None, None),
        }
    };
    if let Some(status) = failing {
        // A client error's words say nothing an agent takes for "try again".
        let (kind, message) = match status {
            529 => ("overloaded_error", "Overloaded"),
            400..=499 => ("invalid_request_error", "The stand-in refuses this request"),
            _ => ("api_error", "Internal server error"),
        };
        return send_json(
            out,
            status,
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        );
    }
    let id = shared.ids.fetch_add(1, Ordering::SeqCst);
    let path = req.path.split('?').next().unwrap_or_default();
    let body = req.json();
    // Unscripted: a turn says so; a side request (a title) gets a word.
    let turn_answer = scripted.unwrap_or(Turn {
        answer: Answer::Text(
            if turn {
                "(nothing scripted)"
            } else {
                "Greeting"
            }
            .into(),
        ),
        delay: Duration::ZERO,
    });
    match (req.method.as_str(), path) {
        ("POST", "/v1/messages/count_tokens") => send_json(out, 200, &json!({"input_tokens": 100})),
        ("POST", "/v1/messages") => {
            if body.get("stream").and_then(Value::as_bool) == Some(true) {
                let events = anthropic_events(id, &turn_answer.answer);
                stream(out, &events, turn_answer.delay, || {
                    if turn {
                        mark_answered(shared)
                    }
                })
            } else {
                if turn {
                    mark_answered(shared);
                }
                send_json(out, 200, &anthropic_message(id, &turn_answer.answer))
            }
        }
        ("POST", "/v1/responses") => {
            let events = openai_events(id, &turn_answer.answer, &body);
            stream(out, &events, turn_answer.delay, || {
                if turn {
                    mark_answered(shared)
                }
            })
        }
        ("POST", "/v1/chat/completions") => {
            let events = chat_events(id, &turn_answer.answer, &body);
            stream(out, &events, turn_answer.delay, || {
                if turn {
                    mark_answered(shared)
                }
            })
        }
        // Gemini CLI's routing call: JSON that fits its schema, or it
        // retries five times.
        ("POST", p) if p.ends_with(":generateContent") => {
            let verdict = json!({"complexity_reasoning": "a plain request", "complexity_score": 1});
            send_json(
                out,
                200,
                &gemini_chunk(json!({"text": verdict.to_string()})),
            )
        }
        ("POST", p) if p.ends_with(":streamGenerateContent") => {
            let events = gemini_events(&turn_answer.answer, &body);
            stream(out, &events, turn_answer.delay, || {
                if turn {
                    mark_answered(shared)
                }
            })
        }
        ("GET", "/v1/models") => send_json(
            out,
            200,
            &json!({"object": "list", "data": [], "models": [], "has_more": false}),
        ),
        // Reachability probes: a HEAD answer has no body.
        ("HEAD", _) => {
            write!(out, "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")?;
            out.flush()
        }
        ("GET", "/") => send_json(out, 200, &json!({})),
        _ => send_json(
            out,
            404,
            &json!({"type": "error", "error": {"type": "not_found_error", "message": "not here"}}),
        ),
    }
}

fn mark_answered(shared: &Shared) {
    let mut st = shared.state.lock().unwrap();
    st.answered.push(Instant::now());
    shared.changed.notify_all();
}

fn send_json(out: &mut TcpStream, status: u16, v: &Value) -> std::io::Result<()> {
    let body = v.to_string();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        529 => "Overloaded",
        _ => "Internal Server Error",
    };
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}

/// Sends SSE events as chunks; pauses `delay` after the first one (before
/// it when it is the only one, which holds the whole answer: Gemini's);
/// calls `last` right before the last event goes out (so whoever sees the
/// end of the stream finds it recorded).
fn stream(
    out: &mut TcpStream,
    events: &[(String, Value)],
    delay: Duration,
    last: impl FnOnce(),
) -> std::io::Result<()> {
    let mut last = Some(last);
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    )?;
    out.flush()?;
    if events.len() == 1 && !delay.is_zero() {
        std::thread::sleep(delay);
    }
    for (i, (name, data)) in events.iter().enumerate() {
        if i + 1 == events.len() {
            if let Some(f) = last.take() {
                f();
            }
        }
        // Chat completions name no events and end on a bare `[DONE]`.
        let chunk = match (name.as_str(), data) {
            ("", Value::String(raw)) => format!("data: {raw}\n\n"),
            ("", data) => format!("data: {data}\n\n"),
            (name, data) => format!("event: {name}\ndata: {data}\n\n"),
        };
        write!(out, "{:x}\r\n{chunk}\r\n", chunk.len())?;
        out.flush()?;
        if i == 0 && events.len() > 1 && !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }
    write!(out, "0\r\n\r\n")?;
    out.flush()
}

const MODEL: &str = "claude-sonnet-4-5";

/// What each Messages answer reports: input, output (the last count, sent
/// with `message_delta`), cache write and cache read tokens. `tests/usage.rs`
/// checks a session's `usage` against these.
pub const CLAUDE_USAGE: [u64; 4] = [100, 10, 1000, 10000];

/// What each Responses answer reports: input (of which `[1]` cached),
/// output (of which `[3]` reasoning).
pub const CODEX_USAGE: [u64; 4] = [300, 200, 20, 5];

fn usage() -> Value {
    let [input, output, write, read] = CLAUDE_USAGE;
    json!({"input_tokens": input, "output_tokens": output, "cache_creation_input_tokens": write, "cache_read_input_tokens": read})
}

fn bash_input(command: &str) -> Value {
    json!({"command": command, "description": "Run the command"})
}

fn anthropic_message(id: u64, answer: &Answer) -> Value {
    let (content, stop) = match answer {
        Answer::Text(t) => (json!([{"type": "text", "text": t}]), "end_turn"),
        Answer::Bash(c) | Answer::Escalated(c) => (
            json!([{"type": "tool_use", "id": format!("toolu_{id:04}"), "name": "Bash", "input": bash_input(c)}]),
            "tool_use",
        ),
    };
    json!({"id": format!("msg_{id:04}"), "type": "message", "role": "assistant", "model": MODEL,
           "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage()})
}

fn anthropic_events(id: u64, answer: &Answer) -> Vec<(String, Value)> {
    let mut start = anthropic_message(id, answer);
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let mut ev = vec![(
        "message_start".to_string(),
        json!({"type": "message_start", "message": start}),
    )];
    let (block, delta, stop) = match answer {
        Answer::Text(t) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
            "end_turn",
        ),
        Answer::Bash(c) | Answer::Escalated(c) => (
            json!({"type": "tool_use", "id": format!("toolu_{id:04}"), "name": "Bash", "input": {}}),
            json!({"type": "input_json_delta", "partial_json": bash_input(c).to_string()}),
            "tool_use",
        ),
    };
    ev.push((
        "content_block_start".into(),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ));
    ev.push((
        "content_block_delta".into(),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    ));
    ev.push((
        "content_block_stop".into(),
        json!({"type": "content_block_stop", "index": 0}),
    ));
    ev.push((
        "message_delta".into(),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": CLAUDE_USAGE[1]}}),
    ));
    ev.push(("message_stop".into(), json!({"type": "message_stop"})));
    ev
}

/// The shell tool Codex offered in this request, and the arguments it takes.
fn codex_shell_call(command: &str, request: &Value) -> (String, Value) {
    let names: Vec<&str> = request
        .get("tools")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|x| x.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if names.contains(&"shell_command") {
        ("shell_command".into(), json!({"command": command}))
    } else if names.contains(&"exec_command") {
        ("exec_command".into(), json!({"cmd": command}))
    } else {
        ("shell".into(), json!({"command": ["bash", "-lc", command]}))
    }
}

fn openai_events(id: u64, answer: &Answer, request: &Value) -> Vec<(String, Value)> {
    let resp_id = format!("resp_{id:04}");
    let item_id = format!("msg_{id:04}");
    let mut ev = vec![(
        "response.created".to_string(),
        json!({"type": "response.created", "response": {"id": resp_id, "object": "response", "status": "in_progress", "output": []}}),
    )];
    let done_item = match answer {
        Answer::Text(t) => {
            ev.push((
                "response.output_item.added".into(),
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}}),
            ));
            ev.push((
                "response.output_text.delta".into(),
                json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0, "delta": t}),
            ));
            json!({"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": t, "annotations": []}]})
        }
        Answer::Bash(c) | Answer::Escalated(c) => {
            let (name, mut args) = codex_shell_call(c, request);
            if matches!(answer, Answer::Escalated(_)) {
                args["sandbox_permissions"] = json!("require_escalated");
                args["justification"] = json!("The command writes outside the sandbox.");
            }
            let item = json!({"type": "function_call", "id": format!("fc_{id:04}"), "call_id": format!("call_{id:04}"), "name": name, "arguments": args.to_string(), "status": "completed"});
            ev.push((
                "response.output_item.added".into(),
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ));
            item
        }
    };
    ev.push((
        "response.output_item.done".into(),
        json!({"type": "response.output_item.done", "output_index": 0, "item": done_item}),
    ));
    ev.push((
        "response.completed".into(),
        json!({"type": "response.completed", "response": {"id": resp_id, "object": "response", "status": "completed", "output": [],
               "usage": {"input_tokens": CODEX_USAGE[0], "input_tokens_details": {"cached_tokens": CODEX_USAGE[1]},
                         "output_tokens": CODEX_USAGE[2], "output_tokens_details": {"reasoning_tokens": CODEX_USAGE[3]},
                         "total_tokens": CODEX_USAGE[0] + CODEX_USAGE[2]}}}),
    ));
    ev
}

/// OpenAI-compatible streamed chat completions (Qwen Code, opencode; the
/// latter's title request offers no tools and is answered "Greeting"):
/// `chat.completion.chunk`s, a last one with `usage`, then `[DONE]`. A
/// shell call goes to the offered tool whose name has `shell` in it.
fn chat_events(id: u64, answer: &Answer, request: &Value) -> Vec<(String, Value)> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": format!("chatcmpl-{id:04}"), "object": "chat.completion.chunk", "created": 1,
               "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut ev = vec![];
    match answer {
        Answer::Text(t) => {
            ev.push((
                String::new(),
                chunk(json!({"role": "assistant", "content": t}), Value::Null),
            ));
            ev.push((String::new(), chunk(json!({}), json!("stop"))));
        }
        Answer::Bash(c) | Answer::Escalated(c) => {
            let tool = offered_shell_tool(request, |t| {
                t.pointer("/function/name")
                    .and_then(Value::as_str)
                    .into_iter()
                    .collect()
            });
            let args = json!({"command": c, "description": "run a command"}).to_string();
            ev.push((
                String::new(),
                chunk(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_{id:04}"), "type": "function",
                           "function": {"name": tool, "arguments": args}}]}),
                    Value::Null,
                ),
            ));
            ev.push((String::new(), chunk(json!({}), json!("tool_calls"))));
        }
    }
    ev.push((
        String::new(),
        json!({"id": format!("chatcmpl-{id:04}"), "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
               "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}),
    ));
    ev.push((String::new(), Value::String("[DONE]".into())));
    ev
}

/// The name of the tool a request offers whose name has `shell` in it, or
/// is `bash` (opencode's), (`names` reads the names one entry of `tools`
/// offers), else Gemini's and Qwen's own name for it.
fn offered_shell_tool(request: &Value, names: impl Fn(&Value) -> Vec<&str>) -> String {
    request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(names)
        .find(|n| n.contains("shell") || *n == "bash")
        .unwrap_or("run_shell_command")
        .to_string()
}

/// One Gemini `GenerateContentResponse` holding `part`, with usage.
fn gemini_chunk(part: Value) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
           "modelVersion": "fake-gemini"})
}

/// Gemini CLI's streamed turn (`streamGenerateContent?alt=sse`): the
/// answer in one event, a shell call as a `functionCall` of the offered
/// tool whose name has `shell` in it.
fn gemini_events(answer: &Answer, request: &Value) -> Vec<(String, Value)> {
    let part = match answer {
        Answer::Text(t) => json!({"text": t}),
        Answer::Bash(c) | Answer::Escalated(c) => {
            let tool = offered_shell_tool(request, |t| {
                t.get("functionDeclarations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.get("name").and_then(Value::as_str))
                    .collect()
            });
            json!({"functionCall": {"name": tool, "args": {"command": c, "description": "run a command"}}})
        }
    };
    vec![(String::new(), gemini_chunk(part))]
}
