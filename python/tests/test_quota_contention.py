"""The fleet retry quota under contention: every compare-and-set loses to
another writer, and the bounded add gives up after the same number of rounds
as the Rust and Node runtimes (docs, the `take` effect: 16)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import pytest

from agent_recovery import _quota
from agent_recovery.store import MemoryStore, StoreError

REPO = Path(__file__).resolve().parents[2]


class Contended:
    """A real MemoryStore with a second writer: after every read of the key,
    the other writer changes it, so the reader's compare-and-set conflicts."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.cas_calls = 0

    def get(self, key: str, now_ms: int) -> Optional[Any]:
        cur = self.inner.get(key, now_ms)
        other = self.inner.get(key, now_ms)
        self.inner.compare_and_set(key, other.version if other else None, '{"tokens":7}', None, now_ms)
        return cur

    def compare_and_set(self, key: str, version: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int) -> Any:
        self.cas_calls += 1
        return self.inner.compare_and_set(key, version, value, ttl_ms, now_ms)


def documented_rounds() -> int:
    found = {
        int(m.group(1))
        for page in sorted((REPO / "docs").rglob("*.md"))
        for m in re.finditer(r"on a conflict it reads again, up to (\d+) times", page.read_text(encoding="utf-8"))
    }
    assert len(found) == 1, f"the docs must state the take effect's conflict bound once, found {found}"
    return found.pop()


def test_take_gives_up_after_the_documented_rounds() -> None:
    store = Contended()
    with pytest.raises(StoreError) as e:
        _quota.take(store, "agent-recovery/quota/default", 5, 500, 1_767_225_600_000)
    assert e.value.kind == "unavailable"
    assert store.cas_calls == documented_rounds()
    assert "16 compare-and-set conflicts in a row" in str(e.value)


def test_refund_gives_up_after_the_documented_rounds() -> None:
    store = Contended()
    with pytest.raises(StoreError):
        _quota.refund(store, "agent-recovery/quota/default", 1, 500, 1_767_225_600_000)
    assert store.cas_calls == documented_rounds()


def test_uncontended_take_writes_once() -> None:
    store = MemoryStore()
    assert _quota.take(store, "q", 5, 500, 0) == (True, 495)
    assert _quota.take(store, "q", 500, 500, 0) == (False, 495)
