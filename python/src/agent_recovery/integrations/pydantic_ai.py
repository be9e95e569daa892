"""PydanticAI: model requests through the door, tool failures as data.

```python
from pydantic_ai import Agent
from agent_recovery import recover
from agent_recovery.integrations.pydantic_ai import RecoveringModel

model = RecoveringModel(primary, fallbacks=[backup])   # any PydanticAI models
agent = Agent(model, tools=[recover(charge, call="tool", side_effect=True, errors="model")])
```

`RecoveringModel` is a `WrapperModel`: each `request` is one call of a
`recover` door (`call="llm"`, the models' names as `target` and
`fallbacks`), so a 429's `Retry-After` is waited out, a quota error moves
to the next model, and a model whose breaker is open is skipped by the next
requests of the run (and of later runs) until its breaker lets a probe
through. Every attempt is sent with `ModelSettings(max_retries=0)`, so the
provider SDK does not retry underneath (PydanticAI forwards the setting to
the OpenAI, Anthropic and Groq clients). The other keyword options are
`recover`'s (`clock`, `store`, `policy`, `on_event`, ...).

A tool wrapped with `recover(..., errors="model")` returns the failure's
envelope rendered for the model (`{"error": {"code", "message",
"retryable", "hint"}}`) instead of raising, so the run goes on and the model
reads why the tool failed. The wrapped function's signature (what PydanticAI
describes to the model) leaves out `key`, `target` and `attempt`.

A streamed request (`request_stream`, what `Agent.run_stream` and the UI
adapters use) goes through the same door until the stream opens, that is
until the provider's first event has arrived: a 429, a quota refusal or an
open breaker before that is retried or falls back exactly like `request`.
Once the stream has opened, an error passes through unrecovered: part of
the answer has already reached the caller (and maybe a user's screen), and
the provider cannot resume a stream, so a retry would deliver the start of
the answer twice.

For an AG-UI frontend, `agent_recovery.integrations.pydantic_ai_ag_ui`
ends a run whose recovery is exhausted with a `RUN_ERROR` event carrying
the envelope.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, AsyncIterator, Dict, List, Sequence

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from ..door import recover
from ..store import MemoryStore
from ._chain import chain

__all__ = ["RecoveringModel"]


class _Request:
    """One model request, passed through the door (its repr is what the door
    records as the call's arguments)."""

    def __init__(self, messages: List[ModelMessage], settings: ModelSettings | None,
                 params: ModelRequestParameters, run_context: RunContext[Any] | None = None,
                 stack: AsyncExitStack | None = None) -> None:
        self.messages = messages
        self.settings = settings
        self.params = params
        self.run_context = run_context
        #: A streamed request: the opened stream is closed with it.
        self.stack = stack

    def __repr__(self) -> str:
        return f"<model request, {len(self.messages)} messages>"


class RecoveringModel(WrapperModel):
    """`model` (then `fallbacks`, in order) with every request run through a
    `recover` door. Options: `recover`'s, except `call`, `target` and
    `fallbacks`, which this model sets."""

    def __init__(self, model: Model | str, *, fallbacks: Sequence[Model | str] = (), **options: Any) -> None:
        super().__init__(model)
        chained = [self.wrapped, *(infer_model(f) for f in fallbacks)]
        options.setdefault("store", MemoryStore())  # one store: both doors see the same breakers
        self.models: Dict[str, Model]
        self.models, door = chain(
            "RecoveringModel", "model", ((f"{m.system}:{m.model_name}", m) for m in chained), options
        )
        self._door = recover(self._attempt, **door)
        self._stream_door = recover(self._open_stream, **door)

    async def _attempt(self, request: _Request, *, target: str) -> ModelResponse:
        settings: Dict[str, Any] = {**(request.settings or {}), "max_retries": 0}
        return await self.models[target].request(request.messages, settings, request.params)  # type: ignore[arg-type]

    async def _open_stream(self, request: _Request, *, target: str) -> StreamedResponse:
        """One attempt at opening a stream: it has opened once the model's
        `request_stream` has entered, after the provider's first event."""
        assert request.stack is not None
        settings: Dict[str, Any] = {**(request.settings or {}), "max_retries": 0}
        opening = self.models[target].request_stream(
            request.messages, settings, request.params, request.run_context  # type: ignore[arg-type]
        )
        stream: StreamedResponse = await request.stack.enter_async_context(opening)
        return stream

    async def request(
        self,
        messages: List[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response: ModelResponse = await self._door(_Request(messages, model_settings, model_request_parameters))
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: List[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        async with AsyncExitStack() as stack:
            request = _Request(messages, model_settings, model_request_parameters, run_context, stack)
            stream: StreamedResponse = await self._stream_door(request)
            yield stream
