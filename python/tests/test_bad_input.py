"""Bad input gives a PolicyError with a kind and a hint, never a crash or a trap."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_recovery import Limits, Policy, PolicyError

OK = {"source": "http", "status": 503}


def expect_error(kind: str, fn: Any, *args: Any) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        fn(*args)
    assert info.value.kind == kind, info.value
    assert info.value.message, "a policy error always has a message"
    return info.value


def still_answers(policy: Policy) -> None:
    assert policy.classify(OK)["code"] == "tool.http.503_unavailable"


@pytest.mark.parametrize(
    "text",
    ["", "{", '{"source":', "nope", "{'single': 1}", '{"a":1}}', "\x00"],
)
def test_malformed_json(policy: Policy, text: str) -> None:
    expect_error("invalid_json", policy.classify_json, text)
    expect_error("invalid_json", policy.decide_json, text, "{}")
    still_answers(policy)


@pytest.mark.parametrize(
    "obs",
    [
        [],
        "just a string",
        42,
        {"source": "http", "status": "503"},
        {"source": "http", "status": 99999},
        {"source": "http", "status": 503, "headers": 7},
        {"source": "carrier-pigeon"},
        {"source": "exception", "type": 3},
        {"source": "timeout", "phase": "lunch"},
        {"source": "http", "status": 503, "call": "robot"},
        {"nothing": "recognisable"},
    ],
)
def test_wrong_types_in_observation(policy: Policy, obs: Any) -> None:
    err = expect_error("invalid_observation", policy.classify_json, json.dumps(obs))
    assert ";" in err.message, "messages end with a hint"
    still_answers(policy)


@pytest.mark.parametrize(
    "ctx,kind",
    [
        ({"attempt": 0}, "invalid_context"),
        ({"attempt": -1}, "invalid_context"),
        ({"attempt": "one"}, "invalid_context"),
        ({"seed": -5}, "invalid_context"),
        ({"call": "robot"}, "invalid_context"),
        ({"surprise": True}, "invalid_context"),
        ([1, 2], "invalid_context"),
        ({"config": {"tool": {"base_ms": 500, "cap_ms": 100}}}, "invalid_config"),
        ({"config": {"tool": {"max_attempts": 0}}}, "invalid_config"),
    ],
)
def test_bad_context(policy: Policy, ctx: Any, kind: str) -> None:
    expect_error(kind, policy.decide, OK, ctx)
    still_answers(policy)


def test_ten_megabyte_body_is_an_answer_or_a_policy_error(policy: Policy) -> None:
    body = "x" * (10 * 1024 * 1024)
    obs = {"source": "http", "status": 502, "body": body}
    envelope = policy.classify(obs)  # must not trap; a 502 stays a 502
    assert envelope["code"].endswith("502_bad_gateway")
    big_json_body = "[" + ",".join(["1"] * (5 * 1024 * 1024 // 2)) + "]"
    try:
        policy.classify({"source": "http", "status": 503, "body": big_json_body})
    except PolicyError as e:  # allowed: a clear refusal
        assert e.kind in ("too_large", "invalid_observation")
    still_answers(policy)


def test_input_over_the_host_limit_is_too_large(policy: Policy) -> None:
    text = json.dumps({"source": "http", "status": 503, "body": "y" * (17 << 20)})
    err = expect_error("too_large", policy.classify_json, text)
    assert "limit" in err.message
    still_answers(policy)


def test_input_over_the_component_limit_is_too_large() -> None:
    roomy = Policy.load(limits=Limits(max_input_bytes=64 << 20, memory_bytes=256 << 20))
    text = json.dumps({"source": "http", "status": 503, "body": "z" * (33 << 20)})
    err = expect_error("too_large", roomy.classify_json, text)
    assert "byte" in err.message
    still_answers(roomy)


def test_deep_nesting(policy: Policy) -> None:
    expect_error("invalid_json", policy.classify_json, "[" * 100_000)
    expect_error("invalid_json", policy.classify_json, '{"a":' * 100_000)
    deep: Any = OK
    for _ in range(5_000):
        deep = {"nested": deep}
    expect_error("invalid_json", policy.classify, deep)  # json.dumps gives up: a PolicyError
    # A deeply nested *body* is only text to the policy: still an answer.
    assert policy.classify({"source": "http", "status": 503, "body": "[" * 50_000})["code"]
    still_answers(policy)


def test_non_utf8_bytes(policy: Policy) -> None:
    raw = b'{"source":"http","status":503,"body":"\xff\xfe"}'
    err = expect_error("invalid_json", policy.classify_json, raw)
    assert "UTF-8 at byte 38" in err.message
    expect_error("invalid_json", policy.decide_json, b"{}", b"\xc3\x28")
    expect_error("invalid_json", policy.classify_json, '{"body":"\ud800"}')  # lone surrogate
    expect_error("invalid_json", policy.key, "run", "step", "tool", b"\x80")
    # Valid UTF-8 bytes are fine.
    assert json.loads(policy.classify_json('{"source":"http","status":503}'.encode()))["code"]
    still_answers(policy)


def test_values_json_cannot_carry(policy: Policy) -> None:
    expect_error("invalid_json", policy.classify, {"source": "http", "status": float("nan")})
    expect_error("invalid_json", policy.classify, {"source": "http", "status": 503, "x": object()})
    loop: Any = {}
    loop["self"] = loop
    expect_error("invalid_json", policy.classify, loop)


def test_bad_arguments_of_the_other_calls(policy: Policy) -> None:
    expect_error("invalid_argument", policy.backoff, "robot", 1)
    expect_error("invalid_argument", policy.backoff, "tool", -1)
    expect_error("invalid_argument", policy.backoff, "tool", 1 << 33)
    expect_error("invalid_argument", policy.backoff, "tool", 1, 1 << 64)
    expect_error("invalid_argument", policy.backoff, "tool", 0)  # the component's check
    expect_error("invalid_config", policy.backoff, "tool", 1, None, {"tool": {"base_ms": 1}})
    expect_error("invalid_config", policy.backoff, "tool", 1, None, {"speed": 1})
    expect_error(
        "invalid_config",
        policy.backoff,
        "tool",
        1,
        None,
        {"tool": {"base_ms": 100, "cap_ms": 10, "max_attempts": 3}},
    )
    expect_error("invalid_json", policy.key, "run", "step", "tool", "{not json")
    expect_error("invalid_argument", policy.render, {"code": "x"}, "smoke-signals")
    with pytest.raises(PolicyError):
        policy.render("not json", "jsonrpc-error")
    still_answers(policy)


@pytest.mark.parametrize("value", [OK, [OK], 503, None, 1.5, True])
def test_json_entry_points_refuse_objects_like_node(policy: Policy, value: Any) -> None:
    # Node's classifyJson()/decideJson() refuse a non-string with invalid_argument
    # (node/src/policy.js `text()`); Python used to raise a bare TypeError from
    # bytes(dict), or send bytes(503) (503 NUL bytes) to the component.
    for fn, args in (
        (policy.classify_json, (value,)),
        (policy.decide_json, (value,)),
        (policy.decide_json, (value, "{}")),
        (policy.decide_json, (json.dumps(OK), value)),
    ):
        err = expect_error("invalid_argument", fn, *args)
        assert "JSON text" in err.message and err.message.endswith("for objects")
    # text and UTF-8 bytes still work, and the dict methods take the object
    assert json.loads(policy.decide_json(json.dumps(OK).encode(), '{"seed":1}'))["action"] == "retry"
    assert policy.classify_json(bytearray(json.dumps(OK).encode()))
    still_answers(policy)
