"""Scripted scenarios: a run whose operations answer from a script, on a
virtual clock. The twin of the Rust host's `runtime::scenario` (the format is
specified in docs/runtime.md, "Scenarios"); the loop vectors (`tests/loops/`)
run through it, and every runtime prints the same bytes for the same scenario.

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
from .runtime import BLOCKING, Call, Failed, RawOutcome, Runtime, Step, VirtualClock, _Killed, _no_wait
from .store import MemoryStore, StoreError

__all__ = ["DEAD_LETTER_STREAM", "ScenarioError", "ScenarioOutput", "main", "run_scenario"]


_U64 = 2**64 - 1
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


def _members(obj: Any, where: str, allowed: Tuple[str, ...], required: Tuple[str, ...]) -> Dict[str, Any]:
    if not isinstance(obj, dict):
        raise _invalid(f"{where}: expected an object, got {json.dumps(obj)[:80]}; {_HINT}")
    for k in obj:
        if k not in allowed:
            raise _invalid(
                f"{where}: unknown field `{k}`, expected one of {', '.join('`' + a + '`' for a in allowed)}; {_HINT}"
            )
    for k in required:
        if k not in obj:
            raise _invalid(f"{where}: missing field `{k}`; {_HINT}")
    return obj


def _typed(obj: Dict[str, Any], key: str, where: str, kind: str, nullable: bool = True) -> Any:
    if key not in obj or (obj[key] is None and nullable):
        return None
    v = obj[key]
    ok = {
        "str": isinstance(v, str),
        "u64": isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _U64,
        "bool": isinstance(v, bool),
        "list": isinstance(v, list),
        "object": isinstance(v, dict),
    }[kind]
    if not ok:
        raise _invalid(f"{where}: `{key}` must be {kind}, got {json.dumps(v)[:80]}; {_HINT}")
    return v


_STEP_FIELDS = ("id", "tool", "call", "target", "args", "side_effect", "idempotent", "checkpoint",
                "outcomes", "fallbacks", "compensation", "fanout", "replay_of")
_U32 = 2**32 - 1


def _parse_step(raw: Any, where: str) -> Dict[str, Any]:
    """A scenario step (Rust's `ScenarioStep`): unknown members refused, the
    types checked, `tool` empty when absent; a `fanout` holds more steps."""
    s = _members(raw, where, _STEP_FIELDS, ("id",))
    _typed(s, "id", where, "str", nullable=False)
    _typed(s, "tool", where, "str", nullable=False)
    for k in ("call", "target"):
        _typed(s, k, where, "str")
    _typed(s, "side_effect", where, "bool", nullable=False)
    for k in ("idempotent", "checkpoint"):
        _typed(s, k, where, "bool")
    _typed(s, "outcomes", where, "list", nullable=False)
    _typed(s, "fallbacks", where, "list", nullable=False)
    for i, fb in enumerate(s.get("fallbacks") or []):
        _members(fb, f"{where}.fallbacks[{i}]", ("target", "outcomes"), ("target",))
        _typed(fb, "target", f"{where}.fallbacks[{i}]", "str", nullable=False)
        _typed(fb, "outcomes", f"{where}.fallbacks[{i}]", "list", nullable=False)
    if s.get("compensation") is not None:
        c = _members(s["compensation"], f"{where}.compensation", ("outcomes",), ())
        _typed(c, "outcomes", f"{where}.compensation", "list", nullable=False)
    _typed(s, "replay_of", where, "object")
    if s.get("fanout") is not None:
        f = _members(s["fanout"], f"{where}.fanout", ("min_results", "branches"), ("min_results", "branches"))
        _typed(f, "min_results", f"{where}.fanout", "u64", nullable=False)
        if f["min_results"] > _U32:
            raise _invalid(f"{where}.fanout: `min_results` must be u32, got {f['min_results']}; {_HINT}")
        _typed(f, "branches", f"{where}.fanout", "list", nullable=False)
        f["branches"] = [_parse_step(b, f"{where}.fanout.branches[{i}]") for i, b in enumerate(f["branches"])]
    return s


def _parse(scenario: Any) -> Dict[str, Any]:
    if isinstance(scenario, (str, bytes, bytearray)):
        try:
            scenario = json.loads(scenario)
        except ValueError as e:
            raise _invalid(f"scenario: {e}; {_HINT}") from None
    s = _members(scenario, "scenario", ("run_id", "seed", "now_ms", "config", "cancel_at_ms", "steps",
                                        "kill_after_calls", "recover"),
                 ("run_id", "now_ms", "steps"))
    _typed(s, "run_id", "scenario", "str", nullable=False)
    _typed(s, "now_ms", "scenario", "u64", nullable=False)
    for k in ("seed", "cancel_at_ms", "kill_after_calls"):
        _typed(s, k, "scenario", "u64")
    _typed(s, "recover", "scenario", "bool")
    if s.get("kill_after_calls") == 0:
        raise _invalid(f"scenario: `kill_after_calls` must be at least 1, got 0; {_HINT}")
    _typed(s, "steps", "scenario", "list", nullable=False)
    s["steps"] = [_parse_step(st, f"scenario.steps[{i}]") for i, st in enumerate(s["steps"])]
    _validate(s)
    return s


def _with_branches(step: Dict[str, Any]) -> List[Dict[str, Any]]:
    """A step and, for a fan-out, its branches."""
    f = step.get("fanout")
    return [step] + (list(f["branches"]) if f is not None else [])


def _plain_steps(steps: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [st for step in steps for st in _with_branches(step)]


def _is_bare(step: Dict[str, Any]) -> bool:
    """Only `id` and `fanout` (other members absent or at their defaults)."""
    return (
        step.get("tool", "") == ""
        and step.get("call") is None
        and step.get("target") is None
        and step.get("args") is None
        and step.get("side_effect", False) is False
        and step.get("idempotent") is None
        and step.get("checkpoint") is None
        and not step.get("outcomes")
        and not step.get("fallbacks")
        and step.get("compensation") is None
        and step.get("replay_of") is None
    )


def _validate(s: Dict[str, Any]) -> None:
    """The checks of Rust's `scenario::validate`, same order, same messages."""
    if s["run_id"] == "":
        raise _invalid("scenario: `run_id` is empty; name the run")
    if not s["steps"]:
        raise _invalid("scenario: `steps` is empty; give at least one step")
    seen = set()
    for step in s["steps"]:
        sid = json.dumps(step["id"])
        f = step.get("fanout")
        if f is not None:
            if not _is_bare(step):
                raise _invalid(
                    f"scenario step {sid}: a fan-out step has only `id` and `fanout`; "
                    "put tools and outcomes in its branches"
                )
            if any(b.get("fanout") is not None for b in f["branches"]):
                raise _invalid(f"scenario step {sid}: a branch is itself a fan-out; fan-outs do not nest")
        elif step.get("tool", "") == "":
            raise _invalid(
                f"scenario step {sid}: `tool` is missing or empty; name the tool (or give a `fanout`)"
            )
        for st in _with_branches(step):
            if st["id"] in seen:
                raise _invalid(
                    f"scenario: step id {json.dumps(st['id'])} is used twice; step ids are unique in a run"
                )
            seen.add(st["id"])
            outcomes = list(st.get("outcomes") or [])
            for fb in st.get("fallbacks") or []:
                outcomes += fb.get("outcomes") or []
            if st.get("compensation") is not None:
                outcomes += st["compensation"].get("outcomes") or []
            for o in outcomes:
                if not (o == "ok" or isinstance(o, dict)):
                    raise _invalid(
                        f"scenario step {json.dumps(st['id'])}: an outcome is "
                        f"{json.dumps(o, separators=(',', ':'))}; use \"ok\" or an observation object"
                    )


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
        return None if v == "ok" else RawOutcome(v)

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


def _run_steps(runtime: Runtime, s: Dict[str, Any], script: _Script, fused: bool) -> Tuple[str, List[str]]:
    """The scenario's steps as one run: (outcome, events). `fused`: the last
    step (not a fan-out, not a replay) is sent with `end`."""
    run = runtime.run(s["run_id"])
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
    scenario: Any, store: Any = None, policy: Any = None, *, end_with_last_step: bool = False
) -> ScenarioOutput:
    """Run `scenario` (JSON text or a dict) against `store` (a fresh
    `MemoryStore` when None), deciding with `policy` (the reference when None),
    on a virtual clock. Raises `ScenarioError`. `end_with_last_step`: send the
    last step (not a fan-out) with `"end": true`, the way a door runs its one
    step, instead of a separate `end` (the output is the same, docs/runtime.md,
    "Inputs")."""
    s = _parse(scenario)
    store = store if store is not None else MemoryStore()
    try:
        clock = VirtualClock(s["now_ms"])
        config = s.get("config")
        runtime = Runtime(
            policy=policy,
            store=store,
            clock=clock,
            seed=s.get("seed"),
            config=json.dumps(config if config is not None else {}, separators=(",", ":")),
        )
        before = store.read(DEAD_LETTER_STREAM, 0, 2**53 - 1)
        dead_before = before[-1][0] if before else 0
        script = _Script()
        for st in _plain_steps(s["steps"]):
            script.fill(st)
        if s.get("recover"):
            outcome, events = _recover(runtime, s, script)
        else:
            outcome, events = _run_steps(runtime, s, script, end_with_last_step)
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
