"""The runtime's store: small, durable state shared by workers.

The same store as the Rust crate's `agent_recovery::store` and the Node
package's `store.js`, with the same semantics and one SQLite schema, so a
Python, a Node and a Rust process can share one file.

```python
from agent_recovery.store import SqliteStore, Written

with SqliteStore("state.db") as store:
    now = 1_700_000_000_000
    cas = store.compare_and_set("breaker/api", None, '{"state":"open"}', 30_000, now)
    assert isinstance(cas, Written)
    assert store.get("breaker/api", now + 30_000) is None  # expired
    assert store.append("journal/run-1", '{"step":"charge"}', now) == 1
```

A store holds **entries** (a key mapped to JSON text and a version, changed
only by `compare_and_set`, optionally with a time to live) and **streams**
(append-only JSON records numbered from 1 per stream). Time is always passed
in (`now_ms`, Unix milliseconds), never read by the store.

Versions are store-wide revisions, as in etcd: every successful
compare-and-set gets a version greater than any the store issued before, so a
version is never reused, even after an entry expired or was deleted.

Arguments are checked before the store is touched, as in Rust and Node:
keys and stream names are 1 to 1024 bytes of UTF-8 without NUL, values and
records are JSON text of at most 8 MiB (NaN and Infinity are not JSON), and
times, TTLs and versions are integers from 0 to 2**53 - 1. Anything else
raises `StoreError` with kind `invalid_argument`. See docs/store.md.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, Final, List, Optional, Protocol, Tuple, Type, Union

#: The longest key or stream name, in bytes of UTF-8.
MAX_NAME_BYTES: Final = 1024
#: The longest value or record, in bytes of JSON text (UTF-8).
MAX_VALUE_BYTES: Final = 8 * 1024 * 1024
#: The largest time, TTL, version or sequence number (2**53 - 1).
MAX_INTEGER: Final = 2**53 - 1
#: The schema version this package reads and writes (`PRAGMA user_version`).
SCHEMA_VERSION: Final = 1
#: `PRAGMA application_id` of a store file: 'ARST' as a big-endian integer.
APPLICATION_ID: Final = 0x41525354
#: How many expired entries a write removes on its way.
PURGE_BATCH: Final = 64

#: The kinds of `StoreError` (snake_case twins of Rust's `StoreErrorKind`).
#: New kinds may be added.
STORE_ERROR_KINDS: Final = (
    "invalid_argument",  # a bad key, value, time, TTL or version: nothing changed
    "unavailable",  # another process held the write lock past the busy timeout
    "corrupt",  # not an SQLite database, damaged, or a row that breaks the schema
    "incompatible",  # another application's database, or a newer schema version
    "io",  # the file could not be opened, read or written
)

#: The schema: host/src/store/schema.sql, the text all three stores run,
#: packaged as it is (setup.py copies it). Run in one BEGIN IMMEDIATE
#: transaction on a file without tables.
SCHEMA_SQL: Final = (resources.files("agent_recovery") / "_sql" / "schema.sql").read_text(encoding="utf-8")


class StoreError(Exception):
    """A store operation failed.

    `kind` is one of `STORE_ERROR_KINDS`; `message` names the bad input (key,
    path, value) and ends with a hint.
    """

    kind: str
    message: str

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"StoreError({self.kind!r}, {self.message!r})"


@dataclass(frozen=True)
class Versioned:
    """A value (JSON text, exactly as written) and the version of its write."""

    value: str
    version: int


@dataclass(frozen=True)
class Written:
    """`compare_and_set` wrote the value; `version` is the new version."""

    version: int


@dataclass(frozen=True)
class Conflict:
    """`compare_and_set` wrote nothing: the live version was not the expected one.

    `current` is the live entry (None when absent or expired).
    """

    current: Optional[Versioned]


#: The result of `compare_and_set`.
Cas = Union[Written, Conflict]


class Store(Protocol):
    """The store interface, shared with Rust and Node (see the module docs)."""

    def get(self, key: str, now_ms: int) -> Optional[Versioned]:
        """The live value at `key` (None when absent or expired at `now_ms`)."""
        ...

    def compare_and_set(
        self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int
    ) -> Cas:
        """Write `value` iff the live version is `expected` (None = absent or expired).

        The entry expires at `now_ms + ttl_ms` (`ttl_ms` None = never); an
        entry is live at `t` while `t < expires_at_ms`.
        """
        ...

    def append(self, stream: str, record: str, now_ms: int) -> int:
        """Append a record (JSON text); returns its sequence number (from 1, per stream)."""
        ...

    def read(self, stream: str, after: int, limit: int) -> List[Tuple[int, str]]:
        """Records of `stream` with sequence > `after`, oldest first, at most `limit`."""
        ...

    def delete(self, key: str) -> bool:
        """Remove `key`; True when it existed (unspecified for an expired, unpurged entry)."""
        ...

    def keys(self, prefix: str, now_ms: int) -> List[str]:
        """Live keys starting with `prefix`, sorted by UTF-8 bytes."""
        ...


# ---------------------------------------------------------------- argument checks


def _invalid(message: str) -> StoreError:
    return StoreError("invalid_argument", message)


def _check_name(what: str, name: object, empty_ok: bool = False) -> str:
    # The common case first: ASCII text (one byte a character, no surrogate).
    if type(name) is str and name.isascii() and 0 < len(name) <= MAX_NAME_BYTES and "\0" not in name:
        return name
    if not isinstance(name, str):
        raise _invalid(f"the {what} is a {type(name).__name__}, not a str; pass a str")
    if not name:
        if empty_ok:
            return name
        raise _invalid(f'the {what} is empty; pass a non-empty name such as "breaker/api"')
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid(
            f"the {what} {name!r} is not valid Unicode (a lone surrogate); pass text that encodes as UTF-8"
        ) from None
    if size > MAX_NAME_BYTES:
        raise _invalid(
            f"the {what} is {size} bytes long, more than {MAX_NAME_BYTES}; hash long names into a shorter one"
        )
    if "\0" in name:
        raise _invalid(f"the {what} {name!r} contains a NUL character; remove it")
    return name


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: `json.loads(text, parse_constant=_no_constant)` with the decoder built once.
_STRICT_DECODE = json.JSONDecoder(parse_constant=_no_constant).decode


def _check_json(what: str, key: str, text: object, parse: bool = True) -> str:
    if not parse and type(text) is str and text.isascii() and len(text) <= MAX_VALUE_BYTES:
        return text  # the common case of a value not parsed: its size is its length
    if not isinstance(text, str):
        raise _invalid(
            f"the {what} for {key!r} is a {type(text).__name__}, not JSON text; pass json.dumps(value)"
        )
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid(
            f"the {what} for {key!r} is not valid Unicode (a lone surrogate); escape it as \\uXXXX in the JSON text"
        ) from None
    if size > MAX_VALUE_BYTES:
        raise _invalid(
            f"the {what} for {key!r} is {size} bytes, more than {MAX_VALUE_BYTES}; "
            "store large payloads elsewhere and keep a reference"
        )
    if not parse:
        return text
    try:
        if text.startswith("\ufeff"):  # json.loads' own message for a BOM
            json.loads(text, parse_constant=_no_constant)
        _STRICT_DECODE(text)
    except (ValueError, RecursionError) as e:
        raise _invalid(f"the {what} for {key!r} is not JSON ({e}); pass JSON text, e.g. json.dumps(value)") from None
    return text


def _check_int(what: str, n: object) -> int:
    if type(n) is int and 0 <= n <= MAX_INTEGER:
        return n
    if not isinstance(n, int) or isinstance(n, bool):
        raise _invalid(f"{what} is {n!r}, not an integer; pass whole Unix milliseconds or a count")
    if n < 0 or n > MAX_INTEGER:
        raise _invalid(f"{what} {n} is outside 0..{MAX_INTEGER} (2^53 - 1); pass Unix milliseconds or a smaller number")
    return n


def _check_cas(
    key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int, parse: bool = True
) -> Optional[int]:
    """Check a compare-and-set's arguments; returns the expiry time. `parse`:
    check that the value is JSON (False: a value the loop component wrote)."""
    _check_name("key", key)
    _check_int("now_ms", now_ms)
    if expected is not None:
        _check_int("expected version", expected)
        if expected == 0:
            raise _invalid(
                f"expected version 0 for {key!r} never exists (versions start at 1); pass None to create the entry"
            )
    _check_json("value", key, value, parse)
    if ttl_ms is None:
        return None
    _check_int("ttl_ms", ttl_ms)
    if ttl_ms == 0:
        raise _invalid(f"ttl_ms 0 for {key!r} would expire the entry at once; pass None for no expiry or at least 1")
    return _check_int("now_ms + ttl_ms", now_ms + ttl_ms)


def _is_live(expires_at_ms: Optional[int], now_ms: int) -> bool:
    return expires_at_ms is None or now_ms < expires_at_ms


# ---------------------------------------------------------------- MemoryStore


class MemoryStore:
    """A store in process memory: the same semantics as `SqliteStore`, nothing persists.

    Thread-safe. The first write gets version 1.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> (value, version, expires_at_ms)
        self._entries: Dict[str, Tuple[str, int, Optional[int]]] = {}
        # (expires_at_ms, key, version) of every write with a TTL; stale items
        # (the key was rewritten or deleted since) are skipped when popped.
        self._expiries: List[Tuple[int, str, int]] = []
        self._streams: Dict[str, List[str]] = {}
        self._revision = 0

    def purge_expired(self, now_ms: int) -> int:
        """Remove every entry expired at `now_ms`; returns how many were removed."""
        _check_int("now_ms", now_ms)
        with self._lock:
            return self._purge(now_ms)

    def _purge(self, now_ms: int) -> int:
        removed = 0
        while self._expiries and self._expiries[0][0] <= now_ms:
            _, key, version = heapq.heappop(self._expiries)
            entry = self._entries.get(key)
            if entry is not None and entry[1] == version:
                del self._entries[key]
                removed += 1
        return removed

    def _live(self, key: str, now_ms: int) -> Optional[Versioned]:
        entry = self._entries.get(key)
        if entry is None or not _is_live(entry[2], now_ms):
            return None
        return Versioned(entry[0], entry[1])

    def get(self, key: str, now_ms: int) -> Optional[Versioned]:
        _check_name("key", key)
        _check_int("now_ms", now_ms)
        with self._lock:
            return self._live(key, now_ms)

    def compare_and_set(
        self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int
    ) -> Cas:
        expires_at_ms = _check_cas(key, expected, value, ttl_ms, now_ms)
        with self._lock:
            return self._cas(key, expected, value, expires_at_ms, now_ms)

    # The runtime's own calls (`runtime._StoreOps`): the values are the loop
    # component's bytes, JSON by construction, so their size is checked and
    # their syntax is not parsed again; `_put_loop` and `_get_many_loop` take
    # the lock once for what `get` + `compare_and_set` take it twice for.

    def _cas_loop(self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int) -> Cas:
        expires_at_ms = _check_cas(key, expected, value, ttl_ms, now_ms, parse=False)
        with self._lock:
            return self._cas(key, expected, value, expires_at_ms, now_ms)

    def _put_loop(self, key: str, value: str, ttl_ms: Optional[int], now_ms: int) -> None:
        """Last-writer-wins (the runtime's `_put`, which never conflicts here)."""
        expires_at_ms = _check_cas(key, None, value, ttl_ms, now_ms, parse=False)
        with self._lock:
            # `_cas` with the live version expected, which always writes.
            self._assign(key, value, expires_at_ms, now_ms)

    def _get_many_loop(self, keys: List[str], now_ms: int) -> List[Optional[Versioned]]:
        for key in keys:
            _check_name("key", key)
        _check_int("now_ms", now_ms)
        with self._lock:
            return [self._live(key, now_ms) for key in keys]

    def _cas(self, key: str, expected: Optional[int], value: str, expires_at_ms: Optional[int], now_ms: int) -> Cas:
        """The compare-and-set, its arguments checked, under the lock."""
        current = self._live(key, now_ms)
        if (current.version if current else None) != expected:
            return Conflict(current)
        return Written(self._assign(key, value, expires_at_ms, now_ms))

    def _assign(self, key: str, value: str, expires_at_ms: Optional[int], now_ms: int) -> int:
        """Write the entry (the compare-and-set's check passed), under the lock; its version."""
        self._purge(now_ms)  # like SqliteStore: a write (not a conflict) purges on its way
        if self._revision >= MAX_INTEGER:
            raise StoreError(
                "unavailable",
                f"the store has issued {self._revision} versions, the most it can; "
                "copy the live entries to a new store",
            )
        self._revision += 1
        version = self._revision
        self._entries[key] = (value, version, expires_at_ms)
        if expires_at_ms is not None:
            heapq.heappush(self._expiries, (expires_at_ms, key, version))
        return version

    def append(self, stream: str, record: str, now_ms: int) -> int:
        _check_name("stream", stream)
        _check_int("now_ms", now_ms)
        _check_json("record", stream, record)
        with self._lock:
            records = self._streams.setdefault(stream, [])
            records.append(record)
            return len(records)

    def read(self, stream: str, after: int, limit: int) -> List[Tuple[int, str]]:
        _check_name("stream", stream)
        _check_int("after", after)
        _check_int("limit", limit)
        with self._lock:
            records = self._streams.get(stream, [])
            return [(after + i + 1, r) for i, r in enumerate(records[after : after + limit])]

    def delete(self, key: str) -> bool:
        _check_name("key", key)
        with self._lock:
            return self._entries.pop(key, None) is not None

    def keys(self, prefix: str, now_ms: int) -> List[str]:
        _check_name("prefix", prefix, empty_ok=True)
        _check_int("now_ms", now_ms)
        with self._lock:
            # Sorting str sorts by code point, which is UTF-8 byte order.
            return sorted(
                k for k, (_, _, at) in self._entries.items() if k.startswith(prefix) and _is_live(at, now_ms)
            )


# ---------------------------------------------------------------- SqliteStore

_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB


class _Corrupt(Exception):
    """A row that breaks the schema (raised inside a transaction, then mapped)."""


def _stored_int(n: object) -> int:
    if not isinstance(n, int) or n < 0 or n > MAX_INTEGER:
        raise _Corrupt(f"the integer {n!r} is outside 0..2^53 - 1")
    return n


def _stored_text(s: object) -> str:
    if not isinstance(s, str):
        raise _Corrupt(f"a {type(s).__name__} where the schema has TEXT")
    return s


def _schema_statements() -> List[str]:
    statements: List[str] = []
    pending = ""
    for line in SCHEMA_SQL.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending)
            pending = ""
    return statements


class SqliteStore:
    """A store in one SQLite file, shared with Rust and Node processes.

    `SqliteStore(path)` opens the file, creating it and its schema if absent.
    Settings: WAL journal (readers never block the writer); `synchronous`
    `"full"` (default: a committed write survives a power cut) or `"normal"`
    (a power cut may lose the last commits, never corrupts the file; much
    faster writes; both survive a killed process); and a busy timeout of
    `busy_timeout_s` seconds (default 5) after which a write waiting for
    another process's lock raises `StoreError("unavailable")`. Every write runs
    in a `BEGIN IMMEDIATE` transaction, so compare-and-set is atomic across
    processes. Thread-safe (one connection behind a lock). Use it as a context
    manager, or call `close()`.

    Raises `StoreError` with kind `corrupt` (not an SQLite database, damaged),
    `incompatible` (another application's database, a newer schema), `io`
    (cannot open or create) or `unavailable` (locked past the busy timeout).
    """

    def __init__(self, path: Union[str, Path], busy_timeout_s: float = 5.0, synchronous: str = "full") -> None:
        self._path = str(path)
        self._lock = threading.Lock()
        if synchronous not in ("full", "normal"):
            raise _invalid(f'synchronous {synchronous!r} is not "full" or "normal"; pass one of them')
        if (
            not isinstance(busy_timeout_s, (int, float))
            or isinstance(busy_timeout_s, bool)
            or not 0 <= busy_timeout_s <= 86_400
        ):
            raise _invalid(f"busy_timeout_s {busy_timeout_s!r} is not a number of seconds from 0 to 86400; pass e.g. 5.0")
        self._synchronous = synchronous.upper()
        self._busy_timeout_s = float(busy_timeout_s)
        try:
            self._conn = sqlite3.connect(
                self._path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise self._error("opening", e) from None
        try:
            self._init()
        except BaseException:
            self._conn.close()
            raise

    @property
    def path(self) -> str:
        """The path this store was opened with."""
        return self._path

    @property
    def synchronous(self) -> str:
        """The connection's `synchronous` setting as SQLite reports it: "full" or "normal"."""
        level = self._read("reading synchronous", lambda: self._conn.execute("PRAGMA synchronous").fetchone()[0])
        return "full" if level >= 2 else "normal"

    def close(self) -> None:
        """Close the connection (the file stays; other processes are unaffected)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "SqliteStore":
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    # -- errors

    def _error(self, what: str, e: BaseException) -> StoreError:
        code = getattr(e, "sqlite_errorcode", None)
        primary = code & 0xFF if isinstance(code, int) else None
        if isinstance(e, _Corrupt):
            kind, hint = "corrupt", (
                "a row breaks the store's schema (written by another program?); "
                "move the file aside and start a new store"
            )
        elif primary in _BUSY:
            kind, hint = "unavailable", (
                "another process held the write lock past the busy timeout; retry later or raise the timeout"
            )
        elif primary in _DAMAGED:
            kind, hint = "corrupt", (
                "the file is not an SQLite database or is damaged; move it aside and start a new store"
            )
        elif isinstance(e, sqlite3.ProgrammingError) and "closed" in str(e):
            kind, hint = "io", "the store was closed; open a new SqliteStore"
        else:
            kind, hint = "io", "check that the directory exists, the file is writable and the disk has space"
        return StoreError(kind, f"sqlite store {self._path}: {what} failed ({e}); {hint}")

    def _incompatible(self, why: str) -> StoreError:
        return StoreError("incompatible", f"{self._path}: {why}")

    # -- opening

    def _header(self) -> Tuple[int, int]:
        app_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        return int(app_id), int(version)

    def _check_header(self, app_id: int, version: int) -> None:
        if app_id == APPLICATION_ID:
            if version == SCHEMA_VERSION:
                return
            if version > SCHEMA_VERSION:
                raise self._incompatible(
                    f"the store has schema version {version}, newer than version {SCHEMA_VERSION} "
                    "that this build reads; upgrade agent-recovery"
                )
            raise self._incompatible(
                f"the store has schema version {version}, which never existed; "
                "the file was changed by another program, move it aside"
            )
        if app_id != 0:
            raise self._incompatible(
                f"an SQLite database of another application (application_id {app_id}); "
                "give the store a file of its own"
            )
        tables = self._conn.execute("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table')").fetchone()[0]
        if tables:
            raise self._incompatible(
                "an SQLite database with tables that is not an agent-recovery store; give the store a file of its own"
            )

    def _init(self) -> None:
        step = "reading the header"
        try:
            # The header and the table list are read in one read
            # transaction: read apart, a schema another process commits
            # between them looks like a foreign database's tables.
            self._conn.execute("BEGIN")
            try:
                app_id, version = self._header()
                self._check_header(app_id, version)
            finally:
                self._conn.execute("COMMIT")
            step = "setting WAL mode"
            self._set_wal()
            self._conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            if app_id != 0:
                return
            # Another process may be creating the schema right now: decide
            # again under the write lock.
            step = "creating the schema"
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                app_id, version = self._header()
                self._check_header(app_id, version)
                if app_id == 0:
                    for statement in _schema_statements():
                        self._conn.execute(statement)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise self._error(step, e) from None

    def _set_wal(self) -> None:
        """`PRAGMA journal_mode = WAL`, retried until the busy timeout has passed.

        Switching a file into WAL mode takes the write lock while the
        statement already holds a read lock, and SQLite answers SQLITE_BUSY at
        once, without its busy handler, when another connection holds the
        write lock. That happens whenever several processes open a new store
        together, so wait here instead.
        """
        deadline = time.monotonic() + self._busy_timeout_s
        pause = 0.001
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
                return
            except sqlite3.OperationalError as e:
                code = getattr(e, "sqlite_errorcode", None)
                if not isinstance(code, int) or code & 0xFF not in _BUSY or time.monotonic() + pause >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    # -- operations

    def _write(self, what: str, body: Any) -> Any:
        """Run `body()` in a BEGIN IMMEDIATE transaction; commit unless it returns a Conflict."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = body()
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("ROLLBACK" if isinstance(result, Conflict) else "COMMIT")
                return result
            except (sqlite3.Error, _Corrupt) as e:
                raise self._error(what, e) from None

    def _live(self, key: str, now_ms: int) -> Optional[Versioned]:
        row = self._conn.execute(
            "SELECT value, version, expires_at_ms FROM ar_entries WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        value, version, expires_at_ms = _stored_text(row[0]), _stored_int(row[1]), row[2]
        if expires_at_ms is not None:
            expires_at_ms = _stored_int(expires_at_ms)
        return Versioned(value, version) if _is_live(expires_at_ms, now_ms) else None

    def _read(self, what: str, body: Any) -> Any:
        with self._lock:
            try:
                return body()
            except (sqlite3.Error, _Corrupt) as e:
                raise self._error(what, e) from None

    def get(self, key: str, now_ms: int) -> Optional[Versioned]:
        _check_name("key", key)
        _check_int("now_ms", now_ms)
        return self._read("reading an entry", lambda: self._live(key, now_ms))  # type: ignore[no-any-return]

    def compare_and_set(
        self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int
    ) -> Cas:
        expires_at_ms = _check_cas(key, expected, value, ttl_ms, now_ms)

        def body() -> Cas:
            current = self._live(key, now_ms)
            if (current.version if current else None) != expected:
                return Conflict(current)
            self._conn.execute(
                "DELETE FROM ar_entries WHERE key IN (SELECT key FROM ar_entries "
                "WHERE expires_at_ms <= ? ORDER BY expires_at_ms LIMIT ?)",
                (now_ms, PURGE_BATCH),
            )
            self._conn.execute("UPDATE ar_meta SET value = value + 1 WHERE name = 'revision'")
            version = _stored_int(self._conn.execute("SELECT value FROM ar_meta WHERE name = 'revision'").fetchone()[0])
            self._conn.execute(
                "INSERT OR REPLACE INTO ar_entries (key, value, version, expires_at_ms, updated_at_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, value, version, expires_at_ms, now_ms),
            )
            return Written(version)

        return self._write("compare-and-set", body)  # type: ignore[no-any-return]

    def append(self, stream: str, record: str, now_ms: int) -> int:
        _check_name("stream", stream)
        _check_int("now_ms", now_ms)
        _check_json("record", stream, record)

        def body() -> int:
            last = self._conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM ar_records WHERE stream = ?", (stream,)
            ).fetchone()[0]
            seq = _stored_int(last) + 1
            self._conn.execute(
                "INSERT INTO ar_records (stream, seq, record, appended_at_ms) VALUES (?, ?, ?, ?)",
                (stream, seq, record, now_ms),
            )
            return seq

        return self._write("appending a record", body)  # type: ignore[no-any-return]

    def read(self, stream: str, after: int, limit: int) -> List[Tuple[int, str]]:
        _check_name("stream", stream)
        _check_int("after", after)
        _check_int("limit", limit)

        def body() -> List[Tuple[int, str]]:
            rows = self._conn.execute(
                "SELECT seq, record FROM ar_records WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?",
                (stream, after, limit),
            ).fetchall()
            return [(_stored_int(seq), _stored_text(record)) for seq, record in rows]

        return self._read("reading a stream", body)  # type: ignore[no-any-return]

    def delete(self, key: str) -> bool:
        _check_name("key", key)
        return self._read(  # type: ignore[no-any-return]
            "deleting an entry",
            lambda: self._conn.execute("DELETE FROM ar_entries WHERE key = ?", (key,)).rowcount > 0,
        )

    def keys(self, prefix: str, now_ms: int) -> List[str]:
        _check_name("prefix", prefix, empty_ok=True)
        _check_int("now_ms", now_ms)

        def body() -> List[str]:
            # Keys compare as UTF-8 bytes (BINARY collation): the ones with the
            # prefix are a contiguous run starting at the prefix.
            cursor = self._conn.execute(
                "SELECT key FROM ar_entries WHERE key >= ? "
                "AND (expires_at_ms IS NULL OR expires_at_ms > ?) ORDER BY key",
                (prefix, now_ms),
            )
            keys: List[str] = []
            for (key,) in cursor:
                key = _stored_text(key)
                if not key.startswith(prefix):
                    break
                keys.append(key)
            return keys

        return self._read("listing keys", body)  # type: ignore[no-any-return]

    def purge_expired(self, now_ms: int) -> int:
        """Remove every entry expired at `now_ms`; returns how many were removed.

        (Writes also remove up to 64 expired entries each, on their way.)
        """
        _check_int("now_ms", now_ms)
        return self._read(  # type: ignore[no-any-return]
            "purging expired entries",
            lambda: self._conn.execute("DELETE FROM ar_entries WHERE expires_at_ms <= ?", (now_ms,)).rowcount,
        )


# ---------------------------------------------------------------- open_store


def open_store(spec: Union[str, Path], *, on_event: Any = None) -> Any:
    """Open a store from a spec string, as every entry point that takes a store does.

    - `redis://[user:pass@]host[:port][/db][?opts]` (`rediss://` for TLS): by
      default a `FallbackStore` over a `RedisStore` and a local spool file;
      with `fallback=none` a bare `RedisStore`. Options and defaults:
      `prefix=ar`, `timeout_ms=1000`, `connect_timeout_ms=1000`,
      `fallback=local`, `spool=` (default
      `$XDG_STATE_HOME/agent-recovery/spool-<h>.sqlite`), `probe_ms=1000`,
      `grace_ms=60000` (agent_recovery.redis_store). `on_event` gets the
      `store_degraded` / `store_restored` events' JSON text.
    - anything else: `SqliteStore(spec)`.

    Needs the `redis` package for a URL (`pip install 'agent-recovery[redis]'`:
    else `StoreError("io")` saying so).
    """
    text = str(spec) if isinstance(spec, Path) else spec
    if not isinstance(text, str):
        raise _invalid(f"the store spec is a {type(spec).__name__}; pass a file path or a redis:// URL")
    if text.startswith(("redis://", "rediss://", "redis+cluster://")):
        from .redis_store import open_redis

        return open_redis(text, on_event=on_event)
    return SqliteStore(text)


__all__ = [
    "APPLICATION_ID",
    "Cas",
    "Conflict",
    "MAX_INTEGER",
    "MAX_NAME_BYTES",
    "MAX_VALUE_BYTES",
    "MemoryStore",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "STORE_ERROR_KINDS",
    "SqliteStore",
    "Store",
    "StoreError",
    "Versioned",
    "Written",
    "open_store",
]
