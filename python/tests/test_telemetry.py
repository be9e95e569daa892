"""Telemetry through the real component, the real runtime and the real
OpenTelemetry SDK (its in-memory span exporter and metric reader).

Where the expectations come from, never from running this code:

- `docs/telemetry.md` (which span, attribute, span event and metric; its
  tables are parsed below and every name and type seen is checked in them);
- the loop rules of `docs/runtime.md` with the delays of
  `tests/vectors/tools/jitter.py` (seed 7, tool calls: 53, 152, 3, 672 ms
  after attempts 1 to 4), as in `host/tests/telemetry.rs`, whose scenarios and
  assertions are repeated here;
- the Rust runtime: `target/release/agent-recovery simulate SCENARIO
  --trace-out FILE` writes its spans as OTLP JSON, and the same scenarios run
  by Python (`telemetry_twin.py`, through the global providers as the CLI)
  must give the same spans, span for span: names, parent/child structure,
  traces, links, attributes, span events, status and virtual timestamps; the
  scenarios are three written for telemetry and every loop vector of
  tests/loops/ (whose expectations were derived by hand, not recorded).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import StatusCode

from agent_recovery import PolicyError, PolicyHandle, RawOutcome, Runtime, VirtualClock
from agent_recovery.telemetry import Telemetry

from .conftest import artifact, repo_root

T0 = 1_767_225_600_000
QUOTA = (
    '{"source":"http","status":429,"body":{"error":{"message":"You exceeded your current quota, '
    'please check your plan and billing details.","type":"insufficient_quota","param":null,'
    '"code":"insufficient_quota"}}}'
)
UNAVAILABLE = '{"source":"http","status":503}'


def at(ms: int) -> int:
    return ms * 1_000_000


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Sdk:
    """The real SDK: an in-memory span exporter and an in-memory metric reader."""

    def __init__(self, sampler: Any = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(sampler=sampler) if sampler else TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.runtime: Any = None

    def telemetry(self) -> Telemetry:
        return Telemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
        )

    def spans(self) -> List[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metrics(self) -> Dict[str, Any]:
        out = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                assert sm.scope.name == "agent-recovery"
                for m in sm.metrics:
                    out[m.name] = m
        return out


def counter(metrics: Dict[str, Any], name: str) -> List[Tuple[List[Tuple[str, str]], int]]:
    """A counter's data points as (sorted attributes, value)."""
    if name not in metrics:
        return []
    points = [(sorted((k, str(v)) for k, v in dp.attributes.items()), dp.value) for dp in metrics[name].data.data_points]
    return sorted(points)


def pairs(*kv: Tuple[str, str]) -> List[Tuple[str, str]]:
    return sorted(kv)


def named(spans: List[ReadableSpan], name: str) -> List[ReadableSpan]:
    return [s for s in spans if s.name == name]


def by_step(spans: List[ReadableSpan], step_id: str) -> ReadableSpan:
    (found,) = [s for s in named(spans, "agent_recovery.step") if s.attributes["agent_recovery.step.id"] == step_id]
    return found


def children(spans: List[ReadableSpan], parent: ReadableSpan, name: str = "agent_recovery.attempt") -> List[ReadableSpan]:
    out = [s for s in named(spans, name) if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(out, key=lambda s: (s.start_time, s.attributes.get("agent_recovery.attempt", 0)))


def answer_and_ship(sdk: Sdk) -> Tuple[Any, Any]:
    """host/tests/telemetry.rs's scenario: step `answer` (quota refusal on
    `openai`, fallback `anthropic` succeeds, has a compensation), then `ship`
    (503 five times: four retries, then compensate `answer`, then dead-letter)."""
    runtime = Runtime(clock=VirtualClock(T0), seed=7, breaker=(10, 30_000), telemetry=sdk.telemetry())
    sdk.runtime = runtime
    run = runtime.run("r-otel")
    answer = run.step(
        id="answer",
        tool="llm.chat",
        call="llm",
        target="openai",
        fallbacks=["anthropic"],
        side_effect=True,
        operation=lambda c: RawOutcome(QUOTA) if c.target == "openai" else {"text": "hi"},
        compensate=lambda c: None,
    )
    ship = run.step(
        id="ship", tool="shipping.create", call="tool", target="ship", operation=lambda c: RawOutcome(UNAVAILABLE)
    )
    return answer, ship


def test_retries_fallback_compensation_dead_letter() -> None:
    sdk = Sdk()
    answer, ship = answer_and_ship(sdk)
    assert (answer.outcome, ship.outcome) == ("ok", "dead_lettered")
    spans = sdk.spans()
    steps, attempts = named(spans, "agent_recovery.step"), named(spans, "agent_recovery.attempt")
    chains = named(spans, "agent_recovery.compensation")
    assert (len(steps), len(attempts), len(chains)) == (2, 8, 1)
    assert len(spans) == 11, "no other span"
    assert all(s.kind == trace.SpanKind.INTERNAL for s in spans)
    assert {(s.instrumentation_scope.name) for s in spans} == {"agent-recovery"}

    a_span, s_span = by_step(spans, "answer"), by_step(spans, "ship")
    a = a_span.attributes
    assert a["agent_recovery.step.outcome"] == "ok" and a["agent_recovery.tool"] == "llm.chat"
    assert a["agent_recovery.run.id"] == "r-otel" and a["agent_recovery.target"] == "openai"
    assert a["agent_recovery.policy.name"] == "agent-recovery-reference"
    assert len(a["agent_recovery.policy.sha256"]) == 64
    assert a_span.status.status_code == StatusCode.UNSET
    assert s_span.attributes["agent_recovery.step.outcome"] == "dead_lettered"
    assert s_span.attributes["error.type"] == "tool.http.503_unavailable"
    assert s_span.status.status_code == StatusCode.ERROR
    assert s_span.status.description == "tool.http.503_unavailable"
    # No current span: both steps are roots.
    assert a_span.parent is None and s_span.parent is None
    # The virtual clock: `answer` at T0 with no wait, `ship` from T0 to T0+880.
    assert (a_span.start_time, a_span.end_time) == (at(T0), at(T0))
    assert (s_span.start_time, s_span.end_time) == (at(T0), at(T0 + 880))

    # The fallback: attempt 1 on openai fails (quota: fallback), attempt 2 (same key) on anthropic.
    first, second = children(spans, a_span)
    f = first.attributes
    assert (f["agent_recovery.call.kind"], f["agent_recovery.target"], f["agent_recovery.attempt"]) == (
        "operation",
        "openai",
        1,
    )
    assert (f["error.type"], f["agent_recovery.action"]) == ("llm.quota.exhausted", "fallback")
    assert (f["agent_recovery.class"], f["agent_recovery.retryable"]) == ("policy", False)
    assert "http.request.resend_count" not in f, "not a resend"
    assert first.status.status_code == StatusCode.ERROR
    g = second.attributes
    assert (g["agent_recovery.call.kind"], g["agent_recovery.target"], g["agent_recovery.attempt"]) == (
        "fallback",
        "anthropic",
        2,
    )
    assert g["http.request.resend_count"] == 1 and "error.type" not in g
    assert second.status.status_code == StatusCode.UNSET
    assert len(f["agent_recovery.idempotency_key.hash"]) == 64
    assert g["agent_recovery.idempotency_key.hash"] == f["agent_recovery.idempotency_key.hash"]

    # The retries: five attempts of `ship`, 503 each, four `retry` with the
    # seed-7 delays, then `compensate`; each starts after the previous wait.
    sh = children(spans, s_span)
    assert len(sh) == 5
    starts, delays = [0, 53, 205, 208, 880], [53, 152, 3, 672, None]
    for n, span in enumerate(sh):
        x = span.attributes
        assert x["agent_recovery.attempt"] == n + 1
        assert x["error.type"] == "tool.http.503_unavailable"
        assert (x["agent_recovery.class"], x["agent_recovery.retryable"]) == ("transient", True)
        assert x.get("http.request.resend_count") == (n if n > 0 else None)
        assert x.get("agent_recovery.delay_ms") == delays[n]
        assert x["agent_recovery.action"] == ("retry" if n < 4 else "compensate")
        assert x["agent_recovery.policy.name"] == "agent-recovery-reference"
        assert span.start_time == at(T0 + starts[n])
    # The key's hash, never the key: the key is sha256 of the canonical JSON of
    # [run_id, step_id, tool, args] (docs/envelope-and-decision.md), so the attribute is its sha256.
    ship_key = sha256_hex('["r-otel","ship","shipping.create",null]')
    assert sh[0].attributes["agent_recovery.idempotency_key.hash"] == sha256_hex(ship_key)
    assert all(ship_key not in str(v) for s in spans for v in s.attributes.values())

    # The compensation chain: a child of `ship`, linked to `answer`, with the compensation call as its child.
    chain = chains[0]
    assert chain.parent is not None and chain.parent.span_id == s_span.context.span_id
    assert [link.context for link in chain.links] == [a_span.context]
    assert dict(chain.links[0].attributes) == {"agent_recovery.step.id": "answer"}
    assert chain.attributes["agent_recovery.compensation.count"] == 1
    assert chain.attributes["agent_recovery.compensation.failed"] == 0
    (comp,) = children(spans, chain)
    assert comp.attributes["agent_recovery.call.kind"] == "compensation"
    assert comp.attributes["agent_recovery.step.id"] == "answer"
    assert comp.attributes["agent_recovery.attempt"] == 1
    assert comp.start_time == at(T0 + 880)
    assert [e.name for e in chain.events] == ["agent_recovery.compensate"]

    # The dead-letter record, in full, as a span event of `ship`.
    (dl,) = [e for e in s_span.events if e.name == "agent_recovery.dead_letter"]
    record = json.loads(dl.attributes["agent_recovery.dead_letter.record"])
    assert record["step_id"] == "ship" and record["attempts"] == 5
    assert record["compensations"][0]["step"] == "answer"
    assert dl.attributes["error.type"] == "tool.http.503_unavailable"
    assert dl.timestamp == at(T0 + 880)
    # And one log record for it: the same bytes as its body, in `ship`'s trace (docs/telemetry.md).
    (log,) = sdk.logs.get_finished_logs()
    assert log.instrumentation_scope.name == "agent-recovery"
    lr = log.log_record
    assert lr.event_name == "agent_recovery.dead_letter"
    assert (lr.severity_number, lr.severity_text) == (SeverityNumber.WARN, "WARN")
    assert lr.body == dl.attributes["agent_recovery.dead_letter.record"]
    assert lr.timestamp == at(T0 + 880)
    assert dict(lr.attributes) == {
        "agent_recovery.run.id": "r-otel",
        "agent_recovery.step.id": "ship",
        "error.type": "tool.http.503_unavailable",
    }
    assert (lr.trace_id, lr.span_id) == (s_span.context.trace_id, s_span.context.span_id)
    assert [e.timestamp for e in s_span.events if e.name == "agent_recovery.sleep"] == [
        at(T0 + t) for t in (0, 53, 205, 208)
    ]

    m = sdk.metrics()
    op503 = lambda action: pairs(  # noqa: E731
        ("agent_recovery.call.kind", "operation"),
        ("error.type", "tool.http.503_unavailable"),
        ("agent_recovery.action", action),
    )
    assert counter(m, "agent_recovery.attempts") == sorted(
        [
            (
                pairs(
                    ("agent_recovery.call.kind", "operation"),
                    ("error.type", "llm.quota.exhausted"),
                    ("agent_recovery.action", "fallback"),
                ),
                1,
            ),
            (pairs(("agent_recovery.call.kind", "fallback")), 1),
            (op503("retry"), 4),
            (op503("compensate"), 1),
            (pairs(("agent_recovery.call.kind", "compensation")), 1),
        ]
    )
    assert counter(m, "agent_recovery.decisions") == sorted(
        [
            (pairs(("error.type", "llm.quota.exhausted"), ("agent_recovery.action", "fallback")), 1),
            (pairs(("error.type", "tool.http.503_unavailable"), ("agent_recovery.action", "retry")), 4),
            (pairs(("error.type", "tool.http.503_unavailable"), ("agent_recovery.action", "compensate")), 1),
        ]
    )
    assert counter(m, "agent_recovery.dead_letters") == [(pairs(("error.type", "tool.http.503_unavailable")), 1)]
    assert counter(m, "agent_recovery.compensations") == [(pairs(("agent_recovery.compensation.state", "started")), 1)]
    assert counter(m, "agent_recovery.steps") == sorted(
        [
            (pairs(("agent_recovery.step.outcome", "ok")), 1),
            (pairs(("agent_recovery.step.outcome", "dead_lettered")), 1),
        ]
    )
    # The quota refusal the step fell back from opened openai's breaker (a sticky fallback).
    assert counter(m, "agent_recovery.breaker.transitions") == [
        (pairs(("agent_recovery.breaker.state", "open"), ("agent_recovery.target", "openai")), 1)
    ]
    # The retry waits: 53 + 152 + 3 + 672 ms.
    delay = m["agent_recovery.retry.delay"]
    assert delay.unit == "ms"
    (dp,) = delay.data.data_points
    assert dict(dp.attributes) == {"agent_recovery.target": "ship"}
    assert (dp.count, dp.sum, dp.min, dp.max) == (4, 880, 3, 672)
    assert isinstance(dp.sum, int), "integer ms"
    check_against_the_doc(spans, m)
    # One record written, none closed: the depth is 1; purging it records 0.
    depth = m["agent_recovery.dead_letter.depth"]
    assert [(dict(p.attributes), p.value) for p in depth.data.data_points] == [({}, 1)]
    (item,) = sdk.runtime.dead_letters.list()
    sdk.runtime.dead_letters.purge(item.id)
    after = sdk.metrics()["agent_recovery.dead_letter.depth"]
    assert [(dict(p.attributes), p.value) for p in after.data.data_points] == [({}, 0)]


def test_fanout_breaker_and_short_circuit() -> None:
    sdk = Sdk()
    runtime = Runtime(clock=VirtualClock(T0), seed=7, breaker=(1, 30_000), telemetry=sdk.telemetry())
    run = runtime.run("r-fan")
    report = run.fanout(
        "quotes",
        1,
        [
            dict(id="q-a", tool="quote", target="a", operation=lambda c: 1),
            dict(id="q-b", tool="quote", target="b", operation=lambda c: 2),
        ],
    )
    assert report.outcome == "ok"
    # One transient failure opens `flaky` (threshold 1); the retry finds it open.
    report = run.step(id="poll", tool="status", call="tool", target="flaky", operation=lambda c: RawOutcome(UNAVAILABLE))
    assert report.outcome != "ok"

    spans = sdk.spans()
    (fan,) = named(spans, "agent_recovery.fanout")
    assert fan.attributes["agent_recovery.fanout.min_results"] == 1
    assert fan.attributes["agent_recovery.fanout.branches"] == 2
    assert fan.attributes["agent_recovery.step.outcome"] == "ok"
    branches = children(spans, fan, "agent_recovery.step")
    assert sorted(b.attributes["agent_recovery.step.id"] for b in branches) == ["q-a", "q-b"]
    assert all(b.context.trace_id == fan.context.trace_id for b in branches)
    # On a virtual clock both branches run from the fork's time.
    assert {b.start_time for b in branches} == {fan.start_time}

    m = sdk.metrics()
    # The retry finds `flaky` open and, with on_open "fail" (the default), the
    # step ends at once (docs/fallbacks-and-breakers.md): one opening, no probe.
    transitions = dict((tuple(a), n) for a, n in counter(m, "agent_recovery.breaker.transitions"))

    def count(state: str) -> int:
        key = tuple(pairs(("agent_recovery.target", "flaky"), ("agent_recovery.breaker.state", state)))
        return transitions.get(key, 0)

    assert count("open") == 1 and count("half_open") == 0, transitions
    assert len(transitions) == 1, transitions
    shorts = counter(m, "agent_recovery.short_circuits")
    assert len(shorts) == 1 and shorts[0][0] == pairs(("agent_recovery.target", "flaky")) and shorts[0][1] >= 1
    poll = by_step(spans, "poll")
    assert {"agent_recovery.breaker", "agent_recovery.short_circuit"} <= {e.name for e in poll.events}
    steps = dict((tuple(a), n) for a, n in counter(m, "agent_recovery.steps"))
    assert steps[(("agent_recovery.step.outcome", "ok"),)] == 3, "two branches and the fan-out"
    check_against_the_doc(spans, m)


def test_fanout_branches_on_threads_and_tasks() -> None:
    """On the system clock the branches run on threads (`fanout`) or as tasks
    (`fanout_async`); each branch's step span is a child of the fan-out span."""
    import asyncio

    from agent_recovery import SystemClock

    sdk = Sdk()
    runtime = Runtime(clock=SystemClock(), seed=7, telemetry=sdk.telemetry())
    branches = [dict(id=f"b{i}", tool="quote", target=f"t{i}", operation=lambda c: 1) for i in range(3)]
    assert runtime.run("r-threads").fanout("f", 3, branches).outcome == "ok"

    async def as_tasks() -> None:
        async def op(c: Any) -> int:
            await asyncio.sleep(0)
            return 2

        bs = [dict(id=f"c{i}", tool="quote", operation=op) for i in range(3)]
        assert (await runtime.run("r-tasks").fanout_async("g", 3, bs)).outcome == "ok"

    asyncio.run(as_tasks())
    spans = sdk.spans()
    for fan_id, prefix in (("f", "b"), ("g", "c")):
        (fan,) = [s for s in named(spans, "agent_recovery.fanout") if s.attributes["agent_recovery.step.id"] == fan_id]
        kids = children(spans, fan, "agent_recovery.step")
        assert sorted(k.attributes["agent_recovery.step.id"] for k in kids) == [f"{prefix}{i}" for i in range(3)]
        assert all(len(children(spans, k)) == 1 for k in kids), "one attempt span under each branch"
        assert fan.attributes["agent_recovery.step.outcome"] == "ok"


def test_off_and_noop_global_give_the_same_events() -> None:
    """`Telemetry.off()` and the default (the API's no-op global providers: no
    test in this process installs one) change nothing in what the run does."""
    assert not isinstance(trace.get_tracer_provider(), TracerProvider), "no SDK installed globally here"

    def events(telemetry: Optional[Telemetry]) -> List[str]:
        n = [0]

        def op(c: Any) -> Any:
            n[0] += 1
            return RawOutcome(UNAVAILABLE) if n[0] < 3 else None

        kw = {} if telemetry is None else {"telemetry": telemetry}
        run = Runtime(clock=VirtualClock(T0), seed=7, **kw).run("r")
        run.step(id="s", tool="t", operation=op)
        return run.events

    off = events(Telemetry.off())
    assert off == events(None) == events(Telemetry.global_())
    assert len(off) == 9, off  # 3 attempts, 2 decisions, 2 sleeps, ok, outcome


def test_cancel_between_steps_is_a_linked_compensation_chain() -> None:
    sdk = Sdk()
    run = Runtime(clock=VirtualClock(T0), seed=7, telemetry=sdk.telemetry()).run("r-cancel")
    report = run.step(
        id="reserve", tool="inventory.reserve", side_effect=True, operation=lambda c: None, compensate=lambda c: None
    )
    assert report.outcome == "ok"
    cancelled = run.cancel()
    assert cancelled is not None and cancelled.outcome == "cancelled"
    spans = sdk.spans()
    (step,) = named(spans, "agent_recovery.step")
    (chain,) = named(spans, "agent_recovery.compensation")
    assert chain.parent is None
    assert [link.context for link in chain.links] == [step.context]
    assert chain.attributes["agent_recovery.compensation.count"] == 1
    (comp,) = children(spans, chain)
    assert (comp.attributes["agent_recovery.call.kind"], comp.attributes["agent_recovery.step.id"]) == (
        "compensation",
        "reserve",
    )
    m = sdk.metrics()
    assert counter(m, "agent_recovery.steps") == [(pairs(("agent_recovery.step.outcome", "ok")), 1)]
    assert counter(m, "agent_recovery.compensations") == [(pairs(("agent_recovery.compensation.state", "started")), 1)]


def test_a_step_is_a_child_of_the_current_span_and_async_gives_the_same() -> None:
    import asyncio

    sdk = Sdk()
    runtime = Runtime(clock=VirtualClock(T0), seed=7, telemetry=sdk.telemetry())
    tracer = sdk.tracer_provider.get_tracer("the-app")

    async def agent() -> None:
        with tracer.start_as_current_span("request") as request:
            run = runtime.run("r-async")

            async def op(c: Any) -> Any:
                return RawOutcome(UNAVAILABLE) if c.attempt == 1 else {"ok": True}

            report = await run.step_async(id="s", tool="search", call="tool", operation=op)
            assert report.outcome == "ok"
            assert request.is_recording()

    asyncio.run(agent())
    spans = sdk.spans()
    (request,) = named(spans, "request")
    step = by_step(spans, "s")
    assert step.parent is not None and step.parent.span_id == request.context.span_id
    assert step.context.trace_id == request.context.trace_id
    a1, a2 = children(spans, step)
    assert (a1.attributes["agent_recovery.action"], a1.attributes["agent_recovery.delay_ms"]) == ("retry", 53)
    assert (a2.start_time, a2.attributes["http.request.resend_count"]) == (at(T0 + 53), 1)


def test_a_sampled_out_step_builds_no_attempt_span_and_still_counts() -> None:
    """docs/telemetry.md: under a non-recording step span no attempt or chain
    span is built (the SDK would drop them anyway); the metrics still count."""
    sdk = Sdk(sampler=ParentBased(ALWAYS_OFF))
    answer, ship = answer_and_ship(sdk)
    assert ship.outcome == "dead_lettered"
    assert sdk.spans() == []
    m = sdk.metrics()
    assert sum(n for _, n in counter(m, "agent_recovery.attempts")) == 8
    assert counter(m, "agent_recovery.dead_letters") == [(pairs(("error.type", "tool.http.503_unavailable")), 1)]
    assert counter(m, "agent_recovery.compensations") == [(pairs(("agent_recovery.compensation.state", "started")), 1)]


def test_a_hot_swap_shows_in_the_policy_attributes(tmp_path: Path) -> None:
    sdk = Sdk()
    handle = PolicyHandle()
    runtime = Runtime(clock=VirtualClock(T0), seed=7, policy=handle, telemetry=sdk.telemetry())
    run = runtime.run("r-swap")
    fails_once = lambda c: RawOutcome(UNAVAILABLE) if c.attempt == 1 else None  # noqa: E731
    run.step(id="before", tool="t", call="tool", operation=fails_once)
    handle.swap(artifact("payments-policy"))
    run.step(id="after", tool="t", call="tool", operation=fails_once)
    spans = sdk.spans()
    names = {}
    for sid in ("before", "after"):
        step = by_step(spans, sid)
        failed = children(spans, step)[0]
        assert failed.attributes["agent_recovery.policy.name"] == step.attributes["agent_recovery.policy.name"]
        names[sid] = (step.attributes["agent_recovery.policy.name"], step.attributes["agent_recovery.policy.sha256"])
    assert names["before"][0] == "agent-recovery-reference"
    assert names["after"][0] == handle.policy.name != "agent-recovery-reference"
    assert names["after"][1] == handle.policy.sha256 == hashlib.sha256(artifact("payments-policy").read_bytes()).hexdigest()


def test_bad_input_never_breaks_a_run() -> None:
    with pytest.raises(PolicyError) as e:
        Runtime(telemetry="yes")
    assert e.value.kind == "invalid_argument" and "Telemetry" in str(e.value)
    with pytest.raises(PolicyError):
        Telemetry(tracer_provider=object())
    # Events and decisions the telemetry cannot read are skipped, never raised.
    from agent_recovery.telemetry import Bound

    clock = VirtualClock(T0)
    sdk = Sdk()
    lane = Bound(sdk.telemetry(), None).run("r").lane(None, clock)
    for bad in (None, 3, [], {}, {"event": 1}, {"event": "sleep", "delay_ms": -1}, {"event": "ok", "attempt": True},
                {"event": "decision", "code": {"x": 1}}, {"event": "compensate", "step": 7}):
        lane.event(bad, clock)
    for text in ("", "not json", "[1]", '{"envelope":3}', '{"envelope":{"class":1}}', "1e999999"):
        lane.decided(text)
    lane.appended("agent-recovery/dead-letter", "{not json", clock)
    lane.finish({"outcome": 5, "envelope": "x"}, clock)
    assert sdk.spans() == []


def test_a_store_failure_ends_the_open_spans_and_is_raised() -> None:
    """The dead-letter append fails: the step raises `StoreError` (the
    runtime's contract) and its spans still end, on the clock, without an
    outcome (nothing is left open)."""
    from agent_recovery import MemoryStore, StoreError

    class Broken(MemoryStore):
        def append(self, stream: str, record: str, now_ms: int) -> int:
            raise StoreError("unavailable", "the disk is gone; retry later")

    sdk = Sdk()
    runtime = Runtime(clock=VirtualClock(T0), seed=7, breaker=(10, 30_000), store=Broken(), telemetry=sdk.telemetry())
    run = runtime.run("r-broken")
    with pytest.raises(StoreError):
        run.step(id="ship", tool="shipping.create", call="tool", operation=lambda c: RawOutcome(UNAVAILABLE))
    spans = sdk.spans()
    step = by_step(spans, "ship")
    assert "agent_recovery.step.outcome" not in step.attributes
    assert step.end_time == at(T0 + 880)
    assert len(children(spans, step)) == 5
    assert not [e for e in step.events if e.name == "agent_recovery.dead_letter"]


def test_an_interrupted_fanout_ends_its_branches_spans() -> None:
    """A branch's operation raises past the runtime (a `BaseException`, as
    KeyboardInterrupt): it propagates, and the fan-out's, the branches' and
    the pending attempt's spans all end."""

    class Stop(BaseException):
        pass

    def stop(c: Any) -> Any:
        raise Stop()

    sdk = Sdk()
    run = Runtime(clock=VirtualClock(T0), seed=7, telemetry=sdk.telemetry()).run("r-stop")
    with pytest.raises(Stop):
        run.fanout("f", 1, [dict(id="a", tool="t", operation=lambda c: 1), dict(id="b", tool="t", operation=stop)])
    spans = sdk.spans()
    assert sorted(s.name for s in spans) == sorted(
        ["agent_recovery.fanout", "agent_recovery.step", "agent_recovery.step",
         "agent_recovery.attempt", "agent_recovery.attempt"]
    )
    b = by_step(spans, "b")
    assert "agent_recovery.step.outcome" not in b.attributes
    assert by_step(spans, "a").attributes["agent_recovery.step.outcome"] == "ok"


@pytest.mark.parametrize("min_results", ["two", -1, 2.5, None, True])
def test_a_bad_fanout_fails_the_same_with_telemetry_on(min_results: Any) -> None:
    """The loop refuses the fan-out; telemetry must neither raise first nor
    change the error (and ends what it started)."""

    def attempt(telemetry: Telemetry) -> str:
        run = Runtime(clock=VirtualClock(T0), seed=7, telemetry=telemetry).run("r-bad")
        with pytest.raises(Exception) as e:
            run.fanout("f", min_results, [dict(id="a", tool="t", operation=lambda c: 1)])
        return f"{type(e.value).__name__}: {e.value}"

    sdk = Sdk()
    assert attempt(sdk.telemetry()) == attempt(Telemetry.off())
    assert [s.name for s in sdk.spans()] == ["agent_recovery.fanout"]


# -- the same spans as the Rust runtime -----------------------------------------------

CLI = repo_root() / "target" / "release" / "agent-recovery"

#: Scenarios run by both runtimes (docs/runtime.md, "Scenarios").
SCENARIOS: Dict[str, Dict[str, Any]] = {
    # host/tests/telemetry.rs's first test: retries, a fallback, a compensation, a dead letter.
    "retries-fallback-compensation-dead-letter": {
        "run_id": "r-otel",
        "seed": 7,
        "now_ms": T0,
        "config": {"breaker": {"failure_threshold": 10, "open_ms": 30000}},
        "steps": [
            {
                "id": "answer",
                "tool": "llm.chat",
                "call": "llm",
                "target": "openai",
                "side_effect": True,
                "outcomes": [json.loads(QUOTA)],
                "fallbacks": [{"target": "anthropic", "outcomes": ["ok"]}],
                "compensation": {"outcomes": ["ok"]},
            },
            {"id": "ship", "tool": "shipping.create", "call": "tool", "target": "ship",
             "outcomes": [json.loads(UNAVAILABLE)] * 5},
        ],
    },
    # A fan-out, then a breaker that opens and short-circuits.
    "fanout-breaker-short-circuit": {
        "run_id": "r-fan",
        "seed": 7,
        "now_ms": T0,
        "config": {"breaker": {"failure_threshold": 1, "open_ms": 30000}},
        "steps": [
            {"id": "quotes", "fanout": {"min_results": 1, "branches": [
                {"id": "q-a", "tool": "quote", "target": "a", "outcomes": ["ok"]},
                {"id": "q-b", "tool": "quote", "target": "b", "outcomes": [json.loads(UNAVAILABLE), "ok"]},
            ]}},
            {"id": "poll", "tool": "status", "call": "tool", "target": "flaky",
             "outcomes": [json.loads(UNAVAILABLE)] * 10},
        ],
    },
    # Cancelled while retrying: the compensation of a completed step fails.
    "cancelled-compensation-fails": {
        "run_id": "r-cancel",
        "seed": 7,
        "now_ms": T0,
        "cancel_at_ms": 100,
        "steps": [
            {"id": "reserve", "tool": "inventory.reserve", "call": "tool", "side_effect": True,
             "outcomes": ["ok"], "compensation": {"outcomes": [json.loads(UNAVAILABLE)] * 5}},
            {"id": "pay", "tool": "payments.charge", "call": "tool", "target": "api.pay",
             "outcomes": [json.loads(UNAVAILABLE)] * 5},
        ],
    },
}


def _otlp_value(v: Dict[str, Any]) -> Any:
    ((kind, value),) = v.items()
    if kind == "intValue":
        return int(value)
    if kind in ("stringValue", "boolValue", "doubleValue"):
        return value
    raise AssertionError(f"unexpected OTLP value {v}")


def _otlp_attrs(kvs: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {kv["key"]: _otlp_value(kv["value"]) for kv in kvs}


_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}
_KIND = {1: "INTERNAL"}


def rust_spans(path: Path) -> List[Dict[str, Any]]:
    """The spans of the one OTLP JSON line the Rust CLI wrote, as `telemetry_twin.span_record`s."""
    (line,) = path.read_text(encoding="utf-8").splitlines()
    request = json.loads(line)
    out = []
    for rs in request["resourceSpans"]:
        resource = _otlp_attrs(rs["resource"]["attributes"])
        for ss in rs["scopeSpans"]:
            scope = [ss["scope"]["name"], ss["scope"].get("version")]
            for s in ss["spans"]:
                out.append({
                    "name": s["name"],
                    "kind": _KIND[s["kind"]],
                    "trace": s["traceId"],
                    "id": s["spanId"],
                    "parent": s["parentSpanId"] or None,
                    "start": int(s["startTimeUnixNano"]),
                    "end": int(s["endTimeUnixNano"]),
                    "attributes": _otlp_attrs(s["attributes"]),
                    "events": [[e["name"], int(e["timeUnixNano"]), _otlp_attrs(e["attributes"])] for e in s["events"]],
                    "links": [[k["traceId"], k["spanId"], _otlp_attrs(k["attributes"])] for k in s["links"]],
                    "status": [_STATUS[s["status"].get("code", 0)], s["status"].get("message", "")],
                    "scope": scope,
                    "resource": resource,
                })
    return out


def canonical(spans: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The spans with their ids replaced by labels computed from their content,
    so that two runtimes' id generators do not matter: parents, traces (the
    label of the trace's root) and links then compare as structure."""

    def key(s: Dict[str, Any]) -> Tuple[Any, ...]:
        a = s["attributes"]
        return (s["start"], s["end"], s["name"], a.get("agent_recovery.step.id", ""),
                a.get("agent_recovery.call.kind", ""), a.get("agent_recovery.attempt", 0))

    keys = [key(s) for s in spans]
    assert len(set(keys)) == len(keys), "the labels are unique in these scenarios"
    label = {s["id"]: "{2}[{3}/{4}#{5}]@{0}..{1}".format(*key(s)) for s in spans}
    roots = {s["trace"]: label[s["id"]] for s in spans if s["parent"] is None}
    out = []
    for s in spans:
        c = dict(s)
        c["id"] = label[s["id"]]
        c["parent"] = label.get(s["parent"], s["parent"]) if s["parent"] else None
        c["trace"] = roots.get(s["trace"], "?")
        c["links"] = [[roots.get(t, "?"), label.get(i, "?"), a] for t, i, a in s["links"]]
        out.append(c)
    return sorted(out, key=lambda c: c["id"])


def _groups() -> Dict[str, List[Dict[str, Any]]]:
    """The scenarios both runtimes run, in groups whose runs share a store:
    the three above, and every loop vector of tests/loops/ (its runs)."""
    groups = {name: [scenario] for name, scenario in SCENARIOS.items()}
    for path in sorted((repo_root() / "tests" / "loops").glob("*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        groups["loops/" + path.stem] = [r["scenario"] for r in vector["runs"]]
    return groups


GROUPS = _groups()


@pytest.fixture(scope="module")
def both_runtimes(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, List[Tuple[Dict[str, Any], Dict[str, Any]]]]:
    """Each group through the Rust CLI (`simulate --json --trace-out`, the
    group's runs sharing a `--store` file) and through Python
    (`telemetry_twin.py`, sharing a `MemoryStore`): name -> one (rust, python)
    pair per run, each with the outcome, the events and the spans."""
    if not CLI.is_file():
        pytest.fail(f"{CLI} is missing; run `cargo build --release -p agent-recovery-cli`", pytrace=False)
    tmp = tmp_path_factory.mktemp("twin")
    rust: Dict[str, List[Dict[str, Any]]] = {}
    for g, (name, scenarios) in enumerate(GROUPS.items()):
        rust[name] = []
        for i, scenario in enumerate(scenarios):
            path, trace_out = tmp / f"{g}-{i}.json", tmp / f"{g}-{i}.otlp.jsonl"
            path.write_text(json.dumps(scenario), encoding="utf-8")
            done = subprocess.run(
                [str(CLI), "simulate", str(path), "--json", "--trace-out", str(trace_out),
                 "--store", str(tmp / f"{g}.sqlite")],
                capture_output=True, text=True,
            )
            assert done.returncode == 0, f"{name} run {i}: {done.stderr}"
            out = json.loads(done.stdout)
            rust[name].append({"outcome": out["outcome"], "events": out["events"], "spans": rust_spans(trace_out)})
    batch = tmp / "groups.json"
    batch.write_text(json.dumps(list(GROUPS.values())), encoding="utf-8")
    twin = Path(__file__).with_name("telemetry_twin.py")
    done = subprocess.run([sys.executable, str(twin), str(batch)], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    runs = sum(len(scenarios) for scenarios in GROUPS.values())
    assert len(lines) == runs + 1, done.stderr
    # A runtime built before the SDK was installed: nothing, then its next run's step span.
    assert json.loads(lines[-1]) == {"late": [0, 1]}
    python = iter(json.loads(line) for line in lines[:-1])
    return {name: [(r, next(python)) for r in rust[name]] for name in GROUPS}


@pytest.mark.parametrize("name", list(GROUPS))
def test_the_same_spans_as_the_rust_runtime(name: str, both_runtimes: Dict[str, Any]) -> None:
    for i, (rust, python) in enumerate(both_runtimes[name]):
        # The same run (the component's events, byte for byte as JSON values) ...
        assert python["outcome"] == rust["outcome"], f"run {i}"
        assert python["events"] == rust["events"], f"run {i}"
        # ... gives the same spans, span for span.
        r, p = canonical(rust["spans"]), canonical(python["spans"])
        assert [s["id"] for s in p] == [s["id"] for s in r], f"run {i}"
        for rs, ps in zip(r, p, strict=True):
            assert ps == rs, f"run {i}, span {rs['id']}: Rust (left) and Python differ"
        assert r, f"run {i} has spans"


def test_the_rust_comparison_covers_every_span_kind_and_a_failed_chain(both_runtimes: Dict[str, Any]) -> None:
    """What the twin scenarios exercise, read from the Rust file alone."""
    spans = [s for runs in both_runtimes.values() for rust, _ in runs for s in rust["spans"]]
    assert {s["name"] for s in spans} == {
        "agent_recovery.step", "agent_recovery.attempt", "agent_recovery.fanout", "agent_recovery.compensation"
    }
    chains = [s for s in spans if s["name"] == "agent_recovery.compensation"]
    assert any(c["status"] == ["ERROR", "agent_recovery.compensation_failed"] for c in chains)
    events = {e[0] for s in spans for e in s["events"]}
    assert {"agent_recovery.sleep", "agent_recovery.breaker", "agent_recovery.short_circuit",
            "agent_recovery.compensate", "agent_recovery.dead_letter", "agent_recovery.fallback"} <= events


# -- the doc's tables -----------------------------------------------------------------


def _doc_tables() -> Tuple[Dict[str, str], Dict[str, Tuple[str, str, set]], set]:
    """docs/telemetry.md: attribute -> type; metric -> (kind, unit, its
    attributes); span event names."""
    text = (repo_root() / "docs" / "telemetry.md").read_text(encoding="utf-8")
    attrs: Dict[str, str] = {}
    section = text[text.index("\n## Attributes\n"):text.index("\n## Span events\n")]
    for row in re.finditer(r"^\| `([^`]+)`(?:, `([^`]+)`, `([^`]+)`)?[^|]*\| (\w+) \|", section, re.M):
        first, typ = row.group(1), row.group(4)
        attrs[first] = typ
        for more in (row.group(2), row.group(3)):
            if more:
                attrs[first.rsplit(".", 1)[0] + more] = typ
    metrics: Dict[str, Tuple[str, str, set]] = {}
    section = text[text.index("\n## Metrics\n"):text.index("\n## The dead-letter record")]
    for row in re.finditer(r"^\| `([^`]+)` \| (\w+) \(u64\) \| `([^`]+)` \| ([^|]*) \|", section, re.M):
        keys = set(re.findall(r"`([a-z_.]+\.[a-z_.]+)`", row.group(4)))
        metrics[row.group(1)] = (row.group(2), row.group(3), keys)
    section = text[text.index("\n## Span events\n"):text.index("\n## Metrics\n")]
    events = set()
    for first_cell in re.findall(r"^\| (`agent_recovery\.[^|]*)\|", section, re.M):
        events |= set(re.findall(r"`(agent_recovery\.\w+)`", first_cell))
        events |= {"agent_recovery." + e for e in re.findall(r"`\.(\w+)`", first_cell)}
    return attrs, metrics, events


def check_against_the_doc(spans: List[ReadableSpan], metrics: Dict[str, Any]) -> None:
    attrs, documented_metrics, events = _doc_tables()
    # 9 runtime metrics and a handle's agent_recovery.policy.swaps (test_telemetry_swaps.py).
    assert len(attrs) >= 24 and len(documented_metrics) == 10, "the doc's tables were read"
    types = {"string": str, "int": int, "bool": bool}
    seen = [(k, v) for s in spans for k, v in s.attributes.items()]
    seen += [(k, v) for s in spans for e in s.events for k, v in e.attributes.items()]
    seen += [(k, v) for s in spans for link in s.links for k, v in link.attributes.items()]
    for k, v in seen:
        assert k in attrs, f"attribute {k} is not in docs/telemetry.md"
        assert type(v) is types[attrs[k]], f"{k} is {type(v).__name__}, the doc says {attrs[k]}"
    for s in spans:
        for e in s.events:
            assert e.name in events, f"span event {e.name} is not in docs/telemetry.md"
    for name, m in metrics.items():
        kind, unit, keys = documented_metrics[name]
        assert m.unit == unit, name
        points = list(m.data.data_points)
        assert points, name
        if kind in ("counter", "gauge"):
            assert all(isinstance(dp.value, int) for dp in points), name
        else:
            assert kind == "histogram" and all(isinstance(dp.sum, int) for dp in points), name
        for dp in points:
            assert set(dp.attributes) <= keys, f"{name}: {sorted(dp.attributes)}, the doc says {sorted(keys)}"


# -- the README quickstart ------------------------------------------------------------


def test_the_readme_quickstart_runs_as_written() -> None:
    """In a fresh interpreter: the console exporters bind `sys.stdout` when
    their module is imported, which pytest's capture would hide."""
    text = (repo_root() / "python" / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Telemetry\n"):text.index("\n## Retries\n")]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the Telemetry section has a python block"
    done = subprocess.run([sys.executable, "-c", block.group(1)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    printed = done.stdout
    # What the console exporters printed: one JSON document per span, then the metrics.
    docs, decoder, i = [], json.JSONDecoder(), 0
    while (i := printed.find("{", i)) >= 0:
        doc, i = decoder.raw_decode(printed, i)
        docs.append(doc)
    spans = [d for d in docs if "context" in d]
    (step,) = [s for s in spans if s["name"] == "agent_recovery.step"]
    attempts = sorted((s for s in spans if s["name"] == "agent_recovery.attempt"),
                      key=lambda s: s["attributes"]["agent_recovery.attempt"])
    assert [s["parent_id"] for s in attempts] == [step["context"]["span_id"]] * 2
    first = attempts[0]["attributes"]
    assert (first["error.type"], first["agent_recovery.action"], first["agent_recovery.delay_ms"]) == (
        "tool.http.503_unavailable", "retry", 53)
    assert step["attributes"]["agent_recovery.step.outcome"] == "ok"
    (metrics,) = [d for d in docs if "resource_metrics" in d]
    names = {m["name"] for rm in metrics["resource_metrics"] for sm in rm["scope_metrics"] for m in sm["metrics"]}
    assert {"agent_recovery.attempts", "agent_recovery.decisions", "agent_recovery.steps"} <= names
