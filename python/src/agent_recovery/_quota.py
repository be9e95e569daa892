"""The fleet retry quota's bounded add, carried out on any store.

The loop keeps the token bucket's logic; a runtime only answers its `take`
effect and carries out its `refund` effect with a compare-and-set loop on the
entry `{"tokens": N}` (absent = `capacity`; no TTL; clamped to 0..capacity),
so it is atomic on any store (SQLite file, Redis, the fallback's local file).
A value that is not `{"tokens": <integer>}` counts as a full bucket and is
overwritten by the next write.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Tuple

from .store import StoreError, Written

#: Conflicts in a row after which a take or refund gives up (`unavailable`).
MAX_ROUNDS = 1000


def _tokens(value: Optional[str], capacity: int) -> int:
    if value is None:
        return capacity
    try:
        n = json.loads(value).get("tokens")
    except (ValueError, AttributeError):
        return capacity
    if not isinstance(n, int) or isinstance(n, bool):
        return capacity
    return max(0, min(capacity, n))


def bounded_add(store: Any, key: str, delta: int, capacity: int, now_ms: int, need: int = 0) -> Tuple[bool, int]:
    """Add `delta` (negative: take) to the bucket at `key`, clamped to
    0..capacity, unless it holds fewer than `need` tokens. Returns (written,
    tokens after, or the tokens found when not written)."""
    for _ in range(MAX_ROUNDS):
        cur = store.get(key, now_ms)
        tokens = _tokens(cur.value if cur is not None else None, capacity)
        if tokens < need:
            return False, tokens
        after = max(0, min(capacity, tokens + delta))
        cas = store.compare_and_set(
            key, cur.version if cur is not None else None, f'{{"tokens":{after}}}', None, now_ms
        )
        if isinstance(cas, Written):
            return True, after
    raise StoreError("unavailable", f"the retry quota {key!r} changed {MAX_ROUNDS} times in a row; retry later")


def take(store: Any, key: str, cost: int, capacity: int, now_ms: int) -> Tuple[bool, int]:
    """Take `cost` tokens when the bucket holds at least that many."""
    return bounded_add(store, key, -cost, capacity, now_ms, need=cost)


def refund(store: Any, key: str, amount: int, capacity: int, now_ms: int) -> int:
    """Give `amount` tokens back (never past `capacity`)."""
    return bounded_add(store, key, amount, capacity, now_ms)[1]
