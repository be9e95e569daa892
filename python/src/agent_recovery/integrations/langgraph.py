"""LangGraph: nodes run through the door, a `retry_on` predicate that asks
the policy, and an error handler that writes the envelope into the state.

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

When the door gives up it raises `RecoveryError`; `envelope_handler(field)`
is a node `error_handler` that catches it (or any exception) and writes the
envelope rendered for the model into the state's `field` (or returns
`update(state, rendered)`), so the graph goes on to the next edge instead of
failing.

For graphs that keep LangGraph's own `RetryPolicy`, `retry_on(policy)` is
its `retry_on` predicate: an exception is retried when the policy's
decision for it, as a first attempt, is `retry`. LangGraph then waits its
own interval (it does not read `Retry-After`): prefer `recover_node`.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from langgraph.errors import NodeError

from ..adapters import observation_from
from ..door import recover
from ..retry import RecoveryError

__all__ = ["envelope_handler", "recover_node", "retry_on"]


def _policy(policy: Any) -> Any:
    if policy is not None:
        return policy
    from ..runtime import _default_policy

    return _default_policy()


def recover_node(fn: Callable[..., Any], /, **options: Any) -> Callable[..., Any]:
    """The node `fn` run through a `recover` door (`recover`'s options; the
    step and tool are named after the node function)."""
    return recover(fn, **options)  # type: ignore[no-any-return]


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
        exc = error.error
        if isinstance(exc, RecoveryError):
            envelope: Any = exc.envelope
        else:
            envelope = chosen.classify(observation_from(exc))
        rendered = chosen.render(envelope, "model-tool-result")
        return update(state, rendered) if update is not None else {field: rendered}

    return handler
