"""The fleet harness: worker processes in Rust, Node and Python on
one real `redis-server`, checked across workers.

    .venv/bin/python -m pytest -q tests/fleet/fleet.py

The workers are the kill-test workers (docs/durability.md §5, the protocol of
tests/durability/kill.py: `worker STORE LEDGER JOB`, one JSON line out, the
ledger an SQLite file every worker writes), given a `redis://` URL as STORE.
The fleet adds job fields every worker understands (see
python/tests/durable_worker.py): `"clock": "virtual"` (a virtual clock from
the job's `now_ms`: no real waits, breaker times chosen by the harness),
`"events": true` (the line carries `"events"` and `"max_store_call_ms"`) and
`"hold_at": N, "hold_file": PATH` (at point N the worker creates PATH +
".reached" and waits for PATH: the harness acts at a known point of a run).

Checks, across workers of the languages in ``AR_FLEET_LANGUAGES`` (default
``python,rust,node``; the Rust and Node workers need their Redis stores):

- each worker speaks the job fields: on Redis, and on its own SQLite store
  (no Redis needed), where it holds before its first call, stamps the store
  at the job's virtual time and reports the same events as the others;

- failures seen by one worker open the breaker for all: the next worker's
  first call to that target is short-circuited (no call in the ledger);
- when the open period is over and several workers start at once, exactly
  one probe call reaches the operation (needs the loop's fleet-wide probe
  lease);
- one idempotency key run by two workers at once runs the tool once;
- a dead-letter record written by one worker is replayed by another;
- Redis SIGKILLed mid-run and restarted: the run's journal writes and its
  dead-letter record were spooled and then flushed (nothing lost), no store
  call took longer than timeout_ms + connect_timeout_ms, and the events say
  `store_degraded` then `store_restored`.

Redis runs with an append-only file fsynced at every write, so what it
acknowledged before the SIGKILL is there after the restart. What Redis holds
is read with redis-py's own commands; expected keys come from their
documented definitions (tests/durability/kill.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import redis
import redis.cluster

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "durability"))
sys.path.insert(0, str(ROOT / "python" / "tests"))

from kill import Files, op_key, replay_key, worker_command  # noqa: E402
from redis_server import RedisServer  # noqa: E402

from agent_recovery._redis_layout import RedisLayout  # noqa: E402

ALL_LANGUAGES = ("python", "rust", "node")
LANGUAGES = tuple(
    lang.strip() for lang in os.environ.get("AR_FLEET_LANGUAGES", ",".join(ALL_LANGUAGES)).split(",") if lang.strip()
)
NOW_MS = 1767225600000
OPEN_MS = 60_000
#: A hung worker, not timing.
WORKER_TIMEOUT_S = 120
TIMEOUT_MS, CONNECT_MS = 500, 500
#: Three attempts a step, 1-4 ms apart; three failures open a target for a
#: minute; a run gives up after 5 s (virtual) rather than wait for a breaker.
CONFIG = {
    "breaker": {"failure_threshold": 3, "open_ms": OPEN_MS},
    "policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 3}},
    "deadline_ms": 5_000,
}


def lang(i: int) -> str:
    return LANGUAGES[i % len(LANGUAGES)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if CLUSTER:
        cluster = ClusterServer()
        try:
            yield cluster  # type: ignore[misc]
        finally:
            cluster.stop()
        return
    srv = RedisServer(tmp_path_factory.mktemp("redis"), persist=True).start()
    try:
        yield srv
    finally:
        srv.stop()


#: AR_FLEET_CLUSTER=1: the workers share a three-node Redis Cluster
#: (tests/store/redis_cluster.py, each node with an append-only file fsynced
#: at every write) through a redis+cluster:// URL instead of one
#: redis-server; the SIGKILL test kills every node and restarts them.
CLUSTER = os.environ.get("AR_FLEET_CLUSTER") == "1"


class ClusterServer:
    """The fixture's face for a cluster: `url(query)` and a cluster client."""

    def __init__(self) -> None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("redis_cluster", ROOT / "tests" / "store" / "redis_cluster.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.cluster = module.RedisCluster(persist=True)
        self.cluster.start()
        self.port = self.cluster.ports[0]

    def url(self, query: str) -> str:
        return str(self.cluster.url(f"?{query}"))

    def kill(self) -> None:
        """SIGKILL every node of the cluster."""
        self.cluster.kill()

    def start(self) -> "ClusterServer":
        """Every node again, with its data and its slots."""
        self.cluster.restart()
        return self

    def stop(self) -> None:
        self.cluster.stop()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("component-cache")


class Fleet:
    """One Redis prefix, one spool file and one ledger for a test's workers."""

    def __init__(self, server: RedisServer, directory: Path, cache: Path, name: str) -> None:
        self.files = Files(directory, cache)
        self.server = server
        self.prefix = name
        self.url = server.url(
            f"prefix={name}&timeout_ms={TIMEOUT_MS}&connect_timeout_ms={CONNECT_MS}&spool={directory / 'spool.sqlite'}"
        )
        self.dir = directory

    def job(self, mode: str, run_id: str, steps: List[Dict[str, Any]], now_ms: int, **more: Any) -> Dict[str, Any]:
        return {"mode": mode, "run_id": run_id, "seed": 7, "now_ms": now_ms, "kill_at": None, "config": CONFIG,
                "steps": steps, "clock": "virtual", "events": True, **more}

    def start(self, language: str, job: Dict[str, Any]) -> "subprocess.Popen[str]":
        return subprocess.Popen(
            worker_command(language) + [self.url, str(self.files.ledger), json.dumps(job)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.files.env,
        )

    def finish(self, language: str, proc: "subprocess.Popen[str]") -> Dict[str, Any]:
        out, err = proc.communicate(timeout=WORKER_TIMEOUT_S)
        assert proc.returncode == 0, f"{language} worker exited {proc.returncode}: {err.strip()}"
        lines = [line for line in out.splitlines() if line.strip()]
        assert lines, f"{language} worker printed nothing: {err.strip()}"
        return json.loads(lines[-1])  # type: ignore[no-any-return]

    def work(self, language: str, job: Dict[str, Any]) -> Dict[str, Any]:
        return self.finish(language, self.start(language, job))

    def calls(self, key: str) -> List[Tuple[str, int]]:
        """(kind, applied) of every call the ledger recorded with `key`."""
        conn = __import__("sqlite3").connect(self.files.ledger, timeout=10)
        try:
            return conn.execute("SELECT kind, applied FROM calls WHERE key = ? ORDER BY n", (key,)).fetchall()
        finally:
            conn.close()

    def redis(self) -> Any:
        if CLUSTER:
            return redis.cluster.RedisCluster(host="127.0.0.1", port=self.server.port, socket_timeout=5)
        return redis.Redis(host="127.0.0.1", port=self.server.port, socket_timeout=5)

    def dead_letters(self) -> List[Dict[str, Any]]:
        rows = self.redis().xrange(RedisLayout(self.prefix).stream("agent-recovery/dead-letter"))
        return [json.loads(fields[b"r"]) for _, fields in rows]

    def journal_keys(self) -> List[bytes]:
        # host/src/store/redis/README.md: one hash tag per entry.
        return sorted(self.redis().scan_iter(match=RedisLayout(self.prefix).entry_pattern("agent-recovery/journal/")))


def wait_all(procs: List[Tuple[str, "subprocess.Popen[str]", Path]]) -> List[bool]:
    """Until every worker exited or reached its hold point: which ones reached it."""
    deadline = time.monotonic() + WORKER_TIMEOUT_S
    while True:
        reached = [Path(str(hold) + ".reached").exists() for _, _, hold in procs]
        if all(r or p.poll() is not None for r, (_, p, _) in zip(reached, procs)):
            return reached
        assert time.monotonic() < deadline, "a worker neither finished nor reached its hold point"
        time.sleep(0.01)  # polling for a condition, not timing


def events_of(out: Dict[str, Any], kind: str) -> List[Dict[str, Any]]:
    return [e for e in out.get("events", []) if e.get("event") == kind]


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_worker_speaks_the_fleet_job_fields(server: RedisServer, tmp_path: Path, cache: Path, language: str) -> None:
    """`clock: virtual` and `hold_at`/`hold_file` (the checks below rely on them)."""
    fleet = Fleet(server, tmp_path, cache, f"proto-{language}")
    hold = tmp_path / "proto.hold"
    proc = fleet.start(language, fleet.job("run", "proto", [{"id": "p"}], NOW_MS, hold_at=1, hold_file=str(hold)))
    reached = wait_all([(language, proc, hold)])
    hold.touch()
    out = fleet.finish(language, proc)
    assert reached == [True], (
        f"the {language} worker does not hold at hold_at/hold_file (the fleet job fields of "
        "python/tests/durable_worker.py); run with AR_FLEET_LANGUAGES=python until it does"
    )
    assert out["outcome"] == "completed"
    # The idempotency record the run left carries the job's virtual time.
    idem = fleet.redis().hget(RedisLayout(fleet.prefix).entry("agent-recovery/idem/" + op_key("proto", "p")), "u")
    assert idem is not None and int(idem) - NOW_MS < 60_000, (
        f"the {language} worker does not run on the job's virtual clock (clock: virtual, now_ms {NOW_MS}); "
        f"the store was written at {idem!r}"
    )


def test_the_job_fields_on_sqlite_agree_across_workers(tmp_path: Path, cache: Path) -> None:
    """The fleet job fields without Redis: each worker on its own SQLite store.

    Every worker holds before its first call (nothing in the ledger yet, the
    process still running), runs on the job's virtual clock (the store's
    entries are stamped at now_ms plus the retry's sleep, the events' t_ms
    follow the sleep exactly), and reports the same events, byte for byte, as
    the others (one seed, one policy: the three runtimes must agree).
    """
    steps = [{"id": "p", "fail_times": 1}]
    # A retry delay of up to 4 s (virtual): the run sleeps once, and the clock shows it.
    config = {"policy": {"tool": {"base_ms": 1_000, "cap_ms": 4_000, "max_attempts": 3}}}
    lines: Dict[str, Dict[str, Any]] = {}
    for language in LANGUAGES:
        files = Files(tmp_path / language, cache)
        hold = tmp_path / f"{language}.hold"
        job = {"mode": "run", "run_id": "fields", "seed": 7, "now_ms": NOW_MS, "kill_at": None, "config": config,
               "steps": steps, "clock": "virtual", "events": True, "hold_at": 1, "hold_file": str(hold)}
        proc = subprocess.Popen(
            worker_command(language) + [str(files.store), str(files.ledger), json.dumps(job)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=files.env,
        )
        reached = wait_all([(language, proc, hold)])
        assert reached == [True], f"the {language} worker does not hold at hold_at/hold_file"
        held = proc.poll() is None
        conn = __import__("sqlite3").connect(files.ledger, timeout=10)
        try:
            (calls,) = conn.execute("SELECT COUNT(*) FROM calls").fetchone()
        finally:
            conn.close()
        hold.touch()
        out, err = proc.communicate(timeout=WORKER_TIMEOUT_S)
        assert proc.returncode == 0, f"{language} worker exited {proc.returncode}: {err.strip()}"
        assert held and calls == 0, f"the {language} worker went on before the hold file existed"
        line = json.loads(out.splitlines()[-1])
        assert line["outcome"] == "completed" and line["points"] == 3, line
        kinds = [e["event"] for e in line["events"]]
        assert kinds == ["attempt", "decision", "sleep", "attempt", "ok", "outcome"], line["events"]
        slept = line["events"][2]["delay_ms"]
        assert 0 < slept <= 4_000 and line["events"][3]["t_ms"] == slept, line["events"]
        assert isinstance(line["max_store_call_ms"], (int, float)) and 0 < line["max_store_call_ms"] < 60_000
        conn = __import__("sqlite3").connect(files.store, timeout=10)
        try:
            stamps = {u for (u,) in conn.execute("SELECT updated_at_ms FROM ar_entries")}
        finally:
            conn.close()
        assert stamps == {NOW_MS + slept}, f"the {language} worker wrote its store at {stamps}, not on the job's clock"
        lines[language] = line
    first = LANGUAGES[0]
    for language in LANGUAGES[1:]:
        assert lines[language]["events"] == lines[first]["events"], f"{language} and {first} report other events"


@pytest.mark.parametrize(
    "fields, says",
    [
        ({"clock": "wall"}, "unknown clock"),
        ({"clock": "virtual", "now_ms": None}, "now_ms"),
        ({"hold_at": 1}, "hold_at needs hold_file"),
    ],
)
def test_a_bad_job_field_is_refused_before_anything_runs(
    tmp_path: Path, cache: Path, fields: Dict[str, Any], says: str
) -> None:
    """Exit status 2 and a message naming the field; no call reaches the ledger."""
    for language in LANGUAGES:
        files = Files(tmp_path / language, cache)
        job = {"mode": "run", "run_id": "bad", "seed": 7, "now_ms": NOW_MS, "kill_at": None, "config": CONFIG,
               "steps": [{"id": "p"}], **fields}
        proc = subprocess.run(
            worker_command(language) + [str(files.store), str(files.ledger), json.dumps(job)],
            capture_output=True, text=True, env=files.env, timeout=WORKER_TIMEOUT_S,
        )
        assert proc.returncode == 2 and says in proc.stderr, (language, proc.returncode, proc.stderr)
        conn = __import__("sqlite3").connect(files.ledger, timeout=10)
        try:
            assert conn.execute("SELECT COUNT(*) FROM calls").fetchone() == (0,), language
        finally:
            conn.close()


FAILING = [{"id": "pay", "fail_always": True}]
WORKING = [{"id": "pay"}]


def open_breaker(fleet: Fleet) -> int:
    """A worker of the first language fails three times on t.pay: its breaker
    opens. Returns when it opened (`since_ms`): it stays open at least 250 ms
    (the shortest open window, docs/fallbacks-and-breakers.md)."""
    out = fleet.work(lang(0), fleet.job("run", "opener", FAILING, NOW_MS))
    assert out["outcome"] == "dead_lettered", out
    assert fleet.calls(op_key("opener", "pay")) == [("operation", 0)] * 3
    breaker = fleet.redis().hget(RedisLayout(fleet.prefix).entry("agent-recovery/breaker/t.pay"), "v")
    assert breaker is not None and json.loads(breaker)["state"] == "open"
    return int(json.loads(breaker)["since_ms"])


def test_failures_seen_by_one_worker_open_the_breaker_for_all(server: RedisServer, tmp_path: Path, cache: Path) -> None:
    fleet = Fleet(server, tmp_path, cache, "breaker")
    opened = open_breaker(fleet)
    for i, language in enumerate(LANGUAGES):
        run_id = f"next-{language}"
        # Within the shortest open window; a step whose targets are all open fails at once.
        out = fleet.work(language, fleet.job("run", run_id, WORKING, opened + 1 + i))
        assert fleet.calls(op_key(run_id, "pay")) == [], f"the {language} worker called an open target"
        assert out["outcome"] == "failed", out
        if "events" in out:
            short = events_of(out, "short_circuit")
            assert short and short[0]["target"] == "t.pay" and short[0]["code"] == "runtime.circuit.open"


def test_after_the_open_period_exactly_one_probe_reaches_the_operation(
    server: RedisServer, tmp_path: Path, cache: Path
) -> None:
    fleet = Fleet(server, tmp_path, cache, "probe")
    open_breaker(fleet)
    procs = []
    for i in range(max(3, len(LANGUAGES))):
        hold = tmp_path / f"probe-{i}.hold"
        job = fleet.job("run", f"probe-{i}", WORKING, NOW_MS + OPEN_MS + 1_000, hold_at=1, hold_file=str(hold))
        procs.append((lang(i), fleet.start(lang(i), job), hold))
    reached = wait_all(procs)
    for _, _, hold in procs:
        hold.touch()  # release the probe (and anything else that held)
    outs = [fleet.finish(language, p) for language, p, _ in procs]
    callers = [f"{language} probe-{i}" for i, ((language, _, _), r) in enumerate(zip(procs, reached)) if r]
    assert len(callers) == 1, (
        f"{len(callers)} workers called the target in half-open ({callers}); exactly one probe must "
        "(the loop's fleet-wide probe lease)"
    )
    winner = reached.index(True)
    assert outs[winner]["outcome"] == "completed"
    for i, out in enumerate(outs):
        if i != winner:
            # The probe lease is taken: the others fail at once on the open target, uncalled.
            assert out["outcome"] == "failed" and fleet.calls(op_key(f"probe-{i}", "pay")) == []


def test_one_key_run_by_two_workers_at_once_runs_the_tool_once(server: RedisServer, tmp_path: Path, cache: Path) -> None:
    fleet = Fleet(server, tmp_path, cache, "idem")
    steps = [{"id": "charge"}]
    procs = []
    for i in range(2):
        hold = tmp_path / f"dup-{i}.hold"
        job = fleet.job("run", "dup", steps, NOW_MS, hold_at=1, hold_file=str(hold))
        procs.append((lang(i), fleet.start(lang(i), job), hold))
    reached = wait_all(procs)
    for _, _, hold in procs:
        hold.touch()
    outs = [fleet.finish(language, p) for language, p, _ in procs]
    assert reached.count(True) == 1, f"both workers started the tool: {outs}"
    assert fleet.calls(op_key("dup", "charge")) == [("operation", 1)]
    loser = outs[reached.index(False)]
    assert loser["outcome"] in ("in_flight", "cached", "completed"), loser


def test_a_dead_letter_record_written_by_one_worker_is_replayed_by_another(
    server: RedisServer, tmp_path: Path, cache: Path
) -> None:
    fleet = Fleet(server, tmp_path, cache, "dlq")
    steps = [{"id": "sync", "fail_always": True}]
    out = fleet.work(lang(0), fleet.job("run", "dl-1", steps, NOW_MS))
    assert out["outcome"] == "dead_lettered"
    records = fleet.dead_letters()
    assert [(r["run_id"], r["key"]) for r in records] == [("dl-1", op_key("dl-1", "sync"))]
    # On Redis a stream's numbers start at the server's clock (host/src/store/redis/README.md).
    (rid, _), = fleet.redis().xrange(RedisLayout(fleet.prefix).stream("agent-recovery/dead-letter"))
    dl_id = rid.decode().split("-")[0]
    out = fleet.work(lang(1), fleet.job("replay", "", [{"id": "sync"}], NOW_MS + OPEN_MS + 1_000, id=dl_id))
    key = replay_key(op_key("dl-1", "sync"), 1)
    assert out["replay"] == {"id": dl_id, "n": 1, "key": key, "run_id": "dl-1/replay/1", "outcome": "ok"}
    assert fleet.calls(key) == [("operation", 1)]


def test_redis_killed_mid_run_loses_nothing_and_no_call_hangs(server: RedisServer, tmp_path: Path, cache: Path) -> None:
    fleet = Fleet(server, tmp_path, cache, "kill")
    # a and b applied and compensable, c fails for good: the chain compensates
    # b then a and writes a dead-letter record. Points: a 1-2, b 3-4, c 5-7.
    steps = [{"id": "a", "compensation": True}, {"id": "b", "compensation": True}, {"id": "c", "fail_always": True}]
    hold = tmp_path / "kill.hold"
    proc = fleet.start(lang(0), fleet.job("run", "k-1", steps, NOW_MS, hold_at=3, hold_file=str(hold)))
    assert wait_all([(lang(0), proc, hold)]) == [True], "the worker ended before its hold point"
    assert len(fleet.journal_keys()) == 1, "the run journaled itself in Redis before the kill"
    server.kill()
    hold.touch()
    out = fleet.finish(lang(0), proc)
    assert out["outcome"] == "dead_lettered", out
    bound_ms = TIMEOUT_MS + CONNECT_MS
    if "events" in out:
        degraded = events_of(out, "store_degraded")
        assert len(degraded) == 1 and degraded[0]["kind"] == "unavailable", out["events"]
        assert out["max_store_call_ms"] <= bound_ms + 250, f"a store call took {out['max_store_call_ms']} ms"
    for s in ("a", "b"):
        assert fleet.calls(op_key("k-1", s)) == [("operation", 1)]
    server.start()  # same port; the append-only file brings back what Redis acknowledged
    assert len(fleet.journal_keys()) == 1 and fleet.dead_letters() == [], "Redis has not seen the spool yet"
    # Another worker (another language when there is one) on the same machine
    # serves its calls from the spool while its background thread flushes it,
    # and recovers: nothing is left to do. The flush may end after the worker
    # printed its line (store_restored then is not in it); the worker waits
    # for it before it exits.
    rec = fleet.work(lang(1), fleet.job("recover", "", steps, NOW_MS + 120_000))
    assert rec["reports"] == []
    if "events" in rec:
        restored = events_of(rec, "store_restored")
        assert len(restored) <= 1 and all(e["flushed"] > 0 for e in restored), rec["events"]
    assert fleet.journal_keys() == [], "the spooled journal delete reached Redis"
    records = fleet.dead_letters()
    assert [(r["run_id"], r["outcome"]) for r in records] == [("k-1", "dead_lettered")]
    assert [c["step"] for c in records[0]["compensations"]] == ["b", "a"]
