"""Shared fixtures: every test runs against the real component through wasmtime."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_recovery import Policy, reference_path


def repo_root() -> Path:
    """The checkout these tests live in (python/tests/ -> repo)."""
    return Path(__file__).resolve().parents[2]


def vectors_dir() -> Path:
    """`tests/vectors/` of the checkout, or $AGENT_RECOVERY_VECTORS."""
    return Path(os.environ.get("AGENT_RECOVERY_VECTORS", repo_root() / "tests" / "vectors"))


def artifacts_manifest() -> Path:
    """`artifacts.json` written by tests/artifacts/build.rs: package name -> path of its .wasm.

    `$AGENT_RECOVERY_ARTIFACTS` overrides it; else it is
    `${CARGO_TARGET_DIR:-target}/wasm-policies/artifacts.json`.
    """
    given = os.environ.get("AGENT_RECOVERY_ARTIFACTS")
    if given:
        return Path(given)
    target = Path(os.environ.get("CARGO_TARGET_DIR", repo_root() / "target"))
    return target / "wasm-policies" / "artifacts.json"


def artifact(package: str) -> Path:
    """The .wasm tests/artifacts/build.rs built for `package`; fails the test when it is missing."""
    manifest = artifacts_manifest()
    build = (
        "run `cargo build --release -p agent-recovery -p agent-recovery-test-artifacts` "
        "(their build.rs build the guest components)"
    )
    if not manifest.is_file():
        pytest.fail(f"{manifest} is missing; {build}", pytrace=False)
    path = json.loads(manifest.read_text(encoding="utf-8")).get(package)
    if path is None or not Path(path).is_file():
        pytest.fail(f"{package} is not built ({path or 'not in ' + str(manifest)}); {build}", pytrace=False)
    return Path(path)


@pytest.fixture(scope="session")
def policy() -> Policy:
    """The packaged reference policy (compiled once per test session)."""
    return Policy.load()


@pytest.fixture(scope="session")
def reference_bytes() -> bytes:
    """The reference component's bytes."""
    return reference_path().read_bytes()
