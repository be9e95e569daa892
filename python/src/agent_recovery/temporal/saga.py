"""Sagas in Temporal workflows: compensations run in reverse order on failure.

```python
async with Saga() as saga:
    await workflow.execute_activity(charge, order, start_to_close_timeout=t)
    saga.add(workflow.execute_activity, refund, order, start_to_close_timeout=t)
    await workflow.execute_activity(ship, order, start_to_close_timeout=t)
```

When the block raises (an activity failed for good, the workflow was
cancelled), the compensations registered so far run one after another, last
registered first, and the block's exception is raised again. A compensation
that fails does not stop the others: once all have run, `CompensationFailed`
(a non-retryable `ApplicationError` whose cause is the block's exception)
names every one that failed.

Workflow-safe: this module imports only the standard library's typing and
`temporalio.exceptions`, keeps its state in the workflow object, and calls no
clock, random source or I/O; the order is the order of `add` calls, so a
replay runs the same compensations in the same order.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Type

from temporalio.exceptions import ApplicationError

__all__ = ["CompensationFailed", "Saga"]

_Compensation = Tuple[str, Callable[..., Awaitable[Any]], Tuple[Any, ...], Dict[str, Any]]


class CompensationFailed(ApplicationError):
    """Compensations that failed; `details[0]` lists them in the order they ran:
    `{"compensation": <name>, "error": <message>, "type": <exception type>}`."""

    def __init__(self, failures: List[Dict[str, str]]) -> None:
        names = ", ".join(f["compensation"] for f in failures)
        super().__init__(
            f"{len(failures)} compensation(s) failed: {names}; what they should have undone is still applied, "
            "see details[0] and undo it by hand or run the compensation again",
            failures,
            type="CompensationFailed",
            non_retryable=True,
        )


def _name(fn: Callable[..., Any], args: Tuple[Any, ...]) -> str:
    """The compensation's name: the activity's when `fn` starts one."""
    for candidate in (args[0] if args else None, fn):
        definition = getattr(candidate, "__temporal_activity_definition", None)
        name = getattr(definition, "name", None)
        if isinstance(name, str):
            return name
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


class Saga:
    """The compensations of the steps that succeeded, run in reverse order on failure."""

    def __init__(self) -> None:
        self._compensations: List[_Compensation] = []

    def add(self, fn: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any) -> None:
        """Register `fn(*args, **kwargs)` (awaited) to undo the step that just succeeded,
        e.g. `saga.add(workflow.execute_activity, refund, charge_id, start_to_close_timeout=t)`."""
        if not callable(fn):
            raise TypeError(
                f"Saga.add takes the function that compensates, got {type(fn).__name__}; "
                "pass e.g. workflow.execute_activity followed by the activity and its arguments"
            )
        self._compensations.append((_name(fn, args), fn, args, kwargs))

    @property
    def pending(self) -> List[str]:
        """The names of the compensations registered and not yet run, in registration order."""
        return [c[0] for c in self._compensations]

    async def compensate(self) -> List[Dict[str, str]]:
        """Run every registered compensation, last registered first, each once; return
        the ones that failed (empty when all succeeded). A failed one does not stop the rest."""
        failures: List[Dict[str, str]] = []
        while self._compensations:
            name, fn, args, kwargs = self._compensations.pop()
            try:
                await fn(*args, **kwargs)
            except Exception as exc:
                failures.append({"compensation": name, "error": str(exc), "type": type(exc).__name__})
        return failures

    async def __aenter__(self) -> "Saga":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc is None:
            self._compensations.clear()  # the saga completed: nothing to undo
            return
        failures = await self.compensate()
        if failures:
            raise CompensationFailed(failures) from exc
