"""The runtime's reader of the loop's effects, on batches the real component
wrote: what it reads by template (the members in the order the component
writes them, a journal entry's state jumped over) is what the member-by-member
reader makes of the same batch, and the raw members it hands on (events,
store values, records) are the component's bytes.

The independent side is the batch itself: the same text with whitespace after
each effect's `{` (valid JSON, read member by member), and the journal entry's
state, which must be the state text `advance` returned with the batch.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from agent_recovery import Failed, Runtime, VirtualClock
from agent_recovery._loop import LoopComponent
from agent_recovery.runtime import _effects
from agent_recovery.store import MemoryStore

T0 = 1_767_225_600_000
#: The state's last member while its run ends after the step (docs/runtime.md).
TAIL = ',"end_after_step":true}'


def _batches(monkeypatch: Any) -> List[Tuple[str, str]]:
    """(state, effects) of every `advance` of a success, a failure after a
    side effect (retries, a compensation, a dead letter), a step that ends its
    run (as a door's does), and a fan-out."""
    seen: List[Tuple[str, str]] = []
    advance = LoopComponent.advance

    def record(self: LoopComponent, state: str, input: str) -> Tuple[str, str]:
        out = advance(self, state, input)
        seen.append(out)
        return out

    monkeypatch.setattr(LoopComponent, "advance", record)
    rt = Runtime(clock=VirtualClock(T0), store=MemoryStore(), seed=7, breaker=(10, 30_000))  # no breaker in the way
    run = rt.run("reader-1")
    run.step(id="ok", tool="search", args={"q": "é \u2028 \"x\""}, operation=lambda c: {"hits": [1, 2.5]})
    run.step(id="book", tool="hotel.book", side_effect=True, compensate=lambda c: None, operation=lambda c: 1)
    run.step(id="bad", tool="pay", call="tool", operation=lambda c: Failed({"source": "http", "status": 503}))
    other = rt.run("reader-2")
    other._sync(*other._step_of(None, {"id": "s", "tool": "t", "operation": lambda c: 1}, True))
    fan = rt.run("reader-3")
    fan.fanout("f", 1, [{"id": "a", "tool": "t1", "operation": lambda c: 1},
                        {"id": "b", "tool": "t2", "operation": lambda c: 2}])
    monkeypatch.undo()
    return seen


def test_the_template_reads_what_the_member_reader_reads(monkeypatch: Any) -> None:
    batches = _batches(monkeypatch)
    kinds = set()
    jumped = 0
    for state, text in batches:
        spaced = text.replace('{"effect":"', '{ "effect":"')  # no template matches: member by member
        assert spaced != text or text == "[]"
        by_template = _effects(text, state)
        by_member = _effects(spaced)
        assert len(by_template) == len(by_member)
        for (fx, raw), (fx2, raw2) in zip(by_template, by_member, strict=True):
            kinds.add(fx["effect"])
            assert raw == raw2
            journal = fx2["effect"] == "write" and fx2["key"].startswith(("agent-recovery/journal/", "agent-recovery/branch/"))
            if journal:  # every journal entry's state is jumped over: its value is only raw
                jumped += 1
                assert "value" not in fx and "value" in fx2
                assert raw["value"].startswith('{"run_id":')
                fx2 = {k: v for k, v in fx2.items() if k != "value"}
            assert fx == fx2
    assert {"emit", "write", "claim", "append", "read", "call", "finish", "decide"} <= kinds
    assert jumped >= 4


def test_a_journal_entry_holds_the_state_advance_returned(monkeypatch: Any) -> None:
    ended = 0
    for state, text in _batches(monkeypatch):
        for fx, raw in _effects(text, state):
            if fx["effect"] == "write" and fx["key"].startswith("agent-recovery/journal/"):
                entry = raw["value"]
                if state.endswith(TAIL):  # journaled without that member
                    ended += 1
                    assert ',"state":' + state[: -len(TAIL)] + '},"v":1,' in entry
                else:
                    assert f',"state":{state},"v":1,' in entry
    assert ended >= 1


def test_a_state_that_is_not_the_entrys_is_read_member_by_member(monkeypatch: Any) -> None:
    for _, text in _batches(monkeypatch):
        if '"agent-recovery/journal/' in text:
            wrong = _effects(text, '{"v":1,"other":true}')
            member = _effects(text.replace('{"effect":"', '{ "effect":"'))
            assert [raw for _, raw in wrong] == [raw for _, raw in member]
            assert [fx for fx, _ in wrong] == [fx for fx, _ in member]
