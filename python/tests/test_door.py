"""The small door (`recover`) against a local server that fails as OpenAI does.

The server runs on 127.0.0.1 in a thread; the OpenAI SDK (max_retries=0, so
the door decides) and httpx talk to it. Error bodies follow OpenAI's error
object (https://platform.openai.com/docs/guides/error-codes: `insufficient_quota`
is a 429 whose error `type` and `code` are `insufficient_quota`). The runtime
sleeps on a `VirtualClock`: no test sleeps.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List

import httpx
import openai
import pytest

from agent_recovery import Policy, PolicyError, RecoveryError, Runtime, VirtualClock, recover, retry_sync
from agent_recovery.door import KeyNotUsedWarning
from agent_recovery.store import MemoryStore

T0 = 1_767_225_600_000
QUOTA = {"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota",
                   "param": None, "code": "insufficient_quota"}}
RATE = {"error": {"message": "Rate limit reached.", "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
BAD = {"error": {"message": "Invalid value for 'temperature'.", "type": "invalid_request_error",
                 "param": "temperature", "code": None}}


class Provider:
    """What the server answers, per model, in order; the last answer repeats."""

    def __init__(self) -> None:
        self.script: Dict[str, List[Any]] = {}
        self.hits: List[Dict[str, Any]] = []
        self.charges: Dict[str, int] = {}
        self.charge_calls = 0
        self.lock = threading.Lock()

    def answer(self, model: str) -> Any:
        with self.lock:
            queue = self.script.get(model, ["ok"])
            return queue.pop(0) if len(queue) > 1 else queue[0]


class Handler(BaseHTTPRequestHandler):
    provider: Provider

    def log_message(self, *args: Any) -> None:
        pass

    def send(self, status: int, body: Any, headers: Dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        p = self.provider
        key = self.headers.get("idempotency-key")
        if self.path == "/v1/chat/completions":
            model = body["model"]
            with p.lock:
                p.hits.append({"model": model, "key": key})
            a = p.answer(model)
            if a == "quota":
                return self.send(429, QUOTA)
            if a == "rate":
                return self.send(429, RATE, {"retry-after": "2"})
            if a == "503":
                return self.send(503, {"error": {"message": "overloaded", "type": "server_error"}})
            if a == "400":
                return self.send(400, BAD)
            return self.send(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": f"hi from {model}"}}]})
        if self.path == "/charge":
            # Applies the charge, then loses the first answer (a 503): the
            # client cannot tell whether it was applied.
            with p.lock:
                p.charge_calls += 1
                first = p.charge_calls == 1
                k = key or f"anonymous-{p.charge_calls}"
                p.charges[k] = p.charges.get(k, 0) + 1 if key is None else 1
            if first:
                return self.send(503, {"error": "upstream timeout"})
            return self.send(200, {"id": "ch_1"})
        self.send(404, {"error": "no such path"})


@pytest.fixture()
def server() -> Iterator[tuple[str, Provider]]:
    provider = Provider()
    handler = type("H", (Handler,), {"provider": provider})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", provider
    httpd.shutdown()
    httpd.server_close()


def client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)


def chat_door(url: str, clock: VirtualClock, **options: Any) -> Any:
    oa = client(url)

    async def chat(prompt: str, *, target: str, key: str) -> str:
        r = await oa.chat.completions.create(
            model=target, messages=[{"role": "user", "content": prompt}],
            extra_headers={"Idempotency-Key": key})
        return r.choices[0].message.content or ""

    return recover(chat, call="llm", target="gpt-4o", clock=clock, seed=7, **options)


def test_quota_on_the_first_model_falls_back_to_the_next(server: tuple[str, Provider]) -> None:
    url, provider = server
    provider.script = {"gpt-4o": ["quota"]}
    chat = chat_door(url, VirtualClock(T0), fallbacks=["gpt-4o-mini"])
    assert asyncio.run(chat("hello")) == "hi from gpt-4o-mini"
    assert [h["model"] for h in provider.hits] == ["gpt-4o", "gpt-4o-mini"]
    assert len({h["key"] for h in provider.hits}) == 1  # one key on every target


def test_without_fallbacks_quota_raises_with_the_envelope(server: tuple[str, Provider]) -> None:
    url, provider = server
    provider.script = {"gpt-4o": ["quota"]}
    oa = client(url)

    @recover(call="llm", clock=VirtualClock(T0))
    async def chat(prompt: str) -> Any:
        return await oa.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": prompt}])

    with pytest.raises(RecoveryError) as e:
        asyncio.run(chat("hello"))
    assert e.value.code == "llm.quota.exhausted"
    # What retry() answered in the user trial: escalate after attempt 1 ... (no_fallback).
    assert (e.value.action, e.value.attempts, e.value.decision["reason"]) == ("escalate", 1, "no_fallback")
    assert e.value.decision["policy"]["name"] == Policy.load().name
    assert isinstance(e.value.__cause__, openai.RateLimitError)


def test_concurrent_calls_each_get_their_own_decision(server: tuple[str, Provider]) -> None:
    url, provider = server
    provider.script = {"gpt-4o": ["quota"], "o3": ["400"]}
    oa = client(url)

    @recover(call="llm", clock=VirtualClock(T0))
    async def chat(model: str) -> Any:
        return await oa.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])

    async def both() -> List[Any]:
        return await asyncio.gather(chat("gpt-4o"), chat("o3"), chat("gpt-4o-mini"), return_exceptions=True)

    quota, bad, ok = asyncio.run(both())
    assert isinstance(quota, RecoveryError) and quota.decision["envelope"]["code"] == "llm.quota.exhausted"
    assert isinstance(bad, RecoveryError) and bad.action == "fail" and bad.envelope["field"] == "temperature"
    assert ok.choices[0].message.content == "hi from gpt-4o-mini"


def test_retry_after_is_honoured_with_the_same_key(server: tuple[str, Provider]) -> None:
    url, provider = server
    provider.script = {"gpt-4o": ["rate", "ok"]}
    clock = VirtualClock(T0)
    chat = chat_door(url, clock)
    assert asyncio.run(chat("hello")) == "hi from gpt-4o"
    assert [h["model"] for h in provider.hits] == ["gpt-4o", "gpt-4o"]
    assert provider.hits[0]["key"] == provider.hits[1]["key"]
    assert clock.now_ms() - T0 >= 2_000  # the server's retry-after: 2 (seconds)


def test_a_dead_model_is_skipped_while_its_breaker_is_open(server: tuple[str, Provider]) -> None:
    url, provider = server
    provider.script = {"gpt-4o": ["503"]}
    clock = VirtualClock(T0)
    chat = chat_door(url, clock, fallbacks=["gpt-4o-mini"])
    with pytest.raises(RecoveryError):  # the reference: 3 LLM attempts, then dead-letter
        asyncio.run(chat("turn 1"))
    assert [h["model"] for h in provider.hits] == ["gpt-4o"] * 3
    # The breaker opened (3 consecutive transient failures): the next turns start at the fallback.
    assert asyncio.run(chat("turn 2")) == "hi from gpt-4o-mini"
    assert asyncio.run(chat("turn 3")) == "hi from gpt-4o-mini"
    assert [h["model"] for h in provider.hits[3:]] == ["gpt-4o-mini", "gpt-4o-mini"]
    # After the breaker's 30 s, one probe goes to the first model again.
    provider.script = {"gpt-4o": ["ok"]}
    clock.advance(30_000)
    assert asyncio.run(chat("turn 4")) == "hi from gpt-4o"


def test_errors_as_data_return_the_compact_model_rendering(server: tuple[str, Provider]) -> None:
    url, provider = server
    provider.script = {"gpt-4o": ["400"]}
    chat = chat_door(url, VirtualClock(T0), errors="model")
    out = asyncio.run(chat("hello"))
    assert set(out) == {"error"} and set(out["error"]) == {"code", "message", "retryable", "hint", "field"}
    assert out["error"]["field"] == "temperature"  # OpenAI's `param`
    assert out["error"]["retryable"] is False and out["error"]["code"].startswith("llm.")
    assert None not in out["error"].values()
    assert len(provider.hits) == 1  # a 400 is not retried


def test_runtime_renders_a_report_envelope_for_the_model(policy: Policy) -> None:
    runtime = Runtime(clock=VirtualClock(T0), seed=7)
    report = runtime.run("r1").step(
        id="s", tool="search", call="tool",
        operation=lambda call: openai_like_failure(),
    )
    assert report.outcome == "failed"
    rendered = runtime.render(report.envelope)
    assert rendered == policy.render(report.envelope, "model-tool-result")
    assert len(report.envelope) >= 15 and len(rendered["error"]) <= 5
    assert None not in rendered["error"].values()


def openai_like_failure() -> Any:
    from agent_recovery import Failed

    return Failed({"source": "http", "status": 404, "body": {"error": {"message": "no such tool"}}})


def test_payment_with_the_key_is_charged_once(server: tuple[str, Provider]) -> None:
    url, provider = server

    @recover(call="tool", side_effect=True, clock=VirtualClock(T0), seed=7)
    def charge(amount: int, *, key: str) -> Any:
        r = httpx.post(url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})
        r.raise_for_status()
        return r.json()

    assert charge(10) == {"id": "ch_1"}
    assert provider.charge_calls == 2
    assert list(provider.charges.values()) == [1]  # the service saw one key


def test_a_returned_response_is_judged_and_returned(server: tuple[str, Provider]) -> None:
    url, provider = server

    @recover(call="tool", side_effect=True, clock=VirtualClock(T0), seed=7)
    def charge(amount: int, *, key: str) -> httpx.Response:
        return httpx.post(url + "/charge", json={"amount": amount}, headers={"Idempotency-Key": key})

    r = charge(10)  # the first answer, a 503, is judged a failure by the component and retried
    assert isinstance(r, httpx.Response) and r.status_code == 200
    assert provider.charge_calls == 2 and list(provider.charges.values()) == [1]


def test_payment_without_the_key_warns_and_is_charged_twice(server: tuple[str, Provider]) -> None:
    url, provider = server
    with pytest.warns(KeyNotUsedWarning, match="applied twice"):

        @recover(call="tool", side_effect=True, clock=VirtualClock(T0), seed=7)
        def charge(amount: int) -> Any:
            r = httpx.post(url + "/charge", json={"amount": amount})
            r.raise_for_status()
            return r.json()

    assert charge(10) == {"id": "ch_1"}
    assert sum(provider.charges.values()) == 2  # why the warning exists


def test_no_warning_with_a_key_or_when_idempotent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recover(lambda *, key: key, side_effect=True)
        recover(lambda: 1, side_effect=True, idempotent=True)
        recover(lambda: 1)


def test_the_op_gets_the_key_target_and_attempt_and_ids_are_generated() -> None:
    seen: List[Any] = []

    @recover(clock=VirtualClock(T0), seed=7)
    def op(x: int, *, key: str, target: str, attempt: int) -> int:
        seen.append((key, target, attempt))
        if attempt == 1:
            raise ConnectionResetError("reset")
        return x * 2

    assert op(21) == 42
    assert op(21) == 42
    assert [s[2] for s in seen] == [1, 2, 1, 2]
    assert seen[0][0] == seen[1][0] and seen[0][0] != seen[2][0]  # a new run (key) per call
    assert seen[0][1] == op.__wrapped__.__qualname__ and len(seen[0][0]) == 64


def test_a_generated_run_id_is_the_function_name_and_a_uuid4() -> None:
    journaled: List[str] = []

    class Recording(MemoryStore):
        def compare_and_set(self, key: str, *rest: Any) -> Any:
            if key.startswith("agent-recovery/journal/"):
                journaled.append(key[len("agent-recovery/journal/"):])
            return super().compare_and_set(key, *rest)

    @recover(clock=VirtualClock(T0), seed=7, store=Recording())
    def lookup() -> int:
        return 1

    assert lookup() == 1 and lookup() == 1
    assert len(set(journaled)) == 2  # a run per call, journaled before its call
    for run_id in journaled:
        name, _, hex_ = run_id.partition("-")
        parsed = uuid.UUID(hex=hex_)
        assert (name, parsed.hex, parsed.version, parsed.variant) == ("lookup", hex_, 4, uuid.RFC_4122)


def test_unknown_options_and_injected_arguments_are_refused() -> None:
    with pytest.raises(PolicyError, match="no option 'fallback'"):
        recover(lambda: 1, fallback=["b"])
    with pytest.raises(PolicyError, match="no `target` parameter"):
        recover(lambda: 1, fallbacks=["b"])
    with pytest.raises(PolicyError, match="errors is 'raise' or 'model'"):
        recover(lambda: 1, errors="data")
    door = recover(lambda *, key: key)
    with pytest.raises(PolicyError, match="leave them out"):
        door(key="mine")


def test_retry_needs_no_ids_and_refuses_unknown_context() -> None:
    keys: List[str] = []

    def op(*, attempt: int, idempotency_key: str) -> str:
        keys.append(idempotency_key)
        if attempt == 1:
            raise ConnectionResetError("reset")
        return "done"

    assert retry_sync(op, sleep=lambda s: None, seed=7) == "done"
    assert len(set(keys)) == 1 and len(keys) == 2
    with pytest.raises(PolicyError, match="fallback_available"):
        retry_sync(op, sleep=lambda s: None, context={"fallback_available": True})


def test_the_wrapper_shows_the_callers_signature_without_the_injected_parameters() -> None:
    import inspect

    def charge(amount: int, currency: str = "usd", *, key: str, attempt: int) -> None:
        """Charge."""

    async def ask(prompt: str, *, target: str) -> None:
        """Ask."""

    for fn, expected in ((charge, ["amount", "currency"]), (ask, ["prompt"])):
        wrapped = recover(fn, side_effect=True, target="t") if fn is charge else recover(fn, target="a", fallbacks=["b"])
        assert list(inspect.signature(wrapped).parameters) == expected
        assert set(wrapped.__annotations__) == set(expected) | {"return"}
        assert wrapped.__doc__ == fn.__doc__
    assert set(charge.__annotations__) == {"amount", "currency", "key", "attempt", "return"}  # the original is untouched
