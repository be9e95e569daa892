"""The precompiled reference shipped by `pip install` (python/setup.py):
used when it was built for this wasmtime, CPU and engine configuration, ignored
(and the component compiled) otherwise, never changing a decision."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
from wasmtime import Config, Engine
from wasmtime.component import Component

from agent_recovery import Policy, _component, reference_path

ROOT = Path(__file__).resolve().parents[2]
OBS = sorted((ROOT / "examples" / "observations").glob("*.json"))

DECIDE_ALL = """
import json, sys
from agent_recovery import Policy
p = Policy.load()
out = [p.decide_json(open(f).read(), '{"attempt":1,"seed":7}') for f in json.loads(sys.argv[1])]
print(json.dumps({"precompiled": p._compiled.precompiled, "out": out}))
"""


def decide_all(tmp_path: Path, **env: str) -> "dict[str, object]":
    cache = tmp_path / f"cache-{len(env)}"  # an empty wasmtime cache: a first-ever start
    full = dict(os.environ, XDG_CACHE_HOME=str(cache), **env)
    full.pop("AGENT_RECOVERY_REFERENCE_WASM", None)
    run = subprocess.run(
        [sys.executable, "-c", DECIDE_ALL, json.dumps([str(p) for p in OBS])],
        check=True, capture_output=True, text=True, env=full,
    )
    result: dict[str, object] = json.loads(run.stdout)
    return result


def test_install_ships_the_reference_precompiled() -> None:
    digest = hashlib.sha256(reference_path().read_bytes()).hexdigest()
    assert (_component.PRECOMPILED_DIR / f"{digest}.cwasm").is_file()


def test_first_start_uses_it_and_decides_as_the_compiler_does(tmp_path: Path) -> None:
    shipped = decide_all(tmp_path)
    compiled = decide_all(tmp_path, AGENT_RECOVERY_PRECOMPILED="0", AGENT_RECOVERY_COMPILE_CACHE="0")
    assert shipped["precompiled"] is True
    assert compiled["precompiled"] is False
    assert len(OBS) >= 10 and shipped["out"] == compiled["out"]


@pytest.fixture
def own_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(_component, "PRECOMPILED_DIR", tmp_path)
    monkeypatch.setattr(_component, "_compiled", OrderedDict())  # no per-process memo
    return tmp_path


def test_artifact_of_another_engine_configuration_is_ignored(own_dir: Path) -> None:
    wasm = reference_path().read_bytes()
    digest = hashlib.sha256(wasm).hexdigest()
    # Compiled without fuel metering: loading it would drop the CPU bound.
    foreign = Component(Engine(Config()), wasm).serialize()
    (own_dir / f"{digest}.cwasm").write_bytes(bytes(foreign))
    policy = Policy.load()
    assert policy._compiled.precompiled is False
    assert json.loads(policy.decide_json('{"source":"http","status":503}', "{}"))["action"] == "retry"


def test_garbage_artifact_is_ignored(own_dir: Path) -> None:
    digest = hashlib.sha256(reference_path().read_bytes()).hexdigest()
    (own_dir / f"{digest}.cwasm").write_bytes(b"\x7fELF" + b"\0" * 4096)
    policy = Policy.load()
    assert policy._compiled.precompiled is False
    assert json.loads(policy.classify_json('{"source":"http","status":503}'))["code"] == "tool.http.503_unavailable"


def test_artifact_named_for_other_bytes_is_not_used(own_dir: Path) -> None:
    wasm = reference_path().read_bytes()
    engine, _ = _component.engine_and_linker()
    (own_dir / f"{'0' * 64}.cwasm").write_bytes(bytes(Component(engine, wasm).serialize()))
    assert Policy.load()._compiled.precompiled is False
