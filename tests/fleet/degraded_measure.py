"""A measurement: resubmitted runs across Redis outages, 4 worker processes.

    .venv/bin/python tests/fleet/degraded_measure.py [--seconds 30] [--pause 5]
    .venv/bin/python tests/fleet/degraded_measure.py --get-cost

`--get-cost` only prints the mean time of a `get` through the default store
with Redis answering and the spool flushed, of a key under a mirrored prefix
(which first reads the spool file's cursor and next record) and of another.

One real `redis-server` on 127.0.0.1 (append-only file fsynced at every
write) and 4 Python worker processes on one machine, each on the default Redis
store (`fallback=local`: one shared spool file; timeout_ms and
connect_timeout_ms 1000, probe_ms 1000) with the system clock. Each worker
loops: a new run of one side-effecting step, then a resubmission (same run,
step and args: the same idempotency key) of a run completed earlier by any
worker. Meanwhile Redis is paused (SIGSTOP) for `--pause` seconds, later
SIGKILLed and restarted with its data.

Prints: resubmissions of completed runs and how many of them ran the side
effect again (the ledger every worker writes), the slowest store call, and for
each outage the time from Redis answering again until each worker's store left
degraded mode (its `store_restored` event) and until the spool file had no
record left to flush (from then on every worker serves every key from Redis).
The timings are a measurement, not a test: they depend on the machine. The
exit status is 1 when any key's side effect ran twice.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))

from redis_server import RedisServer  # noqa: E402

WORKERS = 4


def ledger(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE IF NOT EXISTS calls(key TEXT, at REAL)")
    db.execute("CREATE TABLE IF NOT EXISTS done(run TEXT PRIMARY KEY)")
    return db


def spool_pending(path: Path) -> bool:
    """Whether the spool file has records after its cursor (read directly,
    with the schema of host/src/store/schema.sql)."""
    if not path.exists():
        return False
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        row = db.execute("SELECT value FROM ar_entries WHERE key = 'agent-recovery/spool/cursor'").fetchone()
        cursor = json.loads(row[0])["seq"] if row else 0
        (last,) = db.execute("SELECT MAX(seq) FROM ar_records WHERE stream = 'agent-recovery/spool'").fetchone()
        return last is not None and last > cursor
    except sqlite3.OperationalError:  # no tables yet
        return False
    finally:
        db.close()


def watch_spool(path: Path, until: float, seen: List[Any]) -> None:
    """(time, pending) samples of the spool file until `until`."""
    while time.time() < until:
        seen.append((time.time(), spool_pending(path)))
        time.sleep(0.05)  # sampling, not timing


def worker(w: int, url: str, ledger_path: str, until: float, out: Any) -> None:
    from agent_recovery.runtime import Call, Runtime, Step, SystemClock
    from agent_recovery.store import open_store

    db = ledger(ledger_path)
    store = open_store(url)
    slowest = [0.0]
    restored: List[float] = []
    degraded: List[float] = []

    class Timed:
        def __getattr__(self, name: str) -> Any:
            attr = getattr(store, name)
            if name not in ("get", "compare_and_set", "append", "read", "delete", "keys"):
                return attr

            def timed(*args: Any) -> Any:
                start = time.monotonic()
                try:
                    return attr(*args)
                finally:
                    slowest[0] = max(slowest[0], time.monotonic() - start)

            return timed

    def on_event(e: Dict[str, Any]) -> None:
        if e.get("event") == "store_restored":
            restored.append(time.time())
        elif e.get("event") == "store_degraded":
            degraded.append(time.time())

    rt = Runtime(store=Timed(), clock=SystemClock(), on_event=on_event)

    def charge(c: Call) -> Any:
        db.execute("INSERT INTO calls(key, at) VALUES (?, ?)", (c.key, time.time()))
        return {"ok": True}

    rng = random.Random(w)
    resubmitted = 0
    n = 0
    while time.time() < until:
        run_id = f"w{w}-{n}"
        n += 1
        run = rt.run(run_id)
        if run.step(Step("charge", "t.charge", charge, args={"n": 1}, side_effect=True)).outcome == "ok":
            run.end()
            db.execute("INSERT OR IGNORE INTO done(run) VALUES (?)", (run_id,))
        rows = db.execute("SELECT run FROM done ORDER BY random() LIMIT 1").fetchall()
        if rows and rng.random() < 0.9:
            again = rt.run(rows[0][0])
            again.step(Step("charge", "t.charge", charge, args={"n": 1}, side_effect=True))
            resubmitted += 1
    out.put({"w": w, "resubmitted": resubmitted, "slowest_s": slowest[0], "restored": restored, "degraded": degraded})


def get_cost(tmp: Path, rounds: int = 2000) -> None:
    from agent_recovery.store import open_store

    srv = RedisServer(tmp / "redis").start()
    store = open_store(srv.url(f"spool={tmp / 'spool.sqlite'}"))
    now = int(time.time() * 1000)
    out = {}
    for key in ("agent-recovery/attempts/k", "agent-recovery/idem/k"):
        store.get(key, now)
        start = time.perf_counter()
        for _ in range(rounds):
            store.get(key, now)
        out[key] = f"{(time.perf_counter() - start) / rounds * 1e6:.0f} us"
    print(json.dumps({"mean get": out}, indent=1))
    srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--pause", type=float, default=5.0)
    ap.add_argument("--get-cost", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="degraded-measure-"))
    if args.get_cost:
        get_cost(tmp)
        return
    srv = RedisServer(tmp / "redis", persist=True).start()
    url = srv.url(f"timeout_ms=1000&connect_timeout_ms=1000&probe_ms=1000&spool={tmp / 'spool.sqlite'}")
    ledger_path = str(tmp / "ledger.sqlite")
    ledger(ledger_path).close()
    until = time.time() + args.seconds
    q: Any = mp.get_context("spawn").Queue()
    procs = [mp.get_context("spawn").Process(target=worker, args=(w, url, ledger_path, until, q)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    samples: List[Any] = []
    watcher = threading.Thread(target=watch_spool, args=(tmp / "spool.sqlite", until + 10, samples), daemon=True)
    watcher.start()
    back: List[float] = []
    down: List[float] = []
    assert srv.proc is not None
    time.sleep(args.seconds * 0.2)  # a scripted outage schedule, not a timed assertion
    down.append(time.time())
    srv.proc.send_signal(signal.SIGSTOP)
    time.sleep(args.pause)
    srv.proc.send_signal(signal.SIGCONT)
    back.append(time.time())
    time.sleep(args.seconds * 0.2)
    down.append(time.time())
    srv.kill()
    time.sleep(args.pause)
    srv.start()
    back.append(time.time())
    results = [q.get(timeout=args.seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    watcher.join()
    drained = []
    for b in back:
        after = [t for t, pending in samples if t >= b and not pending]
        drained.append(round(after[0] - b, 2) if after else None)
    db = ledger(ledger_path)
    twice = db.execute("SELECT COUNT(*) FROM (SELECT key FROM calls GROUP BY key HAVING COUNT(*) > 1)").fetchone()[0]
    keys = db.execute("SELECT COUNT(DISTINCT key) FROM calls").fetchone()[0]
    resubmitted = sum(r["resubmitted"] for r in results)
    print(json.dumps({
        "workers": WORKERS,
        "keys": keys,
        "resubmissions_of_completed_runs": resubmitted,
        "keys_whose_side_effect_ran_twice": twice,
        "slowest_store_call_s": round(max(r["slowest_s"] for r in results), 3),
        "store_degraded_events_per_worker": [len(r["degraded"]) for r in results],
        "store_restored_events_per_worker": [len(r["restored"]) for r in results],
        # Of the workers the outage degraded (a store_degraded from its start
        # until timeout_ms + connect_timeout_ms after Redis answered): from
        # Redis answering until their next store_restored.
        "seconds_to_leave_degraded_after_redis_answers": [
            sorted(
                round(min([r2 for r2 in r["restored"] if r2 >= t] or [float("inf")]) - b, 2)
                for r in results
                for t in r["degraded"]
                if d <= t <= b + 2.0
            )
            for d, b in zip(down, back)
        ],
        "seconds_until_the_spool_was_flushed_after_redis_answers": drained,
    }, indent=1))
    srv.stop()
    sys.exit(1 if twice else 0)


if __name__ == "__main__":
    main()
