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

For a new call, prefer the small door, `agent_recovery.recover` (fallback
chains, breakers across calls, errors as data). `policy` (default: the
packaged reference), `run_id` (default: a new id), `step_id` (`"retry"`),
`tool` (the operation's name) and `args` (None) may be left out. `context` is
read for `config` and `idempotent` only; any other member is refused
(`PolicyError`, kind `invalid_context`), since the loop sets the rest itself
(a fallback needs `recover(..., fallbacks=[...])`).

It is a thin wrapper over the recovery `Runtime` (one loop, written
once in the component, so the helpers of the three languages cannot drift): a
run `run_id` with one step (`step_id`, `tool`, `args`, `call`) whose operation
is `operation(attempt=..., idempotency_key=...)`. Each attempt gets the same
idempotency key (`policy.key(run_id, step_id, tool, args)`). What failed is
judged by the component: an exception (observed with `observation_from`), a
returned `Failure`, and a returned response or SDK result (an object with
`status_code` and `headers`, an MCP `CallToolResult`, an A2A task), which the
component checks (a 503 or a 200 carrying a refusal fails, a 304 succeeds). The
policy decides each failure with the run's `elapsed_ms` (the retry delay
spent so far, carried by the runtime); on `retry` the helper sleeps `delay_ms`
through the injected `sleep` and calls again; any other action raises
`RecoveryError` with the decision and its envelope.

Defaults of the one-step run: a fresh `MemoryStore` per call (no breaker or
cache shared with other calls unless you pass `store`), the attempt budget and
the breaker out of the way (the policy's `max_attempts` decides, the breaker
threshold is 100 consecutive failures; pass
`runtime_options={"breaker": (3, 30_000)}` to have one), `context["config"]`
as the policy configuration and `context["idempotent"]` as the step's.

Migration: `on_decision(decision)` keeps its payload (the decision, with the
`policy` that decided); prefer `on_event(event)`, the runtime's events (the
same in Rust, Node and Python). Returned responses with a status of 300-399
now succeed and a 200 whose body is a refusal now fails (the component decides).
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Optional, Protocol

from .errors import PolicyError
from .observe import as_failure
from .runtime import Call, Clock, Runtime, StepReport, SystemClock
from .store import MemoryStore
from .types import Context, Decision, Envelope


class DecidingPolicy(Protocol):
    """What the retry helper needs: a `Policy` or a `PolicyHandle`."""

    def key(self, run_id: str, step_id: str, tool: str, args: Any) -> str: ...

    def decide_json(self, observation: Any, context: Any = "{}") -> str: ...


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


#: Out of the way: the policy's `max_attempts` decides, no breaker opens
#: (the loop takes a breaker threshold of at most 100, the policy's attempt limit too).
_UNLIMITED = 2**31
#: The context members `retry` reads; any other is refused, not ignored.
_CONTEXT_KEYS = ("config", "idempotent")
_NO_BREAKER = (100, 30_000)


class _Decisions:
    """Decides with the policy's `decide_json` (the component's bytes go to the
    loop) and keeps each decision as a dict for `on_decision` and `RecoveryError`."""

    def __init__(self, policy: Any, on_decision: Optional[Callable[[Decision], Any]]) -> None:
        self.policy = policy
        self.on_decision = on_decision
        self.last: Optional[Decision] = None
        self.pending: List[Any] = []

    def decide_json(self, observation: str, context: str) -> str:
        import json

        text: str = self.policy.decide_json(observation, context)
        decision = json.loads(text)
        active = getattr(self.policy, "policy", self.policy)  # a PolicyHandle's active policy
        ref = getattr(active, "_ref", None)
        if ref is not None:
            decision["policy"] = dict(ref)
        self.last = decision
        if self.on_decision is not None:
            note = self.on_decision(decision)
            if inspect.isawaitable(note):
                self.pending.append(note)
        return text

    def render(self, envelope: Any, format: str, options: Any = None) -> Any:
        """The envelope rendered by the policy (the reference when it cannot render)."""
        from .runtime import _render_by

        return _render_by(self.policy, envelope, format, options)

    async def flush(self) -> None:
        while self.pending:
            await self.pending.pop(0)


class _SleepClock(Clock):
    """The system clock, sleeping through the injected `sleep(seconds)`."""

    def __init__(self, sleep: Callable[[float], Any], decisions: _Decisions) -> None:
        self._sleep = sleep
        self._decisions = decisions
        self._system = SystemClock()

    def now_ms(self) -> int:
        return self._system.now_ms()

    def sleep_ms(self, ms: int) -> None:
        self._sleep(ms / 1000)

    async def sleep_ms_async(self, ms: int) -> None:
        await self._decisions.flush()  # an async on_decision runs before the sleep
        note = self._sleep(ms / 1000)
        if inspect.isawaitable(note):
            await note


class _Attempts:
    """The one-step run behind `retry` and `retry_sync` (shared, so they cannot drift)."""

    def __init__(
        self,
        operation: Callable[..., Any],
        policy: Any,
        call: Optional[str],
        run_id: Optional[str],
        step_id: Optional[str],
        tool: Optional[str],
        args: Any,
        seed: Optional[int],
        on_decision: Optional[Callable[[Decision], Any]],
        on_event: Optional[Callable[..., Any]],
        sleep: Callable[[float], Any],
        context: Optional[Context],
        store: Any,
        timeout_ms: Optional[int],
        runtime_options: Optional[Dict[str, Any]],
    ) -> None:
        if policy is None:
            from .runtime import _default_policy

            policy = _default_policy()
        self.decisions = _Decisions(policy, on_decision)
        self.cause: Any = None
        self.value: Any = None
        ctx: Dict[str, Any] = dict(context or {})
        unknown = sorted(set(ctx) - set(_CONTEXT_KEYS))
        if unknown:
            raise PolicyError(
                "invalid_context",
                f"retry() reads only {', '.join(_CONTEXT_KEYS)} from context, got {', '.join(map(repr, unknown))}; "
                "the loop sets attempt, elapsed_ms and fallback_available itself: for fallbacks use "
                "recover(fn, target=..., fallbacks=[...]) (agent_recovery.recover)",
            )
        name = getattr(operation, "__name__", "operation")
        run_id = run_id if run_id is not None else f"retry-{uuid.uuid4().hex}"
        step_id = step_id if step_id is not None else "retry"
        tool = tool if tool is not None else name
        options: Dict[str, Any] = {
            "attempt_budget": _UNLIMITED,
            "breaker": _NO_BREAKER,
        }
        options.update(runtime_options or {})
        self.runtime = Runtime(
            policy=self.decisions,
            store=store if store is not None else MemoryStore(),
            clock=_SleepClock(sleep, self.decisions),
            seed=seed,
            policy_config=ctx.get("config"),
            attempt_timeout_ms=timeout_ms,
            on_event=on_event,
            **options,
        )
        self.run = self.runtime.run(run_id)
        self.step: Dict[str, Any] = dict(
            id=step_id, tool=tool, call=call, args=args,
            idempotent=ctx.get("idempotent"), operation=self.wrap(operation),
        )

    def wrap(self, operation: Callable[..., Any]) -> Callable[[Call], Any]:
        def op(call: Call) -> Any:
            try:
                value = operation(attempt=call.attempt, idempotency_key=call.key)
            except Exception as exc:
                self.cause = exc
                raise
            if inspect.isawaitable(value):
                return self.awaited(value)
            return self.returned(value)

        return op

    async def awaited(self, value: Any) -> Any:
        try:
            result = await value
        except Exception as exc:
            self.cause = exc
            raise
        return self.returned(result)

    def returned(self, value: Any) -> Any:
        self.value = value
        self.cause = as_failure(value) or value
        return value

    def outcome(self, report: StepReport) -> Any:
        if report.outcome == "ok":
            return self.value
        decision: Any = self.decisions.last
        if decision is None or decision.get("envelope") is None:
            decision = {
                "action": report.outcome, "attempt": 0, "reason": report.outcome,
                "envelope": report.envelope or {"code": "runtime." + report.outcome},
            }
        error = RecoveryError(decision, self.cause)
        if isinstance(self.cause, BaseException):
            raise error from self.cause
        raise error


async def retry(
    operation: Callable[..., Any],
    *,
    policy: Optional[DecidingPolicy] = None,
    call: Optional[str] = None,
    run_id: Optional[str] = None,
    step_id: Optional[str] = None,
    tool: Optional[str] = None,
    args: Any = None,
    seed: Optional[int] = None,
    on_decision: Optional[Callable[[Decision], Any]] = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    context: Optional[Context] = None,
    on_event: Optional[Callable[..., Any]] = None,
    store: Any = None,
    timeout_ms: Optional[int] = None,
    runtime_options: Optional[Dict[str, Any]] = None,
) -> Any:
    """Run `operation(attempt=..., idempotency_key=...)` until it succeeds or the
    policy says stop (then `RecoveryError`). Returns the operation's result.

    `operation` may be async or sync. `on_event(event)` gets the runtime's
    events; `on_decision(decision)` (it may be async) each decision, as
    before. `context` gives `config` (the policy configuration) and
    `idempotent`. New: `store` (share breakers and the cache), `timeout_ms` (an
    async attempt slower than this is cancelled and observed as a timeout) and
    `runtime_options` (more `Runtime` options). Cancelling the task raises
    `asyncio.CancelledError` as before.
    """
    state = _Attempts(operation, policy, call, run_id, step_id, tool, args, seed, on_decision,
                      on_event, sleep, context, store, timeout_ms, runtime_options)
    report = await state.run.step_async(**state.step)
    if report.outcome == "ok":
        await state.run.end_async()  # the run is complete: no journal entry stays behind
    await state.decisions.flush()
    if report.outcome == "cancelled":
        raise asyncio.CancelledError()
    return state.outcome(report)


def retry_sync(
    operation: Callable[..., Any],
    *,
    policy: Optional[DecidingPolicy] = None,
    call: Optional[str] = None,
    run_id: Optional[str] = None,
    step_id: Optional[str] = None,
    tool: Optional[str] = None,
    args: Any = None,
    seed: Optional[int] = None,
    on_decision: Optional[Callable[[Decision], Any]] = None,
    sleep: Callable[[float], Any] = time.sleep,
    context: Optional[Context] = None,
    on_event: Optional[Callable[..., Any]] = None,
    store: Any = None,
    timeout_ms: Optional[int] = None,
    runtime_options: Optional[Dict[str, Any]] = None,
) -> Any:
    """The blocking twin of `retry` (same arguments, `sleep=time.sleep`)."""
    state = _Attempts(operation, policy, call, run_id, step_id, tool, args, seed, on_decision,
                      on_event, sleep, context, store, timeout_ms, runtime_options)
    report = state.run.step(**state.step)
    if report.outcome == "ok":
        state.run.end()  # the run is complete: no journal entry stays behind
    return state.outcome(report)
