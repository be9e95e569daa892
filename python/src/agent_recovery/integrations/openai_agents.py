"""OpenAI Agents SDK: the policy answers the runner's retry question, and a
failed tool's result is the rendered envelope.

```python
from agents import Agent, ModelSettings, function_tool
from agent_recovery.integrations.openai_agents import failure_error_function, retry_settings

agent = Agent(
    name="payer", model=model,   # its AsyncOpenAI client built with max_retries=0
    model_settings=ModelSettings(retry=retry_settings()),
    tools=[function_tool(charge, failure_error_function=failure_error_function())],
)
```

`retry_settings()` is the SDK's `ModelRetrySettings` with a `policy`
callback: each failed model request is observed (`observation_from` reads
the SDK's exception and the OpenAI error under it, `Retry-After` included)
and decided by the policy; a `retry` decision becomes `RetryDecision(retry=
True, delay=delay_ms / 1000)`, anything else `RetryDecision(retry=False)`
with the envelope's code as the reason. `max_retries` is set high (the
policy's attempt limit decides); the runner still applies its own replay
vetoes (an aborted or already-streaming request is never replayed).

One layer owns retries: the runner keeps the OpenAI client's own retries on
for a request's first attempt, so build the client with `max_retries=0`
(`AsyncOpenAI(max_retries=0)`, or `without_sdk_retries(client)`); then a
persistent 429 reaches the provider exactly the policy's `max_attempts` times.

For a fallback chain, `RecoveringModel(model, fallbacks=[...])` is an SDK
`Model` whose `get_response` goes through a `recover` door instead (the
models' names as `target` and `fallbacks`; a quota refusal moves to the next
model, a model whose breaker is open is skipped by later requests). It owns
the retries then: leave `ModelSettings.retry` unset and give its models
clients with `max_retries=0`. `stream_response` passes through to the first
model.

`failure_error_function()` returns what the SDK calls with a tool's
exception: the exception's envelope rendered `model-tool-result`, as JSON
text (the SDK hands a string to the model). To also retry the tool with one
idempotency key, wrap it first: `function_tool(recover(charge, call="tool",
side_effect=True, errors="model"))`.
"""

from __future__ import annotations

import json
from collections import deque
from contextvars import ContextVar
from typing import Any, Callable, Deque, Dict, Optional, Tuple

from agents.models.interface import Model
from agents.retry import ModelRetrySettings, RetryDecision, RetryPolicyContext

from ..adapters import observation_from
from ..door import recover
from ._chain import chain

#: How many decisions `decisions` keeps (the newest).
DECISIONS_KEPT = 1000

__all__ = ["RecoveringModel", "RecoveryRetryPolicy", "failure_error_function", "retry_settings",
           "without_sdk_retries"]

#: The retry delay already spent on the model request in progress (this task's).
_SPENT: ContextVar[Tuple[int, int]] = ContextVar("agent_recovery_agents_spent", default=(0, 0))


def _policy(policy: Any) -> Any:
    if policy is not None:
        return policy
    from ..runtime import _default_policy

    return _default_policy()


class RecoveryRetryPolicy:
    """The `policy` callback of `ModelRetrySettings`: the runner calls it with
    a `RetryPolicyContext` after each failed model request.

    `decisions` keeps the last `DECISIONS_KEPT` (1 000) decisions (the policy's dict), newest last;
    `on_decision(decision)` is called with each one.
    """

    def __init__(self, policy: Any = None, *, config: Optional[Dict[str, Any]] = None,
                 on_decision: Optional[Callable[[Dict[str, Any]], Any]] = None) -> None:
        self.policy = _policy(policy)
        self.config = config
        self.on_decision = on_decision
        self.decisions: Deque[Dict[str, Any]] = deque(maxlen=DECISIONS_KEPT)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "RecoveryRetryPolicy":
        # The SDK copies an agent's settings to tell agents apart; the policy
        # (a loaded component) is shared, not copied.
        return self

    def __call__(self, ctx: RetryPolicyContext) -> RetryDecision:
        observation = observation_from(ctx.error, call="llm")
        attempt, spent = _SPENT.get()
        if ctx.attempt <= attempt:  # a new model request: its own retry budget
            spent = 0
        context: Dict[str, Any] = {"attempt": ctx.attempt, "elapsed_ms": spent}
        if self.config is not None:
            context["config"] = self.config
        decision: Dict[str, Any] = self.policy.decide(observation, context)
        self.decisions.append(decision)
        if self.on_decision is not None:
            self.on_decision(decision)
        code = (decision.get("envelope") or {}).get("code")
        if decision.get("action") == "retry":
            delay_ms = int(decision.get("delay_ms") or 0)
            _SPENT.set((ctx.attempt, spent + delay_ms))
            return RetryDecision(retry=True, delay=delay_ms / 1000, reason=code)
        _SPENT.set((0, 0))
        return RetryDecision(retry=False, reason=code)


def retry_settings(policy: Any = None, *, max_retries: int = 100, **options: Any) -> ModelRetrySettings:
    """`ModelRetrySettings` whose `policy` is a `RecoveryRetryPolicy(policy,
    **options)`; `max_retries` is only a ceiling (the policy's attempt limit
    decides first)."""
    return ModelRetrySettings(max_retries=max_retries, policy=RecoveryRetryPolicy(policy, **options))


def failure_error_function(policy: Any = None) -> Callable[[Any, Exception], str]:
    """A tool's `failure_error_function`: the exception's envelope, rendered
    for the model, as JSON text."""
    chosen = _policy(policy)

    def render(ctx: Any, error: Exception) -> str:
        envelope = chosen.classify(observation_from(error, call="tool"))
        return json.dumps(chosen.render(envelope, "model-tool-result"))

    return render


def without_sdk_retries(client: Any) -> Any:
    """A copy of an OpenAI client (`AsyncOpenAI`, `OpenAI`) that never retries
    on its own: `client.with_options(max_retries=0)`."""
    return client.with_options(max_retries=0)


class _Request:
    """One model request's arguments, passed through the door (its repr is
    what the door records as the call's arguments)."""

    def __init__(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return "<model request>"


class RecoveringModel(Model):
    """`model` (then `fallbacks`, in order) with every `get_response` run
    through a `recover` door. Options: `recover`'s, except `call`, `target`
    and `fallbacks`, which this model sets."""

    def __init__(self, model: Model, *, fallbacks: Any = (), **options: Any) -> None:
        named = ((str(getattr(m, "model", type(m).__name__)), m) for m in [model, *fallbacks])
        self.models: Dict[str, Model]
        self.models, door = chain("RecoveringModel", "model", named, options)
        self._door = recover(self._attempt, **door)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "RecoveringModel":
        return self  # shared, like the policy it holds

    async def _attempt(self, request: _Request, *, target: str) -> Any:
        return await self.models[target].get_response(*request.args, **request.kwargs)

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        """The first model's response that the door accepts (the SDK's arguments, passed on)."""
        return await self._door(_Request(args, kwargs))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        """The first model's stream, unchanged."""
        return next(iter(self.models.values())).stream_response(*args, **kwargs)

    async def close(self) -> None:
        for m in self.models.values():
            await m.close()
