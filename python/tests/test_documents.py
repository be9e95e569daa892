"""tests/vectors/documents/*.json through the real component: each file's
policy document packed into the reference component (agent_recovery.document),
loaded, smoke-tested and run on every case. The Rust and Node suites run the
same files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from agent_recovery import Policy, PolicyError, PolicyRuntimeError
from agent_recovery.document import SLOT_MARKER, pack_document
from agent_recovery.verify import run_smoke_tests

from .conftest import vectors_dir
from .subset import mismatches


def load_files() -> List[Tuple[str, Dict[str, Any]]]:
    files = sorted(Path(vectors_dir(), "documents").glob("*.json"))
    return [(f.name, json.loads(f.read_text(encoding="utf-8"))) for f in files]


FILES = load_files()


def test_document_vectors_exist() -> None:
    assert FILES and all(v["cases"] for _, v in FILES)


@pytest.mark.parametrize("name,vector", FILES, ids=[n for n, _ in FILES])
def test_document_vectors(name: str, vector: Dict[str, Any]) -> None:
    policy = Policy.load(pack_document(vector["document"]))
    assert run_smoke_tests(policy) == len(vector["document"]["smoke_tests"])
    # The digest `info` reports, computed here independently of the component:
    # sha256 of the document with sorted keys and no whitespace.
    canonical = json.dumps(
        vector["document"], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    digest = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    info = policy.info()
    assert info["name"] == vector["document"]["name"]
    assert info["description"].endswith(f"(policy document {digest})"), info["description"]
    failures = []
    for case in vector["cases"]:
        obs = json.dumps(case["observation"])
        ctx = json.dumps(case.get("context", {}))
        problems: List[str] = []
        if "envelope" in case["expect"]:
            problems += mismatches(case["expect"]["envelope"], json.loads(policy.classify_json(obs)))
        try:
            got: Any = json.loads(policy.decide_json(obs, ctx))
        except PolicyError as e:
            got = {"error": {"kind": e.kind, "message": e.message}}
        if "decision" in case["expect"]:
            problems += mismatches(case["expect"]["decision"], got)
        if "error" in case["expect"]:
            problems += mismatches({"error": case["expect"]["error"]}, got)
        if problems:
            failures.append(f"{case['name']}: {problems} (got {json.dumps(got)[:400]})")
    assert not failures, "\n".join(failures)


def test_an_invalid_document_fails_the_smoke_run_with_its_path() -> None:
    doc = {
        "format": 1,
        "name": "x",
        "version": "1.0.0",
        "overrides": {"codes": {"llm.http.409_conflict": {"action": "retyr"}}},
        "smoke_tests": [{"observation": {"source": "http", "status": 503}, "expect": {"action": "retry"}}],
    }
    policy = Policy.load(pack_document(doc))
    with pytest.raises(Exception) as raised:
        run_smoke_tests(policy)
    assert 'overrides.codes["llm.http.409_conflict"].action: unknown action "retyr"' in str(raised.value)


def test_a_packed_component_is_not_packed_again() -> None:
    doc = FILES[0][1]["document"]
    packed = pack_document(doc)
    assert packed.count(SLOT_MARKER) == 1
    with pytest.raises(PolicyRuntimeError) as raised:
        pack_document(doc, packed)
    assert raised.value.kind == "invalid_argument"
    assert "already holds a policy document" in raised.value.message
