"""A real `redis-server` on 127.0.0.1 for the tests (never a fake).

Redis has no `--port 0`: a free port is picked by binding port 0, then the
server is started on it with no persistence (`--save '' --appendonly no`;
`persist=True`: an append-only file fsynced at every write) and waited for
with PING. `kill()` sends SIGKILL; `start()` again restarts it on
the same port (empty: nothing was persisted).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

#: How long a starting server may take to answer PING (a hung start, not timing).
START_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_server_exe() -> str:
    exe = shutil.which("redis-server")
    if exe is None:
        raise AssertionError(
            "redis-server is not on PATH; install it (Debian: apt-get install -y redis-server; "
            "scripts/test-all.sh does it when missing)"
        )
    return exe


class RedisServer:
    """One redis-server process on a free port of 127.0.0.1."""

    def __init__(self, directory: Path, port: Optional[int] = None, persist: bool = False) -> None:
        #: `persist`: append-only file fsynced at every write, so a SIGKILLed
        #: server restarts with everything it acknowledged.
        self.persist = persist
        self.exe = redis_server_exe()
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def url(self, query: str = "") -> str:
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    def start(self) -> "RedisServer":
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *aof,
                "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                log = (self.dir / "redis.log").read_text(errors="replace") if (self.dir / "redis.log").exists() else ""
                raise AssertionError(f"redis-server exited {self.proc.returncode} on port {self.port}: {log[-500:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            assert time.monotonic() < deadline, f"redis-server on port {self.port} did not answer PING"
            time.sleep(0.02)  # polling for readiness, not timing

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
