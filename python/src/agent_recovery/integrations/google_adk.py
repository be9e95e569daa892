"""Google ADK: a plugin that turns tool and model errors into envelopes.

```python
from google.adk.runners import InMemoryRunner
from agent_recovery.integrations.google_adk import RecoveryPlugin

runner = InMemoryRunner(agent=agent, app_name="app", plugins=[RecoveryPlugin()])
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
tool function with `recover(fn, call="tool", side_effect=True)` (ADK reads
the wrapped function's signature, without `key`). Model retries stay with the
model's client (a LiteLLM model's `num_retries`, a Gemini model's
`retry_options`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, Optional

from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin

from ..adapters import observation_from

__all__ = ["RecoveryPlugin"]


class RecoveryPlugin(BasePlugin):
    """Tool and model errors as envelopes (see the module)."""

    def __init__(self, policy: Any = None, *, name: str = "agent_recovery") -> None:
        super().__init__(name=name)
        if policy is None:
            from ..runtime import _default_policy

            policy = _default_policy()
        self.policy = policy

    def _envelope(self, error: BaseException, call: str) -> Dict[str, Any]:
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
