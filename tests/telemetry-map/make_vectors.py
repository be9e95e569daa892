"""Writes lanes.json: telemetry observations and the instructions each must
map to. The expected instructions are written out by hand below, case by
case, from docs/telemetry.md ("The mapping"); the key hashes are computed
here with hashlib (not by the component). Run: python3 tests/telemetry-map/make_vectors.py
"""

import hashlib
import json
import os

RUN = "run-1"
POL = {"name": "reference", "version": "0.1.0", "sha256": "ab" * 32}


def t(k, v):
    return {"key": k, "value": {"text": v}}


def i(k, v):
    return {"key": k, "value": {"int": v}}


def b(k, v):
    return {"key": k, "value": {"flag": v}}


def h(key):
    return t("agent_recovery.idempotency_key.hash", hashlib.sha256(key.encode()).hexdigest())


def pol():
    return [t("agent_recovery.policy.name", POL["name"]), t("agent_recovery.policy.version", POL["version"]),
            t("agent_recovery.policy.sha256", POL["sha256"])]


def ev(now, **e):
    return {"now_ms": now, "kind": {"event": json.dumps(e, separators=(",", ":"))}}


def lane_step(now, id, tool, target=None, policy=POL):
    k = {"step": {"id": id, "tool": tool}}
    if target is not None:
        k["step"]["target"] = target
    return {"now_ms": now, "kind": {"lane": {"run_id": RUN, "kind": k, "policy": policy}}}


def call(now, role, step, target, key, attempt, timeout=None):
    c = {"role": role, "step": step, "target": target, "key": key, "attempt": attempt}
    if timeout is not None:
        c["timeout_ms"] = timeout
    return {"now_ms": now, "kind": {"call_start": c}}


def end(now):
    return {"now_ms": now, "kind": "call_end"}


def finish(now, outcome, envelope=None):
    f = {"outcome": outcome}
    if envelope is not None:
        f["envelope"] = json.dumps(envelope, separators=(",", ":"))
    return {"now_ms": now, "kind": {"finish": f}}


def start(key, parent, name, ms, attrs):
    return {"start_span": {"key": key, "parent": parent, "name": name, "start_ms": ms, "attributes": attrs}}


def event_i(key, name, ms, attrs):
    return {"add_event": {"key": key, "name": name, "time_ms": ms, "attributes": attrs}}


def setattrs(key, attrs):
    return {"set_attributes": {"key": key, "attributes": attrs}}


def err(key, d):
    return {"set_error": {"key": key, "description": d}}


def endi(key, ms):
    return {"end_span": {"key": key, "end_ms": ms}}


def metric(name, value, attrs):
    return {"record_metric": {"instrument": name, "value": value, "attributes": attrs}}


def step_attrs(id, tool, target):
    return [t("agent_recovery.run.id", RUN), t("agent_recovery.step.id", id), t("agent_recovery.tool", tool),
            t("agent_recovery.target", target)] + pol()


def attempt_attrs(step, target, kind, n, key, timeout=None):
    a = [t("agent_recovery.step.id", step), t("agent_recovery.target", target), t("agent_recovery.call.kind", kind),
         i("agent_recovery.attempt", n), h(key)]
    if n > 1:
        a.append(i("http.request.resend_count", n - 1))
    if timeout is not None:
        a.append(i("agent_recovery.timeout_ms", timeout))
    return a


CASES = []

# 1. One call that succeeds.
CASES.append({
    "name": "step-ok",
    "observations": [
        lane_step(100, "s1", "search"),
        call(100, "operation", "s1", "search", "k1", 1, timeout=5000),
        end(130),
        ev(130, event="attempt", step="s1", attempt=1),
        ev(130, event="ok", step="s1"),
        finish(130, "ok"),
    ],
    "instructions": [
        start("lane", None, "agent_recovery.step", 100, step_attrs("s1", "search", "search")),
        start("attempt", "lane", "agent_recovery.attempt", 100, attempt_attrs("s1", "search", "operation", 1, "k1", 5000)),
        endi("attempt", 130),
        metric("agent_recovery.attempts", 1, [t("agent_recovery.call.kind", "operation")]),
        metric("agent_recovery.steps", 1, [t("agent_recovery.step.outcome", "ok")]),
        setattrs("lane", [t("agent_recovery.step.outcome", "ok")]),
        {"remember_step": {"key": "lane", "step": "s1"}},
        endi("lane", 130),
    ],
})

# 2. A failure the policy retries, then success.
DECISION = {"action": "retry", "delay_ms": 200, "envelope": {"code": "tool.http.503_unavailable", "class": "transient", "retryable": True}}
CASES.append({
    "name": "retry-then-ok",
    "observations": [
        lane_step(0, "s1", "fetch", target="api.example"),
        call(0, "operation", "s1", "api.example", "k1", 1),
        end(10),
        {"now_ms": 10, "kind": {"decided": {"decision": json.dumps(DECISION), "policy": POL}}},
        ev(10, event="decision", step="s1", code="tool.http.503_unavailable", action="retry", delay_ms=200),
        ev(10, event="sleep", step="s1", target="api.example", delay_ms=200),
        call(210, "operation", "s1", "api.example", "k1", 2),
        end(220),
        ev(220, event="ok", step="s1"),
        finish(220, "ok"),
    ],
    "instructions": [
        start("lane", None, "agent_recovery.step", 0, step_attrs("s1", "fetch", "api.example")),
        start("attempt", "lane", "agent_recovery.attempt", 0, attempt_attrs("s1", "api.example", "operation", 1, "k1")),
        metric("agent_recovery.decisions", 1, [t("error.type", "tool.http.503_unavailable"), t("agent_recovery.action", "retry")]),
        setattrs("attempt", [t("error.type", "tool.http.503_unavailable"), t("agent_recovery.action", "retry"),
                             i("agent_recovery.delay_ms", 200), t("agent_recovery.class", "transient"),
                             b("agent_recovery.retryable", True)] + pol()),
        err("attempt", "tool.http.503_unavailable"),
        endi("attempt", 10),
        metric("agent_recovery.attempts", 1, [t("agent_recovery.call.kind", "operation"), t("error.type", "tool.http.503_unavailable"),
                                              t("agent_recovery.action", "retry")]),
        metric("agent_recovery.retry.delay", 200, [t("agent_recovery.target", "api.example")]),
        event_i("lane", "agent_recovery.sleep", 10, [t("agent_recovery.step.id", "s1"), t("agent_recovery.target", "api.example"),
                                                    i("agent_recovery.delay_ms", 200)]),
        start("attempt", "lane", "agent_recovery.attempt", 210, attempt_attrs("s1", "api.example", "operation", 2, "k1")),
        endi("attempt", 220),
        metric("agent_recovery.attempts", 1, [t("agent_recovery.call.kind", "operation")]),
        metric("agent_recovery.steps", 1, [t("agent_recovery.step.outcome", "ok")]),
        setattrs("lane", [t("agent_recovery.step.outcome", "ok")]),
        {"remember_step": {"key": "lane", "step": "s1"}},
        endi("lane", 220),
    ],
})

# 3. Breaker opens, a short circuit, the loop's own decision (no call
#    pending), the dead-letter append and event; no policy known.
RECORD = json.dumps({"id": "1", "step": "s2", "key": "k2", "last_envelope": {"code": "tool.http.503_unavailable", "class": "transient"}})
CASES.append({
    "name": "breaker-dead-letter",
    "observations": [
        lane_step(0, "s2", "fetch", policy=None),
        call(0, "operation", "s2", "fetch", "k2", 3),
        end(5),
        {"now_ms": 5, "kind": {"decided": {"decision": "not json", "policy": None}}},
        ev(5, event="decision", step="s2", code="tool.http.503_unavailable", action="dead_letter"),
        ev(5, event="breaker", target="fetch", state="open"),
        ev(5, event="short_circuit", step="s2", target="fetch", key="k2"),
        ev(5, event="decision", step="s2", code="runtime.breaker_open", action="dead_letter"),
        {"now_ms": 6, "kind": {"append": {"stream": "agent-recovery/decisions", "record": "{}"}}},
        {"now_ms": 6, "kind": {"append": {"stream": "agent-recovery/dead-letter", "record": RECORD}}},
        ev(6, event="dead_letter", step="s2", code="tool.http.503_unavailable"),
        ev(6, event="dead_letter_depth", depth=5, threshold=4, id="1"),
        finish(6, "dead_lettered", {"code": "tool.http.503_unavailable", "class": "transient"}),
    ],
    "instructions": [
        start("lane", None, "agent_recovery.step", 0, step_attrs("s2", "fetch", "fetch")[:4]),
        start("attempt", "lane", "agent_recovery.attempt", 0, attempt_attrs("s2", "fetch", "operation", 3, "k2")),
        metric("agent_recovery.decisions", 1, [t("error.type", "tool.http.503_unavailable"), t("agent_recovery.action", "dead_letter")]),
        setattrs("attempt", [t("error.type", "tool.http.503_unavailable"), t("agent_recovery.action", "dead_letter")]),
        err("attempt", "tool.http.503_unavailable"),
        endi("attempt", 5),
        metric("agent_recovery.attempts", 1, [t("agent_recovery.call.kind", "operation"), t("error.type", "tool.http.503_unavailable"),
                                              t("agent_recovery.action", "dead_letter")]),
        metric("agent_recovery.breaker.transitions", 1, [t("agent_recovery.target", "fetch"), t("agent_recovery.breaker.state", "open")]),
        event_i("lane", "agent_recovery.breaker", 5, [t("agent_recovery.target", "fetch"), t("agent_recovery.state", "open")]),
        metric("agent_recovery.short_circuits", 1, [t("agent_recovery.target", "fetch")]),
        event_i("lane", "agent_recovery.short_circuit", 5, [t("agent_recovery.step.id", "s2"), t("agent_recovery.target", "fetch"), h("k2")]),
        metric("agent_recovery.decisions", 1, [t("error.type", "runtime.breaker_open"), t("agent_recovery.action", "dead_letter")]),
        event_i("lane", "agent_recovery.decision", 5, [t("agent_recovery.step.id", "s2"), t("agent_recovery.action", "dead_letter"),
                                                       t("error.type", "runtime.breaker_open")]),
        {"emit_log": {"key": "lane", "event_name": "agent_recovery.dead_letter", "time_ms": 6, "severity_number": 13,
                      "severity_text": "WARN", "body": RECORD,
                      "attributes": [t("agent_recovery.run.id", RUN), t("agent_recovery.step.id", "s2"),
                                     t("error.type", "tool.http.503_unavailable")]}},
        event_i("lane", "agent_recovery.dead_letter", 6, [t("agent_recovery.dead_letter.record", RECORD), t("error.type", "tool.http.503_unavailable")]),
        metric("agent_recovery.dead_letters", 1, [t("error.type", "tool.http.503_unavailable")]),
        event_i("lane", "agent_recovery.dead_letter_depth", 6, []),
        metric("agent_recovery.steps", 1, [t("agent_recovery.step.outcome", "dead_lettered")]),
        setattrs("lane", [t("agent_recovery.step.outcome", "dead_lettered"), t("error.type", "tool.http.503_unavailable")]),
        err("lane", "tool.http.503_unavailable"),
        endi("lane", 6),
    ],
})

# 4. A compensation chain: two compensations, one still failing; the
#    compensation calls are children of the chain.
CASES.append({
    "name": "compensation-chain",
    "observations": [
        lane_step(0, "s3", "book"),
        ev(1, event="compensate", step="s1", target="pay"),
        call(1, "compensation", "s1", "pay", "c1", 1),
        end(3),
        ev(3, event="ok", step="s1"),
        ev(3, event="compensate", step="s2", target="ship"),
        call(3, "compensation", "s2", "ship", "c2", 1),
        end(4),
        ev(4, event="compensate", step="s2", state="failed", code="tool.http.500_internal"),
        finish(4, "failed", {"code": "tool.http.409_conflict"}),
    ],
    "instructions": [
        start("lane", None, "agent_recovery.step", 0, step_attrs("s3", "book", "book")),
        metric("agent_recovery.compensations", 1, [t("agent_recovery.compensation.state", "started")]),
        start("chain", "lane", "agent_recovery.compensation", 1, [t("agent_recovery.run.id", RUN)]),
        {"add_link": {"key": "chain", "step": "s1", "attributes": [t("agent_recovery.step.id", "s1")]}},
        event_i("chain", "agent_recovery.compensate", 1, [t("agent_recovery.step.id", "s1"), t("agent_recovery.target", "pay")]),
        start("attempt", "chain", "agent_recovery.attempt", 1, attempt_attrs("s1", "pay", "compensation", 1, "c1")),
        endi("attempt", 3),
        metric("agent_recovery.attempts", 1, [t("agent_recovery.call.kind", "compensation")]),
        metric("agent_recovery.compensations", 1, [t("agent_recovery.compensation.state", "started")]),
        {"add_link": {"key": "chain", "step": "s2", "attributes": [t("agent_recovery.step.id", "s2")]}},
        event_i("chain", "agent_recovery.compensate", 3, [t("agent_recovery.step.id", "s2"), t("agent_recovery.target", "ship")]),
        start("attempt", "chain", "agent_recovery.attempt", 3, attempt_attrs("s2", "ship", "compensation", 1, "c2")),
        metric("agent_recovery.compensations", 1, [t("agent_recovery.compensation.state", "failed")]),
        event_i("chain", "agent_recovery.compensate", 4, [t("agent_recovery.step.id", "s2"), t("error.type", "tool.http.500_internal"),
                                                          t("agent_recovery.state", "failed")]),
        endi("attempt", 4),
        metric("agent_recovery.attempts", 1, [t("agent_recovery.call.kind", "compensation")]),
        setattrs("chain", [i("agent_recovery.compensation.count", 2), i("agent_recovery.compensation.failed", 1)]),
        err("chain", "agent_recovery.compensation_failed"),
        endi("chain", 4),
        metric("agent_recovery.steps", 1, [t("agent_recovery.step.outcome", "failed")]),
        setattrs("lane", [t("agent_recovery.step.outcome", "failed"), t("error.type", "tool.http.409_conflict")]),
        err("lane", "tool.http.409_conflict"),
        endi("lane", 4),
    ],
})

# 5. A cancellation between steps: no span of its own; the chain is a child
#    of the starting context and carries the dead-letter event.
CASES.append({
    "name": "cancellation-between-steps",
    "observations": [
        {"now_ms": 50, "kind": {"lane": {"run_id": RUN, "kind": "bare", "policy": POL}}},
        ev(50, event="cancelled"),
        ev(50, event="compensate", step="s1", target="pay"),
        {"now_ms": 51, "kind": {"append": {"stream": "agent-recovery/dead-letter", "record": "{\"last_envelope\":{\"code\":7}}"}}},
        finish(52, "cancelled"),
    ],
    "instructions": [
        metric("agent_recovery.compensations", 1, [t("agent_recovery.compensation.state", "started")]),
        start("chain", None, "agent_recovery.compensation", 50, [t("agent_recovery.run.id", RUN)]),
        {"add_link": {"key": "chain", "step": "s1", "attributes": [t("agent_recovery.step.id", "s1")]}},
        event_i("chain", "agent_recovery.compensate", 50, [t("agent_recovery.step.id", "s1"), t("agent_recovery.target", "pay")]),
        {"emit_log": {"key": "chain", "event_name": "agent_recovery.dead_letter", "time_ms": 51, "severity_number": 13,
                      "severity_text": "WARN", "body": "{\"last_envelope\":{\"code\":7}}",
                      "attributes": [t("agent_recovery.run.id", RUN)]}},
        event_i("chain", "agent_recovery.dead_letter", 51, [t("agent_recovery.dead_letter.record", "{\"last_envelope\":{\"code\":7}}")]),
        setattrs("chain", [i("agent_recovery.compensation.count", 1), i("agent_recovery.compensation.failed", 0)]),
        endi("chain", 52),
    ],
})

# 6. A fan-out lane (its branches are lanes of their own), abandoned with a
#    call pending: the open spans end, with no outcome and no metric.
CASES.append({
    "name": "fanout-abandoned",
    "observations": [
        {"now_ms": 0, "kind": {"lane": {"run_id": RUN, "kind": {"fanout": {"id": "f1", "min_results": 2, "branches": 3}}, "policy": POL}}},
        ev(0, event="fanout", step="f1"),
        call(1, "fallback", "f1", "backup", "k9", 1, timeout=9007199254740991),
        end(2),
        ev(3, event="restore", step="f1"),
        {"now_ms": 9, "kind": "abandon"},
        ev(10, event="ok"),
        finish(10, "ok"),
    ],
    "instructions": [
        start("lane", None, "agent_recovery.fanout", 0, [t("agent_recovery.run.id", RUN), t("agent_recovery.step.id", "f1"),
                                                         i("agent_recovery.fanout.min_results", 2), i("agent_recovery.fanout.branches", 3)] + pol()),
        start("attempt", "lane", "agent_recovery.attempt", 1,
              attempt_attrs("f1", "backup", "fallback", 1, "k9", 9007199254740991)),
        event_i("lane", "agent_recovery.restore", 3, [t("agent_recovery.step.id", "f1")]),
        endi("attempt", 2),
        endi("lane", 9),
    ],
})

# 7. Events the mapping cannot read are dropped; other events are span
#    events; appends to other streams are not telemetry.
CASES.append({
    "name": "unreadable-and-unknown-events",
    "observations": [
        lane_step(0, "s1", "t"),
        {"now_ms": 1, "kind": {"event": "not json"}},
        ev(1, event="in_flight", step="s1", attempt="two"),
        ev(1, event="cached", step="s1", key="k1", extra={"x": 1}),
        ev(2, event="sleep", step="s1"),
        finish(2, "awaiting_input", {"code": "semantic.needs_input"}),
    ],
    "instructions": [
        start("lane", None, "agent_recovery.step", 0, step_attrs("s1", "t", "t")),
        event_i("lane", "agent_recovery.cached", 1, [t("agent_recovery.step.id", "s1"), h("k1")]),
        metric("agent_recovery.retry.delay", 0, [t("agent_recovery.target", "")]),
        event_i("lane", "agent_recovery.sleep", 2, [t("agent_recovery.step.id", "s1")]),
        metric("agent_recovery.steps", 1, [t("agent_recovery.step.outcome", "awaiting_input")]),
        setattrs("lane", [t("agent_recovery.step.outcome", "awaiting_input"), t("error.type", "semantic.needs_input")]),
        endi("lane", 2),
    ],
})

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lanes.json")
with open(out, "w") as f:
    json.dump({"cases": CASES}, f, indent=1)
    f.write("\n")
print(f"wrote {len(CASES)} cases to {out}")
