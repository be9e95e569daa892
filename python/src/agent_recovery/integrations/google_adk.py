"""Google ADK: a plugin that turns tool and model errors into envelopes.

```python
from google.adk.apps import App
from agent_recovery.integrations.google_adk import RecoveryPlugin

app = App(name="payments", root_agent=agent, plugins=[RecoveryPlugin()])
```

- `on_tool_error_callback`: a tool that raises answers the model with the
  exception's envelope rendered `model-tool-result` (`{"error": {"code",
  "message", "retryable", "hint"}}`), so the run goes on and the model reads
  why the tool failed. A cancelled tool call is left to ADK.
- `on_model_error_callback`: a failed model call ends the agent's turn with an
  `LlmResponse` whose `error_code` is the envelope's code and whose
  `error_message` is the rendered envelope (JSON), instead of an exception;
  `custom_metadata["agent_recovery"]` holds the whole envelope.

The plugin does not retry: ADK's callbacks can replace a failed call's
result, not repeat it. To retry a tool with one idempotency key, wrap the
tool function with `recover(fn, call="tool", side_effect=True, errors="model")`
(ADK reads the wrapped function's signature, without `key`). To retry a
model and fall back, give the agent `RecoveringLlm(llm, fallbacks=[...])`:
each non-streaming request goes through a `recover` door (the models' names
as `target` and `fallbacks`); build its models without their own retries (a
LiteLLM model's `num_retries=0`). Streaming requests pass through to the
first model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, Dict, List, Optional

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from pydantic import PrivateAttr

from ..adapters import observation_from
from ..door import recover
from ..retry import RecoveryError
from ._chain import chain

__all__ = ["RecoveringLlm", "RecoveryPlugin"]


class RecoveryPlugin(BasePlugin):
    """Tool and model errors as envelopes (see the module)."""

    def __init__(self, policy: Any = None, *, name: str = "agent_recovery") -> None:
        super().__init__(name=name)
        if policy is None:
            from ..runtime import _default_policy

            policy = _default_policy()
        self.policy = policy

    def _envelope(self, error: BaseException, call: str) -> Dict[str, Any]:
        if isinstance(error, RecoveryError):  # a door gave up: its last decision's envelope
            return dict(error.envelope)
        envelope: Dict[str, Any] = self.policy.classify(observation_from(error, call=call))
        return envelope

    async def on_tool_error_callback(
        self, *, tool: Any, tool_args: Dict[str, Any], tool_context: Any, error: Exception
    ) -> Optional[Dict[str, Any]]:
        """The tool's result: the error's envelope rendered for the model."""
        if isinstance(error, asyncio.CancelledError):
            return None
        rendered: Dict[str, Any] = self.policy.render(self._envelope(error, "tool"), "model-tool-result")
        return rendered

    async def on_model_error_callback(
        self, *, callback_context: Any, llm_request: Any, error: Exception
    ) -> Optional[LlmResponse]:
        """The failed model call's response: the envelope, as an error response."""
        envelope = self._envelope(error, "llm")
        rendered = self.policy.render(envelope, "model-tool-result")
        return LlmResponse(error_code=envelope["code"], error_message=json.dumps(rendered),
                           custom_metadata={"agent_recovery": envelope})


class _Request:
    """One model request, passed through the door (its repr is what the door
    records as the call's arguments)."""

    def __init__(self, llm_request: LlmRequest) -> None:
        self.llm_request = llm_request

    def __repr__(self) -> str:
        return "<model request>"


class RecoveringLlm(BaseLlm):
    """`llm` (then `fallbacks`, in order) with each non-streaming request run
    through a `recover` door. Options: `recover`'s, except `call`, `target`
    and `fallbacks`, which this model sets."""

    _models: Dict[str, BaseLlm] = PrivateAttr(default_factory=dict)
    _door: Any = PrivateAttr(default=None)

    def __init__(self, llm: BaseLlm, *, fallbacks: Any = (), **options: Any) -> None:
        super().__init__(model=llm.model)
        models, door = chain("RecoveringLlm", "llm", ((m.model, m) for m in [llm, *fallbacks]), options)
        self._models.update(models)
        self._door = recover(self._attempt, **door)

    async def _attempt(self, request: _Request, *, target: str) -> List[LlmResponse]:
        llm = self._models[target]
        # ADK names the agent's model in the request, and a model sends the request's name first.
        llm_request = request.llm_request.model_copy(update={"model": llm.model})
        return [r async for r in llm.generate_content_async(llm_request, stream=False)]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """The first model's responses that the door accepts (streams pass through)."""
        if stream:
            async for response in next(iter(self._models.values())).generate_content_async(llm_request, stream=True):
                yield response
            return
        for response in await self._door(_Request(llm_request)):
            yield response
