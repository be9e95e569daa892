"""LangGraph threads resumed from a real checkpointer (LangGraph's `SqliteSaver`)
and compensated through the runtime, against the scripted payment tool.

Expected values: LangGraph's task ids (a task run again from the checkpoint
its superstep started from has the same id; each superstep has its own:
`langgraph.pregel._algo.prepare_single_task`), the runtime's documented
compensation order (reverse order of completion, docs/runtime.md) and the
server's counts: the charges it applied and the refunds it made, by charge id.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, List, TypedDict

import httpx
import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from agent_recovery import RecoveryError, VirtualClock
from agent_recovery.integrations.langgraph import GraphRecovery, recover_node

from .scripted import DECLINED, ScriptedServer

WORKER = Path(__file__).resolve().parent / "langgraph_worker.py"


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def log(server: ScriptedServer, route: str) -> List[Any]:
    return [e for e in server.stats()["log"] if e["route"] == route]


def worker(server: ScriptedServer, checkpoints: Path, mode: str, kind: str, *store: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WORKER), server.url, str(checkpoints), "thread-1", mode, kind, *store],
                          capture_output=True, text=True, timeout=120)


def saver(tmp_path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(str(tmp_path / "checkpoints.db"), check_same_thread=False))


@pytest.mark.parametrize("kind", ["recover_node", "graph"])
def test_a_node_killed_after_its_charge_resumes_from_the_checkpoint_with_the_same_key(
        server: ScriptedServer, tmp_path: Path, kind: str) -> None:
    server.script({})
    checkpoints = tmp_path / "checkpoints.db"
    killed = worker(server, checkpoints, "kill", kind)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    assert server.stats()["charges"] == 1  # applied; the node never returned

    resumed = worker(server, checkpoints, "resume", kind)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["charge"]["status"] == "succeeded"
    keys = [e["key"] for e in log(server, "charge")]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]  # the resumed node sent the same key
    assert server.stats()["charges"] == 1  # so the service answered the first charge


def test_a_node_that_raised_after_its_charge_resumes_in_the_same_process_with_the_same_key(
        server: ScriptedServer, tmp_path: Path) -> None:
    raised: List[bool] = []

    def pay(state: Looped, *, key: str) -> Looped:
        r = httpx.post(server.url + "/charge", json={"amount": state["amount"]}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        if not raised:
            raised.append(True)
            raise RuntimeError("lost after the charge")  # a permanent failure: the door does not retry it
        return {"charges": 1}

    graph = StateGraph(Looped).add_node("pay", recover_node(pay, call="tool", side_effect=True))
    app = graph.add_edge(START, "pay").add_edge("pay", END).compile(checkpointer=saver(tmp_path))
    server.script({})
    config: Any = {"configurable": {"thread_id": "raised"}}
    with pytest.raises(RecoveryError):
        app.invoke({"amount": 5}, config)
    assert app.invoke(None, config)["charges"] == 1
    keys = [e["key"] for e in log(server, "charge")]
    assert len(keys) == 2 and keys[0] == keys[1] and server.stats()["charges"] == 1


def test_with_a_store_that_outlives_the_process_the_resumed_node_finds_its_key_in_flight(
        server: ScriptedServer, tmp_path: Path) -> None:
    server.script({})
    checkpoints, store = tmp_path / "checkpoints.db", str(tmp_path / "store.db")
    assert worker(server, checkpoints, "kill", "recover_node", store).returncode == -signal.SIGKILL
    resumed = worker(server, checkpoints, "resume", "recover_node", store)
    # The killed call's in-flight mark is a lease (in_flight_ttl_ms): nothing is called again while it holds.
    assert resumed.returncode == 1 and "runtime.in_flight" in resumed.stderr
    assert len(log(server, "charge")) == 1 and server.stats()["charges"] == 1


class Looped(TypedDict, total=False):
    amount: int
    charges: int


def test_a_node_run_again_in_a_loop_gets_a_new_key_per_superstep(server: ScriptedServer, tmp_path: Path) -> None:
    def pay(state: Looped, *, key: str) -> Looped:
        r = httpx.post(server.url + "/charge", json={"amount": state["amount"]}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return {"charges": state.get("charges", 0) + 1}

    graph = StateGraph(Looped).add_node("pay", recover_node(pay, call="tool", side_effect=True))
    graph = graph.add_edge(START, "pay").add_conditional_edges("pay", lambda s: "pay" if s["charges"] < 2 else END)
    app = graph.compile(checkpointer=saver(tmp_path))
    server.script({})
    config: Any = {"configurable": {"thread_id": "loop"}}
    assert app.invoke({"amount": 5}, config)["charges"] == 2
    keys = [e["key"] for e in log(server, "charge")]
    assert len(set(keys)) == 2 and server.stats()["charges"] == 2
    # The same thread invoked again with new input: new supersteps, new keys.
    assert app.invoke({"amount": 5, "charges": 0}, config)["charges"] == 2
    keys = [e["key"] for e in log(server, "charge")]
    assert len(set(keys)) == 4 and server.stats()["charges"] == 4


class Trip(TypedDict, total=False):
    charge: Any
    deposit: Any
    shipped: Any
    error: Any


def trip(server: ScriptedServer, checkpointer: Any, recovery: GraphRecovery, asynchronous: bool = False) -> Any:
    def post(amount: int, key: str) -> Any:
        r = httpx.post(server.url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return r.json()

    def refund(charge_id: str, key: str) -> None:
        httpx.post(server.url + "/refund", json={"charge": charge_id}, headers={"Idempotency-Key": key}).raise_for_status()

    def charge(state: Trip, *, key: str) -> Trip:
        return {"charge": post(5, key)}

    def deposit(state: Trip, *, key: str) -> Trip:
        return {"deposit": post(7, key)}

    def ship(state: Trip, *, key: str) -> Trip:
        return {"shipped": post(1, key)}

    if asynchronous:
        charge, deposit, ship = (_async(f) for f in (charge, deposit, ship))
    g = StateGraph(Trip)
    g.add_node("charge", recovery.node(charge, call="tool", side_effect=True,
                                       compensate=lambda state, update, *, key: refund(update["charge"]["id"], key)))
    g.add_node("deposit", recovery.node(deposit, call="tool", side_effect=True,
                                        compensate=lambda state, update, *, key: refund(update["deposit"]["id"], key)))
    g.add_node("ship", recovery.node(ship, call="tool", side_effect=True))
    g.set_node_defaults(error_handler=recovery.error_handler("error"))
    g.add_edge(START, "charge").add_edge("charge", "deposit").add_edge("deposit", "ship").add_edge("ship", END)
    return g.compile(checkpointer=checkpointer)


def _async(fn: Any) -> Any:
    """`fn` as a coroutine function (the same name and key parameter), for `ainvoke`."""
    async def node(state: Trip, *, key: str) -> Trip:
        return await asyncio.to_thread(fn, state, key=key)  # type: ignore[no-any-return]

    node.__name__ = node.__qualname__ = fn.__name__
    return node


def charge_ids(server: ScriptedServer, state: Any) -> List[str]:
    return [state["charge"]["id"], state["deposit"]["id"]]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_later_node_failing_for_good_refunds_the_earlier_nodes_in_reverse_order(
        server: ScriptedServer, tmp_path: Path, asynchronous: bool) -> None:
    recovery = GraphRecovery(clock=VirtualClock(0))
    server.script({"charge": [{}, {}, DECLINED]})
    config: Any = {"configurable": {"thread_id": "trip-1"}}

    async def run_async() -> Any:  # LangGraph's async SQLite checkpointer
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as checkpointer:
            return await trip(server, checkpointer, recovery, asynchronous=True).ainvoke({}, config)

    if asynchronous:
        state = asyncio.run(run_async())
    else:
        state = trip(server, saver(tmp_path), recovery).invoke({}, config)
    assert state["error"]["error"]["code"] == "tool.payment.declined" and "shipped" not in state
    charged, deposited = charge_ids(server, state)
    assert server.stats()["refunds"] == [deposited, charged]  # reverse order, each once
    refund_keys = [e["key"] for e in log(server, "refund")]
    assert len(refund_keys) == 2 and len(set(refund_keys)) == 2
    assert len(log(server, "charge")) == 3 and server.stats()["charges"] == 2  # a decline is not retried


def test_a_transient_failure_exhausted_is_compensated_once_by_the_runtime(server: ScriptedServer, tmp_path: Path) -> None:
    # The breaker out of the way: the policy's attempts run out on the 503s.
    app = trip(server, saver(tmp_path), GraphRecovery(clock=VirtualClock(0), breaker=(100, 30_000)))
    server.script({"charge": [{}, {}] + [{"status": 503}] * 20})
    state = app.invoke({}, {"configurable": {"thread_id": "trip-2"}})
    assert state["error"]["error"]["code"] == "tool.http.503_unavailable"
    charged, deposited = charge_ids(server, state)
    # The policy decided `compensate`: the runtime refunded during the step; the handler had nothing left to do.
    assert server.stats()["refunds"] == [deposited, charged] and len(log(server, "refund")) == 2


def test_a_node_running_a_graph_of_the_same_run_is_refused_not_deadlocked(tmp_path: Path) -> None:
    from agent_recovery import PolicyError

    recovery = GraphRecovery(clock=VirtualClock(0))

    def inner(state: Looped) -> Looped:
        return {"charges": 1}

    inner_app = StateGraph(Looped).add_node("inner", recovery.node(inner)).add_edge(START, "inner").compile()

    def outer(state: Looped) -> Looped:
        return inner_app.invoke(state)  # type: ignore[no-any-return]  # same thread, same GraphRecovery

    app = StateGraph(Looped).add_node("outer", recovery.node(outer)).add_edge(START, "outer")
    with pytest.raises(RecoveryError) as raised:  # the outer node failed on the inner node's refusal
        app.compile(checkpointer=saver(tmp_path)).invoke({"amount": 5}, {"configurable": {"thread_id": "nested"}})
    assert isinstance(raised.value.cause, PolicyError) and "already running" in str(raised.value.cause)


def test_after_end_a_new_invocation_of_the_thread_compensates_only_its_own_nodes(
        server: ScriptedServer, tmp_path: Path) -> None:
    recovery = GraphRecovery(clock=VirtualClock(0))
    app = trip(server, saver(tmp_path), recovery)
    config: Any = {"configurable": {"thread_id": "trip-3"}}
    server.script({"charge": [{}, {}, {}, {}, {}, DECLINED]})
    first = app.invoke({}, config)
    assert "error" not in first and server.stats()["charges"] == 3
    recovery.end(config)
    second = app.invoke({}, config)
    assert second["error"]["error"]["code"] == "tool.payment.declined"
    assert server.stats()["refunds"] == [second["deposit"]["id"], second["charge"]["id"]]
    assert {second["deposit"]["id"], second["charge"]["id"]}.isdisjoint({first["deposit"]["id"], first["charge"]["id"]})
