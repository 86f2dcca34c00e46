"""The scale case of scripts/bench: N generated Claude conversations in 50
projects, served by the release daemon, timed beside `ls -f` of N tmpfs
directories in the same run.

    python3 scripts/bench_scale.py BIN WORKDIR N [N ...]

Prints one table per N with MET/MISSED per target: those for 10,000
conversations; at 100,000 the ready target is 5 s after the first run, RSS
256 MiB, `ls -f` still 3x tmpfs, and the other times may grow no faster
than N log N from the previous size's. Exit status is non-zero only when
something broke.

Every time is measured in several rounds and printed as
"MEDIAN (min MIN, max MAX, R rounds)"; a target is judged on the median.
The one exception is `archive-older`, which changes the state it measures
and runs once ("1 round").

In order, for each N:
  1. the first mount (state directory empty), five times: mount ready;
  2. the first minute after the last of those mounts, while the catalog
     still summarises (until it is complete, at most 60 s, at least 5
     rounds): `ls -f MNT` beside tmpfs, `cat sessions.json`, `sessionfs ls
     --limit 20` and one `meta.json`, round after round;
  3. the catalog complete: the same reads, also after a conversation was
     written, `stat sessions.json`, the root `status`, RSS, and `ls -l
     projects/web` quiet and while a shell prints;
  4. five restarts with the summaries saved;
  5. the organising room, nothing archived: a favourite, a title, a
     project, a `mkdir shell:NAME` and an archive, each on a session of its
     own, 10 rounds; then `archive-older` of 10,000 conversations (all of
     them when N is smaller), timed until `archived/` lists them all; then
     the same single changes again with those archived.
"""

import errno, json, math, os, random, shutil, signal, statistics, subprocess, sys, threading, time

PROJECTS = 50
BASE_S = 1_767_225_600  # 2026-01-01T00:00:00Z
MiB = 1024 * 1024
ROUNDS = 7  # a command timed again and again
CHEAP_ROUNDS = 20  # a single file call
READY_ROUNDS = 5  # first mounts, and restarts
EARLY_WINDOW_S = 60.0  # the first minute after the first mount
EARLY_MIN_ROUNDS = 5
EARLY_PAUSE_S = 0.1  # between rounds of the first minute
EDIT_ROUNDS = 10
ARCHIVE_OLDER = 10_000
# Given up after this long (reported as missed); BENCH_ARCHIVE_OLDER_DEADLINE
# sets another.
ARCHIVE_OLDER_DEADLINE_S = float(os.environ.get("BENCH_ARCHIVE_OLDER_DEADLINE", "600"))
EDIT_PAUSE_S = 0.05  # between two single changes


def broke(msg):
    print(f"bench: {msg}", file=sys.stderr)
    sys.exit(1)


class Stat:
    """Samples of one time, in seconds. Printed as the median with the
    spread: "12.3 ms (min 11.8, max 14.0, 7 rounds)"."""

    def __init__(self, samples):
        if not samples:
            broke("a time with no samples")
        self.samples = list(samples)
        self.median = statistics.median(self.samples)
        self.min = min(self.samples)
        self.max = max(self.samples)

    def __len__(self):
        return len(self.samples)

    def fmt(self, unit="ms"):
        scale = 1e3 if unit == "ms" else 1.0

        def num(v):
            v *= scale
            if v < 10:
                return f"{v:.2f}"
            if v < 100:
                return f"{v:.1f}"
            return f"{v:.0f}"

        n = len(self.samples)
        if n == 1:
            return f"{num(self.median)} {unit} (1 round)"
        return (f"{num(self.median)} {unit} (min {num(self.min)}, max {num(self.max)}, "
                f"{n} rounds)")


# Each generated reply's tokens, as Claude records them.
USAGE = {"input_tokens": 3, "output_tokens": 40, "cache_creation_input_tokens": 500,
         "cache_read_input_tokens": 2000}


def usage_counted(mnt, n, timeout=900):
    """Seconds until usage.json counts every conversation (None for a daemon
    without one), checking its totals."""
    path = os.path.join(mnt, "usage.json")
    if not os.path.exists(path):
        return None
    t0 = time.perf_counter()
    while True:
        doc = read_json(path)
        if doc["total"]["requests"] == n:
            break
        if time.perf_counter() - t0 > timeout:
            broke(f"usage.json counted {doc['total']['requests']} of {n} after {timeout} s")
        time.sleep(0.2)
    if doc["total"]["tokens"]["output"] != n * USAGE["output_tokens"]:
        broke(f"usage.json: {doc['total']}")
    return time.perf_counter() - t0


def generate(root, n):
    """n small Claude conversations in the store `root`; conversation i
    starts i minutes after BASE and was written 30 s later."""
    ids = []
    for i in range(n):
        c = Conv("claude", conv_id("claude", i), i)
        write_claude(root, c, i % PROJECTS, BASE_S + i * 60)
        ids.append(c.id)
    return ids


ENGINES = ("claude", "codex", "gemini", "opencode")
# Where each engine's store lies under a generated world's directory, and the
# variable that points the daemon at it.
STORE_DIRS = {"claude": ("claude", "CLAUDE_CONFIG_DIR"), "codex": ("codex", "CODEX_HOME"),
              "gemini": ("gemini", "GEMINI_CLI_HOME"), "opencode": ("data", "XDG_DATA_HOME")}
# Each engine's reply: 40 output tokens, as its store records them.
CODEX_USAGE = {"input_tokens": 2503, "cached_input_tokens": 2000, "output_tokens": 40,
               "reasoning_output_tokens": 0, "total_tokens": 2543}
GEMINI_TOKENS = {"input": 2503, "output": 40, "cached": 2000, "thoughts": 0, "tool": 0,
                 "total": 2543}
OPENCODE_TOKENS = {"total": 2543, "input": 3, "output": 40, "reasoning": 0,
                   "cache": {"write": 500, "read": 2000}}
OPENCODE_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures", "real", "opencode", "opencode.db")


class Conv:
    """One generated conversation: its engine, id and number (its prompt is
    "prompt number I", its reply "reply I")."""

    def __init__(self, engine, sid, i):
        self.engine, self.id, self.i = engine, sid, i

    @property
    def key(self):
        return f"{self.engine}:{self.id}"


def store_env(base):
    """The daemon's variables for the stores under `base` (every engine's,
    present or not, so two worlds differ only in what their stores hold)."""
    return {var: os.path.join(base, d) for d, var in STORE_DIRS.values()}


def conv_id(engine, i):
    if engine == "claude":
        return f"{i:08x}-0000-4000-8000-{i:012x}"
    if engine == "codex":
        return f"{i:08x}-0001-7000-8000-{i:012x}"
    if engine == "gemini":
        return f"{i:08x}-0002-4000-8000-{i:012x}"
    return f"ses_{i:012x}ffeBenchGen{i % 1000:03d}"


def jsonl(path, rows, mtime):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    os.utime(path, (mtime, mtime))


def iso_ms(s):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + f".{int(s * 1000) % 1000:03d}Z"


def write_codex(root, c, p, t):
    """A rollout as Codex CLI 0.125 writes one (tests/fixtures/real/codex):
    session_meta, the turn's context, the prompt, the reply, its token count."""
    day = time.gmtime(t)
    d = os.path.join(root, "sessions", time.strftime("%Y/%m/%d", day))
    os.makedirs(d, exist_ok=True)
    name = f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', day)}-{c.id}.jsonl"
    cwd, turn = f"/work/p{p}", f"{c.i:08x}-0003-7000-8000-{c.i:012x}"
    prompt = f"prompt number {c.i}"
    rows = [
        {"timestamp": iso_ms(t + 1), "type": "session_meta",
         "payload": {"id": c.id, "timestamp": iso_ms(t), "cwd": cwd, "originator": "codex-tui",
                     "cli_version": "0.125.0", "source": "cli", "model_provider": "openai",
                     "base_instructions": {"text": "You are Codex, a coding agent."}}},
        {"timestamp": iso_ms(t + 1), "type": "event_msg",
         "payload": {"type": "task_started", "turn_id": turn, "started_at": int(t + 1),
                     "model_context_window": 258400, "collaboration_mode_kind": "default"}},
        {"timestamp": iso_ms(t + 1), "type": "turn_context",
         "payload": {"turn_id": turn, "cwd": cwd, "current_date": time.strftime("%Y-%m-%d", day),
                     "timezone": "UTC", "approval_policy": "on-request",
                     "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5.1-codex",
                     "personality": "pragmatic"}},
        {"timestamp": iso_ms(t + 1), "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": prompt}]}},
        {"timestamp": iso_ms(t + 1), "type": "event_msg",
         "payload": {"type": "user_message", "message": prompt, "images": [],
                     "local_images": [], "text_elements": []}},
        {"timestamp": iso_ms(t + 20), "type": "event_msg",
         "payload": {"type": "agent_message", "message": f"reply {c.i}"}},
        {"timestamp": iso_ms(t + 20), "type": "response_item",
         "payload": {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": f"reply {c.i}"}]}},
        {"timestamp": iso_ms(t + 20), "type": "event_msg",
         "payload": {"type": "token_count",
                     "info": {"total_token_usage": CODEX_USAGE, "last_token_usage": CODEX_USAGE,
                              "model_context_window": 258400}, "rate_limits": None}},
        {"timestamp": iso_ms(t + 20), "type": "event_msg",
         "payload": {"type": "task_complete", "turn_id": turn,
                     "last_agent_message": f"reply {c.i}"}},
    ]
    jsonl(os.path.join(d, name), rows, t + 30)


def write_gemini(root, c, p, t):
    """A session file as Gemini CLI writes one (tests/fixtures/real/gemini):
    the header, the injected context naming the workspace, the prompt and the
    reply, each followed by its `$set` of lastUpdated."""
    d = os.path.join(root, ".gemini", "tmp", f"p{p}", "chats")
    name = f"session-{time.strftime('%Y-%m-%dT%H-%M', time.gmtime(t))}-{c.id[:8]}.jsonl"
    os.makedirs(d, exist_ok=True)
    cwd = f"/work/p{p}"
    context = ("<session_context>\nThis is the Gemini CLI. We are setting up the context for "
               "our chat.\nMy operating system is: linux\n- **Workspace Directories:**\n"
               f"  - {cwd}\n- **Directory Structure:**\n\n{cwd}/\n\n</session_context>")
    rows = [
        {"sessionId": c.id, "projectHash": f"{p:064x}", "startTime": iso_ms(t),
         "lastUpdated": iso_ms(t), "kind": "main"},
        {"$set": {"messages": [{"id": f"{c.i:032x}", "timestamp": iso_ms(t), "type": "user",
                                "content": [{"text": context}]}], "lastUpdated": iso_ms(t)}},
        {"id": f"{c.i:08x}-0004-4000-8000-{c.i:012x}", "timestamp": iso_ms(t + 1), "type": "user",
         "content": [{"text": f"prompt number {c.i}"}]},
        {"$set": {"lastUpdated": iso_ms(t + 1)}},
        {"id": f"{c.i:08x}-0005-4000-8000-{c.i:012x}", "timestamp": iso_ms(t + 20),
         "type": "gemini", "content": f"reply {c.i}", "thoughts": [], "tokens": GEMINI_TOKENS,
         "model": "gemini-2.5-flash"},
        {"$set": {"lastUpdated": iso_ms(t + 20)}},
    ]
    jsonl(os.path.join(d, name), rows, t + 30)


def opencode_db(root, convs):
    """opencode's store with these conversations (`session`, `message` and
    `part` rows as opencode 1.18 writes them, tests/fixtures/real/opencode),
    its schema copied from the recorded one, in WAL mode. Closed as opencode
    leaves it when it exits: no `-wal` or `-shm`."""
    import sqlite3
    d = os.path.join(root, "opencode")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "opencode.db")
    src = sqlite3.connect(f"file:{os.path.abspath(OPENCODE_FIXTURE)}?mode=ro", uri=True)
    schema = [sql for (sql,) in src.execute(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type = 'index', rowid")]
    migrations = src.execute("SELECT id, time_completed FROM migration").fetchall()
    src.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    with db:
        for sql in schema:
            db.execute(sql)
        db.executemany("INSERT INTO migration VALUES (?, ?)", migrations)
        db.execute("INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) "
                   "VALUES ('global', '/', ?, ?, '[]')", (BASE_S * 1000, BASE_S * 1000))
        sessions, messages, parts = [], [], []
        for c, p, t in convs:
            ms = int(t * 1000)
            cwd = f"/work/p{p}"
            user, reply = f"msg_{c.i:012x}0001BenchGenUser", f"msg_{c.i:012x}0002BenchGenAnsw"
            sessions.append((c.id, "global", f"bench-{c.i}", cwd, cwd[1:],
                             f"prompt number {c.i}", "1.18.33", 3, 40, 0, 2000, 500,
                             '{"id":"claude-sonnet-4-5","providerID":"anthropic"}', "build",
                             ms, ms + 30_000))
            messages.append((user, c.id, ms + 1000, ms + 1000, json.dumps(
                {"role": "user", "time": {"created": ms + 1000}, "agent": "build",
                 "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
                 "summary": {"diffs": []}}, separators=(",", ":"))))
            messages.append((reply, c.id, ms + 2000, ms + 20_000, json.dumps(
                {"parentID": user, "role": "assistant", "mode": "build", "agent": "build",
                 "path": {"cwd": cwd, "root": "/"}, "cost": 0, "tokens": OPENCODE_TOKENS,
                 "modelID": "claude-sonnet-4-5", "providerID": "anthropic",
                 "time": {"created": ms + 2000, "completed": ms + 20_000}, "finish": "stop"},
                separators=(",", ":"))))
            for k, (mid, data, at) in enumerate((
                    (user, {"type": "text", "text": f"prompt number {c.i}"}, 1000),
                    (reply, {"type": "step-start"}, 2000),
                    (reply, {"type": "text", "text": f"reply {c.i}"}, 19_000),
                    (reply, {"type": "step-finish", "reason": "stop", "tokens": OPENCODE_TOKENS,
                             "cost": 0}, 20_000))):
                parts.append((f"prt_{c.i:012x}{k:04d}BenchGenPart", mid, c.id, ms + at, ms + at,
                              json.dumps(data, separators=(",", ":"))))
        db.executemany(
            "INSERT INTO session (id, project_id, slug, directory, path, title, version, "
            "tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, "
            "tokens_cache_write, model, agent, time_created, time_updated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", sessions)
        db.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)", messages)
        db.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", parts)
    db.close()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            broke(f"{path}{suffix} left after closing the generated store")


def generate_stores(base, n, engines=ENGINES):
    """n small conversations split evenly over `engines` (conversation i is
    engines[i % len]), each store under `base` as store_env() names them:
    one prompt, one reply with its tokens, a cwd in one of the 50 projects
    (each engine's conversations spread over all 50); conversation i starts
    i minutes after BASE and was written 30 s later. Returns the Convs in
    order."""
    for d, _ in STORE_DIRS.values():
        os.makedirs(os.path.join(base, d), exist_ok=True)
    convs, oc = [], []
    for i in range(n):
        engine = engines[i % len(engines)]
        c = Conv(engine, conv_id(engine, i), i)
        convs.append(c)
        t = BASE_S + i * 60
        p = (i // len(engines)) % PROJECTS
        root = os.path.join(base, STORE_DIRS[engine][0])
        if engine == "claude":
            write_claude(root, c, p, t)
        elif engine == "codex":
            write_codex(root, c, p, t)
        elif engine == "gemini":
            write_gemini(root, c, p, t)
        else:
            oc.append((c, p, t))
    if "gemini" in engines:
        projects = {f"/work/p{p}": f"p{p}" for p in range(PROJECTS)}
        with open(os.path.join(base, "gemini", ".gemini", "projects.json"), "w") as f:
            json.dump({"projects": projects}, f, indent=2)
    if oc:
        opencode_db(os.path.join(base, "data"), oc)
    return convs


def write_claude(root, c, p, t):
    d = os.path.join(root, "projects", f"-work-p{p}")
    os.makedirs(d, exist_ok=True)
    ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))
    i, sid = c.i, c.id
    rows = [
        {"type": "user", "sessionId": sid, "cwd": f"/work/p{p}", "timestamp": ts,
         "uuid": f"u{i}", "message": {"role": "user", "content": f"prompt number {i}"}},
        {"type": "assistant", "sessionId": sid, "timestamp": ts, "uuid": f"a{i}",
         "requestId": f"req_{i}",
         "message": {"id": f"msg_{i}", "model": "claude-sonnet-4-5", "role": "assistant",
                     "content": [{"type": "text", "text": f"reply {i}"}],
                     "usage": USAGE}},
    ]
    jsonl(os.path.join(d, f"{sid}.jsonl"), rows, t + 30)


def vm(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    broke(f"no {field} for pid {pid}")


def run_once(argv, env=None, keep=True):
    """Wall time of `argv` and, with `keep`, its output. Without, the output
    goes to /dev/null, so the time is the command's, not this script's
    reading of tens of megabytes from a pipe."""
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.PIPE if keep else subprocess.DEVNULL,
                       stderr=subprocess.PIPE, env=env)
    t = time.perf_counter() - t0
    if r.returncode != 0:
        broke(f"{' '.join(argv)} failed: {r.stderr.decode(errors='replace').strip()}")
    return t, r.stdout


def timed(argv, env=None, reps=ROUNDS, before=None, keep=True):
    """`argv` timed `reps` times: (Stat, the last output)."""
    times, out = [], None
    for _ in range(reps):
        if before:
            before()
        t, out = run_once(argv, env, keep)
        times.append(t)
    return Stat(times), out


def each(fn, reps=CHEAP_ROUNDS):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return Stat(times)


def write_file(path, text):
    """What `echo TEXT > PATH` asks of the mount (open with O_TRUNC, one
    write, close), from this process: the time is the mount's, not a
    shell's start."""
    t0 = time.perf_counter()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as e:
        broke(f"writing {text.strip()!r} to {path}: {e}")
    return time.perf_counter() - t0


def read_json(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError) as e:
        broke(f"reading {path}: {e}")


class Daemon:
    def __init__(self, binary, env, mnt, log):
        self.binary, self.env, self.mnt, self.log = binary, env, mnt, log
        self.proc = None

    def start(self):
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([self.binary, "mount", self.mnt], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "ab"))
        deadline = time.time() + 300
        while not os.path.exists(os.path.join(self.mnt, "status")):
            if self.proc.poll() is not None:
                broke(f"the daemon exited ({self.proc.returncode}); see {self.log}")
            if time.time() > deadline:
                broke("the mount was not ready within 300 s")
            time.sleep(0.002)
        return time.perf_counter() - t0

    def status(self):
        return read_json(os.path.join(self.mnt, "status"))

    def catalog_done(self, n):
        c = self.status()["catalog"]
        return c["summarised"] >= n and c["saved"]

    def wait_catalog(self, n, timeout=600):
        deadline = time.time() + timeout
        while True:
            c = self.status()["catalog"]
            if c["summarised"] >= n and c["saved"]:
                return
            if time.time() > deadline:
                broke(f"the catalog did not summarise {n} conversations in {timeout} s: {c}")
            time.sleep(0.05)

    def alive(self):
        if self.proc is None or self.proc.poll() is not None:
            broke(f"the daemon has exited; see {self.log}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        deadline = time.time() + 10
        while is_mounted(self.mnt) and time.time() < deadline:
            time.sleep(0.02)
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt])


def private_daemon(work, name, binary, store_vars):
    """A daemon with home, state, runtime directory and mount point of its
    own under WORK/NAME, reading the stores `store_vars` name."""
    base = os.path.join(work, name)
    for d in ("home", "state", "runtime", "mnt"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    os.chmod(os.path.join(base, "runtime"), 0o700)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(base, "home"),
           "XDG_STATE_HOME": os.path.join(base, "state"),
           "XDG_RUNTIME_DIR": os.path.join(base, "runtime"), "RUST_LOG": "warn"}
    env.update(store_vars)
    return Daemon(binary, env, os.path.join(base, "mnt"), os.path.join(base, "daemon.log"))


def fresh_state(d):
    """Empties a daemon's state and runtime directories (a first mount)."""
    for top in ("XDG_STATE_HOME", "XDG_RUNTIME_DIR"):
        for entry in os.listdir(d.env[top]):
            shutil.rmtree(os.path.join(d.env[top], entry))


def is_mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def session_names(out):
    return [l for l in out.decode().splitlines() if ":" in l]


def first_minute(d, mnt, anchor, binary, env, ids, n):
    """Round after round from the first mount until the catalog is complete
    (at most EARLY_WINDOW_S, at least EARLY_MIN_ROUNDS): ls -f MNT and of
    the tmpfs directories, cat sessions.json, sessionfs ls --limit 20 and
    one meta.json (another session each round)."""
    sj_path = os.path.join(mnt, "sessions.json")
    t = {"ls": [], "tmpfs": [], "sj": [], "cli": [], "meta": []}
    start = time.perf_counter()
    before_done, rounds, untitled = 0, 0, 0
    step = max(1, n // 97)
    while True:
        done = d.catalog_done(n)
        elapsed = time.perf_counter() - start
        if rounds >= EARLY_MIN_ROUNDS and (done or elapsed >= EARLY_WINDOW_S):
            break
        before_done += not done
        s, out = run_once(["ls", "-f", mnt])
        names = session_names(out)
        if len(names) != n:
            broke(f"ls -f listed {len(names)} sessions, not {n} (round {rounds + 1} "
                  "after the first mount)")
        t["ls"].append(s)
        t["tmpfs"].append(run_once(["ls", "-f", anchor])[0])
        if rounds == 0:
            # The first read of sessions.json after the mount, and the same
            # order as ls -f (untimed: the timed one is a cat).
            doc = read_json(sj_path)
            if doc["total"] != n:
                broke(f"sessions.json has {doc['total']} sessions, not {n}")
            if [x["key"] for x in doc["sessions"]] != names:
                broke("sessions.json and ls -f disagree on the order")
        t["sj"].append(run_once(["cat", sj_path], keep=False)[0])
        s, out = run_once([binary, "ls", "--limit", "20"], env=env)
        if f"20 of {n} sessions" not in out.decode():
            broke(f"sessionfs ls --limit 20 printed: {out.decode()[-200:]}")
        t["cli"].append(s)
        i = (rounds * step) % n
        path = os.path.join(mnt, f"claude:{ids[i]}", "meta.json")
        t0 = time.perf_counter()
        meta = read_json(path)
        t["meta"].append(time.perf_counter() - t0)
        if meta["title"] != f"prompt number {i}":
            # Not summarised yet: a title may come later; anything else is wrong.
            if meta["title"] is not None:
                broke(f"{path}: title {meta['title']!r}")
            untitled += 1
        rounds += 1
        time.sleep(EARLY_PAUSE_S)
    window = time.perf_counter() - start
    return {k: Stat(v) for k, v in t.items()}, rounds, before_done, window, untitled


FACET_LINKS = 1000


def facet_walks(mnt, ids):
    """`ls -l projects/web` (a lookup per link) of 1,000 of the sessions:
    quiet, then while a shell prints a line every 5 ms."""
    web = ids[:FACET_LINKS]
    for sid in web:
        with open(os.path.join(mnt, f"claude:{sid}", "project"), "w") as f:
            f.write("web\n")
    facet = os.path.join(mnt, "projects", "web")

    def ls_l():
        t, out = timed(["ls", "-l", facet])
        links = sum(1 for l in out.decode().splitlines() if " -> ../../claude:" in l)
        if links != len(web):
            broke(f"ls -l {facet} showed {links} links, not {len(web)}")
        return t

    quiet = ls_l()
    talker = os.path.join(mnt, "shell:bench-talker")
    os.mkdir(talker)
    with open(os.path.join(talker, "input"), "w") as f:
        f.write("while :; do echo tick; sleep 0.005; done\n")
    deadline = time.time() + 20
    while os.stat(os.path.join(talker, "scrollback")).st_size < 1000:
        if time.time() > deadline:
            broke("the talking shell printed nothing in 20 s")
        time.sleep(0.01)
    chatty = ls_l()
    # Stopped and archived: the restarts below list the N conversations only.
    with open(os.path.join(talker, "ctl"), "w") as f:
        f.write("stop\n")
    with open(os.path.join(talker, "archive"), "w") as f:
        f.write("1\n")
    return quiet, chatty


def rfc3339(s):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s))


def organise(d, mnt, ids, n):
    """The organising room: single changes with nothing archived, then
    archive-older of min(n, ARCHIVE_OLDER) conversations, then the single
    changes again. Returns the rows' Stats and facts."""
    archived_dir = os.path.join(mnt, "archived")
    # Nothing archived to begin with (the facet walk's talking shell was).
    for key in os.listdir(archived_dir):
        write_file(os.path.join(archived_dir, key, "archive"), "0\n")
    if os.listdir(archived_dir):
        broke(f"{archived_dir} still lists {os.listdir(archived_dir)} after unarchiving")

    k = min(n, ARCHIVE_OLDER)  # the k oldest: ids[:k]
    # Sessions of their own for each change and phase: the newest for the
    # first; for the second, active ones past the k oldest while there are
    # enough, else archived ones, edited in archived/KEY.
    kinds = ("favourite", "title", "project", "archive")
    per = EDIT_ROUNDS
    need = len(kinds) * per
    if n < 2 * need:
        broke(f"{n} conversations are too few for the organising rounds (at least {2 * need})")
    pool_before = ids[n - need:]
    pool_after = ids[k:k + need] if n - k >= 2 * need else ids[n - 2 * need:n - need]

    def where(sid):
        key = f"claude:{sid}"
        if os.path.isdir(os.path.join(mnt, key)):
            return os.path.join(mnt, key), False
        if os.path.isdir(os.path.join(archived_dir, key)):
            return os.path.join(archived_dir, key), True
        broke(f"{key} is neither in the root nor in archived/")

    def singles(phase, pool):
        t = {kind: [] for kind in kinds}
        t["mkdir"] = []
        on_archived = False
        for r in range(per):
            targets = {kind: pool[j * per + r] for j, kind in enumerate(kinds)}
            # favourite, title, project: on the session where it is.
            for kind, text, want in (("favourite", "1\n", True),
                                     ("title", f"bench title {phase} {r}\n",
                                      f"bench title {phase} {r}"),
                                     ("project", "organised\n", "organised")):
                sdir, arch = where(targets[kind])
                on_archived |= arch
                t[kind].append(write_file(os.path.join(sdir, kind), text))
                got = read_json(os.path.join(sdir, "meta.json"))[kind]
                if got != want:
                    broke(f"{sdir}: {kind} is {got!r} after writing {text.strip()!r}")
                time.sleep(EDIT_PAUSE_S)
            # mkdir shell:NAME: a session made (and left: rmdir is EPERM;
            # archiving it would leave one archived).
            made = os.path.join(mnt, f"shell:bench-{phase}{r}")
            t0 = time.perf_counter()
            try:
                os.mkdir(made)
            except OSError as e:
                broke(f"mkdir {made}: {e}")
            t["mkdir"].append(time.perf_counter() - t0)
            if not os.path.isfile(os.path.join(made, "meta.json")):
                broke(f"{made} has no meta.json after mkdir")
            time.sleep(EDIT_PAUSE_S)
            # archive one conversation: an active one (unarchived first,
            # untimed, when all are archived).
            key = f"claude:{targets['archive']}"
            sdir, arch = where(targets["archive"])
            if arch:
                write_file(os.path.join(sdir, "archive"), "0\n")
                if not os.path.isdir(os.path.join(mnt, key)):
                    broke(f"{key} is not back in the root after unarchiving")
                time.sleep(EDIT_PAUSE_S)
            t["archive"].append(write_file(os.path.join(mnt, key, "archive"), "1\n"))
            if not os.path.isdir(os.path.join(archived_dir, key)):
                broke(f"{key} is not in archived/ after echo 1 > archive")
            if phase == "before":
                # Nothing stays archived in this phase.
                write_file(os.path.join(archived_dir, key, "archive"), "0\n")
                if not os.path.isdir(os.path.join(mnt, key)):
                    broke(f"{key} is not back in the root after unarchiving")
            time.sleep(EDIT_PAUSE_S)
        return {kind: Stat(v) for kind, v in t.items()}, on_archived

    d.alive()
    print(f"bench: {n}: single changes, nothing archived", file=sys.stderr)
    before, _ = singles("before", pool_before)
    if os.listdir(archived_dir):
        broke(f"{archived_dir} is not empty after the single changes")

    # archive-older CUTOFF: conversation i was last active at BASE + 60 i + 30.
    cutoff = rfc3339(BASE_S + k * 60)
    # What it should archive: the active sessions last active before it.
    active = read_json(os.path.join(mnt, "sessions.json"))["sessions"]
    k = sum(1 for m in active if m["last_activity"] < cutoff.replace("Z", ".000Z"))
    print(f"bench: {n}: archive-older {cutoff} ({k} sessions)", file=sys.stderr)
    done = {}
    ctl = os.path.join(mnt, "ctl")

    def write_ctl():
        t0 = time.perf_counter()
        try:
            fd = os.open(ctl, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, f"archive-older {cutoff}\n".encode())
            finally:
                os.close(fd)
            done["write"] = (time.perf_counter() - t0, "")
        except OSError as e:
            if e.errno == errno.ETIMEDOUT:
                # The daemon's 15 s deadline: it goes on in the background.
                done["write"] = (time.perf_counter() - t0, ", with ETIMEDOUT")
            else:
                done["error"] = e

    t0 = time.perf_counter()
    writer = threading.Thread(target=write_ctl, daemon=True)
    writer.start()
    count, all_s, told = 0, None, 0.0
    while True:
        elapsed = time.perf_counter() - t0
        if elapsed - told >= 30:
            told = elapsed
            print(f"bench: {n}: {count} of {k} archived after {elapsed:.0f} s", file=sys.stderr)
        if "error" in done:
            broke(f"archive-older {cutoff} > {ctl}: {done['error']}")
        count = len(os.listdir(archived_dir))
        if count >= k:
            all_s = time.perf_counter() - t0
            break
        if elapsed > ARCHIVE_OLDER_DEADLINE_S:
            break
        # Finer near the target, then less load on the daemon.
        time.sleep(0.1 if elapsed < 10 else 0.5)
    org = {"k": k, "cutoff": cutoff, "all_s": all_s, "count": count, "before": before,
           "after": None, "after_on_archived": False}
    if all_s is None:
        # Missed by far: reported as such; the changes "after" are not
        # measured while it still runs (the daemon is stopped under it).
        print(f"bench: {n}: archive-older had archived {count} of {k} after "
              f"{ARCHIVE_OLDER_DEADLINE_S:.0f} s; not waiting longer", file=sys.stderr)
        return org
    writer.join(timeout=ARCHIVE_OLDER_DEADLINE_S)
    if writer.is_alive():
        broke(f"archive-older {cutoff} > {ctl} had not returned {ARCHIVE_OLDER_DEADLINE_S:.0f} s "
              "after archived/ listed them all")
    if "error" in done:
        broke(f"archive-older {cutoff} > {ctl}: {done['error']}")
    org["write_s"] = done["write"]
    count = len(os.listdir(archived_dir))
    if count != k:
        broke(f"archive-older archived {count} sessions, not {k}")
    d.alive()

    print(f"bench: {n}: single changes, {count} archived", file=sys.stderr)
    org["after"], org["after_on_archived"] = singles("after", pool_after)
    return org


def run(binary, work, n, prev=None):
    """Measures n conversations. `prev` = (n, medians) of a smaller run: past
    10,000 the time targets are growth no faster than N log N from it."""
    base = os.path.join(work, f"n{n}")
    claude = os.path.join(base, "claude")
    mnt = os.path.join(base, "mnt")
    state = os.path.join(base, "state")
    runtime = os.path.join(base, "runtime")
    for d in ("home", "state", "runtime", "codex", "mnt"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    os.chmod(runtime, 0o700)
    print(f"bench: generating {n} conversations", file=sys.stderr)
    ids = generate(claude, n)
    anchor = os.path.join("/dev/shm", f"sessionfs-bench-{os.getpid()}-{n}")
    os.makedirs(anchor)
    for i in range(n):
        os.mkdir(os.path.join(anchor, f"claude:{ids[i]}"))

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(base, "home"),
           "XDG_STATE_HOME": state, "XDG_RUNTIME_DIR": runtime,
           "CLAUDE_CONFIG_DIR": claude, "CODEX_HOME": os.path.join(base, "codex"),
           "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    d = Daemon(binary, env, mnt, os.path.join(base, "daemon.log"))
    try:
        # The stores are as warm as a person's after their last use; both
        # sides are warm. A first mount: the state directory empty each time.
        print(f"bench: {n}: first mounts", file=sys.stderr)
        ready_t = []
        for r in range(READY_ROUNDS):
            for top in (state, runtime):
                for entry in os.listdir(top):
                    shutil.rmtree(os.path.join(top, entry))
            ready_t.append(d.start())
            if r < READY_ROUNDS - 1:
                d.stop()
        ready = Stat(ready_t)

        print(f"bench: {n}: the first minute", file=sys.stderr)
        early, early_rounds, early_before, early_window, early_untitled = first_minute(
            d, mnt, anchor, binary, env, ids, n)
        d.wait_catalog(n)

        # A conversation written to (as a live one is all the time): the
        # daemon's listings made before no longer hold.
        touched = [0]

        def write_one():
            touched[0] += 1
            p = os.path.join(claude, "projects", "-work-p0", f"{ids[0]}.jsonl")
            t = BASE_S + 30 + touched[0]
            os.utime(p, (t, t))
            time.sleep(0.01)

        print(f"bench: {n}: the catalog complete", file=sys.stderr)
        # The daemon counts usage from its start: measured once it has.
        counted_after = usage_counted(mnt, n)
        # ls -f of the mount and of tmpfs take turns, so load falls on both.
        ls_t, tmpfs_t = [], []
        for _ in range(ROUNDS):
            ls_t.append(run_once(["ls", "-f", mnt])[0])
            tmpfs_t.append(run_once(["ls", "-f", anchor])[0])
        ls_f, tmpfs = Stat(ls_t), Stat(tmpfs_t)
        ls_f_changed, _ = timed(["ls", "-f", mnt], before=write_one)
        sj, _ = timed(["cat", os.path.join(mnt, "sessions.json")], keep=False)
        sj_bytes = os.stat(os.path.join(mnt, "sessions.json")).st_size
        sj_changed, _ = timed(["cat", os.path.join(mnt, "sessions.json")], keep=False,
                              before=write_one)
        cli, out = timed([binary, "ls", "--limit", "20"], env=env, before=write_one)
        if f"20 of {n} sessions" not in out.decode():
            broke(f"sessionfs ls --limit 20 printed: {out.decode()[-200:]}")
        meta_times = []
        for i in range(0, n, max(1, n // CHEAP_ROUNDS)):
            path = os.path.join(mnt, f"claude:{ids[i]}", "meta.json")
            t0 = time.perf_counter()
            meta = read_json(path)
            meta_times.append(time.perf_counter() - t0)
            if meta["title"] != f"prompt number {i}":
                broke(f"{path}: title {meta['title']!r}")
        meta_t = Stat(meta_times)
        # What every `ls -l` of the root and every look at the daemon asks:
        # answered from what is kept, not from a look at every conversation.
        stat_sj = each(lambda: os.stat(os.path.join(mnt, "sessions.json")))
        usage_json_t = usage_one_t = None
        if counted_after is not None:
            usage_json_t, _ = timed(["cat", os.path.join(mnt, "usage.json")], keep=False)
            usage_one_t = each(lambda: read_json(os.path.join(
                mnt, f"claude:{ids[random.randrange(n)]}", "usage")))
        status_t = each(lambda: d.status())
        rss = vm(d.proc.pid, "VmRSS")
        hwm = vm(d.proc.pid, "VmHWM")
        ls_facet, ls_facet_chatty = facet_walks(mnt, ids)
        d.stop()

        print(f"bench: {n}: restarts", file=sys.stderr)
        restart_t, restart_json_t, reread = [], [], []
        for _ in range(READY_ROUNDS):
            restart_t.append(d.start())
            t0 = time.perf_counter()
            again = read_json(os.path.join(mnt, "sessions.json"))
            restart_json_t.append(time.perf_counter() - t0)
            if again["total"] != n:
                broke(f"after a restart sessions.json has {again['total']} sessions")
            reread.append(d.status()["catalog"]["files_read"])
            restart_rss = vm(d.proc.pid, "VmRSS")
            if len(restart_t) < READY_ROUNDS:
                d.stop()
        restart_ready, restart_json = Stat(restart_t), Stat(restart_json_t)

        d.wait_catalog(n)
        org = organise(d, mnt, ids, n)
        d.alive()
    finally:
        d.stop()
        shutil.rmtree(anchor, ignore_errors=True)

    big = n >= 100_000
    medians = {"sj": sj.median, "sj_changed": sj_changed.median, "cli": cli.median,
               "early_sj": early["sj"].median, "early_cli": early["cli"].median}

    def target(name, fixed_s):
        """(text, met) for a time: the fixed target up to 10,000, else at
        most N log N times the smaller run's."""
        value = medians[name]
        if not big or prev is None:
            return f"< {fixed_s * 1e3:.0f} ms", value < fixed_s
        pn, pmed = prev
        bound = pmed[name] * (n * math.log(n)) / (pn * math.log(pn))
        return f"<= N log N from {pn} ({bound * 1e3:.0f} ms)", value <= bound

    def ms(v):
        return f"{v * 1e3:.1f} ms"

    ready_target = 5.0 if big else 1.0
    rss_target = 256 * MiB if big else 64 * MiB
    three_tmpfs = 3 * tmpfs.median
    early_three = 3 * early["tmpfs"].median
    k = org["k"]
    rows = [
        ("mount ready (first mount, state empty)", ready.fmt(), "-" if big else "< 1 s",
         None if big else ready.median < 1.0),
        (f"FIRST MINUTE after the first mount ({early_before} of {early_rounds} rounds "
         f"before the catalog was complete, {early_window:.1f} s)", "", "", None),
        ("  ls -f MNT", early["ls"].fmt(), f"<= 3x tmpfs ({ms(early_three)})",
         early["ls"].median <= early_three),
        ("  ls -f of N tmpfs dirs", early["tmpfs"].fmt(), "-", None),
        ("  cat sessions.json", early["sj"].fmt(), *target("early_sj", 0.200)),
        ("  sessionfs ls --limit 20", early["cli"].fmt(), *target("early_cli", 0.100)),
        (f"  one meta.json (untitled yet: {early_untitled})", early["meta"].fmt(), "< 5 ms",
         early["meta"].median < 0.005),
        ("CATALOG COMPLETE", "", "", None),
        ("  ls -f MNT, nothing changed", ls_f.fmt(), f"<= 3x tmpfs ({ms(three_tmpfs)})",
         ls_f.median <= three_tmpfs),
        ("  ls -f MNT, a conversation written before each", ls_f_changed.fmt(),
         f"<= 3x tmpfs ({ms(three_tmpfs)})", ls_f_changed.median <= three_tmpfs),
        ("  ls -f of N tmpfs dirs", tmpfs.fmt(), "-", None),
        (f"  cat sessions.json ({sj_bytes / MiB:.1f} MiB), nothing changed", sj.fmt(),
         *target("sj", 0.200)),
        ("  cat sessions.json, a conversation written before each", sj_changed.fmt(),
         *target("sj_changed", 0.200)),
        ("  sessionfs ls --limit 20, a conversation written before each", cli.fmt(),
         *target("cli", 0.100)),
        ("  one meta.json", meta_t.fmt(), "< 5 ms", meta_t.median < 0.005),
        ("  stat sessions.json", stat_sj.fmt(), "< 5 ms", stat_sj.median < 0.005),
        ("  cat status (the root's)", status_t.fmt(), "< 5 ms", status_t.median < 0.005),
        ("  usage counted, waited after the catalog completed",
         "-" if counted_after is None else f"{counted_after:.1f} s", "-", None),
        ("  cat usage.json", "-" if usage_json_t is None else usage_json_t.fmt(), "-", None),
        ("  one KEY/usage", "-" if usage_one_t is None else usage_one_t.fmt(), "< 5 ms",
         None if usage_one_t is None else usage_one_t.median < 0.005),
        ("  daemon RSS after all of the above", f"{rss / MiB:.1f} MiB (peak {hwm / MiB:.1f})",
         f"< {rss_target // MiB} MiB", rss < rss_target),
        (f"  ls -l projects/web ({FACET_LINKS} links)", ls_facet.fmt(), "-", None),
        ("  ls -l projects/web, a shell printing every 5 ms", ls_facet_chatty.fmt(),
         f"<= 2x quiet ({ms(2 * ls_facet.median)})",
         ls_facet_chatty.median <= 2 * ls_facet.median),
        ("RESTART (summaries saved)", "", "", None),
        ("  mount ready", restart_ready.fmt(), f"< {ready_target:.0f} s",
         restart_ready.median < ready_target),
        ("  first sessions.json", restart_json.fmt(), "-", None),
        ("  files read again, most in a round (1 written after the last save)",
         f"{max(reread)}", "<= 1", max(reread) <= 1),
        ("  daemon RSS", f"{restart_rss / MiB:.1f} MiB", "-", None),
    ]

    def single_rows(stats, label):
        return [
            (f"  echo 1 > {label}favourite", stats["favourite"].fmt(), "< 5 ms",
             stats["favourite"].median < 0.005),
            (f"  echo TEXT > {label}title", stats["title"].fmt(), "< 5 ms",
             stats["title"].median < 0.005),
            (f"  echo NAME > {label}project", stats["project"].fmt(), "< 5 ms",
             stats["project"].median < 0.005),
            ("  mkdir MNT/shell:NAME", stats["mkdir"].fmt(), "< 5 ms",
             stats["mkdir"].median < 0.005),
            ("  echo 1 > KEY/archive", stats["archive"].fmt(), "< 5 ms",
             stats["archive"].median < 0.005),
        ]

    rows.append(("ORGANISING, nothing archived (each round another session)", "", "", None))
    rows += single_rows(org["before"], "KEY/")
    all_s = org["all_s"]
    if all_s is None:
        value = (f"> {ARCHIVE_OLDER_DEADLINE_S:.0f} s (1 round): {org['count']} of {k} archived "
                 "by then")
    else:
        value = Stat([all_s]).fmt("s")
    rows.append((f"archive-older {org['cutoff']} ({k} sessions), until archived/ lists them",
                 value, "< 5 s", all_s is not None and all_s < 5.0))
    if org.get("write_s") is not None:
        took, how = org["write_s"]
        rows.append((f"  its write to ctl returned{how}", Stat([took]).fmt("s"), "-", None))
    if org["after"] is None:
        rows.append((f"ORGANISING, {k} archived: not measured (archive-older unfinished)", "",
                     "", None))
    else:
        label = "archived/KEY/" if org["after_on_archived"] else "KEY/"
        rows.append((f"ORGANISING, {org['count']} archived", "", "", None))
        rows += single_rows(org["after"], label)

    print(f"scale, {n} conversations in {PROJECTS} projects; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("times: median (min, max, rounds); a target is judged on the median")
    head = ("metric", "value", "target", "result")
    table = [head] + [(m, v, t, "" if (ok is None and not v) else
                       ("-" if ok is None else ("MET" if ok else "MISSED")))
                      for (m, v, t, ok) in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    # Missed targets, grouped under their section's name.
    missed, section = {}, None
    for (m, v, t, ok) in rows:
        if not v and ok is None:
            section = m.split(" (")[0].lower()
        elif ok is False:
            where = section if m.startswith("  ") else m.split(" (")[0]
            missed.setdefault(where, []).append(m.strip() if m.startswith("  ") else "")
    if missed:
        print("targets missed: " + "; ".join(
            where + (": " + ", ".join(x for x in ms if x) if any(ms) else "")
            for where, ms in missed.items()))
    else:
        print("all targets met")
    print()
    shutil.rmtree(base, ignore_errors=True)
    return medians


def main():
    binary, work = sys.argv[1], sys.argv[2]
    prev = None
    for n in map(int, sys.argv[3:]):
        prev = (n, run(binary, work, n, prev))


if __name__ == "__main__":
    main()
