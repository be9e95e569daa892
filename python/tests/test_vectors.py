"""Every case of tests/vectors/*.json, run through the real component."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from agent_recovery import Policy, PolicyError

from .conftest import vectors_dir
from .subset import mismatches


def load_cases() -> List[Tuple[str, Dict[str, Any]]]:
    cases = []
    for file in sorted(Path(vectors_dir()).glob("*.json")):
        for i, case in enumerate(json.loads(file.read_text(encoding="utf-8"))):
            cases.append((f"{file.stem}[{i}] {case.get('name', '?')}", case))
    return cases


CASES = load_cases()


def test_vectors_exist() -> None:
    assert CASES, f"no vectors found in {vectors_dir()}"


def report(name: str, what: str, expected: Any, got: Any, problems: List[str]) -> str:
    return (
        f"\nvector:   {name}\n{what}:\n"
        f"  expected (subset): {json.dumps(expected, sort_keys=True)}\n"
        f"  got:               {json.dumps(got, sort_keys=True)}\n"
        f"  differences:       " + "\n                     ".join(problems)
    )


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_vector(policy: Policy, name: str, case: Dict[str, Any]) -> None:
    expect = case["expect"]
    observation = json.dumps(case["observation"])
    failures = []
    if "envelope" in expect:
        try:
            got = json.loads(policy.classify_json(observation))
        except PolicyError as e:
            got = {"error": {"kind": e.kind, "message": e.message}}
        problems = mismatches(expect["envelope"], got)
        if problems:
            failures.append(report(name, "envelope (classify)", expect["envelope"], got, problems))
    if "decision" in expect:
        context = json.dumps(case.get("context", {}))
        try:
            got = json.loads(policy.decide_json(observation, context))
        except PolicyError as e:
            got = {"error": {"kind": e.kind, "message": e.message}}
        problems = mismatches(expect["decision"], got)
        if problems:
            failures.append(report(name, "decision (decide)", expect["decision"], got, problems))
    if failures:
        pytest.fail("".join(failures), pytrace=False)
