"""A2A adapters: a failed task that says whether to retry, and cancelling a
run's sub-agent tasks with it.

```python
from agent_recovery.a2a import A2ATasks, RecoveringExecutor

handler = DefaultRequestHandler(RecoveringExecutor(MyAgent()), InMemoryTaskStore(), card)
tasks = A2ATasks(client)
async for event in tasks.send_message(request): ...
```

Needs `a2a-sdk` 1.x (`pip install 'agent-recovery[a2a]'`), imported only when
these are used. Nothing here decides: the policy classifies and decides, its
renders give the wire shapes.

- **Server.** `RecoveringExecutor(executor)` runs an `AgentExecutor`; when its
  `execute` raises, the task ends `TASK_STATE_FAILED` (or whatever state the
  policy's `a2a-task-status` render names) with a status message of a text
  part (message and hint) and a data part: `{"error": <envelope>,
  "retryable": .., "retryAfter": <seconds>}`, `retryable` and `retryAfter`
  as the policy's `jsonrpc-error` render puts them in `error.data`.
  `failed_status(exc, task_id=, context_id=)` builds that status update alone.
- **Client.** `A2ATasks(client).send_message(request)` streams the client's
  `send_message` and keeps the ids of the tasks it saw that are not in a
  terminal state. When the task consuming it is cancelled (cancelling the
  run), each of them gets `tasks/cancel`; a `TaskNotCancelableError` (or any
  other failure of the cancel) is recorded in `cancels`, not raised.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from .adapters import observation_from
from .mcp import _policy

__all__ = ["A2ATasks", "RecoveringExecutor", "failed_status"]

# The A2A task states no message can change (a2a-sdk's TERMINAL_TASK_STATES).
_TERMINAL = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")


def failed_status(
    exc: BaseException, *, task_id: str, context_id: str, policy: Any = None, call: str = "agent"
) -> Any:
    """A `TaskStatusUpdateEvent` ending the task with the policy's answer to `exc`."""
    from a2a.types import Message, Part, Role, TaskStatus, TaskStatusUpdateEvent
    from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped,unused-ignore]

    p = _policy(policy)
    observation = dict(observation_from(exc))
    observation.setdefault("call", call)
    decision = p.decide(observation, {"call": call, "attempt": 1})
    envelope = decision["envelope"]
    task = p.render(envelope, "a2a-task-status", {"task_id": task_id, "context_id": context_id})
    data = p.render(envelope, "jsonrpc-error")["error"]["data"]
    rendered = task["status"]["message"]
    parts: List[Any] = []
    for part in rendered["parts"]:
        if "text" in part:
            parts.append(Part(text=part["text"]))
        elif "data" in part:
            extra = {k: data[k] for k in ("retryable", "retryAfter") if k in data}
            value = Value()
            value.struct_value.update({**part["data"], **extra})
            parts.append(Part(data=value))
    state = str(task["status"]["state"]).upper().replace("-", "_")
    return TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        status=TaskStatus(
            state=f"TASK_STATE_{state}",  # protobuf takes an enum value by its name
            message=Message(
                message_id=rendered["messageId"], task_id=task_id, context_id=context_id,
                role=Role.ROLE_AGENT, parts=parts,
            ),
        ),
    )


def _executor_base() -> Any:
    from a2a.server.agent_execution import AgentExecutor

    return AgentExecutor


class RecoveringExecutor:
    """An `AgentExecutor` whose failures end the task with the policy's answer.

    Made with `RecoveringExecutor(executor, policy=None)`; it is an instance of
    a2a-sdk's `AgentExecutor` (the class is built on first use, so importing
    this module does not import a2a)."""

    _cls: Any = None

    def __new__(cls, executor: Any, *, policy: Any = None) -> Any:
        if cls._cls is None:
            base = _executor_base()

            class _Recovering(base):  # type: ignore[misc, valid-type]
                def __init__(self, inner: Any, policy: Any) -> None:
                    self.inner = inner
                    self.policy = _policy(policy)

                async def execute(self, context: Any, event_queue: Any) -> None:
                    try:
                        await self.inner.execute(context, event_queue)
                    except Exception as exc:  # noqa: BLE001 - every failure ends the task with an answer
                        await _fail(self.inner, self.policy, exc, context, event_queue)

                async def cancel(self, context: Any, event_queue: Any) -> None:
                    await self.inner.cancel(context, event_queue)

            _Recovering.__name__ = _Recovering.__qualname__ = "RecoveringExecutor"
            cls._cls = _Recovering
        return cls._cls(executor, policy)


async def _fail(inner: Any, policy: Any, exc: Exception, context: Any, event_queue: Any) -> None:
    from a2a.types import Task, TaskState, TaskStatus

    task_id, context_id = str(context.task_id), str(context.context_id)
    if context.current_task is None:  # the task does not exist yet: submit it first
        await event_queue.enqueue_event(
            Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        )
    await event_queue.enqueue_event(failed_status(exc, task_id=task_id, context_id=context_id, policy=policy))


def _ids_and_state(event: Any) -> Tuple[Optional[str], Optional[str]]:
    """The task id a `StreamResponse` (or a bare `Task` / update) is about, and its state name."""
    from a2a.types import StreamResponse, TaskState

    inner = getattr(event, event.WhichOneof("payload") or "task") if isinstance(event, StreamResponse) else event
    name = type(inner).__name__
    if name == "Task":
        return inner.id or None, TaskState.Name(inner.status.state)
    if name == "TaskStatusUpdateEvent":
        return inner.task_id or None, TaskState.Name(inner.status.state)
    return getattr(inner, "task_id", None) or None, None


class A2ATasks:
    """The A2A tasks a run has in flight through `client` (an a2a-sdk `Client`).

    `in_flight`: the ids of the tasks seen and not yet in a terminal state.
    `cancels`: one record per `tasks/cancel` sent, `{"task_id", "ok", "state"}`
    or `{"task_id", "ok": False, "envelope"}` with the policy's envelope of the
    failure (`agent.a2a.task_not_cancelable`, ...)."""

    def __init__(self, client: Any, *, policy: Any = None) -> None:
        self.client = client
        self.policy = policy
        self.in_flight: Dict[str, None] = {}
        self.cancels: List[Dict[str, Any]] = []

    async def send_message(self, request: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """`client.send_message(request, **kwargs)`, noting the tasks it reports;
        cancelling the consumer sends `tasks/cancel` to each task in flight."""
        try:
            async for event in self.client.send_message(request, **kwargs):
                self._note(event)
                yield event
        except asyncio.CancelledError:
            await asyncio.shield(self.cancel_all())
            raise

    def _note(self, event: Any) -> None:
        task_id, state = _ids_and_state(event)
        if not task_id:
            return
        if state in _TERMINAL:
            self.in_flight.pop(task_id, None)
        else:
            self.in_flight[task_id] = None

    async def cancel_all(self) -> List[Dict[str, Any]]:
        """Send `tasks/cancel` for every task in flight; returns this round's records."""
        from a2a.types import CancelTaskRequest, TaskState

        done: List[Dict[str, Any]] = []
        for task_id in list(self.in_flight):
            self.in_flight.pop(task_id, None)
            try:
                task = await self.client.cancel_task(CancelTaskRequest(id=task_id))
                record = {"task_id": task_id, "ok": True, "state": TaskState.Name(task.status.state)}
            except Exception as exc:  # noqa: BLE001 - a refused cancel is recorded, never raised
                observation = dict(observation_from(exc))
                observation.setdefault("call", "agent")
                record = {"task_id": task_id, "ok": False, "envelope": _policy(self.policy).classify(observation)}
            done.append(record)
        self.cancels.extend(done)
        return done
