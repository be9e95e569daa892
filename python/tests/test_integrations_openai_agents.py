"""The OpenAI Agents SDK adapter driving the real SDK against the scripted provider.

Expected values: the reference policy's decisions (`max_attempts` 3 for an LLM
call, delays at least the server's `Retry-After`), the SDK's retry source
(agents/run_internal/model_retry.py: the client's own retries stay on for a
request's first attempt; `RetryDecision.delay` is slept), the OpenAI client's
default of 2 retries, and the server's counts.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI, RateLimitError

from agent_recovery import Policy, RecoveryError, VirtualClock, recover
from agent_recovery.integrations.openai_agents import (
    RecoveringModel,
    failure_error_function,
    retry_settings,
    without_sdk_retries,
)

from .scripted import DECLINED, ScriptedServer, error_body, models

set_tracing_disabled(True)
#: Small backoff so the SDK's own (real) sleeps stay short; Retry-After still wins when longer.
FAST = {"llm": {"base_ms": 5, "cap_ms": 20}}
RATE_LIMITED = {"status": 429, "headers": {"retry-after-ms": "30"}, "body": error_body("rate_limit")}


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def run(agent: Agent, prompt: str = "pay 5") -> Any:
    return asyncio.run(Runner.run(agent, prompt))


def agent(server: ScriptedServer, *, sdk_retries: bool = False, settings: Any = None, tools: Any = ()) -> Agent:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test")
    if not sdk_retries:
        client = without_sdk_retries(client)
    return Agent(name="payer", model=OpenAIChatCompletionsModel("gpt-4o", client),
                 model_settings=ModelSettings(retry=settings) if settings else ModelSettings(), tools=list(tools))


def test_retry_after_decides_the_delay_and_the_run_succeeds(server: ScriptedServer) -> None:
    settings = retry_settings(config=FAST)
    server.script({"model:gpt-4o": [RATE_LIMITED]})
    assert run(agent(server, settings=settings)).final_output == "done"
    assert models(server.stats()) == {"gpt-4o": 2}
    [decision] = settings.policy.decisions
    assert decision["action"] == "retry" and decision["delay_ms"] >= 30  # Retry-After-Ms: 30


def test_a_persistent_429_reaches_the_provider_exactly_the_policys_attempts(server: ScriptedServer) -> None:
    max_attempts = Policy.load().decide({"source": "http", "status": 429, "call": "llm"}, {"attempt": 1})["max_attempts"]
    settings = retry_settings(config=FAST)
    server.script({"model:gpt-4o": [RATE_LIMITED] * 20})
    with pytest.raises(RateLimitError):
        run(agent(server, settings=settings))
    assert models(server.stats()) == {"gpt-4o": max_attempts}
    assert [d["action"] for d in settings.policy.decisions] == ["retry"] * (max_attempts - 1) + ["dead_letter"]


def test_with_the_clients_own_retries_on_the_provider_sees_more(server: ScriptedServer) -> None:
    settings = retry_settings(config=FAST)
    server.script({"model:gpt-4o": [RATE_LIMITED] * 20})
    with pytest.raises(RateLimitError):
        run(agent(server, sdk_retries=True, settings=settings))
    # The first attempt's 2 client retries, then the policy's further attempts.
    assert models(server.stats())["gpt-4o"] == 3 + len(settings.policy.decisions) - 1


def test_a_failed_tool_is_shown_to_the_model_as_the_envelope(server: ScriptedServer) -> None:
    def charge(amount: int) -> dict:
        """Charge the customer's card."""
        r = httpx.post(server.url + "/charge", json={"amount": amount})
        r.raise_for_status()
        return dict(r.json())

    tool = function_tool(charge, failure_error_function=failure_error_function())
    server.script({"charge": [DECLINED]}, tool_args={"amount": 5})
    result = run(agent(server, tools=[tool]))
    [output] = [i["output"] for i in result.to_input_list() if i.get("type") == "function_call_output"]
    rendered = json.loads(output)
    assert rendered["error"]["code"] == "tool.payment.declined" and rendered["error"]["retryable"] is False
    assert server.stats()["charges"] == 0


def test_a_recovered_tool_retries_a_lost_response_with_one_key(server: ScriptedServer) -> None:
    def charge(amount: int, *, key: str) -> dict:
        """Charge the customer's card."""
        r = httpx.post(server.url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return dict(r.json())

    tool = function_tool(recover(charge, call="tool", side_effect=True, errors="model", clock=VirtualClock(0)))
    assert set(tool.params_json_schema["properties"]) == {"amount"}
    server.script({"charge": [{"status": 503, "apply": True}]}, tool_args={"amount": 5})
    assert run(agent(server, tools=[tool])).final_output == "done"
    stats = server.stats()
    keys = [e["key"] for e in stats["log"] if e["route"] == "charge"]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0]
    assert stats["charges"] == 1


def test_a_recovering_model_falls_back_on_quota(server: ScriptedServer) -> None:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    model = RecoveringModel(OpenAIChatCompletionsModel("gpt-4o", client),
                            fallbacks=[OpenAIChatCompletionsModel("gpt-4o-mini", client)], clock=VirtualClock(0))
    server.script({"model:gpt-4o": [{"status": 429, "body": error_body("quota")}]})
    assert run(Agent(name="payer", model=model)).final_output == "done"
    assert models(server.stats()) == {"gpt-4o": 1, "gpt-4o-mini": 1}


def test_a_recovering_model_gives_up_after_the_policys_attempts(server: ScriptedServer) -> None:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
    clock = VirtualClock(0)
    model = RecoveringModel(OpenAIChatCompletionsModel("gpt-4o", client), clock=clock)
    server.script({"model:gpt-4o": [{**RATE_LIMITED, "headers": {"retry-after": "2"}}] * 10})
    with pytest.raises(RecoveryError) as raised:
        run(Agent(name="payer", model=model))
    assert raised.value.code == "llm.http.429_rate_limited"
    assert models(server.stats()) == {"gpt-4o": 3} and clock.now_ms() >= 4000  # 3 attempts, 2 waits of 2 s
