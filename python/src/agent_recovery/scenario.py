"""Scripted scenarios: a run whose operations answer from a script, on a
virtual clock. The twin of the Rust host's `runtime::scenario` (the format is
specified in docs/runtime.md, "Scenarios"; the component parses and checks a
scenario, `scenario@0.3.0`, and this module runs its plan); the loop vectors
(`tests/loops/`) run through it, and every runtime prints the same bytes for
the same scenario.

```python
from agent_recovery.scenario import run_scenario

out = run_scenario({"run_id": "r1", "seed": 7, "now_ms": 1767225600000,
                    "steps": [{"id": "s", "tool": "search",
                               "outcomes": [{"source": "http", "status": 503}, "ok"]}]})
assert out.outcome == "completed"
print(out.to_json())  # {"outcome":"completed","events":[...],"dead_letters":[]}
```

Each call of a step's operation (or of a fallback target, or of its
compensation) consumes the next entry of its `outcomes`: `"ok"` (success,
value null), or an observation passed as `RawOutcome` so the component judges it
(a 304 succeeds, a 200 with a refusal fails). A call that finds no outcome left
is a `ScenarioError` of kind `invalid`.

Batch mode, for the cross-runtime conformance check (the twin of Rust's
`simulate_batch` example and Node's `scripts/scenarios.mjs`):

    python -m agent_recovery.simulate < lines

reads one JSON array of scenarios per line, runs that line's scenarios in
order against one fresh `MemoryStore`, and prints one line per scenario: the
output (`to_json()`), or `{"error":"<kind>"}` (`invalid` or `runtime`). A line
that is not a JSON array stops it with exit status 2.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ._keys import DEAD_LETTER_STREAM
from .errors import PolicyError, PolicyRuntimeError
from .limits import Limits
from .runtime import (
    BLOCKING,
    Call,
    Failed,
    RawOutcome,
    Runtime,
    Step,
    VirtualClock,
    _default_loop,
    _Killed,
    _no_wait,
)
from .store import MemoryStore, StoreError

__all__ = ["DEAD_LETTER_STREAM", "ScenarioError", "ScenarioOutput", "main", "run_scenario"]


_HINT = 'see docs/runtime.md, "Scenarios", for the format'
_COMPENSATION = "\0compensation"


class ScenarioError(Exception):
    """A scenario could not run.

    `kind` is `invalid` (the scenario is not valid: bad JSON, a missing or
    unknown member, an outcome missing for a call; the message names it and
    ends with a hint) or `runtime` (the runtime failed: the loop, the policy or
    the store; `__cause__` is the package's error). The twins of Rust's
    `ScenarioError::Invalid` and `ScenarioError::Runtime`.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class ScenarioOutput:
    """How a scenario ended."""

    #: `completed`, or the outcome of the step that ended the run.
    outcome: str
    #: Every event, the component's JSON text.
    events: List[str]
    #: The dead-letter records this run appended (JSON text).
    dead_letters: List[str]

    def to_json(self) -> str:
        """`{"outcome":..,"events":[..],"dead_letters":[..]}`: the events and
        records are the component's bytes, so every host prints the same text."""
        return (
            f'{{"outcome":{json.dumps(self.outcome)},"events":[{",".join(self.events)}],'
            f'"dead_letters":[{",".join(self.dead_letters)}]}}'
        )


def _invalid(message: str) -> ScenarioError:
    return ScenarioError("invalid", message)


def _outcomes(items: Any) -> List[Any]:
    """A plan's outcomes: `"ok"`, or the observation's JSON text (wasmtime
    lifts the `outcome` variant untagged: None for `ok`, the text for the other)."""
    return ["ok" if o is None else RawOutcome(o) for o in items]


def _step_of(p: Any) -> Dict[str, Any]:
    """A plan `step` record as the dict the runner reads."""
    args = p.args
    replay_of = getattr(p, "replay-of")
    compensation = p.compensation
    return {
        "id": p.id,
        "tool": p.tool,
        "call": p.call,
        "target": p.target,
        "args": None if args is None else json.loads(args),
        "side_effect": getattr(p, "side-effect"),
        "idempotent": p.idempotent,
        "checkpoint": p.checkpoint,
        "outcomes": _outcomes(p.outcomes),
        "fallbacks": [{"target": f.target, "outcomes": _outcomes(f.outcomes)} for f in p.fallbacks],
        "compensation": None if compensation is None else {"outcomes": _outcomes(compensation)},
        "replay_of": None if replay_of is None else json.loads(replay_of),
    }


def _parse(scenario: Any, loop: Any) -> Dict[str, Any]:
    """The scenario's plan: the component parses and checks it
    (`scenario@0.3.0`); returned as the dict the runner reads."""
    if isinstance(scenario, (bytes, bytearray)):
        try:
            scenario = bytes(scenario).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _invalid(f"scenario: {e}; {_HINT}") from None
    if not isinstance(scenario, str):
        try:
            scenario = json.dumps(scenario, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise _invalid(f"scenario: {e}; {_HINT}") from None
    try:
        plan = loop.parse_scenario(scenario)
    except PolicyError as e:  # not UTF-8 (a lone surrogate)
        raise _invalid(f"scenario: {e}; {_HINT}") from None
    if isinstance(plan, str):
        raise _invalid(plan)
    steps: List[Dict[str, Any]] = []
    for st in plan.steps:
        if st.tag == "fanout":
            f = st.payload
            steps.append({"id": f.id, "fanout": {"min_results": getattr(f, "min-results"),
                                                 "branches": [_step_of(b) for b in f.branches]}})
        else:
            steps.append(_step_of(st.payload))
    return {
        "run_id": getattr(plan, "run-id"),
        "seed": plan.seed,
        "now_ms": getattr(plan, "now-ms"),
        "config": plan.config,
        "cancel_at_ms": getattr(plan, "cancel-at-ms"),
        "kill_after_calls": getattr(plan, "kill-after-calls"),
        "recover": plan.recover,
        "steps": steps,
    }


def _with_branches(step: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A step and, for a fan-out, its branches."""
    f = step.get("fanout")
    return [step] + (list(f["branches"]) if f is not None else [])


def _plain_steps(steps: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [st for step in steps for st in _with_branches(step) if step.get("fanout") is None or st is not step]


class _Script:
    """Outcomes left per (step or tool, target) and per compensated step, and
    the first call that found no outcome left."""

    def __init__(self) -> None:
        self.queues: Dict[Tuple[str, str], List[Any]] = {}
        self.missing: Optional[str] = None
        self.lock = threading.Lock()

    def next(self, queue: Tuple[str, str], step: str, target: str, what: str) -> Any:
        with self.lock:
            left = self.queues.setdefault(queue, [])
            if not left:
                if self.missing is None:
                    self.missing = (
                        f"scenario step {json.dumps(step)}: a call of {what} {json.dumps(target)} "
                        "found no outcome left; add one to its `outcomes`"
                    )
                return Failed('{"source":"exception","type":"agent_recovery.simulate.NoOutcomeLeft"}')
            v = left.pop(0)
        return None if v == "ok" else v

    def fill(self, st: Dict[str, Any]) -> None:
        """The queues of scenario step `st`, keyed by its `id`."""
        name = st["id"]
        first: str = st["target"] if st.get("target") is not None else st.get("tool", "")
        self.queues[(name, first)] = list(st.get("outcomes") or [])
        for fb in st.get("fallbacks") or []:
            self.queues[(name, fb["target"])] = list(fb.get("outcomes") or [])
        if st.get("compensation") is not None:
            self.queues[(name, _COMPENSATION)] = list(st["compensation"].get("outcomes") or [])


def _hooks(st: Dict[str, Any], script: _Script) -> Tuple[Any, Any, Any]:
    """(operation, compensate or None, checkpoint or None) of scenario step `st`,
    answering from its own queues (in recover mode too: a call found by tool
    consumes the outcomes of the step that lists that tool)."""
    name = st["id"]

    def operation(call: Call) -> Any:
        what = "fallback target" if call.kind == "fallback" else "target"
        return script.next((name, call.target), name, call.target, what)

    def compensate(call: Call) -> Any:
        return script.next((name, _COMPENSATION), name, name, "the compensation of")

    checkpoint = st.get("checkpoint")

    def restore() -> bool:
        return bool(checkpoint)

    return (
        operation,
        compensate if st.get("compensation") is not None else None,
        restore if checkpoint is not None else None,
    )


def _step(st: Dict[str, Any], script: _Script) -> Step:
    operation, compensate, checkpoint = _hooks(st, script)
    return Step(
        st["id"],
        st.get("tool", ""),
        operation,
        call=st.get("call"),
        args=st.get("args"),
        target=st.get("target"),
        fallbacks=[fb["target"] for fb in st.get("fallbacks") or []],
        side_effect=bool(st.get("side_effect", False)),
        idempotent=st.get("idempotent"),
        compensate=compensate,
        checkpoint=checkpoint,
    )


def _run_steps(
    runtime: Runtime, s: Dict[str, Any], script: _Script, fused: bool, with_first_step: bool = False
) -> Tuple[str, List[str]]:
    """The scenario's steps as one run: (outcome, events). `fused`: the last
    step (not a fan-out, not a replay) is sent with `end`. `with_first_step`:
    the `run` input carries the first step."""
    run = runtime._run_with_first_step(s["run_id"]) if with_first_step else runtime.run(s["run_id"])
    run._kill_after = s.get("kill_after_calls")
    if s.get("cancel_at_ms") is not None:
        run.cancel_at(s["now_ms"] + s["cancel_at_ms"])
    outcome = "completed"
    try:
        last = s["steps"][-1]
        for st in s["steps"]:
            if fused and st is last and st.get("fanout") is None and st.get("replay_of") is None:
                report = run._sync(*run._step_of(_step(st, script), {}, end=True))
            elif st.get("fanout") is not None:
                f = st["fanout"]
                report = run.fanout(st["id"], f["min_results"], [_step(b, script) for b in f["branches"]])
            elif st.get("replay_of") is not None:
                step = _step(st, script)
                spec = step.spec()
                spec["replay_of"] = st["replay_of"]
                report = _no_wait(run._step_spec(BLOCKING, spec, step))
            else:
                report = run.step(_step(st, script))
            if script.missing is not None:
                raise _invalid(script.missing)
            if report.outcome != "ok":
                outcome = report.outcome
                break
        if outcome == "completed":
            run.end()  # nothing when a step sent with `end` ended the run
    except _Killed:
        outcome = "killed"
    return outcome, run.events


def _recover(runtime: Runtime, s: Dict[str, Any], script: _Script) -> Tuple[str, List[str]]:
    """`recover: true`: what `runtime.recover(operations, older_than_ms=0)` does,
    with the steps as the operations by tool: (outcome, events)."""
    from .durable import recover

    operations: Dict[str, Any] = {}
    for st in _plain_steps(s["steps"]):
        # by tool; a later step of the same tool replaces an earlier one (as in Rust)
        operation, compensate, checkpoint = _hooks(st, script)
        operations[st.get("tool", "")] = {"operation": operation, "compensate": compensate, "checkpoint": checkpoint}
    reports = recover(runtime, operations, 0)
    if script.missing is not None:
        raise _invalid(script.missing)
    for r in reports:
        if r.outcome == "error":
            raise ScenarioError("runtime", f"run {r.run_id}: {r.error}")
    return (reports[-1].outcome if reports else "none"), [e for r in reports for e in r.events]


def run_scenario(
    scenario: Any,
    store: Any = None,
    policy: Any = None,
    *,
    end_with_last_step: bool = False,
    with_first_step: bool = False,
) -> ScenarioOutput:
    """Run `scenario` (JSON text or a dict) against `store` (a fresh
    `MemoryStore` when None), deciding with `policy` (the reference when None),
    on a virtual clock. Raises `ScenarioError`. `end_with_last_step`: send the
    last step (not a fan-out) with `"end": true`, the way a door runs its one
    step, instead of a separate `end`; `with_first_step`: send the first step
    in the `run` input, the way a door starts its run (the output is the same
    either way, docs/runtime.md, "Inputs")."""
    try:
        s = _parse(scenario, _default_loop(Limits()))
    except (PolicyError, PolicyRuntimeError) as e:
        raise ScenarioError("runtime", str(e)) from e
    store = store if store is not None else MemoryStore()
    try:
        clock = VirtualClock(s["now_ms"])
        runtime = Runtime(
            policy=policy,
            store=store,
            clock=clock,
            seed=s.get("seed"),
            config=json.dumps(json.loads(s["config"]), separators=(",", ":")),
        )
        before = store.read(DEAD_LETTER_STREAM, 0, 2**53 - 1)
        dead_before = before[-1][0] if before else 0
        script = _Script()
        for st in _plain_steps(s["steps"]):
            script.fill(st)
        if s.get("recover"):
            outcome, events = _recover(runtime, s, script)
        else:
            outcome, events = _run_steps(runtime, s, script, end_with_last_step, with_first_step)
        dead = [r for _, r in store.read(DEAD_LETTER_STREAM, dead_before, 2**53 - 1)]
    except (PolicyError, PolicyRuntimeError, StoreError) as e:
        raise ScenarioError("runtime", str(e)) from e
    return ScenarioOutput(outcome=outcome, events=events, dead_letters=dead)


def main(argv: Optional[List[str]] = None) -> int:
    """The batch driver (`python -m agent_recovery.simulate`): stdin lines of
    scenario arrays -> one output line per scenario. The twin of Rust's
    `simulate_batch` example: a line that is not a JSON array stops the driver
    (exit status 2, a message on stderr)."""
    out = sys.stdout
    for line in sys.stdin:
        text = line[:-1] if line.endswith("\n") else line
        try:
            scenarios = json.loads(text)
        except ValueError as e:
            scenarios = e
        if not isinstance(scenarios, list):
            out.flush()
            print(f"simulate: a line is not a JSON array of scenarios: {scenarios}"[:300], file=sys.stderr)
            return 2
        store = MemoryStore()
        for scenario in scenarios:
            try:
                out.write(run_scenario(scenario, store).to_json() + "\n")
            except ScenarioError as e:
                out.write('{"error":' + json.dumps(e.kind) + "}\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
