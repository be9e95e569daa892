"""The event loop keeps running while Redis does not answer (docs/store.md,
"Redis and the event loop").

A real `redis-server` on 127.0.0.1 is paused with SIGSTOP for 6 s while steps
run through `step_async` on the default store of a `redis://` URL
(`FallbackStore` over `RedisStore`, a SQLite spool). A 1 ms ticker task on the
same loop measures how late it wakes: the store's calls run off the loop, so
it is never late by half a store timeout (a call made on the loop would hold
it for `timeout_ms`, 1000 ms). The lag itself, tens of ms on an idle machine,
is printed: a figure, not an assertion (docs/benchmarks.md). Each store call waits at most the documented bound
(`timeout_ms` plus `connect_timeout_ms`), the steps go on on the local spool
(`store_degraded`), and after SIGCONT the store flushes and serves Redis
again (`store_restored`).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from agent_recovery.redis_store import FallbackStore
from agent_recovery.runtime import Runtime
from agent_recovery.store import open_store

from .redis_server import RedisServer

#: The ticker's period.
TICK_S = 0.001
PAUSE_S = 6.0
#: The URL's documented defaults, written out: the bound of one store call.
TIMEOUT_MS = 1000
#: The lateness the ticker may show: a store call on the loop would hold it
#: for at least TIMEOUT_MS (the behaviour under test).
MAX_LAG_S = TIMEOUT_MS / 2 / 1000
CONNECT_TIMEOUT_MS = 1000
#: Scheduling slack on top of the documented bound (2 shared cores).
SLACK_S = 0.5


class Timed:
    """The real store, with the duration of each call written down (the
    runtime sees the same methods, clock and events)."""

    def __init__(self, store: FallbackStore) -> None:
        self.store = store
        self.took: List[Tuple[str, float]] = []

    def _timed(self, name: str, *args: Any) -> Any:
        start = time.monotonic()
        try:
            return getattr(self.store, name)(*args)
        finally:
            self.took.append((name, time.monotonic() - start))

    def get(self, *a: Any) -> Any:
        return self._timed("get", *a)

    def compare_and_set(self, *a: Any) -> Any:
        return self._timed("compare_and_set", *a)

    def append(self, *a: Any) -> Any:
        return self._timed("append", *a)

    def read(self, *a: Any) -> Any:
        return self._timed("read", *a)

    def delete(self, *a: Any) -> Any:
        return self._timed("delete", *a)

    def keys(self, *a: Any) -> Any:
        return self._timed("keys", *a)

    def purge_expired(self, *a: Any) -> Any:
        return self._timed("purge_expired", *a)

    def server_clock(self) -> Any:
        return self.store.server_clock()

    def subscribe(self, listener: Any) -> None:
        self.store.subscribe(listener)


def test_a_paused_redis_never_stalls_the_event_loop(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "redis").start()
    try:
        url = srv.url(f"timeout_ms={TIMEOUT_MS}&connect_timeout_ms={CONNECT_TIMEOUT_MS}&probe_ms=1000"
                      f"&spool={tmp_path / 'spool.sqlite'}")
        store = open_store(url)
        assert isinstance(store, FallbackStore)
        timed = Timed(store)
        events: List[Dict[str, Any]] = []
        rt = Runtime(store=timed, seed=7, on_event=events.append)
        lags, reports, paused_at, resumed_at = asyncio.run(_scenario(rt, srv, events))

        print(f"default store: ticker max lag {max(lags) * 1000:.1f} ms over {len(lags)} ticks")
        assert max(lags) <= MAX_LAG_S, f"the loop was late by {max(lags) * 1000:.0f} ms (ticker max lag)"
        assert len(lags) > 1000, "the ticker ran through the pause"
        bound = (TIMEOUT_MS + CONNECT_TIMEOUT_MS) / 1000 + SLACK_S
        slowest = max(took for _, took in timed.took)
        assert slowest <= bound, f"a store call took {slowest:.2f} s, over timeout_ms + connect_timeout_ms"
        assert slowest >= TIMEOUT_MS / 1000 * 0.9, "some call waited for the paused server (the pause was real)"
        assert [r.outcome for r in reports if paused_at <= r.started < resumed_at], "steps ran during the pause"
        assert all(r.outcome == "ok" for r in reports), [r.outcome for r in reports if r.outcome != "ok"]
        kinds = [e["event"] for e in events if e.get("event", "").startswith("store_")]
        assert kinds[:2] == ["store_degraded", "store_restored"], kinds
        assert not store.degraded
        store.close()
    finally:
        if srv.proc is not None:
            srv.proc.send_signal(signal.SIGCONT)
        srv.stop()


class _Report:
    def __init__(self, started: float, outcome: str) -> None:
        self.started = started
        self.outcome = outcome


async def _scenario(
    rt: Runtime, srv: RedisServer, events: List[Dict[str, Any]]
) -> Tuple[List[float], List[_Report], float, float]:
    done = asyncio.Event()
    lags: List[float] = []
    reports: List[_Report] = []

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(TICK_S)
            lags.append(time.perf_counter() - start - TICK_S)

    async def op(call: Any) -> Any:
        await asyncio.sleep(0)  # a tool call yields to the loop, as real I/O does
        return {"ok": True}

    async def worker(name: str) -> None:
        n = 0
        while not done.is_set():
            n += 1
            started = time.monotonic()
            run = rt.run(f"{name}-{n}")
            report = await run.step_async(id="s", tool="t", target="api", call="tool", operation=op)
            await run.end_async()
            reports.append(_Report(started, report.outcome))

    tick = asyncio.ensure_future(ticker())
    workers = [asyncio.ensure_future(worker(f"w{i}")) for i in range(2)]
    assert srv.proc is not None
    restored: Optional[float] = None
    try:
        await _until(lambda: len(reports) >= 20)  # healthy first
        paused_at = time.monotonic()
        srv.proc.send_signal(signal.SIGSTOP)
        await asyncio.sleep(PAUSE_S)  # the outage itself: steps keep running meanwhile
        srv.proc.send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        # Recovered: a probe (every probe_ms) flushes the spool and serves Redis again.
        await _until(lambda: any(e.get("event") == "store_restored" for e in events))
        restored = time.monotonic()
        count = len(reports)
        await _until(lambda: len(reports) >= count + 20)  # and steps go on on Redis
    finally:
        done.set()
        await asyncio.gather(tick, *workers)
    assert restored is not None
    return lags, reports, paused_at, resumed_at


async def _until(cond: Any, limit_s: float = 30.0) -> None:
    """Wait for `cond()` by yielding to the loop (a hung test fails after `limit_s`)."""
    end = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < end, "the condition did not hold within the limit"
        await asyncio.sleep(0.01)

