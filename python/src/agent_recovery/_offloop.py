"""Store calls on the asyncio paths, off the event loop.

The stores are synchronous (`SqliteStore`, `RedisStore`, `FallbackStore`:
blocking I/O with their own bounds, `timeout_ms` for Redis) and thread-safe.
An async path of the runtime (`step_async`, `fanout_async`, `cancel_async`,
`end_async`, `recover_async`, `replay_async`) runs each of its store calls in
a worker thread of one small pool, so a slow or paused store delays the step
that waits for it and never the loop that serves everything else. A
`MemoryStore` never waits on anything and is called on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, TypeVar

from .store import MemoryStore

T = TypeVar("T")

#: Threads for store calls of every runtime of the process: enough for many
#: steps waiting on a store that stopped answering (each call is bounded by the
#: store's own timeout), few enough to stay cheap.
POOL_THREADS = 32

_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()
_local = threading.local()


def _mark() -> None:
    _local.in_pool = True


def in_pool() -> bool:
    """True on a thread of the store pool: a call on behalf of an event loop
    (a `FallbackStore` then probes and flushes in the background)."""
    return bool(getattr(_local, "in_pool", False))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=POOL_THREADS, thread_name_prefix="agent-recovery-store", initializer=_mark
            )
        return _pool


def on_loop(store: Any) -> bool:
    """True when `store` is called on the loop (it never blocks: a `MemoryStore`)."""
    return isinstance(store, MemoryStore)


def start(store: Any, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
    """Start `fn(*args)` (store work) in the store pool; its future."""
    return asyncio.get_running_loop().run_in_executor(_executor(), fn, *args)


async def call(store: Any, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`, store work on `store`: in the store pool, or right here
    for a store that never blocks."""
    if on_loop(store):
        return fn(*args)
    return await start(store, fn, *args)
