"""The telemetry mapping's shared vectors (`tests/telemetry-map/lanes.json`,
also run by the guest, the Rust host and Node) through the reference
component's `map-lane-json`, as the Python runtime calls it (its canonical
ABI): all observations in one call, then one per call with the state
carried; the instructions must equal the vector's, value for value.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest

from agent_recovery._loop import LoopComponent
from agent_recovery.errors import PolicyError
from agent_recovery.limits import Limits
from agent_recovery.runtime import _default_loop

from .conftest import repo_root


def cases() -> List[Dict[str, Any]]:
    doc = json.loads((repo_root() / "tests" / "telemetry-map" / "lanes.json").read_text(encoding="utf-8"))
    found: List[Dict[str, Any]] = doc["cases"]
    assert len(found) >= 7, "the vectors are all there"
    return found


@pytest.fixture(scope="module")
def loop() -> LoopComponent:
    return _default_loop(Limits())


@pytest.mark.parametrize("case", cases(), ids=lambda c: str(c["name"]))
def test_vector(loop: LoopComponent, case: Dict[str, Any]) -> None:
    _, text = loop.map_lane_json("", json.dumps(case["observations"]))
    assert json.loads(text) == case["instructions"]
    state, got = "", []
    for o in case["observations"]:
        state, text = loop.map_lane_json(state, json.dumps([o]))
        got.extend(json.loads(text))
    assert got == case["instructions"], "one observation per call"


def test_a_lane_must_start_with_lane(loop: LoopComponent) -> None:
    with pytest.raises(PolicyError, match="starts with a `lane` observation"):
        loop.map_lane_json("", '[{"now_ms": 1, "kind": "call_end"}]')
