"""Durability in Python (docs/durability.md): the journal, `end`, `recover`,
the dead-letter API, the `dead_letter_depth` event, replays.

Everything runs the real loop component through wasmtime against real stores
(a SQLite file where a restart matters). A worker that "dies" mid-call is
simulated in-process by an operation raising `Died` (a BaseException: the
runtime does not observe it, it unwinds like a killed process, leaving what
the store holds); test_durable_kill.py kills real processes. Expected keys are
computed here with hashlib from hand-written canonical JSON, not by the package.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from agent_recovery.deadletters import DeadLetterError
from agent_recovery.runtime import Call, Failed, Runtime, VirtualClock
from agent_recovery.store import MemoryStore, SqliteStore

T0 = 1_767_225_600_000
JOURNAL = "agent-recovery/journal/"
LEASE = "agent-recovery/recovering/"
DLQ = "agent-recovery/dead-letter"


class Died(BaseException):
    """The worker process died here (not an exception the runtime observes)."""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Tools:
    """Operations that log every call: (kind, step, key, attempt)."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, str, str, int]] = []

    def op(self, name: str, result: Any = "ok") -> Any:
        def f(call: Call) -> Any:
            self.calls.append(("op", call.step, call.key, call.attempt))
            return {"done": name} if result == "ok" else result

        return f

    def comp(self, name: str) -> Any:
        def f(call: Call) -> Any:
            self.calls.append(("comp", call.step, call.key, call.attempt))
            return None

        return f

    def dies(self, call: Call) -> Any:
        self.calls.append(("op", call.step, call.key, call.attempt))
        raise Died()

    def of(self, kind: str) -> List[str]:
        return [c[1] for c in self.calls if c[0] == kind]


def journal_ids(store: Any) -> List[str]:
    return [k[len(JOURNAL):] for k in store.keys(JOURNAL, 0)]


def trip(rt: Runtime, tools: Tools, run_id: str = "trip-1") -> Any:
    """charge and hold (compensable) complete, then the worker dies calling book."""
    run = rt.run(run_id)
    for sid, tool in (("charge", "pay.charge"), ("hold", "seat.hold")):
        report = run.step(id=sid, tool=tool, operation=tools.op(sid), args={"n": 1}, side_effect=True,
                          compensate=tools.comp(sid))
        assert report.outcome == "ok"
    with pytest.raises(Died):
        run.step(id="book", tool="flight.book", operation=tools.dies, args={"n": 1}, side_effect=True)
    return run


def trip_operations(tools: Tools) -> Dict[str, Any]:
    return {
        "pay.charge": {"operation": tools.op("charge"), "compensate": tools.comp("charge")},
        "seat.hold": {"operation": tools.op("hold"), "compensate": tools.comp("hold")},
        "flight.book": tools.op("book"),
    }


# -- the journal and end ---------------------------------------------------------------


def test_the_journal_is_on_disk_before_the_call_and_end_deletes_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    seen: List[Any] = []

    def op(call: Call) -> Any:
        # a second connection (another process would see the same) reads the journal now
        with SqliteStore(path) as other:
            got = other.get(JOURNAL + "r1", T0)
            seen.append(json.loads(got.value) if got is not None else None)
        return "done"

    rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7)
    run = rt.run("r1")
    assert run.step(id="a", tool="t", operation=op).outcome == "ok"
    entry = seen[0]
    assert entry is not None, "no journal entry while the operation ran"
    assert (entry["v"], entry["run_id"], entry["written_ms"]) == (1, "r1", T0)
    assert entry["state"]["phase"] == "calling"
    assert journal_ids(rt.store) == ["r1"], "a step that is not the last does not end the run"
    run.end()
    assert journal_ids(rt.store) == []
    run.end()  # ending an ended run does nothing
    assert run.step(id="b", tool="t", operation=op).outcome == "completed", "no step after the end"


def test_with_ends_the_run_and_an_exception_leaves_it_to_recover() -> None:
    tools = Tools()
    rt = Runtime(store=MemoryStore(), clock=VirtualClock(T0), seed=7)
    with rt.run("ok-run") as run:
        run.step(id="a", tool="t", operation=tools.op("a"), side_effect=True, compensate=tools.comp("a"))
    assert journal_ids(rt.store) == []
    with pytest.raises(ValueError):
        with rt.run("bad-run") as run:
            run.step(id="a", tool="t", operation=tools.op("a"), side_effect=True, compensate=tools.comp("a"))
            raise ValueError("the agent's own code failed")
    assert journal_ids(rt.store) == ["bad-run"]
    reports = rt.recover({"t": {"operation": tools.op("a"), "compensate": tools.comp("a")}}, older_than_ms=0)
    assert [(r.run_id, r.outcome) for r in reports] == [("bad-run", "interrupted")]
    assert tools.of("comp") == ["a"], "the unfinished run is rolled back; the ended one is not"


def test_async_with_ends_the_run() -> None:
    tools = Tools()
    rt = Runtime(store=MemoryStore(), clock=VirtualClock(T0), seed=7)

    async def main() -> None:
        async with rt.run("r") as run:
            await run.step_async(id="a", tool="t", operation=tools.op("a"))
        with pytest.raises(KeyError):
            async with rt.run("r2") as run:
                await run.step_async(id="a", tool="t", operation=tools.op("a"))
                raise KeyError("x")

    asyncio.run(main())
    assert journal_ids(rt.store) == ["r2"]


def test_retry_helpers_and_scenarios_end_their_runs() -> None:
    from agent_recovery import Policy, retry_sync
    from agent_recovery.scenario import run_scenario

    store = MemoryStore()
    assert retry_sync(lambda attempt, idempotency_key: "x", policy=Policy.load(), call="tool", run_id="r",
                      step_id="s", tool="t", args=None, sleep=lambda s: None, store=store) == "x"
    run_scenario({"run_id": "sc", "now_ms": T0, "steps": [{"id": "a", "tool": "t", "outcomes": ["ok"]}]}, store)
    assert journal_ids(store) == []


# -- recover ------------------------------------------------------------------------


def test_recover_resumes_the_step_with_its_key_and_compensates_in_reverse(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    tools = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools)
    first_book = [c for c in tools.calls if c[1] == "book"]
    # a new worker, a new connection, later
    rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0 + 5_000), seed=7)
    assert journal_ids(rt.store) == ["trip-1"]
    reports = rt.recover(trip_operations(tools), older_than_ms=0)
    book = [c for c in tools.calls if c[1] == "book"]
    key = sha256('["trip-1","book","flight.book",{"n":1}]')
    assert [(c[2], c[3]) for c in book] == [(key, 1), (key, 1)], "the same key and attempt number again"
    assert first_book == book[:1]
    assert tools.of("comp") == ["hold", "charge"], "reverse order"
    assert len(reports) == 1
    r = reports[0]
    assert (r.run_id, r.outcome, r.step, r.step_outcome, r.dead_letter_id) == (
        "trip-1", "interrupted", "book", "ok", "1")
    events = [json.loads(e) for e in r.events]
    assert events[0]["event"] == "recover" and events[0]["step"] == "book"
    record = json.loads(rt.store.read(DLQ, 0, 10)[0][1])
    assert (record["outcome"], record["step_outcome"], record["recovered"], record["run_id"]) == (
        "interrupted", "ok", True, "trip-1")
    assert record["input"]["tool"] == "flight.book" and record["v"] == 1
    assert [c["step"] for c in record["compensations"]] == ["hold", "charge"]
    assert journal_ids(rt.store) == [] and rt.store.keys(LEASE, T0 + 5_000) == []
    assert rt.recover(trip_operations(tools), older_than_ms=0) == [], "nothing left to recover"


def test_recover_async_takes_async_operations(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    tools = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools)
    seen: List[str] = []

    async def book(call: Call) -> Any:
        await asyncio.sleep(0)
        seen.append(call.key)
        return {"booked": True}

    rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0 + 1), seed=7)
    ops = trip_operations(tools)
    ops["flight.book"] = book
    reports = asyncio.run(rt.recover_async(ops, older_than_ms=0))
    assert [r.outcome for r in reports] == ["interrupted"]
    assert seen == [sha256('["trip-1","book","flight.book",{"n":1}]')]


def test_a_done_step_is_answered_from_the_cache_not_called_again(tmp_path: Path) -> None:
    """Killed after the call succeeded and the cache was written, before `end`."""
    path = tmp_path / "s.db"
    tools = Tools()
    rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7)
    run = rt.run("r")
    run.step(id="a", tool="t.a", operation=tools.op("a"), side_effect=True, compensate=tools.comp("a"))
    del run  # never ended
    rt2 = Runtime(store=SqliteStore(path), clock=VirtualClock(T0 + 1), seed=7)
    reports = rt2.recover({"t.a": {"operation": tools.op("a"), "compensate": tools.comp("a")}}, older_than_ms=0)
    assert tools.of("op") == ["a"], "the operation ran once"
    assert tools.of("comp") == ["a"]
    assert [json.loads(e)["event"] for e in reports[0].events][:2] == ["recover", "cached"]
    assert (reports[0].outcome, reports[0].step_outcome) == ("interrupted", "ok")


def test_a_tool_without_operation_is_dead_lettered_with_unknown_tool(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    tools = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools)
    rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0 + 1), seed=7)
    ops = trip_operations(tools)
    del ops["flight.book"]
    (report,) = rt.recover(ops, older_than_ms=0)
    assert tools.of("comp") == ["hold", "charge"], "rolled back"
    record = json.loads(rt.store.read(DLQ, 0, 10)[0][1])
    assert record["last_envelope"]["code"] == "runtime.recover.unknown_tool"
    assert record["last_envelope"]["class"] == "permanent"
    assert report.dead_letter_id == "1" and report.outcome == "interrupted" and report.step_outcome == "failed"


def test_a_tool_registered_without_its_compensation_fails_that_compensation(tmp_path: Path) -> None:
    """`seat.hold` has an operation but no compensation: its compensation call
    is answered `no_compensation` and fails with the loop's
    `agent_recovery.MissingCompensation` (docs/runtime.md, the `attempt`
    input; as the Rust and Node runtimes answer), not as an unknown tool."""
    path = tmp_path / "s.db"
    tools = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools)
    rt = Runtime(store=SqliteStore(path), clock=VirtualClock(T0 + 1), seed=7)
    ops = trip_operations(tools)
    ops["seat.hold"] = {"operation": tools.op("hold")}
    ops["flight.book"] = {"operation": lambda call: Failed({"source": "http", "status": 404})}
    (report,) = rt.recover(ops, older_than_ms=0)
    events = [json.loads(e) for e in report.events]
    hold = [e for e in events if e["event"] == "compensate" and e["step"] == "hold"]
    assert hold and hold[-1]["state"] == "failed", events
    assert tools.of("comp") == ["charge"], "the other compensation still ran"
    record = json.dumps(json.loads(rt.store.read(DLQ, 0, 10)[-1][1]))
    assert "agent_recovery.MissingCompensation" in record and "runtime.recover.unknown_tool" not in record, record


def test_young_entries_belong_to_their_live_worker(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    tools = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools)
    ops = trip_operations(tools)
    # default older_than_ms = in_flight_ttl_ms = 300 000: written_ms + 300 000 <= now
    clock = VirtualClock(T0 + 299_999)
    rt = Runtime(store=SqliteStore(path), clock=clock, seed=7)
    assert rt.recover(ops) == []
    assert journal_ids(rt.store) == ["trip-1"]
    clock.advance(1)
    assert [r.outcome for r in rt.recover(ops)] == ["interrupted"]
    # with in_flight_ttl_ms 1 000, an entry 1 000 ms old is taken
    tools2 = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools2, "trip-2")
    fast = Runtime(store=SqliteStore(path), clock=VirtualClock(T0 + 1_000), seed=7, in_flight_ttl_ms=1_000)
    assert [r.run_id for r in fast.recover(trip_operations(tools2))] == ["trip-2"]


def test_a_run_leased_by_another_worker_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    tools = Tools()
    trip(Runtime(store=SqliteStore(path), clock=VirtualClock(T0), seed=7), tools)
    store = SqliteStore(path)
    store.compare_and_set(LEASE + "trip-1", None, '{"since_ms":1}', 300_000, T0)
    rt = Runtime(store=store, clock=VirtualClock(T0 + 1), seed=7)
    assert rt.recover(trip_operations(tools), older_than_ms=0) == []
    assert journal_ids(store) == ["trip-1"] and store.keys(LEASE, T0 + 1) == [LEASE + "trip-1"]
    # the lease expires with in_flight_ttl_ms: then this worker takes the run
    later = Runtime(store=store, clock=VirtualClock(T0 + 300_000), seed=7)
    assert [r.outcome for r in later.recover(trip_operations(tools), older_than_ms=0)] == ["interrupted"]


def test_bad_operations_are_refused_before_anything_runs() -> None:
    from agent_recovery import PolicyError

    rt = Runtime(store=MemoryStore(), clock=VirtualClock(T0))
    for bad in ([], {"t": 3}, {"t": {"operation": None}}, {"t": {"operation": print, "undo": print}}):
        with pytest.raises(PolicyError):
            rt.recover(bad)


# -- the dead-letter queue -------------------------------------------------------------


def failing_runtime(store: Any, clock: VirtualClock, **options: Any) -> Runtime:
    """Every step of it is exhausted (5 transient failures) and dead-lettered."""
    return Runtime(store=store, clock=clock, seed=7, breaker=(50, 1_000), **options)


def dead_letter(rt: Runtime, run_id: str, tools: Tools, step: str = "s") -> Any:
    run = rt.run(run_id)
    report = run.step(id=step, tool="t", args={"run": run_id},
                      operation=tools.op(step, Failed({"source": "http", "status": 503})))
    assert report.outcome == "dead_lettered"
    return run


def test_list_show_purge_depth() -> None:
    store, clock, tools = MemoryStore(), VirtualClock(T0), Tools()
    rt = failing_runtime(store, clock)
    for i in range(4):
        dead_letter(rt, f"r{i}", tools)
    dlq = rt.dead_letters
    assert [i.id for i in dlq.list()] == ["1", "2", "3", "4"] and dlq.depth() == 4
    item = dlq.show("3")
    assert (item.status, item.record["run_id"], item.replays) == ("open", "r2", [])
    assert item.record == json.loads(store.read(DLQ, 2, 1)[0][1])
    purged = dlq.purge("2")
    assert purged.status == "purged" and purged.purged_ms == clock.now_ms()
    assert dlq.purge(2).status == "purged", "purging twice changes nothing"
    assert dlq.depth() == 3 and json.loads(store.get("agent-recovery/dead-letter/closed", T0).value) == {"count": 1}
    assert [i.id for i in dlq.list()] == ["1", "3", "4"]
    assert [i.id for i in dlq.list(status="all")] == ["1", "2", "3", "4"]
    assert [i.id for i in dlq.list(status="purged")] == ["2"]
    assert [i.id for i in dlq.list(after="1", limit=2)] == ["3", "4"]
    assert [i.id for i in dlq.list(limit=1)] == ["1"]
    assert dlq.show("2").to_dict()["status"] == "purged"
    with pytest.raises(DeadLetterError) as e:
        dlq.show("5")
    assert e.value.kind == "not_found"
    for bad in ("0", "x", "-1", "1.5", True, None, ""):
        with pytest.raises(DeadLetterError) as e:
            dlq.show(bad)
        assert e.value.kind == "invalid_argument"
    with pytest.raises(DeadLetterError):
        dlq.list(status="closed")


def test_a_record_carries_owner_runbook_and_input() -> None:
    rt = failing_runtime(MemoryStore(), VirtualClock(T0),
                         dead_letter={"owner": "payments-oncall", "runbook": "https://runbooks.example/dlq"})
    dead_letter(rt, "r", Tools())
    record = rt.dead_letters.show("1").record
    assert (record["owner"], record["runbook"], record["v"], record["replay_of"]) == (
        "payments-oncall", "https://runbooks.example/dlq", 1, None)
    assert record["input"]["id"] == "s" and record["input"]["tool"] == "t" and record["input"]["args"] == {"run": "r"}


def test_depth_event_when_the_threshold_is_crossed() -> None:
    events: List[Tuple[Dict[str, Any], str]] = []
    store, clock, tools = MemoryStore(), VirtualClock(T0), Tools()
    rt = failing_runtime(store, clock, dead_letter={"depth_threshold": 2},
                         on_event=lambda e, text: events.append((e, text)))
    runs = [dead_letter(rt, f"r{i}", tools) for i in range(3)]
    depth = [(e, t) for e, t in events if e["event"] == "dead_letter_depth"]
    assert len(depth) == 1, "emitted when the depth went from 1 to 2, not again at 3"
    event, text = depth[0]
    run_events = [json.loads(t) for t in runs[1].events]
    at = next(i for i, e in enumerate(run_events) if e["event"] == "dead_letter_depth")
    assert run_events[at - 1]["event"] == "dead_letter", "right after the dead_letter event"
    t_ms = run_events[at - 1]["t_ms"]
    assert text == (
        f'{{"t_ms":{t_ms},"event":"dead_letter_depth","step":"s","target":null,'
        '"depth":2,"threshold":2,"id":"2"}'
    )
    # below the threshold again (two purged: depth 1), then crossing again
    rt.dead_letters.purge("1")
    rt.dead_letters.purge("2")
    assert rt.dead_letters.depth() == 1
    dead_letter(rt, "r3", tools)
    depth = [e for e, _ in events if e["event"] == "dead_letter_depth"]
    assert [(e["depth"], e["id"]) for e in depth] == [(2, "2"), (2, "4")]


def test_no_depth_event_without_a_threshold() -> None:
    events: List[Any] = []
    rt = failing_runtime(MemoryStore(), VirtualClock(T0), on_event=events.append)
    for i in range(3):
        dead_letter(rt, f"r{i}", Tools())
    assert [e for e in events if e["event"] == "dead_letter_depth"] == []


def test_replay_runs_the_step_with_a_fresh_derived_key() -> None:
    store, clock, tools = MemoryStore(), VirtualClock(T0), Tools()
    rt = failing_runtime(store, clock)
    dead_letter(rt, "r0", tools)
    original = rt.dead_letters.show("1").record["key"]
    assert original == sha256('["r0","s","t",{"run":"r0"}]')
    seen: List[Call] = []

    def ok(call: Call) -> Any:
        seen.append(call)
        return {"fixed": True}

    done = rt.dead_letters.replay("1", {"t": ok})
    expected = sha256(f'["agent-recovery/replay","{original}",1]')
    assert done.to_dict() == {"id": "1", "n": 1, "key": expected, "run_id": "r0/replay/1", "outcome": "ok"}
    assert [c.key for c in seen] == [expected]
    item = rt.dead_letters.show("1")
    assert item.status == "replayed" and rt.dead_letters.depth() == 0
    (entry,) = item.replays
    assert (entry["n"], entry["key"], entry["run_id"], entry["outcome"]) == (1, expected, "r0/replay/1", "ok")
    assert entry["requested_ms"] <= entry["finished_ms"]
    assert journal_ids(store) == [] and store.keys(LEASE, clock.now_ms()) == []
    with pytest.raises(DeadLetterError) as e:
        rt.dead_letters.replay("1", {"t": ok})
    assert e.value.kind == "conflict", "a replayed item is closed"
    assert rt.dead_letters.purge("1").status == "purged", "a replayed item can still be purged"
    assert json.loads(store.get("agent-recovery/dead-letter/closed", T0).value) == {"count": 1}, "closed once"


def test_a_failed_replay_is_a_new_record_and_the_item_opens_again() -> None:
    store, clock, tools = MemoryStore(), VirtualClock(T0), Tools()
    rt = failing_runtime(store, clock)
    dead_letter(rt, "r0", tools)
    original = rt.dead_letters.show("1").record["key"]
    failing = tools.op("s", Failed({"source": "http", "status": 503}))
    first = rt.dead_letters.replay("1", {"t": failing})
    assert first.outcome == "dead_lettered" and first.n == 1
    again = rt.dead_letters.show("2").record
    assert again["replay_of"] == {"id": "1", "n": 1} and again["run_id"] == "r0/replay/1"
    assert again["key"] == sha256(f'["agent-recovery/replay","{original}",1]')
    assert rt.dead_letters.show("1").status == "open"
    assert rt.dead_letters.depth() == 2
    second = rt.dead_letters.replay("1", {"t": tools.op("s")})
    assert (second.n, second.outcome, second.run_id) == (2, "ok", "r0/replay/2")
    assert second.key == sha256(f'["agent-recovery/replay","{original}",2]')
    assert [r.get("outcome") for r in rt.dead_letters.show("1").replays] == ["dead_lettered", "ok"]


def test_request_replay_is_carried_out_by_recover() -> None:
    store, clock, tools = MemoryStore(), VirtualClock(T0), Tools()
    rt = failing_runtime(store, clock)
    dead_letter(rt, "r0", tools)
    asked = rt.dead_letters.request_replay("1")
    assert (asked.n, asked.run_id, asked.outcome) == (1, "r0/replay/1", None)
    item = rt.dead_letters.show("1")
    assert item.status == "replay_requested" and "outcome" not in item.replays[0]
    assert rt.dead_letters.request_replay("1") == asked, "one pending request at a time: the same one"
    assert len(rt.dead_letters.show("1").replays) == 1
    clock.advance(10)
    reports = rt.recover({"t": tools.op("s")}, older_than_ms=0)
    assert [(r.run_id, r.outcome) for r in reports] == [("r0/replay/1", "ok")]
    assert tools.calls[-1][2] == asked.key
    assert rt.dead_letters.show("1").status == "replayed"
    assert rt.recover({"t": tools.op("s")}) == []


def test_item_changes_are_compare_and_set(tmp_path: Path) -> None:
    """Two operators on two connections: a purge that loses the race on
    `closed` retries, so the count is 2, not 1 (a blind write would lose one)."""
    path = tmp_path / "s.db"
    clock, tools = VirtualClock(T0), Tools()
    rt = failing_runtime(SqliteStore(path), clock)
    dead_letter(rt, "r0", tools)
    dead_letter(rt, "r1", tools)
    other = Runtime(store=SqliteStore(path), clock=clock)

    class Racing(SqliteStore):
        raced = False

        def compare_and_set(self, key: str, expected: Any, value: str, ttl_ms: Any, now_ms: int) -> Any:
            if key.endswith("/closed") and not Racing.raced:
                Racing.raced = True
                other.dead_letters.purge("2")  # lands between our read and our write
            return super().compare_and_set(key, expected, value, ttl_ms, now_ms)

    mine = Runtime(store=Racing(path), clock=clock)
    mine.dead_letters.purge("1")
    assert Racing.raced
    assert json.loads(other.store.get("agent-recovery/dead-letter/closed", T0).value) == {"count": 2}
    assert [i.status for i in mine.dead_letters.list(status="all")] == ["purged", "purged"]
    assert mine.dead_letters.depth() == 0


# -- across languages: the Rust CLI on the same store file -------------------------------


def cli(*args: str) -> Any:
    """`agent-recovery ARGS` (the Rust CLI, a second implementation)."""
    import os
    import subprocess

    from .conftest import repo_root

    target = Path(os.environ.get("CARGO_TARGET_DIR", repo_root() / "target"))
    exe = target / "release" / "agent-recovery"
    assert exe.exists(), f"{exe} is missing; run `cargo build --release -p agent-recovery-cli`"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


TRIP_STEPS = [
    {"id": "charge", "tool": "pay.charge", "side_effect": True, "outcomes": ["ok", "ok"],
     "compensation": {"outcomes": ["ok"]}},
    {"id": "hold", "tool": "seat.hold", "side_effect": True, "outcomes": [{"source": "http", "status": 503}, "ok", "ok"],
     "compensation": {"outcomes": ["ok"]}},
    {"id": "book", "tool": "flight.book", "side_effect": True, "outcomes": ["ok"]},
]


def test_a_killed_run_and_its_recovery_give_rusts_bytes(tmp_path: Path) -> None:
    """The scenario members `kill_after_calls` and `recover` (docs/runtime.md,
    "Scenarios"): the same text from `run_scenario` and `agent-recovery
    simulate --json --store` on one file."""
    from agent_recovery.scenario import run_scenario

    killed = {"run_id": "k1", "seed": 7, "now_ms": T0, "kill_after_calls": 3, "steps": TRIP_STEPS}
    recover = {"run_id": "unused", "seed": 7, "now_ms": T0 + 60_000, "recover": True, "steps": TRIP_STEPS}
    store = MemoryStore()
    ours = [run_scenario(s, store).to_json() for s in (killed, recover)]
    first, second = (json.loads(o) for o in ours)
    assert first["outcome"] == "killed" and first["dead_letters"] == []
    assert second["outcome"] == "interrupted" and second["events"][0]["event"] == "recover"
    assert second["events"][0]["step"] == "hold", "killed at hold's second call (the third call)"
    assert [d["outcome"] for d in second["dead_letters"]] == ["interrupted"]
    assert journal_ids(store) == []
    db = tmp_path / "trip.db"
    for i, (scenario, text) in enumerate(zip((killed, recover), ours, strict=True)):
        path = tmp_path / f"s{i}.json"
        path.write_text(json.dumps(scenario), encoding="utf-8")
        proc = cli("simulate", str(path), "--json", "--store", str(db))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.rstrip("\n") == text, f"scenario {i}"


def test_a_record_written_by_rust_is_listed_and_replayed_by_python_and_shown_by_rust(tmp_path: Path) -> None:
    from agent_recovery.scenario import run_scenario

    scenario = {"run_id": "rs-1", "seed": 7, "now_ms": T0, "config": {"breaker": {"failure_threshold": 50, "open_ms": 1000}},
                "steps": [{"id": "sync", "tool": "erp.sync", "args": {"batch": 3},
                           "outcomes": [{"source": "http", "status": 503}] * 5}]}
    db = tmp_path / "shared.db"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    proc = cli("simulate", str(path), "--json", "--store", str(db))
    assert proc.returncode == 0, proc.stderr
    expected = run_scenario(scenario).dead_letters  # the same scenario in Python, its own store
    rt = Runtime(store=SqliteStore(db), clock=VirtualClock(T0 + 10_000), seed=7)
    (item,) = rt.dead_letters.list()
    assert item.id == "1" and item.status == "open"
    assert item.record_json == expected[0], "the record's bytes are the same whoever wrote them"
    seen: List[str] = []
    done = rt.dead_letters.replay("1", {"erp.sync": lambda call: seen.append(call.key) or {"synced": 3}})
    assert done.outcome == "ok" and seen == [sha256(f'["agent-recovery/replay","{item.record["key"]}",1]')]
    shown = cli("dlq", "show", "1", "--store", str(db), "--json")
    assert shown.returncode == 0, shown.stderr
    item_rs = json.loads(shown.stdout)
    assert item_rs["status"] == "replayed" and item_rs["replays"][0]["key"] == seen[0]
    depth = cli("dlq", "depth", "--store", str(db), "--json")
    assert json.loads(depth.stdout) == {"depth": 0}


def test_a_record_written_by_python_is_replayed_through_the_rust_cli_request(tmp_path: Path) -> None:
    """Python dead-letters; the CLI requests the replay (it prints the key);
    a Python worker's recover carries it out."""
    db = tmp_path / "shared.db"
    tools = Tools()
    rt = failing_runtime(SqliteStore(db), VirtualClock(T0))
    dead_letter(rt, "py-1", tools)
    listed = cli("dlq", "list", "--store", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    (line,) = [json.loads(x) for x in listed.stdout.splitlines()]
    assert (line["id"], line["status"], line["record"]["run_id"]) == ("1", "open", "py-1")
    asked = cli("dlq", "replay", "1", "--store", str(db), "--json")
    assert asked.returncode == 0, asked.stderr
    ticket = json.loads(asked.stdout)
    original = line["record"]["key"]
    assert ticket["key"] == sha256(f'["agent-recovery/replay","{original}",1]') and ticket["outcome"] is None
    assert rt.dead_letters.show("1").status == "replay_requested"
    reports = rt.recover({"t": tools.op("s")}, older_than_ms=0)
    assert [(r.run_id, r.outcome) for r in reports] == [("py-1/replay/1", "ok")]
    assert tools.calls[-1][2] == ticket["key"]


def test_a_fan_outs_record_is_not_replayable() -> None:
    from agent_recovery.scenario import run_scenario

    vector = json.loads((Path(__file__).resolve().parents[2] / "tests" / "loops" /
                         "fanout-insufficient-compensates.json").read_text(encoding="utf-8"))
    store = MemoryStore()
    run_scenario(vector["runs"][0]["scenario"], store)
    rt = Runtime(store=store, clock=VirtualClock(T0))
    (fanout,) = [i for i in rt.dead_letters.list() if i.record["tool"] == "fanout"]
    for attempt in (lambda: rt.dead_letters.request_replay(fanout.id),
                    lambda: rt.dead_letters.replay(fanout.id, {"fanout": lambda call: "x"})):
        with pytest.raises(DeadLetterError) as e:
            attempt()
        assert e.value.kind == "invalid_record"
    assert rt.dead_letters.show(fanout.id).status == "open"


def test_journal_off_writes_no_entry_and_bad_durability_options_are_refused() -> None:
    from agent_recovery import PolicyError

    tools = Tools()
    rt = Runtime(store=MemoryStore(), clock=VirtualClock(T0), journal=False)
    run = rt.run("r")
    run.step(id="a", tool="t", operation=tools.op("a"), side_effect=True, compensate=tools.comp("a"))
    assert journal_ids(rt.store) == [] and rt.recover({}, older_than_ms=0) == []
    for options in ({"journal": "yes"}, {"dead_letter": "ops"}, {"dead_letter": {"owner": 3}},
                    {"dead_letter": {"depth_threshold": 0}}, {"dead_letter": {"pager": "x"}}):
        with pytest.raises(PolicyError):
            Runtime(store=MemoryStore(), **options)
    with pytest.raises(PolicyError):
        rt.recover({}, older_than_ms=-1)


def test_replay_async_takes_async_operations() -> None:
    store, clock, tools = MemoryStore(), VirtualClock(T0), Tools()
    rt = failing_runtime(store, clock)
    dead_letter(rt, "r0", tools)
    seen: List[str] = []

    async def fixed(call: Call) -> Any:
        await asyncio.sleep(0)
        seen.append(call.key)
        return {"ok": 1}

    done = asyncio.run(rt.dead_letters.replay_async("1", {"t": {"operation": fixed}}))
    assert done.outcome == "ok" and seen == [done.key]
    assert rt.dead_letters.show("1").status == "replayed"


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 100, 257])
def test_depth_counts_every_record_of_the_stream(n: int) -> None:
    """`depth()` finds the stream's last sequence number by bisection: it must
    be the record count for any count (the expected value is `n`, appended here)."""
    store = MemoryStore()
    for i in range(n):
        store.append(DLQ, '{"run_id":"r%d"}' % i, T0)
    store.append("another/stream", "{}", T0)
    assert Runtime(store=store, clock=VirtualClock(T0)).dead_letters.depth() == n
