"""Observations: what failed, in the JSON form the policy reads.

These helpers only *describe* a failure (type name, status, headers, body);
deciding what it means is the component's job, so they never classify.

```python
>>> from_response(429, {"Retry-After": "2"}, '{"error": "slow down"}')["status"]
429
>>> from_exception(TimeoutError("read timed out"))["type"]
'builtins.TimeoutError'
```
"""

from __future__ import annotations

import errno
import socket
from typing import Any, Iterable, List, Mapping, Optional, Tuple, Union

from .types import Observation

Headers = Union[Mapping[str, Any], Iterable[Tuple[str, Any]], None]

# getaddrinfo's error numbers have no `errno` names; these are the ones the
# policy knows (EAI_AGAIN is temporary, the others mean "no such name").
_GAI_CODES = {
    getattr(socket, name): name
    for name in ("EAI_AGAIN", "EAI_NONAME", "EAI_NODATA")
    if hasattr(socket, name)
}


def qualified_name(exc: BaseException) -> str:
    """`type(exc).__module__ + "." + type(exc).__qualname__`, e.g. `httpx.ReadTimeout`.

    Kept exactly so (private modules included, e.g.
    `openai._exceptions.RateLimitError`): the policy reads the first and the
    last segment, and the envelope's `upstream.type` shows what was raised.
    """
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


def _pairs(headers: Headers) -> List[List[str]]:
    if headers is None:
        return []
    multi = getattr(headers, "multi_items", None)  # httpx.Headers keeps repeats
    items = multi() if callable(multi) else (
        headers.items() if isinstance(headers, Mapping) else headers
    )
    return [[str(k), str(v)] for k, v in items]


def _body(body: Any) -> Any:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body).decode("utf-8", errors="replace")
    return body


def from_response(
    status: int,
    headers: Headers = None,
    body: Any = None,
    *,
    call: Optional[str] = None,
    provider: Optional[str] = None,
    request_id: Optional[str] = None,
) -> Observation:
    """An HTTP observation. `body` may be text, bytes, or already-parsed JSON."""
    obs: Observation = {"source": "http", "status": int(status), "headers": _pairs(headers)}
    body = _body(body)
    if body is not None:
        obs["body"] = body
    return _extras(obs, call, provider, request_id)


def from_rpc(
    message: Any,
    protocol: str = "jsonrpc",
    *,
    call: Optional[str] = None,
    request_id: Optional[str] = None,
) -> Observation:
    """A JSON-RPC / MCP / A2A observation (`protocol`: jsonrpc, mcp or a2a).

    `message` is the response or notification, as a dict or JSON text, e.g.
    an MCP `tools/call` result with `isError: true` or an A2A failed task.
    """
    return _extras({"source": protocol, "message": message}, call, None, request_id)


def _response_of(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return response
    return None


def _response_text(response: Any) -> Any:
    try:
        return response.text  # httpx / requests; may raise on an unread stream
    except Exception:
        try:
            content = response.content  # httpx raises ResponseNotRead for a stream too
        except Exception:
            return None
        return content if isinstance(content, (bytes, str)) else None


def from_exception(
    exc: BaseException,
    *,
    call: Optional[str] = None,
    provider: Optional[str] = None,
    request_id: Optional[str] = None,
) -> Observation:
    """An observation of an exception.

    - An HTTP status error carrying a response (`httpx.HTTPStatusError`,
      `requests.HTTPError`, the OpenAI and Anthropic SDKs' `APIStatusError`)
      becomes an HTTP observation of that response: status, headers, body.
    - A bare `OSError` with a known `errno` (or a `socket.gaierror`) becomes a
      network observation with the code (`ECONNRESET`, `EAI_AGAIN`).
    - Anything else becomes `{"source": "exception", "type": "<module>.<QualName>",
      "message": str(exc)}`; the message is kept, never used to classify.
    """
    response = _response_of(exc)
    if response is not None:
        return from_response(
            response.status_code,
            getattr(response, "headers", None),
            _response_text(response),
            call=call,
            provider=provider,
            request_id=request_id,
        )
    code = None
    if isinstance(exc, socket.gaierror) and exc.errno in _GAI_CODES:
        code = _GAI_CODES[exc.errno]
    elif type(exc) is OSError and isinstance(exc.errno, int) and exc.errno in errno.errorcode:
        code = errno.errorcode[exc.errno]
    if code is not None:
        obs: Observation = {"source": "network", "code": code, "message": str(exc)}
    else:
        obs = {"source": "exception", "type": qualified_name(exc), "message": str(exc)}
    return _extras(obs, call, provider, request_id)


def _extras(
    obs: Observation, call: Optional[str], provider: Optional[str], request_id: Optional[str]
) -> Observation:
    if call is not None:
        obs["call"] = call
    if provider is not None:
        obs["provider"] = provider
    if request_id is not None:
        obs["request_id"] = request_id
    return obs


class Failure:
    """Returned (not raised) by an operation to say "this attempt failed".

    `retry` hands `observation` to the policy. Build one with the helpers:
    `Failure(from_response(503, headers, body))`, `Failure.response(...)`,
    `Failure.rpc(mcp_result, "mcp")`.
    """

    __slots__ = ("observation", "value")

    def __init__(self, observation: Observation, value: Any = None) -> None:
        self.observation = observation
        #: Whatever the operation wants to keep with the failure (the response).
        self.value = value

    @classmethod
    def response(cls, status: int, headers: Headers = None, body: Any = None, **kw: Any) -> "Failure":
        """A failed HTTP response."""
        return cls(from_response(status, headers, body, **kw))

    @classmethod
    def rpc(cls, message: Any, protocol: str = "jsonrpc", **kw: Any) -> "Failure":
        """A failed JSON-RPC / MCP / A2A exchange."""
        return cls(from_rpc(message, protocol, **kw))

    def __repr__(self) -> str:
        return f"Failure({self.observation!r})"


def as_failure(result: Any) -> Optional[Failure]:
    """The failure a returned value stands for, or None for a success.

    A `Failure` is one; so is a response object (`status_code` int and
    `headers`, as in httpx and requests) with a status of 400 or more, an MCP
    `CallToolResult` with `isError: true`, and an A2A task in a failed,
    rejected, canceled, input-required or auth-required state
    (`adapters.failed_result`).
    """
    if isinstance(result, Failure):
        return result
    from .adapters import failed_result  # adapters builds on this module

    sdk = failed_result(result)
    if sdk is not None:
        return Failure(sdk, result)
    status = getattr(result, "status_code", None)
    if (
        isinstance(status, int)
        and not isinstance(status, bool)
        and status >= 400
        and hasattr(result, "headers")
    ):
        return Failure(from_response(status, result.headers, _response_text(result)), result)
    return None
