"""The small door: `@recover` wraps one call or one tool in the recovery runtime.

```python
from agent_recovery import recover

@recover(call="llm", target="gpt-4o", fallbacks=["gpt-4o-mini"])
async def chat(messages, *, target, key):
    return await client.chat.completions.create(
        model=target, messages=messages, extra_headers={"Idempotency-Key": key})

answer = await chat([{"role": "user", "content": "hi"}])
```

Each call of `chat` is a run of one step of the `Runtime` (the loop is the
component's; this module decides nothing): the packaged reference policy
decides, the run id is generated, the step id is the function's name, the
operation's exceptions and returned SDK responses are observed through the
adapters (`observation_from`), every attempt gets the same idempotency key.

The wrapped function receives, when it declares them as parameters (never
through `**kwargs`):

- `key`: the idempotency key, the same on every attempt and every target.
  Send it to the service (an `Idempotency-Key` header, a request id): an
  attempt that timed out may still have been applied, and only the service
  can tell a repeat from a new request;
- `target`: the target to call, `target` or one of `fallbacks`;
- `attempt`: the call number of this key, from 1.

Breakers are kept in the door's store (a `MemoryStore` per door unless
`store` is given) across calls: once a target's breaker is open, the next
calls start at the first target whose breaker is not open, until the breaker
lets a probe through.

A sync function gives a sync (blocking) wrapper that sleeps on the clock; an
async function an async one. Every option is keyword-only; an unknown one is
refused (`PolicyError`, kind `invalid_argument`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import threading
import warnings
from contextvars import ContextVar
from typing import Any, Callable, Dict, List, Optional, Tuple

from .runtime import _IO, ASYNCIO, BLOCKING, Call, Clock, Run, Runtime, Step, StepReport, SystemClock, _bad, _no_wait
from .store import MemoryStore

__all__ = ["KeyNotUsedWarning", "NULL_ARGS", "OPTIONS", "recover"]

#: The options of `recover`, with their defaults.
OPTIONS: Dict[str, Any] = {
    "policy": None,  # the packaged reference policy
    "store": None,  # a MemoryStore per door: breakers shared by its calls
    "clock": None,  # SystemClock()
    "seed": None,  # jitter from WASI random
    "call": None,  # "tool", "llm" or "agent"; None: read from each observation
    "tool": None,  # the function's qualified name
    "target": None,  # the tool name
    "fallbacks": (),
    "side_effect": False,
    "idempotent": None,
    "run_id": None,  # a new id per call (a string, or a function returning one)
    "step_id": None,  # the function's name
    "errors": "raise",  # or "model": return the failure rendered as a model tool result
    "timeout_ms": None,
    "policy_config": None,
    "breaker": None,  # the policy's thresholds
    "on_event": None,
    "on_decision": None,  # called with each decision (a dict, with the `policy` that decided)
    "args": None,  # the call's arguments: the step's args (part of the key)
    "runtime_options": None,  # more Runtime options (attempt_budget, deadline_ms, ...)
}

_OPTION_NAMES = frozenset(OPTIONS)
#: Runtime options that `recover` takes itself (refused in `runtime_options`).
_OWN_OPTIONS = frozenset(("policy", "store", "clock", "seed", "attempt_timeout_ms", "policy_config", "breaker", "on_event"))
_INJECTED = ("key", "target", "attempt")
#: `args=None` means the call's arguments; `args=NULL_ARGS` the JSON null.
NULL_ARGS: Any = type("NullArgs", (), {"__repr__": lambda self: "NULL_ARGS"})()
_ERRORS = ("raise", "model")


#: The decisions of the call in progress (this task's or thread's), for its `RecoveryError`.
_CALL: ContextVar[Optional[List[Any]]] = ContextVar("agent_recovery_door_call", default=None)


class _Decider:
    """The policy, noting each decision's text for the call that asked (one
    runtime serves every call of a door, concurrently)."""

    def __init__(self, policy: Any, on_decision: Optional[Callable[[Any], Any]] = None) -> None:
        self.policy = policy
        self.on_decision = on_decision

    def decide_json(self, observation: str, context: str) -> str:
        text: str = self.policy.decide_json(observation, context)
        box = _CALL.get()
        ref = getattr(getattr(self.policy, "policy", self.policy), "_ref", None)
        on_decision = self.on_decision
        decision = None
        if on_decision is not None:
            decision = json.loads(text)
            if ref is not None:
                decision["policy"] = dict(ref)
        if box is not None:
            box[:3] = [text, ref, decision]
        if on_decision is not None:
            note = on_decision(decision)
            if inspect.isawaitable(note):
                _pending(note, box)
        return text

    def render(self, envelope: Any, format: str, options: Any = None) -> Any:
        from .runtime import _render_by

        return _render_by(self.policy, envelope, format, options)

    def __getattr__(self, name: str) -> Any:  # the policy's identity, for telemetry
        return getattr(self.policy, name)


def _pending(note: Any, box: Optional[List[Any]]) -> None:
    """An async `on_decision`: a task on the caller's loop (it runs at the next
    sleep, and the call awaits it before answering), or run here when the
    caller blocks on no loop."""
    try:
        task = asyncio.get_running_loop().create_task(note)
    except RuntimeError:
        asyncio.run(note)
        return
    if box is not None:
        box.append(task)


class KeyNotUsedWarning(UserWarning):
    """A step with side effects whose operation does not take its idempotency key."""


def _named_parameters(fn: Callable[..., Any]) -> Tuple[str, ...]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in params if p.kind in kinds and p.name in _INJECTED)


def _args_json(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """The call's arguments as JSON (part of the key and of a dead-letter record);
    a value with no JSON form is written as its repr."""
    return json.loads(json.dumps({"args": list(args), "kwargs": kwargs}, default=repr, sort_keys=True))


class _Door:
    """The state of one wrapped function: its options, its store and clock."""

    def __init__(
        self,
        fn: Callable[..., Any],
        options: Dict[str, Any],
        params: Optional[Tuple[str, ...]] = None,
        make_runtime: Optional[Callable[["_Door"], Runtime]] = None,
    ) -> None:
        unknown = sorted(set(options) - _OPTION_NAMES)
        if unknown:
            raise _bad(
                f"recover() has no option {', '.join(map(repr, unknown))}; "
                f"the options are {', '.join(OPTIONS)}"
            )
        if not callable(fn):
            raise _bad(f"recover() wraps a function, got {type(fn).__name__}; pass a function or a coroutine function")
        o = {**OPTIONS, **options}
        if o["errors"] not in _ERRORS:
            raise _bad(f"errors is 'raise' or 'model', got {o['errors']!r}")
        fallbacks = o["fallbacks"]
        if isinstance(fallbacks, str) or (fallbacks and not all(isinstance(t, str) for t in fallbacks)):
            raise _bad(f"fallbacks is a list of target names, got {fallbacks!r}")
        self.fn = fn
        self.o = o
        self.name = getattr(fn, "__name__", "operation")
        self.tool: str = o["tool"] or getattr(fn, "__qualname__", self.name)
        self.params = _named_parameters(fn) if params is None else params
        if fallbacks and "target" not in self.params:
            raise _bad(
                f"{self.name}() has fallbacks {list(fallbacks)} but no `target` parameter, so it cannot call them; "
                "add a keyword parameter `target` and call the target it names"
            )
        if o["side_effect"] and "key" not in self.params and o["idempotent"] is not True:
            warnings.warn(
                f"{self.name}() has side effects but no `key` parameter: a retried attempt may be applied twice; "
                "add a keyword parameter `key` and send it to the service as its idempotency key, "
                "or pass idempotent=True when repeating it is harmless",
                KeyNotUsedWarning,
                stacklevel=4,
            )
        if o["on_decision"] is not None and not callable(o["on_decision"]):
            raise _bad(f"on_decision must be callable, got {type(o['on_decision']).__name__}")
        if o["runtime_options"] is not None and not isinstance(o["runtime_options"], dict):
            raise _bad(f"runtime_options is a dict of Runtime options, got {type(o['runtime_options']).__name__}")
        clash_rt = sorted(set(o["runtime_options"]) & _OWN_OPTIONS) if o["runtime_options"] else None
        if clash_rt:
            raise _bad(f"runtime_options {', '.join(clash_rt)} are options of recover() itself: pass them directly")
        self.store = o["store"] if o["store"] is not None else MemoryStore()
        self.clock: Clock = o["clock"] if o["clock"] is not None else SystemClock()
        self._runtime: Optional[Runtime] = None
        self._make = make_runtime
        self._lock = threading.Lock()
        self._step: Optional[Step] = None  # `template()`

    def runtime(self) -> Runtime:
        """The door's runtime, made at its first call and shared by every call."""
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._lock:
            if self._runtime is None:
                self._runtime = self.build_runtime() if self._make is None else self._make(self)
            return self._runtime

    def build_runtime(self) -> Runtime:
        """A runtime of the door's options, on its store and clock."""
        from .runtime import _default_policy

        o = self.o
        return Runtime(
            policy=_Decider(o["policy"] if o["policy"] is not None else _default_policy(), o["on_decision"]),
            store=self.store, clock=self.clock, seed=o["seed"], attempt_timeout_ms=o["timeout_ms"],
            policy_config=o["policy_config"], breaker=o["breaker"], on_event=o["on_event"],
            **(o["runtime_options"] or {}),
        )

    def run_id(self) -> str:
        given = self.o["run_id"]
        if callable(given):
            return str(given())
        return given if given is not None else f"{self.name}-{_uuid4_hex()}"

    def start(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, Step, "_Outcome"]:
        clash = sorted(set(kwargs) & set(self.params)) if kwargs else None
        if clash:
            raise _bad(
                f"{self.name}() got {', '.join(clash)} from its caller; the door passes them "
                "(the idempotency key, the target, the attempt number): leave them out of the call"
            )
        o = self.o
        runtime = self.runtime()
        outcome = _Outcome(self, runtime)
        given = o["args"]
        text = None
        if given is None:
            if args or kwargs:
                step_args = _args_json(args, kwargs)
            else:  # what `_args_json` gives for a call with no arguments, and its text
                step_args, text = {"args": [], "kwargs": {}}, '{"args":[],"kwargs":{}}'
        else:
            step_args = None if given is NULL_ARGS else given
        step = self.template()._with(outcome.operation(args, kwargs), step_args, text)
        # The run's `run` input carries its one step (one `advance` fewer).
        return runtime._run_with_first_step(self.run_id()), step, outcome

    def template(self) -> Step:
        """The step of every call, checked once (each call gets its operation and args)."""
        step = self._step
        if step is None:
            o = self.o
            step = self._step = Step(
                o["step_id"] or self.name, self.tool, _never, call=o["call"], target=o["target"],
                fallbacks=list(o["fallbacks"]), side_effect=o["side_effect"], idempotent=o["idempotent"],
            )
        return step


def _uuid4_hex() -> str:
    """`uuid.uuid4().hex` without building a `UUID` (the same bits: random,
    the version 4 and the RFC 4122 variant set)."""
    n = int.from_bytes(os.urandom(16), "big") & ~(0xC000 << 48 | 0xF000 << 64) | (0x8000 << 48 | 0x4000 << 64)
    return f"{n:032x}"


def _never(call: Call) -> Any:
    """The operation of a door's template step (each call gets its own)."""
    raise AssertionError("a door's template step is never run")


class _Outcome:
    """One call through the door: what the operation returned or raised."""

    def __init__(self, door: _Door, runtime: Runtime) -> None:
        self.door = door
        self.runtime = runtime
        #: The last decision's text, the policy's identity and the decision given
        #: to `on_decision`, then the tasks of an async `on_decision`; noted by `_Decider`.
        self.decision: List[Any] = []
        self.value: Any = None
        self.cause: Any = None

    def operation(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Callable[[Call], Any]:
        params = self.door.params

        def op(call: Call) -> Any:
            given = {"key": call.key, "target": call.target, "attempt": call.attempt}
            extra = {name: given[name] for name in params}
            try:
                value = self.door.fn(*args, **kwargs, **extra)
            except Exception as exc:
                self.cause = exc
                raise
            if inspect.isawaitable(value):
                return self.awaited(value)
            self.value = self.cause = value
            return value

        return op

    async def awaited(self, value: Any) -> Any:
        try:
            self.value = self.cause = await value
        except Exception as exc:
            self.cause = exc
            raise
        return self.value

    def result(self, report: StepReport) -> Any:
        if report.outcome == "ok":
            return self.value if self.value is not None else report.result
        from .retry import RecoveryError

        if self.door.o["errors"] == "model":
            if report.rendered is not None:
                return report.rendered
            return self.runtime.render(report.envelope or {"code": "runtime." + report.outcome})
        decision: Any = None
        if self.decision:
            decision = self.decision[2] if self.decision[2] is not None else json.loads(self.decision[0])
        if decision is not None and self.decision[2] is None and self.decision[1] is not None:
            decision["policy"] = dict(self.decision[1])
        if decision is None or decision.get("envelope") is None or decision.get("action") == "retry":
            decision = {
                "action": report.outcome, "attempt": 0, "reason": report.outcome,
                "envelope": report.envelope or {"code": "runtime." + report.outcome},
            }
        error = RecoveryError(decision, self.cause)
        if isinstance(self.cause, BaseException):
            raise error from self.cause
        raise error


def _is_async(fn: Callable[..., Any]) -> bool:
    method = type(fn).__dict__.get("__call__")  # an object whose __call__ is async
    return inspect.iscoroutinefunction(fn) or (method is not None and inspect.iscoroutinefunction(method))


def _public_signature(fn: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    """Give `wrapper` the signature of `fn` without the parameters the door
    passes, so a framework that reads it (to describe a tool to a model, or to
    inject its own arguments) sees only what the caller passes."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = [p for p in sig.parameters.values() if p.name not in _INJECTED]
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {k: v for k, v in getattr(fn, "__annotations__", {}).items() if k not in _INJECTED}


def _wrap(
    fn: Callable[..., Any],
    options: Dict[str, Any],
    asynchronous: Optional[bool] = None,
    start: Optional[Callable[["_Door", Any, Any], Any]] = None,
    params: Optional[Tuple[str, ...]] = None,
    make_runtime: Optional[Callable[["_Door"], Runtime]] = None,
) -> Callable[..., Any]:
    """The wrapper; `asynchronous` (default: as `fn` is) picks the async or the blocking one.
    `start(door, args, kwargs)` (default: `door.start`) names the run and the step of a call,
    for adapters that take them from their framework. `params` (the injected parameters
    `fn` declares) is given by a caller that knows them (`retry`'s own function): then
    `fn`'s signature is not read, and the wrapper, called once and dropped, is not
    dressed as `fn`. `make_runtime(door)` (default: `door.build_runtime()`) makes
    the door's runtime at its first call."""
    door = _Door(fn, options, params, make_runtime)
    public = params is None
    begin = door.start if start is None else functools.partial(start, door)
    recovered: Callable[..., Any]
    if _is_async(fn) if asynchronous is None else asynchronous:

        async def recovered_async(*args: Any, **kwargs: Any) -> Any:
            return await _call(ASYNCIO, begin(args, kwargs))

        recovered = recovered_async
    else:

        def recovered_sync(*args: Any, **kwargs: Any) -> Any:
            return _no_wait(_call(BLOCKING, begin(args, kwargs)))

        recovered = recovered_sync
    if public:
        functools.update_wrapper(recovered, fn)
        _public_signature(fn, recovered)
    return recovered


async def _call(io: _IO, begun: Tuple[Run, Any, _Outcome]) -> Any:
    """One call through the door, on `io`'s path: a run of one step, sent
    with `end` (the loop ends the run when the step ends ok, in the same
    `advance`); the step's result, or its failure raised."""
    run, step, outcome = begun
    token = _CALL.set(outcome.decision)
    try:
        report = await run._carry_step(io, *run._step_of(step, {}, end=True))
    finally:
        _CALL.reset(token)
    if io is ASYNCIO:
        for task in outcome.decision[3:]:  # an async on_decision, awaited before the answer
            await task
    if report.outcome == "cancelled" and io is ASYNCIO:
        raise asyncio.CancelledError()
    return outcome.result(report)


def recover(fn: Optional[Callable[..., Any]] = None, /, **options: Any) -> Any:
    """Wrap `fn` (async or sync) in the recovery runtime: `@recover`,
    `@recover(**options)` or `recover(fn, **options)`.

    | option | default |
    | --- | --- |
    | `policy` | the packaged reference policy (a `Policy`, a `PolicyHandle`) |
    | `store` | a `MemoryStore` per wrapped function: its breakers outlive a call |
    | `clock` | `SystemClock()`; a `VirtualClock` in tests |
    | `seed` | None: jitter from WASI random |
    | `call` | None: read from each observation; `"tool"`, `"llm"` or `"agent"` |
    | `tool` | the function's qualified name |
    | `target` | the tool name (a breaker's key); passed as `target=` |
    | `fallbacks` | none: the targets to fall back to, in order (needs a `target` parameter) |
    | `side_effect` | False; True without a `key` parameter warns (`KeyNotUsedWarning`) unless `idempotent=True` |
    | `idempotent` | None (unknown) |
    | `run_id` | a new id per call, `<name>-<uuid4 hex>`; a string or a function returning one |
    | `step_id` | the function's name |
    | `errors` | `"raise"`: a `RecoveryError`; `"model"`: return the envelope rendered `model-tool-result` |
    | `timeout_ms` | None: the runtime's `attempt_timeout_ms` |
    | `policy_config` | None: the policy's defaults |
    | `breaker` | None: the policy's thresholds; `(failure_threshold, open_ms)` |
    | `on_event` | None: the runtime's events |
    | `on_decision` | None: called with each decision (a dict with the `policy` that decided); may be async |
    | `args` | None: the call's arguments are the step's args (part of the key); `NULL_ARGS`: JSON null; or a JSON value |
    | `runtime_options` | None: more `Runtime` options (`attempt_budget`, `deadline_ms`, `retry_quota`, ...) |
    """
    if fn is None:
        return lambda f: _wrap(f, options)
    return _wrap(fn, options)
