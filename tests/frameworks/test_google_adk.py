"""The Google ADK plugin driving a real ADK agent (a LiteLLM model) against the scripted provider.

ADK needs google-genai<3, the `test` extra google-genai 3, so these run in a
venv of their own:

    python3 -m venv .venv-adk
    .venv-adk/bin/pip install -e './python[google-adk]' pytest litellm==1.110.2
    .venv-adk/bin/python -m pytest -q tests/frameworks/test_google_adk.py

Expected values: ADK's plugin docs (a dict from `on_tool_error_callback` is
the tool's response; an `LlmResponse` from `on_model_error_callback` replaces
the error), the reference policy's envelopes and the server's counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, List

import httpx
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM offline
sys.path.insert(0, str(Path(__file__).resolve().parent))

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402
from scripted_server import ScriptedServer, error_body  # noqa: E402

from agent_recovery import Policy, VirtualClock, recover  # noqa: E402
from agent_recovery.integrations.google_adk import RecoveringLlm, RecoveryPlugin  # noqa: E402

#: Stripe's card decline (https://docs.stripe.com/api/errors: 402, type card_error, code card_declined).
DECLINED = {"status": 402, "body": {"error": {"type": "card_error", "code": "card_declined",
                                              "message": "Your card was declined."}}}
QUICKSTART = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "frameworks.md"


def models(stats: dict) -> dict:
    """Model requests per model name."""
    return {k[len("model:"):]: v for k, v in stats["requests"].items() if k.startswith("model:")}


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def run(server: ScriptedServer, tool: Any, plugins: List[Any]) -> List[Any]:
    model = LiteLlm(model="openai/gpt-4o", api_base=server.url + "/v1", api_key="test", num_retries=0)
    agent = LlmAgent(name="payer", model=model, tools=[tool])

    async def go() -> List[Any]:
        runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=plugins))
        session = await runner.session_service.create_session(app_name="app", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="pay 5")])
        return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    return asyncio.run(go())


def plain_charge(server: ScriptedServer) -> Any:
    def charge(amount: int) -> dict:
        """Charge the customer's card."""
        r = httpx.post(server.url + "/charge", json={"amount": amount})
        r.raise_for_status()
        return dict(r.json())

    return charge


def tool_responses(events: List[Any]) -> List[Any]:
    return [p.function_response.response for e in events if e.content for p in e.content.parts or []
            if p.function_response is not None]


def test_without_the_plugin_a_declined_charge_ends_the_run(server: ScriptedServer) -> None:
    server.script({"charge": [DECLINED]}, tool_args={"amount": 5})
    with pytest.raises(httpx.HTTPStatusError):
        run(server, plain_charge(server), [])


def test_a_declined_charge_is_returned_to_the_model_as_the_envelope(server: ScriptedServer) -> None:
    server.script({"charge": [DECLINED]}, tool_args={"amount": 5})
    events = run(server, plain_charge(server), [RecoveryPlugin()])
    [response] = tool_responses(events)
    assert response["error"]["code"] == "tool.payment.declined" and response["error"]["retryable"] is False
    assert server.stats()["requests"]["model:gpt-4o"] == 2  # the model read the envelope and answered
    assert server.stats()["charges"] == 0


def test_a_recovered_tool_charges_a_lost_response_once(server: ScriptedServer) -> None:
    def charge(amount: int, *, key: str) -> dict:
        """Charge the customer's card."""
        r = httpx.post(server.url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return dict(r.json())

    server.script({"charge": [{"status": 503, "apply": True}]}, tool_args={"amount": 5})
    tool = recover(charge, call="tool", side_effect=True, clock=VirtualClock(0))
    [response] = tool_responses(run(server, tool, [RecoveryPlugin()]))
    assert response["status"] == "succeeded"
    stats = server.stats()
    keys = [e["key"] for e in stats["log"] if e["route"] == "charge"]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0] and stats["charges"] == 1


def test_a_quota_error_ends_the_turn_with_the_envelope(server: ScriptedServer) -> None:
    server.script({"model:gpt-4o": [{"status": 429, "body": error_body("quota")}]}, tool_args={"amount": 5})
    events = run(server, plain_charge(server), [RecoveryPlugin()])
    [last] = [e for e in events if e.error_code]
    assert last.error_code == "llm.quota.exhausted"
    assert json.loads(last.error_message)["error"]["retryable"] is False
    assert server.stats()["requests"]["model:gpt-4o"] == 1  # num_retries=0: one layer, no retries


def recovering(server: ScriptedServer, clock: VirtualClock) -> Any:
    def llm(name: str) -> Any:
        return LiteLlm(model="openai/" + name, api_base=server.url + "/v1", api_key="test", num_retries=0)

    return RecoveringLlm(llm("gpt-4o"), fallbacks=[llm("gpt-4o-mini")], clock=clock)


def run_model(model: Any) -> List[Any]:
    agent = LlmAgent(name="asker", model=model)
    app = App(name="app", root_agent=agent, plugins=[RecoveryPlugin()])
    return asyncio.run(InMemoryRunner(app=app).run_debug("hi", quiet=True))


def test_a_recovering_llm_falls_back_on_quota(server: ScriptedServer) -> None:
    server.script({"model:gpt-4o": [{"status": 429, "body": error_body("quota")}]})
    events = run_model(recovering(server, VirtualClock(0)))
    assert not [e for e in events if e.error_code]
    assert models(server.stats()) == {"gpt-4o": 1, "gpt-4o-mini": 1}


def test_a_recovering_llm_waits_out_retry_after_up_to_the_policys_attempts(server: ScriptedServer) -> None:
    max_attempts = Policy.load().decide({"source": "http", "status": 429, "call": "llm"}, {"attempt": 1})["max_attempts"]
    clock = VirtualClock(0)
    llm = LiteLlm(model="openai/gpt-4o", api_base=server.url + "/v1", api_key="test", num_retries=0)
    server.script({"model:gpt-4o": [{"status": 429, "headers": {"retry-after": "2"},
                                     "body": error_body("rate_limit")}] * 10})
    events = run_model(RecoveringLlm(llm, clock=clock))
    [failed] = [e for e in events if e.error_code]
    assert failed.error_code == "llm.http.429_rate_limited"  # the door gave up; the plugin reported it
    assert models(server.stats()) == {"gpt-4o": max_attempts} and clock.now_ms() >= 2000 * (max_attempts - 1)


def test_the_quickstart_hands_a_decline_to_the_model(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    section = re.split(r"^## ", QUICKSTART.read_text(), flags=re.M)
    [block] = [re.search(r"```python\n(.*?)```", s, re.S).group(1)  # type: ignore[union-attr]
               for s in section if s.startswith("Google ADK\n")]
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("PAYMENTS_URL", server.url)
    server.script({"charge": [DECLINED]}, tool_args={"amount": 5})
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(block, str(QUICKSTART), "exec", dont_inherit=True), {"__name__": "quickstart"})
    stats = server.stats()
    assert stats["requests"] == {"model:gpt-4o": 2, "charge": 1} and stats["charges"] == 0
