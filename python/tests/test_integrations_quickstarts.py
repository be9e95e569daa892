"""Each quickstart of docs/integrations/frameworks.md, run as written against
the scripted provider and payment tool.

Expected values: the page's promises (the quota refusal moves to the
fallback model, a lost response is charged once, a decline reaches the model
as data) counted by the server.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any, Dict

import pytest

from .scripted import DECLINED, ScriptedServer, error_body, models

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "frameworks.md"


def quickstarts() -> Dict[str, str]:
    """The first python block under each `## ` heading."""
    blocks: Dict[str, str] = {}
    for section in re.split(r"^## ", PAGE.read_text(), flags=re.M)[1:]:
        title = section.splitlines()[0].strip()
        found = re.search(r"```python\n(.*?)```", section, re.S)
        if found:
            blocks[title] = found.group(1)
    return blocks


QUICKSTARTS = quickstarts()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    with ScriptedServer() as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("PAYMENTS_URL", s.url)
        monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
        yield s


def run(block: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(PAGE), "exec", dont_inherit=True), {"__name__": "quickstart"})
    return out.getvalue()


def test_the_page_has_a_short_quickstart_per_framework() -> None:
    assert set(QUICKSTARTS) == {"PydanticAI", "OpenAI Agents SDK", "LangGraph", "LlamaIndex workflows", "Google ADK"}
    assert all(len(block.splitlines()) <= 15 for block in QUICKSTARTS.values())


def test_pydantic_ai_falls_back_on_quota_and_charges_a_lost_response_once(server: ScriptedServer) -> None:
    server.script({"model:gpt-4o": [{"status": 429, "body": error_body("quota")}] * 5,
                   "charge": [{"status": 503, "apply": True}]}, tool_args={"amount": 5})
    assert run(QUICKSTARTS["PydanticAI"]).strip() == "done"
    stats = server.stats()
    assert models(stats)["gpt-4o-mini"] == 2 and stats["requests"]["charge"] == 2 and stats["charges"] == 1
    # The fallback is sticky: the quota refusal opened gpt-4o's breaker, so the
    # second model turn (after the tool) starts at gpt-4o-mini.
    assert models(stats)["gpt-4o"] == 1


def test_openai_agents_retries_a_429_and_charges_a_lost_response_once(server: ScriptedServer) -> None:
    server.script({"model:gpt-4o": [{"status": 429, "headers": {"retry-after-ms": "10"},
                                     "body": error_body("rate_limit")}],
                   "charge": [{"status": 503, "apply": True}]}, tool_args={"amount": 5})
    assert run(QUICKSTARTS["OpenAI Agents SDK"]).strip() == "done"
    stats = server.stats()
    assert models(stats) == {"gpt-4o": 3} and stats["requests"]["charge"] == 2 and stats["charges"] == 1


def test_langgraph_writes_a_decline_into_the_state(server: ScriptedServer) -> None:
    server.script({"charge": [DECLINED]})
    printed = run(QUICKSTARTS["LangGraph"])
    assert "tool.payment.declined" in printed and "'charge'" not in printed
    assert server.stats()["requests"]["charge"] == 1 and server.stats()["charges"] == 0


def langgraph_compensations() -> str:
    """The python block under `### Compensations` of the LangGraph section."""
    section = re.split(r"^## ", PAGE.read_text(), flags=re.M)
    [langgraph] = [s for s in section if s.startswith("LangGraph\n")]
    found = re.search(r"^### Compensations\n+```python\n(.*?)```", langgraph, re.S | re.M)
    assert found is not None
    return found.group(1)


def test_langgraph_refunds_the_charge_when_a_later_node_is_declined(server: ScriptedServer) -> None:
    block = langgraph_compensations()
    assert len(block.splitlines()) <= 15
    server.script({"charge": [{}, DECLINED]})
    printed = run(block)
    assert "tool.payment.declined" in printed and "'shipped'" not in printed
    stats = server.stats()
    charged = [e for e in stats["log"] if e["route"] == "charge"]
    assert len(charged) == 2 and stats["charges"] == 1
    assert len(stats["refunds"]) == 1 and stats["refunds"][0] in printed  # the charge's id, refunded once


def test_llama_index_retries_a_503_and_returns_the_charge(server: ScriptedServer) -> None:
    server.script({"charge": [{"status": 503}]})
    assert "'status': 'succeeded'" in run(QUICKSTARTS["LlamaIndex workflows"])
    assert server.stats()["requests"]["charge"] == 2 and server.stats()["charges"] == 1

# The Google ADK quickstart runs in ADK's own venv: tests/frameworks/test_google_adk.py.
