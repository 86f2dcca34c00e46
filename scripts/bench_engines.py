#!/usr/bin/env python3
"""One sessionfs binary on two generated worlds of N conversations each:
N split evenly over two engines (claude, codex) and N split evenly over
four (claude, codex, gemini, opencode), measured in alternating rounds so
the machine's load falls on both alike:

  python3 scripts/bench_engines.py BIN WORK [N] [ROUNDS]

(`scripts/bench --full scale` runs it at 100,000 after the scale case.)
The stores are bench_scale.py's `generate_stores`: each conversation one
prompt and one reply with its tokens, in one of 50 projects. Before the
rounds, a first mount of each world checks that every conversation is
found (the root `status`'s catalog, `sessions.json`), that
`KEY/transcript/last` of a sample of each engine shows its prompt and
reply, and that `usage.json` counts N requests.

Each round, for each world in turn (two then four, four then two): the
mount ready with a fresh state; once the catalog is complete and usage
counted, `cat sessions.json` with nothing changed and after a
conversation was written, `sessionfs ls --limit 20` after a conversation
was written, one `meta.json`, one `transcript/last` and a `stat` of a
session (several sessions of every engine each round, each read once),
and the daemon's RSS after those reads. Prints per-request medians (min,
max) and the ratio four/two, MET when it is at most 1.10. The exit status
is non-zero only when something broke.
"""

import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scale as bs  # noqa: E402

WORLDS = {"two": ("claude", "codex"), "four": bs.ENGINES}
SAMPLES = 6  # sessions per round for the single-file reads
TARGET = 1.10


def setup(work, name, binary):
    return bs.private_daemon(work, name, binary,
                             bs.store_env(os.path.join(work, name, "stores")))


def settle(d, n):
    d.wait_catalog(n)
    if bs.usage_counted(d.mnt, n) is None:
        bs.broke("this daemon has no usage.json")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def check(d, n, convs):
    """Every conversation found, a sample of each engine rendered, usage
    counted whole."""
    cat = d.status()["catalog"]
    doc = bs.read_json(os.path.join(d.mnt, "sessions.json"))
    if doc["total"] != n:
        bs.broke(f"{d.mnt}: sessions.json lists {doc['total']} sessions, not {n}")
    keys = {x["key"] for x in doc["sessions"]}
    missing = [c.key for c in convs if c.key not in keys]
    if missing:
        bs.broke(f"{d.mnt}: {len(missing)} conversations not listed, e.g. {missing[:3]}")
    by_engine = {}
    for c in convs:
        by_engine.setdefault(c.engine, []).append(c)
    rendered = 0
    for engine, cs in by_engine.items():
        for c in cs[:: max(1, len(cs) // 5)][:5] + [cs[-1]]:
            text = read(os.path.join(d.mnt, c.key, "transcript", "last")).decode()
            if f"prompt number {c.i}" not in text or f"reply {c.i}" not in text:
                bs.broke(f"{c.key}/transcript/last lacks its prompt or reply:\n{text[:500]}")
            meta = bs.read_json(os.path.join(d.mnt, c.key, "meta.json"))
            if meta["title"] != f"prompt number {c.i}" or meta["workspace"] != \
                    f"/work/p{(c.i // (len(by_engine))) % bs.PROJECTS}":
                bs.broke(f"{c.key}/meta.json: title {meta['title']!r}, workspace "
                         f"{meta['workspace']!r}")
            rendered += 1
    bs.usage_counted(d.mnt, n)
    usage = bs.read_json(os.path.join(d.mnt, "usage.json"))
    engines = {e: a["requests"] for e, a in usage["by_engine"].items()}
    want = {e: len(cs) for e, cs in by_engine.items()}
    if engines != want:
        bs.broke(f"{d.mnt}: usage.json by engine {engines}, not {want}")
    print(f"bench_engines: {'+'.join(by_engine)}: catalog {cat}, sessions.json {doc['total']}, "
          f"{rendered} transcripts rendered, usage.json {usage['total']['requests']} requests "
          f"({engines})", file=sys.stderr)


def main():
    binary, work = sys.argv[1:3]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
    daemons, convs = {}, {}
    for name, engines in WORLDS.items():
        d = setup(work, name, binary)
        stores = os.path.join(work, name, "stores")
        marker = os.path.join(stores, f".generated-{n}")
        if not os.path.exists(marker):
            shutil.rmtree(stores, ignore_errors=True)
            print(f"bench_engines: generating {n} conversations over {', '.join(engines)}",
                  file=sys.stderr)
            t0 = time.perf_counter()
            convs[name] = bs.generate_stores(stores, n, engines)
            open(marker, "w").close()
            print(f"bench_engines: generated in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)
        else:
            convs[name] = [bs.Conv(engines[i % len(engines)],
                                   bs.conv_id(engines[i % len(engines)], i), i)
                           for i in range(n)]
        daemons[name] = d
    metrics = ("ready", "sj", "sj_changed", "cli", "meta", "last", "stat", "rss")
    times = {(w, m): [] for w in daemons for m in metrics}
    touched = [0]

    def write_one(name):
        """Conversation 0 (Claude's, in both worlds) written to."""
        touched[0] += 1
        c = convs[name][0]
        p = os.path.join(work, name, "stores", "claude", "projects", "-work-p0", f"{c.id}.jsonl")
        t = bs.BASE_S + 30 + touched[0]
        os.utime(p, (t, t))
        time.sleep(0.01)

    try:
        for name, d in daemons.items():
            bs.fresh_state(d)
            d.start()
            settle(d, n)
            check(d, n, convs[name])
            d.stop()
        for r in range(rounds):
            order = list(daemons) if r % 2 == 0 else list(reversed(daemons))
            print(f"bench_engines: round {r + 1} of {rounds}", file=sys.stderr)
            for w in order:
                d = daemons[w]
                bs.fresh_state(d)
                times[(w, "ready")].append(d.start())
                settle(d, n)
            for w in order:
                d = daemons[w]
                sj = os.path.join(d.mnt, "sessions.json")
                bs.run_once(["cat", sj], keep=False)  # the first read after settling makes it
                times[(w, "sj")].append(bs.run_once(["cat", sj], keep=False)[0])
            for w in order:
                write_one(w)
                sj = os.path.join(daemons[w].mnt, "sessions.json")
                times[(w, "sj_changed")].append(bs.run_once(["cat", sj], keep=False)[0])
            for w in order:
                d = daemons[w]
                write_one(w)
                t, out = bs.run_once([binary, "ls", "--limit", "20"], env=d.env)
                if f"20 of {n} sessions" not in out.decode():
                    bs.broke(f"sessionfs ls --limit 20 printed: {out.decode()[-200:]}")
                times[(w, "cli")].append(t)
            for w in order:
                d, cs = daemons[w], convs[w]
                # Other sessions each round, every engine among them.
                step = max(1, n // (rounds * SAMPLES + 1))
                picks = [cs[(1 + (r * SAMPLES + k) * step) % n] for k in range(SAMPLES)]
                for c in picks:
                    t0 = time.perf_counter()
                    os.stat(os.path.join(d.mnt, c.key))
                    times[(w, "stat")].append(time.perf_counter() - t0)
                for c in picks:
                    t0 = time.perf_counter()
                    read(os.path.join(d.mnt, c.key, "meta.json"))
                    times[(w, "meta")].append(time.perf_counter() - t0)
                for c in picks:
                    t0 = time.perf_counter()
                    text = read(os.path.join(d.mnt, c.key, "transcript", "last"))
                    times[(w, "last")].append(time.perf_counter() - t0)
                    if f"reply {c.i}".encode() not in text:
                        bs.broke(f"{c.key}/transcript/last: {text[:300]!r}")
            for w in order:
                d = daemons[w]
                time.sleep(1.0)
                times[(w, "rss")].append(bs.vm(d.proc.pid, "VmRSS"))
                d.alive()
            for w in order:
                daemons[w].stop()
    finally:
        for d in daemons.values():
            if d.proc is not None and d.proc.poll() is None:
                d.stop()

    print(f"{n} conversations over two engines (claude, codex) and over four (claude, codex, "
          f"gemini, opencode); one binary, {rounds} alternating rounds; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"binary: {binary}")
    print("per request: median (min, max); the single reads "
          f"{SAMPLES} sessions a round; target four/two <= {TARGET:.2f}")
    labels = (("ready", "mount ready, fresh state"),
              ("sj", "cat sessions.json, nothing changed"),
              ("sj_changed", "cat sessions.json, a conversation written before"),
              ("cli", "sessionfs ls --limit 20, a conversation written before"),
              ("meta", "one meta.json"),
              ("last", "one transcript/last"),
              ("stat", "stat of a session"),
              ("rss", "daemon RSS once settled, after the reads"))

    def fmt(m, v):
        if m == "rss":
            return f"{v / bs.MiB:.1f} MiB"
        v *= 1e3
        return f"{v:.2f} ms" if v < 10 else f"{v:.1f} ms"

    rows = [("", "two engines", "four engines", "four/two", "")]
    missed = 0
    for m, label in labels:
        a, b = times[("two", m)], times[("four", m)]
        ratio = statistics.median(b) / statistics.median(a)
        ok = ratio <= TARGET
        missed += not ok
        rows.append((label,
                     f"{fmt(m, statistics.median(a))} ({fmt(m, min(a))}, {fmt(m, max(a))})",
                     f"{fmt(m, statistics.median(b))} ({fmt(m, min(b))}, {fmt(m, max(b))})",
                     f"{ratio:.3f}", "MET" if ok else "MISSED"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("all targets met" if not missed else f"{missed} targets missed")


if __name__ == "__main__":
    main()
