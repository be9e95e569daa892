"""A small agent loop that recovers from real failure shapes through the policy.

    pip install ./python
    python examples/python/agent_loop.py

The agent plans with an LLM, calls a weather tool, then summarises. Every call
goes through `agent_recovery.retry`, so the *policy component* decides each
next step; this script only carries out what it says:

- the tool answers 503 with `Retry-After: 1`, then times out like
  `httpx.ReadTimeout`, then succeeds;
- the LLM fails like the providers do: OpenAI 429 with `x-ratelimit-*`
  headers, Anthropic 529 `overloaded_error`, and later an OpenAI 400
  `context_length_exceeded`, for which the policy says `replan` and the agent
  shortens its prompt.

Sleeping is scaled down 1000x (a 1200 ms delay waits 1.2 ms) so the demo runs
at once; pass `--real-sleep` to wait for real. Nothing here touches the network.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Dict, List

from agent_recovery import Decision, Failure, PolicyHandle, RecoveryError, retry

try:  # use the real exception type when httpx is installed
    from httpx import ReadTimeout
except ImportError:  # pragma: no cover - same qualified name, no dependency

    class ReadTimeout(Exception):  # type: ignore[no-redef]
        """Stands in for httpx.ReadTimeout (same `module.QualName`)."""

    ReadTimeout.__module__ = "httpx"


# -- provider-shaped failures ---------------------------------------------------


class Response:
    """The part of an httpx.Response the helpers read."""

    def __init__(self, status_code: int, headers: Dict[str, str], body: Dict[str, Any]) -> None:
        self.status_code = status_code
        self.headers = headers
        self.text = json.dumps(body)


class APIStatusError(Exception):
    """Shaped like `openai.APIStatusError` / `anthropic.APIStatusError`: carries `.response`."""

    def __init__(self, message: str, response: Response) -> None:
        super().__init__(message)
        self.response = response
        self.status_code = response.status_code


def openai_rate_limited() -> APIStatusError:
    return APIStatusError(
        "Error code: 429",
        Response(
            429,
            {
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "1.2s",
                "x-ratelimit-limit-tokens": "30000",
                "x-ratelimit-remaining-tokens": "29811",
                "x-ratelimit-reset-tokens": "378ms",
                "x-request-id": "req_6f1b2c0e9d",
            },
            {
                "error": {
                    "message": "Rate limit reached for gpt-4o in organization org-demo on requests "
                    "per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 1.2s.",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
        ),
    )


def anthropic_overloaded() -> APIStatusError:
    return APIStatusError(
        "Error code: 529",
        Response(
            529,
            {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    )


def openai_context_too_long(tokens: int) -> APIStatusError:
    return APIStatusError(
        "Error code: 400",
        Response(
            400,
            {"x-request-id": "req_a41c"},
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. However, "
                    f"your messages resulted in {tokens} tokens. Please reduce the length of "
                    "the messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        ),
    )


# -- the flaky world -------------------------------------------------------------


class WeatherTool:
    """503 + Retry-After, then a read timeout, then an answer."""

    def __init__(self) -> None:
        self.keys: List[str] = []

    async def __call__(self, *, attempt: int, idempotency_key: str, city: str) -> Any:
        self.keys.append(idempotency_key)
        if attempt == 1:
            return Failure.response(503, {"Retry-After": "1"}, "<html>Service Unavailable</html>")
        if attempt == 2:
            raise ReadTimeout("The read operation timed out")
        return {"city": city, "temp_c": 21, "sky": "clear"}


class LLMStub:
    """Fails like the providers (OpenAI 429, Anthropic 529, OpenAI 400), then answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, *, attempt: int, idempotency_key: str, messages: List[str]) -> str:
        self.calls += 1
        tokens = sum(len(m) for m in messages) * 40
        if self.calls == 1:
            raise openai_rate_limited()
        if self.calls == 2:
            raise anthropic_overloaded()
        if tokens > 128_000:
            raise openai_context_too_long(tokens)
        return f"(model reply to {len(messages)} messages)"


# -- the loop ----------------------------------------------------------------------


def show(decision: Decision) -> None:
    env = decision["envelope"]
    upstream = env["upstream"]
    seen = f"{upstream.get('provider') or upstream['source']} {upstream.get('status') or ''}".strip()
    line = f"    attempt {decision['attempt']} failed: {env['code']} ({env['class']}, {seen})"
    if decision["action"] == "retry":
        line += f" -> retry in {decision['delay_ms']} ms"
    else:
        line += f" -> {decision['action'].upper()} ({decision['reason']})"
    print(line)
    print(f"      hint: {env['hint']}")


async def main(real_sleep: bool) -> int:
    policy = PolicyHandle()  # the packaged reference policy, smoke-tested
    info = policy.describe()
    print(f"policy {info['name']} {info['version']} (sha256 {info['sha256'][:12]})\n")

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds if real_sleep else seconds / 1000)

    llm, weather = LLMStub(), WeatherTool()
    common = dict(policy=policy, run_id="run-42", seed=2024, on_decision=show, sleep=sleep)
    messages = ["system: you are a travel agent", "user: what's the weather in Lisbon?"]

    print("step 1: plan (LLM)")
    plan = await retry(
        lambda **kw: llm(messages=messages, **kw),
        call="llm", step_id="plan", tool="chat", args={"messages": messages}, **common,
    )
    print(f"  ok: {plan}\n")

    print("step 2: weather (tool)")
    forecast = await retry(
        lambda **kw: weather(city="Lisbon", **kw),
        call="tool", step_id="weather", tool="weather", args={"city": "Lisbon"}, **common,
    )
    print(f"  ok: {forecast}")
    print(f"  one idempotency key for all {len(weather.keys)} attempts: {len(set(weather.keys)) == 1}\n")

    print("step 3: summarise (LLM, with a very long history)")
    history = messages + [json.dumps(forecast)] + ["assistant: " + "lorem ipsum " * 400] * 30
    for step in ("summarise", "summarise-short"):
        try:
            summary = await retry(
                lambda **kw: llm(messages=history, **kw),
                call="llm", step_id=step, tool="chat", args={"messages": history}, **common,
            )
        except RecoveryError as e:
            if e.action != "replan":
                print(f"  gave up: {e}")
                return 1
            print(f"  replanning: dropping the old turns from {e.envelope.get('field')!r}")
            history = history[:3]  # system prompt, question, forecast
            continue
        print(f"  ok: {summary}")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(real_sleep="--real-sleep" in sys.argv)))
