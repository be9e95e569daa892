"""The circuit breaker under a real race (docs/fallbacks-and-breakers.md,
"Many workers at once"): worker processes on one store, all failing on one
target at the same moment.

    .venv/bin/python -m pytest -q tests/fleet/breaker_race.py

Nine Python worker processes (tests/fleet/breaker_race_worker.py) share one
store: one `redis-server` started here, then one SQLite file. In each of 20
trials every worker runs a step on a fresh target with threshold 3; each
step reads the closed breaker, passes its gate and calls, and every call
waits at a barrier (files in a directory). The harness releases eight of
them at once: eight transient failures reported together. Then the ninth,
whose call also passed the gate before the breaker opened, fails late.

Checked on the store after each trial, read with the store's own `get`:
the breaker is open after the eight failures (a count that no update lost:
it opened at the third, `failures` is 3, not more than 8), and the late
failure changed nothing (still open, same epoch and window): a write from a
call that started before the transition never undoes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))

from redis_server import RedisServer  # noqa: E402

from agent_recovery.store import SqliteStore, open_store  # noqa: E402

WORKER = Path(__file__).with_name("breaker_race_worker.py")
TRIALS = 20
FAILING = 8
LATE = 8  # the ninth worker's index
WORKERS = FAILING + 1
WAIT_S = 60  # a bound on a hung worker, never a timing assertion


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield srv
    finally:
        srv.stop()


def wait_all(paths: List[Path], procs: List["subprocess.Popen[str]"]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(p.exists() for p in paths):  # waiting for the workers, not timing
        for proc in procs:
            if proc.poll() is not None and proc.returncode != 0:
                raise AssertionError(f"a worker exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        assert time.monotonic() < deadline, f"workers did not reach {[str(p) for p in paths if not p.exists()]}"
        time.sleep(0.002)


def race(where: str, directory: Path, cache: Path, read: Callable[[str], Dict[str, Any]]) -> List[int]:
    """Runs the trials; returns the stored `failures` after each trial's eight."""
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, AGENT_RECOVERY_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), where, str(directory), str(i), str(TRIALS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for i in range(WORKERS)
    ]
    counts = []
    try:
        for t in range(TRIALS):
            # Every worker's call passed the gate of the closed breaker.
            wait_all([directory / f"{t}.{i}.reached" for i in range(WORKERS)], procs)
            before = read(f"race-{t}")
            assert before.get("state", "closed") == "closed", before
            (directory / f"{t}.go").touch()
            wait_all([directory / f"{t}.{i}.done" for i in range(FAILING)], procs)
            opened = read(f"race-{t}")
            assert opened["state"] == "open", f"trial {t}: after {FAILING} failures the breaker is {opened}"
            assert opened["failures"] <= FAILING, opened
            assert opened["failures"] == 3, f"trial {t}: it opened at the third failure in store order: {opened}"
            counts.append(opened["failures"])
            # The late failure: its call passed the gate at the closed epoch.
            (directory / f"{t}.late").touch()
            wait_all([directory / f"{t}.{LATE}.done"], procs)
            after = read(f"race-{t}")
            assert after == opened, f"trial {t}: a stale failure changed the open breaker {opened} into {after}"
        for i, proc in enumerate(procs):
            out, err = proc.communicate(timeout=WAIT_S)
            assert proc.returncode == 0, f"worker {i} exited {proc.returncode}: {err.strip()}"
            outcomes = json.loads(out.splitlines()[-1])["outcomes"]
            assert len(outcomes) == TRIALS and "ok" not in outcomes, outcomes
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return counts


def test_eight_processes_on_redis_open_the_breaker_at_the_threshold(
    server: RedisServer, tmp_path: Path
) -> None:
    url = server.url("prefix=race")
    store = open_store(url)

    def read(target: str) -> Dict[str, Any]:
        got = store.get(f"agent-recovery/breaker/{target}", int(time.time() * 1000))
        return json.loads(got.value) if got is not None else {}

    counts = race(url, tmp_path / "barrier", tmp_path / "cache", read)
    assert counts == [3] * TRIALS


def test_eight_processes_on_one_sqlite_file_open_the_breaker_at_the_threshold(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(str(path), busy_timeout_s=10.0)  # creates the schema before the workers start

    def read(target: str) -> Dict[str, Any]:
        got = store.get(f"agent-recovery/breaker/{target}", int(time.time() * 1000))
        return json.loads(got.value) if got is not None else {}

    counts = race(str(path), tmp_path / "barrier", tmp_path / "cache", read)
    assert counts == [3] * TRIALS
