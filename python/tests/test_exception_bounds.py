"""`observation_from` on odd exceptions: it never raises, and copies a bounded amount.

The classes here are plain exceptions written to be awkward (a raising
`__str__`, bytes and oversized bodies, cycles, deep and wide groups); they
imitate no SDK. The bounds are the adapter's documented ones
(`agent_recovery._exception_obs`: depth 8, 16 group members, 64 KB of body).
"""

from __future__ import annotations

import json
from typing import Any, Dict

from agent_recovery._exception_obs import MAX_BODY_CHARS, MAX_DEPTH, MAX_MEMBERS
from agent_recovery.adapters import observation_from


class _Carrier(Exception):
    """An error carrying a response the way frameworks do: `status_code`, `headers`, `body`."""

    def __init__(self, status_code: Any = None, headers: Any = None, body: Any = None) -> None:
        super().__init__("carrier")
        self.status_code = status_code
        self.headers = headers
        self.body = body


class _NoStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no string for you")


def strict_json(obs: Dict[str, Any]) -> None:
    """The observation is JSON (no NaN, no bytes, no objects)."""
    json.dumps(obs, allow_nan=False)


def test_status_headers_and_body_of_an_error() -> None:
    obs = observation_from(_Carrier(503, {"Retry-After": 7, b"X-Trace": b"abc"}, b'{"error": "busy"}'))
    assert obs == {"source": "exception", "type": f"{__name__}._Carrier", "message": "carrier",
                   "status": 503, "headers": {"retry-after": "7", "x-trace": "abc"}, "body": {"error": "busy"}}
    strict_json(obs)


def test_bodies_that_are_not_json_or_too_large() -> None:
    assert observation_from(_Carrier(502, body="<html>bad gateway</html>"))["body"] == "<html>bad gateway</html>"
    assert observation_from(_Carrier(502, body=b"\xff\xfe not utf-8"))["body"] == "\ufffd\ufffd not utf-8"
    huge = '{"error": "' + "x" * (2 * MAX_BODY_CHARS) + '"}'
    body = observation_from(_Carrier(500, body=huge))["body"]
    assert body == huge[:MAX_BODY_CHARS]
    obs = observation_from(_Carrier(500, body={"n": float("nan"), "ok": object()}))
    assert "body" not in obs  # not JSON: left out rather than guessed
    obs = observation_from(_Carrier(500, body={"items": ["y" * 1000] * 1000}))
    assert "body" not in obs  # over the cap as a value: left out
    strict_json(obs)
    obs = observation_from(_Carrier(status_code=True))  # a bool is no status
    assert "status" not in obs


def test_a_raising_str_keeps_the_type_and_the_cause() -> None:
    err = _NoStr()
    err.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    obs = observation_from(err)
    # the cause is a transport failure: read as before, as the observation itself
    assert obs["source"] == "network" and obs["code"] == "ECONNRESET"
    err.__cause__ = ValueError("bad")
    obs = observation_from(err)
    assert obs["type"] == f"{__name__}._NoStr" and obs.get("message", "") == ""
    assert obs["cause"] == {"source": "exception", "type": "builtins.ValueError", "message": "bad"}


def test_cycles_are_cut_and_depth_is_bounded() -> None:
    inner = ValueError("inner")
    group = ExceptionGroup("g", [inner])
    inner.__cause__ = group  # a member caused by its own group
    obs = observation_from(group)
    assert obs["exceptions"][0]["type"] == "builtins.ValueError"
    assert "cause" not in obs["exceptions"][0]
    strict_json(obs)

    deep: BaseException = ValueError("root")
    for i in range(50):
        outer = RuntimeError(f"level {i}")
        outer.__cause__ = deep
        deep = outer
    obs = observation_from(deep)
    levels = 1
    while "cause" in obs:
        obs = obs["cause"]
        levels += 1
    assert levels == MAX_DEPTH + 1  # the error and MAX_DEPTH levels below it


def test_groups_are_bounded_in_breadth_and_nesting() -> None:
    wide = ExceptionGroup("wide", [ValueError(str(i)) for i in range(100)])
    obs = observation_from(wide)
    assert [m["message"] for m in obs["exceptions"]] == [str(i) for i in range(MAX_MEMBERS - 1)] + ["99"]
    nested: BaseException = ValueError("leaf")
    for _ in range(20):
        nested = ExceptionGroup("g", [nested])
    obs = observation_from(nested)
    levels = 1
    while "exceptions" in obs:
        obs = obs["exceptions"][0]
        levels += 1
    assert levels == MAX_DEPTH + 1  # the error and MAX_DEPTH levels below it


def test_a_group_member_with_a_raising_property() -> None:
    class Hostile(Exception):
        @property
        def status_code(self) -> int:
            raise RuntimeError("no status")

    obs = observation_from(ExceptionGroup("g", [Hostile("h"), _Carrier(429)]))
    assert obs["exceptions"][0]["type"].endswith("Hostile")
    assert obs["exceptions"][1]["status"] == 429
