"""A store worker for the cross-process tests (same protocol as the Rust
`store_worker` example and node/test/store_worker.mjs): opens the store
argv[1] names (`open_store`: a file path, or a redis:// URL), prints {"ready":true}, then answers each JSON op read from stdin
(the op format of tests/store/operations.json, plus `increment`) with one
JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Dict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_recovery.store import SqliteStore, StoreError, Written, open_store  # noqa: E402
from store_ops import apply  # noqa: E402


def increment(store: SqliteStore, op: Dict[str, Any]) -> Any:
    """`rounds` times: read `key`, write it + 1 naming the version read."""
    key, now = op.get("key", "counter"), op.get("now_ms", 0)
    wins = []
    try:
        for _ in range(op.get("rounds", 0)):
            current = store.get(key, now)
            n = int(current.value) if current else 0
            cas = store.compare_and_set(key, current.version if current else None, str(n + 1), None, now)
            if isinstance(cas, Written):
                wins.append([n, cas.version])
    except StoreError as e:
        return {"error": e.kind.replace("_", "-"), "message": e.message}
    return {"wins": wins}


def bench(store: SqliteStore, op: Dict[str, Any]) -> Any:
    """Mean microseconds of `rounds` increments and of `rounds` gets of one key."""
    rounds = max(1, op.get("rounds", 1))
    start = time.perf_counter()
    for _ in range(rounds):
        answer = increment(store, {"key": "bench", "rounds": 1})
        if "error" in answer:
            return answer
    cas_us = (time.perf_counter() - start) * 1e6 / rounds
    start = time.perf_counter()
    for _ in range(rounds):
        store.get("bench", 0)
    get_us = (time.perf_counter() - start) * 1e6 / rounds
    return {"cas_us": cas_us, "get_us": get_us}


def main() -> int:
    try:
        spec = sys.argv[1]
        if spec.startswith(("redis://", "rediss://")):
            store = open_store(spec)
        else:
            store = SqliteStore(spec, synchronous=sys.argv[2] if len(sys.argv) > 2 else "full")
    except StoreError as e:
        print(json.dumps({"error": e.kind.replace("_", "-"), "message": e.message}), flush=True)
        return 1
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        op = json.loads(line)
        if op["op"] == "increment":
            answer = increment(store, op)
        elif op["op"] == "bench":
            answer = bench(store, op)
        else:
            answer = apply(store, op)
        print(json.dumps(answer, ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
