"""The store: the shared vectors (tests/store/operations.json) against
MemoryStore and SqliteStore, the schema shared with Rust, refusal of files
that are not stores, and Python-only bad input (wrong types)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest

from agent_recovery.store import (
    APPLICATION_ID,
    MAX_VALUE_BYTES,
    SCHEMA_SQL,
    SCHEMA_VERSION,
    STORE_ERROR_KINDS,
    Conflict,
    MemoryStore,
    SqliteStore,
    StoreError,
    Versioned,
    Written,
)

from .conftest import repo_root
from .store_ops import AnyStore, apply

T = 1_700_000_000_000


def cases() -> List[Dict[str, Any]]:
    doc = json.loads((repo_root() / "tests" / "store" / "operations.json").read_text(encoding="utf-8"))
    return list(doc["cases"])


def run_case(backend: str, store: AnyStore, case: Dict[str, Any], failures: List[str]) -> None:
    for i, op in enumerate(case["ops"]):
        got = apply(store, op)
        if got != op["expect"]:
            failures.append(
                f"{backend}: case {case['name']!r} op {i} {op['op']}\n"
                f"  expected: {json.dumps(op['expect'], ensure_ascii=False)}\n"
                f"  got:      {json.dumps(got, ensure_ascii=False)}"
            )


def test_memory_store_passes_the_shared_vectors() -> None:
    failures: List[str] = []
    all_cases = cases()
    assert len(all_cases) >= 10
    for case in all_cases:
        run_case("memory", MemoryStore(), case, failures)
    assert not failures, "\n".join(failures)


def test_sqlite_store_passes_the_shared_vectors(tmp_path: Path) -> None:
    failures: List[str] = []
    for n, case in enumerate(cases()):
        with SqliteStore(tmp_path / f"case-{n}.db") as store:
            run_case("sqlite", store, case, failures)
    assert not failures, "\n".join(failures)


def test_the_schema_is_the_rust_schema_byte_for_byte() -> None:
    rust = (repo_root() / "host" / "src" / "store" / "schema.sql").read_text(encoding="utf-8")
    assert SCHEMA_SQL == rust
    assert APPLICATION_ID == int.from_bytes(b"ARST", "big")
    assert f"PRAGMA application_id = {APPLICATION_ID};" in SCHEMA_SQL
    assert f"PRAGMA user_version = {SCHEMA_VERSION};" in SCHEMA_SQL


def test_the_file_has_the_documented_pragmas_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert raw.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    names = [r[0] for r in raw.execute("SELECT name FROM sqlite_master ORDER BY name")]
    assert names == ["ar_entries", "ar_entries_expiry", "ar_meta", "ar_records"]
    raw.close()


def test_synchronous_is_full_unless_asked_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as s, SqliteStore(path, synchronous="normal") as fast:
        assert s.synchronous == "full"
        assert fast.synchronous == "normal"
        assert fast.compare_and_set("k", None, "1", None, T) == Written(1)
        assert s.get("k", T) == Versioned("1", 1)
    for bad in [{"synchronous": "off"}, {"synchronous": "FULL"}, {"busy_timeout_s": -1}, {"busy_timeout_s": "5"}]:
        with pytest.raises(StoreError) as info:
            SqliteStore(path, **bad)  # type: ignore[arg-type]
        assert info.value.kind == "invalid_argument", bad


def test_data_and_versions_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as s:
        assert s.compare_and_set("a", None, "1", None, T) == Written(1)
        assert s.delete("a")
        assert s.append("j", "{}", T) == 1
    with SqliteStore(path) as s:
        assert s.get("a", T) is None
        assert s.compare_and_set("a", None, "1", None, T) == Written(2)
        assert s.append("j", "{}", T) == 2


def refused(path: Path) -> StoreError:
    with pytest.raises(StoreError) as info:
        SqliteStore(path)
    assert info.value.kind in STORE_ERROR_KINDS
    assert str(path) in info.value.message and ";" in info.value.message
    return info.value


def test_files_that_are_not_stores_are_refused_with_a_kind(tmp_path: Path) -> None:
    text = tmp_path / "text.db"
    text.write_bytes(b"hello, not a database\n" * 100)
    assert refused(text).kind == "corrupt"
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"SQLite format 3\0" + b"\xa5" * 4096)
    assert refused(garbage).kind == "corrupt"

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as raw:
        raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    assert refused(foreign).kind == "incompatible"

    other = tmp_path / "other.db"
    raw = sqlite3.connect(other)
    raw.execute("PRAGMA application_id = 42")
    raw.close()
    e = refused(other)
    assert e.kind == "incompatible" and "application_id 42" in e.message

    newer = tmp_path / "newer.db"
    SqliteStore(newer).close()
    raw = sqlite3.connect(newer)
    raw.execute("PRAGMA user_version = 2")
    raw.close()
    e = refused(newer)
    assert e.kind == "incompatible" and "schema version 2" in e.message and "upgrade" in e.message

    assert refused(tmp_path / "no" / "such" / "dir.db").kind == "io"
    assert refused(tmp_path).kind == "io"


def test_rows_that_break_the_schema_read_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as s:
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("INSERT INTO ar_entries VALUES ('blob', x'00ff', 1, NULL, 0)")
        raw.execute("INSERT INTO ar_entries VALUES ('huge', '1', 9007199254740992, NULL, 0)")
        raw.execute("INSERT INTO ar_records VALUES ('s', 1, x'00ff', 0)")
        raw.close()
        for key in ("blob", "huge"):
            with pytest.raises(StoreError) as info:
                s.get(key, T)
            assert info.value.kind == "corrupt", info.value.message
        with pytest.raises(StoreError) as info:
            s.read("s", 0, 10)
        assert info.value.kind == "corrupt"
        with pytest.raises(StoreError) as info:
            s.compare_and_set("huge", None, "2", None, T)
        assert info.value.kind == "corrupt"
        assert s.compare_and_set("ok", None, "1", None, T) == Written(1)


def test_a_held_write_lock_gives_unavailable_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path, busy_timeout_s=0.02) as s:
        assert s.compare_and_set("k", None, "1", None, T) == Written(1)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError) as info:
            s.compare_and_set("k", 1, "2", None, T)
        assert info.value.kind == "unavailable" and "busy timeout" in info.value.message
        assert s.get("k", T) == Versioned("1", 1)  # readers are not blocked (WAL)
        holder.execute("ROLLBACK")
        holder.close()
        assert s.compare_and_set("k", 1, "2", None, T) == Written(2)


def test_writes_purge_expired_rows_on_their_way(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as s:
        for i in range(100):
            s.compare_and_set(f"e/{i}", None, "0", 10, T)
        raw = sqlite3.connect(path)
        count = lambda: raw.execute("SELECT COUNT(*) FROM ar_entries").fetchone()[0]  # noqa: E731
        assert count() == 100
        s.compare_and_set("live", None, "1", None, T + 10)
        assert count() == 100 - 64 + 1
        assert s.purge_expired(T + 10) == 36
        assert count() == 1
        raw.close()


@pytest.mark.parametrize("make", ["memory", "sqlite"])
def test_python_only_bad_input_is_refused(make: str, tmp_path: Path) -> None:
    store: Any = MemoryStore() if make == "memory" else SqliteStore(tmp_path / "s.db")
    calls = [
        lambda: store.get(b"k", T),
        lambda: store.get(None, T),
        lambda: store.get("k", 1.5),
        lambda: store.get("k", -1),
        lambda: store.get("k", True),
        lambda: store.get("\ud800", T),
        lambda: store.compare_and_set("k", None, b"1", None, T),
        lambda: store.compare_and_set("k", None, {"a": 1}, None, T),
        lambda: store.compare_and_set("k", None, '"\ud800"', None, T),
        lambda: store.compare_and_set("k", 1.0, "1", None, T),
        lambda: store.compare_and_set("k", -1, "1", None, T),
        lambda: store.compare_and_set("k", None, "1", -5, T),
        lambda: store.compare_and_set("k", None, "1", 2.5, T),
        lambda: store.compare_and_set("k", None, " " * (MAX_VALUE_BYTES - 1) + "1 ", None, T),
        lambda: store.compare_and_set("k", None, "[" * 100_000 + "]" * 100_000, None, T),
        lambda: store.append("s", 1, T),
        lambda: store.read("s", 0, -1),
        lambda: store.read("s", 0, 2**64),
        lambda: store.read("s", "0", 1),
        lambda: store.keys(None, T),
        lambda: store.delete(7),
        lambda: store.purge_expired(-1),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(StoreError) as info:
            call()
        assert info.value.kind == "invalid_argument", (i, info.value.message)
        assert ";" in info.value.message, (i, info.value.message)
    # Exactly the limit is accepted (8 MiB of JSON text, spaces around a 1).
    assert store.compare_and_set("k", None, " " * (MAX_VALUE_BYTES - 2) + "1 ", None, T) == Written(1)
    assert store.keys("", T) == ["k"]
    assert store.read("s", 0, 10) == []
    if isinstance(store, SqliteStore):
        store.close()


def test_a_closed_store_raises_io(tmp_path: Path) -> None:
    s = SqliteStore(tmp_path / "s.db")
    s.close()
    with pytest.raises(StoreError) as info:
        s.get("k", T)
    assert info.value.kind == "io" and "closed" in info.value.message


@pytest.mark.parametrize("make", ["memory", "sqlite"])
def test_one_winner_per_version_across_threads(make: str, tmp_path: Path) -> None:
    store: Any = MemoryStore() if make == "memory" else SqliteStore(tmp_path / "s.db")
    store.compare_and_set("n", None, "0", None, T)
    barrier = threading.Barrier(4)
    wins: List[List[int]] = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait()
        for _ in range(50):
            cur = store.get("n", T)
            cas = store.compare_and_set("n", cur.version, str(int(cur.value) + 1), None, T)
            if isinstance(cas, Written):
                with lock:
                    wins.append([int(cur.value), cas.version])
            else:
                assert isinstance(cas, Conflict)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    last = store.get("n", T)
    n = int(last.value)
    assert sorted(wins) == [[i, i + 2] for i in range(n)]
    assert n >= 50


def test_connections_racing_to_create_the_schema_all_open_the_store(tmp_path: Path) -> None:
    """Many connections opening one new file at once all get the store.

    The first creates the schema; the others must neither mistake the
    half-seen schema for a foreign database's tables nor give up on the WAL
    switch, which SQLite refuses at once while another connection holds the
    write lock. sqlite3 releases the GIL, so threads interleave like
    processes; the barrier and the rounds make the race likely, no sleep.
    """
    openers = 6
    for round_ in range(40):
        path = tmp_path / f"race-{round_}.db"
        barrier = threading.Barrier(openers)
        errors: List[BaseException] = []

        def open_it(barrier: threading.Barrier, path: Path, errors: List[BaseException]) -> None:
            barrier.wait()
            try:
                SqliteStore(path).close()
            except BaseException as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

        threads = [threading.Thread(target=open_it, args=(barrier, path, errors)) for _ in range(openers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [], f"round {round_}: {errors[0]}"
        with SqliteStore(path) as store:
            assert isinstance(store.compare_and_set("k", None, "1", None, T), Written)
