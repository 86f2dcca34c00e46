"""The scale case of scripts/bench: N generated Claude conversations in 50
projects, served by the release daemon, timed beside `ls -f` of N tmpfs
directories in the same run.

    python3 scripts/bench_scale.py BIN WORKDIR N [N ...]

Prints one table per N with MET/MISSED per target: those for 10,000
conversations; at 100,000 the ready target is 5 s after the first run, RSS
256 MiB, `ls -f` still 3x tmpfs, and the other times may grow no faster
than N log N from the previous size's. Exit status is non-zero only when
something broke.
"""

import json, math, os, shutil, signal, statistics, subprocess, sys, time

PROJECTS = 50
BASE_S = 1_767_225_600  # 2026-01-01T00:00:00Z
MiB = 1024 * 1024


def broke(msg):
    print(f"bench: {msg}", file=sys.stderr)
    sys.exit(1)


def generate(root, n):
    """n small conversations; conversation i starts i minutes after BASE and
    was written 30 s later."""
    for p in range(PROJECTS):
        os.makedirs(os.path.join(root, "projects", f"-work-p{p}"), exist_ok=True)
    ids = []
    for i in range(n):
        sid = f"{i:08x}-0000-4000-8000-{i:012x}"
        ids.append(sid)
        t = BASE_S + i * 60
        ts = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))
        p = i % PROJECTS
        rows = [
            {"type": "user", "sessionId": sid, "cwd": f"/work/p{p}", "timestamp": ts,
             "uuid": f"u{i}", "message": {"role": "user", "content": f"prompt number {i}"}},
            {"type": "assistant", "sessionId": sid, "timestamp": ts, "uuid": f"a{i}",
             "message": {"role": "assistant", "content": [{"type": "text", "text": f"reply {i}"}]}},
        ]
        path = os.path.join(root, "projects", f"-work-p{p}", f"{sid}.jsonl")
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
        os.utime(path, (t + 30, t + 30))
    return ids


def vm(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    broke(f"no {field} for pid {pid}")


def timed(argv, env=None, reps=5, before=None, keep=True):
    """Median wall time of `argv`; with `keep`, also its output. Without,
    the output goes to /dev/null, so the time is the command's, not this
    script's reading of tens of megabytes from a pipe."""
    times = []
    out = None
    for _ in range(reps):
        if before:
            before()
        t0 = time.perf_counter()
        r = subprocess.run(argv, stdout=subprocess.PIPE if keep else subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=env)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            broke(f"{' '.join(argv)} failed: {r.stderr.decode(errors='replace').strip()}")
        out = r.stdout
    return statistics.median(times), out


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
        with open(os.path.join(self.mnt, "status")) as f:
            return json.load(f)

    def wait_catalog(self, n, timeout=600):
        deadline = time.time() + timeout
        while True:
            c = self.status()["catalog"]
            if c["summarised"] >= n and c["saved"]:
                return
            if time.time() > deadline:
                broke(f"the catalog did not summarise {n} conversations in {timeout} s: {c}")
            time.sleep(0.05)

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


def is_mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


FACET_LINKS = 1000


def facet_walks(mnt, ids):
    """`ls -l projects/web` (a lookup per link) of 1,000 of the sessions,
    median of 3: quiet, then while a shell prints a line every 5 ms."""
    web = ids[:FACET_LINKS]
    for sid in web:
        with open(os.path.join(mnt, f"claude:{sid}", "project"), "w") as f:
            f.write("web\n")
    facet = os.path.join(mnt, "projects", "web")

    def ls_l():
        t, out = timed(["ls", "-l", facet], reps=3)
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
    # Stopped and archived: the restart below lists the N conversations only.
    with open(os.path.join(talker, "ctl"), "w") as f:
        f.write("stop\n")
    with open(os.path.join(talker, "archive"), "w") as f:
        f.write("1\n")
    return quiet, chatty


def run(binary, work, n, prev=None):
    """Measures n conversations. `prev` = (n, times) of a smaller run: past
    10,000 the time targets are growth no faster than N log N from it."""
    base = os.path.join(work, f"n{n}")
    claude = os.path.join(base, "claude")
    mnt = os.path.join(base, "mnt")
    for d in ("home", "state", "runtime", "codex", "mnt"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    os.chmod(os.path.join(base, "runtime"), 0o700)
    print(f"bench: generating {n} conversations", file=sys.stderr)
    ids = generate(claude, n)
    anchor = os.path.join("/dev/shm", f"sessionfs-bench-{os.getpid()}-{n}")
    os.makedirs(anchor)
    for i in range(n):
        os.mkdir(os.path.join(anchor, f"claude:{ids[i]}"))

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(base, "home"),
           "XDG_STATE_HOME": os.path.join(base, "state"),
           "XDG_RUNTIME_DIR": os.path.join(base, "runtime"),
           "CLAUDE_CONFIG_DIR": claude, "CODEX_HOME": os.path.join(base, "codex"),
           "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    d = Daemon(binary, env, mnt, os.path.join(base, "daemon.log"))
    try:
        # Drop the page cache's advantage of the generator's own writes? No:
        # a person's stores are as warm as their last use; both sides are warm.
        ready = d.start()
        first_ls, out = timed(["ls", "-f", mnt], reps=1)
        names = [l for l in out.decode().splitlines() if ":" in l]
        if len(names) != n:
            broke(f"ls -f listed {len(names)} sessions, not {n}")
        t0 = time.perf_counter()
        with open(os.path.join(mnt, "sessions.json"), "rb") as f:
            doc = json.loads(f.read())
        first_json = time.perf_counter() - t0
        if doc["total"] != n:
            broke(f"sessions.json has {doc['total']} sessions, not {n}")
        if [s["key"] for s in doc["sessions"]] != names:
            broke("sessions.json and ls -f disagree on the order")
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

        ls_f, _ = timed(["ls", "-f", mnt])
        ls_f_changed, _ = timed(["ls", "-f", mnt], before=write_one)
        tmpfs, _ = timed(["ls", "-f", anchor])
        sj, _ = timed(["cat", os.path.join(mnt, "sessions.json")], reps=3, keep=False)
        sj_bytes = os.stat(os.path.join(mnt, "sessions.json")).st_size
        sj_changed, _ = timed(["cat", os.path.join(mnt, "sessions.json")], reps=3, keep=False,
                              before=write_one)
        cli, out = timed([binary, "ls", "--limit", "20"], env=env, reps=3, before=write_one)
        if f"20 of {n} sessions" not in out.decode():
            broke(f"sessionfs ls --limit 20 printed: {out.decode()[-200:]}")
        meta_times = []
        for i in range(0, n, max(1, n // 20)):
            path = os.path.join(mnt, f"claude:{ids[i]}", "meta.json")
            t0 = time.perf_counter()
            with open(path, "rb") as f:
                meta = json.loads(f.read())
            meta_times.append(time.perf_counter() - t0)
            if meta["title"] != f"prompt number {i}":
                broke(f"{path}: title {meta['title']!r}")
        meta_t = statistics.median(meta_times)
        # What every `ls -l` of the root and every look at the daemon asks:
        # answered from what is kept, not from a look at every conversation.
        def each(fn, reps=20):
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return statistics.median(times)
        stat_sj = each(lambda: os.stat(os.path.join(mnt, "sessions.json")))
        status_t = each(lambda: d.status())
        rss = vm(d.proc.pid, "VmRSS")
        hwm = vm(d.proc.pid, "VmHWM")
        ls_facet, ls_facet_chatty = facet_walks(mnt, ids)
        d.stop()

        restart_ready = d.start()
        t0 = time.perf_counter()
        with open(os.path.join(mnt, "sessions.json"), "rb") as f:
            again = json.loads(f.read())
        restart_json = time.perf_counter() - t0
        reread = d.status()["catalog"]["files_read"]
        if again["total"] != n:
            broke(f"after the restart sessions.json has {again['total']} sessions")
        restart_rss = vm(d.proc.pid, "VmRSS")
    finally:
        d.stop()
        shutil.rmtree(anchor, ignore_errors=True)

    big = n >= 100_000
    times = {"sj": sj, "sj_changed": sj_changed, "cli": cli}

    def target(name, fixed_s):
        """(text, met) for a time: the fixed target up to 10,000, else at
        most N log N times the smaller run's."""
        value = times[name]
        if not big or prev is None:
            return f"< {fixed_s * 1e3:.0f} ms", value < fixed_s
        pn, ptimes = prev
        bound = ptimes[name] * (n * math.log(n)) / (pn * math.log(pn))
        return f"<= N log N from {pn} ({bound * 1e3:.0f} ms)", value <= bound

    ready_target = 5.0 if big else 1.0
    rss_target = 256 * MiB if big else 64 * MiB
    rows = [
        ("mount ready (first start)", f"{ready * 1e3:.0f} ms", "-" if big else "< 1 s",
         None if big else ready < 1.0),
        ("first ls -f MNT", f"{first_ls * 1e3:.1f} ms", "-", None),
        ("first sessions.json (reads every summary)", f"{first_json * 1e3:.0f} ms", "-", None),
        ("ls -f MNT, nothing changed, median of 5", f"{ls_f * 1e3:.1f} ms",
         f"<= 3x tmpfs ({3 * tmpfs * 1e3:.1f} ms)", ls_f <= 3 * tmpfs),
        ("ls -f MNT, a conversation written before each, median of 5",
         f"{ls_f_changed * 1e3:.1f} ms", f"<= 3x tmpfs ({3 * tmpfs * 1e3:.1f} ms)",
         ls_f_changed <= 3 * tmpfs),
        ("ls -f of N tmpfs dirs, median of 5", f"{tmpfs * 1e3:.1f} ms", "-", None),
        (f"cat sessions.json ({sj_bytes / MiB:.1f} MiB), nothing changed, median of 3",
         f"{sj * 1e3:.0f} ms", *target("sj", 0.200)),
        ("cat sessions.json, a conversation written before each, median of 3",
         f"{sj_changed * 1e3:.0f} ms", *target("sj_changed", 0.200)),
        ("sessionfs ls --limit 20, a conversation written before each, median of 3",
         f"{cli * 1e3:.0f} ms", *target("cli", 0.100)),
        (f"one meta.json, median of {len(meta_times)}", f"{meta_t * 1e3:.2f} ms", "< 5 ms",
         meta_t < 0.005),
        ("stat sessions.json, median of 20", f"{stat_sj * 1e3:.2f} ms", "< 5 ms", stat_sj < 0.005),
        ("cat status (the root's), median of 20", f"{status_t * 1e3:.2f} ms", "< 5 ms",
         status_t < 0.005),
        ("daemon RSS after all of the above", f"{rss / MiB:.1f} MiB (peak {hwm / MiB:.1f})",
         f"< {rss_target // MiB} MiB", rss < rss_target),
        (f"ls -l projects/web ({FACET_LINKS} links), median of 3", f"{ls_facet * 1e3:.0f} ms",
         "-", None),
        ("ls -l projects/web, a shell printing every 5 ms, median of 3",
         f"{ls_facet_chatty * 1e3:.0f} ms", f"<= 2x quiet ({2 * ls_facet * 1e3:.0f} ms)",
         ls_facet_chatty <= 2 * ls_facet),
        ("restart: mount ready (summaries saved)", f"{restart_ready * 1e3:.0f} ms",
         f"< {ready_target:.0f} s", restart_ready < ready_target),
        ("restart: first sessions.json", f"{restart_json * 1e3:.0f} ms", "-", None),
        ("restart: files read again (1 written after the last save)", f"{reread}", "<= 1",
         reread <= 1),
        ("restart: daemon RSS", f"{restart_rss / MiB:.1f} MiB", "-", None),
    ]
    print(f"scale, {n} conversations in {PROJECTS} projects; {os.cpu_count()} CPUs")
    head = ("metric", "value", "target", "result")
    table = [head] + [(m, v, t, "-" if ok is None else ("MET" if ok else "MISSED"))
                      for (m, v, t, ok) in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    missed = [r[0] for r in rows if r[3] is False]
    print("targets missed: " + ", ".join(missed) if missed else "all targets met")
    print()
    shutil.rmtree(base, ignore_errors=True)
    return times


def main():
    binary, work = sys.argv[1], sys.argv[2]
    prev = None
    for n in map(int, sys.argv[3:]):
        prev = (n, run(binary, work, n, prev))


if __name__ == "__main__":
    main()
