"""The PydanticAI adapter driving the real PydanticAI against the scripted provider.

Expected values: the reference policy's decisions (`max_attempts` 3 for an LLM
call, a quota refusal falls back, a 402 decline is not retried), PydanticAI's
`ModelSettings.max_retries` docs (0: one attempt per request; the OpenAI
client PydanticAI builds retries 2 times by default) and the server's counts.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agent_recovery import Policy, RecoveryError, VirtualClock, recover
from agent_recovery.integrations.pydantic_ai import RecoveringModel

from .scripted import DECLINED, ScriptedServer, error_body, models

RATE_LIMITED = {"status": 429, "headers": {"retry-after": "2"}, "body": error_body("rate_limit")}
QUOTA = {"status": 429, "body": error_body("quota")}


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def model(server: ScriptedServer, name: str) -> OpenAIChatModel:
    return OpenAIChatModel(name, provider=OpenAIProvider(base_url=server.url + "/v1", api_key="test"))


def charge_tool(server: ScriptedServer, clock: VirtualClock) -> Any:
    def charge(amount: int, *, key: str) -> dict:
        """Charge the customer's card."""
        r = httpx.post(server.url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return dict(r.json())

    return recover(charge, call="tool", side_effect=True, errors="model", clock=clock)


def test_retry_after_is_waited_out_on_the_door_clock(server: ScriptedServer) -> None:
    clock = VirtualClock(0)
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=clock))
    server.script({"model:gpt-4o": [RATE_LIMITED]})
    assert agent.run_sync("hi").output == "done"
    assert models(server.stats()) == {"gpt-4o": 2}
    assert clock.now_ms() >= 2000  # Retry-After: 2 (seconds), waited on the virtual clock


def test_a_persistent_429_reaches_the_provider_exactly_the_policys_attempts(server: ScriptedServer) -> None:
    max_attempts = Policy.load().decide({"source": "http", "status": 429, "call": "llm"}, {"attempt": 1})["max_attempts"]
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=VirtualClock(0)))
    server.script({"model:gpt-4o": [RATE_LIMITED] * 10})
    with pytest.raises(RecoveryError) as raised:
        agent.run_sync("hi")
    assert raised.value.code == "llm.http.429_rate_limited"
    assert models(server.stats()) == {"gpt-4o": max_attempts}


def test_without_the_adapter_the_sdk_retries_underneath(server: ScriptedServer) -> None:
    agent = Agent(model(server, "gpt-4o"))
    server.script({"model:gpt-4o": [{**RATE_LIMITED, "headers": {"retry-after-ms": "1"}}] * 10})
    with pytest.raises(Exception, match="429"):
        agent.run_sync("hi")
    assert models(server.stats()) == {"gpt-4o": 3}  # the OpenAI client's 2 retries


def test_quota_falls_back_to_the_next_model(server: ScriptedServer) -> None:
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), fallbacks=[model(server, "gpt-4o-mini")],
                                  clock=VirtualClock(0)))
    server.script({"model:gpt-4o": [QUOTA]})
    result = agent.run_sync("hi")
    assert result.output == "done" and result.response.model_name == "gpt-4o-mini"
    assert models(server.stats()) == {"gpt-4o": 1, "gpt-4o-mini": 1}


def test_a_dead_model_is_skipped_while_its_breaker_is_open(server: ScriptedServer) -> None:
    clock = VirtualClock(0)
    recovering = RecoveringModel(model(server, "gpt-4o"), fallbacks=[model(server, "gpt-4o-mini")], clock=clock)
    agent = Agent(recovering)
    server.script({"model:gpt-4o": [{"status": 503}] * 3})
    with pytest.raises(RecoveryError):  # the reference: 3 attempts at a 503, then it gives up
        agent.run_sync("turn 1")
    assert agent.run_sync("turn 2").output == "done"
    assert agent.run_sync("turn 3").output == "done"
    # Three consecutive transient failures opened gpt-4o's breaker: later runs start at the fallback.
    assert models(server.stats()) == {"gpt-4o": 3, "gpt-4o-mini": 2}


def tool_returns(result: Any) -> list[Any]:
    return [p.content for m in result.all_messages() for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]


def test_a_declined_charge_is_returned_to_the_model_as_data(server: ScriptedServer) -> None:
    clock = VirtualClock(0)
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=clock), tools=[charge_tool(server, clock)])
    server.script({"charge": [DECLINED]}, tool_args={"amount": 5})
    result = agent.run_sync("pay 5")
    assert result.output == "done"
    [returned] = tool_returns(result)
    assert returned["error"]["code"] == "tool.payment.declined" and returned["error"]["retryable"] is False
    stats = server.stats()
    assert stats["requests"]["charge"] == 1 and stats["charges"] == 0


def test_a_lost_response_is_retried_with_the_same_key_and_charged_once(server: ScriptedServer) -> None:
    clock = VirtualClock(0)
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=clock), tools=[charge_tool(server, clock)])
    server.script({"charge": [{"status": 503, "apply": True}]}, tool_args={"amount": 5})
    result = agent.run_sync("pay 5")
    [returned] = tool_returns(result)
    assert returned["status"] == "succeeded"
    stats = server.stats()
    keys = [e["key"] for e in stats["log"] if e["route"] == "charge"]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0]
    assert stats["charges"] == 1


def test_the_tool_schema_leaves_out_the_doors_parameters(server: ScriptedServer) -> None:
    agent = Agent(model(server, "gpt-4o"), tools=[charge_tool(server, VirtualClock(0))])
    server.script({})
    asyncio.run(agent.run("hi"))
    [tool] = agent._function_toolset.tools.values()
    assert set(tool.tool_def.parameters_json_schema["properties"]) == {"amount"}
