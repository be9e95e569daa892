"""Temporal: activities decided by the recovery policy, and sagas in workflows.

```python
from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agent_recovery.temporal import Saga, recover_activity

@activity.defn
@recover_activity(call="tool")
async def charge(cents: int, *, key: str) -> str:
    ...  # send `key` to the service as its idempotency key
```

- `recover_activity`: each failed attempt of the activity is observed
  (`observation_from`) and decided by the policy component; Temporal carries
  the decision out. A retry raises `ApplicationError` with `next_retry_delay`
  set to the decision's delay; any other decision (fail, escalate,
  dead-letter, ...) raises a non-retryable one. Its `details` are the
  envelope and the decision.
- `Saga`: compensations registered as steps succeed, run in reverse order
  when the workflow fails. Workflow-safe: it imports nothing from the
  runtime and calls no clock, random source or I/O.

Needs the `temporal` extra (`pip install 'agent-recovery[temporal]'`);
`temporalio` is imported when this module is.
"""

from typing import TYPE_CHECKING, Any

from .saga import CompensationFailed, Saga

if TYPE_CHECKING:
    from ._activity import OPTIONS, recover_activity

__all__ = ["CompensationFailed", "OPTIONS", "Saga", "recover_activity"]


def __getattr__(name: str) -> Any:
    # The activity wrapper brings the policy runtime in; a workflow that only
    # needs `Saga` does not import it.
    if name in ("recover_activity", "OPTIONS"):
        from . import _activity

        return getattr(_activity, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
