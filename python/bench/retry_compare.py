"""The figures of `scripts/bench.sh` for Python: agent-recovery's small door
(`@recover`) next to tenacity and stamina on the same no-op operation, and
what a step costs while the Redis store is unreachable.

    python python/bench/retry_compare.py      (needs the `bench` extra: pip install './python[bench]')
    python python/bench/retry_compare.py door (only `@recover` and `retry_sync`)

- `retry_sync`: the door with the older call shape (a door per call, on a
  fresh store and a runtime kept per configuration; it sleeps through a no-op
  `sleep`), on the same operations;
- success: the operation succeeds at once;
- one failure: it raises ConnectionResetError once, then succeeds. Nothing
  really sleeps: `@recover` runs on a `VirtualClock`, tenacity and stamina
  wait 0 s (stamina's retry hooks off, so it logs nothing, as the others).
- degraded step: a one-step run on a `Runtime` over the default Redis store
  (`open_store("redis://...")`, the server clock) whose Redis refuses
  connections, so every call is served by the local spool file.

Each figure is the median of 5 rounds (wall time per call of a round). The
last line is JSON, read by scripts/bench.py.
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict

from agent_recovery import Policy, recover, retry_sync
from agent_recovery.runtime import Runtime, VirtualClock
from agent_recovery.store import open_store

ROUNDS = 5


def median_us(n: int, f: Callable[[], Any]) -> float:
    for _ in range(max(1, n // 10)):  # warm up
        f()
    rounds = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(n):
            f()
        rounds.append((time.perf_counter() - t) * 1e6 / n)
    return statistics.median(rounds)


def fails_once() -> Callable[..., int]:
    """A no-op that raises on every other call: the first attempt of each call fails."""
    state = {"n": 0}

    def op(*_: Any, **__: Any) -> int:
        state["n"] += 1
        if state["n"] % 2 == 1:
            raise ConnectionResetError("reset")
        return 1

    return op


def ours() -> Dict[str, float]:
    clock = VirtualClock(0)
    ok = recover(lambda: 1, call="tool", tool="noop", clock=clock, seed=7)
    once = recover(fails_once(), call="tool", tool="noop", clock=clock, seed=7)
    return {"ok": median_us(2000, ok), "retry": median_us(2000, once)}


def retry_figures() -> Dict[str, float]:
    policy = Policy.load()
    op = fails_once()

    def ok() -> int:
        return int(retry_sync(lambda **_: 1, policy=policy, call="tool", tool="noop", seed=7, sleep=lambda s: None))

    def once() -> int:
        return int(retry_sync(op, policy=policy, call="tool", tool="noop", seed=7, sleep=lambda s: None))

    return {"ok": median_us(2000, ok), "retry": median_us(2000, once)}


def tenacity_figures() -> Dict[str, float]:
    import tenacity

    def wrap(f: Callable[[], int]) -> Callable[[], int]:
        return tenacity.retry(wait=tenacity.wait_none(), stop=tenacity.stop_after_attempt(3), reraise=True)(f)

    return {"ok": median_us(5000, wrap(lambda: 1)), "retry": median_us(5000, wrap(fails_once()))}


def stamina_figures() -> Dict[str, float]:
    import stamina
    import stamina.instrumentation

    stamina.instrumentation.set_on_retry_hooks([])

    def wrap(f: Callable[[], int]) -> Callable[[], int]:
        return stamina.retry(on=ConnectionResetError, attempts=3, wait_initial=0, wait_max=0, wait_jitter=0)(f)

    return {"ok": median_us(5000, wrap(lambda: 1)), "retry": median_us(5000, wrap(fails_once()))}


def degraded_step_ms() -> float:
    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        store = open_store(f"redis://127.0.0.1:{port}/0?spool={Path(d) / 'spool.sqlite'}")
        rt = Runtime(store=store, seed=7)
        n = [0]

        def step() -> None:
            n[0] += 1  # a new run each time (a repeated one is an idempotency-cache hit)
            report = rt.run(f"down-{n[0]}").step(id="s", tool="noop", call="tool", operation=lambda call: 1)
            assert report.outcome == "ok", report

        ms = median_us(100, step) / 1e3
        store.close()
        return ms


def main() -> None:
    a, r = ours(), retry_figures()
    print(f"@recover, success / one failure then success  {a['ok']:8.1f} / {a['retry']:8.1f} µs")
    print(f"retry_sync, success / one failure then success  {r['ok']:8.1f} / {r['retry']:8.1f} µs")
    if sys.argv[1:] == ["door"]:
        return
    t, s = tenacity_figures(), stamina_figures()
    d = degraded_step_ms()
    print(f"tenacity, success / one failure then success  {t['ok']:8.2f} / {t['retry']:8.2f} µs")
    print(f"stamina,  success / one failure then success  {s['ok']:8.2f} / {s['retry']:8.2f} µs")
    print(f"step on the Redis store, Redis down           {d:8.3f} ms")
    print(json.dumps({
        "recover_ok_us": round(a["ok"], 2), "recover_retry_us": round(a["retry"], 2),
        "retry_ok_us": round(r["ok"], 2), "retry_retry_us": round(r["retry"], 2),
        "tenacity_ok_us": round(t["ok"], 3), "tenacity_retry_us": round(t["retry"], 3),
        "stamina_ok_us": round(s["ok"], 3), "stamina_retry_us": round(s["retry"], 3),
        "degraded_step_ms": round(d, 3),
    }))


if __name__ == "__main__":
    main()
