"""The payments policy document (examples/payments-policy/policy.yaml, as JSON
in tests/equivalence/payments.json) packed into the reference component by
agent_recovery.document and loaded by Policy.load, against the compiled
payments component (artifacts.json's `payments-policy`): both are asked, live,
on every observation and context of the grid, and must answer byte for byte
alike. The Rust and Node suites run the same grid."""

from __future__ import annotations

import json
from typing import Callable

from agent_recovery import Policy, PolicyError
from agent_recovery.document import pack_document

from .conftest import artifact, repo_root


def answer(call: Callable[..., str], *args: str) -> str:
    """The component's answer: its text, or its error's kind and message."""
    try:
        return call(*args)
    except PolicyError as e:
        return f"error {e.kind}: {e.message}"


def test_the_payments_document_decides_what_the_compiled_payments_component_decides() -> None:
    grid = json.loads((repo_root() / "tests" / "equivalence" / "payments.json").read_text(encoding="utf-8"))
    document = Policy.load(pack_document(grid["document"]))
    assert document.info()["name"] == "payments-strict"
    compiled = Policy.load(artifact(grid["compiled"]))
    contexts = [json.dumps(c) for c in grid["contexts"]]
    differ = []
    decisions = 0
    for o in grid["observations"]:
        obs = json.dumps(o)
        want = answer(compiled.classify_json, obs)
        got = answer(document.classify_json, obs)
        if want != got:
            differ.append(f"classify {obs}\n  compiled: {want}\n  document: {got}")
        for ctx in contexts:
            want = answer(compiled.decide_json, obs, ctx)
            got = answer(document.decide_json, obs, ctx)
            if want != got:
                differ.append(f"decide {obs} {ctx}\n  compiled: {want}\n  document: {got}")
            decisions += 1
    assert decisions == len(grid["observations"]) * len(grid["contexts"])
    assert decisions > 5000, f"only {decisions} decisions compared"
    assert not differ, f"{len(differ)} of {decisions} differ:\n" + "\n".join(differ[:20])
