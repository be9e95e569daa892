"""The Python quickstarts of docs/integrations/mcp.md and a2a.md run as written,
against their servers under uvicorn on 127.0.0.1.

Expected values: 1 / 4 is 0.25; a ZeroDivisionError is an unhandled exception,
`tool.exception.unhandled` (docs/errors.md); HTTP 503 with `Retry-After: 3` is
retryable after three seconds (RFC 9110 section 10.2.3).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Dict, List

from a2a.types import TaskState
from google.protobuf.json_format import MessageToDict

from .asgi_server import Served
from .conftest import repo_root
from .test_a2a_protocol import Unavailable, card_for, hello


def _python_block(doc: str, heading: str) -> str:
    text = (repo_root() / "docs" / "integrations" / doc).read_text(encoding="utf-8")
    section = text[text.index(heading):]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, f"{doc} {heading!r} has a python block"
    code = block.group(1)
    assert len(code.splitlines()) <= 15, f"the {doc} quickstart is {len(code.splitlines())} lines"
    return code


def test_the_mcp_quickstart_runs_as_written() -> None:
    scope: Dict[str, Any] = {}
    exec(compile(_python_block("mcp.md", "## Quickstart (Python)"), "docs/integrations/mcp.md", "exec"), scope)
    served = Served(lambda url: scope["app"].http_app(path="/mcp"))
    try:
        ok = asyncio.run(scope["ask"](served.url + "/mcp", 4))
        failed = asyncio.run(scope["ask"](served.url + "/mcp", 0))
    finally:
        served.stop()
    assert ok.is_error is False and ok.content[0].text == "0.25"
    assert failed["error"]["code"] == "tool.exception.unhandled"
    assert failed["error"]["retryable"] is False


def test_the_a2a_quickstart_runs_as_written() -> None:
    scope: Dict[str, Any] = {"executor": Unavailable()}
    code = compile(_python_block("a2a.md", "## Quickstart (Python)"), "docs/integrations/a2a.md", "exec")

    def make(url: str) -> Any:
        scope["card"] = card_for(url)
        exec(code, scope)
        return scope["app"]

    served = Served(make)

    async def collect() -> List[Any]:
        return [event async for event in scope["ask"](served.url, hello())]

    try:
        events = asyncio.run(collect())
    finally:
        served.stop()
    last = events[-1]
    status = last.status_update.status if last.HasField("status_update") else last.task.status
    assert status.state == TaskState.TASK_STATE_FAILED
    data = next(p["data"] for p in MessageToDict(status.message)["parts"] if "data" in p)
    assert (data["retryable"], data["retryAfter"]) == (True, 3)
