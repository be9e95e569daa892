"""Five scripted failures and a persistent 429, and one agent run per
framework with and without the adapter (scripts/frameworks_table.py prints the table).

Every run is the same task: the model calls the `charge` tool (5), the tool
posts to `/charge`, the model answers `done`. "without" is the framework
alone with its defaults (its SDK client's retries, no idempotency key, no
fallback); "with" adds the framework's adapter from
`agent_recovery.integrations` (fallback model `gpt-4o-mini`), the SDK's
retries off as its docs say. `persistent_429_framework_retries_on` is the
persistent 429 run "with" only, the adapter on but the SDK client's (or
LiteLLM's) retries left at their defaults: the product of the two layers
where the framework lets it happen (the Node rows' scenario of that name).
"""

from __future__ import annotations

import asyncio
import json
import operator
from pathlib import Path
from typing import Annotated, Any, Callable, Dict, List, Optional, Tuple, TypedDict

import httpx
from scripted_server import ScriptedServer

from agent_recovery import recover

#: The scenarios, shared with node/bench/frameworks-table.mjs (its Node rows).
SPEC: Dict[str, Any] = json.loads((Path(__file__).with_name("scenarios.json")).read_text(encoding="utf-8"))


def _expand(queue: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """A queue with each `{"times": n, ...}` answer as n copies of it."""
    return [{k: v for k, v in a.items() if k != "times"} for a in queue for _ in range(a.get("times", 1))]


#: name -> (what it is, the script).
SCENARIOS: Dict[str, Any] = {
    name: (s["what"], {route: _expand(q) for route, q in s["queues"].items()}) for name, s in SPEC["scenarios"].items()
}
#: The adapter with the SDK's own retries left on, under the persistent 429 (run "with" only).
RETRIES_ON = "persistent_429_framework_retries_on"
SCENARIOS[RETRIES_ON] = (SCENARIOS["persistent_429"][0] + ", the SDK's retries left on", SCENARIOS["persistent_429"][1])
#: The modes each scenario runs in.
MODES: Dict[str, Tuple[str, ...]] = {name: ("with",) if name == RETRIES_ON else ("without", "with") for name in SCENARIOS}
PRIMARY, FALLBACK = SPEC["primary"], SPEC["fallback"]


def _charge(url: str, keyed: bool) -> Callable[..., Any]:
    if keyed:
        def charge(amount: int, *, key: str) -> dict:
            """Charge the customer's card."""
            r = httpx.post(url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})
            r.raise_for_status()
            return dict(r.json())
        return recover(charge, call="tool", side_effect=True, errors="model")

    def charge_plain(amount: int) -> dict:
        """Charge the customer's card."""
        r = httpx.post(url + "/charge", json={"amount": amount})
        r.raise_for_status()
        return dict(r.json())
    charge_plain.__name__ = "charge"
    return charge_plain


def pydantic_ai(url: str, adapted: bool, sdk_retries: bool = False) -> None:
    from pydantic_ai import Agent, ModelSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from agent_recovery.integrations.pydantic_ai import RecoveringModel

    def model(name: str) -> OpenAIChatModel:
        return OpenAIChatModel(name, provider=OpenAIProvider(base_url=url + "/v1", api_key="test"))

    chosen: Any = RecoveringModel(model(PRIMARY), fallbacks=[model(FALLBACK)]) if adapted else model(PRIMARY)
    # The client's retries asked for explicitly: the adapter still sends each attempt with max_retries=0.
    settings = ModelSettings(max_retries=2) if sdk_retries else None
    Agent(chosen, tools=[_charge(url, adapted)], model_settings=settings).run_sync("pay 5")


def openai_agents(url: str, adapted: bool, sdk_retries: bool = False) -> None:
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    from agent_recovery.integrations.openai_agents import RecoveringModel, failure_error_function

    set_tracing_disabled(True)

    async def go() -> None:
        if adapted:  # the door owns the model's retries and fallbacks: no client retries, no runner retries
            retries: Dict[str, Any] = {} if sdk_retries else {"max_retries": 0}
            client = AsyncOpenAI(base_url=url + "/v1", api_key="test", **retries)
            model: Any = RecoveringModel(OpenAIChatCompletionsModel(PRIMARY, client),
                                         fallbacks=[OpenAIChatCompletionsModel(FALLBACK, client)])
            tool = function_tool(_charge(url, True), failure_error_function=failure_error_function())
        else:
            client = AsyncOpenAI(base_url=url + "/v1", api_key="test")
            model, tool = OpenAIChatCompletionsModel(PRIMARY, client), function_tool(_charge(url, False))
        agent = Agent(name="payer", model=model, model_settings=ModelSettings(), tools=[tool])
        await Runner.run(agent, "pay 5")

    asyncio.run(go())


class _State(TypedDict):
    messages: Annotated[List[Any], operator.add]


def langgraph(url: str, adapted: bool, sdk_retries: bool = False) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command

    from agent_recovery.integrations.langgraph import envelope_handler, recover_node

    def call_model(state: _State, *, target: str = PRIMARY) -> Dict[str, Any]:
        retries: Dict[str, Any] = {"max_retries": 0} if adapted and not sdk_retries else {}
        llm = ChatOpenAI(model=target, base_url=url + "/v1", api_key="test", **retries)  # type: ignore[arg-type]
        return {"messages": [llm.bind_tools([_charge(url, False)]).invoke(state["messages"])]}

    def pay(state: _State, *, key: Optional[str] = None) -> Dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        headers = {"Idempotency-Key": key} if key else {}
        r = httpx.post(url + "/charge", json=call["args"], headers=headers)
        r.raise_for_status()
        return {"messages": [ToolMessage(json.dumps(r.json()), tool_call_id=call["id"])]}

    def told(state: _State, rendered: Any) -> Any:  # the failure as the tool's result, back to the model
        call = state["messages"][-1].tool_calls[0]
        return Command(update={"messages": [ToolMessage(json.dumps(rendered), tool_call_id=call["id"])]},
                       goto="model")

    g = StateGraph(_State)
    if adapted:
        g.add_node("model", recover_node(call_model, call="llm", target=PRIMARY, fallbacks=[FALLBACK]))
        g.add_node("pay", recover_node(pay, call="tool", side_effect=True), error_handler=envelope_handler(update=told))
    else:
        g.add_node("model", call_model)
        g.add_node("pay", pay)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", lambda s: "pay" if s["messages"][-1].tool_calls else END)
    g.add_edge("pay", "model")
    g.compile().invoke({"messages": [HumanMessage("pay 5")]})


def llama_index(url: str, adapted: bool, sdk_retries: bool = False) -> None:
    from openai import AsyncOpenAI
    from workflows import Workflow, step
    from workflows.events import Event, StartEvent, StopEvent

    from agent_recovery.integrations.llama_index import RecoveryRetryPolicy

    class ToolCall(Event):
        call: Dict[str, Any]

    class ToolResult(Event):
        message: Dict[str, Any]

    schema = {"type": "function", "function": {"name": "charge", "parameters": {
        "type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}}}
    client = AsyncOpenAI(base_url=url + "/v1", api_key="test", **({"max_retries": 0} if adapted and not sdk_retries else {}))
    charge = _charge(url, adapted)
    messages: List[Dict[str, Any]] = [{"role": "user", "content": "pay 5"}]

    class Pay(Workflow):
        @step(retry_policy=RecoveryRetryPolicy(call="llm") if adapted else None)
        async def model(self, ev: StartEvent | ToolResult) -> ToolCall | StopEvent:
            if isinstance(ev, ToolResult):
                messages.append(ev.message)
            reply = (await client.chat.completions.create(model=PRIMARY, messages=messages,  # type: ignore
                                                          tools=[schema])).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            if reply.tool_calls:
                call = reply.tool_calls[0]
                return ToolCall(call={"id": call.id, "args": json.loads(call.function.arguments)})
            return StopEvent(result=reply.content)

        @step
        async def pay(self, ev: ToolCall) -> ToolResult:
            result = await asyncio.to_thread(charge, **ev.call["args"])
            return ToolResult(message={"role": "tool", "tool_call_id": ev.call["id"], "content": json.dumps(result)})

    async def go() -> None:
        await Pay(timeout=120).run()

    asyncio.run(go())


def google_adk(url: str, adapted: bool, sdk_retries: bool = False) -> Optional[str]:
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM offline
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner

    from agent_recovery.integrations.google_adk import RecoveringLlm, RecoveryPlugin

    def llm(name: str) -> Any:
        retries: Dict[str, Any] = {"num_retries": 0} if adapted and not sdk_retries else {}
        return LiteLlm(model="openai/" + name, api_base=url + "/v1", api_key="test", **retries)

    model = RecoveringLlm(llm(PRIMARY), fallbacks=[llm(FALLBACK)]) if adapted else llm(PRIMARY)
    agent = LlmAgent(name="payer", model=model, tools=[_charge(url, adapted)])
    runner = InMemoryRunner(app=App(name="payments", root_agent=agent, plugins=[RecoveryPlugin()] if adapted else []))
    events = asyncio.run(runner.run_debug("pay 5", quiet=True))
    codes = [e.error_code for e in events if e.error_code]
    return f"ended with {codes[-1]}" if codes else None


#: The module each framework is imported as (is it installed?).
MODULES = {"pydantic-ai": "pydantic_ai", "openai-agents": "agents", "langgraph": "langgraph",
           "llama-index": "workflows", "google-adk": "google.adk"}

#: Each run: (server url, with the adapter, with the SDK's retries left on under it).
FRAMEWORKS: Dict[str, Callable[[str, bool, bool], Optional[str]]] = {
    "pydantic-ai": pydantic_ai,
    "openai-agents": openai_agents,
    "langgraph": langgraph,
    "llama-index": llama_index,
    "google-adk": google_adk,
}


def run(server: ScriptedServer, framework: str, scenario: str, mode: str) -> Dict[str, Any]:
    """One run; its row: what the server saw and how the run ended."""
    server.script(SCENARIOS[scenario][1], tool_args=SPEC["tool_args"])
    try:
        ended = FRAMEWORKS[framework](server.url, mode == "with", scenario == RETRIES_ON)
        raised: Optional[BaseException] = None
    except Exception as exc:  # the run's outcome, reported in the row
        raised, ended = exc, None
    stats = server.stats()
    model_requests = sum(v for k, v in stats["requests"].items() if k.startswith("model:"))
    charges = [e for e in stats["log"] if e["route"] == "charge"]
    if raised is not None:
        outcome = f"raised {type(raised).__name__}"
        code = getattr(raised, "code", None)
        if isinstance(code, str) and "." in code:
            outcome += f" ({code})"
    elif ended is not None:  # the framework ended the run with an error it reports as data
        outcome = ended
    elif charges and charges[-1]["status"] >= 400:
        outcome = "completed, model told the charge failed"
    else:
        outcome = "completed, charged" if charges else "completed"
    return {"framework": framework, "scenario": scenario, "mode": mode, "model_requests": model_requests,
            "tool_requests": len(charges), "side_effects": stats["charges"], "outcome": outcome}
