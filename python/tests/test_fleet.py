"""The loop across a fleet (docs/runtime.md, "The rules"): two
runtimes, each with its own handle on one SQLite file, as two workers.

- one half-open probe: both read the open breaker before either claims the
  probe lease (a rendezvous at the claim); exactly one calls.
- the retry quota: a bucket drained by one worker refuses the other's retry.

The real loop component runs through wasmtime; the stores are real SqliteStore
files. Expected values come from the rules (lease TTL = the breaker's open_ms,
costs and refunds from the run configuration), not from running the package.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from agent_recovery.runtime import Call, Failed, Runtime, VirtualClock
from agent_recovery.store import SqliteStore

T0 = 1_767_225_600_000
PROBE = "agent-recovery/probe/"


class Worker:
    """A worker's real SQLite handle; its claim of a probe lease waits (up to
    10 s) for the other worker to reach its own claim first."""

    def __init__(self, path: Path, meet: threading.Barrier) -> None:
        self.db = SqliteStore(path)
        self.meet = meet

    def get(self, key: str, now_ms: int) -> Any:
        return self.db.get(key, now_ms)

    def compare_and_set(self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int) -> Any:
        if key.startswith(PROBE):
            try:
                self.meet.wait(timeout=10)
            except threading.BrokenBarrierError:
                pass  # the assertions say what happened
        return self.db.compare_and_set(key, expected, value, ttl_ms, now_ms)

    def append(self, stream: str, record: str, now_ms: int) -> int:
        return self.db.append(stream, record, now_ms)

    def read(self, stream: str, after: int, limit: int) -> List[Tuple[int, str]]:
        return self.db.read(stream, after, limit)

    def delete(self, key: str) -> bool:
        return self.db.delete(key)

    def keys(self, prefix: str, now_ms: int) -> List[str]:
        return self.db.keys(prefix, now_ms)


def test_two_runtimes_racing_for_a_probe_make_one_half_open_call(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    with SqliteStore(path) as db:
        # Another worker opened it 10 minutes ago for 10 minutes: the probe is due now.
        db.compare_and_set(
            "agent-recovery/breaker/api.pay",
            None,
            json.dumps({"state": "open", "failures": 3, "since_ms": T0 - 600_000, "open_ms": 600_000}),
            None,
            T0,
        )
    meet = threading.Barrier(2)
    calls: List[str] = []
    results: Dict[str, Tuple[str, List[Dict[str, Any]]]] = {}

    def work(name: str) -> None:
        events: List[Dict[str, Any]] = []
        rt = Runtime(store=Worker(path, meet), clock=VirtualClock(T0), seed=7, on_event=events.append)
        run = rt.run(name)
        report = run.step(id="pay", tool="payments.charge", call="tool", target="api.pay",
                          operation=lambda c: calls.append(name) or "charged")
        results[name] = (report.outcome, events)

    threads = [threading.Thread(target=work, args=(n,)) for n in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results) == ["w1", "w2"], results
    assert len(calls) == 1, (calls, results)
    half_open = [e for _, evs in results.values() for e in evs if e["event"] == "breaker" and e["state"] == "half_open"]
    assert len(half_open) == 1, results
    winner = calls[0]
    loser = "w2" if winner == "w1" else "w1"
    assert results[winner][0] == "ok"
    lost = results[loser][1]
    # It read `open` too (it reached the claim), lost it, and was short-circuited
    # for the lease's 10 minutes: longer than the run's 60 s retry budget.
    short = [e for e in lost if e["event"] == "short_circuit"]
    assert short and short[0]["delay_ms"] == 600_000, lost
    assert not any(e["event"] == "attempt" for e in lost), lost
    with SqliteStore(path) as db:
        got = db.get(PROBE + "api.pay", T0)
        assert got is not None, "the lease stays until it expires"
        lease = json.loads(got.value)
    assert (lease["since_ms"], lease["open_ms"]) == (T0, 600_000)


def test_a_retry_quota_drained_by_one_worker_refuses_the_others_retry(tmp_path: Path) -> None:
    path = tmp_path / "quota.db"
    e503 = {"source": "http", "status": 503}

    def worker(name: str, outcomes: List[Any]) -> Any:
        rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7, retry_quota={"capacity": 10})
        left = list(outcomes)

        def op(call: Call) -> Any:
            o = left.pop(0)
            if o == "ok":
                return None
            return Failed(o)

        return rt.run(name).step(id="sync", tool="erp.sync", call="tool", target=name, operation=op)

    def tokens() -> int:
        with SqliteStore(path) as db:
            got = db.get("agent-recovery/quota/default", T0)
            assert got is not None
            return int(json.loads(got.value)["tokens"])

    # Worker 1: two retries take 5 + 5 of the 10 tokens, the third is refused.
    r = worker("w1", [e503, e503, e503])
    assert (r.outcome, r.envelope["code"]) == ("dead_lettered", "runtime.budget.retry_quota_exhausted")
    assert tokens() == 0
    # Worker 2, another runtime on the same file: its first retry is refused.
    r = worker("w2", [e503, "ok"])
    assert (r.outcome, r.envelope["code"]) == ("dead_lettered", "runtime.budget.retry_quota_exhausted")
    # Worker 3: a success without a retry refunds success_refund (1).
    assert worker("w3", ["ok"]).outcome == "ok"
    assert tokens() == 1
