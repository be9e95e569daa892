"""The fleet retry quota under contention, through the real runtime: every
compare-and-set on the bucket loses to another writer, and the loop gives up
after the number of swaps the docs state (docs/runtime.md, Retry quota): a
take given up refuses the retry, a refund given up is dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, List, Optional

from agent_recovery.runtime import Failed, Runtime, VirtualClock
from agent_recovery.store import MemoryStore

REPO = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600_000
QUOTA = "agent-recovery/quota/default"


class Contended(MemoryStore):
    """A real MemoryStore with a second writer: just before every
    compare-and-set of the quota bucket, the other writer sets it to 7
    tokens, so the loop's swap conflicts."""

    def __init__(self) -> None:
        super().__init__()
        self.quota_swaps = 0

    def compare_and_set(self, key: str, version: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int) -> Any:
        if key == QUOTA:
            self.quota_swaps += 1
            other = super().get(key, now_ms)
            super().compare_and_set(key, other.version if other else None, '{"tokens":7}', None, now_ms)
        return super().compare_and_set(key, version, value, ttl_ms, now_ms)


def documented_rounds() -> int:
    found = {
        int(m.group(1))
        for page in sorted((REPO / "docs").rglob("*.md"))
        for m in re.finditer(r"a\s+retry\s+quota\s+update\s+gives\s+up\s+after\s+(\d+)\s+swaps", page.read_text(encoding="utf-8"))
    }
    assert len(found) == 1, f"the docs must state the quota's swap bound once, found {found}"
    return found.pop()


def test_a_take_gives_up_after_the_documented_swaps_and_refuses_the_retry() -> None:
    store = Contended()
    rt = Runtime(store=store, clock=VirtualClock(T0), seed=7, retry_quota={"capacity": 500})
    calls: List[int] = []

    def op(_: Any) -> Any:
        calls.append(1)
        return Failed({"source": "http", "status": 503})

    r = rt.run("r1").step(id="s", tool="erp.sync", call="tool", operation=op)
    assert (r.outcome, r.envelope["code"]) == ("dead_lettered", "runtime.budget.retry_quota_exhausted")
    assert len(calls) == 1, "no retry without its tokens"
    assert store.quota_swaps == documented_rounds()
    # Nothing was taken: the bucket holds what the other writer wrote.
    got = store.get(QUOTA, T0)
    assert got is not None and json.loads(got.value) == {"tokens": 7}


def test_a_refund_given_up_is_dropped_and_the_step_still_succeeds() -> None:
    store = Contended()
    # A bucket that is not full (a full one takes no refund).
    MemoryStore.compare_and_set(store, QUOTA, None, '{"tokens":3}', None, T0)
    rt = Runtime(store=store, clock=VirtualClock(T0), seed=7, retry_quota={"capacity": 500})
    r = rt.run("r2").step(id="s", tool="erp.sync", call="tool", operation=lambda _: "done")
    assert (r.outcome, r.result) == ("ok", "done")
    assert store.quota_swaps == documented_rounds()
    got = store.get(QUOTA, T0)
    assert got is not None and json.loads(got.value) == {"tokens": 7}


class Recording(MemoryStore):
    """A real MemoryStore that records what is swapped into the bucket."""

    def __init__(self) -> None:
        super().__init__()
        self.swapped: List[str] = []

    def compare_and_set(self, key: str, version: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int) -> Any:
        if key == QUOTA:
            self.swapped.append(value)
        return super().compare_and_set(key, version, value, ttl_ms, now_ms)


def test_an_uncontended_take_and_refund_swap_once_each() -> None:
    store = Recording()
    outcomes: List[Any] = [Failed({"source": "http", "status": 503}), "done"]
    rt = Runtime(store=store, clock=VirtualClock(T0), seed=7, retry_quota={"capacity": 500})
    r = rt.run("r3").step(id="s", tool="erp.sync", call="tool", operation=lambda _: outcomes.pop(0))
    assert r.outcome == "ok"
    # The retry took 5 from the full bucket, the success gave them back.
    assert store.swapped == ['{"tokens":495}', '{"tokens":500}']
