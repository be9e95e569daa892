"""The `exception` observation of a raised error, read fully.

What a framework raises (PydanticAI's `ModelHTTPError`, an openai-agents
exception, a LangChain error, a LiteLLM exception, an `ExceptionGroup`) is
described as

    {"source": "exception", "type": "<module>.<QualName>", "message": str,
     "status": int, "headers": {lower-case name: str}, "body": JSON or str,
     "retryable": bool, "cause": <observation>, "exceptions": [<observation>...]}

with the members the error does not carry left out. `status`, `headers` and
`body` are the HTTP response the error carries (its own attributes first,
then its `response`); `retryable` is the framework's own verdict when it gives
one; `cause` is the observation of `__cause__`; `exceptions` those of an
exception group's members. Nothing here classifies: the component does.

Every read is guarded (a raising `__str__` or property is skipped), and what
is copied is bounded: causes and groups to `MAX_DEPTH` levels, a group to
`MAX_MEMBERS` members (the first ones and the last), a body to
`MAX_BODY_CHARS` characters, cycles cut.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Mapping, Optional

from .types import Observation

__all__ = ["MAX_BODY_CHARS", "MAX_DEPTH", "MAX_MEMBERS", "enrich"]

#: How many levels of `cause` / group members are read below the error itself.
MAX_DEPTH = 8
#: How many members of an exception group are read (the first ones and the last).
MAX_MEMBERS = 16
#: How many characters of a body are copied; a longer text body is cut (and kept as text).
MAX_BODY_CHARS = 64 * 1024
#: How many characters of a message are copied.
MAX_MESSAGE_CHARS = 2000
# Bounds of a body that is already a Python value (dicts and lists).
_MAX_JSON_DEPTH = 32
_MAX_JSON_ITEMS = 1000

# Describes a nested error (a cause, a group member) at a depth, with the ids
# of the errors above it (to cut cycles).
Nested = Callable[[BaseException, int, frozenset[int]], Observation]


def _get(obj: Any, name: str) -> Any:
    """`obj.name`, or None when reading it raises (a hostile property)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def safe_message(exc: BaseException) -> str:
    """`str(exc)`, cut to MAX_MESSAGE_CHARS; "" when `__str__` raises."""
    try:
        text = str(exc)
    except Exception:
        return ""
    return text[:MAX_MESSAGE_CHARS] if isinstance(text, str) else ""


def _status(exc: BaseException) -> Optional[int]:
    for holder, name in ((exc, "status_code"), (exc, "status"), (_get(exc, "response"), "status_code")):
        value = _get(holder, name)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _headers(exc: BaseException) -> Optional[Dict[str, str]]:
    for source in (_get(exc, "headers"), _get(_get(exc, "response"), "headers")):
        if source is None:
            continue
        try:
            multi = getattr(source, "multi_items", None)  # httpx.Headers keeps repeats
            items = multi() if callable(multi) else (
                source.items() if isinstance(source, Mapping) else None
            )
            if items is None:
                continue
            out: Dict[str, str] = {}
            for k, v in list(items)[:256]:
                key = (k.decode("latin-1") if isinstance(k, bytes) else str(k)).lower()
                value = v.decode("latin-1") if isinstance(v, bytes) else str(v)
                out[key] = f"{out[key]}, {value}" if key in out else value
            return out
        except Exception:
            continue
    return None


def _text_body(text: str) -> Any:
    """A text body: parsed when it is JSON (and within the cap), else the text, cut."""
    if len(text) > MAX_BODY_CHARS:
        return text[:MAX_BODY_CHARS]
    try:
        return json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return text


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Budget:
    def __init__(self) -> None:
        self.chars = MAX_BODY_CHARS
        self.items = _MAX_JSON_ITEMS


def _json_value(value: Any, budget: _Budget, depth: int = 0) -> Any:
    """A bounded JSON copy of a Python value; raises ValueError when it is not JSON."""
    if depth > _MAX_JSON_DEPTH or budget.items <= 0 or budget.chars <= 0:
        raise ValueError("body too large")
    budget.items -= 1
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not JSON")
        return value
    if isinstance(value, str):
        budget.chars -= len(value)
        if budget.chars < 0:
            raise ValueError("body too large")
        return value
    if isinstance(value, Mapping):
        out: Dict[str, Any] = {}
        for k, v in list(value.items()):
            if not isinstance(k, str):
                raise ValueError("not JSON")
            budget.chars -= len(k)
            out[k] = _json_value(v, budget, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_json_value(v, budget, depth + 1) for v in value]
    raise ValueError("not JSON")


def body_of(value: Any) -> Any:
    """A body as the observation carries it: parsed JSON when it is JSON, else
    the raw text (cut to MAX_BODY_CHARS), else None (no body, or not readable)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[: MAX_BODY_CHARS * 4])
        return _text_body(raw.decode("utf-8", errors="replace")) if raw else None
    if isinstance(value, str):
        return _text_body(value) if value else None
    try:
        return _json_value(value, _Budget())
    except (ValueError, RecursionError, TypeError):
        pass
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump):
        try:
            return _json_value(dump(mode="json", by_alias=True, exclude_none=True), _Budget())
        except Exception:
            return None
    return None


def _response_body(exc: BaseException) -> Any:
    response = _get(exc, "response")
    if response is None:
        return None
    for name in ("text", "content"):  # httpx raises ResponseNotRead for an unread stream
        value = _get(response, name)
        if isinstance(value, (str, bytes)) and value:
            return body_of(value)
    return None


def _body(exc: BaseException, status: Optional[int]) -> Any:
    """The response's body as sent: from the error's response, else from the
    response of the SDK error it was raised from (same status; PydanticAI keeps
    only the part of the body the SDK parsed), else the error's `body`."""
    body = _response_body(exc)
    if body is None and status is not None:
        cause = _get(exc, "__cause__")
        if cause is not None and _status(cause) == status:
            body = _response_body(cause)
    return body if body is not None else body_of(_get(exc, "body"))


def _retryable(exc: BaseException) -> Optional[bool]:
    for name in ("retryable", "is_retryable", "isRetryable"):
        value = _get(exc, name)
        if isinstance(value, bool):
            return value
    return None


def _members(exc: BaseException) -> List[BaseException]:
    if not isinstance(exc, BaseExceptionGroup):
        return []
    members = _get(exc, "exceptions")
    if not isinstance(members, (tuple, list)):
        return []
    found = [m for m in members if isinstance(m, BaseException)]
    if len(found) > MAX_MEMBERS:  # the first ones and the last
        found = found[: MAX_MEMBERS - 1] + found[-1:]
    return found


def enrich(
    obs: Observation,
    exc: BaseException,
    depth: int,
    above: frozenset[int],
    nested: Nested,
    *,
    context: bool = False,
) -> Observation:
    """Add what `exc` carries to its `exception` observation `obs` (in place).

    `nested(error, depth, above)` describes a cause or a group member. The
    cause is `__cause__`; with `context`, else `__context__` (unless
    suppressed with `from None`): frameworks re-raise inside `except` blocks."""
    status = _status(exc)
    if status is not None:
        obs["status"] = status
    headers = _headers(exc)
    if headers is not None:
        obs["headers"] = headers
    body = _body(exc, status)
    if body is not None:
        obs["body"] = body
    retryable = _retryable(exc)
    if retryable is not None:
        obs["retryable"] = retryable
    if depth >= MAX_DEPTH:
        return obs
    inner = above | {id(exc)}
    cause = _get(exc, "__cause__")
    if cause is None and context and not _get(exc, "__suppress_context__"):
        cause = _get(exc, "__context__")
    if isinstance(cause, BaseException) and id(cause) not in inner:
        obs["cause"] = nested(cause, depth + 1, inner)
    members = [m for m in _members(exc) if id(m) not in inner]
    if members:
        obs["exceptions"] = [nested(m, depth + 1, inner) for m in members]
    return obs
