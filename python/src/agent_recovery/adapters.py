"""Observations straight from SDK objects: `observation_from(exc_or_result)`.

Accepts what the provider and protocol SDKs raise or return, with no hand
work, and describes it in the observation format the policy reads (README
"The observation (input)"). Like `observe`, it never classifies: it picks the
most *structured* description the object carries (status, headers and body
of the HTTP response; the JSON-RPC error or result; the transport failure
at the root of the cause chain) and leaves the meaning to the component.

No SDK is a dependency. Objects are recognised by the module their class is
defined in (`openai.*`, `anthropic.*`, `botocore.*`, `google.api_core.*`,
`google.genai.*`, `mcp.*` / `mcp_types.*`, `a2a.*`, `httpx*`, `httpcore*`,
`requests.*`, `urllib3.*`, and the frameworks `pydantic_ai.*`, `agents.*`,
`langchain*`, `langgraph.*`, `litellm.*`) and read by attribute, so importing this module
imports none of them; the few SDK tables used (the A2A error-code map,
protobuf's `MessageToDict`) are imported only when such an object arrives.

| object | observation |
|---|---|
| OpenAI / Anthropic `APIStatusError` (and subclasses) | `http`: the response's status, headers and raw body (an error event in a 200 stream: status 200, the event as the body) |
| OpenAI `APIError` from an `error` event in a stream | `http` status 200, body `{"error": <the event's error>}` |
| OpenAI / Anthropic `APIConnectionError` / `APITimeoutError` | the transport failure in `__cause__` (below) |
| botocore `ClientError` | `http`: `ResponseMetadata.HTTPStatusCode`, `HTTPHeaders`, body `{"__type": Error.Code, "message": Error.Message}` |
| botocore `ConnectTimeoutError` / `ReadTimeoutError` | `timeout` with phase `connect` / `read` |
| botocore `EndpointConnectionError`, `ConnectionClosedError`, ... | the transport failure in `kwargs["error"]` / `__cause__` |
| `google.api_core.exceptions.GoogleAPICallError` | `http` from its `response` when it has one, else status `code` and a `google.rpc.Status` body (`status`, `message`, `details`, `errors`; protobuf details as JSON with `@type`) |
| `google.api_core.exceptions.RetryError` | its `cause` |
| `google.genai.errors.APIError` | `http` from its `response`, else status `code` and its `details` body |
| MCP `CallToolResult` | `mcp`: a JSON-RPC response whose `result` is the tool result (`isError`, `content`, `structuredContent`) |
| MCP `MCPError` / `McpError` | `mcp`: a JSON-RPC response whose `error` is its `ErrorData` |
| A2A `Task`, `TaskStatusUpdateEvent`, `StreamResponse` (protobuf) | `a2a`: a JSON-RPC response whose `result` is the message as JSON |
| A2A `A2AError` subclasses | `a2a`: a JSON-RPC error with the SDK's own code for the class |
| A2A `A2AClientTimeoutError` | `timeout`, phase `total` |
| PydanticAI, OpenAI Agents SDK, LangChain / LangGraph, LiteLLM exceptions; any `BaseExceptionGroup` | `exception` with the `status`, `headers` and `body` the error carries, its `retryable` verdict, the observation of its `__cause__` (else `__context__`) as `cause` and of a group's members as `exceptions` (`_frameworks`); LiteLLM's `llm_provider` as `provider` |
| other A2A client errors, any other exception | the HTTP response in the cause chain (e.g. an `httpx.HTTPStatusError`), else the transport failure, else `exception` with what it carries, as above |
| transport failures (httpx / httpx2 / httpcore timeouts, `OSError` with an errno, `socket.gaierror`, urllib3 / requests timeouts) | `timeout` with the phase, or `network` with the errno name (`ECONNREFUSED`, `ECONNRESET`) |
| `Failure` | its observation |
| a dict | itself (already an observation) |
| anything else | `observe.from_exception` (an exception), else an `exception` observation of its type |

`failed_result(result)` says whether a *returned* SDK object is a failure (an
MCP `isError` result, an A2A task in a failed / interrupted state) and gives its
observation; `observe.as_failure`, and so the retry helpers, use it.
"""

from __future__ import annotations

import errno
import json
import socket
from typing import Any, Dict, List, Mapping, Optional

from ._exception_obs import enrich, safe_message
from ._frameworks import framework_observation
from .observe import Failure, _extras, _response_text, from_exception, from_response, qualified_name
from .types import Observation

__all__ = ["failed_result", "observation_from"]

# How far `__cause__` chains are followed (they may be cyclic).
_MAX_CHAIN = 16

# Timeout classes of the HTTP stacks, by class name, and the phase each means.
_TIMEOUT_PHASES = {
    "ConnectTimeout": "connect",
    "ConnectTimeoutError": "connect",
    "ReadTimeout": "read",
    "ReadTimeoutError": "read",
    "WriteTimeout": "write",
    "PoolTimeout": "pool",
}
_CHAINING_ROOTS = (
    "httpx", "httpx2", "httpcore", "httpcore2", "urllib3", "requests", "botocore", "aiohttp",
    "openai", "anthropic", "google", "mcp", "a2a",
)
_TRANSPORT_ROOTS = ("httpx", "httpx2", "httpcore", "httpcore2", "urllib3", "requests", "botocore", "aiohttp")

_GAI_CODES = {
    getattr(socket, name): name
    for name in ("EAI_AGAIN", "EAI_NONAME", "EAI_NODATA")
    if hasattr(socket, name)
}


def _root(cls: type) -> str:
    return (cls.__module__ or "").split(".", 1)[0]


def _module(obj: Any) -> str:
    return type(obj).__module__ or ""


def _names(obj: Any) -> List[str]:
    """The class names of `obj`'s type and its bases (most derived first)."""
    return [c.__name__ for c in type(obj).__mro__]


def observation_from(
    obj: Any,
    *,
    call: Optional[str] = None,
    provider: Optional[str] = None,
    request_id: Optional[str] = None,
) -> Observation:
    """The observation for an SDK exception or result (see the module's table).

    `call` (`tool`, `llm`, `agent`) and `provider` are added when given; the
    provider defaults to the SDK's (`openai`, `anthropic`, `aws`, `google`)
    for HTTP errors of those SDKs. Never raises for an unknown object: an
    exception falls back to `from_exception`, and anything else becomes an
    `exception` observation of its type.
    """
    return _observe_safe(obj, call, provider, request_id, 0, frozenset())


def _observe_safe(
    obj: Any,
    call: Optional[str],
    provider: Optional[str],
    request_id: Optional[str],
    depth: int,
    above: frozenset[int],
) -> Observation:
    try:
        return _observe(obj, call, provider, request_id, depth, above)
    except Exception:  # a hostile object (raising __str__ or properties): its type alone
        return _extras(
            {"source": "exception", "type": _type_name(obj), "message": ""}, call, provider, request_id
        )


def _nested(exc: BaseException, depth: int, above: frozenset[int]) -> Observation:
    """The observation of a cause or an exception group's member."""
    return _observe_safe(exc, None, None, None, depth, above)


def _type_name(obj: Any) -> str:
    cls = type(obj)
    return f"{getattr(cls, '__module__', None) or 'builtins'}.{getattr(cls, '__qualname__', 'object')}"


def _safe_str(obj: Any) -> str:
    try:
        return str(obj)[:200]
    except Exception:
        return ""


def _observe(
    obj: Any,
    call: Optional[str],
    provider: Optional[str],
    request_id: Optional[str],
    depth: int,
    above: frozenset[int],
) -> Observation:
    if isinstance(obj, Failure):
        obs: Observation = dict(obj.observation)
        return _extras(obs, call, provider, request_id)
    if isinstance(obj, Mapping):
        obs = dict(obj)
        return _extras(obs, call, provider, request_id)
    module = _module(obj)
    root = module.split(".", 1)[0]
    try:
        if root in ("openai", "anthropic"):
            found = _stainless(obj, root, call, provider, request_id)
        elif root == "botocore":
            found = _botocore(obj, call, provider, request_id)
        elif module.startswith("google.api_core"):
            found = _google_api_core(obj, call, provider, request_id)
        elif module.startswith("google.genai"):
            found = _google_genai(obj, call, provider, request_id)
        elif root in ("mcp", "mcp_types"):
            found = _mcp(obj, call, request_id)
        elif root == "a2a" or _is_a2a_proto(obj):
            found = _a2a(obj, call, request_id)
        else:
            found = None
    except Exception:  # an SDK object in an unexpected shape: describe it plainly
        found = None
    if found is not None:
        return found
    if isinstance(obj, BaseException):
        framework = framework_observation(obj, root, depth, above, _nested)
        if framework is not None:
            return _extras(framework, call, provider, request_id)
        transport = _response_in_chain(obj) or _transport(obj)
        if transport is not None:
            return _extras(transport, call, provider, request_id)
        try:
            obs = from_exception(obj, call=call, provider=provider, request_id=request_id)
        except Exception:  # a raising __str__: the type, and what else can be read
            obs = _extras({"source": "exception", "type": _type_name(obj)}, call, provider, request_id)
        if obs.get("source") == "exception":
            obs["message"] = safe_message(obj)
            enrich(obs, obj, depth, above, _nested)
        return obs
    return _extras(
        {"source": "exception", "type": _type_name(obj), "message": _safe_str(obj)},
        call,
        provider,
        request_id,
    )


# -- transport failures ------------------------------------------------------------


def _chain(exc: BaseException) -> List[BaseException]:
    """`exc`, then its causes, outermost first, without repeats: `__cause__`,
    else botocore's `kwargs["error"]`, else, for an exception of an HTTP stack
    or SDK only, `__context__` (httpcore maps the socket error `from None`).
    The context of any other exception is not followed: an exception raised
    while handling another is not caused by it."""
    out: List[BaseException] = []
    seen = set()
    cur: Optional[BaseException] = exc
    while cur is not None and id(cur) not in seen and len(out) < _MAX_CHAIN:
        seen.add(id(cur))
        out.append(cur)
        nxt = cur.__cause__
        if nxt is None:
            try:
                kwargs = getattr(cur, "kwargs", None)
            except Exception:
                kwargs = None
            inner = kwargs.get("error") if isinstance(kwargs, dict) else None
            nxt = inner if isinstance(inner, BaseException) else None
        if nxt is None and _root(type(cur)) in _CHAINING_ROOTS:
            nxt = cur.__context__
        cur = nxt
    return out


def _timeout_after_ms(exc: BaseException, phase: str) -> Optional[int]:
    """The configured timeout of `phase`, from an httpx request's extensions."""
    for link in _chain(exc):
        try:
            request = getattr(link, "request", None)
            ext = getattr(request, "extensions", None)
        except Exception:  # httpx raises when an exception has no request
            continue
        timeout = ext.get("timeout") if isinstance(ext, Mapping) else None
        value = timeout.get(phase) if isinstance(timeout, Mapping) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 86_400:
            return int(round(value * 1000))
    return None


def _response_in_chain(exc: BaseException) -> Optional[Observation]:
    """An `http` observation of the first HTTP response carried in the chain
    (e.g. the `httpx.HTTPStatusError` an SDK wrapped)."""
    for link in _chain(exc):
        response = getattr(link, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            return from_response(status, getattr(response, "headers", None), _response_text(response))
    return None


def _transport(exc: BaseException) -> Optional[Observation]:
    """A `timeout` or `network` observation for a transport failure in the chain."""
    chain = _chain(exc)
    for link in chain:
        if _root(type(link)) in _TRANSPORT_ROOTS:
            # the class's own name: urllib3's NewConnectionError derives from
            # ConnectTimeoutError but is not a timeout
            for name in (type(link).__name__,):
                phase = _TIMEOUT_PHASES.get(name)
                if phase is not None:
                    obs: Observation = {"source": "timeout", "phase": phase}
                    after = _timeout_after_ms(exc, phase)
                    if after is not None:
                        obs["after_ms"] = after
                    return obs
    for link in reversed(chain):  # the root cause says most
        code = None
        if isinstance(link, socket.gaierror) and link.errno in _GAI_CODES:
            code = _GAI_CODES[link.errno]
        elif isinstance(link, OSError) and isinstance(link.errno, int) and link.errno in errno.errorcode:
            code = errno.errorcode[link.errno]
        if code is not None:
            return {"source": "network", "code": code, "message": _safe_str(link)}
    for link in reversed(chain):
        if _root(type(link)) in ("httpx", "httpx2", "httpcore", "httpcore2"):
            return {"source": "exception", "type": qualified_name(link), "message": _safe_str(link)}
    return None


# -- OpenAI and Anthropic (Stainless SDKs) -------------------------------------------


def _stainless(
    exc: Any, sdk: str, call: Optional[str], provider: Optional[str], request_id: Optional[str]
) -> Optional[Observation]:
    if not isinstance(exc, BaseException):
        return None
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if "APIStatusError" in _names(exc) and isinstance(status, int) and not isinstance(status, bool):
        # An error event inside a 200 event stream (Anthropic raises it as a
        # status error of the 200 response): the event's data is the body.
        in_stream = status < 400
        body = None if in_stream else _response_text(response)
        if body is None:
            body = getattr(exc, "body", None)
        return from_response(
            status,
            getattr(response, "headers", None),
            body,
            call=call,
            provider=provider or sdk,
            request_id=request_id,
        )
    names = _names(exc)
    body = getattr(exc, "body", None)
    if names[0] == "APIError" and isinstance(body, Mapping) and response is None:
        # OpenAI: an `error` event inside a 200 event stream; `body` is its `error`
        return from_response(
            200, None, {"error": dict(body)}, call=call, provider=provider or sdk, request_id=request_id
        )
    if "APIConnectionError" in names:
        transport = _transport(exc)
        if transport is not None:
            return _extras(transport, call, provider or sdk, request_id)
    return None


# -- botocore ------------------------------------------------------------------------


def _botocore(
    exc: Any, call: Optional[str], provider: Optional[str], request_id: Optional[str]
) -> Optional[Observation]:
    if not isinstance(exc, BaseException):
        return None
    names = _names(exc)
    parsed = getattr(exc, "response", None)
    if "ClientError" in names and isinstance(parsed, Mapping):
        error = parsed.get("Error") or {}
        meta = parsed.get("ResponseMetadata") or {}
        status = meta.get("HTTPStatusCode")
        if not isinstance(status, int) or isinstance(status, bool):
            status = 400 if error.get("Type") == "Sender" else 500
        body: Dict[str, Any] = {}
        if error.get("Code"):
            body["__type"] = str(error["Code"])
        if error.get("Message"):
            body["message"] = str(error["Message"])
        return from_response(
            status,
            meta.get("HTTPHeaders"),
            body or None,
            call=call,
            provider=provider or "aws",
            request_id=request_id or meta.get("RequestId") or None,
        )
    if "ConnectTimeoutError" in names:
        return _extras({"source": "timeout", "phase": "connect"}, call, provider or "aws", request_id)
    if "ReadTimeoutError" in names:
        return _extras({"source": "timeout", "phase": "read"}, call, provider or "aws", request_id)
    if "HTTPClientError" in names or "ConnectionError" in names:
        transport = _transport(exc)
        if transport is not None and transport["source"] != "exception":
            return _extras(transport, call, provider or "aws", request_id)
        if "ConnectionClosedError" in names:
            obs: Observation = {"source": "network", "code": "ECONNRESET", "message": _safe_str(exc)}
            return _extras(obs, call, provider or "aws", request_id)
    return None


# -- Google ----------------------------------------------------------------------------


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError, RecursionError):
        return False


def _detail(detail: Any) -> Any:
    """A `google.rpc.Status` detail as JSON: REST gives dicts, gRPC unpacked
    protobuf messages (`RetryInfo`, `QuotaFailure`, ...), written with their `@type`."""
    full_name = getattr(getattr(detail, "DESCRIPTOR", None), "full_name", None)
    if isinstance(full_name, str) and hasattr(detail, "SerializeToString"):
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped, unused-ignore]

        return {"@type": f"type.googleapis.com/{full_name}", **MessageToDict(detail)}
    return detail


def _google_api_core(
    exc: Any, call: Optional[str], provider: Optional[str], request_id: Optional[str]
) -> Optional[Observation]:
    if not isinstance(exc, BaseException):
        return None
    names = _names(exc)
    if "RetryError" in names:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException) and cause is not exc:
            return observation_from(cause, call=call, provider=provider, request_id=request_id)
        return None
    if "GoogleAPICallError" not in names:
        return None
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        text = _response_text(response)
        if text:
            return from_response(
                status,
                getattr(response, "headers", None),
                text,
                call=call,
                provider=provider or "google",
                request_id=request_id,
            )
    code = getattr(exc, "code", None)
    error: Dict[str, Any] = {}
    if isinstance(code, int) and not isinstance(code, bool):
        error["code"] = code
    grpc_status = getattr(exc, "grpc_status_code", None)
    grpc_name = getattr(grpc_status, "name", None)
    if isinstance(grpc_name, str):
        error["status"] = grpc_name
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        error["message"] = message
    details = [_detail(d) for d in (getattr(exc, "details", None) or [])]
    details = [d for d in details if isinstance(d, dict) and _jsonable(d)]
    if details:
        error["details"] = details
    errors = [e for e in (getattr(exc, "errors", None) or []) if isinstance(e, dict) and _jsonable(e)]
    if errors:
        error["errors"] = errors
    if not isinstance(code, int) or isinstance(code, bool) or code < 400:
        # No HTTP status (a gRPC code without grpcio's mapping): nothing structured
        return None
    return from_response(
        code, None, {"error": error}, call=call, provider=provider or "google", request_id=request_id
    )


def _google_genai(
    exc: Any, call: Optional[str], provider: Optional[str], request_id: Optional[str]
) -> Optional[Observation]:
    if not isinstance(exc, BaseException) or "APIError" not in _names(exc):
        return None
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        status = getattr(exc, "code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        return None
    body: Any = None
    if response is not None and getattr(response, "status_code", None) is not None:
        body = _response_text(response)
    if not body:
        details = getattr(exc, "details", None)
        body = details if _jsonable(details) else None
    headers = getattr(response, "headers", None) if response is not None else None
    return from_response(
        status, headers, body, call=call, provider=provider or "google", request_id=request_id
    )


# -- MCP ---------------------------------------------------------------------------------


def _dump(model: Any) -> Any:
    """A pydantic model in its wire form (camelCase aliases, no unset fields)."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _mcp(obj: Any, call: Optional[str], request_id: Optional[str]) -> Optional[Observation]:
    names = _names(obj)
    if "CallToolResult" in names and hasattr(obj, "model_dump"):
        result = _dump(obj)
        message = {"jsonrpc": "2.0", "id": None, "result": result}
        return _extras({"source": "mcp", "message": message}, call or "tool", None, request_id)
    if ("MCPError" in names or "McpError" in names) and hasattr(getattr(obj, "error", None), "model_dump"):
        message = {"jsonrpc": "2.0", "id": None, "error": _dump(obj.error)}
        return _extras({"source": "mcp", "message": message}, call or "tool", None, request_id)
    if "ErrorData" in names and hasattr(obj, "model_dump"):
        message = {"jsonrpc": "2.0", "id": None, "error": _dump(obj)}
        return _extras({"source": "mcp", "message": message}, call or "tool", None, request_id)
    return None


# -- A2A ---------------------------------------------------------------------------------


def _is_a2a_proto(obj: Any) -> bool:
    """A protobuf message of the A2A schema (a2a-sdk 1.x: package `lf.a2a.v1`)."""
    name = getattr(getattr(obj, "DESCRIPTOR", None), "full_name", None)
    return isinstance(name, str) and "a2a" in name.split(".")[:-1]


def _a2a_code(exc: BaseException) -> Optional[int]:
    try:
        from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP
    except Exception:
        return None
    for cls in type(exc).__mro__:
        code = JSON_RPC_ERROR_CODE_MAP.get(cls)
        if isinstance(code, int):
            return code
    return None


def _a2a(obj: Any, call: Optional[str], request_id: Optional[str]) -> Optional[Observation]:
    names = _names(obj)
    if isinstance(obj, BaseException):
        if "A2AClientTimeoutError" in names:
            return _extras({"source": "timeout", "phase": "total"}, call or "agent", "a2a", request_id)
        code = _a2a_code(obj)
        if code is None:  # a client error: the HTTP response or transport failure under it
            transport = _response_in_chain(obj) or _transport(obj)
            if transport is not None:
                return _extras(transport, call or "agent", None, request_id)
            return None
        error: Dict[str, Any] = {"code": code, "message": _safe_str(getattr(obj, "message", "") or obj)}
        data = getattr(obj, "data", None)
        if data is not None and _jsonable(data):
            error["data"] = data
        message = {"jsonrpc": "2.0", "id": None, "error": error}
        return _extras({"source": "a2a", "message": message}, call or "agent", None, request_id)
    if hasattr(obj, "DESCRIPTOR") and hasattr(obj, "SerializeToString"):  # a protobuf message
        from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped, unused-ignore]

        result = MessageToDict(obj)
        message = {"jsonrpc": "2.0", "id": None, "result": result}
        return _extras({"source": "a2a", "message": message}, call or "agent", None, request_id)
    if hasattr(obj, "model_dump"):  # a2a-sdk 0.x pydantic models
        message = {"jsonrpc": "2.0", "id": None, "result": _dump(obj)}
        return _extras({"source": "a2a", "message": message}, call or "agent", None, request_id)
    return None



# -- results that are failures ----------------------------------------------------------------

# A2A task states that end or interrupt a task without its result (v1.0 enum
# names; v0.3 spellings are normalised to these).
_A2A_FAILED_STATES = {
    "TASK_STATE_FAILED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_CANCELLED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
}


def _a2a_state(result: Any) -> Optional[str]:
    """The task state a returned A2A message reports, normalised to `TASK_STATE_*`."""
    for holder in (result, result.get("task"), result.get("statusUpdate")):
        if isinstance(holder, Mapping):
            status = holder.get("status")
            state = status.get("state") if isinstance(status, Mapping) else None
            if isinstance(state, str):
                state = state.upper().replace("-", "_")
                return state if state.startswith("TASK_STATE_") else "TASK_STATE_" + state
    return None


def failed_result(result: Any) -> Optional[Observation]:
    """The observation of an SDK *result* that reports a failure, else None.

    An MCP `CallToolResult` with `isError: true`; an A2A task (or status-update
    event, or stream response) whose state is failed, rejected, canceled,
    input-required or auth-required. Everything else (a successful result,
    an unknown object) is None. Used by `as_failure`, so the retry helpers
    treat such returned values as failed attempts.
    """
    try:
        names = _names(result)
        if "CallToolResult" in names and _root(type(result)) in ("mcp", "mcp_types"):
            is_error = getattr(result, "is_error", None)
            if is_error is None:
                is_error = getattr(result, "isError", False)
            return observation_from(result) if is_error is True else None
        if _root(type(result)) == "a2a" or _is_a2a_proto(result):
            obs = observation_from(result)
            message = obs.get("message")
            payload = message.get("result") if isinstance(message, Mapping) else None
            if isinstance(payload, Mapping) and _a2a_state(payload) in _A2A_FAILED_STATES:
                return obs
    except Exception:
        return None
    return None
