"""One store file shared by processes in three languages.

Drives store workers as child processes (the Rust `store_worker` example,
python/tests/store_worker.py, node/test/store_worker.mjs; one JSON-lines
protocol) against one SQLite file:

- every case of tests/store/operations.json with its ops dealt round-robin to a
  Rust, a Python and a Node process: the same answers as one store gives;
- a file created by each language has the same schema and pragmas;
- concurrent compare-and-set from six processes (two per language): exactly one
  winner per version; concurrent appends: every sequence number once.

No sleeps: the workers are released together by writing their commands after
all of them said they were ready, and every loop is bounded.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from .conftest import repo_root

#: How long one answer may take before the test fails (a hung worker, not timing).
ANSWER_TIMEOUT_S = 120
LANGUAGES = ("rust", "python", "node")


def worker_command(language: str, path: Path) -> List[str]:
    root = repo_root()
    if language == "rust":
        target = Path(os.environ.get("CARGO_TARGET_DIR", root / "target"))
        exe = target / "release" / "examples" / "store_worker"
        assert exe.exists(), f"{exe} is missing; run `cargo build --release -p agent-recovery --example store_worker`"
        return [str(exe), str(path)]
    if language == "python":
        return [sys.executable, str(root / "python" / "tests" / "store_worker.py"), str(path)]
    node = shutil.which("node")
    assert node, "node is not on PATH; install Node 20+"
    assert (root / "node" / "node_modules" / "better-sqlite3").exists(), (
        "node/node_modules/better-sqlite3 is missing; run `npm ci` in node/"
    )
    return [node, str(root / "node" / "test" / "store_worker.mjs"), str(path)]


class Worker:
    """A store worker process: send an op, read its one-line answer."""

    def __init__(self, language: str, path: Path) -> None:
        self.language = language
        self.proc = subprocess.Popen(
            worker_command(language, path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def ready(self) -> "Worker":
        """Wait until the worker opened the store."""
        ready = self.answer()
        assert ready == {"ready": True}, f"{self.language} worker did not start: {ready}"
        return self

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def send(self, op: Dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(op, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> Any:
        try:
            line = self.lines.get(timeout=ANSWER_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"{self.language} worker gave no answer in {ANSWER_TIMEOUT_S} s") from None
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"{self.language} worker exited ({self.proc.wait()}): {err}")
        return json.loads(line)

    def call(self, op: Dict[str, Any]) -> Any:
        self.send(op)
        return self.answer()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=ANSWER_TIMEOUT_S)
        assert code == 0, f"{self.language} worker exited with {code}"


def workers(languages: Tuple[str, ...], path: Path) -> List[Worker]:
    """Start one worker per language at once (so they race to create the file's
    schema when it is new), then wait until every one has opened the store."""
    started = [Worker(lang, path) for lang in languages]
    return [w.ready() for w in started]


def test_every_vector_case_dealt_across_three_languages_on_one_file(tmp_path: Path) -> None:
    doc = json.loads((repo_root() / "tests" / "store" / "operations.json").read_text(encoding="utf-8"))
    failures: List[str] = []
    for n, case in enumerate(doc["cases"]):
        ws = workers(LANGUAGES, tmp_path / f"case-{n}.db")
        for i, op in enumerate(case["ops"]):
            w = ws[i % len(ws)]
            got = w.call({k: v for k, v in op.items() if k != "expect"})
            if got != op["expect"]:
                failures.append(
                    f"case {case['name']!r} op {i} {op['op']} by {w.language}\n"
                    f"  expected: {json.dumps(op['expect'], ensure_ascii=False)}\n"
                    f"  got:      {json.dumps(got, ensure_ascii=False)}"
                )
        for w in ws:
            w.close()
    assert not failures, "\n".join(failures)


def test_a_file_goes_from_rust_to_python_to_node_and_back(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    rust = Worker("rust", path).ready()
    assert rust.call({"op": "cas", "key": "k", "expected": None, "value": '{"by":"rust"}', "ttl_ms": None, "now_ms": 1}) == {"written": {"version": 1}}
    assert rust.call({"op": "append", "stream": "trail", "record": '"rust"', "now_ms": 1}) == 1
    rust.close()
    py = Worker("python", path).ready()
    assert py.call({"op": "get", "key": "k", "now_ms": 2}) == {"value": '{"by":"rust"}', "version": 1}
    assert py.call({"op": "cas", "key": "k", "expected": 1, "value": '{"by":"python"}', "ttl_ms": 100, "now_ms": 2}) == {"written": {"version": 2}}
    assert py.call({"op": "append", "stream": "trail", "record": '"python"', "now_ms": 2}) == 2
    py.close()
    node = Worker("node", path).ready()
    assert node.call({"op": "get", "key": "k", "now_ms": 101}) == {"value": '{"by":"python"}', "version": 2}
    assert node.call({"op": "get", "key": "k", "now_ms": 102}) is None  # expired at 2 + 100
    assert node.call({"op": "cas", "key": "k", "expected": 2, "value": '{"by":"node"}', "ttl_ms": None, "now_ms": 102}) == {"conflict": {"current": None}}
    assert node.call({"op": "cas", "key": "k", "expected": None, "value": '{"by":"node"}', "ttl_ms": None, "now_ms": 102}) == {"written": {"version": 3}}
    assert node.call({"op": "append", "stream": "trail", "record": '"node"', "now_ms": 3}) == 3
    node.close()
    rust = Worker("rust", path).ready()
    assert rust.call({"op": "get", "key": "k", "now_ms": 10**12}) == {"value": '{"by":"node"}', "version": 3}
    assert rust.call({"op": "read", "stream": "trail", "after": 0, "limit": 10}) == [[1, '"rust"'], [2, '"python"'], [3, '"node"']]
    rust.close()


def file_shape(path: Path) -> Any:
    raw = sqlite3.connect(path)
    try:
        return {
            "objects": raw.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall(),
            "application_id": raw.execute("PRAGMA application_id").fetchone(),
            "user_version": raw.execute("PRAGMA user_version").fetchone(),
            "journal_mode": raw.execute("PRAGMA journal_mode").fetchone(),
        }
    finally:
        raw.close()


def test_each_language_creates_the_same_file(tmp_path: Path) -> None:
    shapes = {}
    for lang in LANGUAGES:
        path = tmp_path / f"{lang}.db"
        w = Worker(lang, path).ready()
        assert w.call({"op": "append", "stream": "s", "record": "1", "now_ms": 0}) == 1
        w.close()
        shapes[lang] = file_shape(path)
    assert shapes["rust"]["journal_mode"] == ("wal",)
    assert shapes["rust"]["application_id"] == (0x41525354,)
    assert shapes["rust"] == shapes["python"] == shapes["node"]


def test_six_processes_opening_a_new_file_at_once_create_its_schema_once(tmp_path: Path) -> None:
    for attempt in range(3):
        path = tmp_path / f"new-{attempt}.db"
        ws = workers(LANGUAGES * 2, path)
        for w in ws:
            w.close()
        assert file_shape(path)["objects"] == file_shape_of_rust(tmp_path / f"reference-{attempt}.db")


def file_shape_of_rust(path: Path) -> Any:
    Worker("rust", path).ready().close()
    return file_shape(path)["objects"]


def test_concurrent_cas_from_six_processes_has_one_winner_per_version(tmp_path: Path) -> None:
    path = tmp_path / "contended.db"
    ws = workers(LANGUAGES * 2, path)
    rounds = 40
    # Everyone is ready: release them together.
    for w in ws:
        w.send({"op": "increment", "key": "counter", "rounds": rounds, "now_ms": 5})
    wins: List[Tuple[int, int]] = []
    by_language: Dict[str, int] = {}
    for w in ws:
        got = w.answer()
        assert "wins" in got, f"{w.language}: {got}"
        wins += [(n, v) for n, v in got["wins"]]
        by_language[w.language] = by_language.get(w.language, 0) + len(got["wins"])
    last = ws[0].call({"op": "get", "key": "counter", "now_ms": 5})
    for w in ws:
        w.close()
    total = int(last["value"])
    # Each value 0..total-1 was incremented by exactly one process, and the
    # winners got consecutive versions 1..total.
    assert sorted(wins) == [(n, n + 1) for n in range(total)]
    assert last["version"] == total
    # Every process makes `rounds` attempts and each losing attempt overlaps a
    # distinct win, so one process alone guarantees at least `rounds` wins.
    assert total >= rounds
    print(f"six processes, {rounds} rounds each: {total} wins, by language {by_language}")


def test_concurrent_appends_from_six_processes_number_every_record_once(tmp_path: Path) -> None:
    path = tmp_path / "appends.db"
    ws = workers(LANGUAGES * 2, path)
    per_worker = 25
    for i, w in enumerate(ws):
        for j in range(per_worker):
            w.send({"op": "append", "stream": "journal", "record": json.dumps({"w": i, "j": j}), "now_ms": 7})
    seqs: Dict[int, str] = {}
    for i, w in enumerate(ws):
        mine = [w.answer() for _ in range(per_worker)]
        assert mine == sorted(mine), f"{w.language} saw its sequence numbers out of order: {mine}"
        for j, seq in enumerate(mine):
            assert seq not in seqs, f"sequence {seq} given twice"
            seqs[seq] = json.dumps({"w": i, "j": j})
    records = ws[0].call({"op": "read", "stream": "journal", "after": 0, "limit": 1000})
    for w in ws:
        w.close()
    total = per_worker * len(ws)
    assert sorted(seqs) == list(range(1, total + 1))
    assert records == [[seq, seqs[seq]] for seq in range(1, total + 1)]


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_worker_refuses_a_file_that_is_not_a_store(language: str, tmp_path: Path) -> None:
    path = tmp_path / "text.db"
    path.write_bytes(b"not a database\n" * 200)
    proc = subprocess.run(worker_command(language, path), input="", capture_output=True, text=True, timeout=ANSWER_TIMEOUT_S)
    assert proc.returncode == 1, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["error"] == "corrupt" and str(path) in answer["message"], answer
