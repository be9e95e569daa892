"""Build step of the `agent-recovery` package: bundle the policy component.

`pip install ./python` (or `python -m build`) runs `build_py`, which puts
`agent_recovery/_wasm/agent_recovery_policy.wasm` into the package, taking it
from the first of:

1. `$AGENT_RECOVERY_WASM`, a prebuilt component file;
2. in a checkout (`../Cargo.toml` exists) with cargo on PATH: the output of
   `rustup target add wasm32-wasip2` (when rustup exists) and
   `cargo build -p agent-recovery-policy --release --config guest/release.toml --target wasm32-wasip2`,
   which is a quick no-op when the component is up to date;
3. in a checkout without cargo: the component cargo built earlier, if any;
4. a component already in `src/agent_recovery/_wasm/` (an sdist carries one).

Otherwise the build stops and says what to install.

It also copies the Redis backend's Lua scripts (`host/src/store/redis/*.lua`,
the one source of the server-side logic) into `agent_recovery/_redis/`, and
the SQLite store's schema (`host/src/store/schema.sql`, the one text all three
stores run) into `agent_recovery/_sql/`, as they are, when building from a
checkout; an sdist carries the copies (python/tests/test_redis_store.py and
python/tests/test_store.py compare them with the originals). The `.wasm` is never
committed (see .gitignore); `sdist` bundles it too, so an sdist installs
without Rust.

`build_py` then precompiles it for this machine with the wasmtime the build
environment has (`[build-system] requires`, the same major as the runtime
dependency) and the engine configuration `agent_recovery._component` uses,
writing `_wasm/<sha256 of the .wasm>.cwasm` (so that a first load without a
warm cache, e.g. a fresh container, deserializes it instead of compiling for
1-2 s). At load, wasmtime refuses an artifact built by another wasmtime
version, for another CPU or with another configuration, and the package then
compiles as before; when wasmtime is not importable here, no artifact is made.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
NAME = "agent_recovery_policy.wasm"
PACKAGED = HERE / "src" / "agent_recovery" / "_wasm" / NAME
CRATE = "agent-recovery-policy"
TARGET = "wasm32-wasip2"


def _log(message: str) -> None:
    print(f"agent-recovery: {message}", file=sys.stderr)


def _cargo_output() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / TARGET / "release" / NAME


def _cargo_build() -> None:
    if shutil.which("rustup"):
        subprocess.run(["rustup", "target", "add", TARGET], cwd=REPO, check=False)
    # guest/release.toml: the guest profile every host builds with (same bytes everywhere).
    profile = str(REPO / "guest" / "release.toml")
    _log(f"building the component: cargo build -p {CRATE} --release --config {profile} --target {TARGET}")
    subprocess.run(
        ["cargo", "build", "-p", CRATE, "--release", "--config", profile, "--target", TARGET],
        cwd=REPO,
        check=True,
    )


def ensure_component() -> Path:
    """Put the component at PACKAGED and return its path."""
    override = os.environ.get("AGENT_RECOVERY_WASM")
    source: Path | None = None
    if override:
        source = Path(override)
        if not source.is_file():
            raise SystemExit(f"AGENT_RECOVERY_WASM={override} is not a file; point it at a component")
    elif (REPO / "Cargo.toml").is_file() and (REPO / "guest").is_dir():
        if shutil.which("cargo"):
            _cargo_build()
            source = _cargo_output()
        elif _cargo_output().is_file():
            _log("cargo is not on PATH; using the component built earlier (it may be stale)")
            source = _cargo_output()
    if source is None:
        if PACKAGED.is_file():
            return PACKAGED
        raise SystemExit(
            "agent-recovery: no policy component to package. Install Rust "
            "(https://rustup.rs), then `rustup target add wasm32-wasip2`, and build from "
            "a checkout; or set AGENT_RECOVERY_WASM to a prebuilt component"
        )
    if not source.is_file():
        raise SystemExit(f"agent-recovery: cargo did not produce {source}; see its output above")
    PACKAGED.parent.mkdir(parents=True, exist_ok=True)
    if not PACKAGED.is_file() or PACKAGED.read_bytes() != source.read_bytes():
        shutil.copyfile(source, PACKAGED)
        _log(f"packaged {source} ({source.stat().st_size} bytes)")
    return PACKAGED


LUA_SOURCE = REPO / "host" / "src" / "store" / "redis"
LUA_PACKAGED = HERE / "src" / "agent_recovery" / "_redis"
SCHEMA_SOURCE = REPO / "host" / "src" / "store" / "schema.sql"
SCHEMA_PACKAGED = HERE / "src" / "agent_recovery" / "_sql" / "schema.sql"


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_bytes() != source.read_bytes():
        shutil.copyfile(source, target)


def ensure_scripts() -> None:
    """Copy the Redis Lua scripts and the SQLite schema into the package (from a checkout)."""
    if LUA_SOURCE.is_dir():
        for lua in sorted(LUA_SOURCE.glob("*.lua")):
            _copy(lua, LUA_PACKAGED / lua.name)
    elif not any(LUA_PACKAGED.glob("*.lua")):
        raise SystemExit(f"agent-recovery: no Redis scripts in {LUA_SOURCE} or {LUA_PACKAGED}; build from a checkout")
    if SCHEMA_SOURCE.is_file():
        _copy(SCHEMA_SOURCE, SCHEMA_PACKAGED)
    elif not SCHEMA_PACKAGED.is_file():
        raise SystemExit(f"agent-recovery: no SQLite schema at {SCHEMA_SOURCE} or {SCHEMA_PACKAGED}; build from a checkout")


def precompile(wasm: Path) -> None:
    """Write `_wasm/<sha256>.cwasm`, the component compiled for this machine."""
    for old in wasm.parent.glob("*.cwasm"):
        old.unlink()
    try:
        from wasmtime import Config, Engine
        from wasmtime.component import Component
    except ImportError:
        _log("wasmtime is not importable while building: no precompiled component (the first load compiles)")
        return
    data = wasm.read_bytes()
    config = Config()
    config.consume_fuel = True  # the configuration of agent_recovery._component.engine_and_linker
    artifact = Component(Engine(config), data).serialize()
    out = wasm.parent / f"{hashlib.sha256(data).hexdigest()}.cwasm"
    out.write_bytes(bytes(artifact))
    _log(f"precompiled {wasm.name} for this machine: {out.name} ({len(artifact)} bytes)")


class BuildPyWithComponent(build_py):
    """`build_py` that first bundles the component and precompiles it."""

    def run(self) -> None:
        precompile(ensure_component())
        ensure_scripts()
        super().run()


class SdistWithComponent(sdist):
    """`sdist` that bundles the component, so the sdist builds without Rust."""

    def run(self) -> None:
        ensure_component()
        ensure_scripts()
        super().run()


setup(cmdclass={"build_py": BuildPyWithComponent, "sdist": SdistWithComponent})
