"""Observations built from what failed (the policy classifies them, not these helpers)."""

from __future__ import annotations

import errno
import socket

from agent_recovery import Failure, Policy, from_exception, from_response, from_rpc
from agent_recovery.observe import as_failure

from .fakes import FakeResponse, HTTPStatusError, ReadTimeout


def test_from_exception_uses_the_qualified_type_name(policy: Policy) -> None:
    obs = from_exception(ReadTimeout("read timed out"))
    assert obs == {"source": "exception", "type": "httpx.ReadTimeout", "message": "read timed out"}
    assert policy.classify(obs)["code"] == "tool.timeout.read"
    assert from_exception(TimeoutError())["type"] == "builtins.TimeoutError"

    class Local(Exception):
        pass

    assert from_exception(Local())["type"].endswith("test_from_exception_uses_the_qualified_type_name.<locals>.Local")


def test_http_status_errors_become_http_observations(policy: Policy) -> None:
    body = '{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}'
    exc = HTTPStatusError(FakeResponse(429, {"x-ratelimit-reset-requests": "2s"}, body))
    obs = from_exception(exc, call="llm")
    assert obs["source"] == "http" and obs["status"] == 429 and obs["body"] == body
    assert obs["headers"] == [["x-ratelimit-reset-requests", "2s"]] and obs["call"] == "llm"
    assert policy.classify(obs)["code"].startswith("llm.")


def test_network_errors(policy: Policy) -> None:
    # OSError(ECONNRESET) is constructed as ConnectionResetError: the type name says it.
    assert type(OSError(errno.ECONNRESET, "reset")) is ConnectionResetError
    assert from_exception(OSError(errno.EHOSTUNREACH, "no route"))["code"] == "EHOSTUNREACH"
    assert from_exception(ConnectionResetError(errno.ECONNRESET, "x"))["type"] == (
        "builtins.ConnectionResetError"
    )
    gai = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    assert from_exception(gai) == {"source": "network", "code": "EAI_AGAIN", "message": str(gai)}
    assert policy.classify(from_exception(gai))["code"].endswith("network.dns_temporary")
    reset = from_exception(ConnectionResetError(errno.ECONNRESET, "x"))
    assert policy.classify(reset)["code"].endswith("network.connection_reset")


def test_from_response_shapes() -> None:
    obs = from_response(503, [("Retry-After", "5"), ("Set-Cookie", "a"), ("Set-Cookie", "b")], b"\xffbusy")
    assert obs["headers"] == [["Retry-After", "5"], ["Set-Cookie", "a"], ["Set-Cookie", "b"]]
    assert obs["body"] == "\ufffdbusy"
    assert "body" not in from_response(500)
    assert from_response(400, None, {"error": "x"})["body"] == {"error": "x"}
    assert from_rpc({"jsonrpc": "2.0", "id": 1, "result": {"isError": True}}, "mcp")["source"] == "mcp"


def test_as_failure() -> None:
    assert as_failure("fine") is None and as_failure(FakeResponse(200)) is None
    assert as_failure(FakeResponse(302)) is None
    f = as_failure(FakeResponse(503, {"retry-after": "1"}, "busy"))
    assert f is not None and f.observation["status"] == 503 and f.value.status_code == 503
    explicit = Failure.rpc({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}})
    assert as_failure(explicit) is explicit
