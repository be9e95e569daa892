"""`recover_activity`: a Temporal activity whose failures the policy decides.

Temporal owns the loop (its retry policy schedules each attempt, its history
records them); the policy component owns the decision. Each attempt runs the
activity body once. When it raises (or returns a result that reports a
failure, such as an MCP `CallToolResult` with `isError`), the failure is
observed with `observation_from`, the policy decides with the attempt number
and the time since the activity was first scheduled, and the attempt raises
`temporalio.exceptions.ApplicationError`:

| decision | `ApplicationError` |
| --- | --- |
| `retry` | `next_retry_delay` = the decision's `delay_ms`; retryable |
| anything else (`fail`, `escalate`, `dead_letter`, `fallback`, ...) | `non_retryable=True` |

In both cases `type` is the envelope's `code`, the message its `message`, and
`details` are `(envelope, decision)`: a workflow reads them from the
`ActivityError`'s cause. An `ApplicationError` (or any other Temporal
failure) raised by the body itself passes through unchanged.

The body receives, when it declares them as keyword-only parameters:

- `key`: the idempotency key, `policy.key(workflow id, activity id, activity
  type, {"args": [...], "kwargs": {}})`: the same on every attempt of one
  activity execution, different for every other activity of the workflow;
- `attempt`: Temporal's attempt number, from 1.
"""

from __future__ import annotations

import functools
import inspect
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Optional, Tuple, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError, FailureError

from ..adapters import failed_result, observation_from
from ..door import _args_json
from ..errors import PolicyError

__all__ = ["OPTIONS", "recover_activity"]

#: The options of `recover_activity`, with their defaults.
OPTIONS: Dict[str, Any] = {
    "policy": None,  # the packaged reference policy (a Policy or a PolicyHandle)
    "call": None,  # "tool", "llm" or "agent"; None: read from each observation
    "provider": None,  # added to each observation when given
    "idempotent": None,  # unknown
    "seed": None,  # jitter from WASI random
    "policy_config": None,  # the policy's defaults
}

_INJECTED = ("key", "attempt")


def _bad(message: str) -> PolicyError:
    return PolicyError("invalid_argument", message)


class _Activity:
    """One wrapped activity: its options and the policy that decides it."""

    def __init__(self, fn: Callable[..., Any], options: Dict[str, Any]) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise _bad(
                f"recover_activity() has no option {', '.join(map(repr, unknown))}; "
                f"the options are {', '.join(OPTIONS)}"
            )
        if not callable(fn):
            raise _bad(
                f"recover_activity() wraps a function, got {type(fn).__name__}; pass the activity's function"
            )
        self.fn = fn
        self.o = {**OPTIONS, **options}
        if self.o["call"] not in (None, "tool", "llm", "agent"):
            raise _bad(f"call is 'tool', 'llm' or 'agent', got {self.o['call']!r}")
        sig = inspect.signature(fn)
        self.params = tuple(
            p.name for p in sig.parameters.values() if p.kind == inspect.Parameter.KEYWORD_ONLY and p.name in _INJECTED
        )
        # What Temporal sees: the parameters the workflow passes (it refuses keyword-only ones).
        self.signature = sig.replace(parameters=[p for p in sig.parameters.values() if p.name not in self.params])

    def policy(self) -> Any:
        if self.o["policy"] is not None:
            return self.o["policy"]
        from ..runtime import _default_policy

        return _default_policy()

    def injected(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        info = activity.info()
        given: Dict[str, Any] = {"attempt": info.attempt}
        if "key" in self.params:
            scope = info.workflow_id if info.workflow_id is not None else (info.activity_run_id or "")
            given["key"] = self.policy().key(scope, info.activity_id, info.activity_type, _args_json(args, kwargs))
        return {name: given[name] for name in self.params}

    def context(self) -> Dict[str, Any]:
        info = activity.info()
        now = datetime.now(timezone.utc)
        elapsed = now - info.scheduled_time
        ctx: Dict[str, Any] = {
            "attempt": info.attempt,
            "elapsed_ms": max(0, int(elapsed.total_seconds() * 1000)),
            "now_ms": int(now.timestamp() * 1000),
        }
        for option, field in (("call", "call"), ("idempotent", "idempotent"), ("seed", "seed"), ("policy_config", "config")):
            if self.o[option] is not None:
                ctx[field] = self.o[option]
        return ctx

    def failure(self, observed: Any, cause: Optional[BaseException]) -> ApplicationError:
        """The `ApplicationError` that carries the policy's decision on `observed`."""
        observation = observation_from(observed, call=self.o["call"], provider=self.o["provider"])
        decision = dict(self.policy().decide(observation, self.context()))
        envelope: Dict[str, Any] = dict(decision.get("envelope") or {})
        retry = decision.get("action") == "retry"
        delay = decision.get("delay_ms")
        error = ApplicationError(
            str(envelope.get("message") or decision.get("reason") or decision.get("action")),
            envelope,
            decision,
            type=envelope.get("code"),
            non_retryable=not retry,
            next_retry_delay=timedelta(milliseconds=delay) if retry and isinstance(delay, int) else None,
        )
        if cause is not None:
            error.__cause__ = cause
        return error

    def returned(self, value: Any) -> Any:
        failed = failed_result(value)
        if failed is not None:
            raise self.failure(value, None)
        return value


def _wrap(fn: Callable[..., Any], options: Dict[str, Any]) -> Callable[..., Any]:
    act = _Activity(fn, options)
    method = type(fn).__dict__.get("__call__")
    if inspect.iscoroutinefunction(fn) or (method is not None and inspect.iscoroutinefunction(method)):

        @functools.wraps(fn)
        async def recovered(*args: Any, **kwargs: Any) -> Any:
            extra = act.injected(args, kwargs)
            try:
                value = await fn(*args, **kwargs, **extra)
            except FailureError:
                raise
            except Exception as exc:
                raise act.failure(exc, exc) from exc
            return act.returned(value)

        wrapper: Any = recovered
    else:

        @functools.wraps(fn)
        def recovered_sync(*args: Any, **kwargs: Any) -> Any:
            extra = act.injected(args, kwargs)
            try:
                value = fn(*args, **kwargs, **extra)
            except FailureError:
                raise
            except Exception as exc:
                raise act.failure(exc, exc) from exc
            return act.returned(value)

        wrapper = recovered_sync
    wrapper.__signature__ = act.signature
    return cast(Callable[..., Any], wrapper)


def recover_activity(fn: Optional[Callable[..., Any]] = None, /, **options: Any) -> Any:
    """Let the policy decide the failures of a Temporal activity (async or sync):
    `@recover_activity`, `@recover_activity(**options)` or `recover_activity(fn, **options)`,
    under `@activity.defn`.

    | option | default |
    | --- | --- |
    | `policy` | the packaged reference policy (a `Policy`, a `PolicyHandle`) |
    | `call` | None: read from each observation; `"tool"`, `"llm"` or `"agent"` |
    | `provider` | None: the SDK's, when the adapters know it |
    | `idempotent` | None (unknown); False: an ambiguous failure (a timeout, a reset, a 502) fails instead of retrying |
    | `seed` | None: jitter from WASI random |
    | `policy_config` | None: the policy's defaults (`max_attempts`, `retry_budget_ms`, ...) |

    Leave Temporal's `RetryPolicy` at its default (no `maximum_attempts`), or
    above the policy's, so the policy's decision is what ends the retries.
    """
    if fn is None:
        return lambda f: _wrap(f, options)
    return _wrap(fn, options)
