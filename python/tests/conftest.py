"""Shared fixtures: every test runs against the real component through wasmtime."""

from __future__ import annotations

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


@pytest.fixture(scope="session")
def policy() -> Policy:
    """The packaged reference policy (compiled once per test session)."""
    return Policy.load()


@pytest.fixture(scope="session")
def reference_bytes() -> bytes:
    """The reference component's bytes."""
    return reference_path().read_bytes()
