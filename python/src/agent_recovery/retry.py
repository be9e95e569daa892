"""`retry` and `retry_sync`: the small door (`agent_recovery.recover`) with the
older call shape, `operation(attempt=..., idempotency_key=...)`.

```python
import asyncio, httpx
from agent_recovery import retry

async def fetch(*, attempt: int, idempotency_key: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        r = await client.post(URL, json=ARGS, headers={"Idempotency-Key": idempotency_key})
        r.raise_for_status()
        return r

result = asyncio.run(retry(fetch, call="tool", run_id="run-1", step_id="step-3",
                           tool="search", args=ARGS))
```

Each call is one call of a door made for it (`recover(..., **options)`): the
same runtime, loop, observation of exceptions and returned responses, and
`RecoveryError`. What maps to what:

| `retry` | `recover` |
| --- | --- |
| `operation(attempt=, idempotency_key=)` (and `target=` when it declares it) | `fn(key=, attempt=, target=)` |
| `policy`, `call`, `run_id`, `tool`, `seed`, `store`, `timeout_ms`, `on_event`, `on_decision`, `target`, `fallbacks` | the same |
| `step_id` (default `"retry"`) | `step_id` |
| `args` (default None, the JSON null) | `args` |
| `sleep(seconds)` | `clock`: the system clock, sleeping through `sleep` |
| `context["config"]`, `context["idempotent"]` | `policy_config`, `idempotent` |
| `runtime_options` | `runtime_options` |

Its defaults differ from the door's in three ways: a fresh `MemoryStore` per
call (pass `store` to share breakers; a call without one runs on a runtime kept
for its configuration, so building it is not paid per call), the runtime's
attempt budget out of the
way (the policy's `max_attempts` decides) and no breaker (threshold 100; pass
`runtime_options={"breaker": (3, 30_000)}` to have one). Any other member of
`context` is refused (`PolicyError`, kind `invalid_context`); in particular
`fallback_available`, which the loop sets itself: pass `fallbacks=[...]` (and
an operation with a `target` parameter) to fall back.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
import types
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Dict, Optional, Protocol, Sequence

from .door import NULL_ARGS, _call, _Door, _never, _uuid4_hex
from .errors import PolicyError
from .observe import as_failure
from .runtime import _IO, ASYNCIO, BLOCKING, Clock, _bad, _no_wait
from .store import MemoryStore
from .types import Context, Decision, Envelope


class DecidingPolicy(Protocol):
    """What the retry helper needs: a `Policy` or a `PolicyHandle`."""

    def key(self, run_id: str, step_id: str, tool: str, args: Any) -> str: ...

    def decide_json(self, observation: Any, context: Any = "{}") -> str: ...


class RecoveryError(Exception):
    """The policy decided not to retry (fail, fallback, dead_letter, ...).

    `decision` is the whole decision, `envelope` its error envelope, `action`
    the next step the caller must take, `cause` the exception or `Failure` of
    the last attempt.
    """

    def __init__(self, decision: Decision, cause: Any) -> None:
        self.decision = decision
        self.envelope: Envelope = decision["envelope"]
        self.action: str = decision["action"]
        self.code: str = self.envelope["code"]
        self.attempts: int = decision["attempt"]
        self.cause = cause
        super().__init__(
            f"{self.action} after attempt {self.attempts}: {self.code} "
            f"({decision.get('reason')}); {self.envelope.get('hint', '')}"
        )


#: The context members `retry` reads; any other is refused, not ignored.
_CONTEXT_KEYS = ("config", "idempotent")
#: Out of the way: the policy's `max_attempts` decides, no breaker opens
#: (the loop takes a breaker threshold of at most 100, the policy's attempt limit too).
_DEFAULTS: Dict[str, Any] = {"attempt_budget": 2**31, "breaker": (100, 30_000)}


class _SleepClock(Clock):
    """The system clock (`SystemClock`'s time), sleeping through the injected `sleep(seconds)`."""

    def __init__(self, sleep: Callable[[float], Any]) -> None:
        self._sleep = sleep

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep_ms(self, ms: int) -> None:
        self._sleep(ms / 1000)

    async def sleep_ms_async(self, ms: int) -> None:
        note = self._sleep(ms / 1000)
        if inspect.isawaitable(note):
            await note


def _parameter_names(fn: Callable[..., Any]) -> Sequence[str]:
    """The names of `fn`'s parameters (none when it has no signature). A plain
    function's are read from its code object, as `inspect.signature` reads them
    (the positional, keyword-only, `*args` and `**kwargs` names, in that order
    in `co_varnames`), without building a `Signature` on every call."""
    if type(fn) is types.FunctionType and not hasattr(fn, "__wrapped__") and not hasattr(fn, "__signature__"):
        code = fn.__code__
        flags = code.co_flags
        count = (
            code.co_argcount
            + code.co_kwonlyargcount
            + bool(flags & inspect.CO_VARARGS)
            + bool(flags & inspect.CO_VARKEYWORDS)
        )
        return code.co_varnames[:count]
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


#: The parameters the door passes to `attempt` below (all it declares).
_ATTEMPT_PARAMS = ("key", "attempt", "target")


def _door(operation: Callable[..., Any], o: Dict[str, Any]) -> _Door:
    """The door of one `retry` call: `o` holds retry's arguments."""
    ctx: Dict[str, Any] = o.pop("context") or {}
    unknown = sorted(set(ctx) - set(_CONTEXT_KEYS)) if ctx else None
    if unknown:
        raise PolicyError(
            "invalid_context",
            f"retry() reads only {', '.join(_CONTEXT_KEYS)} from context, got {', '.join(map(repr, unknown))}; "
            "the loop sets attempt, elapsed_ms and fallback_available itself: to fall back, pass "
            "fallbacks=[...] (the targets, in order) and give the operation a `target` parameter",
        )
    if not callable(operation):
        raise _bad(f"retry() runs a function, got {type(operation).__name__}; pass a function or a coroutine function")
    takes_target = "target" in _parameter_names(operation)
    if o["fallbacks"] and not takes_target:
        raise _bad(
            f"retry() has fallbacks {list(o['fallbacks'])} but the operation has no `target` parameter, so it "
            "cannot call them; add a keyword parameter `target` and call the target it names"
        )

    def attempt(*, key: str, attempt: int, target: str) -> Any:
        if takes_target:
            return operation(attempt=attempt, idempotency_key=key, target=target)
        return operation(attempt=attempt, idempotency_key=key)

    attempt.__name__ = getattr(operation, "__name__", "operation")
    args, sleep = o.pop("args"), o.pop("sleep")
    given = o.pop("runtime_options")
    runtime_options = {**_DEFAULTS, **(given or {})}
    key = _runtime_key(o, ctx, runtime_options, given is None)
    options = {
        **o,
        "step_id": o["step_id"] if o["step_id"] is not None else "retry",
        "tool": o["tool"] if o["tool"] is not None else attempt.__name__,
        "args": NULL_ARGS if args is None else args,
        "clock": _SleepClock(sleep),
        "policy_config": ctx.get("config"),
        "idempotent": ctx.get("idempotent"),
        "breaker": runtime_options.pop("breaker"),
        "runtime_options": runtime_options,
    }
    try:  # the door's shape besides its runtime: the step
        idempotent = options["idempotent"]  # with its type: 1 is not True in a step
        shape = (key, options["step_id"], options["tool"], o["call"], o["target"], tuple(o["fallbacks"]),
                 type(idempotent), idempotent)
        hash(shape)
    except TypeError:
        shape = None
    if key is not None and shape is not None:
        return _kept_door(shape, attempt, options)
    return _Door(attempt, options, _ATTEMPT_PARAMS)


async def _retry(io: _IO, o: Dict[str, Any]) -> Any:
    """One `retry` / `retry_sync` call on `io`'s path; `o` holds its arguments."""
    o["run_id"] = _run_id(o["run_id"])
    door = _door(o.pop("operation"), o)
    try:
        return await _call(io, door.start((), {}))
    except RecoveryError as e:
        _as_failure(e)
        raise


#: Doors kept for `retry` calls that give no store, by their configuration
#: (the most recently used few): a call runs on a copy of its configuration's
#: door (the step checked once) whose runtime is a sibling of the kept one with
#: the call's own fresh `MemoryStore` and clock (`Runtime._sibling`), instead
#: of making a door and building a runtime (options checked, the configuration
#: sent to the loop, telemetry bound) for every call.
_KEPT: "OrderedDict[Any, _Door]" = OrderedDict()
_KEPT_LOCK = threading.Lock()
_KEPT_MAX = 32


def _runtime_key(o: Dict[str, Any], ctx: Dict[str, Any], runtime_options: Dict[str, Any], defaults: bool) -> Any:
    """What a `retry` call's runtime is made of, besides its store and clock, as
    a key; None when the call's runtime cannot be shared: it gives a store, or a
    decision log, or an option that is not plain JSON (then it is built per call).
    `defaults`: no runtime options were given (then, without a policy
    configuration, the key needs no JSON text)."""
    if o["store"] is not None or "decision_log" in runtime_options:
        return None
    seed, timeout = o["seed"], o["timeout_ms"]
    if defaults and ctx.get("config") is None and type(seed) in _PLAIN and type(timeout) in _PLAIN:
        return (seed, timeout, o["policy"], o["on_decision"], o["on_event"])
    try:
        plain = json.dumps(
            [o["seed"], o["timeout_ms"], ctx.get("config"), runtime_options],
            sort_keys=True,
            allow_nan=False,
        )
        key = (plain, o["policy"], o["on_decision"], o["on_event"])
        hash(key)
    except (TypeError, ValueError, RecursionError):
        return None
    return key


#: The types of a seed or a timeout that `_runtime_key` keys on as they are.
_PLAIN = (int, type(None))


def _kept_door(shape: Any, fn: Callable[..., Any], options: Dict[str, Any]) -> _Door:
    """The door of one call: a copy of the kept one for `shape` (made by this
    call when there is none) with the call's function, run id, args, fresh
    `MemoryStore` and clock, on a sibling of the kept runtime."""
    with _KEPT_LOCK:
        kept = _KEPT.get(shape)
        if kept is not None:
            _KEPT.move_to_end(shape)
    if kept is None:
        kept = _Door(fn, options, _ATTEMPT_PARAMS)
        kept.runtime()
        kept.template()
        kept.fn, kept.o = _never, {**kept.o, "run_id": None, "args": None}  # keep nothing of this call
        with _KEPT_LOCK:
            _KEPT[shape] = kept
            if len(_KEPT) > _KEPT_MAX:
                _KEPT.popitem(last=False)
    door: _Door = object.__new__(_Door)
    door.__dict__.update(kept.__dict__)
    door.fn = fn
    door.o = {**kept.o, "run_id": options["run_id"], "args": options["args"]}
    door.store = MemoryStore()
    door.clock = options["clock"]
    door._runtime = kept.runtime()._sibling(door.store, door.clock)
    return door


def _as_failure(error: RecoveryError) -> None:
    """retry's `cause` of a returned failure is a `Failure` (the door's is the value itself)."""
    if not isinstance(error.cause, BaseException):
        error.cause = as_failure(error.cause) or error.cause


def _run_id(run_id: Optional[str]) -> Any:
    if run_id is not None:
        return run_id
    return lambda: f"retry-{_uuid4_hex()}"


async def retry(
    operation: Callable[..., Any],
    *,
    policy: Optional[DecidingPolicy] = None,
    call: Optional[str] = None,
    run_id: Optional[str] = None,
    step_id: Optional[str] = None,
    tool: Optional[str] = None,
    args: Any = None,
    seed: Optional[int] = None,
    on_decision: Optional[Callable[[Decision], Any]] = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    context: Optional[Context] = None,
    on_event: Optional[Callable[..., Any]] = None,
    store: Any = None,
    timeout_ms: Optional[int] = None,
    runtime_options: Optional[Dict[str, Any]] = None,
    target: Optional[str] = None,
    fallbacks: Sequence[str] = (),
) -> Any:
    """Run `operation(attempt=..., idempotency_key=...)` until it succeeds or the
    policy says stop (then `RecoveryError`). Returns the operation's result.

    `operation` may be async or sync. `on_decision(decision)` (it may be async)
    gets each decision; `on_event(event)` the runtime's events. `target`
    (default: the tool name) and `fallbacks` (the targets to fall back to, in
    order; the operation gets `target=`) as in `recover`. Cancelling the task
    raises `asyncio.CancelledError`.
    """
    return await _retry(ASYNCIO, dict(locals()))


def retry_sync(
    operation: Callable[..., Any],
    *,
    policy: Optional[DecidingPolicy] = None,
    call: Optional[str] = None,
    run_id: Optional[str] = None,
    step_id: Optional[str] = None,
    tool: Optional[str] = None,
    args: Any = None,
    seed: Optional[int] = None,
    on_decision: Optional[Callable[[Decision], Any]] = None,
    sleep: Callable[[float], Any] = time.sleep,
    context: Optional[Context] = None,
    on_event: Optional[Callable[..., Any]] = None,
    store: Any = None,
    timeout_ms: Optional[int] = None,
    runtime_options: Optional[Dict[str, Any]] = None,
    target: Optional[str] = None,
    fallbacks: Sequence[str] = (),
) -> Any:
    """The blocking twin of `retry` (same arguments, `sleep=time.sleep`)."""
    return _no_wait(_retry(BLOCKING, dict(locals())))
