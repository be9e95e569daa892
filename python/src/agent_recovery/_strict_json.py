"""JSON text that carries a Python value exactly, or a clear refusal.

`json.dumps` writes values the component cannot read back as they were: NaN and
Infinity (not JSON), integers outside [-2^63, 2^64) (read back as floats), dicts
whose keys collide once written as strings (`{1: "a", "1": "b"}`: one is lost),
strings with a lone surrogate (not UTF-8), and cycles (a raw `ValueError`).
`dumps` refuses each of them with a `JsonValueError` whose message names the
path of the value (`result.items[2].price`) and ends with a hint.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Dict, List, Optional

_I64_MIN = -(1 << 63)
_U64_END = 1 << 64
_MAX_DEPTH = 256
_HINT = (
    "pass dicts with string keys, lists, strings, finite floats, integers in "
    "[-2**63, 2**64), booleans and None (a bigger integer as a string)"
)


class JsonValueError(ValueError):
    """A value that JSON cannot carry exactly; the message names its path."""


def dumps(
    value: Any,
    root: str = "value",
    *,
    default: Optional[Callable[[Any], Any]] = None,
    scrub: bool = False,
) -> str:
    """Compact UTF-8 JSON text of `value`, checked first (see the module).

    `default` converts an object of another type (as in `json.dumps`); without
    it such an object is refused. With `scrub` (for an observation, which the
    component reads and never returns), a lone surrogate in a string becomes
    U+FFFD instead of being refused, and an integer of any size is written as
    it is (an API's large id in a response body is no reason to refuse it)."""
    if _is_plain(value, 0):
        # Only exact plain types: the text `_plain` would have written, unless
        # a string holds a lone surrogate (then the walk below names it).
        text = _ENCODE(value)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return text
    plain = _plain(value, root, [], 0, default, scrub)
    return _ENCODE(plain)


def _is_plain(v: Any, depth: int) -> bool:
    """Is `v` made only of `dict` (with `str` keys), `list`, `str`, `int` in
    [-2^63, 2^64), finite `float`, `bool` and None, exactly those types and
    nested at most as deep as `_plain` allows? Then `_plain` would copy it
    unchanged (a cycle ends here as too deep, and `_plain` names it)."""
    t = type(v)
    if t is str or t is bool or v is None:
        return True
    if t is int:
        return bool(_I64_MIN <= v < _U64_END)
    if t is float:
        return math.isfinite(v)
    if depth >= _MAX_DEPTH:
        return False
    if t is dict:
        for k, item in v.items():
            if type(k) is not str or not _is_plain(item, depth + 1):
                return False
        return True
    if t is list:
        for item in v:
            if not _is_plain(item, depth + 1):
                return False
        return True
    return False


def _encoder() -> Callable[[Any], str]:
    """`json.dumps(v, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`:
    the C encoder that `json.JSONEncoder.encode` builds on every call (the same
    arguments), built once. Without cycle checks (`markers` None) and without
    `default`: it only ever sees plain values (`_is_plain`, or `_plain`'s
    copy), which hold no cycle and nothing to convert."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encode
    iterencode = make(None, None, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    return lambda value: "".join(iterencode(value, 0))


_ENCODE = _encoder()


def _refuse(path: str, what: str) -> JsonValueError:
    return JsonValueError(f"{path} {what}, which JSON cannot carry exactly; {_HINT}")


def _text(s: str, path: str, scrub: bool) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        if scrub:
            return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        raise _refuse(path, f"holds a lone surrogate at character {e.start}") from None
    return s


def _key(k: Any, path: str, scrub: bool) -> str:
    """The key as `json.dumps` writes it."""
    where = f"a key of {path}"
    if isinstance(k, str):
        return _text(k, where, scrub)
    if k is True or k is False or k is None:
        return json.dumps(k)
    if isinstance(k, int):
        if not _I64_MIN <= k < _U64_END:
            raise _refuse(where, f"is the integer {k}, outside [-2**63, 2**64)")
        return str(k)
    if isinstance(k, float) and math.isfinite(k):
        return repr(k)
    raise _refuse(where, f"is {k!r}" if isinstance(k, float) else f"is a {type(k).__name__}")


def _member(path: str, name: str) -> str:
    return f"{path}.{name}" if name.isidentifier() else f"{path}[{json.dumps(name)}]"


def _plain(
    v: Any, path: str, above: List[int], depth: int, default: Optional[Callable[[Any], Any]], scrub: bool
) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        return _text(v, path, scrub)
    if isinstance(v, int):
        if not scrub and not _I64_MIN <= v < _U64_END:
            raise _refuse(path, f"is the integer {v}, outside [-2**63, 2**64)")
        return int(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise _refuse(path, f"is {v}")
        return float(v)
    if depth >= _MAX_DEPTH:
        raise _refuse(path, f"is nested more than {_MAX_DEPTH} levels deep")
    if isinstance(v, (dict, list, tuple)):
        if id(v) in above:
            raise _refuse(path, "contains itself (a cycle)")
        above.append(id(v))
        try:
            if isinstance(v, dict):
                out: Dict[str, Any] = {}
                first: Dict[str, Any] = {}
                for k, item in v.items():
                    name = _key(k, path, scrub)
                    if name in out:
                        raise _refuse(
                            path, f"has the keys {first[name]!r} and {k!r}, both written as {json.dumps(name)}"
                        )
                    first[name] = k
                    out[name] = _plain(item, _member(path, name), above, depth + 1, default, scrub)
                return out
            return [_plain(item, f"{path}[{i}]", above, depth + 1, default, scrub) for i, item in enumerate(v)]
        finally:
            above.pop()
    if default is not None:
        return _plain(default(v), path, above, depth + 1, None, scrub)
    raise _refuse(path, f"is a {type(v).__name__}")
