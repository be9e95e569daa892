"""Turning Python arguments into the UTF-8 text the component reads.

Text (`str`) and raw bytes are passed through as JSON text; anything else is
written with `json.dumps` (compact, UTF-8, no NaN). The two checks the host makes
before the component sees an input use the component's own error kinds: text
that is not UTF-8 is `invalid_json` (JSON text must be UTF-8, RFC 8259 §8.1),
and an input over `Limits.max_input_bytes` is `too_large`.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .errors import PolicyError
from .limits import MAX_ID_BYTES

_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1


def utf8(value: Any, what: str) -> bytes:
    """`value` (str or bytes-like) as UTF-8 bytes, checked."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise PolicyError(
                "invalid_json",
                f"{what} is not valid UTF-8 (a lone surrogate at character {e.start}); "
                "send JSON text encoded as UTF-8",
            ) from None
    data = bytes(value)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PolicyError(
            "invalid_json",
            f"{what} is not valid UTF-8 at byte {e.start}; send JSON text encoded as UTF-8",
        ) from None
    return data


def _describe(value: Any) -> str:
    """`a dict`, `an int`, `None`: the argument's type for an error message."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def text_only(value: Any, method: str, what: str) -> Any:
    """`value` if it is JSON text (`str` or bytes-like), else `invalid_argument`.

    The `*_json` entry points take text and return the component's text
    unchanged; objects go to the dict methods. Same kind and wording as Node's
    `decideJson()` check.
    """
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return value
    plain = method.removesuffix("_json")
    raise PolicyError(
        "invalid_argument",
        f"{method}() takes {what} as JSON text (a str or UTF-8 bytes), got {_describe(value)}; "
        f"use {plain}() for objects",
    )


def json_text(value: Any, what: str, empty: Optional[bytes] = None) -> bytes:
    """JSON text for `value`: text and bytes as given, other values via `json.dumps`.

    `None` becomes `empty` when that is given.
    """
    if value is None and empty is not None:
        return empty
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return utf8(value, what)
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise PolicyError(
            "invalid_json",
            f"{what} is nested too deeply to write as JSON; flatten it or send the text",
        ) from None
    except (TypeError, ValueError) as e:
        raise PolicyError(
            "invalid_json",
            f"{what} cannot be written as JSON ({e}); pass dicts, lists, strings, "
            "finite numbers, booleans and None",
        ) from None
    return utf8(text, what)


def check_name(what: str, name: Any) -> None:
    """Refuse a name (run id, step id, tool, target) over `MAX_ID_BYTES`."""
    if isinstance(name, str):
        if len(name) <= MAX_ID_BYTES // 4:  # at most 4 bytes a character: short enough
            return
        size = len(name.encode("utf-8", "surrogatepass"))
        if size > MAX_ID_BYTES:
            raise PolicyError(
                "too_large",
                f"`{what}` is {size} bytes, over the {MAX_ID_BYTES}-byte limit of a name; "
                "use a shorter name (a hash of a long one) and put data in `args`",
            )


def check_size(total: int, limit: int) -> None:
    """Refuse an input over the host's limit before any call."""
    if total > limit:
        raise PolicyError(
            "too_large",
            f"input is {total} bytes, over the host's {limit}-byte limit; "
            "truncate the body before classifying",
        )


def integer(value: Any, what: str, maximum: int, kind: str = "invalid_argument") -> int:
    """A non-negative integer up to `maximum` (a decimal string is accepted)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise PolicyError(
            kind,
            f"{what} must be an integer from 0 to {maximum}, got {value!r}; pass a plain int",
        )
    return value


U32 = _U32
U64 = _U64
