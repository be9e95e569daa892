"""Recursive subset matching for vectors: objects by subset, the rest exactly."""

from __future__ import annotations

from typing import Any, List


def same(expected: Any, got: Any) -> bool:
    """Exact JSON equality (true is not 1, 1 is 1.0, lists compare in order)."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    if isinstance(expected, list):
        return (
            isinstance(got, list)
            and len(expected) == len(got)
            and all(same(e, g) for e, g in zip(expected, got, strict=True))
        )
    if isinstance(expected, dict):
        return isinstance(got, dict) and expected.keys() == got.keys() and all(
            same(v, got[k]) for k, v in expected.items()
        )
    return bool(expected == got)


def mismatches(expected: Any, got: Any, path: str = "") -> List[str]:
    """Where `got` fails to contain `expected` (empty when it does)."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [f"{path or '/'}: expected an object, got {got!r}"]
        out: List[str] = []
        for key, value in expected.items():
            if key not in got:
                out.append(f"{path}/{key}: missing (expected {value!r})")
            else:
                out.extend(mismatches(value, got[key], f"{path}/{key}"))
        return out
    if not same(expected, got):
        return [f"{path or '/'}: expected {expected!r}, got {got!r}"]
    return []
