"""Kill real Python worker processes at every point of interest, recover with a
new one, check the invariants of docs/durability.md §5.

The worker is python/tests/durable_worker.py (the protocol every language's
worker speaks; tests/durability/kill.py drives all three at random points).
This sweep is deterministic: for two jobs (one that completes, one whose last
step is exhausted, so the completed steps are compensated, one of them after a
failure), every point of
interest `k` is tried: a worker runs the job and SIGKILLs itself at its `k`-th
point, then a second worker recovers the store. The expected keys are computed
here from hand-written canonical JSON (docs/envelope-and-decision.md, "Idempotency keys").
"""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from agent_recovery.store import SqliteStore

from .conftest import repo_root

WORKER = repo_root() / "python" / "tests" / "durable_worker.py"
#: A hung worker fails the test (not a timing assumption).
TIMEOUT_S = 120
T0 = 1_767_225_600_000
#: Retries wait at most 4 ms on the real clock; breakers never open (a step
#: that fails for good fails on every attempt).
CONFIG = {
    "breaker": {"failure_threshold": 100, "open_ms": 1000},
    "policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 3}},
}

COMPLETES = [
    {"id": "charge", "fail_times": 1, "compensation": True},
    {"id": "hold", "compensation": True},
    {"id": "book"},
]
FAILS = [
    {"id": "charge", "compensation": True},
    {"id": "hold", "compensation": True, "comp_fail_times": 1},
    {"id": "book", "fail_always": True},
]


def worker(store: Path, ledger: Path, job: Dict[str, Any]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(WORKER), str(store), str(ledger), json.dumps(job)],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )


def key(*parts: Any) -> str:
    text = json.dumps(list(parts), separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def job(run_id: str, steps: List[Dict[str, Any]], mode: str, kill_at: Optional[int]) -> Dict[str, Any]:
    return {"mode": mode, "run_id": run_id, "seed": 7, "now_ms": T0, "kill_at": kill_at,
            "config": CONFIG, "steps": steps}


def check(store_path: Path, ledger: Path, run_id: str, steps: List[Dict[str, Any]], completed: bool) -> None:
    db = sqlite3.connect(ledger)
    calls = db.execute("SELECT step, kind, key, applied FROM calls ORDER BY n").fetchall()
    applied = {k: (step, kind, seq) for k, step, kind, seq in db.execute("SELECT key, step, kind, seq FROM applied")}
    # 1. every call of a step (each kind) carries its one key
    for step, kind, k, _ in calls:
        tool = "t." + step
        want = key(run_id, step, tool if kind == "operation" else "compensate:" + tool, {"step": step})
        assert k == want, f"{kind} of {step} called with {k}, expected {want}"
    # 2. nothing applied twice
    ones = [k for _, _, k, a in calls if a == 1]
    assert len(ones) == len(set(ones)) == len(applied)
    # 3. no journal entry, no recovery lease
    with SqliteStore(store_path) as store:
        left = store.keys("agent-recovery/journal/", T0) + store.keys("agent-recovery/recovering/", 2**53 - 1)
        assert left == [], left
        records = [json.loads(r) for _, r in store.read("agent-recovery/dead-letter", 0, 1000)]
    mine = [r for r in records if r["run_id"] == run_id]
    # 4. completed, or dead-lettered
    assert completed or mine, "the run neither completed nor reached the dead-letter queue"
    assert all(r["outcome"] in ("dead_lettered", "cancelled", "interrupted") for r in mine)
    # 5. started compensation chains completed, in reverse order
    if not completed:
        failed = {c["step"] for r in mine for c in r["compensations"] if c["outcome"] == "failed"}
        ops = sorted((seq, step) for step, kind, seq in applied.values() if kind == "operation")
        comps = {step: seq for step, kind, seq in applied.values() if kind == "compensation"}
        compensable = [step for _, step in ops if any(s["id"] == step and s.get("compensation") for s in steps)]
        for step in compensable:
            assert step in comps or step in failed, f"{step} was applied and never compensated"
        order = [comps[s] for s in compensable if s in comps]
        assert order == sorted(order, reverse=True), f"compensations out of reverse order: {order}"


@pytest.mark.parametrize("name,steps,outcome", [("completes", COMPLETES, "completed"), ("fails", FAILS, "dead_lettered")])
def test_kill_at_every_point_then_recover(tmp_path: Path, name: str, steps: List[Dict[str, Any]],
                                          outcome: str) -> None:
    probe = worker(tmp_path / "probe.db", tmp_path / "probe-ledger.db", job("probe", steps, "run", None))
    assert probe.returncode == 0, probe.stderr
    out = json.loads(probe.stdout)
    assert out["outcome"] == outcome
    points = out["points"]
    assert points >= 7
    for kill_at in range(1, points + 1):
        store, ledger, run_id = tmp_path / f"{kill_at}.db", tmp_path / f"{kill_at}-ledger.db", f"{name}-{kill_at}"
        killed = worker(store, ledger, job(run_id, steps, "run", kill_at))
        assert killed.returncode == -signal.SIGKILL, (kill_at, killed.returncode, killed.stdout, killed.stderr)
        recovered = worker(store, ledger, job(run_id, steps, "recover", None))
        assert recovered.returncode == 0, recovered.stderr
        reports = json.loads(recovered.stdout)["reports"]
        assert [r["run_id"] for r in reports] == [run_id], (kill_at, reports)
        check(store, ledger, run_id, steps, completed=False)
    # the unkilled run: completed or dead-lettered, same invariants
    check(tmp_path / "probe.db", tmp_path / "probe-ledger.db", "probe", steps, completed=outcome == "completed")
