"""Odd values an operation returns or raises: each becomes a structured outcome
or a clear error, and the run stays usable (a following step completes).

The expected shapes come from docs/runtime.md ("Steps and outcomes", "Inputs":
an observation that is not valid is decided on as an `exception` observation of
type `agent_recovery.InvalidObservation`) and docs/errors.md.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List

import pytest

from agent_recovery import MAX_ID_BYTES, PolicyError
from agent_recovery.runtime import Failed, RawOutcome, Runtime, Step, VirtualClock

T0 = 1_767_225_600_000


class _StrRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")


class _ReprRaises(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ raised")


class _ArgsStrRaises:
    def __str__(self) -> str:
        raise RuntimeError("__str__ raised")


def _cycle() -> Dict[str, Any]:
    d: Dict[str, Any] = {"source": "http", "status": 503}
    d["self"] = d
    return d


def _raise(exc: BaseException) -> Callable[[Any], Any]:
    def op(_call: Any) -> Any:
        raise exc

    return op


def _returns(value: Any) -> Callable[[Any], Any]:
    return lambda _call: value


INVALID = {"source": "exception", "type": "agent_recovery.InvalidObservation"}
HTTP_400 = {"source": "http", "status": 400}

# (name, operation, the envelope's `upstream` must contain): every call of the
# step answers the same odd value.
FAILURES: List[Any] = [
    ("failed-nan", _returns(Failed(float("nan"))), INVALID),
    ("failed-nan-status", _returns(Failed({"source": "http", "status": float("nan")})), INVALID),
    ("failed-infinity-body", _returns(Failed({"source": "http", "status": 503, "body": float("inf")})), INVALID),
    ("failed-cycle", _returns(Failed(_cycle())), INVALID),
    ("failed-none", _returns(Failed(None)), INVALID),
    ("failed-number", _returns(Failed(42)), INVALID),
    ("failed-list", _returns(Failed([1, 2])), INVALID),
    ("failed-empty-object", _returns(Failed({})), INVALID),
    ("failed-unknown-source", _returns(Failed({"source": "carrier-pigeon"})), INVALID),
    ("failed-status-text", _returns(Failed({"source": "http", "status": "503"})), INVALID),
    ("failed-huge-int-status", _returns(Failed({"source": "http", "status": 2**70})), INVALID),
    # A large integer in a body is written as it is: the failure is kept.
    ("failed-huge-int-body", _returns(Failed({"source": "http", "status": 400, "body": {"id": 2**70}})), HTTP_400),
    ("failed-huge-int-text", _returns(Failed('{"source":"http","status":400,"body":{"id":1180591620717411303424}}')), HTTP_400),
    ("failed-object", _returns(Failed(object())), INVALID),
    ("failed-colliding-keys", _returns(Failed({"source": "http", "status": 503, "headers": {1: "a", "1": "b"}})), INVALID),
    ("failed-not-json-text", _returns(Failed("{nope")), INVALID),
    # A lone surrogate in an observation's text becomes U+FFFD: the failure is kept.
    ("failed-lone-surrogate", _returns(Failed({"source": "exception", "type": "x.Y", "message": "\ud800"})), {"type": "x.Y"}),
    ("failed-lone-surrogate-text", _returns(Failed('{"source":"http","status":400,"body":"\ud800"}')), HTTP_400),
    ("failed-surrogate-escape", _returns(Failed('{"source":"http","status":400,"body":"\\ud800"}')), HTTP_400),
    ("response-nan", _returns(RawOutcome({"source": "http", "status": 200, "body": float("nan")})), INVALID),
    ("response-cycle", _returns(RawOutcome(_cycle())), INVALID),
    ("response-none", _returns(RawOutcome(None)), INVALID),
    ("response-string", _returns(RawOutcome("ok")), INVALID),
    ("response-lone-surrogate", _returns(RawOutcome({"source": "http", "status": 400, "body": "\udfff"})), HTTP_400),
    ("raises-str-raises", _raise(_StrRaises()), {"type": f"{__name__}._StrRaises"}),
    ("raises-repr-raises", _raise(_ReprRaises()), {"type": f"{__name__}._ReprRaises"}),
    ("raises-args-str-raises", _raise(ValueError(_ArgsStrRaises())), {"type": "builtins.ValueError"}),
    ("raises-lone-surrogate", _raise(ValueError("\ud800")), {"type": "builtins.ValueError"}),
    ("raises-huge-message", _raise(ValueError("x" * 2_000_000)), {"type": "builtins.ValueError"}),
]


def _runtime() -> Runtime:
    return Runtime(clock=VirtualClock(T0), seed=7)


def _next_step_completes(run: Any) -> None:
    """A following step returns a report (not a hang, not an error)."""
    report = run.step(Step("after", "t.after", lambda _call: {"fine": True}))
    assert report.outcome in ("ok", "failed", "escalated", "dead_lettered", "replan"), report
    if report.outcome == "ok":
        assert report.result == {"fine": True}


@pytest.mark.parametrize("name,operation,upstream", FAILURES, ids=[f[0] for f in FAILURES])
def test_an_odd_failure_is_a_structured_outcome_and_the_run_goes_on(
    name: str, operation: Any, upstream: Dict[str, Any]
) -> None:
    run = _runtime().run("odd-" + name)
    report = run.step(Step("odd", "t.odd", operation, call="tool"))
    # It failed, the policy decided, and the envelope says what was observed.
    assert report.outcome in ("failed", "dead_lettered"), report
    envelope = report.envelope
    assert isinstance(envelope, dict) and envelope["code"], report
    assert {k: envelope["upstream"].get(k) for k in upstream} == upstream, envelope
    if upstream is INVALID:
        assert envelope["message"].startswith("the operation"), envelope["message"]
    json.dumps(envelope, allow_nan=False)  # plain JSON
    _next_step_completes(run)


# (name, value, what the report's result must be): an ok value JSON cannot
# carry exactly is the object itself in the report, never an altered copy.
ODD_RESULTS: List[Any] = [
    ("nan", float("nan")),
    ("cycle", _cycle()),
    ("huge-int", 2**70),
    ("below-i64", -(2**63) - 1),
    ("nested-huge-int", {"n": [1, 2**64]}),
    ("colliding-keys", {1: "a", "1": "b"}),
    ("lone-surrogate", "\ud800"),
    ("object", object()),
]


@pytest.mark.parametrize("name,value", ODD_RESULTS, ids=[r[0] for r in ODD_RESULTS])
def test_an_odd_ok_value_keeps_its_identity_and_the_run_goes_on(name: str, value: Any) -> None:
    run = _runtime().run("odd-ok-" + name)
    report = run.step(Step("odd", "t.odd", _returns(value)))
    assert report.outcome == "ok", report
    assert report.result is value
    _next_step_completes(run)


EDGE_INTS = [-(2**63), 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("n", EDGE_INTS)
def test_integers_inside_the_json_range_round_trip_as_integers(n: int) -> None:
    run = _runtime().run(f"int-{n}")
    report = run.step(Step("n", "t.n", _returns({"n": n})))
    assert report.result == {"n": n} and type(report.result["n"]) is int


@pytest.mark.parametrize(
    "args,path",
    [({"n": 2**64}, "args.n"), ({"a": [0, -(2**63) - 1]}, "args.a[1]"), ({1: "a", "1": "b"}, "args")],
)
def test_args_json_cannot_carry_are_refused_with_the_path(args: Any, path: str) -> None:
    run = _runtime().run("args")
    with pytest.raises(PolicyError) as info:
        run.step(Step("s", "t", _returns(1), args=args))
    assert path in str(info.value) and info.value.kind == "invalid_argument", info.value
    _next_step_completes(run)


LONG = "n" * (MAX_ID_BYTES + 1)


@pytest.mark.parametrize(
    "member,make",
    [
        ("run_id", lambda rt: rt.run(LONG)),
        ("run_id", lambda rt: rt.run("r" * 10_000_000)),
        ("step.id", lambda rt: rt.run("r").step(Step(LONG, "t", _returns(1)))),
        ("step.tool", lambda rt: rt.run("r").step(Step("s", LONG, _returns(1)))),
        ("step.target", lambda rt: rt.run("r").step(Step("s", "t", _returns(1), target=LONG))),
        ("step.fallbacks[]", lambda rt: rt.run("r").step(Step("s", "t", _returns(1), fallbacks=["a", LONG]))),
        ("fanout.id", lambda rt: rt.run("r").fanout(LONG, 1, [Step("b", "t", _returns(1))])),
    ],
)
def test_a_name_over_the_limit_is_refused_before_the_component(member: str, make: Any) -> None:
    with pytest.raises(PolicyError) as info:
        make(_runtime())
    assert info.value.kind == "too_large"
    assert info.value.message.startswith(f"`{member}` is "), info.value
    assert info.value.message.endswith("put data in `args`"), info.value


def test_the_component_has_the_same_name_limit() -> None:
    """The host's MAX_ID_BYTES is the loop's: fed straight to the component, a
    name of that many bytes starts a run and one byte more is refused."""
    looper = _runtime()._looper
    ok = json.dumps({"input": "run", "now_ms": 0, "run_id": "n" * MAX_ID_BYTES})
    looper.advance("", ok)
    with pytest.raises(PolicyError) as info:
        looper.advance("", json.dumps({"input": "run", "now_ms": 0, "run_id": LONG}))
    assert info.value.kind == "too_large" and f"{MAX_ID_BYTES}-byte limit" in str(info.value)


def test_a_name_at_the_limit_runs() -> None:
    run = _runtime().run("n" * MAX_ID_BYTES)
    report = run.step(Step("s" * MAX_ID_BYTES, "t" * MAX_ID_BYTES, _returns(1)))
    assert report.outcome == "ok" and report.result == 1
