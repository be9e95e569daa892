"""LlamaIndex workflows: a step `RetryPolicy` whose `next(...)` asks the policy.

```python
from workflows import Workflow, step
from agent_recovery.integrations.llama_index import RecoveryRetryPolicy

class Pay(Workflow):
    @step(retry_policy=RecoveryRetryPolicy(call="tool"))
    async def pay(self, ev: StartEvent) -> StopEvent: ...
```

The workflow runtime calls `next(elapsed_time, attempts, error)` after each
failure of the step; the policy decides with the step's attempt number and
the time since its first failure as `elapsed_ms` (`seed` is passed on for
deterministic jitter on replay). A `retry` decision returns its `delay_ms`
in seconds (at least the server's `Retry-After`), anything else `None`: the
step fails with the error. `decisions` keeps the last `DECISIONS_KEPT` (1 000) decisions.

One layer owns retries: give the clients the step calls `max_retries=0`
(an OpenAI client, a LlamaIndex `OpenAI(max_retries=0)` LLM). The step gets
no idempotency key from the workflow: for a step with side effects, wrap the
call inside it with `recover(..., side_effect=True)` instead, which keys
every attempt alike.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, Optional

from ..adapters import observation_from

#: How many decisions `decisions` keeps (the newest).
DECISIONS_KEPT = 1000

__all__ = ["RecoveryRetryPolicy"]


class RecoveryRetryPolicy:
    """A workflows `RetryPolicy` (the protocol: `next(elapsed_time, attempts,
    error, *, seed=None) -> seconds | None`) backed by the policy."""

    def __init__(self, policy: Any = None, *, call: Optional[str] = None,
                 config: Optional[Dict[str, Any]] = None) -> None:
        if policy is None:
            from ..runtime import _default_policy

            policy = _default_policy()
        self.policy = policy
        self.call = call
        self.config = config
        self.decisions: Deque[Dict[str, Any]] = deque(maxlen=DECISIONS_KEPT)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "RecoveryRetryPolicy":
        return self  # shared: it holds the loaded policy

    def next(self, elapsed_time: float, attempts: int, error: Exception, *, seed: Optional[int] = None) -> Optional[float]:
        """Seconds to wait before the next attempt, or None to stop."""
        context: Dict[str, Any] = {"attempt": attempts, "elapsed_ms": int(elapsed_time * 1000)}
        if seed is not None:
            context["seed"] = seed
        if self.config is not None:
            context["config"] = self.config
        decision: Dict[str, Any] = self.policy.decide(observation_from(error, call=self.call), context)
        self.decisions.append(decision)
        if decision.get("action") != "retry":
            return None
        return int(decision.get("delay_ms") or 0) / 1000
