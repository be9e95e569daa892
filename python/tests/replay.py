"""A local HTTP server that replays scripted responses, for driving real SDK clients.

`Replay()` listens on 127.0.0.1 (an OS-chosen port) in a thread. Each request
gets the next scripted reply (`replay.push(...)`), or the default one:

- `{"status": 429, "headers": [["retry-after", "2"]], "body": {...} or "text"}`
- `{"action": "reset"}`: close the connection with a TCP RST (SO_LINGER 0)
- `{"action": "hang"}`: read the request, answer nothing until the client gives
  up (its own timeout) or the server stops

`replay.requests` records (method, path, headers, body) of every request.
`closed_port()` is a port with nothing listening (connection refused).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        replay = self.server.replay
        reply = replay.next_reply()
        with replay.lock:
            replay.requests.append((self.command, self.path, dict(self.headers), body))
        action = reply.get("action")
        if action == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if action == "hang":
            replay.stopping.wait()  # released by stop(); the client times out first
            self.close_connection = True
            return
        payload = reply.get("body", b"")
        if not isinstance(payload, (str, bytes)):
            payload = json.dumps(payload)
        data = payload.encode() if isinstance(payload, str) else payload
        self.send_response(int(reply.get("status", 200)))
        headers = [[k.lower(), v] for k, v in reply.get("headers", [])]
        if not any(k == "content-type" for k, _ in headers) and data:
            headers.append(["content-type", "application/json"])
        for k, v in headers:
            self.send_header(k, str(v))
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    replay: "Replay"


class Replay:
    """A scripted HTTP server on 127.0.0.1 (use as a context manager)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.requests: List[Any] = []
        self.default: Dict[str, Any] = {"status": 200, "body": {}}
        self._queue: List[Dict[str, Any]] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.replay = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def push(self, *replies: Dict[str, Any]) -> None:
        with self.lock:
            self._queue.extend(replies)

    def set(self, reply: Dict[str, Any]) -> None:
        """Answer every request with `reply` (and forget queued ones)."""
        with self.lock:
            self._queue.clear()
            self.default = reply
            self.requests.clear()

    def client_timeout(self, short: float, normal: float = 30.0) -> float:
        """`short` while the server is set to hang (the client must give up
        soon), else `normal`: a loaded machine never turns an answer into a timeout."""
        with self.lock:
            return short if self.default.get("action") == "hang" else normal

    def next_reply(self) -> Dict[str, Any]:
        with self.lock:
            return self._queue.pop(0) if self._queue else self.default

    def __enter__(self) -> "Replay":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def reply(status: int, body: Any = None, headers: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """A scripted reply."""
    return {"status": status, "headers": list((headers or {}).items()), "body": "" if body is None else body}
