"""A real ASGI app served by uvicorn on 127.0.0.1 in a thread, for the protocol tests."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any, Callable, Dict, List, Optional

import uvicorn


class Served:
    """The app `make(url)` returns, served by uvicorn on 127.0.0.1 (`port` 0: a
    free port) until `stop()`."""

    def __init__(self, make: Callable[[str], Any], port: int = 0) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        self.port: int = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        #: The app being served.
        self.app = make(self.url)
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        self._sock = sock
        # Wait until uvicorn says it is serving (a hang guard, not a timing assumption).
        for _ in range(1000):
            if self.server.started or not self.thread.is_alive():
                break
            self.thread.join(0.01)
        assert self.server.started, "uvicorn did not start"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self._sock.close()
        assert not self.thread.is_alive(), "uvicorn did not stop"


class Recorder:
    """An ASGI wrapper that records the JSON bodies POSTed to the app (what came on the wire)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.bodies: List[Any] = []
        self.seen = threading.Condition()

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: List[bytes] = []
        done = False
        while not done:
            message = await receive()
            chunks.append(message.get("body", b""))
            done = not message.get("more_body", False)
        body = b"".join(chunks)
        with self.seen:
            try:
                self.bodies.append(json.loads(body))
            except ValueError:
                self.bodies.append(body)
            self.seen.notify_all()
        replayed = False

        async def replay() -> Dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def methods(self) -> List[str]:
        with self.seen:
            return [b.get("method") for b in self.bodies if isinstance(b, dict)]

    def find(self, method: str) -> List[Dict[str, Any]]:
        with self.seen:
            return [b for b in self.bodies if isinstance(b, dict) and b.get("method") == method]

    def wait_for(self, method: str, timeout: float = 30.0) -> Optional[Dict[str, Any]]:
        """The first body with this JSON-RPC method, waiting for it (a hang guard)."""
        with self.seen:
            self.seen.wait_for(lambda: any(isinstance(b, dict) and b.get("method") == method for b in self.bodies), timeout)
        found = self.find(method)
        return found[0] if found else None
