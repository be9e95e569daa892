"""LangGraph: nodes run through the door, a `retry_on` predicate that asks
the policy, and node `error_handler`s that write the envelope into the state
or run the compensations of the nodes that completed before.

```python
from langgraph.graph import StateGraph
from agent_recovery.integrations.langgraph import envelope_handler, recover_node

graph = StateGraph(State)
graph.add_node("pay", recover_node(pay, side_effect=True), error_handler=envelope_handler("error"))
```

`recover_node(fn, **options)` is `recover(fn, **options)` for a node: each
run of the node is one call of the door, so a 429's `Retry-After` is waited
out, a `fallbacks` chain is followed, and every attempt of the node gets the
same idempotency key as its `key` parameter (declare `key`, `target` or
`attempt` to receive them; LangGraph sees the node's signature without them,
so `config`, `runtime` and the other parameters LangGraph injects still
work). Leave the node's `retry_policy` unset (LangGraph's default): the door
owns its retries, and a `RetryPolicy` on top would multiply the attempts.

The key survives a resume. Under a checkpointer, the run id is built from
LangGraph's `ExecutionInfo` (`langgraph.runtime.get_runtime()`): the
`thread_id` and the task's `checkpoint_ns` (`<node>:<task id>`, with the
parent graphs' before it in a subgraph). LangGraph derives the task id from
the id of the checkpoint the superstep starts from, the namespace, the step
number and the node name. With the superstep's checkpoint saved before the
node runs (`durability="sync"`; LangGraph's default, `"async"`, writes it
while the step runs, so a kill can lose it), a node interrupted mid-call (the
process killed, an exception) and run again by `invoke(None, config)` on the
same thread gets the same key, and the service answers the first request
instead of applying it twice. A `run_id` option replaces the built one. What
differs: each superstep (a node run twice in a loop, the same thread invoked
again with new input) and each `Send` task has its own task id, so its own
key. The key's `args` are the node's positional arguments (the state) and its
own keyword arguments, without those LangGraph injects (`config`, `runtime`,
`writer`, `store`, `previous`), which are not the same object twice. Without
a checkpointer (no `thread_id`), each call of the node is a new run with a
new key, as with `recover`.

When the door gives up it raises `RecoveryError`; `envelope_handler(field)`
is a node `error_handler` that catches it (or any exception) and writes the
envelope rendered for the model into the state's `field` (or returns
`update(state, rendered)`), so the graph goes on to the next edge instead of
failing.

`GraphRecovery` runs several nodes of a thread as the steps of one run of the
runtime, so a node with `side_effect=True` and a `compensate` hook is
remembered when it completes, and `recovery.error_handler()` (a node
`error_handler`, e.g. for every node with `set_node_defaults`) cancels the
run when a later node fails for good: the runtime runs the compensations of
the completed nodes in reverse order, as it does for any run
(`GraphRecovery.node`, `GraphRecovery.error_handler`).

For graphs that keep LangGraph's own `RetryPolicy`, `retry_on(policy)` is
its `retry_on` predicate: an exception is retried when the policy's
decision for it, as a first attempt, is `retry`. LangGraph then waits its
own interval (it does not read `Retry-After`): prefer `recover_node`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from langgraph.errors import NodeError

from ..adapters import observation_from
from ..door import _Door, _Outcome, _wrap
from ._langgraph_runs import GraphRecovery, name_of, node_task, rendered_error, step_of

__all__ = ["GraphRecovery", "envelope_handler", "recover_node", "retry_on"]


def _policy(policy: Any) -> Any:
    if policy is not None:
        return policy
    from ..runtime import _default_policy

    return _default_policy()


def _node_run(door: _Door, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, Dict[str, Any], _Outcome]:
    """The run and step of one call of a `recover_node` node."""
    task = node_task()
    runtime = door.runtime()
    outcome = _Outcome(door, runtime)
    if task is None or door.o["run_id"] is not None:
        run_id = door.run_id()
    else:
        run_id = name_of(f"langgraph/{task[0]}/{task[1]}")
    step = step_of(door, outcome, door.o["step_id"] or door.name, args, kwargs)
    return runtime.run(run_id), step, outcome


def recover_node(fn: Callable[..., Any], /, **options: Any) -> Callable[..., Any]:
    """The node `fn` run through a `recover` door (`recover`'s options; the
    step and tool are named after the node function; under a checkpointer
    the run id is the thread's and the task's, so a resumed node gets the
    key it had)."""
    return _wrap(fn, options, start=_node_run)


def retry_on(policy: Any = None, *, call: Optional[str] = None) -> Callable[[Exception], bool]:
    """A `RetryPolicy(retry_on=...)` predicate: True when the policy would
    retry this exception on a first attempt."""
    chosen = _policy(policy)

    def retryable(exc: Exception) -> bool:
        decision = chosen.decide(observation_from(exc, call=call), {"attempt": 1})
        return bool(decision.get("action") == "retry")

    return retryable


def envelope_handler(
    field: str = "error",
    policy: Any = None,
    *,
    update: Optional[Callable[[Any, Any], Any]] = None,
) -> Callable[[Any, NodeError], Any]:
    """A node `error_handler`: the failure's envelope, rendered for the model,
    as the state update `{field: rendered}`, or `update(state, rendered)`
    when given (e.g. a `Command` adding a `ToolMessage` and going back to the
    model node: a handler's update does not follow the failed node's edges)."""
    chosen = _policy(policy)

    def handler(state: Any, error: NodeError) -> Any:
        rendered = rendered_error(chosen, error.error)
        return update(state, rendered) if update is not None else {field: rendered}

    return handler
