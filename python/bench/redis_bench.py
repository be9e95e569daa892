"""The Redis store's cost per call, next to SQLite's, on a redis-server of its own.

    python python/bench/redis_bench.py [--rounds 2000]

Starts `redis-server` on a free port of 127.0.0.1 (no persistence), then runs
python/tests/store_worker.py's `bench` op (mean microseconds of `rounds`
read-then-compare-and-set increments of one key, and of `rounds` gets) on: a
bare `RedisStore` (`fallback=none`), the default `FallbackStore` over it, and
an `SqliteStore` file (`synchronous=full`) for comparison. One process, one
connection, loopback: the figures are round trips plus Lua, not throughput.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from redis_server import RedisServer  # noqa: E402


def bench(spec: str, rounds: int) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(
        [sys.executable, str(HERE.parent / "tests" / "store_worker.py"), spec],
        input=json.dumps({"op": "bench", "rounds": rounds}) + "\n",
        capture_output=True, text=True, check=True, timeout=600,
    )
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0]) == {"ready": True}, proc.stdout + proc.stderr
    return json.loads(lines[1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis").start()
        try:
            for name, spec in (
                ("redis (fallback=none)", server.url("fallback=none")),
                ("redis + fallback", server.url(f"prefix=fb&spool={tmp}/spool.sqlite")),
                ("sqlite (full)", f"{tmp}/store.db"),
            ):
                got = bench(spec, rounds)
                print(f"{name:24} increment {got['cas_us']:8.1f} us   get {got['get_us']:8.1f} us")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
