"""The shared scenario vectors (`tests/scenarios/`, README.md there): the
component parses and checks every scenario; each invalid one gives its message
byte for byte (through `run_scenario`, a `ScenarioError` of kind `invalid`),
each valid one its plan (as wasmtime lifts it, in the vectors' notation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from agent_recovery.limits import Limits
from agent_recovery.runtime import _default_loop
from agent_recovery.scenario import ScenarioError, run_scenario

DIR = Path(__file__).resolve().parents[2] / "tests" / "scenarios"
INVALID: List[Dict[str, Any]] = json.loads((DIR / "invalid.json").read_text(encoding="utf-8"))
VALID: List[Dict[str, Any]] = json.loads((DIR / "valid.json").read_text(encoding="utf-8"))


def _outcomes(items: Any) -> List[Any]:
    # wasmtime lifts the `outcome` variant untagged: None for `ok`, the text for an observation
    return ["ok" if o is None else {"observation": o} for o in items]


def _step(s: Any) -> Dict[str, Any]:
    compensation = s.compensation
    return {
        "id": s.id, "tool": s.tool, "call": s.call, "target": s.target, "args": s.args,
        "side_effect": getattr(s, "side-effect"), "idempotent": s.idempotent, "checkpoint": s.checkpoint,
        "outcomes": _outcomes(s.outcomes),
        "fallbacks": [{"target": f.target, "outcomes": _outcomes(f.outcomes)} for f in s.fallbacks],
        "compensation": None if compensation is None else _outcomes(compensation),
        "replay_of": getattr(s, "replay-of"),
    }


def notation(p: Any) -> Dict[str, Any]:
    """The plan in the vectors' notation, members in the README's order."""
    steps = [
        {"fanout": {"id": s.payload.id, "min_results": getattr(s.payload, "min-results"),
                    "branches": [_step(b) for b in s.payload.branches]}}
        if s.tag == "fanout" else {"step": _step(s.payload)}
        for s in p.steps
    ]
    return {
        "run_id": getattr(p, "run-id"), "seed": p.seed, "now_ms": getattr(p, "now-ms"), "config": p.config,
        "cancel_at_ms": getattr(p, "cancel-at-ms"), "kill_after_calls": getattr(p, "kill-after-calls"),
        "recover": p.recover, "steps": steps,
    }


def test_the_vector_sets_are_not_empty() -> None:
    assert len(INVALID) >= 30 and len(VALID) >= 5


@pytest.mark.parametrize("vector", INVALID, ids=[v["name"] for v in INVALID])
def test_an_invalid_scenario_gives_its_message(vector: Dict[str, Any]) -> None:
    with pytest.raises(ScenarioError) as info:
        run_scenario(vector["text"])
    assert info.value.kind == "invalid"
    assert info.value.message == vector["message"]


@pytest.mark.parametrize("vector", VALID, ids=[v["name"] for v in VALID])
def test_a_valid_scenario_gives_its_plan(vector: Dict[str, Any]) -> None:
    plan = _default_loop(Limits()).parse_scenario(vector["text"])
    assert not isinstance(plan, str), plan
    assert json.dumps(notation(plan)) == json.dumps(vector["plan"])


def test_a_scenario_given_as_a_dict_is_checked_by_the_component() -> None:
    with pytest.raises(ScenarioError) as info:
        run_scenario({"run_id": "r", "now_ms": 0, "steps": [{"id": "a", "tool": "t", "outcomes": [3]}]})
    assert info.value.message == 'scenario step "a": an outcome is 3; use "ok" or an observation object'
