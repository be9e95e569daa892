"""The LangGraph adapter driving the real LangGraph against the scripted payment tool.

Expected values: the reference policy's decisions (a 503 and a 429 are
retried, a 402 decline is not; Retry-After is waited out), LangGraph's
docs (`RetryPolicy.retry_on`, a node `error_handler` gets a `NodeError`;
no retry policy by default) and the server's counts.
"""

from __future__ import annotations

from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from agent_recovery import VirtualClock
from agent_recovery.integrations.langgraph import envelope_handler, recover_node, retry_on

from .scripted import DECLINED, ScriptedServer


class State(TypedDict, total=False):
    amount: int
    charge: Any
    error: Any


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def graph(node: Any, **options: Any) -> Any:
    g = StateGraph(State)
    g.add_node("pay", node, **options)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile()


def recovered_graph(server: ScriptedServer, clock: VirtualClock) -> Any:
    def pay(state: State, *, key: str) -> State:
        r = httpx.post(server.url + "/charge", json={"amount": state["amount"]}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return {"charge": r.json()}

    return graph(recover_node(pay, call="tool", side_effect=True, clock=clock), error_handler=envelope_handler())


def charges(server: ScriptedServer) -> tuple[list[Any], int]:
    stats = server.stats()
    return [e["key"] for e in stats["log"] if e["route"] == "charge"], stats["charges"]


def test_a_lost_response_is_retried_with_the_same_key_and_charged_once(server: ScriptedServer) -> None:
    app = recovered_graph(server, VirtualClock(0))
    server.script({"charge": [{"status": 503, "apply": True}]})
    assert app.invoke({"amount": 5})["charge"]["status"] == "succeeded"
    keys, applied = charges(server)
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0] and applied == 1


def test_retry_after_is_waited_out_on_the_door_clock(server: ScriptedServer) -> None:
    clock = VirtualClock(0)
    app = recovered_graph(server, clock)
    server.script({"charge": [{"status": 429, "headers": {"retry-after": "2"}}]})
    assert app.invoke({"amount": 5})["charge"]["status"] == "succeeded"
    assert clock.now_ms() >= 2000 and len(charges(server)[0]) == 2


def test_a_decline_is_written_into_the_state_by_the_error_handler(server: ScriptedServer) -> None:
    app = recovered_graph(server, VirtualClock(0))
    server.script({"charge": [DECLINED]})
    state = app.invoke({"amount": 5})
    assert state["error"]["error"]["code"] == "tool.payment.declined" and "charge" not in state
    keys, applied = charges(server)
    assert len(keys) == 1 and applied == 0  # a decline is not retried


def test_langgraphs_own_retry_without_a_key_charges_twice(server: ScriptedServer) -> None:
    def pay(state: State) -> State:
        r = httpx.post(server.url + "/charge", json={"amount": state["amount"]})
        r.raise_for_status()
        return {"charge": r.json()}

    app = graph(pay, retry_policy=RetryPolicy(retry_on=retry_on(), initial_interval=0.001, jitter=False))
    server.script({"charge": [{"status": 503, "apply": True}]})
    assert app.invoke({"amount": 5})["charge"]["status"] == "succeeded"
    assert charges(server) == ([None, None], 2)  # the lost response, then a second charge


def test_retry_on_asks_the_policy(server: ScriptedServer) -> None:
    predicate = retry_on()

    def status_error(status: int) -> httpx.HTTPStatusError:
        request = httpx.Request("POST", server.url + "/charge")
        return httpx.HTTPStatusError("x", request=request, response=httpx.Response(status, request=request))

    assert predicate(status_error(503)) is True and predicate(status_error(429)) is True
    assert predicate(status_error(400)) is False


def test_a_model_node_under_a_persistent_429_reaches_the_provider_the_policys_attempts(server: ScriptedServer) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    from agent_recovery import Policy, RecoveryError

    from .scripted import error_body, models

    max_attempts = Policy.load().decide({"source": "http", "status": 429, "call": "llm"}, {"attempt": 1})["max_attempts"]

    def ask(state: dict, *, target: str) -> dict:
        llm = ChatOpenAI(model=target, base_url=server.url + "/v1", api_key="test", max_retries=0)  # type: ignore[arg-type]
        return {"answer": llm.invoke([HumanMessage("hi")]).content}

    class Asked(TypedDict, total=False):
        answer: str

    clock = VirtualClock(0)
    app = StateGraph(Asked).add_node("ask", recover_node(ask, call="llm", target="gpt-4o", clock=clock))
    app = app.add_edge(START, "ask").add_edge("ask", END).compile()
    server.script({"model:gpt-4o": [{"status": 429, "headers": {"retry-after": "2"},
                                     "body": error_body("rate_limit")}] * 10})
    with pytest.raises(RecoveryError) as raised:
        app.invoke({})
    assert raised.value.code == "llm.http.429_rate_limited"
    assert models(server.stats()) == {"gpt-4o": max_attempts} and clock.now_ms() >= 2000 * (max_attempts - 1)
