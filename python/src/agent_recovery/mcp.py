"""MCP adapters: a client session whose tool calls recover, and the server side
of a tool's failure (an `isError` result with the envelope, the `## Errors`
block for its description).

```python
from agent_recovery.mcp import RecoveringSession

tools = RecoveringSession(session, reconnect=open_session)
result = await tools.call_tool("search", {"q": "wasm"})
```

Needs the `mcp` package (`pip install 'agent-recovery[mcp]'`); this module
imports it only when a session is made. Nothing here decides: each tool call is
a run of the small door (`recover`), whose runtime observes what `call_tool`
raised or returned (`observation_from`: an `isError` result, an `MCPError`, a
transport failure) and asks the policy.

- **Reconnect.** When a call fails and the session no longer answers a ping
  (the server forgot the session, or its transport is closed), the session is
  gone: `reconnect()` (an async function you pass, returning a new initialized
  `ClientSession`) is awaited once per call, and the new session serves this
  and later calls. When the failed call got the same answer as the ping (the
  server refused the session, so the call never ran), it is sent again on the
  new session at once; otherwise its failure goes to the policy, whose retry
  uses the new session.
- **Cancellation.** Cancelling the task that awaits `call_tool` cancels the
  run; the MCP SDK then sends `notifications/cancelled` for the request in
  flight (the `mcp` 2.x client does this for every request its caller
  abandons).
- **Server side.** `tool_error_result(exc)` is a tool's exception as an MCP
  `CallToolResult` (`isError: true`, the envelope rendered `mcp-tool-result`);
  `describe_errors(description)` appends the `## Errors` block. The FastMCP
  middleware in `agent_recovery.fastmcp` applies both to every tool.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence

from .adapters import observation_from
from .door import recover
from .errors import PolicyError
from .store import MemoryStore

__all__ = ["DEFAULT_ERROR_CODES", "RecoveringSession", "describe_errors", "tool_error_result"]

#: The codes (prefixes) the `## Errors` block lists by default: every tool code
#: (the block of docs/mcp-errors-block.md).
DEFAULT_ERROR_CODES = ("tool.",)

#: Per call: whether this call already reconnected.
_RECONNECTED: ContextVar[Optional[List[bool]]] = ContextVar("agent_recovery_mcp_reconnected", default=None)

#: The options of `recover` a session passes on (the rest are its own).
_PASSED = ("policy", "clock", "seed", "fallbacks", "side_effect", "idempotent", "run_id", "errors",
           "timeout_ms", "policy_config", "breaker", "on_event")


def _policy(policy: Any) -> Any:
    if policy is not None:
        return policy
    from .runtime import _default_policy

    return _default_policy()


def _answer(exc: BaseException) -> Any:
    """What an error says, to compare a call's failure with a ping's."""
    error = getattr(exc, "error", None)
    if error is not None:
        return (type(exc).__name__, getattr(error, "code", None), getattr(error, "message", None))
    return (type(exc).__name__, str(exc))


class RecoveringSession:
    """An MCP `ClientSession` whose `call_tool` runs through the recovery door.

    `session`: an initialized `mcp.ClientSession` (or `mcp.Client`: anything
    with `call_tool` and `send_ping`). `reconnect`: an async function returning
    a new initialized session, awaited when the session is gone (at most once
    per call). Options are those of `recover` (`policy`, `clock`, `seed`,
    `errors`, `timeout_ms`, `side_effect`, `idempotent`, ...); each tool is its
    own target (its breaker is keyed by the tool name), with breakers kept in
    `store` (a `MemoryStore` by default) across calls.
    """

    def __init__(
        self,
        session: Any,
        *,
        reconnect: Optional[Callable[[], Awaitable[Any]]] = None,
        store: Any = None,
        **options: Any,
    ) -> None:
        unknown = sorted(set(options) - set(_PASSED))
        if unknown:
            raise PolicyError(
                "invalid_argument",
                f"RecoveringSession() has no option {', '.join(map(repr, unknown))}; "
                f"the options are reconnect, store, {', '.join(_PASSED)}",
            )
        if reconnect is not None and not callable(reconnect):
            raise PolicyError(
                "invalid_argument",
                f"reconnect is an async function returning a new session, got {type(reconnect).__name__}",
            )
        #: The session calls go to (replaced by `reconnect`).
        self.session = session
        #: How many times the session was replaced.
        self.reconnects = 0
        self._reconnect = reconnect
        self._store = store if store is not None else MemoryStore()
        self._options = options
        self._doors: Dict[str, Callable[..., Awaitable[Any]]] = {}
        self._lock = asyncio.Lock()

    async def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        """`session.call_tool(name, arguments, **kwargs)` as a run of the door: the
        result, or `RecoveryError` when the policy gives up (with `errors="model"`,
        the failure rendered for the model)."""
        door = self._doors.get(name)
        if door is None:
            door = self._doors[name] = self._door(name)
        token = _RECONNECTED.set([False])
        try:
            return await door(arguments, kwargs)
        finally:
            _RECONNECTED.reset(token)

    def _door(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call_tool(arguments: Optional[Dict[str, Any]], kwargs: Dict[str, Any]) -> Any:
            session = self.session
            try:
                return await session.call_tool(name, arguments, **kwargs)
            except Exception as exc:
                refused = await self._renew(session, exc)
                if not refused:
                    raise
            return await self.session.call_tool(name, arguments, **kwargs)

        door: Callable[..., Awaitable[Any]] = recover(
            call_tool, call="tool", tool=name, target=name, step_id=name, store=self._store, **self._options
        )
        return door

    async def _renew(self, session: Any, exc: Exception) -> bool:
        """Reconnect when `session` is gone; True when the call never ran on it
        (its failure is the ping's), so it may be sent again now."""
        box = _RECONNECTED.get()
        if self._reconnect is None or box is None or box[0]:
            return False
        try:
            await session.send_ping()
            return False  # the session is alive: the failure is the call's own
        except Exception as ping:  # noqa: BLE001 - any failure of the ping means the session is gone
            same = bool(_answer(ping) == _answer(exc))
        box[0] = True
        async with self._lock:
            if self.session is session:  # another call may have reconnected already
                self.session = await self._reconnect()
                self.reconnects += 1
        return same


def tool_error_result(exc: BaseException, *, policy: Any = None, call: str = "tool") -> Dict[str, Any]:
    """A tool's exception as an MCP `CallToolResult` (wire names): the policy's
    envelope for it rendered `mcp-tool-result` (`isError: true`, a text block
    with the hint, `structuredContent.error` the envelope)."""
    p = _policy(policy)
    observation = dict(observation_from(exc))
    observation.setdefault("call", call)
    envelope = p.classify(observation)
    result: Dict[str, Any] = p.render(envelope, "mcp-tool-result")
    return result


def describe_errors(description: Optional[str], codes: Sequence[str] = DEFAULT_ERROR_CODES, *, policy: Any = None) -> str:
    """`description` followed by the policy's MCP `## Errors` block for `codes`
    (codes or prefixes). A description that already has the block is returned as is."""
    block: str = _policy(policy).errors_block(list(codes))
    text = (description or "").rstrip()
    if block.strip() in text:
        return text
    return f"{text}\n\n{block}" if text else block
