"""A LangGraph worker for the resume test (tests/test_integrations_langgraph_resume.py):

    python langgraph_worker.py URL CHECKPOINTS THREAD MODE KIND [STORE]

runs the graph START -> pay -> END compiled with LangGraph's `SqliteSaver` on
the file CHECKPOINTS, on thread THREAD. `pay` is a `recover_node` (KIND
`recover_node`) or a `GraphRecovery` node (KIND `graph`) that posts
the charge to URL + "/charge" with its idempotency key. MODE `kill`:
`invoke({"amount": 5})`, and `pay` sends itself SIGKILL once the charge's
response came back (applied, but the node never returned). MODE `resume`:
`invoke(None)` on the same thread, and prints the final state as JSON.
STORE: the runtime's store is `SqliteStore(STORE)` (default: a `MemoryStore`).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from typing import Any, TypedDict

import httpx
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agent_recovery.integrations.langgraph import GraphRecovery, recover_node
from agent_recovery.store import SqliteStore


class State(TypedDict, total=False):
    amount: int
    charge: Any


def main() -> None:
    url, checkpoints, thread, mode, kind = sys.argv[1:6]
    store = SqliteStore(sys.argv[6]) if len(sys.argv) > 6 else None

    # `config` is injected by LangGraph: a new object each run, left out of the key.
    def pay(state: State, config: RunnableConfig, *, key: str) -> State:
        r = httpx.post(url + "/charge", json={"amount": state["amount"]}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        return {"charge": r.json()}

    saver = SqliteSaver(sqlite3.connect(checkpoints, check_same_thread=False))
    node = recover_node if kind == "recover_node" else GraphRecovery(store=store).node
    options = {"store": store} if kind == "recover_node" else {}
    graph = StateGraph(State).add_node("pay", node(pay, call="tool", side_effect=True, **options))
    app = graph.add_edge(START, "pay").add_edge("pay", END).compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    state = app.invoke({"amount": 5} if mode == "kill" else None, config, durability="sync")
    print(json.dumps(state))


if __name__ == "__main__":
    main()
