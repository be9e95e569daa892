"""The LlamaIndex workflows adapter driving a real workflow against the scripted payment tool.

Expected values: the workflows `RetryPolicy` protocol (`next(elapsed_time,
attempts, error)`: seconds, or None to stop), the reference policy's
decisions (a tool's `max_attempts`, delays at least `Retry-After`, a 402
decline not retried) and the server's counts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from workflows import Workflow, step
from workflows.events import StartEvent, StopEvent

from agent_recovery import Policy
from agent_recovery.integrations.llama_index import RecoveryRetryPolicy

from .scripted import DECLINED, ScriptedServer

#: Small backoff: the workflow runtime sleeps for real.
FAST = {"tool": {"base_ms": 5, "cap_ms": 20}}


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def run(server: ScriptedServer, policy: RecoveryRetryPolicy) -> Any:
    class Pay(Workflow):
        @step(retry_policy=policy)
        async def pay(self, ev: StartEvent) -> StopEvent:
            async with httpx.AsyncClient() as client:
                r = await client.post(server.url + "/charge", json={"amount": 5})
            r.raise_for_status()
            return StopEvent(result=r.json())

    async def go() -> Any:
        return await Pay(timeout=30).run()

    return asyncio.run(go())


def test_a_503_then_a_429_are_retried_with_retry_after(server: ScriptedServer) -> None:
    policy = RecoveryRetryPolicy(call="tool", config=FAST)
    server.script({"charge": [{"status": 503}, {"status": 429, "headers": {"retry-after-ms": "30"}}]})
    assert run(server, policy)["status"] == "succeeded"
    assert server.stats()["requests"]["charge"] == 3
    assert [d["action"] for d in policy.decisions] == ["retry", "retry"]
    assert policy.decisions[1]["delay_ms"] >= 30


def test_a_decline_stops_at_once(server: ScriptedServer) -> None:
    policy = RecoveryRetryPolicy(call="tool", config=FAST)
    server.script({"charge": [DECLINED]})
    with pytest.raises(httpx.HTTPStatusError):
        run(server, policy)
    assert server.stats()["requests"]["charge"] == 1
    [decision] = policy.decisions
    assert decision["action"] != "retry" and decision["envelope"]["code"] == "tool.payment.declined"


def test_a_persistent_503_reaches_the_service_the_policys_attempts(server: ScriptedServer) -> None:
    max_attempts = Policy.load().decide({"source": "http", "status": 503, "call": "tool"}, {"attempt": 1})["max_attempts"]
    policy = RecoveryRetryPolicy(call="tool", config=FAST)
    server.script({"charge": [{"status": 503}] * 20})
    with pytest.raises(httpx.HTTPStatusError):
        run(server, policy)
    assert server.stats()["requests"]["charge"] == max_attempts
