"""Workflows of tests/test_temporal.py besides the documented one.

This module imports `Saga` inside Temporal's workflow sandbox (not passed
through), so the saga module's imports and calls go through the sandbox's
restrictions.
"""

from __future__ import annotations

from datetime import timedelta
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


@workflow.defn
class ChargeOnce:
    """Runs the activity named `activity` once for `order` (Temporal's default retry policy)."""

    @workflow.run
    async def run(self, activity: str, order: str) -> Any:
        return await workflow.execute_activity(
            activity, args=["/charge", order], start_to_close_timeout=timedelta(seconds=30)
        )
