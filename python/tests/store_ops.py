"""One store operation in the JSON form of tests/store/operations.json.

Shared by test_store.py (the vectors) and store_worker.py (the worker the
cross-process tests drive); the Rust and Node suites have the same function.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Union

from agent_recovery.store import Conflict, MemoryStore, SqliteStore, StoreError, Versioned, Written

AnyStore = Union[MemoryStore, SqliteStore]


def versioned(v: Optional[Versioned]) -> Any:
    return None if v is None else {"value": v.value, "version": v.version}


def outcome(run: Callable[[], Any], ok: Callable[[Any], Any]) -> Any:
    try:
        result = run()
    except StoreError as e:
        assert ";" in e.message, f"error message without a hint: {e.message}"
        # Python kinds are snake_case; the vectors write Rust's names.
        return {"error": e.kind.replace("_", "-")}
    return ok(result)


def cas_json(cas: Any) -> Any:
    if isinstance(cas, Written):
        return {"written": {"version": cas.version}}
    assert isinstance(cas, Conflict), cas
    return {"conflict": {"current": versioned(cas.current)}}


def apply(store: AnyStore, op: Dict[str, Any]) -> Any:
    kind = op["op"]
    if kind == "get":
        return outcome(lambda: store.get(op["key"], op["now_ms"]), versioned)
    if kind == "cas":
        return outcome(
            lambda: store.compare_and_set(op["key"], op["expected"], op["value"], op["ttl_ms"], op["now_ms"]),
            cas_json,
        )
    if kind == "append":
        return outcome(lambda: store.append(op["stream"], op["record"], op["now_ms"]), lambda n: n)
    if kind == "read":
        return outcome(
            lambda: store.read(op["stream"], op["after"], op["limit"]),
            lambda records: [[seq, record] for seq, record in records],
        )
    if kind == "delete":
        return outcome(lambda: store.delete(op["key"]), lambda b: b)
    if kind == "keys":
        return outcome(lambda: store.keys(op["prefix"], op["now_ms"]), lambda k: k)
    if kind == "purge_expired":
        return outcome(lambda: store.purge_expired(op["now_ms"]), lambda n: n)
    raise ValueError(f"unknown op {kind!r}")


#: A Redis stream starts at the server's clock in microseconds, not at 1
#: (host/src/store/redis/append.lua): 2001-09-09 in microseconds.
TIME_FLOOR = 1_000_000_000_000_000


class Rebased:
    """A Redis store seen through the vectors' numbering: each stream's numbers
    relative to its first, which must be a time floor (>= TIME_FLOOR)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seqs: Dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append(self, stream: str, record: str, now_ms: int) -> int:
        n: int = self.inner.append(stream, record, now_ms)
        if stream not in self.seqs:
            assert n >= TIME_FLOOR, f"the first number of stream {stream} is {n}, not a time floor"
            self.seqs[stream] = n - 1
        return n - self.seqs[stream]

    def read(self, stream: str, after: int, limit: int) -> Any:
        base = self.seqs.get(stream, 0)
        if base and after and isinstance(after, int):
            after = min(after + base, 2**53 - 1)
        return [(n - base, r) for n, r in self.inner.read(stream, after, limit)]
