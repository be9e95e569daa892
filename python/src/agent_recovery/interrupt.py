"""Interrupting a blocking operation at its timeout (`interruptible`).

A synchronous operation of `run.step(...)` is called on the run's thread, so
`attempt_timeout_ms` and the run's deadline can only be measured for it: a
call that hangs holds the run until it returns. `await run.step_async(...)`
cancels a slow coroutine; `interruptible` gives a blocking callable the same
behaviour: each call with a `timeout_ms` runs on a daemon thread of its own,
and the runtime stops waiting at `timeout_ms`.

Python cannot stop a thread, so a call that times out is *abandoned*, not
killed: it runs to its end and its result is dropped. The retry that usually
follows uses the same idempotency key (`call.key`): send it to the service so
an abandoned call that still lands is not applied twice, and give the client
`call.timeout_ms` as its own timeout so abandoned threads do not pile up.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, List

from .errors import PolicyError
from .runtime import Call, Failed

__all__ = ["interruptible"]


def interruptible(operation: Callable[[Call], Any]) -> Callable[[Call], Any]:
    """Wrap a blocking `operation(call)` so that the runtime stops waiting for
    a call at its `timeout_ms` (the run's `attempt_timeout_ms`, or what is left
    before its `deadline_ms`, whichever is sooner).

    A call without a `timeout_ms` runs on the caller's thread. A call with one
    runs on a daemon thread; if it has not returned after `timeout_ms` of wall
    time, it is answered `Failed({"source": "timeout", "phase": "total",
    "after_ms": <waited>})`, which the policy decides on (usually a retry with
    the same key), and the thread is left to finish on its own. What the
    operation returns or raises in time is returned or raised on the caller's
    thread, as without the wrapper. When no thread can be started, the call
    runs on the caller's thread and is measured instead. It is for the
    blocking `run.step`; `await run.step_async` cancels an async operation at
    its timeout without a wrapper.

    >>> from agent_recovery import Runtime, Step, interruptible
    >>> rt = Runtime(attempt_timeout_ms=2_000)
    >>> run = rt.run("run-1")
    >>> run.step(Step("lookup", "crm.lookup", interruptible(lambda call: {"id": 7}))).outcome
    'ok'
    """
    if not callable(operation):
        raise PolicyError(
            "invalid_argument",
            f"interruptible takes a callable (operation(call)), got {type(operation).__name__}; "
            "pass the function itself",
        )

    def call_with_timeout(call: Call) -> Any:
        if call.timeout_ms is None:
            return operation(call)
        done = threading.Event()
        box: List[Any] = []

        def target() -> None:
            try:
                box.append((True, operation(call)))
            except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
                box.append((False, exc))
            done.set()

        started = time.monotonic()
        try:
            threading.Thread(target=target, name=f"agent-recovery call {call.step}", daemon=True).start()
        except RuntimeError:  # no thread to be had: run it here, measured as without the wrapper
            return operation(call)
        if not done.wait(call.timeout_ms / 1000):
            waited = int((time.monotonic() - started) * 1000)
            return Failed({"source": "timeout", "phase": "total", "after_ms": waited})
        ok, value = box[0]
        if ok:
            return value
        raise value

    return call_with_timeout
