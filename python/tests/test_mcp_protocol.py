"""agent_recovery.mcp and agent_recovery.fastmcp against real MCP servers over
streamable HTTP on 127.0.0.1 (uvicorn), called with the `mcp` SDK's own client.

Expected values come from outside the code under test: an `isError` result is
`tool.mcp.tool_error` (docs/frameworks-and-protocols.md, MCP table), a tool's
ValueError is `tool.exception.unhandled` and a 503 with `Retry-After: 3` is
retryable after 3000 ms (docs/errors.md), the `## Errors` block for `tool.` is
the committed docs/mcp-errors-block.md (generated and checked by the Rust
suite), the cancel notification is the one the MCP spec defines
(`notifications/cancelled` with the request's id, basic/utilities/cancellation),
and a server that forgot a session answers every request on it with the same
error (MCP spec, streamable HTTP "Session Management": 404).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any, AsyncIterator, Iterator, List

import httpx
import pytest
from fastmcp import FastMCP
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import ElicitRequestURLParams

from agent_recovery import Policy, PolicyError, RecoveryError, VirtualClock
from agent_recovery.fastmcp import RecoveryMiddleware
from agent_recovery.mcp import RecoveringSession

from .asgi_server import Recorder, Served

REPO = Path(__file__).resolve().parents[2]


def tools_server(url: str) -> Any:
    server = MCPServer("tools")

    @server.tool()
    async def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def boom() -> str:
        raise ValueError("kaput")

    @server.tool()
    async def files() -> str:
        raise UrlElicitationRequiredError(
            [ElicitRequestURLParams(message="Sign in", url="https://example.com/authorize", elicitation_id="e-1")]
        )

    @server.tool()
    async def block() -> str:
        await asyncio.Event().wait()
        return "never"

    return Recorder(server.streamable_http_app())


@pytest.fixture
def served() -> Iterator[List[Served]]:
    running: List[Served] = []
    yield running
    for s in running:
        if s.thread.is_alive():
            s.stop()


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[Any]:
    """An initialized ClientSession on `url`, and a factory for more (closed together)."""
    async with contextlib.AsyncExitStack() as stack:

        async def connect() -> ClientSession:
            read, write = await stack.enter_async_context(streamable_http_client(url + "/mcp"))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            return session

        yield connect


def test_a_tool_call_returns_its_result(served: List[Served], policy: Policy) -> None:
    s = Served(tools_server)
    served.append(s)

    async def main() -> Any:
        async with connected(s.url) as connect:
            tools = RecoveringSession(await connect(), policy=policy, clock=VirtualClock(0))
            return await tools.call_tool("add", {"a": 2, "b": 3})

    result = asyncio.run(main())
    assert result.is_error is False
    assert result.structured_content == {"result": 5}
    assert s.app.methods().count("tools/call") == 1


def test_an_error_result_is_classified_and_not_retried(served: List[Served], policy: Policy) -> None:
    s = Served(tools_server)
    served.append(s)

    async def main() -> Any:
        async with connected(s.url) as connect:
            tools = RecoveringSession(await connect(), policy=policy, clock=VirtualClock(0))
            with pytest.raises(RecoveryError) as caught:
                await tools.call_tool("boom", {})
            model = RecoveringSession(tools.session, policy=policy, clock=VirtualClock(0), errors="model")
            return caught.value, await model.call_tool("boom", {})

    error, rendered = asyncio.run(main())
    # tool_error is class semantic (docs/errors.md): the model changes its call, the door does not resend it.
    assert error.code == "tool.mcp.tool_error"
    assert error.action == "replan"
    assert error.cause.is_error is True  # the CallToolResult the server answered
    assert rendered["error"]["code"] == "tool.mcp.tool_error"
    # Each call sent the request once: an isError result is not retried unchanged.
    assert s.app.methods().count("tools/call") == 2


def test_a_protocol_error_is_classified(served: List[Served], policy: Policy) -> None:
    s = Served(tools_server)
    served.append(s)

    async def main() -> RecoveryError:
        async with connected(s.url) as connect:
            tools = RecoveringSession(await connect(), policy=policy, clock=VirtualClock(0))
            with pytest.raises(RecoveryError) as caught:
                await tools.call_tool("files", {})
            return caught.value

    error = asyncio.run(main())
    # A JSON-RPC error, not a result: -32042 asks the user to open a URL (docs/integrations/mcp.md).
    assert error.code == "tool.mcp.url_elicitation_required"
    assert error.action == "await_input"
    assert s.app.methods().count("tools/call") == 1


def test_cancelling_a_call_sends_notifications_cancelled(served: List[Served], policy: Policy) -> None:
    s = Served(tools_server)
    served.append(s)

    async def main() -> None:
        async with connected(s.url) as connect:
            tools = RecoveringSession(await connect(), policy=policy)
            call = asyncio.create_task(tools.call_tool("block", {}))
            seen = await asyncio.to_thread(s.app.wait_for, "tools/call")
            assert seen is not None
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call

    asyncio.run(main())
    request = s.app.find("tools/call")[0]
    cancelled = s.app.wait_for("notifications/cancelled")
    assert cancelled is not None, s.app.methods()
    assert cancelled["params"]["requestId"] == request["id"]


def test_a_gone_session_is_replaced_once_and_the_call_sent_again(served: List[Served], policy: Policy) -> None:
    first = Served(tools_server)
    served.append(first)

    async def main() -> Any:
        async with connected(first.url) as connect:
            tools = RecoveringSession(await connect(), reconnect=connect, policy=policy, clock=VirtualClock(0))
            assert (await tools.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}
            first.stop()
            second = Served(tools_server, port=first.port)  # the server restarted: it forgot the session
            served.append(second)
            old = tools.session
            result = await tools.call_tool("add", {"a": 2, "b": 2})
            return second, tools, old, result

    second, tools, old, result = asyncio.run(main())
    assert result.structured_content == {"result": 4}
    assert tools.reconnects == 1 and tools.session is not old
    # The restarted server refused the call and the ping on the old session, then got
    # a new session and the call once more.
    methods = second.app.methods()
    assert methods[:5] == ["tools/call", "ping", "initialize", "notifications/initialized", "tools/call"]
    assert methods.count("initialize") == 1


def test_without_reconnect_a_gone_session_fails_the_call(served: List[Served], policy: Policy) -> None:
    first = Served(tools_server)
    served.append(first)

    async def main() -> RecoveryError:
        async with connected(first.url) as connect:
            tools = RecoveringSession(await connect(), policy=policy, clock=VirtualClock(0))
            first.stop()
            served.append(Served(tools_server, port=first.port))
            with pytest.raises(RecoveryError) as caught:
                await tools.call_tool("add", {"a": 2, "b": 2})
            return caught.value

    error = asyncio.run(main())
    # The refusal is the server's JSON-RPC -32600 Invalid Request (JSON-RPC 2.0, section 5.1):
    # without a new session, resending it unchanged cannot help.
    assert error.code == "tool.jsonrpc.invalid_request"
    assert error.action == "fail"


def fastmcp_server(url: str) -> Any:
    app = FastMCP("orders", middleware=[RecoveryMiddleware()])

    @app.tool
    def refund(order: str) -> str:
        """Refund an order."""
        request = httpx.Request("POST", "http://127.0.0.1/payments")
        httpx.Response(503, headers={"retry-after": "3"}, request=request).raise_for_status()
        return "refunded"

    @app.tool
    def lookup(order: str) -> str:
        """Look an order up."""
        raise ValueError(f"no order {order}")

    @app.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    return app.http_app(path="/mcp")


def test_fastmcp_tool_exceptions_become_error_results_with_the_envelope(served: List[Served]) -> None:
    s = Served(fastmcp_server)
    served.append(s)

    async def main() -> Any:
        async with connected(s.url) as connect:
            session = await connect()
            listed = await session.list_tools()
            return (
                listed,
                await session.call_tool("refund", {"order": "A1"}),
                await session.call_tool("lookup", {"order": "A1"}),
                await session.call_tool("ping", {}),
            )

    listed, refund, lookup, ping = asyncio.run(main())
    assert refund.is_error is True
    error = refund.structured_content["error"]
    assert (error["code"], error["retryable"], error["retry_after_ms"]) == ("tool.http.503_unavailable", True, 3000)
    assert error["hint"] in refund.content[0].text
    assert lookup.is_error is True
    assert lookup.structured_content["error"]["code"] == "tool.exception.unhandled"
    assert lookup.structured_content["error"]["retryable"] is False
    assert ping.is_error is False and ping.content[0].text == "pong"
    block = (REPO / "docs" / "mcp-errors-block.md").read_text()
    for tool in listed.tools:
        assert tool.description is not None
        assert tool.description.endswith("\n\n" + block), tool.name
    assert {t.name: t.description.split("\n")[0] for t in listed.tools}["ping"] == "Answer pong."


def test_errors_block_is_the_components(policy: Policy) -> None:
    block = (REPO / "docs" / "mcp-errors-block.md").read_text()
    assert policy.errors_block(["tool."]) == block
    one = policy.errors_block(["tool.mcp.tool_error"])
    assert '"code": "tool.mcp.tool_error"' in one and one.count('"code"') == 1
    with pytest.raises(PolicyError):
        policy.errors_block("tool.")  # type: ignore[arg-type]
