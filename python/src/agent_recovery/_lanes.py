"""The mapping of docs/telemetry.md ("The mapping: events to spans and
metrics"): what one run's lanes (its steps, a fan-out's branches) do with the
driver's effects and the component's events. Used by `telemetry.py` only; the
Rust twin is `LaneTel` in `host/src/runtime/telemetry.rs`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Optional, Tuple

# The dead-letter stream, whose appends become `agent_recovery.dead_letter` span events.
from ._keys import DEAD_LETTER_STREAM as _DEAD_LETTER_STREAM

_I64_MAX = 2**63 - 1


def _ns(ms: int) -> int:
    return ms * 1_000_000


def _int(n: int) -> int:
    return n if n <= _I64_MAX else _I64_MAX


def key_hash(key: str) -> str:
    """`agent_recovery.idempotency_key.hash`: lowercase hex sha256 of the key's
    UTF-8 text (the key itself is never an attribute)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _is_error(outcome: str) -> bool:
    return outcome in ("failed", "escalated", "dead_lettered")


class _RunTel:
    """One run: the span context of each step that ended `ok`, so that a
    compensation chain links to the steps it undoes."""

    __slots__ = ("inst", "policy", "run_id", "done")

    def __init__(self, inst: Any, policy: Any, run_id: str) -> None:
        self.inst = inst
        self.policy = policy
        self.run_id = run_id
        #: Written by fan-out branches on threads: a dict's get and set are atomic.
        self.done: Dict[str, Any] = {}

    def lane(self, step: Any, clock: Any) -> Any:
        """The lane of a step (a `Step`), a fan-out (a `_Fanout`) or a
        cancellation between steps (None: no span of its own)."""
        parent = self.inst.get_current()
        now = clock.now_ms()
        if step is None:
            return _Lane(self, parent, None, None, now)
        if getattr(step, "branches", None) is None:
            return _Lane(self, parent, "agent_recovery.step", _step_attrs(step.id, step.tool, step.target), now)
        attrs: Dict[str, Any] = {"agent_recovery.step.id": str(step.id)}
        n = step.min_results
        if type(n) is int and n >= 0:  # else the loop refuses the fan-out: telemetry must not raise first
            attrs["agent_recovery.fanout.min_results"] = _int(n)
        attrs["agent_recovery.fanout.branches"] = len(step.branches)
        return _Lane(self, parent, "agent_recovery.fanout", attrs, now)


def _step_attrs(id: Any, tool: Any, target: Any) -> Dict[str, Any]:
    return {
        "agent_recovery.step.id": str(id),
        "agent_recovery.tool": str(tool),
        "agent_recovery.target": str(target if target is not None else tool),
    }


#: Event members that are text, and the attribute each becomes on a span event.
_TEXT = (
    ("step", "agent_recovery.step.id"),
    ("target", "agent_recovery.target"),
    ("call", "agent_recovery.call.kind"),
    ("key", "agent_recovery.idempotency_key.hash"),
    ("action", "agent_recovery.action"),
    ("code", "error.type"),
    ("state", "agent_recovery.state"),
)
#: Event members that are u64.
_COUNTS = (("attempt", "agent_recovery.attempt"), ("delay_ms", "agent_recovery.delay_ms"))
#: Events that are spans, not span events.
_SPANS = frozenset(("attempt", "outcome", "fanout"))


def _event(d: Any) -> Optional[str]:
    """The event's name, or None when the telemetry cannot read it: not an
    object, or a member of the wrong type (as the Rust twin, which then drops
    the event). The reference component never emits such an event."""
    if type(d) is not dict:
        return None
    name = d.get("event")
    if type(name) is not str or name in _SPANS:
        return None
    for k, _ in _TEXT:
        v = d.get(k)
        if v is not None and type(v) is not str:
            return None
    for k, _ in _COUNTS:
        v = d.get(k)
        if v is not None and (type(v) is not int or not 0 <= v < 2**64):
            return None
    return name


def _event_attributes(d: Dict[str, Any]) -> Dict[str, Any]:
    """The event's members as span-event attributes (the key only as its hash)."""
    a: Dict[str, Any] = {}
    for k, attr in _TEXT:
        v = d.get(k)
        if v is not None:
            a[attr] = key_hash(v) if k == "key" else v
    for k, attr in _COUNTS:
        v = d.get(k)
        if v is not None:
            a[attr] = _int(v)
    return a


class _Chain:
    __slots__ = ("span", "cx", "started", "failed")

    def __init__(self, span: Any, cx: Any) -> None:
        self.span = span
        self.cx = cx
        self.started = 0
        self.failed = 0


class _Pending:
    """A call whose span waits for the `ok` or `decision` event that says how it went."""

    __slots__ = ("span", "end_ms", "kind")

    def __init__(self, span: Any, end_ms: int, kind: str) -> None:
        self.span = span  # None when the lane is not recording
        self.end_ms = end_ms
        self.kind = kind


class _Lane:
    """One lane's spans: the step (or fan-out) span, an open compensation
    chain, the attempt whose span waits for its `ok` or `decision` event, and
    the last decision's class and retryable (docs/telemetry.md, "The mapping")."""

    __slots__ = ("run", "inst", "cx", "span", "recording", "step_id", "chain", "attempt", "verdict", "branches")

    def __init__(self, run: _RunTel, parent: Any, name: Optional[str], attrs: Optional[Dict[str, Any]], now: int) -> None:
        self.run = run
        self.inst = run.inst
        #: The lane's own span (None for a cancellation between steps).
        self.span: Any = None
        #: The context the lane's children start in.
        self.cx = parent
        self.recording = True
        self.step_id: Optional[str] = None
        self.chain: Optional[_Chain] = None
        self.attempt: Optional[_Pending] = None
        self.verdict: Optional[Tuple[str, Optional[bool]]] = None
        #: A fan-out's branch lanes (abandoned with it).
        self.branches: Optional[List["_Lane"]] = None
        if name is None or attrs is None:
            return
        full: Dict[str, Any] = {"agent_recovery.run.id": run.run_id}
        full.update(attrs)
        full.update(run.policy() if callable(run.policy) else run.policy)
        if name == "agent_recovery.step":
            self.step_id = attrs.get("agent_recovery.step.id")
        self.span = self.inst.span(name, parent, full, now)
        self.cx = self.inst.trace.set_span_in_context(self.span, parent)
        self.recording = self.span.is_recording()

    def branch(self, spec: Any, clock: Any) -> "_Lane":
        """A branch of this fan-out: its step span is a child of the fan-out span."""
        now = clock.now_ms()
        if isinstance(spec, dict) and isinstance(spec.get("id"), str) and isinstance(spec.get("tool"), str):
            target = spec.get("target")
            attrs = _step_attrs(spec["id"], spec["tool"], target if isinstance(target, str) else None)
        else:
            attrs = {}
        lane = _Lane(self.run, self.cx, "agent_recovery.step", attrs, now)
        if self.branches is None:
            self.branches = []
        self.branches.append(lane)  # branches on threads: list.append is atomic
        return lane

    def call_start(self, call: Any, clock: Any) -> None:
        """A `call` effect starts now."""
        now = clock.now_ms()
        self._end_attempt(None)
        if not self.recording:
            self.attempt = _Pending(None, now, call.kind)
            return
        parent = self.chain.cx if (self.chain is not None and call.kind == "compensation") else self.cx
        attempt = call.attempt
        attrs: Dict[str, Any] = {
            "agent_recovery.step.id": call.step,
            "agent_recovery.target": call.target,
            "agent_recovery.call.kind": call.kind,
            "agent_recovery.attempt": _int(attempt),
            "agent_recovery.idempotency_key.hash": key_hash(call.key),
        }
        if attempt > 1:
            attrs["http.request.resend_count"] = _int(attempt - 1)
        t = call.timeout_ms
        if isinstance(t, int) and not isinstance(t, bool) and t >= 0:
            attrs["agent_recovery.timeout_ms"] = _int(t)
        span = self.inst.span("agent_recovery.attempt", parent, attrs, now)
        self.attempt = _Pending(span, now, call.kind)

    def call_end(self, clock: Any) -> None:
        """The call returned now; its span ends at this time once its `ok` or
        `decision` event says how it went."""
        if self.attempt is not None:
            self.attempt.end_ms = clock.now_ms()

    def decided(self, decision: str) -> None:
        """The active policy answered a `decide` effect with `decision` (JSON text)."""
        if not self.recording:
            return
        self.verdict = None
        try:
            d = json.loads(decision)
        except (TypeError, ValueError, RecursionError):
            return
        env = d.get("envelope") if isinstance(d, dict) else None
        if not isinstance(env, dict):
            return
        cls, retryable, code = env.get("class"), env.get("retryable"), env.get("code")
        if not (cls is None or isinstance(cls, str)) or not (retryable is None or isinstance(retryable, bool)):
            return
        if not (code is None or isinstance(code, str)):
            return
        self.verdict = (cls or "", retryable)

    def _end_attempt(self, failure: Optional[Dict[str, Any]]) -> None:
        """Ends the pending attempt span; `failure` is the decision event when it failed."""
        p = self.attempt
        if p is None:
            return
        self.attempt = None
        metric: Dict[str, Any] = {"agent_recovery.call.kind": p.kind}
        if failure is not None:
            metric["error.type"] = failure.get("code") or ""
            if failure.get("action") is not None:
                metric["agent_recovery.action"] = failure["action"]
        if p.span is None:
            self.inst.attempts.add(1, metric)
            return
        span = p.span
        if failure is not None:
            code = failure.get("code") or ""
            attrs: Dict[str, Any] = {"error.type": code}
            if failure.get("action") is not None:
                attrs["agent_recovery.action"] = failure["action"]
            if failure.get("delay_ms") is not None:
                attrs["agent_recovery.delay_ms"] = _int(failure["delay_ms"])
            decided, self.verdict = self.verdict, None
            if decided is not None:
                cls, retryable = decided
                if cls:
                    attrs["agent_recovery.class"] = cls
                if retryable is not None:
                    attrs["agent_recovery.retryable"] = retryable
                policy = self.run.policy
                attrs.update(policy() if callable(policy) else policy)
            span.set_attributes(attrs)
            span.set_status(self.inst.status(self.inst.error, code))
        span.end(end_time=_ns(p.end_ms))
        self.inst.attempts.add(1, metric)

    def appended(self, stream: Any, record: str, clock: Any) -> None:
        """An `append` effect: a dead-letter record becomes a span event (and a
        log record when a logger provider was given)."""
        if stream != _DEAD_LETTER_STREAM:
            return
        try:
            r = json.loads(record)
        except (TypeError, ValueError, RecursionError):
            r = None
        env = r.get("last_envelope") if isinstance(r, dict) else None
        code = env.get("code") if isinstance(env, dict) else None
        # On the step's own span (the chain's when there is none: a cancellation).
        if self.span is not None:
            span, cx = self.span, self.cx
        elif self.chain is not None:
            span, cx = self.chain.span, self.chain.cx
        else:
            span, cx = None, self.cx
        now = _ns(clock.now_ms())
        inst = self.inst
        if inst.logger is not None:
            attributes: Dict[str, Any] = {"agent_recovery.run.id": self.run.run_id}
            if self.step_id is not None:
                attributes["agent_recovery.step.id"] = self.step_id
            if isinstance(code, str):
                attributes["error.type"] = code
            inst.logger.emit(
                inst.log_record(
                    timestamp=now,
                    context=cx,
                    severity_text="WARN",
                    severity_number=inst.warn,
                    body=record,
                    attributes=attributes,
                    event_name="agent_recovery.dead_letter",
                )
            )
        if span is None or not span.is_recording():
            return
        attrs: Dict[str, Any] = {"agent_recovery.dead_letter.record": record}
        if isinstance(code, str):
            attrs["error.type"] = code
        span.add_event("agent_recovery.dead_letter", attrs, timestamp=now)

    def event(self, ev: Any, clock: Any) -> None:
        """An event of the component (parsed)."""
        name = _event(ev)
        if name is None:
            return
        inst = self.inst
        if name == "ok":
            self._end_attempt(None)
            return
        if name == "decision":
            m = {"error.type": ev.get("code") or ""}
            if ev.get("action") is not None:
                m["agent_recovery.action"] = ev["action"]
            inst.decisions.add(1, m)
            if self.attempt is not None:
                self._end_attempt(ev)
                return
        elif name == "sleep":
            inst.retry_delay.record(ev.get("delay_ms") or 0, {"agent_recovery.target": ev.get("target") or ""})
        elif name == "breaker":
            inst.breaker.add(
                1,
                {"agent_recovery.target": ev.get("target") or "", "agent_recovery.breaker.state": ev.get("state") or ""},
            )
        elif name == "short_circuit":
            inst.short_circuits.add(1, {"agent_recovery.target": ev.get("target") or ""})
        elif name == "dead_letter":
            inst.dead_letters.add(1, {"error.type": ev.get("code") or ""})
            return
        elif name == "compensate":
            self._compensate(ev, clock.now_ms())
            return
        span = self._current() if self.recording else None
        if span is not None:
            span.add_event("agent_recovery." + name, _event_attributes(ev), timestamp=_ns(clock.now_ms()))

    def _current(self) -> Any:
        """Where span events go: the open compensation chain, else the lane's span."""
        span = self.chain.span if self.chain is not None else self.span
        return span if span is not None and span.is_recording() else None

    def _compensate(self, ev: Dict[str, Any], now: int) -> None:
        failed = ev.get("state") == "failed"
        self.inst.compensations.add(1, {"agent_recovery.compensation.state": "failed" if failed else "started"})
        if not self.recording:
            return
        chain = self.chain
        if chain is None:
            span = self.inst.span("agent_recovery.compensation", self.cx, {"agent_recovery.run.id": self.run.run_id}, now)
            chain = self.chain = _Chain(span, self.inst.trace.set_span_in_context(span, self.cx))
        span = chain.span
        if failed:
            chain.failed += 1
        else:
            chain.started += 1
            undone = ev.get("step") or ""
            linked = self.run.done.get(undone)
            if linked is not None:
                span.add_link(linked, {"agent_recovery.step.id": undone})
        if span.is_recording():
            span.add_event("agent_recovery.compensate", _event_attributes(ev), timestamp=_ns(now))

    def finish(self, fx: Dict[str, Any], clock: Any) -> None:
        """The lane's `finish` effect: ends the open spans."""
        now = clock.now_ms()
        outcome = fx.get("outcome")
        outcome = outcome if isinstance(outcome, str) else ""
        self._end_attempt(None)
        chain, self.chain = self.chain, None
        if chain is not None:
            chain.span.set_attributes(
                {
                    "agent_recovery.compensation.count": chain.started,
                    "agent_recovery.compensation.failed": chain.failed,
                }
            )
            if chain.failed > 0:
                chain.span.set_status(self.inst.status(self.inst.error, "agent_recovery.compensation_failed"))
            chain.span.end(end_time=_ns(now))
        span = self.span
        if span is None:
            return  # a cancellation between steps: no step of its own to count or end
        self.span = None
        self.inst.steps.add(1, {"agent_recovery.step.outcome": outcome})
        if not self.recording:
            return  # the no-op providers, or sampled out: nothing to annotate or end
        env = fx.get("envelope")
        code = env.get("code") if isinstance(env, dict) else None
        code = code if isinstance(code, str) else None
        span.set_attribute("agent_recovery.step.outcome", outcome)
        if code is not None and outcome != "ok":
            span.set_attribute("error.type", code)
        if _is_error(outcome):
            span.set_status(self.inst.status(self.inst.error, code if code is not None else outcome))
        if outcome == "ok" and self.step_id is not None:
            self.run.done[self.step_id] = span.get_span_context()
        span.end(end_time=_ns(now))

    def abandon(self, clock: Any) -> None:
        """The step raised (the loop, the policy or the store failed): end the
        open spans now, without an outcome (a fan-out's branches first)."""
        for branch in self.branches or ():
            branch.abandon(clock)
        now = _ns(clock.now_ms())
        p, self.attempt = self.attempt, None
        if p is not None and p.span is not None:
            p.span.end(end_time=_ns(p.end_ms))
        chain, self.chain = self.chain, None
        if chain is not None:
            chain.span.end(end_time=now)
        span, self.span = self.span, None
        if span is not None:
            span.end(end_time=now)
