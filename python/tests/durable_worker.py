"""The Python kill-test worker (docs/durability.md §5, "The worker protocol"),
twin of host/examples/durable_worker.rs and node/test/durable_worker.mjs:

    python durable_worker.py STORE LEDGER JOB

opens the runtime on `open_store(STORE)` (a file path: `SqliteStore`; a
redis:// URL: the Redis store) with the system clock (the job's `"clock":
"virtual"` runs it on a `VirtualClock` from the job's `now_ms` instead), and runs the
job's steps (`mode: "run"`), recovers the store (`mode: "recover"`) or
replays dead-letter record `id` (`mode: "replay"`, as the Rust worker) with
operations that write to the ledger, an SQLite file standing for the external
system: `applied` (one row per key an idempotent API applied) and `calls` (one
row per call). At each point of interest (before a call does anything, after it
applied its effect) it counts; when the count equals `kill_at` it sends itself
SIGKILL. It prints one JSON line and exits 0.

The fleet harness (tests/fleet/fleet.py) adds optional job fields: `"clock":
"virtual"` (above); `"events": true`: the line also carries `"events"` (every
event the runtime and the store emitted, in order) and `"max_store_call_ms"`
(the slowest store call, real time); `"hold_at": N, "hold_file": PATH`: at
point N the worker creates PATH + ".reached" and waits until PATH exists (the
harness does something, e.g. kills Redis, at a known point of the run).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from agent_recovery.runtime import Call, Failed, Runtime, Step, SystemClock, VirtualClock
from agent_recovery.store import SqliteStore, open_store

_LEDGER_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS applied(key TEXT PRIMARY KEY, step TEXT, kind TEXT, seq INTEGER)",
    "CREATE TABLE IF NOT EXISTS calls(n INTEGER PRIMARY KEY AUTOINCREMENT, step TEXT, kind TEXT, "
    "key TEXT, attempt INTEGER, pid INTEGER, applied INTEGER)",
)


class Worker:
    """One job: its ledger connection and its points of interest."""

    def __init__(self, ledger: str, job: Dict[str, Any]) -> None:
        self.job = job
        self.kill_at: Optional[int] = job.get("kill_at")
        self.points = 0
        # A fan-out's branches run on threads: one lock for the count, one for the ledger.
        self.lock = threading.Lock()
        self.db_lock = threading.Lock()
        self.db = sqlite3.connect(ledger, timeout=10, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA busy_timeout = 10000")
        self.db.execute("PRAGMA journal_mode = WAL")
        for sql in _LEDGER_SCHEMA:
            self.db.execute(sql)

    def point(self) -> None:
        """A point of interest: die here when it is the `kill_at`-th."""
        with self.lock:
            self.points += 1
            n = self.points
        if self.job.get("hold_at") == n:
            hold = Path(self.job["hold_file"])
            Path(str(hold) + ".reached").touch()
            while not hold.exists():  # waiting for the harness, not timing
                time.sleep(0.01)
        if self.kill_at is not None and n == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def tool(self, s: Dict[str, Any], kind: str) -> Any:
        """The operation (or the compensation) of step `s`."""
        fail_times = int(s.get("fail_times" if kind == "operation" else "comp_fail_times") or 0)
        fail_always = kind == "operation" and bool(s.get("fail_always"))
        status = 400 if s.get("permanent") else 503

        def call(c: Call) -> Any:
            self.point()
            with self.db_lock:
                (k,) = self.db.execute(
                    "SELECT COUNT(*) FROM calls WHERE key = ? AND kind = ?", (c.key, kind)
                ).fetchone()
                failed = bool(fail_always or k < fail_times)
                if failed:
                    self.db.execute(
                        "INSERT INTO calls(step, kind, key, attempt, pid, applied) VALUES (?, ?, ?, ?, ?, 0)",
                        (s["id"], kind, c.key, c.attempt, os.getpid()),
                    )
                else:
                    self.db.execute("BEGIN IMMEDIATE")
                    try:
                        cur = self.db.execute(
                            "INSERT OR IGNORE INTO applied(key, step, kind, seq) "
                            "VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM applied))",
                            (c.key, s["id"], kind),
                        )
                        self.db.execute(
                            "INSERT INTO calls(step, kind, key, attempt, pid, applied) VALUES (?, ?, ?, ?, ?, ?)",
                            (s["id"], kind, c.key, c.attempt, os.getpid(), 1 if cur.rowcount == 1 else 0),
                        )
                        self.db.execute("COMMIT")
                    except BaseException:
                        self.db.execute("ROLLBACK")
                        raise
            if failed:
                return Failed({"source": "http", "status": status})
            self.point()
            return {"step": s["id"]}

        return call

    def step(self, s: Dict[str, Any]) -> Step:
        return Step(
            s["id"],
            "t." + s["id"],
            self.tool(s, "operation"),
            args={"step": s["id"]},
            side_effect=True,
            compensate=self.tool(s, "compensation") if s.get("compensation") else None,
        )

    def plain_steps(self) -> List[Dict[str, Any]]:
        """The job's steps and its fan-outs' branches, flat."""
        out: List[Dict[str, Any]] = []
        for s in self.job["steps"]:
            out.extend(s["fanout"]["branches"] if s.get("fanout") else [s])
        return out

    def operations(self) -> Dict[str, Any]:
        ops: Dict[str, Any] = {}
        for s in self.plain_steps():
            entry: Dict[str, Any] = {"operation": self.tool(s, "operation")}
            if s.get("compensation"):
                entry["compensate"] = self.tool(s, "compensation")
            ops["t." + s["id"]] = entry
        return ops


class TimedStore:
    """The store, with the slowest call's real duration recorded (`"events": true`)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.max_ms = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in ("get", "compare_and_set", "append", "read", "delete", "keys"):
            return attr

        def timed(*args: Any) -> Any:
            start = time.monotonic()
            try:
                return attr(*args)
            finally:
                self.max_ms = max(self.max_ms, (time.monotonic() - start) * 1000)

        return timed


def main(argv: List[str]) -> int:
    if len(argv) != 4:
        print("usage: durable_worker.py STORE LEDGER JOB", file=sys.stderr)
        return 2
    _, store_path, ledger, job_text = argv
    job = json.loads(job_text)
    worker = Worker(ledger, job)
    if store_path.startswith(("redis://", "rediss://", "redis+cluster://")):
        store = open_store(store_path)
    else:
        store = SqliteStore(store_path, busy_timeout_s=10.0)
    if job.get("hold_at") is not None and not isinstance(job.get("hold_file"), str):
        print("durable_worker: hold_at needs hold_file", file=sys.stderr)
        return 2
    if job.get("clock") == "virtual":
        if not isinstance(job.get("now_ms"), int):
            print("durable_worker: clock \"virtual\" needs the job's now_ms (integer Unix ms)", file=sys.stderr)
            return 2
        clock: Any = VirtualClock(job["now_ms"])
    elif job.get("clock") in (None, "system"):
        clock = SystemClock()
    else:
        print(f"durable_worker: unknown clock {job['clock']!r}; use \"virtual\" or \"system\"", file=sys.stderr)
        return 2
    events: List[Any] = []
    timed = TimedStore(store)
    runtime = Runtime(
        store=timed if job.get("events") else store,
        clock=clock,
        seed=job.get("seed"),
        config=job.get("config") or {},
        on_event=events.append if job.get("events") else None,
    )
    extra: Dict[str, Any] = {"events": events} if job.get("events") else {}
    mode = job.get("mode")
    if mode == "run":
        run = runtime.run(job["run_id"])
        outcome = "completed"
        for s in job["steps"]:
            if s.get("fanout"):
                branches = [worker.step(b) for b in s["fanout"]["branches"]]
                report = run.fanout(s["id"], s["fanout"]["min_results"], branches)
            else:
                report = run.step(worker.step(s))
            if report.outcome != "ok":
                outcome = report.outcome
                break
        if outcome == "completed":
            run.end()
        if extra:
            extra["max_store_call_ms"] = timed.max_ms
        print(json.dumps({"outcome": outcome, "points": worker.points, **extra}))
    elif mode == "recover":
        reports = runtime.recover(worker.operations(), older_than_ms=0)
        if extra:
            extra["max_store_call_ms"] = timed.max_ms
        print(json.dumps({"reports": [r.to_dict() for r in reports], **extra}))
    elif mode == "replay":
        # the `replay` mode of the Rust worker: replay dead-letter record `id` now
        ticket = runtime.dead_letters.replay(str(job["id"]), worker.operations())
        if extra:
            extra["max_store_call_ms"] = timed.max_ms
        print(json.dumps({"replay": ticket.to_dict(), **extra}))
    else:
        print(f"durable_worker: unknown mode {mode!r}; use run, recover or replay", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
