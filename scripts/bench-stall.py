"""Stall case of scripts/bench: six sessions whose program never reads its
terminal, each with a writer blocked on its `input`, and the latency of what
everyone else does meanwhile (root `status`, `ls`, another session's
`scrollback`, `input` to a healthy session, `mkdir`) and of `stop` on a stuck
session. The same operations are first measured with nothing stuck.

usage: python3 scripts/bench-stall.py BIN quick|full
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN, MODE = sys.argv[1], sys.argv[2]
ROUNDS = 2 if MODE == "quick" else 5
STUCK = 6
TARGET = 0.050  # p99, seconds
PER_ROUND = {"cat status": 50, "ls": 50, "scrollback": 50, "input": 50, "mkdir": 20}
# Writers end at the stall deadline (3 s after the master stopped taking
# bytes); everything is measured inside this part of it.
WINDOW = 2.0


def broke(msg):
    print(f"bench: stall: {msg}", file=sys.stderr)
    sys.exit(1)


def wait_for(what, probe, secs=20.0):
    until = time.monotonic() + secs
    while not probe():
        if time.monotonic() > until:
            broke(f"timed out waiting for {what}")
        time.sleep(0.01)


def write(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def stack(pid):
    try:
        with open(f"/proc/{pid}/stack") as f:
            return f.read()
    except OSError:
        return ""


def p99(xs):
    xs = sorted(xs)
    return xs[max(0, -(-len(xs) * 99 // 100) - 1)]


def ms(x):
    return f"{x * 1e3:.2f} ms"


work = tempfile.mkdtemp(prefix="sessionfs-stall.", dir="/tmp")
mnt = os.path.join(work, "mnt")
for d in ("mnt", "home", "state", "run", "claude", "codex"):
    os.makedirs(os.path.join(work, d))
run_dir = os.path.join(work, "run")
env = {
    "PATH": os.environ["PATH"],
    "HOME": os.path.join(work, "home"),
    "XDG_STATE_HOME": os.path.join(work, "state"),
    "XDG_RUNTIME_DIR": run_dir,
    "CLAUDE_CONFIG_DIR": os.path.join(work, "claude"),
    "CODEX_HOME": os.path.join(work, "codex"),
    "SHELL": "/bin/bash",
    "TERM": "xterm",
}
log = open(os.path.join(work, "daemon.log"), "w")
daemon = subprocess.Popen([BIN, "mount", mnt], env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=log)
writers = []


def masters():
    """The dtach masters serving this bench's sockets."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"dtach") and any(a.startswith(run_dir.encode()) for a in args):
            pids.append(int(entry))
    return pids


def teardown():
    for w in writers:
        if w.poll() is None:
            w.kill()
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
    for pid in masters():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if not any(line.split()[1] == mnt for line in open("/proc/self/mounts")):
        shutil.rmtree(work, ignore_errors=True)


def status_json(rel):
    return json.loads(read(os.path.join(mnt, rel)))


def measure(samples, op, fn):
    t0 = time.perf_counter()
    fn()
    samples.setdefault(op, []).append(time.perf_counter() - t0)


made = [0]


def ops(samples, per_round):
    """Round-robin over the everyday operations until each has its count."""
    counts = {op: 0 for op in per_round}
    healthy = os.path.join(mnt, "shell:healthy")

    def mkdir():
        made[0] += 1
        os.mkdir(os.path.join(mnt, f"shell:bench{made[0]}"))

    table = {
        "cat status": lambda: read(os.path.join(mnt, "status")),
        "ls": lambda: os.listdir(mnt),
        "scrollback": lambda: read(os.path.join(healthy, "scrollback")),
        "input": lambda: write(os.path.join(healthy, "input"), b"\n"),
        "mkdir": mkdir,
    }
    return counts, table


def make_stuck(key):
    write(os.path.join(mnt, key, "input"), b"stty raw -echo; exec sleep 1000000\n")


def runs_sleep(key):
    pid = status_json(f"{key}/status").get("agent_pid")
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().startswith(b"sleep\0")
    except (OSError, TypeError):
        return False


try:
    wait_for("the mount", lambda: os.path.exists(os.path.join(mnt, "status")), 30)
    os.mkdir(os.path.join(mnt, "shell:healthy"))
    write(os.path.join(mnt, "shell:healthy", "input"), b"echo re''ady\n")
    wait_for("the healthy shell", lambda: b"ready" in read(os.path.join(mnt, "shell:healthy", "scrollback")))

    # Baseline: nothing stuck.
    idle = {}
    counts, table = ops(idle, PER_ROUND)
    for _ in range(ROUNDS):
        for op, n in PER_ROUND.items():
            for _ in range(n):
                measure(idle, op, table[op])

    stuck = [f"shell:stuck{i}" for i in range(STUCK)]
    for key in stuck:
        os.mkdir(os.path.join(mnt, key))
    busy = {}
    in_flight_seen = 0
    writer_ends = []
    for r in range(ROUNDS):
        for key in stuck:
            make_stuck(key)
        for key in stuck:
            wait_for(f"{key} to run sleep", lambda: runs_sleep(key))
        master = {k: status_json(f"{k}/status")["master_pid"] for k in stuck}
        writers = [subprocess.Popen(
            ["dd", "if=/dev/zero", f"of={mnt}/{k}/input", "bs=1M", "count=4",
             "conv=notrunc", "status=none"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            for k in stuck]
        started = time.monotonic()
        wait_for("six blocked writers", lambda: all(
            "tty_write" in stack(master[k]) and "fuse_file_write_iter" in stack(w.pid)
            for k, w in zip(stuck, writers)), 10)
        blocked_at = time.monotonic()
        in_flight_seen = max(in_flight_seen, status_json("status")["slow_ops"]["in_flight"])
        counts, table = ops(busy, PER_ROUND)
        while time.monotonic() < blocked_at + WINDOW and any(
                counts[op] < n for op, n in PER_ROUND.items()):
            for op, n in PER_ROUND.items():
                if counts[op] < n:
                    measure(busy, op, table[op])
                    counts[op] += 1
        for key in stuck:
            measure(busy, "stop (stuck)", lambda: write(os.path.join(mnt, key, "ctl"), b"stop\n"))
        for w in writers:
            try:
                _, err = w.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                broke("a writer on a stopped session did not end")
            if w.returncode == 0:
                broke("a write to a stuck session succeeded")
            writer_ends.append(time.monotonic() - started)

    if daemon.poll() is not None:
        broke("the daemon died")
    rows = []
    order = list(PER_ROUND) + ["stop (stuck)"]
    for op in order:
        xs = busy[op]
        base = p99(idle[op]) if op in idle else None
        rows.append((op, str(len(xs)), ms(sorted(xs)[len(xs) // 2]), ms(p99(xs)), ms(max(xs)),
                     ms(base) if base is not None else "-", "< 50 ms",
                     "MET" if p99(xs) < TARGET else "MISSED"))
    print()
    print(f"sessionfs bench stall ({MODE}): {STUCK} sessions running `stty raw -echo; exec sleep`, "
          f"each with `dd bs=1M` blocked on its input; {ROUNDS} rounds; {os.cpu_count()} CPUs")
    print(f"slow operations in flight while blocked (root status): up to {in_flight_seen}; "
          f"writers ended with an error after {min(writer_ends):.2f}-{max(writer_ends):.2f} s "
          f"(stopped, or at the 3 s stall deadline)")
    print()
    head = ("operation", "n", "p50", "p99", "max", "p99 idle", "target", "result")
    table_rows = [head] + rows
    widths = [max(len(row[i]) for row in table_rows) for i in range(len(head))]
    for i, row in enumerate(table_rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    missed = [r[0] for r in rows if r[-1] == "MISSED"]
    print()
    print("stall: MISSED (" + ", ".join(missed) + ")" if missed else "stall: MET")
finally:
    teardown()
