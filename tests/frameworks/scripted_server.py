"""A local model provider and payment tool that fail the way the real ones do.

One HTTP server on 127.0.0.1 serves:

- an OpenAI-compatible model API: `POST /v1/chat/completions` (JSON and
  server-sent events when `stream` is true) and `POST /v1/responses` (JSON);
- a payment tool, `POST /charge`, that honours the `Idempotency-Key` header
  the way Stripe documents it: a repeated key gets the first answer back and
  is not charged again;
- `POST /refund` (`{"charge": id}`), the undo of a charge, idempotent the
  same way (a repeated key is answered as the first and refunds nothing);
- a control API: `POST /_script` (replaces the script, resets the stats),
  `POST /_reset`, `GET /_stats`.

Every route answers from a script, a queue of scripted answers per route; an
empty queue answers with success. Routes are `model:<model name>` (or
`model:*` for any model), `charge` and `refund`. A scripted answer is an object:

    {"status": 429, "headers": {"retry-after": "2"}, "body": {...}}
    {"status": 503, "apply": true}   # charge: apply the charge, then fail
                                      # (the response is lost to the caller)
    {"stream_error": {"error": {...}}}  # a streamed model answer: the first
                                      # chunk, then this error event (the way
                                      # OpenAI reports a failure mid-stream)

A successful model answer calls the first tool the request offers when the
conversation has no tool result yet (with the arguments `tool_args` of the
script, `{}` by default), and otherwise answers the text `done`.

    python tests/frameworks/scripted_server.py   # prints {"port": N}, serves until killed

or, in Python tests, `with ScriptedServer() as server: server.url ...`.
Stats: requests per route, charges applied, refunds applied (`refunds`:
the charge ids, in order), and a log of every request
(route, status, milliseconds since the server started, idempotency key).
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


def error_body(kind: str) -> Dict[str, Any]:
    """The error body OpenAI sends for `kind` (`rate_limit`, `quota`, `overloaded`)."""
    if kind == "quota":
        return _QUOTA
    if kind == "rate_limit":
        return {
            "error": {
                "message": "Rate limit reached for requests",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    return {
        "error": {
            "message": "The server is overloaded or not ready yet.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.reset()

    def reset(self) -> None:
        self.queues: Dict[str, List[Dict[str, Any]]] = {}
        self.tool_args: Dict[str, Any] = {}
        self.requests: Dict[str, int] = {}
        self.charges: Dict[str, Dict[str, Any]] = {}
        self.applied = 0
        self.refunds: List[Any] = []
        self.refunded: Dict[str, Dict[str, Any]] = {}
        self.log: List[Dict[str, Any]] = []

    def next(self, route: str, fallback: Optional[str] = None) -> Optional[Dict[str, Any]]:
        with self.lock:
            self.requests[route] = self.requests.get(route, 0) + 1
            for name in (route, fallback):
                queue = self.queues.get(name) if name else None
                if queue:
                    return queue.pop(0)
            return None

    def record(self, route: str, status: int, key: Optional[str]) -> None:
        with self.lock:
            self.log.append(
                {
                    "route": route,
                    "status": status,
                    "ms": round((time.monotonic() - self.started) * 1000, 1),
                    "key": key,
                }
            )

    def stats(self) -> Dict[str, Any]:
        with self.lock:
            return {
                "requests": dict(self.requests),
                "charges": self.applied,
                "refunds": list(self.refunds),
                "log": list(self.log),
            }


def _completion(model: str, body: Dict[str, Any], tool_args: Any) -> Tuple[Optional[Dict[str, Any]], str]:
    """The tool call to make (or None) and the text to answer."""
    tools = body.get("tools") or []
    messages = body.get("messages") or body.get("input") or []
    answered = any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("type") == "function_call_output")
        for m in (messages if isinstance(messages, list) else [])
    )
    if tools and not answered:
        tool = tools[0]
        name = tool.get("function", {}).get("name") if "function" in tool else tool.get("name")
        return {"id": "call_" + uuid.uuid4().hex[:12], "name": name, "arguments": json.dumps(tool_args)}, ""
    return None, "done"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if self.path == "/_stats":
            self._send(200, self.server.state.stats())
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        state = self.server.state
        body = self._body()
        if self.path == "/_reset":
            with state.lock:
                state.reset()
            self._send(200, {"ok": True})
        elif self.path == "/_script":
            with state.lock:
                state.reset()
                state.queues = {k: list(v) for k, v in (body.get("queues") or {}).items()}
                state.tool_args = body.get("tool_args") or {}
            self._send(200, {"ok": True})
        elif self.path == "/charge":
            self._charge(body)
        elif self.path == "/refund":
            self._refund(body)
        elif self.path in ("/v1/chat/completions", "/v1/responses"):
            self._model(body)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _charge(self, body: Dict[str, Any]) -> None:
        state = self.server.state
        key = self.headers.get("Idempotency-Key")
        with state.lock:
            seen = state.charges.get(key) if key else None
        if seen is not None:
            state.next("charge")
            state.record("charge", seen["status"], key)
            self._send(seen["status"], seen["body"], {"Idempotent-Replayed": "true"})
            return
        scripted = state.next("charge") or {}
        status = int(scripted.get("status", 200))
        apply = scripted.get("apply", status < 400)
        charge = {"id": "ch_" + uuid.uuid4().hex[:12], "amount": body.get("amount"), "status": "succeeded"}
        if apply:
            with state.lock:
                state.applied += 1
                if key:
                    state.charges[key] = {"status": 200, "body": charge}
        state.record("charge", status, key)
        if status < 400:
            self._send(status, charge)
        else:
            self._send(status, scripted.get("body") or {"error": {"message": "service unavailable"}},
                       scripted.get("headers"))

    def _refund(self, body: Dict[str, Any]) -> None:
        state = self.server.state
        key = self.headers.get("Idempotency-Key")
        with state.lock:
            seen = state.refunded.get(key) if key else None
        scripted = state.next("refund") or {}
        if seen is not None:
            state.record("refund", 200, key)
            self._send(200, seen, {"Idempotent-Replayed": "true"})
            return
        status = int(scripted.get("status", 200))
        refund = {"id": "re_" + uuid.uuid4().hex[:12], "charge": body.get("charge"), "status": "succeeded"}
        if status < 400:
            with state.lock:
                state.refunds.append(body.get("charge"))
                if key:
                    state.refunded[key] = refund
        state.record("refund", status, key)
        if status < 400:
            self._send(status, refund)
        else:
            self._send(status, scripted.get("body") or {"error": {"message": "service unavailable"}},
                       scripted.get("headers"))

    def _model(self, body: Dict[str, Any]) -> None:
        state = self.server.state
        model = str(body.get("model", ""))
        route = "model:" + model
        scripted = state.next(route, "model:*")
        if scripted and int(scripted.get("status", 200)) >= 400:
            status = int(scripted["status"])
            state.record(route, status, None)
            self._send(status, scripted.get("body") or error_body("overloaded"), scripted.get("headers"))
            return
        state.record(route, 200, None)
        call, text = _completion(model, body, state.tool_args)
        if self.path == "/v1/responses":
            self._send(200, _response(model, call, text))
        elif body.get("stream"):
            self._stream(model, call, text, (scripted or {}).get("stream_error"))
        else:
            self._send(200, _chat(model, call, text))

    def _stream(self, model: str, call: Optional[Dict[str, Any]], text: str,
                error: Optional[Dict[str, Any]] = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        if call:
            delta: Dict[str, Any] = {"role": "assistant", "tool_calls": [
                {"index": 0, "id": call["id"], "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": text}
            finish = "stop"
        chunks = [
            dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
            dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                 usage={"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}),
        ]
        if error is not None:
            chunks[1:] = [error]
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if error is None:
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def _chat(model: str, call: Optional[Dict[str, Any]], text: str) -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "assistant", "content": text or None}
    if call:
        message["tool_calls"] = [{"id": call["id"], "type": "function",
                                  "function": {"name": call["name"], "arguments": call["arguments"]}}]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }


def _response(model: str, call: Optional[Dict[str, Any]], text: str) -> Dict[str, Any]:
    if call:
        output: List[Dict[str, Any]] = [{"type": "function_call", "id": "fc_" + call["id"], "call_id": call["id"],
                                         "name": call["name"], "arguments": call["arguments"],
                                         "status": "completed"}]
    else:
        output = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.state = _State()


class ScriptedServer:
    """The server on a free port of 127.0.0.1, in a thread of this process."""

    def __init__(self, port: int = 0) -> None:
        self._server = _Server(port)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, queues: Dict[str, List[Dict[str, Any]]], tool_args: Any = None) -> None:
        """Replace the script (and reset the stats)."""
        with self._server.state.lock:
            self._server.state.reset()
            self._server.state.queues = {k: list(v) for k, v in queues.items()}
            self._server.state.tool_args = tool_args or {}

    def stats(self) -> Dict[str, Any]:
        return self._server.state.stats()


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = _Server(port)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
