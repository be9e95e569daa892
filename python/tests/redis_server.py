"""A real `redis-server` on 127.0.0.1 for the tests (never a fake).

Redis has no `--port 0`: a free port is picked by binding port 0, then the
server is started on it with no persistence (`--save '' --appendonly no`;
`persist=True`: an append-only file fsynced at every write) and waited for
until `INFO server` names its process id, so that another server that
happens to listen on the port is never taken for ours. A port picked here
may be taken by another process before the server binds it: the first start
then moves to a fresh port, as long as nobody was given the URL yet.
`kill()` sends SIGKILL; `start()` again restarts it on the same port (empty:
nothing was persisted).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

#: How long a starting server may take to answer (a hung start, not timing).
START_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Starts tried on fresh ports before giving up (a port taken meanwhile).
START_ATTEMPTS = 5


def server_pid(port: int) -> Optional[int]:
    """The process id of the Redis server answering on `port` (`INFO server`), or
    None when nothing answers there yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"INFO server\r\n")
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    return None
                data += chunk
            head, _, body = data.partition(b"\r\n")
            if not head.startswith(b"$"):
                return None  # an error (still loading) or not Redis
            size = int(head[1:])
            while len(body) < size:
                chunk = s.recv(4096)
                if not chunk:
                    return None
                body += chunk
    except (OSError, ValueError):
        return None
    for line in body[:size].decode(errors="replace").splitlines():
        if line.startswith("process_id:"):
            return int(line.split(":", 1)[1])
    return None


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
        #: The port may still move (see the module doc): picked here, never started, no URL given.
        self._movable = port is None
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def url(self, query: str = "") -> str:
        self._movable = False
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    def start(self) -> "RedisServer":
        attempt = 1
        while not self._launch():
            if not self._movable or attempt == START_ATTEMPTS:
                raise AssertionError(f"redis-server could not listen on port {self.port} (start {attempt}): {self._log()}")
            attempt += 1
            self.port = free_port()
        self._movable = False
        return self

    def _log(self) -> str:
        log = self.dir / "redis.log"
        return log.read_text(errors="replace")[-500:] if log.exists() else ""

    def _launch(self) -> bool:
        """Start the server on `self.port`: True once it answers as this
        process, False when it exited or another process answers on the port."""
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *aof,
                "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                return False
            pid = server_pid(self.port)
            if pid is not None:
                if pid == self.proc.pid:
                    return True
                self.proc.kill()  # another server has the port: ours cannot bind it
                self.proc.wait(timeout=10)
                return False
            assert time.monotonic() < deadline, f"redis-server on port {self.port} did not answer within {START_TIMEOUT_S:.0f} s: {self._log()}"
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
