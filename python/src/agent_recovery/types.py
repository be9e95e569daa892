"""Typed views of the JSON the component prints (and accepts).

These are `TypedDict`s: at runtime the values are the plain dicts that
`json.loads` makes of the component's output, so nothing is converted and every
runtime sees the same data. Fields may be added in later versions of the
contract, never renamed or removed; `total=False` marks what may be absent.
The field-by-field specification is the WIT (`wit/agent-recovery@0.1.0/types.wit`) and docs/envelope-and-decision.md.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

CallKind = Literal["tool", "llm", "agent"]
Action = Literal[
    "retry",
    "fail",
    "replan",
    "fallback",
    "restore",
    "escalate",
    "await_input",
    "compensate",
    "dead_letter",
]
ErrorClass = Literal["transient", "permanent", "semantic", "policy", "state"]
Severity = Literal["info", "warning", "error", "fatal"]
RenderFormat = Literal[
    "jsonrpc-error",
    "mcp-tool-result",
    "a2a-task-status",
    "problem-json",
    "model-tool-result",
    "coordinator-text",
    "downstream-wrap",
]
#: Formats added after the 0.1 contract, rendered by name through the reference
#: component's `render-named` (`Runtime.render`): an AG-UI `RUN_ERROR` event.
NAMED_RENDER_FORMATS = ("ag-ui-run-error",)

#: An observation: `{"source": "http", "status": 429, "headers": {...}, "body": ...}`,
#: `{"source": "exception", "type": "httpx.ReadTimeout"}` and so on (docs/observation.md).
Observation = dict[str, Any]


class Upstream(TypedDict, total=False):
    """What was observed, as received."""

    source: str
    provider: str | None
    status: int | None
    code: str | None
    type: str | None


#: The agent-readable error envelope printed by `classify-json`. (Functional
#: syntax because one member is named `class`.)
Envelope = TypedDict(
    "Envelope",
    {
        "code": str,
        "message": str,
        "class": ErrorClass,
        "retryable": bool,
        "severity": Severity,
        "category": str,
        "retry_after_ms": Union[int, None],
        "field": Union[str, None],
        "allowed_values": Any,
        "suggested_value": Any,
        "hint": str,
        "request_id": Union[str, None],
        "related_codes": list[str],
        "docs_url": Union[str, None],
        "upstream": Upstream,
    },
    total=False,
)


class PolicyRef(TypedDict):
    """Which component decided: added by the Python wrapper to `decide()`."""

    name: str
    version: str
    sha256: str


class Decision(TypedDict, total=False):
    """The decision printed by `decide-json` (plus `policy`, added by the wrapper)."""

    action: Action
    delay_ms: int | None
    attempt: int
    max_attempts: int
    budget_remaining_ms: int
    reason: str
    reason_code: str | None
    envelope: Envelope
    policy: PolicyRef


class BackoffConfig(TypedDict, total=False):
    """Backoff parameters for one kind of call."""

    base_ms: int
    cap_ms: int
    max_attempts: int


class PolicyConfig(TypedDict, total=False):
    """Policy parameters; unset fields take the component's defaults."""

    tool: BackoffConfig
    llm: BackoffConfig
    agent: BackoffConfig
    retry_budget_ms: int


class Context(TypedDict, total=False):
    """What the caller knows about the step when it asks for a decision."""

    call: CallKind
    attempt: int
    elapsed_ms: int
    seed: Union[int, str]
    now_ms: int
    idempotent: bool
    checkpoint_available: bool
    fallback_available: bool
    compensations_pending: int
    config: PolicyConfig


class PolicyInfo(TypedDict):
    """Identity of a policy component (`meta.info`)."""

    name: str
    version: str
    contract: str
    description: str


#: One row of the error-code registry (`registry.codes-json`).
CodeInfo = TypedDict(
    "CodeInfo",
    {
        "code": str,
        "class": ErrorClass,
        "severity": Severity,
        "category": str,
        "retryable": bool,
        "cause": str,
        "recovery": str,
        "stability": str,
        "replaced_by": Union[str, None],
        "related_codes": list[str],
    },
    total=False,
)
