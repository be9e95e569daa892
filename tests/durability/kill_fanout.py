"""Kill tests of fan-outs (docs/durability.md §2 "Fan-outs" and §5): real
worker processes in Rust, Node and Python run jobs whose steps include a
fan-out of side-effecting, compensable branches (run concurrently: threads
in Rust and Python, promises in Node), are killed with a real SIGKILL at a
random point of interest, and are recovered by a worker of **another**
language on the same store and ledger.

    .venv/bin/python -m pytest -q tests/durability/kill_fanout.py

Environment: as tests/durability/kill.py (``AR_KILL_LANGUAGES``,
``AR_KILL_BUDGET_S``, ``AR_KILL_SEED``, ``AR_KILL_PARALLEL``).

The count that matters: every branch side effect applied (a row in the
ledger's ``applied``) is accounted for, either kept by a run that completed
or compensated (its compensation applied), and the run's dead-letter record
lists the fan-out's branches. Keys are computed here from their documented
definitions; what happened is read from the ledger and the store with
Python's own sqlite3.
"""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from kill import (  # the shared harness: workers, files, keys, the seed
    BUDGET_S,
    LANGUAGES,
    PARALLEL,
    SEED,
    Files,
    cache,
    comp_key,
    dead_letters,
    job,
    op_key,
    read,
)

__all__ = ["cache"]


def flat(steps: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Plain steps and fan-out branches in the order the loop records their
    completions (a fan-out's branches in branch order)."""
    out: List[Dict[str, Any]] = []
    for s in steps:
        out.extend(s["fanout"]["branches"] if "fanout" in s else [s])
    return out


def fanout_steps(rnd: random.Random, prefix: str) -> List[Dict[str, Any]]:
    """An optional compensable step, a fan-out of 2 to 4 compensable
    branches (some fail and are retried, some fail for good), and an
    optional last step that may fail for good (so the fan-out's branches are
    rolled back). Compensations fail at most once, so each one completes."""

    def plain(name: str) -> Dict[str, Any]:
        return {
            "id": f"{prefix}{name}",
            "fail_times": rnd.choice((0, 0, 1)),
            "compensation": True,
            "comp_fail_times": rnd.choice((0, 0, 1)),
        }

    steps: List[Dict[str, Any]] = []
    if rnd.random() < 0.5:
        steps.append(plain("pre"))
    branches = []
    for i in range(rnd.randint(2, 4)):
        b = plain(f"b{i}")
        if rnd.random() < 0.2:
            b["fail_always"] = True
            b["permanent"] = rnd.random() < 0.5
        branches.append(b)
    steps.append({"id": f"{prefix}fan", "fanout": {"min_results": rnd.randint(1, len(branches)), "branches": branches}})
    if rnd.random() < 0.5:
        last = plain("post")
        last["fail_always"] = rnd.random() < 0.5
        steps.append(last)
    return steps


def max_points(steps: List[Dict[str, Any]]) -> int:
    """An upper bound of the points a run of these steps reaches."""
    n = 0
    for s in flat(steps):
        n += 3 if s.get("fail_always") else s.get("fail_times", 0) + 2
        n += s.get("comp_fail_times", 0) + 2
    return n


def account(files: Files, runs: Dict[str, Dict[str, Any]]) -> Dict[str, int]:
    """Checks the invariants and counts the branch side effects: applied,
    kept (by a completed run), compensated, unaccounted."""
    known: Dict[str, tuple] = {}
    for run_id, r in runs.items():
        for s in flat(r["steps"]):
            known[op_key(run_id, s["id"])] = (s["id"], "operation")
            known[comp_key(run_id, s["id"])] = (s["id"], "compensation")
    calls = read(files.ledger, "SELECT step, kind, key, applied FROM calls ORDER BY n")
    applied_rows = read(files.ledger, "SELECT key, seq FROM applied")
    applied = {k: seq for k, seq in applied_rows}
    # Every call carries its step's key; no effect applied twice.
    per_key: Dict[str, int] = {}
    for step, kind, key, was in calls:
        assert known.get(key) == (step, kind), f"a {kind} call of {step} carried key {key} ({known.get(key)})"
        per_key[key] = per_key.get(key, 0) + int(was)
    assert all(n <= 1 for n in per_key.values()), f"an effect was applied twice: {per_key}"
    # Nothing left: no journal entry, no branch entry, no recovery lease.
    left = read(
        files.store,
        "SELECT key FROM ar_entries WHERE key LIKE 'agent-recovery/journal/%' "
        "OR key LIKE 'agent-recovery/branch/%' OR key LIKE 'agent-recovery/recovering/%'",
    )
    assert not left, f"left in the store after recovery: {left}"
    records = dead_letters(files)
    counts = {"applied": 0, "kept": 0, "compensated": 0, "unaccounted": 0}
    for run_id, r in runs.items():
        steps = flat(r["steps"])
        branch_ids = {b["id"] for s in r["steps"] if "fanout" in s for b in s["fanout"]["branches"]}
        printed = r["printed"]
        completed = printed is not None and printed.get("outcome") == "completed"
        # The run's own record (a branch that failed for good writes one of its own).
        own = [x for x in records if x["run_id"] == run_id and x["step_id"] not in branch_ids]
        # docs/runtime.md, "Fan-out": fewer than min_results ok with nothing
        # compensable completed (no earlier step, every branch failed for
        # good) ends the run `failed`, with no dead-letter record of its own.
        first = r["steps"][0]
        nothing_to_undo = "fanout" in first and all(b.get("fail_always") for b in first["fanout"]["branches"])
        if completed:
            assert not own, f"{run_id} completed but has a dead-letter record: {own}"
        elif nothing_to_undo and printed is not None:
            assert not own, f"{run_id} had nothing to compensate but has a dead-letter record: {own}"
            assert printed.get("outcome") == "failed", f"{run_id} printed {printed}, not failed"
        elif nothing_to_undo:
            # Killed: a run recovered from its journal never ends in silence
            # (docs/durability.md, "Fan-outs"): its record says `interrupted`.
            # Killed before its first journal entry, it has nothing to recover.
            assert all(x["outcome"] == "interrupted" and x["recovered"] for x in own), (
                f"{run_id} was killed with nothing to compensate; its record is not a recovery's: {own}"
            )
        else:
            assert len(own) >= 1, f"{run_id} did not complete (printed {printed}) and has no dead-letter record"
        rec = own[-1] if own else None
        for s in steps:
            k = op_key(run_id, s["id"])
            if k not in applied:
                continue
            is_branch = s["id"] in branch_ids
            comp = comp_key(run_id, s["id"]) in applied
            if is_branch:
                counts["applied"] += 1
            if completed:
                assert not comp, f"{run_id} completed but {s['id']} was compensated"
                counts["kept"] += is_branch
            elif comp:
                counts["compensated"] += is_branch
            else:
                counts["unaccounted"] += is_branch
                raise AssertionError(
                    f"{run_id}: {s['id']} applied its side effect and was neither kept nor compensated "
                    f"(record: {json.dumps(rec)})"
                )
        # Compensations ran in the reverse order of completion (branch order within a fan-out).
        order = [applied[comp_key(run_id, s["id"])] for s in steps if comp_key(run_id, s["id"]) in applied]
        assert order == sorted(order, reverse=True), f"{run_id}: compensations not in reverse order: {order}"
        # A fan-out's record lists its branches, and none that applied is said not to have started.
        if rec is not None and rec.get("tool") == "fanout":
            fan = next(s for s in r["steps"] if s["id"] == rec["step_id"])
            listed = rec.get("branches")
            assert isinstance(listed, list), f"{run_id}: the fan-out's record has no branches: {json.dumps(rec)}"
            assert [b["id"] for b in listed] == [b["id"] for b in fan["fanout"]["branches"]]
            for b in listed:
                if op_key(run_id, b["id"]) in applied:
                    assert b["outcome"] != "not_started", f"{run_id}: {b} applied its effect"
    return counts


def test_fanout_kills_recovered_by_another_language(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rnd = random.Random(SEED ^ 0xFA40)
    deadline = time.monotonic() + BUDGET_S
    totals = {"applied": 0, "kept": 0, "compensated": 0, "unaccounted": 0}
    kills = runs_total = rounds = in_fanout = 0
    while time.monotonic() < deadline or rounds == 0:
        rounds += 1
        files = Files(tmp_path / f"round-{rounds}", cache)
        recoverer = rnd.choice(LANGUAGES)
        writers = [lang for lang in LANGUAGES if lang != recoverer] or [recoverer]
        runs: Dict[str, Dict[str, Any]] = {}
        for j in range(rnd.randint(3, 6)):
            steps = fanout_steps(rnd, f"j{j}")
            kill_at: Optional[int] = None if rnd.random() < 0.1 else rnd.randint(1, max_points(steps))
            runs[f"f{rounds}-{j}"] = {
                "steps": steps,
                "kill_at": kill_at,
                "writer": rnd.choice(writers),
                "seed": rnd.randrange(1000),
            }
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            done = list(
                pool.map(
                    lambda item: files.work(
                        item[1]["writer"],
                        job("run", item[0], item[1]["steps"], item[1]["kill_at"], seed=item[1]["seed"]),
                    ),
                    list(runs.items()),
                )
            )
        for (run_id, r), (status, out) in zip(list(runs.items()), done):
            r["printed"] = out
            kills += status == -9
            runs_total += 1
        # Runs killed while their journal held a fan-out waiting for its branches.
        journal = read(files.store, "SELECT value FROM ar_entries WHERE key LIKE 'agent-recovery/journal/%'")
        in_fanout += sum(1 for (value,) in journal if json.loads(value)["state"]["phase"] == "joining")
        _, rec = files.work(recoverer, job("recover", "", [s for r in runs.values() for s in r["steps"]]))
        assert rec is not None
        try:
            counts = account(files, runs)
        except AssertionError as e:
            raise AssertionError(
                f"seed {SEED} round {rounds} (recovered by {recoverer}): {e}\n"
                f"runs: {json.dumps(runs)}\nAR_KILL_SEED={SEED} reproduces it"
            ) from None
        for k, v in counts.items():
            totals[k] += v
    with capsys.disabled():
        print(
            f"\nfan-out kill tests: seed {SEED}, {rounds} rounds, {runs_total} runs, {kills} killed with SIGKILL "
            f"({in_fanout} during a fan-out) and recovered by a worker of another language; branch side effects applied "
            f"{totals['applied']}, kept {totals['kept']}, compensated {totals['compensated']}, "
            f"unaccounted {totals['unaccounted']}"
        )
    assert kills > 0 and in_fanout > 0
    assert totals["unaccounted"] == 0
