"""The Runtime API with real operations, the real component and real stores.

Expected values come from docs/runtime.md's rules, the vectors in
tests/vectors/ (written from provider docs), and tests/vectors/tools/jitter.py
(the independent backoff: seed 7, tool calls wait 53, 152, 3, 672 ms after
attempts 1 to 4), never from running this code.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any, Dict, List

import httpx
import pytest

from agent_recovery import (
    Failed,
    Policy,
    PolicyError,
    PolicyHandle,
    RawOutcome,
    Runtime,
    SqliteStore,
    Step,
    StoreError,
    SystemClock,
    VirtualClock,
)
from agent_recovery.scenario import DEAD_LETTER_STREAM

from .conftest import artifact, vectors_dir

T0 = 1_767_225_600_000
QUOTA = {"source": "http", "status": 429, "body": {"error": {
    "type": "insufficient_quota", "code": "insufficient_quota", "message": "quota"}}}
UNAVAILABLE = {"source": "http", "status": 503}


def events_of(run: Any) -> List[Dict[str, Any]]:
    return [json.loads(e) for e in run.events]


def kinds(run: Any) -> List[str]:
    return [e["event"] for e in events_of(run)]


def test_quickstart_retry_on_the_virtual_clock() -> None:
    clock = VirtualClock(T0)
    run = Runtime(clock=clock, seed=7).run("run-1")
    calls: List[Any] = []

    def charge(call: Any) -> Any:
        calls.append(call)
        return Failed(UNAVAILABLE) if call.attempt == 1 else {"id": "ch_1"}

    report = run.step(id="charge", tool="payments.charge", operation=charge, call="tool",
                      args={"amount": 10})
    assert report.outcome == "ok" and report.result == {"id": "ch_1"} and not report.run_finished
    assert clock.now_ms() == T0 + 53  # jitter.py: seed 7, tool, after attempt 1
    assert [c.attempt for c in calls] == [1, 2] and len({c.key for c in calls}) == 1
    assert calls[0].kind == "operation" and calls[0].target == "payments.charge"


def test_fallback_chain_moves_on_a_quota_refusal() -> None:
    seen: List[str] = []

    def chat(call: Any) -> Any:
        seen.append(call.target)
        return RawOutcome(QUOTA) if call.target == "openai" else {"text": "ships Monday"}

    run = Runtime(clock=VirtualClock(T0), seed=7).run("r-fb")
    report = run.step(Step("answer", "llm.chat", chat, call="llm", target="openai",
                           fallbacks=["anthropic", "mistral"]))
    assert report.outcome == "ok" and report.result == {"text": "ships Monday"}
    assert seen == ["openai", "anthropic"]
    evs = events_of(run)
    decision = next(e for e in evs if e["event"] == "decision")
    assert decision["action"] == "fallback"
    fallback = next(e for e in evs if e["event"] == "fallback")
    assert fallback["target"] == "anthropic"
    attempts = [e for e in evs if e["event"] == "attempt"]
    assert [a["call"] for a in attempts] == ["operation", "fallback"]


def test_a_later_failure_compensates_the_earlier_step_then_dead_letters(policy: Policy) -> None:
    store_calls: List[Any] = []
    runtime = Runtime(clock=VirtualClock(T0), seed=7, breaker=(10, 30_000))  # no breaker in the way
    run = runtime.run("order-7")
    booked = run.step(
        id="book", tool="hotel.book", operation=lambda call: {"booking": "b1"},
        args={"night": 1}, side_effect=True, compensate=lambda call: store_calls.append(call),
    )
    assert booked.outcome == "ok"
    report = run.step(id="pay", tool="payments.charge", call="tool",
                      operation=lambda call: RawOutcome(UNAVAILABLE))
    assert report.outcome == "dead_lettered" and report.run_finished
    assert report.envelope["code"] == "tool.http.503_unavailable"
    assert len(store_calls) == 1
    undo = store_calls[0]
    assert undo.kind == "compensation" and undo.step == "book" and undo.attempt == 1
    # docs/runtime.md: a compensation's own key is key(run, step, "compensate:" + tool, args).
    assert undo.key == policy.key("order-7", "book", "compensate:hotel.book", {"night": 1})
    evs = kinds(run)
    assert evs.index("compensate") < evs.index("dead_letter")
    records = runtime.store.read(DEAD_LETTER_STREAM, 0, 10)
    assert len(records) == 1
    record = json.loads(records[0][1])
    assert record["step_id"] == "pay" and record["attempts"] == 5  # the attempt budget
    assert record["compensations"][0]["outcome"] == "ok"
    # The run is over: a later step is not run.
    assert run.step(id="late", tool="t", operation=lambda c: 1).outcome == "dead_lettered"


def test_a_breaker_opened_by_one_process_short_circuits_another(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    calls = {"a": 0, "b": 0}

    def failing(name: str) -> Any:
        def op(call: Any) -> Any:
            calls[name] += 1
            return RawOutcome(UNAVAILABLE)
        return op

    with SqliteStore(path) as store_a:
        run_a = Runtime(store=store_a, clock=VirtualClock(T0), seed=7, attempt_budget=3,
                        breaker=(3, 30_000)).run("worker-a")
        report = run_a.step(id="pay", tool="payments.charge", call="tool", target="api.pay",
                            operation=failing("a"))
        assert report.outcome == "dead_lettered"
    assert calls["a"] == 3
    assert {"event": "breaker", "state": "open"}.items() <= next(
        e for e in events_of(run_a) if e["event"] == "breaker").items()

    with SqliteStore(path) as store_b:  # another connection: what another process sees
        # 300 ms: inside the first open window (250 ms from the third failure at 205 ms).
        run_b = Runtime(store=store_b, clock=VirtualClock(T0 + 300), seed=7,
                        deadline_ms=5_000).run("worker-b")
        report = run_b.step(id="pay", tool="payments.charge", call="tool", target="api.pay",
                            operation=failing("b"))
    assert calls["b"] == 0, "an open breaker is not called"
    evs = events_of(run_b)
    short = next(e for e in evs if e["event"] == "short_circuit")
    assert short["target"] == "api.pay" and short["code"] == "runtime.circuit.open"
    assert "attempt" not in kinds(run_b)
    # on_open "fail" (the default): the step fails at once with runtime.circuit.open.
    assert report.outcome == "failed" and report.envelope["code"] == "runtime.circuit.open"


def test_cancel_between_steps_runs_the_compensations() -> None:
    undone: List[str] = []
    run = Runtime(clock=VirtualClock(T0), seed=7).run("r-cancel")
    for sid in ("a", "b"):
        run.step(id=sid, tool=f"t.{sid}", operation=lambda c: None, side_effect=True,
                 compensate=lambda c: undone.append(c.step))
    report = run.cancel()
    assert report is not None and report.outcome == "cancelled" and report.run_finished
    assert undone == ["b", "a"], "reverse order"
    assert "cancelled" in kinds(run)
    assert run.step(id="c", tool="t", operation=lambda c: 1).outcome == "cancelled"


def test_a_cancellation_signal_stops_new_attempts() -> None:
    signal = threading.Event()
    calls: List[int] = []

    def op(call: Any) -> Any:
        calls.append(call.attempt)
        signal.set()  # another thread would do this; the run sees it before the next attempt
        return RawOutcome(UNAVAILABLE)

    run = Runtime(clock=VirtualClock(T0), seed=7).run("r-sig", signal=signal)
    report = run.step(id="s", tool="t", call="tool", operation=op)
    assert report.outcome == "cancelled" and calls == [1]


LONG_BACKOFF = {"tool": {"base_ms": 60_000, "cap_ms": 60_000, "max_attempts": 5}}


def test_cancelling_the_task_cancels_the_run_during_a_real_sleep() -> None:
    undone: List[str] = []
    tasks: List[Any] = []

    def on_event(event: Dict[str, Any]) -> None:
        if event["event"] == "sleep":  # the retry sleep (seconds long) starts now: cancel the task
            tasks[0].cancel()

    async def main() -> Any:
        run = Runtime(seed=7, policy_config=LONG_BACKOFF, on_event=on_event).run("r-task")
        await run.step_async(id="book", tool="hotel.book", operation=lambda c: "ok",
                             side_effect=True, compensate=lambda c: undone.append(c.step))

        async def op(call: Any) -> Any:
            return RawOutcome(UNAVAILABLE)

        tasks.append(asyncio.ensure_future(run.step_async(id="pay", tool="t", call="tool", operation=op)))
        return await tasks[0], run

    report, run = asyncio.run(main())
    assert report.outcome == "cancelled" and undone == ["book"]
    operations = [e for e in events_of(run) if e["event"] == "attempt" and e["call"] == "operation"]
    assert [e["step"] for e in operations] == ["book", "pay"]  # no new attempt of pay


def test_a_signal_set_from_another_thread_cuts_a_real_sleep_short() -> None:
    signal = threading.Event()

    def on_event(event: Dict[str, Any]) -> None:
        if event["event"] == "sleep":  # another thread cancels while the run sleeps (seconds)
            threading.Thread(target=signal.set).start()

    for asynchronous in (False, True):
        signal.clear()
        run = Runtime(seed=7, policy_config=LONG_BACKOFF, on_event=on_event).run(
            f"r-thread-{asynchronous}", signal=signal)
        options = dict(id="pay", tool="t", call="tool", operation=lambda c: RawOutcome(UNAVAILABLE))
        report = asyncio.run(run.step_async(**options)) if asynchronous else run.step(**options)
        assert report.outcome == "cancelled"
        assert kinds(run).count("attempt") == 1 and "cancelled" in kinds(run)


def test_a_slow_attempt_becomes_a_timeout_observation_on_the_virtual_clock() -> None:
    clock = VirtualClock(T0)

    def op(call: Any) -> Any:
        assert call.timeout_ms == 1_000
        if call.attempt == 1:
            clock.advance(1_500)  # the call took 1.5 s
        return "late"

    run = Runtime(clock=clock, seed=7, attempt_timeout_ms=1_000).run("r-slow")
    assert run.step(id="s", tool="search", call="tool", operation=op).outcome == "ok"
    decision = next(e for e in events_of(run) if e["event"] == "decision")
    assert decision["code"] == "tool.timeout.total" and decision["action"] == "retry"


def test_an_async_call_is_really_cancelled_after_the_timeout() -> None:
    finished: List[int] = []

    async def op(call: Any) -> Any:
        if call.attempt == 1:
            await asyncio.sleep(30)  # hangs: the runtime cancels it
            finished.append(call.attempt)
        return {"n": call.attempt}

    async def main() -> Any:
        run = Runtime(clock=SystemClock(), seed=7, attempt_timeout_ms=20).run("r-async-timeout")
        return await run.step_async(id="s", tool="search", call="tool", operation=op), run

    report, run = asyncio.run(main())
    assert report.outcome == "ok" and report.result == {"n": 2} and finished == []
    decision = next(e for e in events_of(run) if e["event"] == "decision")
    assert decision["code"] == "tool.timeout.total"


def test_check_outcome_is_the_components_judgement() -> None:
    runtime = Runtime(clock=VirtualClock(T0))
    cases = json.loads((vectors_dir() / "providers.json").read_text(encoding="utf-8"))
    refusal = next(c for c in cases if c["name"].startswith("openai 200 chat finish_reason content_filter"))
    envelope = runtime.check_outcome(refusal["observation"])
    assert envelope is not None and envelope["code"] == refusal["expect"]["envelope"]["code"]
    assert runtime.check_outcome({"source": "http", "status": 304}) is None
    assert runtime.check_outcome({"source": "http", "status": 200, "body": {"ok": True}}) is None
    text = runtime.check_outcome_json('{"source":"http","status":503}')
    assert text is not None and json.loads(text)["code"] == "tool.http.503_unavailable"
    with pytest.raises(PolicyError):
        runtime.check_outcome_json("not json")


def test_a_hot_swap_takes_effect_at_the_next_decision() -> None:
    # payments-policy allows 3 tool attempts (README, custom policies); the reference 5.
    payments = artifact("payments-policy")

    def swapping(handle: PolicyHandle, calls: List[int]) -> Any:
        def op(call: Any) -> Any:
            calls.append(call.attempt)
            if call.attempt == 2:
                handle.swap(payments)
            return RawOutcome(UNAVAILABLE)
        return op

    # The run pins the breaker (run configuration wins), so only the attempt limit changes.
    handle, calls = PolicyHandle(), []
    run = Runtime(policy=handle, clock=VirtualClock(T0), seed=7, breaker=(10, 30_000)).run("r-swap")
    report = run.step(id="refund", tool="payments.refund", call="tool", operation=swapping(handle, calls))
    assert report.outcome == "dead_lettered"
    assert calls == [1, 2, 3]
    actions = [e["action"] for e in events_of(run) if e["event"] == "decision"]
    assert actions == ["retry", "retry", "dead_letter"]

    # Unpinned, the breaker thresholds are the deciding policy's too (docs/runtime.md:
    # payments-policy 2 / 60 000, the reference 3 / 30 000): the second failure opens it.
    handle, calls = PolicyHandle(), []
    run = Runtime(policy=handle, clock=VirtualClock(T0), seed=7).run("r-swap-breaker")
    run.step(id="refund", tool="payments.refund", call="tool", operation=swapping(handle, calls))
    evs = events_of(run)
    opened = next(i for i, e in enumerate(evs) if e["event"] == "breaker" and e["state"] == "open")
    assert [e["attempt"] for e in evs[:opened] if e["event"] == "attempt"] == [1, 2]


def test_sdk_exceptions_and_responses_are_observed_by_the_adapters() -> None:
    request = httpx.Request("POST", "https://api.example.com/v1/search")

    def op(call: Any) -> Any:
        if call.attempt == 1:
            raise httpx.ReadTimeout("read timed out", request=request)
        if call.attempt == 2:
            return httpx.Response(503, request=request)
        return httpx.Response(200, json={"hits": 3}, request=request)

    run = Runtime(clock=VirtualClock(T0), seed=7).run("r-sdk")
    report = run.step(id="s", tool="search", call="tool", operation=op)
    codes = [e["code"] for e in events_of(run) if e["event"] == "decision"]
    assert codes == ["tool.timeout.read", "tool.http.503_unavailable"]
    assert report.outcome == "ok"
    assert isinstance(report.result, httpx.Response) and report.result.json() == {"hits": 3}


def test_on_event_gets_the_dict_or_the_dict_and_the_components_text() -> None:
    one: List[Any] = []
    two: List[Any] = []
    r1 = Runtime(clock=VirtualClock(T0), seed=7, on_event=one.append).run("e")
    r1.step(id="s", tool="t", operation=lambda c: 1)
    r2 = Runtime(clock=VirtualClock(T0), seed=7, on_event=lambda e, text: two.append((e, text))).run("e2")
    r2.step(id="s", tool="t", operation=lambda c: 1)
    assert [e["event"] for e in one] == ["attempt", "ok", "outcome"]
    assert [t for _, t in two] == r2.events and all(json.loads(t) == e for e, t in two)


def test_bad_inputs_are_typed_errors() -> None:
    runtime = Runtime(clock=VirtualClock(T0))
    with pytest.raises(PolicyError) as info:
        Runtime(retries=3)
    assert info.value.kind == "invalid_argument" and "retries" in info.value.message
    run = runtime.run("r-bad")
    with pytest.raises(PolicyError) as info:
        run.step(id="s", tool="t", operation=lambda c: 1, retry=2)
    assert info.value.kind == "invalid_argument" and "retry" in info.value.message
    with pytest.raises(PolicyError):
        run.step(id="s", tool="t", operation="not callable")
    assert run.step(id="s", tool="t", operation=lambda c: 1).outcome == "ok"
    with pytest.raises(PolicyError) as info:
        run.step(id="s", tool="u", operation=lambda c: 1)  # step ids are unique in a run
    assert info.value.kind == "invalid_argument" and "'s' is used twice" in info.value.message
    with pytest.raises(PolicyError) as info:
        Runtime(config={"attempt_budget": "five"})
    assert info.value.kind in ("invalid_config", "invalid_argument")
    with pytest.raises(PolicyError):
        Runtime(breaker=(3,))
    with pytest.raises(PolicyError):
        run.step(id="s2", tool="t", operation=lambda c: 1, args={"x": object()})


def test_an_observation_that_is_not_json_reaches_the_policy_as_an_exception(policy: Policy) -> None:
    seen: List[Any] = []

    class Recording:  # any object with decide_json decides; this one records and delegates
        def decide_json(self, observation: str, context: str) -> str:
            seen.append(json.loads(observation))
            return policy.decide_json(observation, context)

    run = Runtime(policy=Recording(), clock=VirtualClock(T0), seed=7).run("r-nj")
    report = run.step(id="s", tool="t", call="tool",
                      operation=lambda c: Failed("not json") if c.attempt == 1 else 1)
    assert report.outcome == "failed" and len(seen) == 1  # an unknown exception is not retried
    assert seen[0]["source"] == "exception" and seen[0]["type"] == "agent_recovery.InvalidObservation"


def test_store_errors_surface_as_store_errors(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    runtime = Runtime(store=store, clock=VirtualClock(T0))
    run = runtime.run("r-store")
    store.close()
    with pytest.raises(StoreError):
        run.step(id="s", tool="t", operation=lambda c: 1)


def test_an_async_operation_in_the_blocking_step_is_a_typed_error() -> None:
    async def op(call: Any) -> Any:
        return 1

    run = Runtime(clock=VirtualClock(T0)).run("r-async-in-sync")
    with pytest.raises(PolicyError) as info:
        run.step(id="s", tool="t", operation=op)
    assert "step_async" in info.value.message


def test_a_trap_in_the_loop_is_a_typed_error_not_a_crash() -> None:
    from agent_recovery import Limits, PolicyRuntimeError

    starved = Limits(fuel_base=10_000, fuel_per_byte=0)
    for _ in range(2):  # the trapped instance is dropped; the next call gets a fresh one
        with pytest.raises(PolicyRuntimeError) as info:
            Runtime(clock=VirtualClock(T0), limits=starved).run("r-fuel").step(
                id="s", tool="t", operation=lambda c: 1)
        assert info.value.kind == "out_of_fuel" and "raise fuel_base" in info.value.message
    ok = Runtime(clock=VirtualClock(T0)).run("r-fuel")
    assert ok.step(id="s", tool="t", operation=lambda c: 1).outcome == "ok"


def test_response_is_the_deprecated_name_of_raw_outcome() -> None:
    """`Response`, the former name of RawOutcome, is the same class and warns."""
    import agent_recovery
    from agent_recovery import runtime

    for module in (agent_recovery, runtime):
        with pytest.warns(DeprecationWarning, match="use `RawOutcome`"):
            assert module.Response is RawOutcome
    assert "Response" not in agent_recovery.__all__ and "RawOutcome" in agent_recovery.__all__
