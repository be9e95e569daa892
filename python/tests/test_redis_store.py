"""The Redis store and its fallback spool, against a real redis-server.

Every test talks to a `redis-server` this module starts on a free port of
127.0.0.1 (python/tests/redis_server.py); when redis-server is missing the
tests fail saying to install it. What Redis holds is checked with redis-py's
own commands (XRANGE, HGETALL), not through our store.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis

from agent_recovery._redis_layout import RedisLayout
from agent_recovery.redis_store import FallbackStore, RedisStore, RedisUrl, ServerClock, script_text
from agent_recovery.runtime import RawOutcome, Runtime, SystemClock, VirtualClock
from agent_recovery.store import SqliteStore, StoreError, open_store

from .conftest import repo_root
from .redis_server import RedisServer, free_port
from .store_ops import TIME_FLOOR, Rebased
from .test_store import cases, run_case

T0 = 1_767_225_600_000
UNAVAILABLE = {"source": "http", "status": 503}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield srv
    finally:
        srv.stop()


_prefixes = iter(range(10**6))


def fresh(server: RedisServer, query: str = "") -> str:
    """A URL with a prefix no other test used (one store per test on one server)."""
    q = f"prefix=t{next(_prefixes)}" + (f"&{query}" if query else "")
    return server.url(q)


def until_restored(store: Any, t: int) -> int:
    """Call the store at later virtual times until its background thread has
    probed and flushed and it serves Redis again (polling, not timing)."""
    deadline = time.monotonic() + 60
    while True:
        store.get("agent-recovery/ping", t)
        if not store.degraded and not store.reconnecting:
            return t
        assert time.monotonic() < deadline, "the store never left degraded mode"
        if not store.reconnecting:  # virtual time stands still while a flush runs
            t += 1_000
        time.sleep(0.005)


def raw(server: RedisServer) -> "redis.Redis[bytes]":
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)


# ---- the scripts -----------------------------------------------------------------


def test_the_packaged_scripts_are_the_rust_scripts_byte_for_byte() -> None:
    originals = sorted((repo_root() / "host" / "src" / "store" / "redis").glob("*.lua"))
    assert len(originals) == 5
    for lua in originals:
        assert script_text(lua.stem) == lua.read_text(encoding="utf-8"), f"{lua.name} differs; reinstall the package"


# ---- the vectors -------------------------------------------------------------------


def test_redis_store_passes_the_shared_vectors(server: RedisServer) -> None:
    failures: List[str] = []
    for case in cases():
        with RedisStore(fresh(server)) as store:
            run_case("redis", Rebased(store), case, failures)  # type: ignore[arg-type]
    assert not failures, "\n".join(failures)


def test_fallback_store_over_redis_passes_the_shared_vectors(server: RedisServer, tmp_path: Path) -> None:
    failures: List[str] = []
    for n, case in enumerate(cases()):
        store = FallbackStore(RedisStore(fresh(server)), SqliteStore(tmp_path / f"spool-{n}.sqlite"))
        run_case("fallback", Rebased(store), case, failures)  # type: ignore[arg-type]
        assert not store.degraded
        store.close()
    assert not failures, "\n".join(failures)


def test_the_layout_is_the_documented_one(server: RedisServer) -> None:
    url = fresh(server)
    tag = "{" + RedisUrl(url).options["prefix"] + "}"
    with RedisStore(url) as store:
        store.compare_and_set("breaker/api", None, '{"state":"open"}', 5_000, T0)
        seq = store.append("journal", '{"a":1}', T0)
    r = raw(server)
    # host/src/store/redis/README.md
    entry = "{" + RedisUrl(url).options["prefix"] + ":" + hashlib.sha256(b"breaker/api").hexdigest()[:8] + "}:e:breaker/api"
    stream = "{" + RedisUrl(url).options["prefix"] + ":" + hashlib.sha256(b"journal").hexdigest()[:8] + "}:s:journal"
    assert r.hgetall(f"{tag}:meta") == {b"app": b"agent-recovery", b"schema": b"2"}
    assert r.get(f"{tag}:rev") == b"1"
    assert r.hgetall(entry) == {
        b"v": b'{"state":"open"}', b"n": b"1", b"x": str(T0 + 5_000).encode(), b"u": str(T0).encode()}
    # Redis itself expires the hash ttl + grace_ms (60 000 by default) after the write.
    assert 60_000 < r.pttl(entry) <= 65_000
    assert seq >= TIME_FLOOR
    assert r.xrange(stream) == [(f"{seq}-0".encode(), {b"r": b'{"a":1}', b"t": str(T0).encode()})]


def test_the_layout_matches_the_shared_vectors() -> None:
    from redis.crc import key_slot

    from agent_recovery._redis_layout import RedisLayout

    doc = json.loads((repo_root() / "tests" / "store" / "redis-layout.json").read_text(encoding="utf-8"))
    assert len(doc["cases"]) >= 10
    for case in doc["cases"]:
        layout = RedisLayout(case["prefix"])
        name = case.get("name", "")
        kind = case["kind"]
        if kind == "entry":
            got = layout.entry(name)
        elif kind == "stream":
            got = layout.stream(name)
        elif kind == "meta":
            got = layout.meta
        elif kind == "rev":
            got = layout.rev
        else:
            got = layout.entry_pattern(name)
        assert got == case["redis_key"], case
        if case["kind"] == "entry":
            assert layout.key_of(got) == name
        if "slot" in case:
            # redis-py's own CRC16 of the hash tag.
            assert key_slot(got.encode("utf-8")) == case["slot"], got


# ---- URLs, open_store, errors --------------------------------------------------------


def test_url_options_defaults_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    u = RedisUrl("redis://bob:s3cret@example.org:7000/3")
    assert u.options == {"prefix": "ar", "timeout_ms": 1000, "connect_timeout_ms": 1000, "fallback": "local",
                         "spool": None, "probe_ms": 1000, "grace_ms": 60000}
    assert (u.host, u.port, u.db, u.username, u.password) == ("example.org", 7000, 3, "bob", "s3cret")
    assert "s3cret" not in u.display and u.hash_tag == "{ar}"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    # The spool's name: the first 16 hex of sha256 of the store's identity (docs/store.md),
    # the same text in Rust and Node: no credentials, no other option.
    h = hashlib.sha256(b"redis://example.org:7000/3?prefix=ar").hexdigest()[:16]
    assert u.spool_path() == tmp_path / "agent-recovery" / f"spool-{h}.sqlite"
    for url, identity in [
        ("redis://user:secret@DB.example:6380/2?timeout_ms=5&prefix=x", b"redis://db.example:6380/2?prefix=x"),
        ("redis://127.0.0.1", b"redis://127.0.0.1:6379/0?prefix=ar"),
        ("redis://[::1]:7000/3", b"redis://[::1]:7000/3?prefix=ar"),
    ]:
        digest = hashlib.sha256(identity).hexdigest()[:16]
        assert RedisUrl(url).spool_path() == tmp_path / "agent-recovery" / f"spool-{digest}.sqlite", url
    assert RedisUrl("redis://h/0?spool=/x/y.db").spool_path() == Path("/x/y.db")
    for bad, words in [
        ("redis://h/0?colour=red", "prefix, timeout_ms, connect_timeout_ms, fallback, spool, probe_ms, grace_ms"),
        ("redis://h/0?timeout_ms=fast", "timeout_ms"),
        ("redis://h/0?fallback=maybe", "local or none"),
        ("redis://h/zero", "not a number"),
        ("redis://h/0?prefix=a}b", "prefix"),
    ]:
        with pytest.raises(StoreError) as e:
            open_store(bad)
        assert e.value.kind == "invalid_argument" and words in e.value.message and "; " in e.value.message


def test_open_store_picks_the_backend(server: RedisServer, tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path / "s.db"), SqliteStore)
    bare = open_store(fresh(server, "fallback=none"))
    assert isinstance(bare, RedisStore)
    wrapped = open_store(fresh(server, f"spool={tmp_path / 'sp.sqlite'}"))
    assert isinstance(wrapped, FallbackStore) and isinstance(wrapped.primary, RedisStore)
    assert (tmp_path / "sp.sqlite").is_file()
    bare.close()
    wrapped.close()


def test_error_kinds(server: RedisServer, tmp_path: Path) -> None:
    # Nothing listens: unavailable, at once (connection refused).
    dead = f"redis://127.0.0.1:{free_port()}/0?fallback=none"
    with pytest.raises(StoreError) as e:
        open_store(dead)
    assert e.value.kind == "unavailable" and "; " in e.value.message
    # A password Redis refuses: io, and the message hides it.
    with pytest.raises(StoreError) as e:
        RedisStore(f"redis://someone:hunter2@127.0.0.1:{server.port}/0")
    assert e.value.kind == "io" and "hunter2" not in e.value.message and "password" in e.value.message
    # Another program's keys under the prefix.
    url = fresh(server)
    tag = RedisUrl(url).hash_tag
    r = raw(server)
    r.hset(f"{tag}:meta", mapping={"app": "billing", "schema": "4"})
    with pytest.raises(StoreError) as e:
        RedisStore(url)
    assert e.value.kind == "incompatible" and "billing" in e.value.message and "'4'" in e.value.message
    # A key of the wrong type where an entry hash belongs: corrupt.
    url = fresh(server)
    tag = RedisUrl(url).hash_tag
    with RedisStore(url) as store:
        r.set(RedisLayout(RedisUrl(url).options["prefix"]).entry("k"), "not a hash")
        with pytest.raises(StoreError) as e:
            store.get("k", T0)
        assert e.value.kind == "corrupt"
        # Argument checks run first, before Redis is asked.
        with pytest.raises(StoreError) as e:
            store.compare_and_set("k", 0, "{}", None, T0)
        assert e.value.kind == "invalid_argument"


def test_the_server_clock_follows_redis_time(server: RedisServer) -> None:
    with RedisStore(fresh(server)) as store:
        clock = store.server_clock()
        assert isinstance(clock, ServerClock) and store.server_clock() is clock
        before = store.time_ms()
        now = clock.now_ms()
        after = store.time_ms()
        # Within the round trip, give or take the two ms truncations (TIME's
        # microseconds and the local clock's nanoseconds).
        assert before - 2 <= now <= after + 2
        seen = [clock.now_ms() for _ in range(200)]
        assert seen == sorted(seen), "never goes backwards"
        # A runtime on a redis store reads this clock unless given one.
        assert Runtime(store=store).clock is clock
        assert isinstance(Runtime(store=store, clock=SystemClock()).clock, SystemClock)


def test_the_server_clock_falls_back_when_redis_is_unreachable() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0?timeout_ms=200&connect_timeout_ms=200", connect=False)
    clock = store.server_clock()
    start = time.monotonic()
    now = clock.now_ms()
    assert time.monotonic() - start < 0.4 + 0.25  # bound: timeout + connect timeout (+ scheduling slack)
    assert clock.offset_ms == 0 and abs(now - time.time_ns() // 1_000_000) < 1_000


# ---- six processes -------------------------------------------------------------------


class Worker:
    """python/tests/store_worker.py on a store spec (here a redis:// URL)."""

    def __init__(self, spec: str) -> None:
        script = Path(__file__).resolve().parent / "store_worker.py"
        self.proc = subprocess.Popen([sys.executable, str(script), spec], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.answer() == {"ready": True}

    def send(self, op: Dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(op) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> Any:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def test_six_processes_increment_one_counter_through_redis(server: RedisServer) -> None:
    url = fresh(server, "fallback=none")
    ws = [Worker(url) for _ in range(6)]
    rounds = 40
    for w in ws:
        w.send({"op": "increment", "key": "counter", "rounds": rounds, "now_ms": 5})
    wins: List[Tuple[int, int]] = []
    for w in ws:
        got = w.answer()
        assert "wins" in got, got
        wins += [(n, v) for n, v in got["wins"]]
    for w in ws:
        w.close()
    with RedisStore(url) as store:
        last = store.get("counter", 5)
    assert last is not None
    total = int(last.value)
    # Each value was incremented by exactly one process; versions are consecutive.
    assert sorted(wins) == [(n, n + 1) for n in range(total)]
    assert last.version == total and total >= rounds


def test_six_processes_append_to_one_stream_through_redis(server: RedisServer) -> None:
    url = fresh(server, "fallback=none")
    ws = [Worker(url) for _ in range(6)]
    per = 25
    for i, w in enumerate(ws):
        for j in range(per):
            w.send({"op": "append", "stream": "journal", "record": json.dumps({"w": i, "j": j}), "now_ms": 7})
    seqs: Dict[int, str] = {}
    for i, w in enumerate(ws):
        mine = [w.answer() for _ in range(per)]
        assert mine == sorted(mine)
        for j, seq in enumerate(mine):
            assert seq not in seqs
            seqs[seq] = json.dumps({"w": i, "j": j})
    for w in ws:
        w.close()
    rows = raw(server).xrange(RedisLayout(RedisUrl(url).options["prefix"]).stream("journal"))
    # One number each, no gap: the stream's first (a time floor) and those after it.
    first = min(seqs)
    assert first >= TIME_FLOOR and sorted(seqs) == list(range(first, first + 6 * per))
    assert [(int(rid.split(b"-")[0]), f[b"r"].decode()) for rid, f in rows] == sorted(seqs.items())


# ---- Redis killed mid-sequence ------------------------------------------------------


def test_redis_killed_mid_sequence_spools_then_flushes_in_order(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "redis").start()
    try:
        timeout_ms, connect_ms = 300, 300
        url = srv.url(f"timeout_ms={timeout_ms}&connect_timeout_ms={connect_ms}&probe_ms=1000"
                      f"&spool={tmp_path / 'spool.sqlite'}")
        events: List[Dict[str, Any]] = []
        store = open_store(url, on_event=lambda text: events.append(json.loads(text)))
        assert isinstance(store, FallbackStore)
        dl = "agent-recovery/dead-letter"
        journal = "agent-recovery/journal/run-1"
        assert store.append(dl, '{"n":1}', T0) >= TIME_FLOOR
        assert store.compare_and_set(journal, None, '{"step":1}', None, T0).version == 1  # type: ignore[union-attr]

        srv.kill()
        bound = (timeout_ms + connect_ms) / 1000 + 0.25  # the documented bound, plus scheduling slack
        spooled = 0
        now = T0 + 10
        for n in range(2, 7):
            start = time.monotonic()
            store.append(dl, json.dumps({"n": n}), now)
            assert time.monotonic() - start < bound
            spooled += 1
            now += 10
        cur = store.get(journal, now)  # served locally: the write Redis took was mirrored
        assert cur is not None and cur.value == '{"step":1}'
        start = time.monotonic()
        cas = store.compare_and_set(journal, cur.version, '{"step":2}', None, now)
        assert time.monotonic() - start < bound and cas.version >= 1  # type: ignore[union-attr]
        spooled += 1
        start = time.monotonic()
        assert store.compare_and_set("agent-recovery/breaker/api", None, '{"state":"open"}', None, now)
        assert time.monotonic() - start < bound  # not spooled: breakers fall back to local state
        assert store.degraded
        assert [e["event"] for e in events] == ["store_degraded"]
        assert events[0]["kind"] == "unavailable" and events[0]["at_ms"] == T0 + 10
        assert events[0]["store"] == srv.url(f"timeout_ms={timeout_ms}&connect_timeout_ms={connect_ms}"
                                             f"&probe_ms=1000&spool={tmp_path / 'spool.sqlite'}")

        srv.start()  # same port, empty (no persistence), as after a crash without AOF
        # Before probe_ms has passed since the last probe: still local.
        store.get("x", now)
        assert store.degraded
        restored_at = T0 + 10 + 1_000
        assert store.get("x", restored_at) is None  # due: starts the background probe
        until_restored(store, restored_at)
        assert [e["event"] for e in events] == ["store_degraded", "store_restored"]
        assert events[1]["flushed"] == spooled and events[1]["degraded_ms"] == 1_000
        r = raw(srv)
        rows = r.xrange(RedisLayout("ar").stream(dl))
        assert [json.loads(f[b"r"]) for _, f in rows] == [{"n": n} for n in range(2, 7)]
        assert r.hget(RedisLayout("ar").entry(journal), "v") == b'{"step":2}'
        assert r.exists(RedisLayout("ar").entry("agent-recovery/breaker/api")) == 0
        # Later calls go to Redis again.
        # Later calls go to Redis again, above the ids the restarted Redis gave the flushed records.
        assert store.append(dl, '{"n":7}', restored_at) == max(int(rid.split(b"-")[0]) for rid, _ in rows) + 1
        store.close()
    finally:
        srv.stop()


def test_a_spool_left_by_an_earlier_process_is_flushed_at_the_first_healthy_call(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "redis")
    spool = tmp_path / "spool.sqlite"
    url = srv.url(f"timeout_ms=300&connect_timeout_ms=300&spool={spool}")
    first = open_store(url)  # Redis is not running yet
    assert first.append("agent-recovery/dead-letter", '{"n":1}', T0) >= 1
    assert first.degraded
    first.close()
    srv.start()
    try:
        events: List[str] = []
        second = open_store(url, on_event=events.append)
        # Served from the spool file until its background thread flushed it.
        assert second.read("agent-recovery/dead-letter", 0, 10) == [(1, '{"n":1}')]
        until_restored(second, T0)
        assert [json.loads(e).get("flushed") for e in events] == [1], events
        assert raw(srv).xlen(RedisLayout("ar").stream("agent-recovery/dead-letter")) == 1
        second.close()
    finally:
        srv.stop()


# ---- a runtime on Redis --------------------------------------------------------------


def test_a_breaker_opened_by_one_runtime_is_seen_by_another_on_the_same_redis(server: RedisServer) -> None:
    url = fresh(server, "fallback=none")
    calls = {"a": 0, "b": 0}

    def failing(name: str) -> Any:
        def op(call: Any) -> Any:
            calls[name] += 1
            return RawOutcome(UNAVAILABLE)
        return op

    with RedisStore(url) as store_a:
        run_a = Runtime(store=store_a, clock=VirtualClock(T0), seed=7, attempt_budget=3,
                        breaker=(3, 30_000)).run("worker-a")
        assert run_a.step(id="pay", tool="payments.charge", target="api.pay",
                          operation=failing("a")).outcome == "dead_lettered"
    assert calls["a"] == 3
    events_b: List[Dict[str, Any]] = []
    with RedisStore(url) as store_b:
        # 300 ms: inside the first open window (250 ms from the third failure at 205 ms).
        run_b = Runtime(store=store_b, clock=VirtualClock(T0 + 300), seed=7, deadline_ms=5_000,
                        on_event=events_b.append).run("worker-b")
        report = run_b.step(id="pay", tool="payments.charge", target="api.pay", operation=failing("b"))
    assert calls["b"] == 0, "an open breaker is not called"
    short = next(e for e in events_b if e["event"] == "short_circuit")
    assert short["target"] == "api.pay" and short["code"] == "runtime.circuit.open"
    # on_open "fail" (the default): the step fails at once with runtime.circuit.open.
    assert report.outcome == "failed" and report.envelope["code"] == "runtime.circuit.open"
    entry = RedisLayout(RedisUrl(url).options["prefix"]).entry("agent-recovery/breaker/api.pay")
    breaker = json.loads(raw(server).hget(entry, "v") or b"null")
    assert breaker["state"] == "open" and breaker["open_ms"] == 250


def test_a_runtime_forwards_the_store_events(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "redis")  # not started: the first call degrades
    store = open_store(srv.url(f"timeout_ms=200&connect_timeout_ms=200&spool={tmp_path / 's.sqlite'}"))
    seen: List[Dict[str, Any]] = []
    rt = Runtime(store=store, clock=VirtualClock(T0), seed=7, on_event=seen.append)
    report = rt.run("r").step(id="s", tool="t", operation=lambda c: {"ok": True})
    assert report.outcome == "ok"
    kinds = [e["event"] for e in seen]
    assert kinds[0] == "store_degraded" and "ok" in kinds
    store.close()


def test_without_the_redis_package_a_url_is_an_io_error_naming_the_extra(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # `import redis` now raises ImportError
    with pytest.raises(StoreError) as e:
        open_store(server.url("fallback=none"))
    assert e.value.kind == "io" and "agent-recovery[redis]" in e.value.message


def test_an_async_run_on_a_redis_url_uses_the_server_clock_and_shares_the_breaker(server: RedisServer) -> None:
    import asyncio

    url = fresh(server, "fallback=none")
    calls: List[str] = []

    async def failing(call: Any) -> Any:
        calls.append(call.key)
        return RawOutcome(UNAVAILABLE)

    async def main() -> Tuple[Any, Any]:
        # No clock given: the runtime reads Redis TIME (ServerClock); retries
        # wait 1-4 ms for real.
        rt = Runtime(store=open_store(url), seed=7, breaker=(2, 600_000),
                     policy_config={"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 2}})
        assert isinstance(rt.clock, ServerClock)
        # Built before the first run: the second step starts within the
        # breaker's first open window (250 ms of Redis time).
        other = Runtime(store=open_store(url), seed=7, deadline_ms=1_000)
        first = await rt.run("a").step_async(id="s", tool="t", target="api", operation=failing)
        second = await other.run("b").step_async(id="s", tool="t", target="api", operation=failing)
        return first, second

    first, second = asyncio.run(main())
    # on_open "fail" (the default): the second step fails at once.
    assert first.outcome == "dead_lettered" and second.outcome == "failed"
    assert len(calls) == 2, "the second runtime's call was short-circuited by the shared breaker"


def test_a_spool_record_that_is_not_an_op_is_skipped_not_a_stall(server: RedisServer, tmp_path: Path) -> None:
    spool = tmp_path / "spool.sqlite"
    with SqliteStore(spool) as local:  # what another program might have written
        local.append("agent-recovery/spool", '{"op":"explode"}', T0)
        local.append("agent-recovery/spool", '[1,2]', T0)
        local.append("agent-recovery/spool", '{"op":"append","stream":"s"}', T0)
        local.append("agent-recovery/spool", '{"op":"append","stream":"s","record":"{}","now_ms":5}', T0)
    events: List[str] = []
    store = open_store(fresh(server, f"spool={spool}"), on_event=events.append)
    until_restored(store, T0)
    assert [r for _, r in store.read("s", 0, 10)] == ["{}"]
    assert [json.loads(e)["flushed"] for e in events] == [1]
    store.close()


@pytest.mark.parametrize("backend", ["redis", "sqlite"])
def test_the_retry_quota_is_exact_across_threads(backend: str, server: RedisServer, tmp_path: Path) -> None:
    """Six workers, each its own runtime on one store, retry failing calls
    until the fleet retry quota refuses them: the loop's compare-and-set
    swaps grant exactly capacity / retry_cost retries, fleet-wide."""
    import threading

    from agent_recovery.runtime import Failed

    url = fresh(server)
    key, capacity, cost = "agent-recovery/quota/default", 100, 5
    granted: List[int] = []
    refused: List[str] = []
    codes: List[str] = []
    lock = threading.Lock()

    def store() -> Any:
        return RedisStore(url) if backend == "redis" else SqliteStore(tmp_path / "q.db")

    def worker(w: int) -> None:
        # A granted retry sleeps (a `sleep` event), a refused one ends the step.
        sleeps: List[int] = []

        def on_event(e: Any) -> None:
            if e.get("event") == "sleep":
                sleeps.append(1)

        rt = Runtime(
            store=store(),
            clock=VirtualClock(T0),
            seed=w,
            retry_quota={"capacity": capacity, "retry_cost": cost},
            on_event=on_event,
        )
        try:
            for n in range(100):
                r = rt.run(f"w{w}-{n}").step(
                    # A target of its own: no breaker opened by another run.
                    id="sync",
                    tool="erp.sync",
                    call="tool",
                    target=f"w{w}-{n}",
                    operation=lambda _: Failed({"source": "http", "status": 503}),
                )
                codes.append(r.envelope["code"] if r.envelope else r.outcome)
                if r.envelope is not None and r.envelope["code"] == "runtime.budget.retry_quota_exhausted":
                    with lock:
                        refused.append(f"w{w}")
                    return
        finally:
            with lock:
                granted.append(len(sleeps))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # An absent bucket is full: exactly capacity / cost retries were granted.
    assert sum(granted) == capacity // cost, codes
    assert sorted(refused) == [f"w{w}" for w in range(6)]
    db = store()
    assert json.loads(db.get(key, T0).value) == {"tokens": 0}
    # A success after one retry gives its cost back; a bucket that is not
    # {"tokens": <integer>} counts as full.
    db.compare_and_set(key, db.get(key, T0).version, '{"tokens":"lots"}', None, T0)
    outcomes = [Failed({"source": "http", "status": 503}), "done"]
    rt = Runtime(store=db, clock=VirtualClock(T0), seed=1, retry_quota={"capacity": capacity, "retry_cost": cost})
    r = rt.run("after").step(id="sync", tool="erp.sync", call="tool", operation=lambda _: outcomes.pop(0))
    assert (r.outcome, r.result, outcomes) == ("ok", "done", [])
    assert json.loads(db.get(key, T0).value) == {"tokens": capacity}


def test_a_server_that_stops_answering_fails_within_timeout_ms_and_the_next_call_reconnects(tmp_path: Path) -> None:
    import signal

    srv = RedisServer(tmp_path / "redis").start()
    try:
        timeout_ms = 300
        store = RedisStore(srv.url(f"fallback=none&timeout_ms={timeout_ms}&connect_timeout_ms=300"))
        assert store.append("s", "1", T0) >= 1
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGSTOP)  # connected, but never answers
        try:
            start = time.monotonic()
            with pytest.raises(StoreError) as e:
                store.append("s", "2", T0)
            took = time.monotonic() - start
            assert e.value.kind == "unavailable"
            assert timeout_ms / 1000 * 0.9 <= took < timeout_ms / 1000 + 0.25, took  # the response timeout, not more
        finally:
            srv.proc.send_signal(signal.SIGCONT)
        # The timed-out connection was dropped; the next call reconnects.
        got = store.read("s", 0, 10)
        assert got[0][1] == "1"
        store.close()
    finally:
        srv.stop()


def test_two_processes_on_one_spool_flush_each_record_once(tmp_path: Path) -> None:
    import threading

    srv = RedisServer(tmp_path / "redis")  # down at first: both degrade
    spool = tmp_path / "spool.sqlite"
    url = srv.url(f"timeout_ms=300&connect_timeout_ms=300&probe_ms=1000&spool={spool}")
    events: List[List[Dict[str, Any]]] = [[], []]
    # Two stores with their own connections to one spool file: what two processes on one machine have.
    stores = [open_store(url, on_event=lambda text, i=i: events[i].append(json.loads(text))) for i in range(2)]
    for i, store in enumerate(stores):
        for n in range(10):
            store.append("agent-recovery/dead-letter", json.dumps({"w": i, "n": n}), T0 + n)
    assert all(s.degraded for s in stores)
    srv.start()
    try:
        barrier = threading.Barrier(2)

        def probe(store: Any) -> None:
            barrier.wait()
            store.get("x", T0 + 5_000)

        threads = [threading.Thread(target=probe, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + 60
        while any(s.reconnecting for s in stores):  # the winner's flush, in real time
            assert time.monotonic() < deadline, "a flush never ended"
            time.sleep(0.005)
        for store in stores:  # a loser of the flush lease probes again later
            until_restored(store, T0 + 10_000)
        flushed = [e["flushed"] for evs in events for e in evs if e["event"] == "store_restored"]
        assert sum(flushed) == 20
        rows = raw(srv).xrange(RedisLayout("ar").stream("agent-recovery/dead-letter"))
        got = [json.loads(f[b"r"]) for _, f in rows]
        assert sorted(got, key=lambda r: (r["w"], r["n"])) == [{"w": w, "n": n} for w in range(2) for n in range(10)]
        # Each writer's records are in its order.
        for w in range(2):
            assert [r["n"] for r in got if r["w"] == w] == list(range(10))
        for s in stores:
            s.close()
    finally:
        srv.stop()
