"""The loop vectors (`tests/loops/*.json`) through the real component and the
Python Runtime on a virtual clock: the rules of host/tests/loops.rs.

A vector's runs share one fresh `MemoryStore`, in order; `expect` is matched
against the scenario output member by member (objects as subsets, arrays
element by element with the same length, everything else equal); every
attempt of a step carries one key (a compensation its own); running a vector
twice gives the same bytes. The expectations were derived by hand from
docs/runtime.md and tests/vectors/tools/jitter.py, not recorded from a runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from agent_recovery.scenario import ScenarioError, run_scenario
from agent_recovery.store import MemoryStore

from .conftest import repo_root


def vectors() -> List[Tuple[str, Dict[str, Any]]]:
    files = sorted((repo_root() / "tests" / "loops").glob("*.json"))
    assert len(files) >= 16, "expected the loop vectors in tests/loops"
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in files]


VECTORS = vectors()


def subset(expected: Any, actual: Any, path: str) -> List[str]:
    """Where `actual` fails to contain `expected` (loops.rs `subset`)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: List[str] = []
        for k, v in expected.items():
            if k not in actual:
                out.append(f"{path}.{k}: missing in {json.dumps(actual)}")
            else:
                out += subset(v, actual[k], f"{path}.{k}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: expected {len(expected)} items, got {len(actual)}: {json.dumps(actual)}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out += subset(e, a, f"{path}[{i}]")
        return out
    if type(expected) is bool or type(actual) is bool:
        same = type(expected) is type(actual) and expected == actual
    else:
        same = expected == actual and not isinstance(expected, (dict, list))
    return [] if same else [f"{path}: expected {json.dumps(expected)}, got {json.dumps(actual)}"]


def run_all(vector: Dict[str, Any]) -> List[str]:
    store = MemoryStore()
    return [run_scenario(r["scenario"], store).to_json() for r in vector["runs"]]


JOURNAL = "agent-recovery/journal/"


@pytest.mark.parametrize("name,vector", VECTORS, ids=[n for n, _ in VECTORS])
def test_loop_vector(name: str, vector: Dict[str, Any]) -> None:
    failures: List[str] = []
    store = MemoryStore()
    for i, r in enumerate(vector["runs"]):
        out = json.loads(run_scenario(r["scenario"], store).to_json())
        # `expect.journal`: the run ids with a journal entry after the run, in key order
        out["journal"] = [k[len(JOURNAL):] for k in store.keys(JOURNAL, 0)]
        # `expect.store`: the named keys' values (None: absent) when the run ended
        # (its now_ms plus its last event's t_ms)
        if "store" in r["expect"]:
            end = r["scenario"]["now_ms"] + (out["events"][-1]["t_ms"] if out["events"] else 0)
            got = {k: store.get(k, end) for k in r["expect"]["store"]}
            out["store"] = {k: (json.loads(v.value) if v is not None else None) for k, v in got.items()}
        failures += subset(r["expect"], out, f"{name} run {i}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name,vector", VECTORS, ids=[n for n, _ in VECTORS])
def test_every_attempt_of_a_step_carries_one_key(name: str, vector: Dict[str, Any]) -> None:
    for text in run_all(vector):
        keys: Dict[Tuple[str, bool], str] = {}
        for e in json.loads(text)["events"]:
            if e["event"] != "attempt":
                continue
            key = e["key"]
            assert isinstance(key, str) and len(key) == 64, f"{name}: key is a sha256"
            comp = e["call"] == "compensation"
            seen = keys.setdefault((e["step"], comp), key)
            assert seen == key, f"{name}: step {e['step']} changed its key between attempts"
            if comp:
                assert keys.get((e["step"], False)) != key, f"{name}: a compensation reuses its step's key"


@pytest.mark.parametrize("name,vector", VECTORS, ids=[n for n, _ in VECTORS])
def test_the_same_scenario_gives_the_same_bytes(name: str, vector: Dict[str, Any]) -> None:
    assert run_all(vector) == run_all(vector)


def test_output_is_the_components_bytes_in_rusts_layout() -> None:
    name, vector = VECTORS[0]
    text = run_all(vector)[0]
    assert text.startswith('{"outcome":') and '"events":[{"t_ms":' in text, text[:80]
    assert json.loads(text)["events"], name
    assert ", " not in text.split('"events"')[0]


@pytest.mark.parametrize(
    "scenario,needle",
    [
        ("{not json", "scenario:"),
        ({"run_id": "r", "now_ms": 0, "steps": [], "extra": 1}, "unknown field `extra`"),
        ({"run_id": "", "now_ms": 0, "steps": [{"id": "a", "tool": "t"}]}, "`run_id` is empty"),
        ({"run_id": "r", "now_ms": 0, "steps": []}, "`steps` is empty"),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "a", "tool": "t"}, {"id": "a", "tool": "u"}]},
         'step id "a" is used twice'),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "a", "tool": "t", "outcomes": [3]}]},
         'an outcome is 3; use "ok"'),
        ({"run_id": "r", "now_ms": -1, "steps": [{"id": "a", "tool": "t"}]}, "`now_ms` must be u64"),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "a", "tool": "t", "outcomes": []}]},
         'a call of target "t" found no outcome left'),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "a"}]}, "`tool` is missing or empty"),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "f", "tool": "t", "fanout": {
            "min_results": 1, "branches": [{"id": "b", "tool": "t"}]}}]}, "has only `id` and `fanout`"),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "f", "fanout": {"min_results": 1, "branches": [
            {"id": "b", "fanout": {"min_results": 1, "branches": []}}]}}]}, "fan-outs do not nest"),
        ({"run_id": "r", "now_ms": 0, "steps": [{"id": "f", "fanout": {"min_results": 1, "branches": [
            {"id": "f", "tool": "t"}]}}]}, 'step id "f" is used twice'),
    ],
)
def test_invalid_scenarios_are_typed_errors(scenario: Any, needle: str, tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        run_scenario(scenario)
    assert info.value.kind == "invalid" and needle in info.value.message, info.value.message
    # The Rust runner says the same: exit status 2 is a bad scenario (README, simulate).
    assert rust_simulate(scenario, tmp_path).returncode == 2


def test_a_bad_run_configuration_is_a_runtime_error(tmp_path: Path) -> None:
    scenario = {"run_id": "r", "now_ms": 0, "config": {"attempt_budget": "x"},
                "steps": [{"id": "a", "tool": "t", "outcomes": ["ok"]}]}
    with pytest.raises(ScenarioError) as info:
        run_scenario(scenario)
    assert info.value.kind == "runtime"
    proc = rust_simulate(scenario, tmp_path)  # Rust: ScenarioError::Runtime, the loop refused it
    assert proc.returncode != 0 and "the recovery loop refused an input" in proc.stderr


def rust_simulate(scenario: Any, tmp_path: Path, *extra: str) -> Any:
    """`agent-recovery simulate FILE --json` (the Rust runtime, a second implementation)."""
    import os
    import subprocess

    target = Path(os.environ.get("CARGO_TARGET_DIR", repo_root() / "target"))
    exe = target / "release" / "agent-recovery"
    assert exe.exists(), f"{exe} is missing; run `cargo build --release -p agent-recovery-cli`"
    path = tmp_path / f"scenario-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(scenario if isinstance(scenario, str) else json.dumps(scenario), encoding="utf-8")
    return subprocess.run([str(exe), "simulate", str(path), "--json", *extra],
                          capture_output=True, text=True, timeout=120)


def test_batch_driver_runs_a_line_on_one_store(tmp_path: Path) -> None:
    import subprocess
    import sys

    name, vector = next((n, v) for n, v in VECTORS if len(v["runs"]) > 1)
    line = json.dumps([r["scenario"] for r in vector["runs"]])
    bad = json.dumps([{"run_id": "", "now_ms": 0, "steps": [{"id": "a", "tool": "t"}]}])
    proc = subprocess.run(
        [sys.executable, "-m", "agent_recovery.simulate"],
        input=f"{line}\n{bad}\nnot json\n{line}\n", capture_output=True, text=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[:-1] == run_all(vector), name
    assert lines[-1] == '{"error":"invalid"}'
    # as Rust's simulate_batch: a line that is not a JSON array stops the driver
    assert proc.returncode == 2 and "not a JSON array" in proc.stderr


def test_rust_simulate_prints_the_same_bytes(tmp_path: Path) -> None:
    """A second implementation: `agent-recovery simulate --json` (the Rust
    runtime) prints the same text for every run of every vector (runs of a
    vector share one store: the CLI's `--store` file, Python's `MemoryStore`)."""
    for name, vector in VECTORS:
        db = tmp_path / f"{name}.db"
        for i, (r, ours) in enumerate(zip(vector["runs"], run_all(vector), strict=True)):
            proc = rust_simulate(r["scenario"], tmp_path, "--store", str(db))
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.rstrip("\n") == ours, f"{name} run {i}"


def run_fused(vector: Dict[str, Any], fused: bool, with_first_step: bool = False) -> List[Tuple[str, List[str]]]:
    """Each run's output and the journal keys after it, the last step sent with
    `end` (`fused`) or followed by `end` (the other path); `with_first_step`:
    the first step sent in the `run` input."""
    store = MemoryStore()
    out = []
    for r in vector["runs"]:
        text = run_scenario(r["scenario"], store, end_with_last_step=fused, with_first_step=with_first_step).to_json()
        out.append((text, store.keys(JOURNAL, 0)))
    return out


@pytest.mark.parametrize("name,vector", VECTORS, ids=[n for n, _ in VECTORS])
def test_a_first_step_sent_in_the_run_input_gives_the_same_bytes(name: str, vector: Dict[str, Any]) -> None:
    """docs/runtime.md, "Inputs": the `run` input carrying the run's first
    step is `run` then that step; every vector, its first step sent in the
    `run` input (and its last with `end`, as a door runs), gives the same
    events, dead letters and journal as `run`, the steps, then `end`."""
    plain = run_fused(vector, False)
    assert run_fused(vector, False, with_first_step=True) == plain, name
    assert run_fused(vector, True, with_first_step=True) == plain, name


def _count_inputs(rt: Any) -> List[str]:
    """The kinds of the inputs `rt` feeds the loop from now on, in order."""
    looper = rt._looper
    calls: List[str] = []

    class Counting:
        def advance(self, state: str, input: str) -> Any:
            calls.append(json.loads(input)["input"])
            return looper.advance(state, input)

    rt._looper = Counting()
    return calls


def test_a_door_run_sends_its_step_in_the_run_input() -> None:
    """A door's run of one step: `run` with the step and `end`, then the
    step's answers (two `advance` calls on the success path: the step's
    first read and its claim go in its call's batch)."""
    from agent_recovery.runtime import BLOCKING, Runtime, Step, VirtualClock, _no_wait

    def inputs(first: bool) -> Tuple[List[str], Any]:
        rt = Runtime(store=MemoryStore(), clock=VirtualClock(1_767_225_600_000), seed=7)
        calls = _count_inputs(rt)
        run = rt._run_with_first_step("r") if first else rt.run("r")
        step = Step("s", "search", lambda call: {"hits": 1})
        report = _no_wait(run._carry_step(BLOCKING, *run._step_of(step, {}, end=True)))
        return calls, (report.outcome, report.result, run._finished, run.events)

    fused, plain = inputs(True), inputs(False)
    assert fused[0] == ["run", "attempt"]
    assert plain[0] == ["run", "step", "attempt"]
    assert fused[1] == plain[1]
    assert fused[1][:3] == ("ok", {"hits": 1}, "completed")


def test_a_run_sends_its_run_input_with_its_first_step() -> None:
    """docs/runtime.md, "Inputs": `runtime.run(id)` notes the time and calls
    the loop nothing; the first step sends the `run` input with `started_ms`.
    The run is the one whose `run` input went at once (a runtime's first run):
    its deadline and its events' `t_ms` count from `run(id)`, byte for byte,
    one loop call fewer."""
    from agent_recovery import Failed
    from agent_recovery.runtime import Runtime, VirtualClock

    def drive(later: bool, fail_first: bool, wait_ms: int = 6_000) -> Tuple[List[str], Any]:
        clock = VirtualClock(1_767_225_600_000)
        rt = Runtime(store=MemoryStore(), clock=clock, seed=7, config={"deadline_ms": 5000})
        if later:
            rt.run("first")  # a runtime's first run checks the configuration: its `run` input goes at once
        calls = _count_inputs(rt)
        run = rt.run("r")
        clock.advance(wait_ms)
        report = run.step(id="s", tool="search", call="tool", operation=lambda c: (
            Failed('{"source":"http","status":503}') if fail_first and c.attempt == 1 else {"hits": 1}))
        return calls, (report.outcome, report.result, run.events)

    for fail_first in (False, True):
        late, at_once = drive(True, fail_first), drive(False, fail_first)
        assert late[1] == at_once[1]
        assert at_once[0][:2] == ["run", "step"] and late[0] == ["run"] + at_once[0][2:]
    # 6 s after `run(id)` with a 5 s deadline, the failed attempt is not retried.
    assert late[1][0] == "dead_lettered" and all(json.loads(e)["t_ms"] >= 6_000 for e in late[1][2])
    calls, (outcome, result, _) = drive(True, False, wait_ms=10)
    assert calls == ["run", "attempt"] and (outcome, result) == ("ok", {"hits": 1})
    # A wall clock that steps back between `run(id)` and the step: the run
    # starts at the step (the loop takes the earlier of the two).
    clock = VirtualClock(1_767_225_600_000)
    rt = Runtime(store=MemoryStore(), clock=clock, seed=7)
    rt.run("first")
    run = rt.run("r")
    clock.set_ms(1_767_225_599_000)
    assert run.step(id="s", tool="search", operation=lambda c: 1).outcome == "ok"
    assert [json.loads(e)["t_ms"] for e in run.events] == [0, 0, 0]


def test_a_claim_lost_in_the_call_batch_makes_no_call() -> None:
    """docs/runtime.md, "A claim in the call's batch": the idempotency claim
    and the call come in one batch; when another worker's mark wins the race
    between the read and the claim, the runtime stops the batch there: no
    call, no attempt count, no journal entry, and the step ends `in_flight`
    (docs/runtime.md, "Step outcomes") after two loop calls."""
    from agent_recovery.runtime import Runtime, VirtualClock

    class Racing(MemoryStore):
        """A MemoryStore where another worker claims each idempotency key
        right before this runtime does."""

        def compare_and_set(self, key: str, expected: Any, value: str, ttl_ms: Any, now_ms: int) -> Any:
            if key.startswith("agent-recovery/idem/") and self.get(key, now_ms) is None:
                super().compare_and_set(key, None, '{"since_ms":1,"status":"in_flight"}', None, now_ms)
            return super().compare_and_set(key, expected, value, ttl_ms, now_ms)

    store = Racing()
    rt = Runtime(store=store, clock=VirtualClock(1_767_225_600_000), seed=7)
    rt.run("first")
    calls = _count_inputs(rt)
    made: List[Any] = []
    run = rt.run("r")
    report = run.step(id="s", tool="search", call="tool", operation=lambda c: made.append(c) or 1)
    assert (report.outcome, made) == ("in_flight", [])
    assert calls == ["run", "claimed"]
    assert [json.loads(e)["event"] for e in run.events] == ["in_flight", "outcome"]
    assert [k for k in store._entries if "attempts" in k or "journal" in k] == []


@pytest.mark.parametrize("name,vector", VECTORS, ids=[n for n, _ in VECTORS])
def test_a_last_step_sent_with_end_gives_the_same_bytes(name: str, vector: Dict[str, Any]) -> None:
    """docs/runtime.md, "Inputs": a `step` with `"end": true` ends the run as
    the step then `end` do; every vector, driven both ways, gives the same
    events, dead letters and journal (a vector of recovered runs has no step to
    send: both ways are the same path)."""
    assert run_fused(vector, True) == run_fused(vector, False), name


def test_a_step_sent_with_end_ends_the_run_in_the_same_advance() -> None:
    """The fused path is the one taken: one `advance` less than the step then
    `end`, the run over (`completed`) once the step's report is back."""
    from agent_recovery.runtime import BLOCKING, Runtime, Step, VirtualClock, _no_wait

    def advances(fused: bool) -> Tuple[int, Any, Any]:
        rt = Runtime(store=MemoryStore(), clock=VirtualClock(1_767_225_600_000), seed=7)
        looper = rt._looper
        calls: List[str] = []

        class Counting:
            def advance(self, state: str, input: str) -> Any:
                calls.append(input)
                return looper.advance(state, input)

        rt._looper = Counting()
        run = rt.run("r")
        step = Step("s", "search", lambda call: {"hits": 1})
        if fused:
            report = _no_wait(run._carry_step(BLOCKING, *run._step_of(step, {}, end=True)))
        else:
            report = run.step(step)
            run.end()
        return len(calls), report.result, run._finished

    assert advances(True) == (advances(False)[0] - 1, {"hits": 1}, "completed")
    assert advances(False)[1:] == ({"hits": 1}, "completed")
