"""agent_recovery.a2a against the real a2a-sdk: its Starlette JSON-RPC app under
uvicorn on 127.0.0.1 and its own client (`create_client`).

Expected values come from outside the code under test: HTTP `Retry-After: 3`
is three seconds (RFC 9110 section 10.2.3), `retryAfter` is in seconds and
`retryable` sits in `error.data` of the `jsonrpc-error` render
(docs/envelope-and-decision.md, "Rendering"), TaskNotCancelableError is
`agent.a2a.task_not_cancelable` (docs/frameworks-and-protocols.md, A2A table),
and the JSON-RPC method name of a cancel is the one the SDK's own client sends,
recorded from the wire.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterator, List

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import TaskNotCancelableError
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from agent_recovery import Policy, observation_from, recover
from agent_recovery.a2a import A2ATasks, RecoveringExecutor

from .asgi_server import Recorder, Served


class Unavailable(AgentExecutor):
    """Fails the way a sub-agent whose own backend answered 503 fails."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        request = httpx.Request("GET", "http://127.0.0.1/backend")
        response = httpx.Response(503, headers={"retry-after": "3"}, request=request)
        response.raise_for_status()

    async def cancel(self, context: Any, event_queue: Any) -> None:
        raise TaskNotCancelableError()


class Broken(AgentExecutor):
    async def execute(self, context: Any, event_queue: Any) -> None:
        raise ValueError("the ledger is inconsistent")

    async def cancel(self, context: Any, event_queue: Any) -> None:
        raise TaskNotCancelableError()


class Working(AgentExecutor):
    """Starts the task and works until cancelled; `cancelable` says how a cancel is answered."""

    def __init__(self, cancelable: bool) -> None:
        self.cancelable = cancelable
        self.cancelled: List[str] = []

    async def execute(self, context: Any, event_queue: Any) -> None:
        await event_queue.enqueue_event(
            Task(id=context.task_id, context_id=context.context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        )
        await TaskUpdater(event_queue, context.task_id, context.context_id).start_work()
        await asyncio.Event().wait()

    async def cancel(self, context: Any, event_queue: Any) -> None:
        self.cancelled.append(context.task_id)
        if not self.cancelable:
            raise TaskNotCancelableError()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card_for(url: str) -> AgentCard:
    """The card of an agent served at `url` (JSON-RPC at its root)."""
    return AgentCard(
        name="sub-agent", description="a test agent", version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url + "/")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="work", name="work", description="works until cancelled", tags=["test"])],
    )


def agent(executor: Any) -> Any:
    def make(url: str) -> Any:
        card = card_for(url)
        handler = DefaultRequestHandler(executor, InMemoryTaskStore(), card)
        return Recorder(Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")))

    return make


@pytest.fixture
def served() -> Iterator[List[Served]]:
    running: List[Served] = []
    yield running
    for s in running:
        s.stop()


def serve(running: List[Served], executor: Any) -> Served:
    s = Served(agent(executor))
    running.append(s)
    return s


def hello() -> SendMessageRequest:
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id="m-1", parts=[Part(text="hi")]))


async def last_event(url: str) -> StreamResponse:
    client = await create_client(url, ClientConfig(streaming=True))
    try:
        events = [e async for e in client.send_message(hello())]
    finally:
        await client.close()
    return events[-1]


def test_a_failed_task_says_whether_and_when_to_retry(served: List[Served], policy: Policy) -> None:
    s = serve(served, RecoveringExecutor(Unavailable(), policy=policy))
    event = asyncio.run(last_event(s.url))
    task_id = event.status_update.task_id or event.task.id
    status = event.status_update.status if event.HasField("status_update") else event.task.status
    assert status.state == TaskState.TASK_STATE_FAILED
    parts = MessageToDict(status.message)["parts"]
    data = next(p["data"] for p in parts if "data" in p)
    assert data["retryable"] is True
    assert data["retryAfter"] == 3
    assert data["error"]["retry_after_ms"] == 3000
    assert any("text" in p and p["text"] for p in parts)
    # The caller's side reads the same answer back from the SDK object it got.
    envelope = policy.classify(observation_from(event))
    assert (envelope["retryable"], envelope["retry_after_ms"]) == (True, 3000)
    assert task_id


def test_a_permanent_failure_is_not_retryable(served: List[Served], policy: Policy) -> None:
    s = serve(served, RecoveringExecutor(Broken(), policy=policy))
    event = asyncio.run(last_event(s.url))
    status = event.status_update.status if event.HasField("status_update") else event.task.status
    assert status.state == TaskState.TASK_STATE_FAILED
    data = next(p["data"] for p in MessageToDict(status.message)["parts"] if "data" in p)
    assert data["retryable"] is False
    assert "retryAfter" not in data
    assert data["error"]["code"] == "agent.exception.unhandled"


async def cancel_while_working(url: str, policy: Policy) -> A2ATasks:
    client = await create_client(url, ClientConfig(streaming=True))
    tasks = A2ATasks(client, policy=policy)
    working = asyncio.Event()

    async def run() -> None:
        async for event in tasks.send_message(hello()):
            if tasks.in_flight and MessageToDict(event).get("statusUpdate", {}).get("status", {}).get(
                "state"
            ) == "TASK_STATE_WORKING":
                working.set()

    # The consumer is a run of the door: cancelling its task cancels the run.
    consumer = asyncio.create_task(recover(run, call="agent", policy=policy)())
    started = asyncio.create_task(working.wait())
    await asyncio.wait([consumer, started], return_when=asyncio.FIRST_COMPLETED)
    assert working.is_set(), f"the stream ended before the task was working: {consumer}"
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    await client.close()
    return tasks


def test_cancelling_the_run_cancels_the_task_in_flight(served: List[Served], policy: Policy) -> None:
    executor = Working(cancelable=True)
    s = serve(served, executor)
    tasks = asyncio.run(cancel_while_working(s.url, policy))
    assert len(tasks.cancels) == 1
    record = tasks.cancels[0]
    assert record["ok"] is True and record["state"] == "TASK_STATE_CANCELED"
    assert executor.cancelled == [record["task_id"]]
    # On the wire: the SDK client's cancel request for that task.
    cancels = s.app.find("CancelTask")
    assert [c["params"]["id"] for c in cancels] == [record["task_id"]]
    assert tasks.in_flight == {}


def test_a_task_that_cannot_be_cancelled_is_recorded_not_raised(served: List[Served], policy: Policy) -> None:
    executor = Working(cancelable=False)
    s = serve(served, executor)
    tasks = asyncio.run(cancel_while_working(s.url, policy))
    assert len(tasks.cancels) == 1
    record = tasks.cancels[0]
    assert record["ok"] is False
    assert record["envelope"]["code"] == "agent.a2a.task_not_cancelable"
    assert executor.cancelled == [record["task_id"]]
