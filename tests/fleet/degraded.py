"""Idempotency across a Redis outage, with real worker processes.

    .venv/bin/python -m pytest -q tests/fleet/degraded.py

Workers of every language in ``AR_FLEET_LANGUAGES`` (tests/fleet/fleet.py)
share one machine: one `redis-server` (append-only file fsynced at every
write, so a SIGKILLed server restarts with what it acknowledged) and one spool
file. Runs completed while Redis answered, and runs completed while it was
paused (SIGSTOP) or dead (SIGKILL), are resubmitted (same run, step and args:
the same idempotency key) by other worker processes, several at once:
while Redis is paused, while it is dead, and after it restarted with its data.
Every key's side effect runs once in all (the ledger every worker writes), and
once the spool is flushed Redis holds each key's completed entry
(docs/store.md, "When Redis is down").
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet import LANGUAGES, NOW_MS, WORKER_TIMEOUT_S, Fleet, lang  # noqa: E402
from kill import op_key  # noqa: E402
from redis_server import RedisServer  # noqa: E402

from agent_recovery._redis_layout import RedisLayout  # noqa: E402
from agent_recovery.redis_store import FallbackStore  # noqa: E402
from agent_recovery.store import open_store  # noqa: E402

STEPS = [{"id": "charge"}]


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path / "redis", persist=True).start()
    try:
        yield srv
    finally:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.proc.send_signal(signal.SIGCONT)
        srv.stop()


def run_all(fleet: Fleet, run_ids: List[str], now_ms: int, shift: int) -> Dict[str, Dict[str, object]]:
    """One worker process per run, all at once; their result lines by run."""
    procs = []
    for i, run_id in enumerate(run_ids):
        language = lang(i + shift)
        procs.append((run_id, language, fleet.start(language, fleet.job("run", run_id, STEPS, now_ms + i))))
    return {run_id: fleet.finish(language, proc) for run_id, language, proc in procs}


def calls_per_key(fleet: Fleet, run_ids: List[str]) -> Dict[str, int]:
    return {run_id: len(fleet.calls(op_key(run_id, "charge"))) for run_id in run_ids}


def test_resubmitted_runs_never_run_twice_across_pause_kill_and_restart(
    server: RedisServer, tmp_path: Path
) -> None:
    fleet = Fleet(server, tmp_path, tmp_path / "cache", "outage")
    n = max(3, len(LANGUAGES))
    healthy = [f"h-{i}" for i in range(n)]
    paused = [f"p-{i}" for i in range(n)]
    dead = [f"d-{i}" for i in range(n)]

    # Healthy: completed on Redis.
    outs = run_all(fleet, healthy, NOW_MS, 0)
    assert {o["outcome"] for o in outs.values()} == {"completed"}, outs
    assert calls_per_key(fleet, healthy) == {r: 1 for r in healthy}

    # Paused: the completed runs resubmitted, new runs completed (locally).
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)
    outs = run_all(fleet, healthy + paused, NOW_MS + 10_000, 1)
    for run_id in healthy:
        assert outs[run_id]["outcome"] in ("cached", "completed"), outs[run_id]
    assert calls_per_key(fleet, healthy + paused) == {r: 1 for r in healthy + paused}, (
        "a resubmitted run ran its side effect again while Redis was paused"
    )
    server.proc.send_signal(signal.SIGCONT)

    # Dead: everything resubmitted, new runs completed (locally).
    server.kill()
    outs = run_all(fleet, healthy + paused + dead, NOW_MS + 20_000, 2)
    assert calls_per_key(fleet, healthy + paused + dead) == {r: 1 for r in healthy + paused + dead}, (
        "a resubmitted run ran its side effect again while Redis was dead"
    )

    # Restarted with its data: everything resubmitted once more.
    server.start()
    everything = healthy + paused + dead
    outs = run_all(fleet, everything, NOW_MS + 30_000, 0)
    assert calls_per_key(fleet, everything) == {r: 1 for r in everything}, (
        "a resubmitted run ran its side effect again after Redis restarted"
    )

    # The spool reaches Redis: a store on the same spool file flushes what is
    # left, in its background thread; then Redis has every key completed.
    store = open_store(fleet.url)
    assert isinstance(store, FallbackStore)
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    t = NOW_MS + 40_000
    while True:
        store.get("agent-recovery/ping", t)
        if not store.degraded and not store.reconnecting:
            break
        assert time.monotonic() < deadline, "the spool was never flushed"
        t += 1_000
        time.sleep(0.01)  # polling for a condition, not timing
    store.close()
    r = fleet.redis()
    for run_id in everything:
        raw = r.hget(RedisLayout(fleet.prefix).entry("agent-recovery/idem/" + op_key(run_id, "charge")), "v")
        assert raw is not None and json.loads(raw)["status"] == "done", (run_id, raw)


def test_a_run_completed_while_redis_was_dead_is_honoured_after_the_restart(
    server: RedisServer, tmp_path: Path
) -> None:
    """A process that finds another's spool serves its calls from it while its
    background thread flushes: the resubmitted run does not call again."""
    fleet = Fleet(server, tmp_path, tmp_path / "cache", "startup")
    server.kill()
    out = fleet.work(lang(0), fleet.job("run", "s-0", STEPS, NOW_MS))
    assert out["outcome"] == "completed", out
    server.start()
    out = fleet.work(lang(1), fleet.job("run", "s-0", STEPS, NOW_MS + 1_000))
    assert out["outcome"] in ("cached", "completed"), out
    assert len(fleet.calls(op_key("s-0", "charge"))) == 1, "the run's side effect ran again after the restart"


def test_a_run_a_degraded_process_completed_is_honoured_by_a_process_serving_redis(
    server: RedisServer, tmp_path: Path
) -> None:
    """Two long-lived runtimes of one machine on one spool file (every
    resubmission ends `ok` from the idempotency cache; the side effects are
    counted): `slow` stays
    degraded after Redis answers again (its next probe is an hour away), `fast`
    serves Redis again at once. A run `slow` completed in the spool only is
    resubmitted through `fast`: it must not run again. The same across a
    SIGKILL and a restart with its data; then Redis has every key completed
    (docs/store.md, "One place for mirrored keys")."""
    from agent_recovery.runtime import Call, Runtime, Step, SystemClock

    spool = tmp_path / "spool.sqlite"
    base = f"prefix=machine&timeout_ms=300&connect_timeout_ms=300&spool={spool}"
    slow = open_store(server.url(base + "&probe_ms=3600000"))
    fast = open_store(server.url(base + "&probe_ms=100"))
    assert isinstance(slow, FallbackStore) and isinstance(fast, FallbackStore)
    calls: Dict[str, int] = {}

    def charge(c: Call) -> Any:
        calls[c.key] = calls.get(c.key, 0) + 1
        return {"ok": True}

    runtimes = {name: Runtime(store=s, clock=SystemClock()) for name, s in (("slow", slow), ("fast", fast))}

    def submit(via: str, run_id: str) -> str:
        step = Step("charge", "t.charge", charge, args={"n": 1}, side_effect=True)
        return str(runtimes[via].run(run_id).step(step).outcome)

    assert submit("fast", "healthy") == "ok"
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)
    assert submit("slow", "paused") == "ok"  # degraded: completed in the spool file
    assert slow.degraded
    server.proc.send_signal(signal.SIGCONT)
    assert submit("slow", "after-pause") == "ok"  # still degraded: the spool file again
    assert slow.degraded and not fast.degraded

    for run_id in ("healthy", "paused", "after-pause"):
        assert submit("fast", run_id) == "ok", run_id
    assert sorted(calls.values()) == [1, 1, 1], "a run completed in the spool ran again through a process serving Redis"

    server.kill()
    assert submit("fast", "dead") == "ok"
    for run_id in ("healthy", "paused", "after-pause", "dead"):
        for via in ("slow", "fast"):
            assert submit(via, run_id) == "ok", (via, run_id)
    server.start()
    for run_id in ("healthy", "paused", "after-pause", "dead"):
        for via in ("slow", "fast"):
            assert submit(via, run_id) == "ok", (via, run_id)
    assert sorted(calls.values()) == [1, 1, 1, 1], calls

    # `fast` flushes the spool in its background thread; then Redis has
    # every key completed.
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while fast.degraded or fast.reconnecting or slow.local.read("agent-recovery/spool", _cursor(slow), 1):
        assert time.monotonic() < deadline, "the spool was never flushed"
        fast.get("agent-recovery/idem/x", int(time.time() * 1000))
        time.sleep(0.01)  # polling for a condition, not timing
    r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)
    for key in calls:
        raw = r.hget(RedisLayout("machine").entry("agent-recovery/idem/" + key), "v")
        assert raw is not None and json.loads(raw)["status"] == "done", (key, raw)
    for s in (slow, fast):
        s.close()


def _cursor(store: FallbackStore) -> int:
    """How far the spool file was flushed (its cursor entry, docs/store.md)."""
    got = store.local.get("agent-recovery/spool/cursor", 0)
    return int(json.loads(got.value)["seq"]) if got is not None else 0
