"""The nodes of a LangGraph thread as the steps of one run, and the node
`error_handler` that cancels that run (its compensations, in reverse order).

```python
recovery = GraphRecovery()
graph.add_node("charge", recovery.node(charge, side_effect=True, compensate=refund))
graph.add_node("ship", recovery.node(ship, side_effect=True))
graph.set_node_defaults(error_handler=recovery.error_handler("error"))
app = graph.compile(checkpointer=saver)
```

The loop, the compensations and their order are the runtime's (this module
decides nothing): every `recovery.node` of a thread is a step of the run
`langgraph/<thread_id>` (step id: the task's `checkpoint_ns`, so the key is
the one `recover_node` gives and survives a resume), run one at a time. A
node with `side_effect=True` and a `compensate` hook that ends `ok` is
remembered by the run. When a node fails, the run stays as it was before that
node (LangGraph's error handlers let a graph go on after a failed node, where
a runtime step that fails ends its run); `recovery.error_handler()` then
cancels it: the runtime calls the remembered compensations in reverse order,
each under its own key and retried by the policy, and a compensation that
still fails is written into a dead-letter record. When the policy itself
decided `compensate` (a transient failure exhausted with side effects
pending), the runtime already ran them and the handler has nothing left to do.

What is kept where: the run lives in this object, in this process. A thread
resumed in another process (after a kill) starts a new run: the nodes
completed before the resume are not compensated by it. The runtime's journal
is off for these runs (LangGraph's checkpointer is what resumes a thread), so
`Runtime.recover` never rolls back a graph. `recovery.end(config)` forgets a
thread's run once the graph has finished (a new invocation on the same thread
otherwise goes on in the same run).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Optional, Set, Tuple

from langgraph.errors import NodeError

from ..adapters import observation_from
from ..door import _CALL, _args_json, _Decider, _Door, _is_async, _Outcome, _public_signature
from ..errors import PolicyError
from ..limits import MAX_ID_BYTES
from ..retry import RecoveryError
from ..runtime import Call, Run, Runtime, StepReport

__all__ = ["GraphRecovery"]

#: The keyword arguments LangGraph injects into a node that declares them
#: (`langgraph._internal._runnable.KWARGS_CONFIG_KEYS`): not part of the key.
INJECTED = ("config", "writer", "store", "previous", "runtime")

#: The options of `GraphRecovery` (the runtime's) and of `GraphRecovery.node`.
_RUNTIME_OPTIONS = ("policy", "store", "clock", "seed", "policy_config", "breaker", "on_event", "timeout_ms")
_NODE_OPTIONS = ("call", "tool", "target", "fallbacks", "side_effect", "idempotent")
#: The runs with a node step in progress in this call stack (a node that runs a
#: graph whose nodes are steps of the same run would wait for itself).
_STEPPING: ContextVar[FrozenSet[str]] = ContextVar("agent_recovery_langgraph_stepping", default=frozenset())


def name_of(text: str) -> str:
    """`text`, or a digest of it when it is longer than a run or step id may be."""
    raw = text.encode("utf-8", "surrogatepass")
    return text if len(raw) <= MAX_ID_BYTES else "langgraph/sha256:" + hashlib.sha256(raw).hexdigest()


def node_task() -> Optional[Tuple[str, str]]:
    """`(thread_id, checkpoint_ns)` of the node task in progress (LangGraph's
    `ExecutionInfo`), when it runs under a checkpointer; None outside a graph
    or without one."""
    from langgraph.runtime import get_runtime

    try:
        info = getattr(get_runtime(), "execution_info", None)
    except RuntimeError:  # not inside a graph's node
        return None
    thread = getattr(info, "thread_id", None)
    ns = getattr(info, "checkpoint_ns", None)
    if thread is None or not ns:
        return None
    return str(thread), str(ns)


def step_of(door: _Door, outcome: _Outcome, step_id: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The step options of one node call; the key's `args` leave out what LangGraph injects."""
    o = door.o
    own = {k: v for k, v in kwargs.items() if k not in INJECTED}
    return dict(
        id=step_id, tool=door.tool, call=o["call"], args=_args_json(args, own), target=o["target"],
        fallbacks=list(o["fallbacks"]), side_effect=o["side_effect"], idempotent=o["idempotent"],
        operation=outcome.operation(args, kwargs),
    )


def rendered_error(policy: Any, exc: BaseException) -> Any:
    """The failure's envelope rendered for the model (a `RecoveryError`'s, or
    the policy's classification of any other exception)."""
    envelope: Any = exc.envelope if isinstance(exc, RecoveryError) else policy.classify(observation_from(exc))
    return policy.render(envelope, "model-tool-result")


def _bad(message: str) -> PolicyError:
    return PolicyError("invalid_argument", message)


@dataclass
class _Thread:
    """A thread's run between two nodes: its state text, the undo hooks of its
    completed nodes by step id, the step ids it used."""

    state: str
    undo: Dict[str, Callable[[Call], Any]] = field(default_factory=dict)
    ids: Set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def resume(self, runtime: Runtime, run_id: str) -> Run:
        """The run, from its state between steps (as `Runtime.recover` resumes a journaled one)."""
        run = Run(runtime, self.state, None, run_id)
        run._undo = dict(self.undo)
        run._ids = set(self.ids)
        return run


def _undo_hook(compensate: Callable[..., Any], state: Any, done: Dict[str, Any]) -> Callable[[Call], Any]:
    """`compensate(state, update, *, key, attempt)` as the runtime's
    `compensate(call)`; `done["update"]` is the node's update once it returned."""
    try:
        names = set(inspect.signature(compensate).parameters)
    except (TypeError, ValueError):
        names = set()

    def undo(call: Call) -> Any:
        given = {"key": call.key, "attempt": call.attempt}
        return compensate(state, done.get("update"), **{k: v for k, v in given.items() if k in names})

    return undo


class GraphRecovery:
    """One runtime for the nodes of a graph; each thread's nodes are the steps
    of one run (`langgraph/<thread_id>`). Options: `policy`, `store`, `clock`,
    `seed`, `policy_config`, `breaker`, `on_event`, `timeout_ms` (as `recover`'s)."""

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(_RUNTIME_OPTIONS))
        if unknown:
            raise _bad(f"GraphRecovery() has no option {', '.join(map(repr, unknown))}; "
                       f"the options are {', '.join(_RUNTIME_OPTIONS)}")
        from ..runtime import _default_policy
        from ..store import MemoryStore

        self.options = options
        self.policy = options.get("policy") if options.get("policy") is not None else _default_policy()
        self.runtime = Runtime(
            policy=_Decider(self.policy), store=options.get("store") or MemoryStore(), clock=options.get("clock"),
            seed=options.get("seed"), attempt_timeout_ms=options.get("timeout_ms"),
            policy_config=options.get("policy_config"), breaker=options.get("breaker"),
            on_event=options.get("on_event"), journal=False,
        )
        self._threads: Dict[str, _Thread] = {}
        self._lock = threading.Lock()

    # -- the thread's run -----------------------------------------------------

    def _thread(self, run_id: str) -> _Thread:
        with self._lock:
            thread = self._threads.get(run_id)
            if thread is None:
                thread = self._threads[run_id] = _Thread(self.runtime.run(run_id).state)
            return thread

    def _task(self) -> Tuple[str, str]:
        task = node_task()
        if task is None:
            raise _bad("a GraphRecovery node runs in a graph compiled with a checkpointer, invoked with "
                       "config={'configurable': {'thread_id': ...}}; use recover_node for a graph without one")
        run_id = name_of(f"langgraph/{task[0]}")
        if run_id in _STEPPING.get():
            raise _bad(f"a node of run {run_id!r} is already running in this call (a graph run inside a node, "
                       "on the same thread?); give the inner graph its own GraphRecovery or thread_id")
        return run_id, task[1]

    def _settle(self, thread: _Thread, run_id: str, run: Run, step: Dict[str, Any], report: StepReport,
                undo: Optional[Callable[[Call], Any]]) -> None:
        """After a node: an `ok` node goes into the thread's run; a failed one
        leaves it as it was, unless the runtime already compensated it."""
        if report.outcome == "ok":
            thread.state = run.state
            thread.ids.add(step["id"])
            if undo is not None:
                thread.undo[step["id"]] = undo
        elif report.outcome == "cancelled" or any('"event":"compensate"' in e for e in run.events):
            with self._lock:
                self._threads.pop(run_id, None)

    # -- public ---------------------------------------------------------------

    def node(self, fn: Callable[..., Any], /, *, compensate: Optional[Callable[..., Any]] = None,
             **options: Any) -> Callable[..., Any]:
        """The node `fn` as a step of its thread's run. Options: `call`, `tool`,
        `target`, `fallbacks`, `side_effect`, `idempotent` (as `recover`'s);
        `compensate(state, update, *, key)`: the undo of the node's side
        effect, given the node's input state and the update it returned (and
        the compensation's own idempotency key when it declares `key`)."""
        unknown = sorted(set(options) - set(_NODE_OPTIONS))
        if unknown:
            raise _bad(f"GraphRecovery.node() has no option {', '.join(map(repr, unknown))}; "
                       f"the options are compensate, {', '.join(_NODE_OPTIONS)}")
        if compensate is not None and not callable(compensate):
            raise _bad("compensate is not callable; pass a function compensate(state, update) or None")
        door = _Door(fn, options)
        door._runtime = self.runtime

        def begin(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[_Thread, str, Dict[str, Any], _Outcome]:
            run_id, ns = self._task()
            outcome = _Outcome(door, self.runtime)
            return self._thread(run_id), run_id, step_of(door, outcome, name_of(ns), args, kwargs), outcome

        def step_hook(args: Tuple[Any, ...], done: Dict[str, Any]) -> Optional[Callable[[Call], Any]]:
            return None if compensate is None else _undo_hook(compensate, args[0] if args else None, done)

        if _is_async(fn):

            @functools.wraps(fn)
            async def node(*args: Any, **kwargs: Any) -> Any:
                thread, run_id, step, outcome = begin(args, kwargs)
                await asyncio.to_thread(thread.lock.acquire)
                try:
                    run = thread.resume(self.runtime, run_id)
                    done: Dict[str, Any] = {}
                    undo = step_hook(args, done)
                    token, inside = _CALL.set(outcome.decision), _STEPPING.set(_STEPPING.get() | {run_id})
                    try:
                        report = await run.step_async(compensate=undo, **step)
                    finally:
                        _STEPPING.reset(inside)
                        _CALL.reset(token)
                    if report.outcome == "ok":
                        done["update"] = outcome.result(report)
                    self._settle(thread, run_id, run, step, report, undo)
                finally:
                    thread.lock.release()
                return outcome.result(report)

            _public_signature(fn, node)
            return node

        @functools.wraps(fn)
        def node_sync(*args: Any, **kwargs: Any) -> Any:
            thread, run_id, step, outcome = begin(args, kwargs)
            with thread.lock:
                run = thread.resume(self.runtime, run_id)
                done: Dict[str, Any] = {}
                undo = step_hook(args, done)
                token, inside = _CALL.set(outcome.decision), _STEPPING.set(_STEPPING.get() | {run_id})
                try:
                    report = run.step(compensate=undo, **step)
                finally:
                    _STEPPING.reset(inside)
                    _CALL.reset(token)
                if report.outcome == "ok":
                    done["update"] = outcome.result(report)
                self._settle(thread, run_id, run, step, report, undo)
            return outcome.result(report)

        _public_signature(fn, node_sync)
        return node_sync

    def error_handler(self, field: str = "error", *,
                      update: Optional[Callable[[Any, Any], Any]] = None) -> Callable[[Any, NodeError], Any]:
        """A node `error_handler`: cancels the thread's run, so the runtime
        runs the compensations of its completed nodes in reverse order, then
        returns the failure's envelope rendered for the model as the update
        `{field: rendered}` (or `update(state, rendered)`)."""

        def handler(state: Any, error: NodeError) -> Any:
            task = node_task()
            if task is not None:
                self.cancel(name_of(f"langgraph/{task[0]}"))
            rendered = rendered_error(self.policy, error.error)
            return update(state, rendered) if update is not None else {field: rendered}

        return handler

    def cancel(self, run_id: str) -> Optional[StepReport]:
        """Cancel run `run_id` (`langgraph/<thread_id>`): the runtime runs the
        compensations of its completed nodes in reverse order. None when the
        thread has no run in this object."""
        with self._lock:
            thread = self._threads.pop(run_id, None)
        if thread is None:
            return None
        with thread.lock:
            return thread.resume(self.runtime, run_id).cancel()

    def end(self, config: Any) -> None:
        """Forget the run of the thread of `config` (a finished graph's): a
        later failure on that thread compensates nothing of it."""
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        with self._lock:
            self._threads.pop(name_of(f"langgraph/{thread_id}"), None)

