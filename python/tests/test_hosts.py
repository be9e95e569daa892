"""The host conformance vectors (tests/hosts/conformance.json), run by the
Python host; the Rust (host/tests/hosts.rs) and Node (node/test/hosts.test.mjs)
hosts run the same file. docs/hosts.md documents the rules and the codes."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List

import pytest

from agent_recovery import Policy, PolicyError, PolicyHandle, PolicyRuntimeError

from .conftest import artifact, repo_root

HOST = "python"
VECTORS = json.loads((repo_root() / "tests" / "hosts" / "conformance.json").read_text("utf-8"))


def for_this_host(case: Dict[str, Any]) -> Dict[str, Any]:
    """The case as this host runs it: `hosts.python` overrides its members."""
    return {**case, **case.get("hosts", {}).get(HOST, {})}


def component_bytes(case: Dict[str, Any]) -> bytes:
    data = artifact(case["component"]).read_bytes()
    transform = case.get("bytes")
    if transform is None:
        return data
    if transform == "truncate-half":
        return data[: len(data) // 2]
    if transform == "not-wasm":
        return b"<html>"
    raise AssertionError(f"unknown bytes transform {transform!r}")


def pin(template: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return template.replace("{sha256}", digest).replace("{SHA256}", digest.upper())


def error_outcome(e: Exception) -> Dict[str, Any]:
    code = getattr(e, "code", None)
    assert isinstance(code, str), f"an error without a code: {e!r}"
    return {"error": code}


def load_outcome(case: Dict[str, Any]) -> Dict[str, Any]:
    data = component_bytes(case)
    sha = pin(case["pin"], data) if "pin" in case else None
    try:
        PolicyHandle.load(data, sha256=sha)
    except (PolicyRuntimeError, PolicyError) as e:
        return error_outcome(e)
    return {"ok": True}


def observation(case: Dict[str, Any]) -> str:
    size = case.get("observation_bytes")
    if size is not None:
        head = '{"source":"http","status":400,"body":"'
        return head + "x" * (size - len(head) - 2) + '"}'
    return str(case["observation"])


def call_outcome(case: Dict[str, Any]) -> Dict[str, Any]:
    policy = Policy.load(component_bytes(case))  # unchecked: no smoke set
    assert case["op"] == "decide", f"unknown op {case['op']!r}"
    try:
        decision = policy.decide(observation(case), "{}")
    except (PolicyRuntimeError, PolicyError) as e:
        return error_outcome(e)
    return {"action": decision["action"], "code": decision["envelope"]["code"]}


def check(kinds: List[str], expect: Dict[str, Any], got: Dict[str, Any], name: str) -> None:
    """Compares every expectation kind the case names; an unknown one fails."""
    for kind, want in expect.items():
        assert kind in kinds, f"{name}: unknown expectation kind {kind!r} (this runner checks {kinds})"
        assert got.get(kind) == want, f"{name}: expected {kind} {want!r}, got {got}"


@pytest.mark.parametrize("raw", VECTORS["load"], ids=lambda c: c["name"])
def test_load(raw: Dict[str, Any]) -> None:
    case = for_this_host(raw)
    check(["ok", "error"], case["expect"], load_outcome(case), case["name"])


@pytest.mark.parametrize("raw", VECTORS["call"], ids=lambda c: c["name"])
def test_call(raw: Dict[str, Any]) -> None:
    case = for_this_host(raw)
    check(["error", "action", "code"], case["expect"], call_outcome(case), case["name"])


def test_an_unknown_expectation_kind_fails() -> None:
    with pytest.raises(AssertionError, match="unknown expectation kind 'eror'"):
        check(["ok", "error"], {"eror": "load"}, {"error": "load"}, "typo")
