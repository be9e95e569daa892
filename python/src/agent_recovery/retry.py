"""Run an operation; on failure let the policy decide, sleep, and try again.

```python
import asyncio, httpx
from agent_recovery import PolicyHandle, retry

policy = PolicyHandle()

async def fetch(*, attempt: int, idempotency_key: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        r = await client.post(URL, json=ARGS, headers={"Idempotency-Key": idempotency_key})
        r.raise_for_status()
        return r

result = asyncio.run(retry(fetch, policy=policy, call="tool", run_id="run-1",
                           step_id="step-3", tool="search", args=ARGS))
```

Each attempt gets the same idempotency key (`policy.key(run_id, step_id, tool,
args)`), so a retry the server already acted on is not applied twice. A failed
attempt (an exception, a returned `Failure`, a returned response with status
>= 400, or a failed MCP / A2A result) becomes an observation
(`observation_from` / `as_failure`); the policy decides with `{call, attempt,
elapsed_ms, seed}`, where `elapsed_ms` is the retry delay spent so far (the run's
retry budget is the policy's business). On `retry` the helper sleeps `delay_ms`
through the injected `sleep` and tries again; any other action raises
`RecoveryError` with the decision and its envelope. Nothing here decides: the
loop only carries state between the operation and the component.

`retry` and `retry_sync` share `Attempts`, so the two loops cannot drift apart.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Awaitable, Callable, Dict, Optional, Protocol

from .adapters import observation_from
from .observe import as_failure
from .types import Context, Decision, Envelope, Observation


class DecidingPolicy(Protocol):
    """What the retry helper needs: a `Policy` or a `PolicyHandle`."""

    def key(self, run_id: str, step_id: str, tool: str, args: Any) -> str: ...

    def decide(self, obs: Any, ctx: Any = None) -> Decision: ...


class RecoveryError(Exception):
    """The policy decided not to retry (fail, fallback, dead_letter, ...).

    `decision` is the whole decision, `envelope` its error envelope, `action`
    the next step the caller must take, `cause` the exception or `Failure` of
    the last attempt.
    """

    def __init__(self, decision: Decision, cause: Any) -> None:
        self.decision = decision
        self.envelope: Envelope = decision["envelope"]
        self.action: str = decision["action"]
        self.code: str = self.envelope["code"]
        self.attempts: int = decision["attempt"]
        self.cause = cause
        super().__init__(
            f"{self.action} after attempt {self.attempts}: {self.code} "
            f"({decision.get('reason')}); {self.envelope.get('hint', '')}"
        )


class Attempts:
    """The state of one step's attempts: key, attempt number, retry time spent."""

    def __init__(
        self,
        policy: DecidingPolicy,
        call: str,
        run_id: str,
        step_id: str,
        tool: str,
        args: Any,
        seed: Optional[int],
        context: Optional[Context],
    ) -> None:
        self.policy = policy
        self.call = call
        self.seed = seed
        self.context: Dict[str, Any] = dict(context or {})
        self.key = policy.key(run_id, step_id, tool, args)
        self.attempt = 1
        self.elapsed_ms = 0

    def kwargs(self) -> Dict[str, Any]:
        """The keyword arguments of the next attempt."""
        return {"attempt": self.attempt, "idempotency_key": self.key}

    def observe(self, result: Any = None, exc: Optional[BaseException] = None) -> Any:
        """(observation, cause) of a failed attempt, or None for a success."""
        if exc is not None:
            return observation_from(exc), exc
        failure = as_failure(result)
        if failure is None:
            return None
        return failure.observation, failure

    def decide(self, obs: Observation) -> Decision:
        """Ask the policy about the attempt that just failed."""
        ctx: Dict[str, Any] = dict(self.context)
        ctx.update(call=self.call, attempt=self.attempt, elapsed_ms=self.elapsed_ms)
        if self.seed is not None:
            ctx["seed"] = self.seed
        return self.policy.decide(obs, ctx)

    def delay_s(self, decision: Decision, cause: Any) -> float:
        """Seconds to sleep before the next attempt; raises unless the action is retry."""
        if decision["action"] != "retry":
            error = RecoveryError(decision, cause)
            if isinstance(cause, BaseException):
                raise error from cause
            raise error
        delay_ms = int(decision.get("delay_ms") or 0)
        self.elapsed_ms += delay_ms
        self.attempt += 1
        return delay_ms / 1000


async def retry(
    operation: Callable[..., Any],
    *,
    policy: DecidingPolicy,
    call: str,
    run_id: str,
    step_id: str,
    tool: str,
    args: Any,
    seed: Optional[int] = None,
    on_decision: Optional[Callable[[Decision], Any]] = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    context: Optional[Context] = None,
) -> Any:
    """Run `operation(attempt=..., idempotency_key=...)` until it succeeds or the
    policy says stop (then `RecoveryError`). Returns the operation's result.

    `operation` may be async or sync; `on_decision(decision)` is called after
    each failed attempt (it may be async); `context` adds decision context
    fields (`idempotent`, `fallback_available`, `config`, ...).
    """
    state = Attempts(policy, call, run_id, step_id, tool, args, seed, context)
    while True:
        try:
            result = operation(**state.kwargs())
            if inspect.isawaitable(result):
                result = await result
            failed = state.observe(result)
        except Exception as exc:  # noqa: BLE001 - every failure is observed
            failed = state.observe(exc=exc)
        if failed is None:
            return result
        obs, cause = failed
        decision = state.decide(obs)
        if on_decision is not None:
            note = on_decision(decision)
            if inspect.isawaitable(note):
                await note
        await sleep(state.delay_s(decision, cause))


def retry_sync(
    operation: Callable[..., Any],
    *,
    policy: DecidingPolicy,
    call: str,
    run_id: str,
    step_id: str,
    tool: str,
    args: Any,
    seed: Optional[int] = None,
    on_decision: Optional[Callable[[Decision], Any]] = None,
    sleep: Callable[[float], Any] = time.sleep,
    context: Optional[Context] = None,
) -> Any:
    """The blocking twin of `retry` (same arguments, `sleep=time.sleep`)."""
    state = Attempts(policy, call, run_id, step_id, tool, args, seed, context)
    while True:
        try:
            result = operation(**state.kwargs())
            failed = state.observe(result)
        except Exception as exc:  # noqa: BLE001 - every failure is observed
            failed = state.observe(exc=exc)
        if failed is None:
            return result
        obs, cause = failed
        decision = state.decide(obs)
        if on_decision is not None:
            on_decision(decision)
        sleep(state.delay_s(decision, cause))
