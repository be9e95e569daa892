"""Fan-out through the Runtime API: real concurrency (threads, asyncio), the
virtual clock's order, min_results, a branch's compensation.

Expected values from docs/runtime.md ("Fan-out") and the jitter tool
(tests/vectors/tools/jitter.py: seed 7, a tool call waits 53 ms after attempt 1).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Dict, List

import pytest

from agent_recovery import Failed, PolicyError, RawOutcome, Runtime, Step, SystemClock, VirtualClock
from agent_recovery.scenario import DEAD_LETTER_STREAM

T0 = 1_767_225_600_000
BAD_REQUEST = {"source": "http", "status": 400}
UNAVAILABLE = {"source": "http", "status": 503}


def events_of(run: Any) -> List[Dict[str, Any]]:
    return [json.loads(e) for e in run.events]


def test_two_of_three_is_enough_and_the_virtual_clock_runs_branches_in_order() -> None:
    clock = VirtualClock(T0)
    run = Runtime(clock=clock, seed=7).run("f-virtual")
    report = run.fanout("quotes", 2, [
        Step("q-a", "quote", lambda c: Failed(UNAVAILABLE) if c.attempt == 1 else {"p": 1},
             call="tool", target="a"),
        dict(id="q-b", tool="quote", call="tool", target="b", operation=lambda c: RawOutcome(BAD_REQUEST)),
        dict(id="q-c", tool="quote", call="tool", target="c", operation=lambda c: {"p": 3}),
    ])
    assert report.outcome == "ok" and not report.run_finished
    assert report.result == [{"p": 1}, None, {"p": 3}]
    evs = events_of(run)
    assert evs[0]["event"] == "fanout" and evs[0]["step"] == "quotes"
    order = [e["step"] for e in evs[1:-1]]
    assert order == sorted(order, key=["q-a", "q-b", "q-c"].index), "branch 0's events, then 1's, then 2's"
    # q-a slept 53 ms; q-c started from the fork's time, and the join is at the latest end.
    assert next(e for e in evs if e["step"] == "q-c")["t_ms"] == 0
    assert clock.now_ms() == T0 + 53 and evs[-1]["t_ms"] == 53


def test_too_few_results_compensate_the_successful_branch() -> None:
    undone: List[str] = []
    runtime = Runtime(clock=VirtualClock(T0), seed=7)
    run = runtime.run("f-short")
    report = run.fanout("holds", 2, [
        dict(id="hold-a", tool="seat.hold", call="tool", side_effect=True,
             operation=lambda c: {"seat": "12A"}, compensate=lambda c: undone.append(c.step)),
        dict(id="hold-b", tool="seat.hold", call="tool", operation=lambda c: RawOutcome(BAD_REQUEST)),
    ])
    assert report.outcome == "dead_lettered" and report.run_finished
    assert report.envelope["code"] == "runtime.fanout.insufficient"
    assert undone == ["hold-a"]
    record = json.loads(runtime.store.read(DEAD_LETTER_STREAM, 0, 10)[-1][1])
    assert record["step_id"] == "holds" and record["tool"] == "fanout"


def test_branches_run_concurrently_on_threads() -> None:
    barrier = threading.Barrier(3, timeout=30)  # only passes when all three calls are in flight at once
    threads: List[str] = []

    def op(call: Any) -> Any:
        threads.append(threading.current_thread().name)
        barrier.wait()
        return call.step

    run = Runtime(clock=SystemClock(), seed=7).run("f-threads")
    report = run.fanout("all", 3, [dict(id=f"b{i}", tool="t", target=f"t{i}", operation=op) for i in range(3)])
    assert report.outcome == "ok" and report.result == ["b0", "b1", "b2"]
    assert len(set(threads)) == 3
    # on_event saw them as they happened; run.events lists them branch by branch (as Rust does)
    steps = [e["step"] for e in events_of(run) if e["step"] != "all"]
    assert steps == sorted(steps) and len(steps) == 9


def test_branches_run_concurrently_with_asyncio() -> None:
    async def main() -> Any:
        arrived = 0
        all_in = asyncio.Event()

        async def op(call: Any) -> Any:
            nonlocal arrived
            arrived += 1
            if arrived == 3:
                all_in.set()
            await asyncio.wait_for(all_in.wait(), 30)  # only passes when all three are in flight
            return call.step

        run = Runtime(clock=SystemClock(), seed=7).run("f-async")
        return await run.fanout_async("all", 2, [
            dict(id=f"b{i}", tool="t", target=f"t{i}", operation=op) for i in range(3)])

    report = asyncio.run(main())
    assert report.outcome == "ok" and report.result == ["b0", "b1", "b2"]


def test_a_later_failure_compensates_the_branches_too() -> None:
    undone: List[str] = []
    run = Runtime(clock=VirtualClock(T0), seed=7, breaker=(10, 30_000)).run("f-later")
    run.fanout("holds", 1, [
        dict(id=f"hold-{x}", tool="seat.hold", side_effect=True, operation=lambda c: "ok",
             compensate=lambda c: undone.append(c.step)) for x in "ab"])
    report = run.step(id="pay", tool="payments.charge", call="tool", operation=lambda c: RawOutcome(UNAVAILABLE))
    assert report.outcome == "dead_lettered"
    assert undone == ["hold-b", "hold-a"], "reverse order of completion (branch order)"


def test_bad_fanouts_are_typed_errors() -> None:
    run = Runtime(clock=VirtualClock(T0)).run("f-bad")
    with pytest.raises(PolicyError):
        run.fanout("f", 3, [dict(id="a", tool="t", operation=lambda c: 1)])  # min_results > branches
    with pytest.raises(PolicyError):
        run.fanout("g", 1, [dict(id="x", tool="t", operation=lambda c: 1),
                            dict(id="x", tool="t", operation=lambda c: 1)])
