"""Generate conformance operations: every vector plus thousands of synthetic
observations built from real shapes, with a fixed seed, as JSON Lines.

    python3 tests/conformance/generate.py [--count N] [--seed S] > ops.jsonl
"""

import argparse
import json
import pathlib
import random
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

STATUSES = [400, 401, 402, 403, 404, 405, 408, 409, 410, 412, 413, 418, 422, 423, 425, 429, 451,
            500, 501, 502, 503, 504, 529, 599, 302, 200]
HEADER_CHOICES = [
    {}, {"Retry-After": "3"}, {"retry-after": "0.5"}, {"retry-after-ms": "1234"},
    {"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT", "Date": "Wed, 21 Oct 2026 07:28:00 GMT"},
    {"x-should-retry": "false"}, {"x-should-retry": "true"}, {"x-request-id": "req_abc"},
    {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, {"ratelimit-reset": "17"},
    {"retry-after": "soon"}, {"stripe-should-retry": "true", "request-id": "req_stripe"},
    {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/"},
    {"content-type": "application/problem+json"},
]
BODIES = [
    None, "", "<html>Bad Gateway</html>", "upstream connect error",
    {"error": {"message": "Rate limit reached", "type": "requests", "param": None, "code": "rate_limit_exceeded"}},
    {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}},
    {"error": {"message": "maximum context length is 8192 tokens", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_011"},
    {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}},
    {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
               "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}]}},
    {"error": {"code": 400, "message": "Invalid JSON payload", "status": "INVALID_ARGUMENT",
               "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "contents[0].parts", "description": "x"}]}]}},
    {"__type": "com.amazon.coral.availability#ThrottlingException", "message": "Rate exceeded"},
    "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>",
    {"error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds", "param": "payment_method", "message": "Your card was declined.", "doc_url": "https://stripe.com/docs/error-codes/card-declined"}},
    {"type": "https://example.com/probs/out-of-credit", "title": "You do not have enough credit.", "status": 403, "detail": "Your current balance is 30, but that costs 50.", "instance": "/account/12345/msgs/abc"},
    {"error": {"code": "INVALID_DATE_FORMAT", "message": "Field start_date must be ISO 8601.", "field": "start_date", "allowed_values": {"format": "date-time"}, "hint": "Use ISO 8601.", "retryable": False, "severity": "error", "category": "validation"}},
    {"error": "rate_limit", "message": "Try again in 60 seconds.", "retry_after": 60},
    {"choices": [{"index": 0, "finish_reason": "content_filter", "message": {"role": "assistant", "content": None}}]},
    {"type": "message", "role": "assistant", "stop_reason": "refusal", "content": []},
    {"promptFeedback": {"blockReason": "SAFETY"}},
    {"candidates": [{"finishReason": "MAX_TOKENS", "content": {"parts": [{"text": "partial"}]}}]},
    "{\"error\": {\"message\": \"truncated json",
    {"nested": [[[[{"deep": True}]]]]},
    "Ünïcödé body ✓ with emoji 🚀",
]
PROVIDERS = [None, None, "openai", "anthropic", "google", "aws", "stripe"]
CALLS = [None, "tool", "llm", "agent"]
NETWORK = ["ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN", "ENOTFOUND", "EPIPE", "UND_ERR_SOCKET",
           "UND_ERR_HEADERS_TIMEOUT", "CERT_HAS_EXPIRED", "EHOSTUNREACH", "ABORT_ERR", "E_SOMETHING", ""]
EXCEPTIONS = ["httpx.ReadTimeout", "httpx.ConnectTimeout", "httpx.ConnectError", "openai.RateLimitError",
              "anthropic.APIConnectionError", "asyncio.TimeoutError", "pydantic_ai.exceptions.ModelRetry",
              "requests.exceptions.ChunkedEncodingError", "json.decoder.JSONDecodeError", "builtins.KeyError",
              "java.net.SocketTimeoutException", "context.DeadlineExceeded", "ssl.SSLCertVerificationError"]
RPC_CODES = [-32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003, -32004, -32005, -32006,
             -32007, -32008, -32009, -32042, -32099, 7, -1]
STATES = ["failed", "rejected", "canceled", "input-required", "auth-required", "completed", "working",
          "TASK_STATE_FAILED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED", "unknown-state"]


def observation(r: random.Random) -> dict:
    kind = r.choice(["http"] * 5 + ["rpc"] * 3 + ["network", "exception", "timeout", "junk"])
    if kind == "http":
        obs = {"source": "http", "status": r.choice(STATUSES), "headers": r.choice(HEADER_CHOICES)}
        body = r.choice(BODIES)
        if body is not None:
            obs["body"] = body if not isinstance(body, dict) or r.random() < 0.7 else json.dumps(body)
    elif kind == "rpc":
        proto = r.choice(["jsonrpc", "mcp", "a2a"])
        shape = r.choice(["error", "error", "tool", "task", "cancel", "wrapped"])
        if shape == "error":
            err = {"code": r.choice(RPC_CODES), "message": r.choice(["boom", "Internal error", "Täsk timed out"])}
            if r.random() < 0.5:
                err["data"] = {"retryable": r.choice([True, False]), "retryAfter": r.choice([1, 2.5, 10, "3"])}
            msg = {"jsonrpc": "2.0", "id": r.randint(1, 99), "error": err}
        elif shape == "tool":
            msg = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "Error: failed"}], "isError": r.choice([True, False])}}
        elif shape == "task":
            msg = {"jsonrpc": "2.0", "id": 4, "result": {"id": "t-1", "status": {"state": r.choice(STATES),
                   "message": {"role": "agent", "parts": [{"kind": "text", "text": "Need more info"}]}}}}
        elif shape == "cancel":
            msg = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "r-9", "reason": "user"}}
        else:
            inner = {"code": r.choice(RPC_CODES), "message": "inner", "data": {"retryable": r.choice([True, False]), "retryAfter": 4}}
            msg = {"jsonrpc": "2.0", "id": "w", "error": {"code": -32603, "message": "Downstream failed",
                   "data": {"downstreamAgent": "b", "downstreamError": inner, "retryable": False}}}
        obs = {"source": proto, "message": msg}
    elif kind == "network":
        obs = {"source": "network", "code": r.choice(NETWORK), "message": "socket hang up"}
    elif kind == "exception":
        obs = {"source": "exception", "type": r.choice(EXCEPTIONS), "message": "x"}
    elif kind == "timeout":
        obs = {"source": "timeout", "phase": r.choice(["connect", "read", "write", "pool", "total", "lunch"]), "after_ms": r.choice([1, 5000, -1])}
    else:
        obs = r.choice([{"source": "carrier-pigeon"}, {"status": "teapot"}, {"headers": 5}, {}, {"source": "http", "status": 503, "headers": "x"}])
    call = r.choice(CALLS)
    if call:
        obs["call"] = call
    prov = r.choice(PROVIDERS)
    if prov:
        obs["provider"] = prov
    if r.random() < 0.2:
        obs["request_id"] = f"caller-{r.randint(1, 999)}"
    return obs


def context(r: random.Random) -> dict:
    ctx = {"attempt": r.randint(1, 6), "seed": r.choice([r.randint(0, 2**64 - 1), str(r.randint(0, 2**64 - 1)), r.randint(0, 1000)])}
    if r.random() < 0.5:
        ctx["elapsed_ms"] = r.choice([0, 1000, 30000, 59999, 60000, 90000])
    if r.random() < 0.3:
        ctx["call"] = r.choice(["tool", "llm", "agent"])
    for k in ["idempotent", "checkpoint_available", "fallback_available"]:
        if r.random() < 0.15:
            ctx[k] = r.choice([True, False])
    if r.random() < 0.1:
        ctx["compensations_pending"] = r.randint(0, 3)
    if r.random() < 0.15:
        ctx["config"] = r.choice([{"tool": {"max_attempts": 2}}, {"retry_budget_ms": 5000}, {"llm": {"base_ms": 10, "cap_ms": 5}}, {"bogus": 1}])
    if r.random() < 0.03:
        ctx = r.choice([{"attempt": 0}, {"attempt": "one"}, {"seed": -1}, {"typo": True}])
    return ctx


def ops(count: int, seed: int):
    for f in sorted((ROOT / "tests" / "vectors").glob("*.json")):
        for case in json.loads(f.read_text()):
            obs = json.dumps(case["observation"])
            yield {"op": "classify", "observation": obs}
            if "context" in case:
                ctx = dict(case["context"])
                # Without a seed the jitter comes from WASI random: seed it so runtimes can agree.
                ctx.setdefault("seed", 1)
                yield {"op": "decide", "observation": obs, "context": json.dumps(ctx)}
    r = random.Random(seed)
    for _ in range(count):
        obs = json.dumps(observation(r), ensure_ascii=r.random() < 0.5)
        yield {"op": "classify", "observation": obs}
        yield {"op": "decide", "observation": obs, "context": json.dumps(context(r))}
    for i in range(200):
        args = {"amount": r.randint(1, 10**6), "currency": r.choice(["usd", "eur"]), "meta": {"b": i, "a": [1, 2.0, "ü"]}}
        yield {"op": "key", "run_id": f"run-{i % 7}", "step_id": f"step-{i}", "tool": "charge", "args": json.dumps(args, sort_keys=r.random() < 0.5)}
        yield {"op": "backoff", "call": r.choice(["tool", "llm", "agent"]), "attempt": r.randint(1, 40), "seed": r.randint(0, 2**64 - 1)}
    yield {"op": "key", "run_id": "r", "step_id": "s", "tool": "t", "args": "{not json"}
    yield {"op": "backoff", "call": "tool", "attempt": 0, "seed": 1}
    yield {"op": "classify", "observation": "{\"source\": \"http\", \"status\": 503, \"body\": \"" + "x" * 200_000 + "\"}"}
    yield {"op": "classify", "observation": "[" * 200 + "]" * 200}
    yield {"op": "classify", "observation": "not json at all"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=20261122)
    a = ap.parse_args()
    for op in ops(a.count, a.seed):
        sys.stdout.write(json.dumps(op) + "\n")
