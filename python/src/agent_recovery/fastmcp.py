"""FastMCP middleware: a tool's exception becomes a result the agent can read.

```python
from fastmcp import FastMCP
from agent_recovery.fastmcp import RecoveryMiddleware

mcp = FastMCP("orders", middleware=[RecoveryMiddleware()])
```

Needs `fastmcp` (`pip install 'agent-recovery[fastmcp]'`), imported by this
module. Two hooks of FastMCP's `Middleware`:

- `on_call_tool`: an exception from the tool (FastMCP hands the middleware a
  `ToolError` raised from it; the original is observed) is answered with an
  `isError: true` result carrying the policy's envelope, rendered
  `mcp-tool-result` (a text block with the hint, `structuredContent.error`).
  An unknown tool and MCP protocol errors (`MCPError`) stay protocol errors.
- `on_list_tools`: each tool's description gets the policy's `## Errors` block
  for `codes` (every `tool.` code by default), so a model reads what each
  failure means and what to do before it calls.
"""

from __future__ import annotations

from typing import Any, Sequence

import mcp_types
from fastmcp.exceptions import NotFoundError, ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import Tool, ToolResult
from mcp.shared.exceptions import MCPError

from .mcp import DEFAULT_ERROR_CODES, _policy, describe_errors, tool_error_result

__all__ = ["RecoveryMiddleware"]


class RecoveryMiddleware(Middleware):
    """Tool exceptions as `isError` results with the envelope; the `## Errors`
    block in every tool description. `policy`: a `Policy` or `PolicyHandle`
    (the packaged reference policy by default); `codes`: the codes or prefixes
    the block lists (None: no block)."""

    def __init__(self, *, policy: Any = None, codes: Sequence[str] | None = DEFAULT_ERROR_CODES) -> None:
        self.policy = _policy(policy)
        self.codes = None if codes is None else list(codes)

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        try:
            return await call_next(context)
        except (NotFoundError, MCPError):
            raise  # an unknown tool, a protocol error: they keep their JSON-RPC code on the wire
        except Exception as exc:  # noqa: BLE001 - every tool failure is answered as a result
            cause = exc.__cause__ if isinstance(exc, ToolError) and exc.__cause__ is not None else exc
            result = tool_error_result(cause, policy=self.policy)
            return ToolResult(
                content=result["content"], structured_content=result["structuredContent"], is_error=True
            )

    async def on_list_tools(
        self,
        context: MiddlewareContext[mcp_types.ListToolsRequest],
        call_next: CallNext[mcp_types.ListToolsRequest, Sequence[Tool]],
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        if self.codes is None:
            return tools
        return [
            t.model_copy(update={"description": describe_errors(t.description, self.codes, policy=self.policy)})
            for t in tools
        ]
