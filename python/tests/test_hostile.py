"""Hostile components (tests/hostile/, built by host/build.rs): refused or contained.

Each must be refused at load or contained per call, the previous policy must
keep answering, and the error must say what happened. The fixtures are found
through the manifest host/build.rs writes (see `conftest.artifact`); a missing
one fails the test with the command that builds it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_recovery import Limits, Policy, PolicyHandle, PolicyRuntimeError, SwapError

from .conftest import artifact

OBS = '{"source":"http","status":503}'


def need(name: str) -> Path:
    """The built hostile fixture `name` (`spin`, `wrong_world`, ...); fails if missing."""
    return artifact("hostile-" + name.replace("_", "-"))


@pytest.fixture()
def handle(policy: Policy) -> PolicyHandle:
    return PolicyHandle(policy)


def refused(handle: PolicyHandle, path: Path, kinds: tuple) -> SwapError:
    before = handle.describe()
    with pytest.raises(SwapError) as info:
        handle.swap(path)
    assert info.value.kind in kinds, info.value
    assert handle.describe() == before
    assert json.loads(handle.classify_json(OBS))["code"] == "tool.http.503_unavailable"
    return info.value


def test_spin_is_refused_at_activation_and_contained_per_call(handle: PolicyHandle) -> None:
    path = need("spin")
    refused(handle, path, ("out_of_fuel",))
    spin = Policy.load(path, limits=Limits(fuel_base=20_000_000))  # loaded unchecked
    for _ in range(2):
        with pytest.raises(PolicyRuntimeError) as info:
            spin.classify_json(OBS)
        assert info.value.kind == "out_of_fuel"


def test_membomb_is_contained(handle: PolicyHandle) -> None:
    path = need("membomb")
    refused(handle, path, ("out_of_fuel", "trap"))
    bomb = Policy.load(path, limits=Limits(memory_bytes=16 << 20, fuel_base=10**10))
    with pytest.raises(PolicyRuntimeError) as info:
        bomb.decide_json(OBS)
    assert info.value.kind == "trap"  # memory.grow refused, the guest aborts


def test_panic_traps_and_the_instance_is_discarded(handle: PolicyHandle) -> None:
    path = need("panic")
    refused(handle, path, ("trap",))
    panicky = Policy.load(path)
    for _ in range(2):
        first = panicky._sandbox or panicky._live_sandbox()
        with pytest.raises(PolicyRuntimeError) as info:
            panicky.classify_json(OBS)
        assert info.value.kind == "trap" and panicky._sandbox is None
        assert panicky.info()["name"] == "hostile-panic"  # a fresh instance answers
        assert panicky._sandbox is not first


def test_sneaky_is_refused_at_load_for_its_imports(handle: PolicyHandle) -> None:
    path = need("sneaky")
    # It reads /etc/passwd and connects to 127.0.0.1:9, so it imports
    # wasi:filesystem and wasi:sockets: refused before it can run at all.
    err = refused(handle, path, ("incompatible",))
    assert "wasi:filesystem/" in err.message and "wasi:sockets/" in err.message, err.message
    with pytest.raises(PolicyRuntimeError) as info:
        Policy.load(path)
    assert info.value.kind == "incompatible" and "may import only" in info.value.message


def test_garbage_output_is_invalid_output(handle: PolicyHandle) -> None:
    path = need("garbage")
    err = refused(handle, path, ("invalid_output",))  # as in Rust and Node (tests/hosts/)
    assert err.code == "invalid-output"
    garbage = Policy.load(path)
    with pytest.raises(PolicyRuntimeError) as info:
        garbage.classify(OBS)
    assert info.value.kind == "invalid_output"
    with pytest.raises(PolicyRuntimeError) as info:
        garbage.decide(OBS)
    assert info.value.kind == "invalid_output"
    # The *_json entry points hand back the component's bytes unchanged, unparsed.
    assert garbage.classify_json(OBS).startswith('{"code": 42')


def test_wrong_world_is_refused_at_load(handle: PolicyHandle) -> None:
    path = need("wrong_world")
    err = refused(handle, path, ("incompatible",))
    assert "agent:recovery" in err.message


def test_a_core_module_is_not_a_component() -> None:
    with pytest.raises(PolicyRuntimeError) as info:
        Policy.load(b"\0asm\x01\0\0\0")
    assert info.value.kind == "load" and "core WebAssembly module" in info.value.message


def test_conformance_driver_reports_a_trap_and_goes_on() -> None:
    import io

    from agent_recovery.conformance import run

    panicky = Policy.load(need("panic"))
    lines = [
        {"op": "classify", "observation": OBS},
        {"op": "key", "run_id": "r", "step_id": "s", "tool": "t", "args": "{}"},
    ]
    out = io.BytesIO()
    run(panicky, io.BytesIO(b"".join(json.dumps(x).encode() + b"\n" for x in lines)), out)
    got = out.getvalue().decode().splitlines()
    assert got[0].startswith("ERROR runtime_trap ") and len(got) == 2
