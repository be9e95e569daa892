"""The retry helper, async and sync, against the real policy (fake sleep, no waiting)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List

import pytest

from agent_recovery import (
    Failure,
    Policy,
    PolicyError,
    PolicyHandle,
    RecoveryError,
    VirtualClock,
    recover,
    retry,
    retry_sync,
)

from .fakes import FakeResponse, HTTPStatusError, ReadTimeout, Recorder, script

T0 = 1_767_225_600_000
STEP: Dict[str, Any] = dict(call="tool", run_id="run-1", step_id="step-1", tool="search",
                            args={"q": "weather"})


def run_both(policy: Any, operation: Any, **kw: Any) -> List[Any]:
    """Run the sync and the async helper on fresh copies of the same script."""
    return [run_sync(policy, operation(), **kw), run_async(policy, operation(), **kw)]


def run_sync(policy: Any, op: Any, **kw: Any) -> Any:
    sleep = Recorder()
    decisions: List[Any] = []
    try:
        result = retry_sync(op, policy=policy, sleep=sleep, on_decision=decisions.append,
                            **{**STEP, **kw})
    except RecoveryError as e:
        result = e
    return result, op.calls, sleep.delays, decisions


def run_async(policy: Any, op: Any, **kw: Any) -> Any:
    sleep = Recorder()
    decisions: List[Any] = []

    async def note(decision: Any) -> None:  # async on_decision is awaited
        decisions.append(decision)

    async def main() -> Any:
        try:
            return await retry(op, policy=policy, sleep=sleep.asleep, on_decision=note,
                               **{**STEP, **kw})
        except RecoveryError as e:
            return e

    return asyncio.run(main()), op.calls, sleep.delays, decisions


def test_flaky_tool_recovers_with_one_key_and_recorded_delays(policy: Policy) -> None:
    def flaky() -> Any:
        return script(
            Failure.response(503, {"Retry-After": "1"}),
            ReadTimeout("read timed out"),
            {"forecast": "sunny"},
        )

    for result, calls, delays, decisions in run_both(policy, flaky, seed=42):
        assert result == {"forecast": "sunny"}
        assert [c["attempt"] for c in calls] == [1, 2, 3]
        key = policy.key("run-1", "step-1", "search", {"q": "weather"})
        assert {c["idempotency_key"] for c in calls} == {key}
        assert [d["action"] for d in decisions] == ["retry", "retry"]
        assert delays == [d["delay_ms"] / 1000 for d in decisions]
        assert delays[0] >= 1.0, "Retry-After: 1 is honoured"
        assert decisions[1]["envelope"]["code"] == "tool.timeout.read"


def test_same_seed_same_delays(policy: Policy) -> None:
    def op() -> Any:
        return script(Failure.response(503), Failure.response(503), "ok")

    runs = run_both(policy, op, seed=7) + run_both(policy, op, seed=7)
    assert len({tuple(r[2]) for r in runs}) == 1
    # The delays are the component's: ask it directly with the same context.
    first = policy.decide({"source": "http", "status": 503},
                          {"call": "tool", "attempt": 1, "elapsed_ms": 0, "seed": 7})
    assert runs[0][2][0] == first["delay_ms"] / 1000


def test_permanent_failure_stops_at_once(policy: Policy) -> None:
    def op() -> Any:
        return script(HTTPStatusError(FakeResponse(400, text='{"error":"bad q"}')))

    for result, calls, delays, decisions in run_both(policy, op):
        assert isinstance(result, RecoveryError)
        assert result.action == "fail" and result.attempts == 1
        assert result.code == "tool.http.400_bad_request"
        assert isinstance(result.cause, HTTPStatusError) and result.__cause__ is result.cause
        assert len(calls) == 1 and delays == []
        assert result.decision is decisions[0]


def test_attempts_are_exhausted(policy: Policy) -> None:
    def op() -> Any:
        return script(FakeResponse(503))  # a returned response >= 400 is a failure

    for result, calls, delays, _decisions in run_both(policy, op, seed=3):
        assert isinstance(result, RecoveryError)
        assert result.action == "dead_letter"
        assert result.decision["reason"] == "attempts_exhausted"
        assert len(calls) == 5 and len(delays) == 4  # tool: 5 attempts


def test_retry_budget_is_respected(policy: Policy) -> None:
    budget = 700
    ctx = {"config": {"retry_budget_ms": budget, "tool": {"max_attempts": 50}}}

    def op() -> Any:
        return script(ConnectionResetError("reset by peer"))

    for result, _calls, delays, decisions in run_both(policy, op, seed=9, context=ctx):
        assert isinstance(result, RecoveryError)
        assert result.decision["reason"] in ("budget_exhausted", "hint_exceeds_budget")
        assert sum(round(d * 1000) for d in delays) <= budget
        spent = 0
        for d in decisions[:-1]:
            assert d["attempt"] == len([x for x in decisions if x["attempt"] <= d["attempt"]])
            spent += d["delay_ms"]
            assert d["budget_remaining_ms"] == budget - spent
        assert decisions[0]["envelope"]["code"] == "tool.network.connection_reset"


def test_server_hint_beyond_budget_does_not_sleep(policy: Policy) -> None:
    def op() -> Any:
        return script(Failure.response(429, {"retry-after": "120"}))

    for result, _calls, delays, _ in run_both(policy, op):
        assert isinstance(result, RecoveryError) and delays == []
        assert result.decision["reason"] == "hint_exceeds_budget"


def test_cancellation_is_not_retried(policy: Policy) -> None:
    async def op(**_: Any) -> Any:
        raise asyncio.CancelledError()

    async def main() -> None:
        await retry(op, policy=policy, sleep=Recorder().asleep, **STEP)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_async_operation_and_handle(policy: Policy) -> None:
    handle = PolicyHandle(policy)
    seen: List[int] = []

    async def op(*, attempt: int, idempotency_key: str) -> str:
        seen.append(attempt)
        await asyncio.sleep(0)
        if attempt < 2:
            raise ReadTimeout("slow")
        return idempotency_key

    sleep = Recorder()
    key = asyncio.run(retry(op, policy=handle, sleep=sleep.asleep, seed=1, **STEP))
    assert key == policy.key("run-1", "step-1", "search", {"q": "weather"})
    assert seen == [1, 2] and len(sleep.delays) == 1


def test_the_component_judges_returned_responses(policy: Policy) -> None:
    # A 304 is not a failure; a 200 whose body is a refusal is (the component decides).
    not_modified = FakeResponse(304)
    assert retry_sync(lambda **_: not_modified, policy=policy, sleep=Recorder(), **STEP) is not_modified
    refusal = FakeResponse(200, {"content-type": "application/json"}, json.dumps(
        {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": None, "refusal": None},
             "finish_reason": "content_filter"}]}))
    with pytest.raises(RecoveryError) as info:
        retry_sync(lambda **_: refusal, policy=policy, sleep=Recorder(), **{**STEP, "call": "llm"})
    assert info.value.code == "llm.policy.refusal"  # tests/vectors/providers.json


def test_events_replace_the_ad_hoc_callbacks(policy: Policy) -> None:
    events: List[Dict[str, Any]] = []
    op = script(Failure.response(503), {"ok": 1})
    assert retry_sync(op, policy=policy, sleep=Recorder(), on_event=events.append, seed=7,
                      **STEP) == {"ok": 1}
    assert [e["event"] for e in events] == [
        "attempt", "decision", "sleep", "attempt", "ok", "outcome"]
    assert events[1]["delay_ms"] == 53  # tests/vectors/tools/jitter.py, seed 7, tool attempt 1


# -- retry is the door: fallbacks, and the same run as recover ---------------------

QUOTA = {"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota",
                   "param": None, "code": "insufficient_quota"}}


def quota() -> Failure:
    """OpenAI's 429 `insufficient_quota` (its error object, as the SDK receives it)."""
    return Failure.response(429, {"content-type": "application/json"}, json.dumps(QUOTA), call="llm",
                            provider="openai")


def scripted(per_target: Dict[str, List[Any]]) -> Any:
    """An operation that plays, per target, its steps in order (the last one repeats)."""
    calls: List[Dict[str, Any]] = []

    def operation(*, attempt: int, idempotency_key: str, target: str) -> Any:
        calls.append({"attempt": attempt, "key": idempotency_key, "target": target})
        steps = per_target[target]
        step = steps.pop(0) if len(steps) > 1 else steps[0]
        if isinstance(step, BaseException):
            raise step
        return step

    operation.calls = calls  # type: ignore[attr-defined]
    return operation


def test_a_quota_error_falls_back_through_retry(policy: Policy) -> None:
    for run in (run_sync, run_async):
        op = scripted({"gpt-4o": [quota()], "gpt-4o-mini": ["hi from gpt-4o-mini"]})
        result, calls, delays, decisions = run(policy, op, call="llm", target="gpt-4o",
                                               fallbacks=["gpt-4o-mini"], seed=3)
        assert result == "hi from gpt-4o-mini"
        assert [(c["target"], c["attempt"]) for c in calls] == [("gpt-4o", 1), ("gpt-4o-mini", 2)]
        assert len({c["key"] for c in calls}) == 1  # one key on every target
        assert [(d["action"], d["envelope"]["code"]) for d in decisions] == [("fallback", "llm.quota.exhausted")]
        assert delays == []


def test_without_fallbacks_a_quota_error_escalates_and_context_fallback_is_refused(policy: Policy) -> None:
    result, calls, _, _ = run_sync(policy, scripted({"search": [quota()]}), call="llm")
    assert isinstance(result, RecoveryError)
    assert (result.action, result.decision["reason"], len(calls)) == ("escalate", "no_fallback", 1)
    with pytest.raises(PolicyError, match=r"fallback_available.*fallbacks=\[") as info:
        retry_sync(lambda **_: 1, policy=policy, context={"fallback_available": True})
    assert info.value.kind == "invalid_context"
    with pytest.raises(PolicyError, match="no `target` parameter"):
        retry_sync(lambda **_: 1, policy=policy, fallbacks=["b"])


def test_retry_and_recover_run_the_same_loop(policy: Policy) -> None:
    """The same scripted failures through `retry_sync` (a recording sleep) and
    `recover` (a VirtualClock): the same attempts, keys, decisions, events and sleeps."""

    def script_() -> Any:
        return scripted({
            "gpt-4o": [Failure.response(503, {"retry-after": "1"}), quota()],
            "gpt-4o-mini": ["hi"],
        })

    ids = dict(call="llm", run_id="run-9", step_id="chat", tool="chat", args={"q": "hi"},
               target="gpt-4o", fallbacks=["gpt-4o-mini"], seed=11)

    def strip(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "t_ms"} for e in events]

    op = script_()
    sleep = Recorder()
    r_decisions: List[Any] = []
    r_events: List[Dict[str, Any]] = []
    r_out = retry_sync(op, policy=policy, sleep=sleep, on_decision=r_decisions.append,
                       on_event=r_events.append, **ids)  # type: ignore[arg-type]

    door_op = script_()
    clock = VirtualClock(T0)
    d_decisions: List[Any] = []
    d_events: List[Dict[str, Any]] = []

    @recover(policy=policy, clock=clock, on_decision=d_decisions.append, on_event=d_events.append, **ids)
    def chat(*, key: str, attempt: int, target: str) -> Any:
        return door_op(attempt=attempt, idempotency_key=key, target=target)

    assert r_out == chat() == "hi"
    assert op.calls == door_op.calls
    assert [(c["target"], c["attempt"]) for c in op.calls] == [
        ("gpt-4o", 1), ("gpt-4o", 2), ("gpt-4o-mini", 3)]
    assert {c["key"] for c in op.calls} == {policy.key("run-9", "chat", "chat", {"q": "hi"})}
    assert r_decisions == d_decisions
    assert [d["action"] for d in r_decisions] == ["retry", "fallback"]
    assert strip(r_events) == strip(d_events)
    slept = sum(d["delay_ms"] for d in r_decisions if d["action"] == "retry")
    assert [round(s * 1000) for s in sleep.delays] == [d["delay_ms"] for d in r_decisions if d["action"] == "retry"]
    assert clock.now_ms() - T0 == slept


def test_a_returned_failure_is_the_errors_cause_as_a_failure(policy: Policy) -> None:
    response = FakeResponse(400, text='{"error":"bad q"}')
    for result, _calls, _delays, _decisions in run_both(policy, lambda: script(response)):
        assert isinstance(result, RecoveryError) and result.action == "fail"
        assert isinstance(result.cause, Failure) and result.cause.observation["status"] == 400
        assert result.cause.value is response


def test_each_call_has_its_own_store_and_its_own_configuration(policy: Policy) -> None:
    """Calls with the same configuration run on one kept runtime, each on a fresh
    store: the idempotency cache and the persisted attempt count of one call do
    not reach the next (they do when the calls share a `store`), and a call with
    another configuration runs under its own."""
    from agent_recovery.store import MemoryStore

    def op(value: int) -> Any:
        return lambda **_: {"n": value}

    def failing(calls: List[int]) -> Any:
        def fail(**kw: Any) -> Any:
            calls.append(kw["attempt"])
            return Failure.response(503, {})

        return fail

    assert retry_sync(op(1), policy=policy, sleep=lambda s: None, **STEP) == {"n": 1}
    assert retry_sync(op(2), policy=policy, sleep=lambda s: None, **STEP) == {"n": 2}
    shared = MemoryStore()
    assert retry_sync(op(1), policy=policy, sleep=lambda s: None, store=shared, **STEP) == {"n": 1}
    assert retry_sync(op(2), policy=policy, sleep=lambda s: None, store=shared, **STEP) == {"n": 1}  # cached

    for budget in (2, 3, 2):
        calls: List[int] = []
        with pytest.raises(RecoveryError):
            retry_sync(failing(calls), policy=policy, sleep=lambda s: None,
                       runtime_options={"attempt_budget": budget}, **{**STEP, "step_id": "budget"})
        assert calls == list(range(1, budget + 1))
