"""A workflow whose module imports `Saga` inside Temporal's workflow sandbox
(not passed through), so the saga module's imports and calls go through the
sandbox's restrictions (tests/test_temporal.py)."""

from __future__ import annotations

from typing import Any, Dict, List

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from agent_recovery.temporal.saga import CompensationFailed, Saga


@workflow.defn
class SagaInSandbox:
    """Registers three compensations, fails, and returns what ran and what failed."""

    def __init__(self) -> None:
        self.ran: List[str] = []

    async def undo(self, name: str, fails: bool) -> None:
        self.ran.append(name)
        if fails:
            raise ApplicationError(f"{name} could not be undone", non_retryable=True)

    @workflow.run
    async def run(self, failing: List[str]) -> Dict[str, Any]:
        failed: List[Any] = []
        cause = None
        try:
            async with Saga() as saga:
                for name in ("charge", "reserve", "label"):
                    saga.add(self.undo, name, name in failing)
                raise ApplicationError("ship: carrier refused", non_retryable=True)
        except CompensationFailed as e:
            failed = list(e.details[0])
            cause = str(e.__cause__)
        except ApplicationError as e:
            cause = str(e)
        return {"ran": self.ran, "failed": failed, "cause": cause, "pending": saga.pending}
