"""The host around the component: loading, traps, limits, threads, the fast path."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import wasmtime

from agent_recovery import Limits, Policy, PolicyError, PolicyRuntimeError
from agent_recovery._sandbox import Sandbox

OBS = [
    '{"source":"http","status":503}',
    '{"source":"http","status":429,"headers":{"retry-after":"2"}}',
    '{"source":"exception","type":"httpx.ReadTimeout"}',
    '{"source":"network","code":"ECONNRESET"}',
    "not json",
]


def test_reference_identity(policy: Policy) -> None:
    info = policy.info()
    assert info["name"] == policy.name and info["contract"].startswith("0.1.")
    d = policy.describe()
    assert len(d["sha256"]) == 64 and d["origin"] == "reference" and d["size"] > 0


def test_decide_adds_policy_but_decide_json_is_the_components_bytes(policy: Policy) -> None:
    obs, ctx = OBS[1], '{"call":"tool","attempt":1,"seed":7}'
    text = policy.decide_json(obs, ctx)
    assert '"policy"' not in text
    decision = policy.decide(json.loads(obs), json.loads(ctx))
    assert decision.pop("policy") == {  # type: ignore[misc]
        "name": policy.name,
        "version": policy.version,
        "sha256": policy.sha256,
    }
    assert decision == json.loads(text)


def test_fast_path_matches_wasmtime_public_api(policy: Policy) -> None:
    sandbox = policy._live_sandbox()
    func = sandbox._funcs["classify-json"]
    for obs in OBS:
        public = func(sandbox.store, obs)
        try:
            fast = policy.classify_json(obs)
        except PolicyError as e:
            assert isinstance(public, wasmtime.component.Record)
            assert (e.kind, e.message) == (public.kind.replace("-", "_"), public.message)
        else:
            assert fast == public  # byte for byte


def test_garbage_truncated_missing_and_foreign_components(
    tmp_path: Path, reference_bytes: bytes
) -> None:
    cases = {
        "load": [b"garbage", reference_bytes[: len(reference_bytes) // 2], b"\0asm\x01\0\0\0"],
        "incompatible": [
            bytes(wasmtime.wat2wasm("(component)")),
            bytes(wasmtime.wat2wasm('(component (import "evil:net/socket" (instance)))')),
        ],
        "io": [str(tmp_path / "missing.wasm")],
    }
    for kind, sources in cases.items():
        for source in sources:
            with pytest.raises(PolicyRuntimeError) as info:
                Policy.load(source)
            assert info.value.kind == kind, info.value
            assert ";" in info.value.message or "," in info.value.message


def test_sha256_pin(reference_bytes: bytes, policy: Policy) -> None:
    assert Policy.load(reference_bytes, sha256=policy.sha256.upper()).sha256 == policy.sha256
    with pytest.raises(PolicyRuntimeError) as info:
        Policy.load(reference_bytes, sha256="0" * 64)
    assert info.value.kind == "sha256_mismatch"


def test_out_of_fuel_traps_and_the_next_call_gets_a_fresh_instance() -> None:
    stingy = Policy.load(limits=Limits(fuel_base=5_000_000, fuel_per_byte=0))
    first = stingy._sandbox
    heavy = json.dumps({"source": "http", "status": 400, "body": {"items": list(range(300_000))}})
    with pytest.raises(PolicyRuntimeError) as info:
        stingy.classify_json(heavy)
    assert info.value.kind == "out_of_fuel"
    assert stingy._sandbox is None, "a trapped instance is dropped"
    assert stingy.classify({"source": "http", "status": 503})["code"] == "tool.http.503_unavailable"
    assert stingy._sandbox is not None and stingy._sandbox is not first


def test_memory_limit_is_a_runtime_error_not_a_crash() -> None:
    small = Policy.load(limits=Limits(memory_bytes=4 << 20))
    body = "q" * (3 << 20)
    with pytest.raises(PolicyRuntimeError) as info:
        small.classify({"source": "http", "status": 503, "body": body})
    assert info.value.kind in ("trap", "out_of_fuel")
    assert small.classify({"source": "http", "status": 503})["retryable"] is True


def test_instantiation_failure_is_a_runtime_error(policy: Policy) -> None:
    with pytest.raises(PolicyRuntimeError) as info:
        Sandbox(policy._compiled, Limits(memory_bytes=64 << 10))
    assert info.value.kind == "instantiate" and "memory_bytes" in info.value.message
    with pytest.raises(PolicyRuntimeError):
        Policy.load(limits=Limits(memory_bytes=64 << 10))


def test_threads_share_one_policy(policy: Policy) -> None:
    expected = {obs: _answer(policy, obs) for obs in OBS}
    errors = []

    def worker() -> None:
        for _ in range(40):
            for obs in OBS:
                got = _answer(policy, obs)
                if got != expected[obs]:
                    errors.append((obs, got))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _answer(policy: Policy, obs: str) -> str:
    try:
        return policy.decide_json(obs, '{"attempt":2,"seed":11}')
    except PolicyError as e:
        return f"ERROR {e.kind} {e.message}"


def test_other_calls(policy: Policy) -> None:
    assert policy.backoff("tool", 3, seed=7) == policy.backoff("tool", 3, seed=7)
    assert 0 <= policy.backoff("llm", 1) <= 1000
    cfg = {"tool": {"base_ms": 10, "cap_ms": 10, "max_attempts": 2}, "retry_budget_ms": 5}
    assert 0 <= policy.backoff("tool", 5, seed=1, config=cfg) <= 10  # type: ignore[arg-type]
    k1 = policy.key("run", "step", "search", {"q": "x", "n": 1})
    assert k1 == policy.key("run", "step", "search", '{"n":1,"q":"x"}') and len(k1) == 64
    assert k1 != policy.key("run", "step2", "search", {"q": "x", "n": 1})
    codes = policy.registry()
    assert [c["code"] for c in codes] == sorted(c["code"] for c in codes)
    assert json.loads(policy.registry_json()) == codes
    assert policy.smoke_tests() and all("expect" in c for c in policy.smoke_tests())


def test_render(policy: Policy) -> None:
    envelope = policy.classify({"source": "http", "status": 503})
    try:
        rendered = policy.render(envelope, "jsonrpc-error", {"id": 7})
    except PolicyError as e:  # rendering may not be implemented by every policy
        assert e.kind == "invalid_argument"
        return
    assert rendered["jsonrpc"] == "2.0" and rendered["id"] == 7
    text = policy.render(json.dumps(envelope), "coordinator_text")
    assert isinstance(text, str) and text.startswith("[")


def test_lookup_finds_one_row_or_none(policy: Policy) -> None:
    # Parity with Node's `lookup`: one row of the registry, the same dict.
    rows = {row["code"]: row for row in policy.registry()}
    assert policy.lookup("tool.http.503_unavailable") == rows["tool.http.503_unavailable"]
    assert policy.lookup("tool.http.999_nothing") is None


def test_decide_takes_json_text_or_a_dict(policy: Policy) -> None:
    obs = {"source": "http", "status": 429, "headers": {"retry-after": "2"}}
    ctx = {"attempt": 1, "seed": 7}
    assert policy.decide(json.dumps(obs), json.dumps(ctx)) == policy.decide(obs, ctx)
