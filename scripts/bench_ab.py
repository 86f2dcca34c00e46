#!/usr/bin/env python3
"""Two sessionfs binaries side by side on one generated store of N
conversations (bench_scale.py's), measured in alternating rounds so the
machine's load falls on both alike:

  python3 scripts/bench_ab.py OLD_BIN NEW_BIN WORK [N] [ROUNDS]

Each binary gets its own state, runtime directory and mount over the same
Claude store. Once both catalogs are complete (and the new binary's usage
counted), each round times, for A then B and B then A in turn: the mount
ready (a fresh state), `cat sessions.json` with nothing changed, and
`cat sessions.json` after a conversation was written. Prints medians, the
ratio B/A and whether B stays within 10 % of A.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scale as bs  # noqa: E402


def setup(work, name, claude, binary):
    codex = os.path.join(work, name, "codex")
    os.makedirs(codex, exist_ok=True)
    return bs.private_daemon(work, name, binary,
                             {"CLAUDE_CONFIG_DIR": claude, "CODEX_HOME": codex})


def settle(d, n):
    d.wait_catalog(n)
    if os.path.exists(os.path.join(d.mnt, "usage.json")):
        bs.usage_counted(d.mnt, n)


def cat(d):
    return bs.run_once(["cat", os.path.join(d.mnt, "sessions.json")], keep=False)[0]


def main():
    old, new, work = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 15
    claude = os.path.join(work, "claude")
    if not os.path.isdir(claude):
        print(f"bench_ab: generating {n} conversations", file=sys.stderr)
        ids = bs.generate(claude, n)
    else:
        ids = [f"{i:08x}-0000-4000-8000-{i:012x}" for i in range(n)]
    daemons = {"A": setup(work, "a", claude, old), "B": setup(work, "b", claude, new)}
    times = {(k, m): [] for k in daemons for m in ("ready", "sj", "sj_changed")}
    touched = [0]

    def write_one():
        touched[0] += 1
        p = os.path.join(claude, "projects", "-work-p0", f"{ids[0]}.jsonl")
        t = bs.BASE_S + 30 + touched[0]
        os.utime(p, (t, t))
        time.sleep(0.01)

    try:
        for r in range(rounds):
            order = ["A", "B"] if r % 2 == 0 else ["B", "A"]
            print(f"bench_ab: round {r + 1} of {rounds}", file=sys.stderr)
            for k in order:
                d = daemons[k]
                bs.fresh_state(d)
                times[(k, "ready")].append(d.start())
                settle(d, n)
            for k in order:
                cat(daemons[k])  # the first read after settling makes the text
            for k in order:
                times[(k, "sj")].append(cat(daemons[k]))
            for k in order:
                write_one()
                times[(k, "sj_changed")].append(cat(daemons[k]))
            for k in order:
                daemons[k].stop()
    finally:
        for d in daemons.values():
            if d.proc is not None and d.proc.poll() is None:
                d.stop()
    print(f"A/B at {n} conversations, {rounds} alternating rounds, medians (min, max)")
    print(f"A = {old}\nB = {new}")
    worst = 0.0
    for m, label in (("ready", "mount ready, fresh state"), ("sj", "cat sessions.json, nothing changed"),
                     ("sj_changed", "cat sessions.json, a conversation written before")):
        a, b = times[("A", m)], times[("B", m)]
        ratio = statistics.median(b) / statistics.median(a)
        worst = max(worst, ratio)
        print(f"  {label:52} A {statistics.median(a) * 1e3:7.1f} ms ({min(a) * 1e3:.1f}, "
              f"{max(a) * 1e3:.1f})  B {statistics.median(b) * 1e3:7.1f} ms ({min(b) * 1e3:.1f}, "
              f"{max(b) * 1e3:.1f})  B/A {ratio:.3f}  {'within 10 %' if ratio <= 1.10 else 'MORE than 10 % slower'}")
    sys.exit(0 if worst <= 1.10 else 1)


if __name__ == "__main__":
    main()
