"""`interruptible`: a blocking operation that hangs is abandoned at its
`timeout_ms`, so a per-attempt timeout and a run deadline are enforced for
synchronous steps, not only measured. The hung calls block on an Event until
the test releases them: nothing depends on how long anything takes beyond the
timeouts themselves."""

from __future__ import annotations

import errno
import threading
import time
from typing import Any, Dict, List

import pytest

from agent_recovery import Clock, PolicyError, Runtime, Step, interruptible


class FastSleeps(Clock):
    """Real time, but a retry's sleep passes at once (it moves an offset): the
    call timeouts are real, the backoff costs nothing. Not virtual."""

    def __init__(self) -> None:
        self.slept = 0

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.slept

    def sleep_ms(self, ms: int) -> None:
        self.slept += ms


def _runtime(events: List[Dict[str, Any]], **options: Any) -> Runtime:
    return Runtime(clock=FastSleeps(), seed=7, on_event=events.append, **options)


def test_a_hung_call_is_abandoned_at_its_timeout_and_retried_with_the_same_key() -> None:
    events: List[Dict[str, Any]] = []
    release, first_done = threading.Event(), threading.Event()
    late: List[str] = []

    def lookup(call: Any) -> str:
        if call.attempt > 1:
            return "second"
        release.wait()
        late.append("first, too late")
        first_done.set()
        return "first, too late"

    run = _runtime(events, attempt_timeout_ms=100).run("r-hang")
    report = run.step(Step("s", "crm.lookup", interruptible(lookup), call="tool"))
    assert report.outcome == "ok" and report.result == "second"
    decision = next(e for e in events if e["event"] == "decision")
    assert (decision["code"], decision["action"]) == ("tool.timeout.total", "retry")
    keys = [e["key"] for e in events if e["event"] == "attempt"]
    assert len(keys) == 2 and keys[0] == keys[1]
    # The first call still runs on its own thread; released, it ends there.
    assert late == []
    release.set()
    assert first_done.wait(60)
    assert late == ["first, too late"]


def test_a_run_deadline_stops_waiting_for_a_hung_call() -> None:
    events: List[Dict[str, Any]] = []
    clock = FastSleeps()
    never = threading.Event()
    seen: List[Any] = []

    def hang(call: Any) -> str:
        seen.append(call.timeout_ms)
        never.wait()
        return "never seen"

    rt = Runtime(clock=clock, seed=7, on_event=events.append, deadline_ms=150)
    try:
        report = rt.run("r-deadline").step(Step("s", "crm.lookup", interruptible(hang), call="tool"))
    finally:
        never.set()
    assert report.outcome != "ok"
    assert seen and all(ms is not None and ms <= 150 for ms in seen)
    codes = [e["code"] for e in events if e["event"] == "decision"]
    assert codes and all(c == "tool.timeout.total" for c in codes)


def test_without_a_timeout_the_call_runs_on_the_callers_thread() -> None:
    threads: List[int] = []
    for timeout in (None, 60_000):
        rt = _runtime([], attempt_timeout_ms=timeout)
        op = interruptible(lambda call: threads.append(threading.get_ident()) or 1)
        assert rt.run("r-thread").step(Step("s", "crm.lookup", op)).outcome == "ok"
    assert threads[0] == threading.get_ident()
    assert threads[1] != threading.get_ident()


def test_what_the_operation_raises_in_time_is_observed_as_without_the_wrapper() -> None:
    events: List[Dict[str, Any]] = []

    def refused(call: Any) -> str:
        if call.attempt == 1:
            raise OSError(errno.ECONNRESET, "Connection reset by peer")
        return "ok"

    report = _runtime(events, attempt_timeout_ms=60_000).run("r-raise").step(
        Step("s", "crm.lookup", interruptible(refused), call="tool")
    )
    assert report.outcome == "ok"
    decision = next(e for e in events if e["event"] == "decision")
    assert decision["code"] == "tool.network.connection_reset"  # tests/vectors/transport.json


def test_interruptible_takes_a_callable() -> None:
    with pytest.raises(PolicyError, match="callable") as e:
        interruptible(42)  # type: ignore[arg-type]
    assert e.value.kind == "invalid_argument"
