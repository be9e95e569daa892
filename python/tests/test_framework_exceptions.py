"""`observation_from` on what agent frameworks raise, made by the real packages.

Each framework (PydanticAI, the OpenAI Agents SDK, LangChain, LiteLLM, the
MCP SDK, asyncio task groups) drives a real request against a local server
(`replay.Replay`, 127.0.0.1) and raises its own exception; the adapter's
`exception` observation must carry the status, headers and body exactly as the
server sent them, the framework's own retry verdict, and the observations of
the cause and of a group's members. Expected values are what the server sent.

The bodies are the providers' documented errors:
- OpenAI 429 `insufficient_quota`, https://platform.openai.com/docs/guides/error-codes
  ("You exceeded your current quota"); 503 "The engine is currently overloaded".
- Anthropic 529 `overloaded_error`, https://docs.anthropic.com/en/api/errors.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, Callable, Dict, Iterator, List

import pytest

from agent_recovery import Policy
from agent_recovery.adapters import observation_from

from .replay import Replay, reply

QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                   "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}
QUOTA_TEXT = json.dumps(QUOTA)
QUOTA_HEADERS = {"retry-after": "2", "x-request-id": "req_quota"}
OVERLOADED_503 = {"error": {"message": "The engine is currently overloaded, please try again later",
                            "type": "server_error", "param": None, "code": None}}
OVERLOADED_529 = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.fixture(scope="module")
def server() -> Iterator[Replay]:
    with Replay() as r:
        yield r


def verdict(policy: Policy, obs: Dict[str, Any]) -> Any:
    """(code, class, retryable) of the policy's envelope for `obs`."""
    env = policy.classify(obs)
    return env["code"], env["class"], env["retryable"]


def wait_ms(policy: Policy, obs: Dict[str, Any]) -> Any:
    """(action, delay_ms) of the decision at attempt 1."""
    decision = policy.decide(obs, {"attempt": 1, "seed": 7})
    return decision["action"], decision.get("delay_ms")


# The verdicts the providers' docs imply: "insufficient_quota: You exceeded your
# current quota ... buy more credits" is not retried (class policy); a rate limit
# and a 503 / 529 overload are retried, after the server's Retry-After.
QUOTA_VERDICT = ("llm.quota.exhausted", "policy", False)


def raised(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except BaseException as e:  # the framework's own exception, whatever it is
        return e
    raise AssertionError("the call did not fail")


def pair_header(obs: Dict[str, Any], name: str) -> Any:
    """A header of an `http` observation (a list of [name, value] pairs)."""
    return next((v for k, v in obs["headers"] if k.lower() == name), None)


def assert_sent(obs: Dict[str, Any], status: int, headers: Dict[str, str], body: Any) -> None:
    """`obs` (an `exception` observation) carries the response as the server sent it."""
    assert obs["status"] == status
    for k, v in headers.items():
        assert obs["headers"][k] == v
    assert all(k == k.lower() and isinstance(v, str) for k, v in obs["headers"].items())
    assert obs["body"] == body


def assert_http_cause(obs: Dict[str, Any], status: int, headers: Dict[str, str], text: str) -> None:
    """`obs` is the provider SDK's status error, read by its adapter as the raw response."""
    assert obs["source"] == "http" and obs["status"] == status
    for k, v in headers.items():
        assert pair_header(obs, k) == v
    assert obs["body"] == text


def async_openai(url: str) -> Any:
    import openai

    return openai.AsyncOpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)


# -- PydanticAI ---------------------------------------------------------------------------
# pydantic_ai/exceptions.py: ModelHTTPError(status_code, model_name, body, headers=...);
# "The provider SDK's own exception, if any, is available as `__cause__`"; the OpenAI
# model passes the SDK's `body` (openai keeps the body's `error` member), so the
# body as sent is read from the cause's response.


def pydantic_agent(url: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=async_openai(url)))
    return Agent(model)


def test_pydantic_ai_model_http_error_and_its_cause(server: Replay, policy: Policy) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    server.set(reply(429, QUOTA_TEXT, QUOTA_HEADERS))
    exc = raised(lambda: pydantic_agent(server.url).run_sync("hi"))
    assert isinstance(exc, ModelHTTPError)
    obs = observation_from(exc, call="llm")
    assert obs["source"] == "exception" and obs["call"] == "llm"
    assert obs["type"] == f"{type(exc).__module__}.{type(exc).__qualname__}"
    assert obs["type"].startswith("pydantic_ai.exceptions.")
    # the body as the server sent it (PydanticAI's `body` is the SDK's parse of it)
    assert exc.body == QUOTA["error"]
    assert_sent(obs, 429, QUOTA_HEADERS, QUOTA)
    assert "insufficient_quota" in obs["message"]
    assert_http_cause(obs["cause"], 429, QUOTA_HEADERS, QUOTA_TEXT)
    assert obs["cause"]["provider"] == "openai"
    assert verdict(policy, obs) == QUOTA_VERDICT

    rate_limit = {"error": {"message": "Rate limit reached for gpt-4o", "type": "requests", "param": None,
                            "code": "rate_limit_exceeded"}}
    server.set(reply(429, rate_limit, {"retry-after": "2"}))
    obs = observation_from(raised(lambda: pydantic_agent(server.url).run_sync("hi")), call="llm")
    assert_sent(obs, 429, {"retry-after": "2"}, rate_limit)
    assert verdict(policy, obs)[1:] == ("transient", True)
    assert wait_ms(policy, obs) == ("retry", 2000)


def test_pydantic_ai_fallback_group_reads_every_member(server: Replay, policy: Policy) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.fallback import FallbackModel
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    server.set(reply(503, OVERLOADED_503))
    server.push(reply(503, OVERLOADED_503), reply(429, QUOTA_TEXT, QUOTA_HEADERS))
    models = [OpenAIChatModel(name, provider=OpenAIProvider(openai_client=async_openai(server.url)))
              for name in ("gpt-4o", "gpt-4o-mini")]
    exc = raised(lambda: Agent(FallbackModel(*models)).run_sync("hi"))
    assert isinstance(exc, BaseExceptionGroup)
    obs = observation_from(exc)
    assert obs["source"] == "exception" and obs["type"].startswith("pydantic_ai.exceptions.")
    first, second = obs["exceptions"]
    assert_sent(first, 503, {}, OVERLOADED_503)
    assert_http_cause(first["cause"], 503, {}, json.dumps(OVERLOADED_503))
    assert_sent(second, 429, QUOTA_HEADERS, QUOTA)
    assert_http_cause(second["cause"], 429, QUOTA_HEADERS, QUOTA_TEXT)
    # decided by its first recognised member: the 503
    assert verdict(policy, obs)[1:] == ("transient", True)


# -- OpenAI Agents SDK ------------------------------------------------------------------------
# agents/exceptions.py: AgentsException and its subclasses carry no HTTP response; the
# model's SDK error reaches the caller unwrapped (Runner re-raises it).


def agents_agent(url: str, **kw: Any) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, set_tracing_disabled

    set_tracing_disabled(True)  # no trace export (it would call the OpenAI platform)
    return Agent(name="assistant", model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=async_openai(url)), **kw)


def test_openai_agents_model_error_is_the_sdk_status_error(server: Replay) -> None:
    from agents import Runner

    server.set(reply(503, OVERLOADED_503, {"retry-after": "1"}))
    exc = raised(lambda: Runner.run_sync(agents_agent(server.url), "hi"))
    assert type(exc).__module__.startswith("openai")
    obs = observation_from(exc)
    assert_http_cause(obs, 503, {"retry-after": "1"}, json.dumps(OVERLOADED_503))


def test_openai_agents_own_exception(server: Replay, policy: Policy) -> None:
    from agents import Runner
    from agents.exceptions import ModelBehaviorError

    completion = {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "no_such_tool", "arguments": "{}"}}]}}],
    }
    server.set(reply(200, completion))
    exc = raised(lambda: Runner.run_sync(agents_agent(server.url), "hi"))
    assert isinstance(exc, ModelBehaviorError)
    obs = observation_from(exc)
    assert obs["source"] == "exception"
    assert obs["type"] == "agents.exceptions.ModelBehaviorError"
    assert "no_such_tool" in obs["message"]
    assert not {"status", "headers", "body", "cause"} & set(obs)
    # the model called a tool that does not exist: for the model to fix
    assert verdict(policy, obs)[1:] == ("semantic", False)


# -- LangChain --------------------------------------------------------------------------------
# langchain_openai/chat_models/base.py: OpenAIRateLimitError(openai.RateLimitError,
# langchain_core.exceptions.ModelRateLimitError) raised from the SDK's error;
# langchain_core/exceptions.py: ModelError.is_retryable (True for rate limits and 5xx).


def chat_openai(url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="gpt-4o", base_url=url + "/v1", api_key="sk-test", max_retries=0)  # type: ignore[arg-type]


def test_langchain_openai_error_keeps_response_verdict_and_cause(server: Replay, policy: Policy) -> None:
    from langchain_core.exceptions import ModelAPIError, ModelRateLimitError

    server.set(reply(429, QUOTA_TEXT, QUOTA_HEADERS))
    exc = raised(lambda: chat_openai(server.url).invoke("hi"))
    assert isinstance(exc, ModelRateLimitError)
    obs = observation_from(exc)
    assert obs["source"] == "exception" and obs["type"].startswith("langchain_openai.")
    assert_sent(obs, 429, QUOTA_HEADERS, QUOTA)
    assert obs["retryable"] is ModelRateLimitError.is_retryable
    assert_http_cause(obs["cause"], 429, QUOTA_HEADERS, QUOTA_TEXT)
    assert verdict(policy, obs) == QUOTA_VERDICT  # LangChain's verdict says retry; the quota says no

    server.set(reply(503, "<html><body>upstream unavailable</body></html>", {"content-type": "text/html"}))
    exc = raised(lambda: chat_openai(server.url).invoke("hi"))
    assert isinstance(exc, ModelAPIError)
    obs = observation_from(exc)
    assert_sent(obs, 503, {"content-type": "text/html"}, "<html><body>upstream unavailable</body></html>")
    assert obs["retryable"] is True
    assert verdict(policy, obs)[1:] == ("transient", True)


def test_langchain_fallbacks_raise_the_first_error_with_its_context(server: Replay) -> None:
    server.set(reply(503, OVERLOADED_503))
    llm = chat_openai(server.url).with_fallbacks([chat_openai(server.url)])
    exc = raised(lambda: llm.invoke("hi"))
    obs = observation_from(exc)
    assert_sent(obs, 503, {}, OVERLOADED_503)
    assert_http_cause(obs["cause"], 503, {}, json.dumps(OVERLOADED_503))


# -- LiteLLM ----------------------------------------------------------------------------------
# litellm/exceptions.py: RateLimitError(openai.RateLimitError) with status_code,
# llm_provider, response; runs offline with LITELLM_LOCAL_MODEL_COST_MAP=True.


def test_litellm_rate_limit_keeps_response_and_provider(server: Replay, policy: Policy) -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # the bundled cost map: no download
    import litellm

    server.set(reply(429, QUOTA_TEXT, QUOTA_HEADERS))
    exc = raised(lambda: litellm.completion(
        model="openai/gpt-4o", api_base=server.url + "/v1", api_key="sk-test",
        messages=[{"role": "user", "content": "hi"}], num_retries=0, max_retries=0))
    assert isinstance(exc, litellm.RateLimitError)
    obs = observation_from(exc)
    assert obs["type"] == "litellm.exceptions.RateLimitError"
    assert_sent(obs, 429, QUOTA_HEADERS, QUOTA)
    assert obs["provider"] == "openai"
    assert verdict(policy, obs) == QUOTA_VERDICT


# -- exception groups (asyncio.TaskGroup) -----------------------------------------------------


def test_task_group_members_are_read_by_their_own_adapters(server: Replay, policy: Policy) -> None:
    import anthropic

    server.set(reply(529, OVERLOADED_529, {"retry-after": "3"}))
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=server.url, max_retries=0)

    async def main() -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(2):
                tg.create_task(client.messages.create(
                    model="claude-sonnet-5-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]))

    exc = raised(lambda: asyncio.run(main()))
    assert isinstance(exc, ExceptionGroup)
    obs = observation_from(exc)
    assert obs["type"] == "builtins.ExceptionGroup"
    assert len(obs["exceptions"]) == len(exc.exceptions) >= 1
    for member in obs["exceptions"]:
        assert_http_cause(member, 529, {"retry-after": "3"}, json.dumps(OVERLOADED_529))
        assert member["provider"] == "anthropic"
    assert verdict(policy, obs)[1:] == ("transient", True)
    assert wait_ms(policy, obs) == ("retry", 3000)


def test_mcp_error_in_a_task_group(policy: Policy) -> None:
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    mcp_server = MCPServer("test-server")

    async def main() -> None:
        async with Client(mcp_server) as client:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(client.read_resource("file:///missing"))

    exc = raised(lambda: asyncio.run(main()))
    assert isinstance(exc, BaseExceptionGroup)
    leaves: List[Any] = []
    stack: List[Any] = [(exc, observation_from(exc))]
    while stack:  # the SDK's own task groups may nest the error one level deeper
        e, o = stack.pop()
        if isinstance(e, BaseExceptionGroup):
            stack.extend(zip(e.exceptions, o["exceptions"], strict=True))
        else:
            leaves.append((e, o))
    [(error, obs)] = leaves
    assert type(error).__name__ in ("MCPError", "McpError")
    assert obs["source"] == "mcp"
    assert obs["message"]["error"]["code"] == error.error.code == -32602
    # invalid params are for the caller (the model) to fix, whatever group holds them
    assert verdict(policy, observation_from(exc))[1:] == ("semantic", False)
