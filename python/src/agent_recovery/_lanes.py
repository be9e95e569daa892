"""One run's lanes (its steps, a fan-out's branches) as OpenTelemetry calls.

The mapping itself (docs/telemetry.md, "The mapping") is the component's
`agent:recovery/telemetry@0.3.0` `map-lane-json`: a lane keeps what the
driver observed, has the component map it to instructions when it ends or
forks, and carries them out with the OpenTelemetry API, keeping its live
spans by key. The rules of that interpreter are in
`wit/agent-recovery@0.3.0/telemetry.wit`. Used by `telemetry.py` only.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

_SLOTS = {"lane": 0, "chain": 1, "attempt": 2}


def _ns(ms: int) -> int:
    return ms * 1_000_000


def _attributes(items: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The mapping's typed attributes as an attributes dict."""
    out: Dict[str, Any] = {}
    for a in items:
        ((_, v),) = a["value"].items()
        out[a["key"]] = v
    return out


def _identity(policy: Any) -> Any:
    """The `agent_recovery.policy.*` attributes as the mapping's policy identity."""
    attrs = policy() if callable(policy) else policy
    if not attrs:
        return None
    return {
        "name": attrs["agent_recovery.policy.name"],
        "version": attrs["agent_recovery.policy.version"],
        "sha256": attrs["agent_recovery.policy.sha256"],
    }


class _RunTel:
    """One run: the span context of each step that ended `ok`, so that a
    compensation chain links to the steps it undoes."""

    __slots__ = ("inst", "policy", "run_id", "done", "looper")

    def __init__(self, inst: Any, policy: Any, run_id: str, looper: Any) -> None:
        self.inst = inst
        self.policy = policy
        self.run_id = run_id
        self.looper = looper
        #: Written by fan-out branches on threads: a dict's get and set are atomic.
        self.done: Dict[str, Any] = {}

    def lane(self, step: Any, clock: Any) -> Any:
        """The lane of a step (a `Step`), a fan-out (a `_Fanout`) or a
        cancellation between steps (None: no span of its own)."""
        parent = self.inst.get_current()
        now = clock.now_ms()
        if step is None:
            return _Lane(self, parent, "bare", now)
        if getattr(step, "branches", None) is None:
            return _Lane(self, parent, _step_kind(step.id, step.tool, step.target), now)
        n = step.min_results
        # An invalid one makes the loop refuse the fan-out: telemetry must not raise first.
        n = n if type(n) is int and 0 <= n < 2**32 else 0
        kind = {"fanout": {"id": str(step.id), "min_results": n, "branches": len(step.branches)}}
        return _Lane(self, parent, kind, now)


def _step_kind(id: Any, tool: Any, target: Any) -> Dict[str, Any]:
    return {"step": {"id": str(id), "tool": str(tool), "target": None if target is None else str(target)}}


class _Lane:
    """One lane: the observations not yet mapped, the mapping's state, and
    the live spans the instructions name."""

    __slots__ = ("run", "inst", "ambient", "state", "pending", "live", "last_ms", "branches")

    def __init__(self, run: _RunTel, ambient: Any, kind: Any, now: int) -> None:
        self.run = run
        self.inst = run.inst
        #: The context the lane started in (a branch: its fan-out's span).
        self.ambient = ambient
        self.state = ""
        self.pending: List[Dict[str, Any]] = []
        #: Live spans by slot (lane, chain, attempt): (span, context).
        self.live: List[Any] = [None, None, None]
        self.last_ms = now
        #: A fan-out's branch lanes (abandoned with it).
        self.branches: Optional[List["_Lane"]] = None
        start = {"run_id": run.run_id, "kind": kind, "policy": _identity(run.policy)}
        self._observe(now, {"lane": start})

    def _observe(self, now: int, kind: Any) -> None:
        self.last_ms = now
        self.pending.append({"now_ms": now, "kind": kind})

    def fork(self) -> None:
        """The fan-out forks now: map what the lane observed so far, so that
        its span exists before any branch starts (branches may start on
        threads, each reading the fan-out's span)."""
        self.flush()

    def branch(self, spec: Any, clock: Any) -> "_Lane":
        """A branch of this fan-out (after `fork`): its step span is a child
        of the fan-out span."""
        if isinstance(spec, dict) and isinstance(spec.get("id"), str) and isinstance(spec.get("tool"), str):
            target = spec.get("target")
            kind = _step_kind(spec["id"], spec["tool"], target if isinstance(target, str) else None)
        else:
            kind = _step_kind("", "", None)
        lane_span = self.live[0]
        ambient = lane_span[1] if lane_span is not None else self.ambient
        lane = _Lane(self.run, ambient, kind, clock.now_ms())
        if self.branches is None:
            self.branches = []
        self.branches.append(lane)  # branches on threads: list.append is atomic
        return lane

    def call_start(self, call: Any, clock: Any) -> None:
        """A `call` effect starts now."""
        c: Dict[str, Any] = {
            "role": call.kind,
            "step": call.step,
            "target": call.target,
            "key": call.key,
            "attempt": call.attempt,
        }
        t = call.timeout_ms
        if isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 2**64:
            c["timeout_ms"] = t
        self._observe(clock.now_ms(), {"call_start": c})

    def call_end(self, clock: Any) -> None:
        """The call returned now."""
        self._observe(clock.now_ms(), "call_end")

    def decided(self, decision: str) -> None:
        """The active policy answered a `decide` effect with `decision` (JSON text)."""
        self._observe(self.last_ms, {"decided": {"decision": decision, "policy": _identity(self.run.policy)}})

    def appended(self, stream: Any, record: str, clock: Any) -> None:
        """An `append` effect."""
        if isinstance(stream, str) and isinstance(record, str):
            self._observe(clock.now_ms(), {"append": {"stream": stream, "record": record}})

    def event(self, text: str, clock: Any) -> None:
        """An event of the component, its JSON text."""
        self._observe(clock.now_ms(), {"event": text})

    def finish(self, fx: Dict[str, Any], clock: Any) -> None:
        """The lane's `finish` effect: ends the open spans."""
        outcome = fx.get("outcome")
        env = fx.get("envelope")
        finish = {
            "outcome": outcome if isinstance(outcome, str) else "",
            "envelope": None if env is None else json.dumps(env),
        }
        self._observe(clock.now_ms(), {"finish": finish})
        self.flush()

    def abandon(self, clock: Any) -> None:
        """The step raised (the loop, the policy or the store failed): end the
        open spans now, without an outcome (a fan-out's branches first)."""
        for branch in self.branches or ():
            branch.abandon(clock)
        self._observe(clock.now_ms(), "abandon")
        self.flush()

    def flush(self) -> None:
        """Map the observations kept so far and carry out the instructions;
        telemetry never fails what it observes."""
        if not self.pending:
            return
        obs = json.dumps(self.pending, separators=(",", ":"))
        self.pending = []
        try:
            self.state, text = self.run.looper.map_lane_json(self.state, obs)
        except Exception:  # noqa: BLE001 - a refusal maps nothing
            return
        for i in json.loads(text):
            self._apply(i)

    def _recording(self, key: str) -> Any:
        live = self.live[_SLOTS[key]]
        return live if live is not None and live[0].is_recording() else None

    def _apply(self, i: Dict[str, Any]) -> None:
        """Carry out one instruction."""
        ((op, x),) = i.items()
        inst = self.inst
        key = x.get("key")
        live = self.live[_SLOTS[key]] if isinstance(key, str) else None
        if op == "start_span":
            parent = self.ambient
            if x["parent"] is not None:
                p = self._recording(x["parent"])
                if p is None:
                    return
                parent = p[1]
            span = inst.span(x["name"], parent, _attributes(x["attributes"]), x["start_ms"])
            self.live[_SLOTS[key]] = (span, inst.trace.set_span_in_context(span, parent))
        elif op == "add_event":
            r = self._recording(key)
            if r is not None:
                r[0].add_event(x["name"], _attributes(x["attributes"]), timestamp=_ns(x["time_ms"]))
        elif op == "add_link":
            linked = self.run.done.get(x["step"])
            if live is not None and linked is not None:
                live[0].add_link(linked, _attributes(x["attributes"]))
        elif op == "set_attributes":
            if live is not None:
                live[0].set_attributes(_attributes(x["attributes"]))
        elif op == "set_error":
            if live is not None:
                live[0].set_status(inst.status(inst.error, x["description"]))
        elif op == "end_span":
            if live is not None:
                self.live[_SLOTS[key]] = None
                live[0].end(end_time=_ns(x["end_ms"]))
        elif op == "remember_step":
            if live is not None:
                self.run.done[x["step"]] = live[0].get_span_context()
        elif op == "record_metric":
            record = _METRICS.get(x["instrument"])
            if record is not None:
                record(inst, x["value"], _attributes(x["attributes"]))
        elif op == "emit_log":
            if inst.logger is None:
                return
            cx = self.ambient if key is None else (live[1] if live is not None else self.ambient)
            inst.logger.emit(
                inst.log_record(
                    timestamp=_ns(x["time_ms"]),
                    context=cx,
                    severity_text=x["severity_text"],
                    severity_number=inst.severity(x["severity_number"]),
                    body=x["body"],
                    attributes=_attributes(x["attributes"]),
                    event_name=x["event_name"],
                )
            )


#: Each instrument of the mapping's `record_metric`, by name.
_METRICS: Dict[str, Any] = {
    "agent_recovery.attempts": lambda i, v, a: i.attempts.add(v, a),
    "agent_recovery.decisions": lambda i, v, a: i.decisions.add(v, a),
    "agent_recovery.retry.delay": lambda i, v, a: i.retry_delay.record(v, a),
    "agent_recovery.breaker.transitions": lambda i, v, a: i.breaker.add(v, a),
    "agent_recovery.short_circuits": lambda i, v, a: i.short_circuits.add(v, a),
    "agent_recovery.dead_letters": lambda i, v, a: i.dead_letters.add(v, a),
    "agent_recovery.compensations": lambda i, v, a: i.compensations.add(v, a),
    "agent_recovery.steps": lambda i, v, a: i.steps.add(v, a),
    "agent_recovery.dead_letter.depth": lambda i, v, a: i.dead_letter_depth.set(v, a),
}
