"""Hot swap: validate first, then switch; on any failure the old policy answers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent_recovery import Policy, PolicyHandle, SwapError
from agent_recovery.verify import run_smoke_tests

OBS = {"source": "http", "status": 429, "headers": {"retry-after": "1"}}
CTX = {"call": "tool", "attempt": 1, "seed": 7}


@pytest.fixture()
def handle(policy: Policy) -> PolicyHandle:
    return PolicyHandle(policy)


def answers(handle: PolicyHandle) -> None:
    d = handle.decide(OBS, CTX)
    assert d["action"] == "retry" and d["envelope"]["code"] == "tool.http.429_rate_limited"
    assert d["policy"]["sha256"] == handle.describe()["sha256"]


def test_swap_to_a_copy_of_the_reference(
    handle: PolicyHandle, tmp_path: Path, reference_bytes: bytes
) -> None:
    before = handle.describe()
    copy = tmp_path / "candidate.wasm"
    copy.write_bytes(reference_bytes)
    after = handle.swap(copy, sha256=before["sha256"])
    assert after["sha256"] == before["sha256"] and after["origin"] == str(copy)
    assert after["swaps"] == 1 and handle.policy is not None
    answers(handle)
    handle.swap(reference_bytes)  # bytes work too
    assert handle.describe()["swaps"] == 2


@pytest.mark.parametrize(
    "make,kind",
    [
        (lambda b, p: (p.write_bytes(b[: len(b) // 3]), p)[1], "load"),
        (lambda b, p: (p.write_bytes(b""), p)[1], "load"),
        (lambda b, p: p.parent / "does-not-exist.wasm", "io"),
    ],
    ids=["truncated", "empty", "missing"],
)
def test_refused_candidates_leave_the_old_policy_active(
    handle: PolicyHandle, tmp_path: Path, reference_bytes: bytes, make: Any, kind: str
) -> None:
    before = handle.describe()
    source = make(reference_bytes, tmp_path / "bad.wasm")
    with pytest.raises(SwapError) as info:
        handle.swap(source)
    assert info.value.kind == kind
    assert "candidate refused" in info.value.message
    assert handle.describe() == before
    answers(handle)


def test_sha256_mismatch_is_refused(
    handle: PolicyHandle, tmp_path: Path, reference_bytes: bytes
) -> None:
    before = handle.describe()
    copy = tmp_path / "pinned.wasm"
    copy.write_bytes(reference_bytes)
    with pytest.raises(SwapError) as info:
        handle.swap(copy, sha256="ab" * 32)
    assert info.value.kind == "sha256_mismatch"
    assert before["sha256"] in info.value.message and "ab" * 32 in info.value.message
    assert handle.describe() == before
    answers(handle)


def test_failing_smoke_tests_are_refused(
    handle: PolicyHandle, reference_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real component decides; only its smoke set is replaced with a wrong one."""
    before = handle.describe()
    wrong = (
        '[{"observation":{"source":"http","status":400},"context":{"attempt":1},'
        '"expect":{"action":"retry","code":"tool.http.400_bad_request"}}]'
    )
    monkeypatch.setattr(Policy, "smoke_tests_json", lambda self: wrong)
    with pytest.raises(SwapError) as info:
        handle.swap(reference_bytes)
    assert info.value.kind == "smoke_test"
    assert "expected action 'retry', got 'fail'" in info.value.message
    monkeypatch.undo()
    assert handle.describe() == before
    answers(handle)


def test_reference_passes_its_own_smoke_tests(policy: Policy) -> None:
    assert run_smoke_tests(policy) == len(policy.smoke_tests()) > 0


def test_swap_while_other_threads_call(handle: PolicyHandle, reference_bytes: bytes) -> None:
    stop = threading.Event()
    errors = []

    def caller() -> None:
        while not stop.is_set():
            try:
                answers(handle)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            handle.swap(reference_bytes)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert handle.describe()["swaps"] == 3


def test_handle_loads_and_verifies_the_reference() -> None:
    h = PolicyHandle.load()
    assert h.describe()["name"] == h.info()["name"]
    assert h.classify_json('{"source":"http","status":503}') == h.policy.classify_json(
        '{"source":"http","status":503}'
    )
