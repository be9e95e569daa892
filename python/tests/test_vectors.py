"""Every case of tests/vectors/*.json, run through the real component.

Every expectation kind (`envelope`, `decision`, `error`) is checked and any
other fails the case; every envelope and decision produced is validated
against docs/schema/ (the `jsonschema` package, draft 2020-12). The keys of
tests/vectors/keys/keys.json come from an independent implementation of the
documented canonical form (tests/vectors/tools/keys.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from jsonschema import Draft202012Validator

from agent_recovery import Policy, PolicyError

from .conftest import repo_root, vectors_dir
from .subset import mismatches

#: The expectation kinds a case may name; any other fails it.
EXPECT_KINDS = ("envelope", "decision", "error")

_VALIDATORS: Dict[str, Draft202012Validator] = {}


def schema_violations(name: str, value: Any) -> List[str]:
    """Where `value` breaks docs/schema/<name>.schema.json; [] when it conforms."""
    if name not in _VALIDATORS:
        path = repo_root() / "docs" / "schema" / f"{name}.schema.json"
        schema = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
        _VALIDATORS[name] = Draft202012Validator(schema)
    return [
        f"{name} schema: {e.message} at /{'/'.join(str(p) for p in e.absolute_path)}"
        for e in _VALIDATORS[name].iter_errors(value)
    ]


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


def outcome(run: Any, schema: str) -> Any:
    """The parsed output (validated against `schema`), or `{"error": {kind, message}}`."""
    try:
        got = json.loads(run())
    except PolicyError as e:
        return {"error": {"kind": e.kind, "message": e.message}}, []
    return got, schema_violations(schema, got)


@pytest.mark.parametrize("name,case", CASES, ids=[n for n, _ in CASES])
def test_vector(policy: Policy, name: str, case: Dict[str, Any]) -> None:
    expect = case["expect"]
    observation = json.dumps(case["observation"])
    context = json.dumps(case.get("context", {}))
    failures = [
        f"\nvector:   {name}\nunknown expectation kind {kind!r} (this runner checks {EXPECT_KINDS})"
        for kind in expect
        if kind not in EXPECT_KINDS
    ]
    assert any(k in expect for k in EXPECT_KINDS), f"{name}: expect has none of {EXPECT_KINDS}"
    if "envelope" in expect:
        got, problems = outcome(lambda: policy.classify_json(observation), "envelope")
        problems += mismatches(expect["envelope"], got)
        if problems:
            failures.append(report(name, "envelope (classify)", expect["envelope"], got, problems))
    if "decision" in expect:
        got, problems = outcome(lambda: policy.decide_json(observation, context), "decision")
        problems += mismatches(expect["decision"], got)
        if problems:
            failures.append(report(name, "decision (decide)", expect["decision"], got, problems))
    if "error" in expect:
        # As in the Rust runner: decide with a context, else classify.
        if "context" in case:
            got, _ = outcome(lambda: policy.decide_json(observation, context), "decision")
        else:
            got, _ = outcome(lambda: policy.classify_json(observation), "envelope")
        problems = mismatches({"error": expect["error"]}, got)
        if problems:
            failures.append(report(name, "error", expect["error"], got, problems))
    if failures:
        pytest.fail("".join(failures), pytrace=False)


def test_idempotency_keys_match_the_independent_implementation(policy: Policy) -> None:
    path = repo_root() / "tests" / "vectors" / "keys" / "keys.json"
    cases = json.loads(path.read_text(encoding="utf-8"))
    assert len(cases) >= 10
    for c in cases:
        got = policy.key(c["run_id"], c["step_id"], c["tool"], c["args_json"])
        assert got == c["key"], f"{c['name']}: canonical form {c['canonical']}"


def test_a_schema_violation_is_reported(policy: Policy) -> None:
    decision = json.loads(policy.decide_json('{"source":"http","status":503}', "{}"))
    assert schema_violations("decision", decision) == []
    decision["action"] = "retry_later"
    decision["envelope"]["class"] = True
    assert len(schema_violations("decision", decision)) >= 2


def test_every_registry_row_matches_the_code_info_schema(policy: Policy) -> None:
    rows = policy.registry()
    assert len(rows) > 50
    assert [v for row in rows for v in schema_violations("code-info", row)] == []
