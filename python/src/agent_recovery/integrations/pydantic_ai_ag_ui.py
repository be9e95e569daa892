"""PydanticAI's AG-UI adapter, ending an exhausted run with our envelope.

```python
from agent_recovery.integrations.pydantic_ai_ag_ui import RecoveringAGUIAdapter

return await RecoveringAGUIAdapter.dispatch_request(request, agent=agent)
```

`RecoveringAGUIAdapter` is PydanticAI's `AGUIAdapter` (same constructor,
same class methods) whose event stream, when the run raises a
`RecoveryError` (a `RecoveringModel` gave up: attempts spent, no fallback
left, breakers open), ends with a `RUN_ERROR` event rendered from the
error's envelope with the `ag-ui-run-error` format: `code` is the envelope's
code, `message` its message (first line, secrets masked), and
`metadata.error` the envelope's members, so a frontend can tell a rate limit
(`retryable`, `retry_after_ms`) from a declined payment. Any other
exception ends the stream the way `AGUIAdapter` does (its `str`).

`run_error_event(error)` is the conversion on its own, for a stream built
some other way: the event for a `RecoveryError` (also when it is the cause
of the raised exception), None otherwise.
"""

from __future__ import annotations

import functools
from typing import Any, AsyncIterator, Optional

from ag_ui.core import BaseEvent, RunErrorEvent
from pydantic_ai.ui import UIEventStream
from pydantic_ai.ui.ag_ui import AGUIAdapter, AGUIEventStream

from ..retry import RecoveryError
from ..runtime import Runtime

__all__ = ["RecoveringAGUIAdapter", "RecoveringAGUIEventStream", "run_error_event"]


@functools.lru_cache(maxsize=1)
def _renderer() -> Runtime:
    return Runtime()


def _recovery_error(error: BaseException) -> Optional[RecoveryError]:
    seen = set()
    todo = [error]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, RecoveryError):
            return e
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
        todo.extend(getattr(e, "exceptions", ()))  # an exception group
    return None


def run_error_event(error: BaseException, *, runtime: Optional[Runtime] = None,
                    timestamp: Optional[int] = None) -> Optional[RunErrorEvent]:
    """The AG-UI `RUN_ERROR` event for `error`'s envelope, rendered
    `ag-ui-run-error` by `runtime` (the reference policy's by default); None
    when `error` is not (and was not caused by) a `RecoveryError`."""
    found = _recovery_error(error)
    if found is None:
        return None
    rendered = (runtime or _renderer()).render(found.envelope, format="ag-ui-run-error")
    return RunErrorEvent.model_validate({**rendered, "timestamp": timestamp})


class RecoveringAGUIEventStream(AGUIEventStream[Any, Any]):
    """`AGUIEventStream` whose `RUN_ERROR` for a `RecoveryError` carries the envelope."""

    async def on_error(self, error: Exception) -> AsyncIterator[BaseEvent]:
        async for event in super().on_error(error):
            if isinstance(event, RunErrorEvent):
                event = run_error_event(error, timestamp=event.timestamp) or event
            yield event


class RecoveringAGUIAdapter(AGUIAdapter[Any, Any]):
    """`AGUIAdapter` streaming through `RecoveringAGUIEventStream`."""

    def build_event_stream(self) -> UIEventStream[Any, BaseEvent, Any, Any]:
        return RecoveringAGUIEventStream(
            self.run_input,
            accept=self.accept,
            ag_ui_version=self.ag_ui_version,
            include_usage=self.include_usage,
            manage_system_prompt=self.manage_system_prompt,
            preserve_file_data=self.preserve_file_data,
        )
