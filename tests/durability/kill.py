"""Kill tests (docs/durability.md §5): real worker processes in Rust, Node and
Python, killed with a real SIGKILL at points of interest, recovered by a
worker of the same or another language, then checked against the ledger
(the "external system", an SQLite file every worker writes) and the store.

    .venv/bin/python -m pytest -q tests/durability/kill.py

Environment:

- ``AR_KILL_LANGUAGES`` (default ``rust,node,python``): the workers to drive;
- ``AR_KILL_BUDGET_S`` (default 45): time for the randomized kills;
- ``AR_KILL_SEED`` (default: random, printed): reproduces a randomized run
  (the jobs, kill points and languages; not the interleaving of parallel workers);
- ``AR_KILL_PARALLEL`` (default 3): workers of a randomized round running at once.

Needs ``target/release/examples/durable_worker`` (``cargo build --release -p
agent-recovery --example durable_worker``), ``target/release/agent-recovery``,
``node/test/durable_worker.mjs`` with ``node/node_modules``, and
``python/tests/durable_worker.py`` with the ``agent_recovery`` package in the
interpreter running pytest.

Expected values come from the protocol, not from our code: the idempotency
keys are computed here from their documented definitions (README
"Idempotency keys", docs/runtime.md "compensate:" + tool, docs/durability.md
"Replay"), and what happened is read from the ledger and the store file with
Python's own sqlite3.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALL_LANGUAGES = ("rust", "node", "python")
LANGUAGES = tuple(
    lang.strip()
    for lang in os.environ.get("AR_KILL_LANGUAGES", ",".join(ALL_LANGUAGES)).split(",")
    if lang.strip()
)
BUDGET_S = float(os.environ.get("AR_KILL_BUDGET_S", "45"))
#: Workers of a randomized round running at once (on the same store and ledger).
PARALLEL = int(os.environ.get("AR_KILL_PARALLEL", "3"))
SEED = int(os.environ.get("AR_KILL_SEED") or random.SystemRandom().randrange(2**32))
#: A hung worker, not timing: a worker's whole run takes well under a second.
WORKER_TIMEOUT_S = 120
NOW_MS = 1767225600000

#: Retries wait at most 4 ms; three attempts per step; breakers never open
#: (the failing steps of many runs share targets in one store).
CONFIG = {
    "breaker": {"failure_threshold": 100, "open_ms": 1000},
    "policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 3}},
}

CLI = ROOT / "target" / "release" / "agent-recovery"


# ---- independent definitions -------------------------------------------------


def canonical(value: Any) -> str:
    """Canonical JSON as docs/envelope-and-decision.md, "Idempotency keys", defines it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def op_key(run_id: str, step: str) -> str:
    """The key of step `step` (tool t.<step>, args {"step": step}), §5."""
    return sha(canonical([run_id, step, f"t.{step}", {"step": step}]))


def comp_key(run_id: str, step: str) -> str:
    """Its compensation's key: the tool is "compensate:" + tool (docs/runtime.md)."""
    return sha(canonical([run_id, step, f"compensate:t.{step}", {"step": step}]))


def replay_key(key: str, n: int) -> str:
    """docs/durability.md "Replay"."""
    return sha(canonical(["agent-recovery/replay", key, n]))


# ---- workers -------------------------------------------------------------------


def worker_command(language: str) -> List[str]:
    if language == "rust":
        exe = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "examples" / "durable_worker"
        assert exe.exists(), f"{exe} is missing; run `cargo build --release -p agent-recovery --example durable_worker`"
        return [str(exe)]
    if language == "python":
        script = ROOT / "python" / "tests" / "durable_worker.py"
        assert script.exists(), f"{script} is missing (the Python worker of docs/durability.md §5)"
        return [sys.executable, str(script)]
    if language == "node":
        node = shutil.which("node")
        assert node, "node is not on PATH; install Node 20+"
        script = ROOT / "node" / "test" / "durable_worker.mjs"
        assert script.exists(), f"{script} is missing (the Node worker of docs/durability.md §5)"
        return [node, str(script)]
    raise AssertionError(f"unknown language {language!r} in AR_KILL_LANGUAGES; use rust, node, python")


class Files:
    """One store file and one ledger file, and the workers' environment."""

    def __init__(self, directory: Path, cache: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.store = directory / "store.db"
        self.ledger = directory / "ledger.db"
        self.env = dict(os.environ, AGENT_RECOVERY_CACHE_DIR=str(cache))
        # The ledger's tables, as §5 gives them, created before workers start
        # together on it (switching a new file to WAL can fail at once with
        # "database is locked" in a worker that races another).
        conn = sqlite3.connect(self.ledger, timeout=10)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(
                "CREATE TABLE IF NOT EXISTS applied(key TEXT PRIMARY KEY, step TEXT, kind TEXT, seq INTEGER);"
                "CREATE TABLE IF NOT EXISTS calls(n INTEGER PRIMARY KEY AUTOINCREMENT, step TEXT, kind TEXT,"
                " key TEXT, attempt INTEGER, pid INTEGER, applied INTEGER);"
            )
        finally:
            conn.close()

    def work(self, language: str, job: Dict[str, Any]) -> Tuple[int, Optional[Dict[str, Any]]]:
        """Runs one worker; (exit status, its JSON line or None when killed)."""
        proc = subprocess.run(
            worker_command(language) + [str(self.store), str(self.ledger), json.dumps(job)],
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_S,
            env=self.env,
        )
        if proc.returncode == -9:
            return -9, None
        assert proc.returncode == 0, (
            f"{language} worker exited {proc.returncode} on {json.dumps(job)}: {proc.stderr.strip()}"
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        assert lines, f"{language} worker printed nothing: {proc.stderr.strip()}"
        return 0, json.loads(lines[-1])

    def cli(self, *args: str) -> List[Dict[str, Any]]:
        proc = subprocess.run(
            [str(CLI), *args, "--store", str(self.store), "--json"],
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_S,
            env=self.env,
        )
        assert proc.returncode == 0, f"agent-recovery {' '.join(args)}: {proc.stderr.strip()}"
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("component-cache")


def job(mode: str, run_id: str, steps: List[Dict[str, Any]], kill_at: Optional[int] = None, **more: Any) -> Dict[str, Any]:
    return {"mode": mode, "run_id": run_id, "seed": 7, "now_ms": NOW_MS, "kill_at": kill_at, "config": CONFIG, "steps": steps, **more}


# ---- invariants ------------------------------------------------------------------


def read(db: Path, sql: str, *args: Any) -> List[Tuple[Any, ...]]:
    conn = sqlite3.connect(db, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def dead_letters(files: Files) -> List[Dict[str, Any]]:
    rows = read(files.store, "SELECT record FROM ar_records WHERE stream = 'agent-recovery/dead-letter' ORDER BY seq")
    return [json.loads(r[0]) for r in rows]


def check_invariants(
    files: Files, runs: Dict[str, Dict[str, Any]], replays: Optional[Dict[str, Tuple[str, str, str]]] = None
) -> None:
    """§5's invariants after the kills and one recovery. `runs`: run id ->
    {"steps": job steps, "printed": the worker's line or None when killed};
    `replays`: the keys of replays (key -> (run id, step, kind))."""
    expected: Dict[str, Tuple[str, str, str]] = dict(replays or {})
    for run_id, r in runs.items():
        for s in r["steps"]:
            expected[op_key(run_id, s["id"])] = (run_id, s["id"], "operation")
            expected[comp_key(run_id, s["id"])] = (run_id, s["id"], "compensation")
    calls = read(files.ledger, "SELECT step, kind, key, applied FROM calls ORDER BY n") if files.ledger.exists() else []
    applied = read(files.ledger, "SELECT key, step, kind, seq FROM applied") if files.ledger.exists() else []
    # 1. every call carries the step's key (operation) or its compensation key.
    for step, kind, key, _ in calls:
        assert key in expected, f"a {kind} call of step {step} carried an unknown key {key}"
        assert expected[key][1:] == (step, kind), f"key {key} is {expected[key]}, called as {(step, kind)}"
    # 2. no effect applied twice.
    per_key: Dict[str, int] = {}
    for _, _, key, was_applied in calls:
        per_key[key] = per_key.get(key, 0) + int(was_applied)
    assert all(n <= 1 for n in per_key.values()), f"an effect was applied twice: {per_key}"
    applied_keys = {a[0] for a in applied}
    assert applied_keys == {k for k, n in per_key.items() if n == 1}, "applied rows and calls disagree"
    # 3. no journal entry, no recovery lease left.
    left = read(
        files.store,
        "SELECT key FROM ar_entries WHERE key LIKE 'agent-recovery/journal/%' OR key LIKE 'agent-recovery/recovering/%'",
    )
    assert not left, f"left in the store after recovery: {left}"
    # 4. every run completed or has a dead-letter record.
    records = dead_letters(files)
    by_run = {r["run_id"]: r for r in records}
    seq_of = {a[0]: a[3] for a in applied}
    for run_id, r in runs.items():
        printed = r["printed"]
        completed = printed is not None and printed.get("outcome") == "completed"
        if completed:
            assert run_id not in by_run, f"{run_id} completed but has a dead-letter record"
            for s in r["steps"]:
                assert comp_key(run_id, s["id"]) not in applied_keys, f"{run_id} completed but {s['id']} was compensated"
            continue
        assert run_id in by_run, f"{run_id} did not complete (printed {printed}) and has no dead-letter record"
        rec = by_run[run_id]
        assert rec["outcome"] in ("dead_lettered", "cancelled", "interrupted"), rec["outcome"]
        # 5. every applied operation of a compensable step was compensated,
        # in reverse order, unless its compensation failed for good.
        failed_comps = {c["step"] for c in rec.get("compensations", []) if c.get("outcome") == "failed"}
        done = []
        for s in r["steps"]:
            k = op_key(run_id, s["id"])
            if s.get("compensation") and k in applied_keys:
                ck = comp_key(run_id, s["id"])
                if ck in applied_keys:
                    done.append((seq_of[k], seq_of[ck], s["id"]))
                else:
                    assert s["id"] in failed_comps, (
                        f"{run_id}: {s['id']} was applied and never compensated "
                        f"(record compensations: {rec.get('compensations')})"
                    )
        done.sort()
        comp_seqs = [c for _, c, _ in done]
        assert comp_seqs == sorted(comp_seqs, reverse=True), f"{run_id}: compensations not in reverse order: {done}"


# ---- fixed kill points -------------------------------------------------------------

TWO_THEN_PLAIN = [
    {"id": "a", "compensation": True},
    {"id": "b", "compensation": True},
    {"id": "c"},
]
#: The third step fails for good (three 503s), so the chain compensates b then a.
CHAIN = [
    {"id": "a", "compensation": True},
    {"id": "b", "compensation": True},
    {"id": "c", "fail_always": True},
]
#: Points (before, after per successful call; before per failed call):
#: TWO_THEN_PLAIN: a 1-2, b 3-4, c 5-6. CHAIN: a 1-2, b 3-4, c 5, 6, 7,
#: compensation of b 8-9, of a 10-11.
FIXED = {
    "before": (TWO_THEN_PLAIN, 3),  # before b's side effect
    "after": (TWO_THEN_PLAIN, 4),  # after b's side effect, before its outcome is recorded
    "compensation": (CHAIN, 9),  # after b's compensation, before a's
}


def test_points_of_interest_are_where_the_protocol_says(tmp_path: Path, cache: Path) -> None:
    """Without a kill: the job's points and outcome, per language (the fixed
    kill points below rely on these counts)."""
    for lang in LANGUAGES:
        files = Files(tmp_path / lang, cache)
        _, out = files.work(lang, job("run", f"{lang}-plain", TWO_THEN_PLAIN))
        assert out == {"outcome": "completed", "points": 6}
        _, out = files.work(lang, job("run", f"{lang}-chain", CHAIN))
        assert out == {"outcome": "dead_lettered", "points": 11}
        check_invariants(
            files,
            {
                f"{lang}-plain": {"steps": TWO_THEN_PLAIN, "printed": {"outcome": "completed"}},
                f"{lang}-chain": {"steps": CHAIN, "printed": {"outcome": "dead_lettered"}},
            },
        )


@pytest.mark.parametrize("point", sorted(FIXED))
@pytest.mark.parametrize("writer", LANGUAGES)
@pytest.mark.parametrize("recoverer", LANGUAGES)
def test_fixed_kill_point_then_recovery(tmp_path: Path, cache: Path, point: str, writer: str, recoverer: str) -> None:
    steps, kill_at = FIXED[point]
    files = Files(tmp_path, cache)
    run_id = f"{writer}-{point}"
    status, out = files.work(writer, job("run", run_id, steps, kill_at))
    assert status == -9, f"the {writer} worker was not killed at point {kill_at}: {out}"
    journal = files.cli("recover", "--older-than-ms", "0")
    assert [line["run_id"] for line in journal if line["kind"] == "run"] == [run_id]
    _, rec = files.work(recoverer, job("recover", "", steps))
    assert rec is not None
    reports = rec["reports"]
    assert [r["run_id"] for r in reports] == [run_id]
    check_invariants(files, {run_id: {"steps": steps, "printed": None}})
    record = next(r for r in dead_letters(files) if r["run_id"] == run_id)
    assert record["recovered"] is True
    assert reports[0]["dead_letter_id"] is not None
    applied = {k for (k,) in read(files.ledger, "SELECT key FROM applied")}
    if point in ("before", "after"):
        # b resumed with its key (applied once, whichever worker did it),
        # then b and a compensated: the run is interrupted.
        assert record["outcome"] == "interrupted" and record["step_outcome"] == "ok"
        assert reports[0]["step"] == "b"
        b_calls = read(files.ledger, "SELECT key, applied FROM calls WHERE step = 'b' AND kind = 'operation'")
        assert [k for k, _ in b_calls] == [op_key(run_id, "b")] * (1 if point == "before" else 2)
        assert sum(a for _, a in b_calls) == 1
        assert comp_key(run_id, "a") in applied and comp_key(run_id, "b") in applied
        assert op_key(run_id, "c") not in applied
    else:
        # the chain goes on: b's compensation again (same key, applies
        # nothing), then a's; the record is the chain's dead letter.
        assert record["outcome"] == "dead_lettered"
        b_comp = read(files.ledger, "SELECT key, applied FROM calls WHERE step = 'b' AND kind = 'compensation'")
        assert [k for k, _ in b_comp] == [comp_key(run_id, "b")] * 2 and sum(a for _, a in b_comp) == 1
        assert [c["step"] for c in record["compensations"]] == ["b", "a"]


# ---- a record written by one language, replayed by another ------------------------------


@pytest.mark.parametrize("writer", LANGUAGES)
def test_record_written_by_one_language_is_listed_by_the_cli_and_replayed_by_another(
    tmp_path: Path, cache: Path, writer: str
) -> None:
    others = [lang for lang in LANGUAGES if lang != writer] or [writer]
    replayer = others[0]
    requester_recoverer = others[-1]
    files = Files(tmp_path, cache)
    steps = [{"id": "sync", "fail_always": True}]
    runs = {}
    for run_id in (f"{writer}-r1", f"{writer}-r2"):
        _, out = files.work(writer, job("run", run_id, steps))
        assert out is not None and out["outcome"] == "dead_lettered"
        runs[run_id] = {"steps": steps, "printed": out}
    listed = files.cli("dlq", "list")
    assert [(i["id"], i["status"], i["record"]["run_id"]) for i in listed] == [
        ("1", "open", f"{writer}-r1"),
        ("2", "open", f"{writer}-r2"),
    ]
    assert files.cli("dlq", "depth") == [{"depth": 2}]
    fixed = [{"id": "sync"}]  # the tool works again
    # Record 1: replayed now by another language's API.
    _, out = files.work(replayer, job("replay", "", fixed, id="1"))
    assert out is not None
    original = listed[0]["record"]["key"]
    assert original == op_key(f"{writer}-r1", "sync")
    assert out["replay"] == {
        "id": "1",
        "n": 1,
        "key": replay_key(original, 1),
        "run_id": f"{writer}-r1/replay/1",
        "outcome": "ok",
    }
    # Record 2: the CLI requests the replay, a third language's recover runs it.
    ticket = files.cli("dlq", "replay", "2")[0]
    assert ticket["key"] == replay_key(listed[1]["record"]["key"], 1) and ticket["outcome"] is None
    _, rec = files.work(requester_recoverer, job("recover", "", fixed))
    assert rec is not None
    assert [(r["run_id"], r["outcome"]) for r in rec["reports"]] == [(f"{writer}-r2/replay/1", "ok")]
    applied = {k for (k,) in read(files.ledger, "SELECT key FROM applied")}
    assert replay_key(original, 1) in applied and ticket["key"] in applied
    shown = [files.cli("dlq", "show", i)[0] for i in ("1", "2")]
    assert [s["status"] for s in shown] == ["replayed", "replayed"]
    assert [s["replays"][0]["outcome"] for s in shown] == ["ok", "ok"]
    assert files.cli("dlq", "depth") == [{"depth": 0}]
    check_invariants(
        files,
        runs,
        {
            replay_key(original, 1): (f"{writer}-r1/replay/1", "sync", "operation"),
            ticket["key"]: (f"{writer}-r2/replay/1", "sync", "operation"),
        },
    )


# ---- randomized jobs and kill points ---------------------------------------------------------


def random_steps(rnd: random.Random, prefix: str) -> List[Dict[str, Any]]:
    """1 to 4 steps; ids (and so tools) unique in the round, so the recovering
    worker's operations (every step of the round) answer each run's calls."""
    steps = []
    for i in range(rnd.randint(1, 4)):
        s: Dict[str, Any] = {"id": f"{prefix}s{i}", "fail_times": rnd.choice((0, 0, 0, 1, 2))}
        if rnd.random() < 0.6:
            s["compensation"] = True
            s["comp_fail_times"] = rnd.choice((0, 0, 0, 1, 10))
        steps.append(s)
    if rnd.random() < 0.3:
        steps[-1]["fail_always"] = True
    return steps


def max_points(steps: List[Dict[str, Any]]) -> int:
    """An upper bound of the points a run of these steps reaches."""
    n = 0
    for s in steps:
        n += 3 if s.get("fail_always") else s.get("fail_times", 0) + 2
        if s.get("compensation"):
            n += min(s.get("comp_fail_times", 0), 3) + 2
    return n


def test_randomized_kills_within_the_budget(tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rnd = random.Random(SEED)
    deadline = time.monotonic() + BUDGET_S
    kills = runs_total = rounds = 0
    while time.monotonic() < deadline or rounds == 0:
        rounds += 1
        files = Files(tmp_path / f"round-{rounds}", cache)
        # The round's jobs are drawn first (so the seed alone decides them),
        # then run by up to PARALLEL workers at once on the shared files.
        runs: Dict[str, Dict[str, Any]] = {}
        for j in range(rnd.randint(3, 8)):
            steps = random_steps(rnd, f"j{j}")
            kill_at = None if rnd.random() < 0.1 else rnd.randint(1, max_points(steps) + 1)
            runs[f"r{rounds}-{j}"] = {
                "steps": steps,
                "kill_at": kill_at,
                "writer": rnd.choice(LANGUAGES),
                "seed": rnd.randrange(1000),
            }
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            done = pool.map(
                lambda item: files.work(
                    item[1]["writer"], job("run", item[0], item[1]["steps"], item[1]["kill_at"], seed=item[1]["seed"])
                ),
                list(runs.items()),
            )
            for (run_id, r), (status, out) in zip(list(runs.items()), list(done)):
                r["printed"] = out
                kills += status == -9
                runs_total += 1
        recoverer = rnd.choice(LANGUAGES)
        _, rec = files.work(recoverer, job("recover", "", [s for r in runs.values() for s in r["steps"]]))
        assert rec is not None
        try:
            check_invariants(files, runs)
        except AssertionError as e:
            raise AssertionError(
                f"seed {SEED} round {rounds} (recovered by {recoverer}): {e}\n"
                f"runs: {json.dumps(runs)}\nAR_KILL_SEED={SEED} reproduces it"
            ) from None
    with capsys.disabled():
        print(
            f"\nkill tests: seed {SEED} (AR_KILL_SEED={SEED} reproduces), {rounds} rounds, "
            f"{runs_total} runs, {kills} killed with SIGKILL and recovered, languages {','.join(LANGUAGES)}"
        )
    assert kills > 0
