"""tests/vectors/render/*.json through `Runtime.render` (the reference
component's `render-named`): the same files the Rust (host/tests/vectors.rs)
and Node (node/test/render-vectors.test.mjs) suites read. Every
`ag-ui-run-error` output is validated with the real `ag-ui-protocol` pydantic
model (`ag_ui.core.RunErrorEvent`), wire names (camelCase) in and out."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
from ag_ui.core import RunErrorEvent
from pydantic import ValidationError

from agent_recovery import PolicyError
from agent_recovery.runtime import Runtime

from .conftest import repo_root
from .subset import mismatches


def _cases() -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for path in sorted((repo_root() / "tests" / "vectors" / "render").glob("*.json")):
        out.extend(json.loads(path.read_text()))
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    return Runtime(seed=7)


def test_the_render_vectors_hold_outputs_and_refusals() -> None:
    assert any("output" in c["expect"] for c in CASES)
    assert any("error" in c["expect"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_render_vector(runtime: Runtime, case: Dict[str, Any]) -> None:
    if "error" in case["expect"]:
        with pytest.raises(PolicyError) as caught:
            runtime.render(case["envelope"], case["format"], case.get("options"))
        assert caught.value.kind == case["expect"]["error"]
        return
    got = runtime.render(case["envelope"], case["format"], case.get("options"))
    assert mismatches(case["expect"]["output"], got) == [], f"expected {case['expect']['output']}\n     got {got}"
    if case["format"].replace("_", "-") == "ag-ui-run-error":
        event = RunErrorEvent.model_validate(got)
        assert event.message == got["message"]
        assert event.code == got["code"]
        assert event.model_dump(by_alias=True, exclude_none=True, mode="json") == got


def test_a_run_error_without_message_is_refused_by_the_model(runtime: Runtime) -> None:
    got = runtime.render({"code": "llm.http.429_rate_limited"}, "ag-ui-run-error")
    del got["message"]
    with pytest.raises(ValidationError):
        RunErrorEvent.model_validate(got)
