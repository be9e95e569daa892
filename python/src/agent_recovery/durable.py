"""Finishing interrupted runs: `runtime.recover(operations)` (docs/durability.md §2).

The loop writes a journal entry (`agent-recovery/journal/<run_id>`, the run's
state) into the store immediately before every side effect of a run's main
lane, and deletes it when the run ends. A worker that died mid-run leaves its
entry behind; `recover` finds those entries and drives each run from its
journaled state with the loop's `recover` input:

- the step that may have run is called again with **the same idempotency key**
  and attempt number (or answered from the idempotency cache when it finished),
  so an idempotent tool does not do it twice;
- a compensation chain that was started is completed in reverse order;
- the run ends in the dead-letter queue (outcome `interrupted`, or
  `dead_lettered` when the resumed step gave up), never in silence.

```python
from agent_recovery.runtime import Runtime
from agent_recovery.store import SqliteStore

runtime = Runtime(store=SqliteStore("state.db"))
reports = runtime.recover({"payments.charge": {"operation": charge, "compensate": refund},
                           "flights.book": book}, older_than_ms=0)
for r in reports:
    print(r.run_id, r.outcome, r.dead_letter_id)
```

`operations` maps a tool name to `{"operation", "compensate"?, "checkpoint"?}`
(the callables a step takes) or to a bare operation. A call for a tool with
no entry is answered `{"failed": {"error": {"code": "runtime.recover.unknown_tool", ..}}}`:
that code is permanent, so the run rolls back and is dead-lettered.

Only entries older than `older_than_ms` (default: the run configuration's
`in_flight_ttl_ms`, 300 000 ms) are taken, so a live worker's call in progress
is not stolen; a restarted single worker passes 0. Each run is taken under the
lease `agent-recovery/recovering/<run_id>` (a claim with TTL
`in_flight_ttl_ms`): two recovering workers never drive the same run. `recover`
also carries out the replay requests of the dead-letter queue
(`runtime.dead_letters.request_replay`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .deadletters import DEAD_LETTER_STREAM, LEASE_PREFIX, DeadLetter, DeadLetters, ReplayReport, _loads
from .errors import PolicyError, PolicyRuntimeError
from .store import Written

if TYPE_CHECKING:  # pragma: no cover
    from .runtime import _IO, Run, Runtime, Step

__all__ = ["JOURNAL_PREFIX", "Operations", "RecoverReport", "UNKNOWN_TOOL", "recover", "recover_async"]

#: Journal keys: `JOURNAL_PREFIX + run_id`.
JOURNAL_PREFIX = "agent-recovery/journal/"
#: The registry code of a call for a tool `recover` has no operation for.
UNKNOWN_TOOL = "runtime.recover.unknown_tool"
#: `in_flight_ttl_ms` when the run configuration does not set it.
DEFAULT_IN_FLIGHT_TTL_MS = 300_000

_TOOL_OPTIONS = ("operation", "compensate", "checkpoint")


def _bad(message: str) -> PolicyError:
    return PolicyError("invalid_argument", message)


@dataclass(frozen=True)
class _Tool:
    operation: Callable[..., Any]
    compensate: Optional[Callable[..., Any]] = None
    checkpoint: Optional[Callable[[], Any]] = None


class Operations:
    """Tool name -> the callables of its steps (`operation`, `compensate`,
    `checkpoint`), as `recover` and `replay` take them."""

    def __init__(self, tools: Dict[str, _Tool]) -> None:
        self._tools = tools

    @classmethod
    def of(cls, operations: Any) -> "Operations":
        """From a dict: tool name -> `{"operation", "compensate"?, "checkpoint"?}`
        or a bare operation. Anything else is `PolicyError` `invalid_argument`."""
        if isinstance(operations, Operations):
            return operations
        if not isinstance(operations, dict):
            raise _bad(
                f"operations map tool names to {{'operation', 'compensate'?, 'checkpoint'?}}, got "
                f"{type(operations).__name__}"
            )
        tools: Dict[str, _Tool] = {}
        for name, entry in operations.items():
            if not isinstance(name, str):
                raise _bad(f"operations: a tool name is {name!r}, not a string")
            if callable(entry):
                entry = {"operation": entry}
            if not isinstance(entry, dict):
                raise _bad(f"operations[{name!r}] is {type(entry).__name__}; pass a function or a dict")
            unknown = sorted(set(entry) - set(_TOOL_OPTIONS))
            if unknown:
                raise _bad(
                    f"operations[{name!r}]: unknown member(s) {', '.join(unknown)}; the members are "
                    f"{', '.join(_TOOL_OPTIONS)}"
                )
            if not callable(entry.get("operation")):
                raise _bad(f"operations[{name!r}]: `operation` is missing or not callable; pass a function")
            for hook in ("compensate", "checkpoint"):
                if entry.get(hook) is not None and not callable(entry[hook]):
                    raise _bad(f"operations[{name!r}]: `{hook}` is not callable; pass a function or None")
            tools[name] = _Tool(entry["operation"], entry.get("compensate"), entry.get("checkpoint"))
        return cls(tools)

    def operation(self, tool: str) -> Callable[..., Any]:
        """The operation of `tool`, or the runtime's `_unknown_tool` (never
        called: the call is answered `unknown_tool` and the loop makes the
        failure)."""
        from .runtime import _unknown_tool

        t = self._tools.get(tool)
        return t.operation if t is not None else _unknown_tool

    def compensation(self, tool: str) -> Optional[Callable[..., Any]]:
        """The compensation of `tool`: `unknown_tool` for a tool without
        operations, None for one registered without a compensation (answered
        `no_compensation`)."""
        from .runtime import _unknown_tool

        t = self._tools.get(tool)
        return t.compensate if t is not None else _unknown_tool

    def checkpoint(self, tool: str) -> Optional[Callable[[], Any]]:
        """The checkpoint hook of `tool`, if any."""
        t = self._tools.get(tool)
        return t.checkpoint if t is not None else None

    def step(self, spec: Dict[str, Any]) -> "Step":
        """A `Step` running `spec["tool"]`'s callables (for a replay)."""
        from .runtime import Step

        tool = str(spec.get("tool") or "")
        t = self._tools.get(tool)
        return Step(
            str(spec.get("id") or ""),
            tool,
            self.operation(tool),
            compensate=t.compensate if t is not None else None,
            checkpoint=t.checkpoint if t is not None else None,
        )


@dataclass(frozen=True)
class RecoverReport:
    """How `recover` finished one run (an interrupted run, or a requested replay)."""

    #: The run id (a replay's is `<run_id>/replay/<n>`).
    run_id: str
    #: The run's outcome: `interrupted`, `dead_lettered`, `cancelled`; for a
    #: replay the replayed step's outcome (`ok`, ...).
    outcome: str
    #: The step in progress when the run was interrupted (None between steps).
    step: Optional[str] = None
    #: The outcome the resumed step reached (the record's `step_outcome`).
    step_outcome: Optional[str] = None
    #: The id of the dead-letter record the run wrote, if any.
    dead_letter_id: Optional[str] = None
    #: The run's events, the component's JSON text.
    events: List[str] = field(default_factory=list)
    #: Outcome `error`: why the loop refused the journaled state (the entry stays).
    error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        """`{run_id, outcome, step, step_outcome, dead_letter_id, events}` (events as
        objects; `dead_letter_id` null when no record was written), + `error`."""
        out: Dict[str, Any] = {
            "run_id": self.run_id,
            "outcome": self.outcome,
            "step": self.step,
            "step_outcome": self.step_outcome,
        }
        out["dead_letter_id"] = self.dead_letter_id
        out["events"] = [json.loads(e) for e in self.events]
        if self.error is not None:
            out["error"] = self.error
        return out


def in_flight_ttl_ms(runtime: "Runtime") -> int:
    """The run configuration's `in_flight_ttl_ms` (default 300 000)."""
    ttl = runtime._config_dict.get("in_flight_ttl_ms")
    return ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else DEFAULT_IN_FLIGHT_TTL_MS


def journaled(runtime: "Runtime", older_than_ms: Optional[int]) -> List[Tuple[str, str, int]]:
    """(run id, journal key, version) of every entry old enough to recover, in
    key order. An entry not in the journal's format (its `run_id` not the
    key's, no `written_ms`) is skipped, as in Rust: recovered by nobody."""
    from .runtime import _uint

    older = in_flight_ttl_ms(runtime) if older_than_ms is None else _uint(older_than_ms, "older_than_ms")
    store = runtime.store
    now = runtime.clock.now_ms()
    out = []
    for key in store.keys(JOURNAL_PREFIX, now):
        got = store.get(key, now)
        entry = _loads(got.value) if got is not None else None
        if got is None or not isinstance(entry, dict) or entry.get("run_id") != key[len(JOURNAL_PREFIX):]:
            continue
        written = entry.get("written_ms")
        if not isinstance(written, int) or isinstance(written, bool) or not isinstance(entry.get("state"), dict):
            continue
        if written + older > now:
            continue  # a live worker may still be on it
        out.append((entry["run_id"], key, got.version))
    return out


def _lease(runtime: "Runtime", run_id: str) -> Optional[str]:
    """Take the recovery lease of `run_id`; its key, or None when another worker holds it."""
    key = LEASE_PREFIX + run_id
    now = runtime.clock.now_ms()
    value = json.dumps({"since_ms": now, "pid": os.getpid()}, separators=(",", ":"))
    cas = runtime.store.compare_and_set(key, None, value, in_flight_ttl_ms(runtime), now)
    return key if isinstance(cas, Written) else None


def _state_text(runtime: "Runtime", key: str, version: int) -> Optional[str]:
    """The journaled state's exact text; None when the entry is gone or changed
    since it was listed (another worker finished the run before our lease)."""
    from .runtime import _members

    got = runtime.store.get(key, runtime.clock.now_ms())
    if got is None or got.version != version:
        return None
    entry = _loads(got.value)
    if not isinstance(entry, dict) or not isinstance(entry.get("state"), dict):
        return None
    try:  # the loop's bytes, as it wrote them
        return _members(got.value.strip(), 0, ("state",))[1]["state"]
    except (PolicyRuntimeError, IndexError, KeyError, StopIteration, ValueError):
        return json.dumps(entry["state"], ensure_ascii=False, separators=(",", ":"))


def _report(run: "Run", run_id: str) -> RecoverReport:
    fin = run._last_finish or {}
    step = None
    for text in run.events:
        ev = json.loads(text)
        if ev.get("event") == "recover":
            step = ev.get("step")
            break
    ids = run._dead_letter_ids
    outcome = str(fin.get("outcome") or "")
    step_outcome: Optional[str] = None
    if ids:
        page = run._rt.store.read(DEAD_LETTER_STREAM, ids[-1] - 1, 1)
        record = _loads(page[0][1]) if page else None
        got = record.get("step_outcome") if isinstance(record, dict) else None
        step_outcome = got if isinstance(got, str) else None
    return RecoverReport(
        run_id=run_id,
        outcome=outcome,
        step=step,
        step_outcome=step_outcome if step_outcome is not None else outcome,
        dead_letter_id=str(ids[-1]) if ids else None,
        events=run.events,
    )


def _failed(run: "Run", run_id: str, error: Exception) -> RecoverReport:
    """The report of a run the loop refused to recover (its journal entry stays,
    for an operator: `agent-recovery recover --store PATH` lists it)."""
    return RecoverReport(run_id=run_id, outcome="error", events=run.events, error=str(error))


def _recovering_run(runtime: "Runtime", state: str, ops: Operations, run_id: str) -> "Run":
    from .runtime import Run

    run = Run(runtime, state, None, run_id)
    run._ops = ops
    return run


def _recover_input(runtime: "Runtime") -> str:
    return f'{{"input":"recover","now_ms":{runtime.clock.now_ms()}}}'


def recover(runtime: "Runtime", operations: Any, older_than_ms: Optional[int] = None) -> List[RecoverReport]:
    """`runtime.recover(operations, older_than_ms=None)`: finish every
    interrupted run of the store, then carry out the pending replay requests.
    One report per run, in journal key order, then the replays in id order."""
    from .runtime import BLOCKING, _no_wait

    return _no_wait(_recover(BLOCKING, runtime, Operations.of(operations), older_than_ms))


async def recover_async(
    runtime: "Runtime", operations: Any, older_than_ms: Optional[int] = None
) -> List[RecoverReport]:
    """`recover` for asyncio (operations may be async; store calls run off the
    loop, see `agent_recovery._offloop`)."""
    from .runtime import ASYNCIO

    return await _recover(ASYNCIO, runtime, Operations.of(operations), older_than_ms)


async def _recover(io: "_IO", runtime: "Runtime", ops: Operations, older_than_ms: Optional[int]) -> List[RecoverReport]:
    """`recover` on either path (`io`: the runtime's blocking or asyncio executor)."""
    reports: List[RecoverReport] = []
    store = runtime.store
    for run_id, key, version in await io.store(store, journaled, runtime, older_than_ms):
        lease = await io.store(store, _lease, runtime, run_id)
        if lease is None:
            continue
        try:
            state = await io.store(store, _state_text, runtime, key, version)
            if state is None:
                continue
            run = _recovering_run(runtime, state, ops, run_id)
            try:
                await run._carry_step(io, _recover_input(runtime), None)
            except (PolicyError, PolicyRuntimeError) as e:
                reports.append(_failed(run, run_id, e))
                continue
            reports.append(await io.store(store, _report, run, run_id))
        finally:
            await io.store(store, store.delete, lease)
    for item, pending in await io.store(store, runtime.dead_letters.pending_replays):
        done = await run_replay(io, runtime, item, pending, ops)
        if done is not None and done.report is not None:
            reports.append(done.report)
    return reports


# -- replays ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Replayed(ReplayReport):
    """A replay carried out, with the report `recover` lists for it."""

    report: Optional[RecoverReport] = None


def _replay_spec(runtime: "Runtime", item: DeadLetter, pending: ReplayReport) -> Dict[str, Any]:
    """The record's `input` step with `replay_of` (the component's `replay-step`)."""
    dead_letters: DeadLetters = runtime.dead_letters
    return dead_letters.replay_step(item, pending.n)


def _still_pending(runtime: "Runtime", pending: ReplayReport) -> bool:
    """Replay `pending.n` of its item is still the pending one (another worker
    may have carried it out between our read and our lease)."""
    dead_letters: DeadLetters = runtime.dead_letters
    return dead_letters.still_pending(pending.id, pending.n)


def _replayed(runtime: "Runtime", run: "Run", spec: Dict[str, Any], pending: ReplayReport,
              outcome: str) -> "_Replayed":
    if runtime.dead_letters.finish_replay(pending.id, pending.n, outcome, runtime.clock.now_ms()):
        runtime._telemetry.dead_letter_depth(runtime.dead_letters.depth)
    ids = run._dead_letter_ids
    report = RecoverReport(
        run_id=pending.run_id,
        outcome=outcome,
        step=str(spec.get("id")) if spec.get("id") is not None else None,
        step_outcome=outcome,
        dead_letter_id=str(ids[-1]) if ids else None,
        events=run.events,
    )
    return _Replayed(pending.id, pending.n, pending.key, pending.run_id, outcome, report)


async def run_replay(
    io: "_IO", runtime: "Runtime", item: DeadLetter, pending: ReplayReport, ops: Operations
) -> Optional[_Replayed]:
    """Carry out `pending` (a replay of `item`) now on `io`'s path; None when
    another worker holds its lease or carried it out already."""
    store = runtime.store
    lease = await io.store(store, _lease, runtime, pending.run_id)
    if lease is None:
        return None
    try:
        if not await io.store(store, _still_pending, runtime, pending):
            return None
        spec = _replay_spec(runtime, item, pending)
        # The run's `run` input carries the replayed step (one `advance` fewer).
        run = runtime._run_with_first_step(pending.run_id)
        run._ops = ops
        report = await run._step_spec(io, spec, ops.step(spec))
        if report.outcome == "ok" and run._finished is None:  # `run.end()`
            await run._carry_step(io, run._end_input(), None)
        return await io.store(store, _replayed, runtime, run, spec, pending, report.outcome)
    finally:
        await io.store(store, store.delete, lease)
