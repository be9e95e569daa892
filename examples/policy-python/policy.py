"""A recovery policy written in Python: the reference, with one rule changed.

The rule: an HTTP 409 on a tool call (`tool.http.409_conflict`) is permanent.
The reference treats a conflict as a state error (restore the checkpoint, then
retry); a team whose tools answer 409 only for "already done" (a payment
already captured, an order already placed) wants the agent to stop and look
instead. LLM and agent 409s keep the reference's answer.

Everything else is the reference's answer, unchanged: this module imports the
reference component's interfaces (`wit_world.imports`, provided by the
reference that `build.sh` composes in) and forwards every call it does not
override. A forwarded JSON answer is the reference's text itself, so it is the
same bytes in every host.

Each class below implements one exported interface of the
`agent:recovery/recovery-policy@0.1.0` world; componentize-py finds them by
name. Raising `componentize_py_types.Err(PolicyError(kind, message))` returns
the WIT `policy-error`; an error the reference raises passes through as it is.
"""

import json

from wit_world import exports
from wit_world.imports import (
    backoff as ref_backoff,
    classify as ref_classify,
    decide as ref_decide,
    idempotency as ref_idempotency,
    meta as ref_meta,
    registry as ref_registry,
    render as ref_render,
)
from wit_world.imports.types import (
    Action,
    ErrorClass,
    PolicyInfo,
)

#: The code this policy answers differently.
CONFLICT = "tool.http.409_conflict"
#: Its hint, in envelopes and decisions.
CONFLICT_HINT = (
    "Do not retry: the tool says this was already done or conflicts with its "
    "current state; check that state before any new attempt."
)

#: What the host runs before this policy becomes active: the reference's own
#: cases plus one for the rule this policy changes.
OWN_SMOKE_CASES = [
    {
        "observation": {"source": "http", "status": 409},
        "context": {"call": "tool", "attempt": 1, "seed": 7},
        "expect": {"action": "fail", "code": CONFLICT},
    },
    {
        "observation": {"source": "http", "status": 409},
        "context": {"call": "llm", "attempt": 1, "seed": 7},
        "expect": {"action": "restore", "code": "llm.http.409_conflict"},
    },
]


def compact(value):
    """JSON text in the reference's style: no spaces, UTF-8 kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def conflict_envelope_json(envelope):
    """Make a JSON envelope of a tool 409 permanent (in place)."""
    envelope["class"] = "permanent"
    envelope["retryable"] = False
    envelope["hint"] = CONFLICT_HINT
    envelope["retry_after_ms"] = None


def conflict_envelope(envelope):
    """Make a typed envelope of a tool 409 permanent (in place)."""
    envelope.class_ = ErrorClass.PERMANENT
    envelope.retryable = False
    envelope.hint = CONFLICT_HINT
    envelope.retry_after_ms = None


class Classify(exports.Classify):
    def classify(self, observation):
        envelope = ref_classify.classify(observation)
        if envelope.code == CONFLICT:
            conflict_envelope(envelope)
        return envelope

    def classify_json(self, observation):
        text = ref_classify.classify_json(observation)
        envelope = json.loads(text)
        if envelope.get("code") != CONFLICT:
            return text  # the reference's bytes
        conflict_envelope_json(envelope)
        return compact(envelope)


class Decide(exports.Decide):
    def decide(self, observation, context):
        decision = ref_decide.decide(observation, context)
        if decision.envelope.code == CONFLICT:
            conflict_envelope(decision.envelope)
            decision.action = Action.FAIL
            decision.delay_ms = None
            decision.reason = "permanent"
            decision.reason_code = None
        return decision

    def decide_json(self, observation, context):
        text = ref_decide.decide_json(observation, context)
        decision = json.loads(text)
        if decision.get("envelope", {}).get("code") != CONFLICT:
            return text  # the reference's bytes
        conflict_envelope_json(decision["envelope"])
        decision["action"] = "fail"
        decision["delay_ms"] = None
        decision["reason"] = "permanent"
        decision["reason_code"] = None
        return compact(decision)


class Meta(exports.Meta):
    def info(self):
        return PolicyInfo(
            name="python-template",
            version="0.1.0",
            contract=ref_meta.info().contract,
            description="The reference policy with tool 409s permanent, written in Python.",
        )

    def smoke_tests(self):
        cases = [
            case
            for case in json.loads(ref_meta.smoke_tests())
            if case["expect"].get("code") != CONFLICT
        ]
        return compact(cases + OWN_SMOKE_CASES)


# Forwarded unchanged. Override a method here to change it too, e.g. `lookup`
# and `codes_json` to document the new rule in the registry.


class Backoff(exports.Backoff):
    def delay(self, call, attempt, seed, config):
        return ref_backoff.delay(call, attempt, seed, config)


class Registry(exports.Registry):
    def codes(self):
        return ref_registry.codes()

    def codes_json(self):
        return ref_registry.codes_json()

    def codes_markdown(self):
        return ref_registry.codes_markdown()

    def errors_block(self, codes):
        return ref_registry.errors_block(codes)

    def json_schema(self, name):
        return ref_registry.json_schema(name)

    def lookup(self, code):
        return ref_registry.lookup(code)


class Idempotency(exports.Idempotency):
    def key(self, run_id, step_id, tool, args_json):
        return ref_idempotency.key(run_id, step_id, tool, args_json)


class Render(exports.Render):
    def render_json(self, envelope, format, options):
        return ref_render.render_json(envelope, format, options)
