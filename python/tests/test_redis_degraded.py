"""What `FallbackStore(RedisStore, SqliteStore)` honours while degraded,
against a real redis-server the test starts, pauses (SIGSTOP), resumes and
kills: idempotency entries written while healthy are seen while degraded; the
flush's conflict rule (a spooled claim never replaces an entry Redis has, a
spooled write does); the probe and the flush run on the background thread,
never in a caller's store call (docs/store.md, "When Redis is down")."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from agent_recovery.redis_store import FallbackStore, RedisStore
from agent_recovery.store import Conflict, SqliteStore, Written

from .redis_server import RedisServer
from .test_redis_store import T0, until_restored

KEY = "agent-recovery/idem/run-1/charge/abc"
IN_FLIGHT = '{"status":"in_flight","since_ms":1}'
DONE = '{"status":"done","result":{"ok":true},"target":"t","at_ms":2}'


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path / "redis").start()
    try:
        yield srv
    finally:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.proc.send_signal(signal.SIGCONT)
        srv.stop()


def pause(srv: RedisServer, sig: signal.Signals) -> None:
    assert srv.proc is not None
    srv.proc.send_signal(sig)


def fallback(srv: RedisServer, tmp_path: Path, prefix: str, timeout_ms: int = 300) -> Tuple[FallbackStore, List[Tuple[Any, str]]]:
    """A store over Redis and a spool file; its events with the thread that emitted each."""
    heard: List[Tuple[Any, str]] = []
    primary = RedisStore(srv.url(f"prefix={prefix}&timeout_ms={timeout_ms}&connect_timeout_ms={timeout_ms}"))
    store = FallbackStore(
        primary,
        SqliteStore(tmp_path / f"{prefix}.sqlite"),
        probe_ms=100,
        on_event=lambda text: heard.append((json.loads(text), threading.current_thread().name)),
    )
    return store, heard


def direct(srv: RedisServer, prefix: str) -> RedisStore:
    return RedisStore(srv.url(f"prefix={prefix}&fallback=none"))


def put(store: Any, key: str, value: str, now: int) -> None:
    cur = store.get(key, now)
    assert isinstance(store.compare_and_set(key, cur.version if cur else None, value, 600_000, now), Written)


def test_a_key_completed_while_healthy_is_honoured_while_paused_and_while_dead(
    server: RedisServer, tmp_path: Path
) -> None:
    store, _ = fallback(server, tmp_path, "seen")
    assert isinstance(store.compare_and_set(KEY, None, IN_FLIGHT, 600_000, T0), Written)
    put(store, KEY, DONE, T0 + 1)
    assert not store.degraded

    pause(server, signal.SIGSTOP)
    seen = store.get(KEY, T0 + 2)
    assert store.degraded, "a paused Redis degrades the store"
    assert seen is not None and seen.value == DONE
    # A second claim of the key loses, as it would on Redis.
    cas = store.compare_and_set(KEY, None, IN_FLIGHT, 600_000, T0 + 3)
    assert not isinstance(cas, Written) and cas.current is not None and cas.current.value == DONE
    pause(server, signal.SIGCONT)
    until_restored(store, T0 + 200)

    server.kill()
    seen = store.get(KEY, T0 + 10_000)
    assert store.degraded, "a dead Redis degrades the store"
    assert seen is not None and seen.value == DONE
    store.close()


def test_a_completed_entry_wins_over_an_in_flight_claim_when_the_spool_is_flushed(
    server: RedisServer, tmp_path: Path
) -> None:
    store, _ = fallback(server, tmp_path, "rule")
    redis = direct(server, "rule")
    other = "agent-recovery/idem/run-2/charge/def"
    assert isinstance(store.compare_and_set(KEY, None, IN_FLIGHT, 600_000, T0), Written)  # in the spool file too
    put(redis, other, DONE, T0)  # by a worker of another machine: not in the spool file

    pause(server, signal.SIGSTOP)
    put(store, KEY, DONE, T0 + 1)  # completed here while degraded: a write over the claim
    assert store.degraded
    # Claimed here while degraded: this machine cannot see the other's entry.
    assert isinstance(store.compare_and_set(other, None, IN_FLIGHT, 600_000, T0 + 2), Written)
    pause(server, signal.SIGCONT)
    until_restored(store, T0 + 200)

    def got(key: str) -> Any:
        v = redis.get(key, T0 + 300)
        return v.value if v else None

    assert got(KEY) == DONE, "the completed entry replaced the claim"
    assert got(other) == DONE, "the spooled claim did not replace the completed entry"
    store.close()


def test_the_probe_and_the_flush_run_on_the_background_thread_not_in_the_call(
    server: RedisServer, tmp_path: Path
) -> None:
    # A long timeout: a probe of the paused server stays in progress long
    # after the call that started it has returned.
    store, heard = fallback(server, tmp_path, "bg", timeout_ms=2_000)
    store.get("x", T0)
    pause(server, signal.SIGSTOP)
    store.get("x", T0 + 1)  # a read degrades it (a timed-out write may still land on resume)
    assert store.degraded
    store.append("agent-recovery/dead-letter", '{"n":1}', T0 + 2)
    # Due to probe: the call starts it and is served locally at once, while
    # the probe still waits for the paused server.
    assert store.get(KEY, T0 + 500) is None
    assert store.reconnecting, "the call returned only after the probe ended: it ran in the call"
    store.append("agent-recovery/dead-letter", '{"n":2}', T0 + 600)
    assert store.reconnecting and store.degraded
    pause(server, signal.SIGCONT)
    until_restored(store, T0 + 700)

    restored = [(e, name) for e, name in heard if e["event"] == "store_restored"]
    assert len(restored) == 1 and restored[0][0]["flushed"] == 2, heard
    assert restored[0][1] == "agent-recovery-flush", "the flush ran on the caller's thread"
    assert [json.loads(r) for _, r in direct(server, "bg").read("agent-recovery/dead-letter", 0, 10)] == [
        {"n": 1},
        {"n": 2},
    ]
    store.close()


def test_a_key_a_degraded_process_completed_in_the_spool_is_honoured_by_one_serving_redis(
    server: RedisServer, tmp_path: Path
) -> None:
    """Two processes of one machine on one spool file: `a` (degraded, its
    next probe an hour away) completes a key in the spool only; `b`, serving
    Redis, must see it and lose its claim, and flushes it to Redis."""
    url = server.url("prefix=machine&timeout_ms=300&connect_timeout_ms=300")
    spool = tmp_path / "spool.sqlite"
    a = FallbackStore(RedisStore(url), SqliteStore(spool), probe_ms=3_600_000)
    b = FallbackStore(RedisStore(url), SqliteStore(spool), probe_ms=100)
    b.get("agent-recovery/ping", T0)
    pause(server, signal.SIGSTOP)
    a.get("agent-recovery/ping", T0)
    assert a.degraded
    pause(server, signal.SIGCONT)

    assert isinstance(a.compare_and_set(KEY, None, IN_FLIGHT, 600_000, T0 + 1), Written)
    put(a, KEY, DONE, T0 + 2)
    assert a.degraded and not b.degraded
    redis = direct(server, "machine")
    assert redis.get(KEY, T0 + 3) is None

    seen = b.get(KEY, T0 + 3)
    assert seen is not None and seen.value == DONE, seen
    cas = b.compare_and_set(KEY, None, IN_FLIGHT, 600_000, T0 + 4)
    assert isinstance(cas, Conflict) and cas.current is not None and cas.current.value == DONE, cas

    now = T0 + 200
    deadline = time.monotonic() + 60
    while redis.get(KEY, now) is None or b.reconnecting:
        assert time.monotonic() < deadline, "never flushed"
        b.get(KEY, now)
        now += 200
        time.sleep(0.005)  # polling for a condition, not timing
    got = redis.get(KEY, now)
    assert got is not None and got.value == DONE
    seen = b.get(KEY, now)
    assert seen is not None and seen.value == DONE
    for s in (a, b, redis):
        s.close()


def test_while_redis_is_dead_probes_are_bounded_by_probe_ms_and_the_spool_reaches_redis_after_a_restart(
    server: RedisServer, tmp_path: Path
) -> None:
    from agent_recovery.runtime import Runtime, VirtualClock

    probe_ms = 1_000
    store = FallbackStore(
        RedisStore(server.url("prefix=probes&timeout_ms=300&connect_timeout_ms=300")),
        SqliteStore(tmp_path / "probes.sqlite"),
        probe_ms=probe_ms,
    )
    # A virtual clock: the runtime passes its time to every store call, so
    # the probe interval is counted in virtual milliseconds, nothing sleeps.
    clock = VirtualClock(T0)
    rt = Runtime(store=store, clock=clock)

    def step(run: str) -> str:
        report = rt.run(run).step(id="charge", tool="payments.charge", call="tool", operation=lambda call: {"ok": True})
        return str(report.outcome)

    assert step("healthy") == "ok"
    assert not store.degraded and store.probes == 0

    server.kill()
    start = clock.now_ms()
    for i in range(40):
        clock.advance(100)
        assert step(f"down-{i}") == "ok"
    assert store.degraded, "a dead Redis degrades the store"
    span = clock.now_ms() - start
    # Every store call of the 40 steps was due to probe if nothing bounded
    # it; at most one probe starts per probe_ms of the calls' now_ms.
    probes = store.probes
    assert 1 <= probes <= span // probe_ms + 1, f"{probes} probes in {span} virtual ms with probe_ms {probe_ms}"

    # Restarted empty (no persistence): what reaches Redis is what the spool
    # held, the idempotency entries of the 40 steps run while it was dead.
    server.start()
    now = until_restored(store, clock.now_ms() + probe_ms)
    redis = direct(server, "probes")
    keys = redis.keys("agent-recovery/idem/", now)
    assert len(keys) == 40, keys
    for key in keys:
        got = redis.get(key, now)
        assert got is not None and json.loads(got.value)["status"] == "done", (key, got)
    assert store.probes > probes, "the restart was found by a probe"
    store.close()
