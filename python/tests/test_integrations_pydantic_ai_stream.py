"""Streamed requests through the PydanticAI adapter, and the AG-UI run error.

The real PydanticAI (`Agent.run_stream`, `AGUIAdapter.run_stream`) against the
scripted provider, which answers a scripted error before it starts an SSE
stream. Expected values: the reference policy's decisions (a 429 with
Retry-After is retried after it, a quota refusal falls back, `max_attempts`
for an LLM call), the server's counts, and the AG-UI `RUN_ERROR` shape of
`ag-ui-protocol`'s `RunErrorEvent` (type, message, code, metadata) as
tests/vectors/render/ag_ui.json states it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, List

import httpx
import pytest
from ag_ui.core import EventType, RunAgentInput, RunErrorEvent, UserMessage
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.ag_ui import AGUIAdapter

from agent_recovery import Policy, RecoveryError, VirtualClock
from agent_recovery.integrations.pydantic_ai import RecoveringModel
from agent_recovery.integrations.pydantic_ai_ag_ui import RecoveringAGUIAdapter

from .scripted import ScriptedServer, error_body, models

RATE_LIMITED = {"status": 429, "headers": {"retry-after": "2"}, "body": error_body("rate_limit")}
QUOTA = {"status": 429, "body": error_body("quota")}


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def model(server: ScriptedServer, name: str) -> OpenAIChatModel:
    return OpenAIChatModel(name, provider=OpenAIProvider(base_url=server.url + "/v1", api_key="test"))


async def streamed(agent: Agent) -> tuple[str, str | None]:
    async with agent.run_stream("hi") as result:
        text = await result.get_output()
        return text, result.response.model_name


def test_a_429_before_the_stream_opens_is_retried_and_the_stream_completes(server: ScriptedServer) -> None:
    clock = VirtualClock(0)
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=clock))
    server.script({"model:gpt-4o": [RATE_LIMITED]})
    assert asyncio.run(streamed(agent)) == ("done", "gpt-4o")
    assert models(server.stats()) == {"gpt-4o": 2}  # one refused, one streamed; no SDK retry underneath
    assert clock.now_ms() >= 2000  # Retry-After: 2 (seconds), waited on the virtual clock


def test_a_quota_refusal_of_a_streamed_request_falls_back_to_the_next_model(server: ScriptedServer) -> None:
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), fallbacks=[model(server, "gpt-4o-mini")],
                                  clock=VirtualClock(0)))
    server.script({"model:gpt-4o": [QUOTA]})
    assert asyncio.run(streamed(agent)) == ("done", "gpt-4o-mini")
    assert models(server.stats()) == {"gpt-4o": 1, "gpt-4o-mini": 1}


def run_input() -> RunAgentInput:
    return RunAgentInput(thread_id="thread-1", run_id="run-1", state=None, tools=[], context=[],
                         forwarded_props=None,
                         messages=[UserMessage(id=str(uuid.uuid4()), role="user", content="hi")])


async def ag_ui_events(adapter_class: Any, agent: Agent) -> List[Any]:
    adapter = adapter_class(agent=agent, run_input=run_input())
    return [event async for event in adapter.run_stream()]


def test_an_exhausted_streamed_run_ends_the_ag_ui_stream_with_the_envelope(server: ScriptedServer) -> None:
    max_attempts = Policy.load().decide({"source": "http", "status": 429, "call": "llm"}, {"attempt": 1})["max_attempts"]
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=VirtualClock(0)))
    server.script({"model:gpt-4o": [RATE_LIMITED] * 10})
    events = asyncio.run(ag_ui_events(RecoveringAGUIAdapter, agent))
    assert models(server.stats()) == {"gpt-4o": max_attempts}
    errors = [e for e in events if e.type == EventType.RUN_ERROR]
    assert len(errors) == 1 and events[-1] is errors[0]
    [error] = errors
    # Validated by ag-ui-protocol's own model, as a frontend's SDK would parse it.
    event = RunErrorEvent.model_validate(error.model_dump(mode="json", by_alias=True))
    assert event.code == "llm.http.429_rate_limited"
    assert event.message == "Rate limit reached for requests"  # the provider's message, not a class name
    assert event.metadata is not None
    assert event.metadata["error"]["code"] == "llm.http.429_rate_limited"
    assert event.metadata["error"]["retryable"] is True


def test_without_the_hook_the_ag_ui_run_error_is_the_exceptions_text(server: ScriptedServer) -> None:
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=VirtualClock(0)))
    server.script({"model:gpt-4o": [RATE_LIMITED] * 10})
    events = asyncio.run(ag_ui_events(AGUIAdapter, agent))
    [error] = [e for e in events if e.type == EventType.RUN_ERROR]
    # PydanticAI's default (AGUIEventStream.on_error): the exception's str, no code, no metadata.
    assert error.code is None and error.metadata is None
    assert "after attempt 3: llm.http.429_rate_limited (attempts_exhausted)" in error.message


def test_an_error_after_the_stream_opened_passes_through_unretried(server: ScriptedServer) -> None:
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), fallbacks=[model(server, "gpt-4o-mini")],
                                  clock=VirtualClock(0)))
    # The first chunk arrives (the stream is open), then the provider reports an overload in the stream.
    server.script({"model:gpt-4o": [{"stream_error": error_body("overloaded")}]})
    # PydanticAI's own error for the in-stream failure, not the door's RecoveryError.
    with pytest.raises(ModelHTTPError, match="overloaded") as raised:
        asyncio.run(streamed(agent))
    assert not isinstance(raised.value, RecoveryError)
    assert models(server.stats()) == {"gpt-4o": 1}  # neither retried nor sent to the fallback


def test_an_ag_ui_endpoint_sends_the_envelope_as_its_run_error(server: ScriptedServer) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Route

    agent = Agent(RecoveringModel(model(server, "gpt-4o"), clock=VirtualClock(0)))

    async def run_agent(request: Any) -> Any:  # as docs/integrations/frameworks.md serves it
        return await RecoveringAGUIAdapter.dispatch_request(request, agent=agent)

    app = Starlette(routes=[Route("/", run_agent, methods=["POST"])])

    async def post() -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            response = await client.post("/", content=run_input().model_dump_json(by_alias=True),
                                         headers={"content-type": "application/json", "accept": "text/event-stream"})
            assert response.status_code == 200
            return response.text

    server.script({"model:gpt-4o": [QUOTA]})  # a quota refusal and no fallback: nothing left to try
    # docs/errors.md: an OpenAI insufficient_quota is llm.quota.exhausted, not retryable.
    lines = [line[len("data: "):] for line in asyncio.run(post()).splitlines() if line.startswith("data: ")]
    errors = [RunErrorEvent.model_validate_json(line) for line in lines if '"RUN_ERROR"' in line]
    assert len(errors) == 1 and '"RUN_ERROR"' in lines[-1]
    assert errors[0].code == "llm.quota.exhausted"
    assert errors[0].metadata is not None and errors[0].metadata["error"]["retryable"] is False


def test_a_breaker_opened_by_requests_is_honoured_by_streamed_requests(server: ScriptedServer) -> None:
    agent = Agent(RecoveringModel(model(server, "gpt-4o"), fallbacks=[model(server, "gpt-4o-mini")],
                                  clock=VirtualClock(0)))
    server.script({"model:gpt-4o": [{"status": 503}] * 3})
    with pytest.raises(RecoveryError):  # the reference: 3 attempts at a 503, then it gives up
        agent.run_sync("turn 1")
    # The three failures opened gpt-4o's breaker: the streamed turn starts at the fallback.
    assert asyncio.run(streamed(agent)) == ("done", "gpt-4o-mini")
    assert models(server.stats()) == {"gpt-4o": 3, "gpt-4o-mini": 1}
