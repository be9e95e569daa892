"""The dead-letter queue as an operable thing (docs/durability.md §3).

The loop appends a record to the stream `agent-recovery/dead-letter` whenever a
run gives up (`dead_lettered`, `cancelled` with a failed compensation,
`interrupted` after a recovery). This module is the operator's side of that
stream, over any store (a `SqliteStore` written by a Rust, Node or Python
worker reads the same):

```python
from agent_recovery.runtime import Runtime
from agent_recovery.store import SqliteStore

runtime = Runtime(store=SqliteStore("state.db"))
dlq = runtime.dead_letters
for item in dlq.list():              # open and replay_requested items, oldest first
    print(item.id, item.status, item.record["step_id"], item.record["last_envelope"]["code"])
dlq.request_replay("3")             # any worker's runtime.recover(...) will run it
dlq.replay("4", {"payments.charge": charge})   # or run it now, with these tools
dlq.purge("5")                      # give up on it; it stays in the stream, list hides it
print(dlq.depth())                  # records that are neither replayed ok nor purged
```

**Ids.** A record's id is its sequence number in the stream, as a decimal
string (`"1"`, `"2"`, ...): the same ids the CLI (`agent-recovery dlq`) and the
Rust and Node APIs print.

**Item status.** Kept per record at `agent-recovery/dead-letter/item/<id>`
(absent = `open`), changed only by compare-and-set (read the version, write,
repeat on conflict), so two operators or workers never lose each other's
change. `agent-recovery/dead-letter/closed` counts the records replayed ok or
purged, and **depth** = records in the stream − that count.

**Replay.** The `n`-th replay of record `id` runs the record's `input` step as
a new run `<run_id>/replay/<n>`, whose idempotency key is
`replay_key(record["key"], n)` = `hex(sha256(canonical_json(["agent-recovery/replay",
key, n])))`: a fresh key (the tool does the action again, on purpose) that any
runtime derives alike. The loop derives it from the step input's `replay_of`
member; `replay_key` is here to print it before the run.

**Where the rules live.** The item status state machine, the replay entry and
its key, the replay step, record ids, the depth and its event, the
compare-and-set round cap and the errors' kinds and messages are the
component's (`agent:recovery/dead-letters@0.3.0`, called through the runtime's
loop); this module reads and writes the store and keeps the API.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from wasmtime.component import Record, Variant

# The dead-letter stream, the item status keys (`ITEM_PREFIX + id`) and the
# count of records replayed ok or purged (docs/runtime.md, "Store keys").
from ._keys import CLOSED_KEY, DEAD_LETTER_STREAM, ITEM_PREFIX
from .store import StoreError, Written

if TYPE_CHECKING:  # pragma: no cover
    from .runtime import Runtime

__all__ = [
    "CLOSED_KEY",
    "DEAD_LETTER_STREAM",
    "DeadLetter",
    "DeadLetterError",
    "DeadLetters",
    "ITEM_PREFIX",
    "ReplayReport",
    "STATUSES",
    "replay_key",
]

#: The recovery lease of a run (`LEASE_PREFIX + run_id`); a replay's run takes one too.
LEASE_PREFIX = "agent-recovery/recovering/"
#: An item's statuses.
STATUSES = ("open", "replay_requested", "replayed", "purged")

#: The kinds of `DeadLetterError`. New kinds may be added.
DEAD_LETTER_ERROR_KINDS = (
    "not_found",  # no record with this id in the stream
    "invalid_argument",  # a malformed id, status or option
    "conflict",  # the item's status does not allow it (purged, a replay already pending, ...)
    "invalid_record",  # the record cannot be replayed (a fan-out's record; no key, run id or step)
)

_PAGE = 256
_MAX_ID = 2**53 - 1
#: The component's error kinds as `DeadLetterError.kind`s.
_KINDS = {
    "invalid-argument": "invalid_argument",
    "not-found": "not_found",
    "closed": "conflict",
    "conflict": "conflict",
    "invalid-record": "invalid_record",
}


class DeadLetterError(Exception):
    """A dead-letter operation failed; `kind` is one of `DEAD_LETTER_ERROR_KINDS`,
    `message` names the item and ends with a hint."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self) -> str:
        return f"DeadLetterError({self.kind!r}, {self.message!r})"


@dataclass(frozen=True)
class DeadLetter:
    """One item of the queue: a record and its status."""

    #: The record's sequence number in the stream, as a decimal string.
    id: str
    #: `open`, `replay_requested`, `replayed` or `purged`.
    status: str
    #: The record (docs/durability.md §3: fields may be added, never removed).
    record: Any
    #: Each replay, oldest first: `{"n","key","run_id","requested_ms","outcome"?,"finished_ms"?}`.
    replays: List[Dict[str, Any]] = field(default_factory=list)
    #: When it was purged (Unix ms), else None.
    purged_ms: Optional[int] = None
    #: The record exactly as stored (JSON text).
    record_json: str = ""

    def to_dict(self) -> Dict[str, Any]:
        """`{"id","status","record","replays"}` (+ `purged_ms` once purged), the
        JSON form the CLI prints with `--json`."""
        out: Dict[str, Any] = {"id": self.id, "status": self.status, "record": self.record, "replays": self.replays}
        if self.purged_ms is not None:
            out["purged_ms"] = self.purged_ms
        return out


@dataclass(frozen=True)
class ReplayReport:
    """A replay requested or carried out."""

    #: The record replayed.
    id: str
    #: Which replay of it (1, 2, ...).
    n: int
    #: The replay's idempotency key, `replay_key(record key, n)`.
    key: str
    #: The replay's run id, `<run_id>/replay/<n>`.
    run_id: str
    #: How the replayed step ended (`ok`, `dead_lettered`, ...); None for a request not yet carried out.
    outcome: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        """`{"id","n","key","run_id","outcome"}`."""
        return {"id": self.id, "n": self.n, "key": self.key, "run_id": self.run_id, "outcome": self.outcome}


def replay_key(original_key: str, n: int) -> str:
    """The idempotency key of the `n`-th replay of a record whose key was
    `original_key`: `hex(sha256(canonical_json(["agent-recovery/replay", key, n])))`."""
    if not isinstance(original_key, str):
        raise DeadLetterError("invalid_argument", f"a replay key derives from a string key, got {original_key!r}")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _MAX_ID:
        raise DeadLetterError("invalid_argument", f"the replay number is an integer from 1, got {n!r}")
    text = json.dumps(["agent-recovery/replay", original_key, n], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _error(e: Any) -> DeadLetterError:
    """The component's `dead-letter-error` as a `DeadLetterError`."""
    return DeadLetterError(_KINDS.get(e.kind, "invalid_argument"), e.message)


class _Core:
    """The component's dead-letter rules (`dead-letters@0.3.0`) for one runtime."""

    def __init__(self, runtime: "Runtime") -> None:
        self._loop = runtime._looper

    def call(self, name: str, *args: Any) -> Any:
        """The function's value; an `err` raised as a `DeadLetterError`."""
        out = self._loop.dead_letters(name, *args)
        if isinstance(out, Variant):
            if out.tag == "err":
                raise _error(out.payload)
            return out.payload
        if isinstance(out, Record) and hasattr(out, "detail"):
            raise _error(out)
        return out

    def parse_id(self, id: Any) -> int:
        """A record id (a decimal string or an int) as its sequence number."""
        if isinstance(id, int) and not isinstance(id, bool):
            text = str(id)
        else:
            text = id if isinstance(id, str) else repr(id)
        seq: int = self.call("parse-id", text)
        return seq

    def not_found(self, id: str) -> DeadLetterError:
        """The error for an id the stream does not hold."""
        return _error(self._loop.dead_letters("not-found", id))

    def update(self, store: Any, key: str, change: Callable[[Optional[str]], Any], now_ms: int) -> None:
        """Compare-and-set loop: `change(current text or None)` returns the text
        to write, or None to write nothing (raising leaves the key as it was);
        at most the component's `cas-rounds` rounds."""
        for _ in range(self.call("cas-rounds")):
            current = store.get(key, now_ms)
            new = change(current.value if current is not None else None)
            if new is None:
                return
            version = current.version if current is not None else None
            if isinstance(store.compare_and_set(key, version, new, None, now_ms), Written):
                return
        raise StoreError("unavailable", self.call("cas-exhausted", key))

    def apply(self, action: str, seq: int, record: str, store: Any, now_ms: int) -> Tuple[bool, Optional[str]]:
        """`action` on item `seq`, written: (closes, the replay entry made or taken)."""
        out: Dict[str, Any] = {}

        def change(cur: Optional[str]) -> Optional[str]:
            c = self.call("apply", action, seq, record, cur, now_ms)
            out["closes"], out["entry"] = c.closes, c.entry
            item: Optional[str] = c.item
            return item

        self.update(store, ITEM_PREFIX + str(seq), change, now_ms)
        return bool(out.get("closes")), out.get("entry")

    def close_one(self, store: Any, now_ms: int) -> None:
        """`closed.count + 1`."""
        self.update(store, CLOSED_KEY, lambda cur: str(self.call("close-one", cur)), now_ms)

    def depth(self, store: Any, now_ms: int) -> int:
        got = store.get(CLOSED_KEY, now_ms)
        depth: int = self.call("depth", stream_count(store), got.value if got is not None else None)
        return depth

    def pending(self, value: Optional[str]) -> Optional[Dict[str, Any]]:
        """The pending replay entry of an item value, or None."""
        text = self.call("pending", value)
        return _loads(text) if text is not None else None


def _loads(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def stream_count(store: Any, stream: str = DEAD_LETTER_STREAM) -> int:
    """How many records `stream` holds (read a page at a time). Sequence
    numbers are increasing but need not start at 1 or be dense (the Redis
    store starts a stream at its clock), so the count is not the last number."""
    count, after = 0, 0
    while True:
        page = store.read(stream, after, 4096)
        if not page:
            return count
        count += len(page)
        after = page[-1][0]


def depth_event(
    runtime: "Runtime", seq: int, record: str, t_ms: int, threshold: Any = None
) -> Optional[str]:
    """The `dead_letter_depth` event text after record `seq` (its text) was
    appended, when a threshold is set (`threshold`: the append effect's, the
    loop's choice of the run configuration's and the policy document's; else
    the configuration's `dead_letter.depth_threshold`) and the depth crossed it
    with this append (the component's `depth-event`); else None."""
    if threshold is None:
        config = runtime._config_dict
        dl = config.get("dead_letter") if isinstance(config, dict) else None
        threshold = dl.get("depth_threshold") if isinstance(dl, dict) else None
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
        return None
    core = _Core(runtime)
    depth = core.depth(runtime._store, runtime._clock.now_ms())
    text: Optional[str] = core.call("depth-event", threshold, depth, t_ms, seq, record)
    return text


class DeadLetters:
    """The dead-letter API over a runtime's store and clock (`runtime.dead_letters`).

    Every method reads the time from the runtime's clock. `replay` and
    `replay_async` also need the runtime's loop and policy: they run the
    record's step as a new run of that runtime.
    """

    def __init__(self, runtime: "Runtime") -> None:
        self._rt = runtime
        self._core = _Core(runtime)

    @property
    def _store(self) -> Any:
        return self._rt.store

    def _now(self) -> int:
        return self._rt.clock.now_ms()

    def _items(self) -> Dict[int, Optional[str]]:
        now = self._now()
        out: Dict[int, Optional[str]] = {}
        for key in self._store.keys(ITEM_PREFIX, now):
            tail = key[len(ITEM_PREFIX):]
            if tail.isascii() and tail.isdigit():
                got = self._store.get(key, now)
                if got is not None:
                    out[int(tail)] = got.value
        return out

    def _item(self, seq: int, text: str, value: Optional[str]) -> DeadLetter:
        shown = json.loads(self._core.call("item", value))
        return DeadLetter(str(seq), shown["status"], _loads(text), shown["replays"], shown.get("purged_ms"), text)

    def list(
        self, status: Optional[str] = None, after: Any = None, limit: Optional[int] = None
    ) -> List[DeadLetter]:
        """Items in id order. `status`: only that status, or `"all"`; default:
        every item but the purged ones. `after`: ids greater than this one.
        `limit`: at most this many items (default: all)."""
        if status is not None and status != "all" and status not in STATUSES:
            raise DeadLetterError(
                "invalid_argument", f"status {status!r} is not one of {', '.join(STATUSES)} or all; see DeadLetters.list"
            )
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise DeadLetterError("invalid_argument", f"limit must be an integer >= 0, got {limit!r}")
        cursor = 0 if after is None or after in (0, "0") else self._core.parse_id(after)
        items = self._items()
        out: List[DeadLetter] = []
        while limit is None or len(out) < limit:
            page = self._store.read(DEAD_LETTER_STREAM, cursor, _PAGE)
            if not page:
                break
            for seq, text in page:
                cursor = seq
                item = self._item(seq, text, items.get(seq))
                keep = item.status != "purged" if status is None else status in ("all", item.status)
                if keep:
                    out.append(item)
                    if limit is not None and len(out) >= limit:
                        break
        return out

    def show(self, id: Any) -> DeadLetter:
        """One item; `DeadLetterError` `not_found` when the stream has no such record."""
        seq = self._core.parse_id(id)
        page = self._store.read(DEAD_LETTER_STREAM, seq - 1, 1)
        if not page or page[0][0] != seq:
            raise self._core.not_found(str(seq))
        got = self._store.get(ITEM_PREFIX + str(seq), self._now())
        return self._item(seq, page[0][1], got.value if got is not None else None)

    def depth(self) -> int:
        """Records in the stream − `closed.count`: neither replayed ok nor purged."""
        return self._core.depth(self._store, self._now())

    def purge(self, id: Any) -> DeadLetter:
        """Give up on an item: status `purged` (+ `purged_ms`), `closed.count + 1`.
        The record stays in the stream (streams are append-only); `list` hides it.
        Purging a purged item changes nothing; a `replayed` one becomes
        `purged` without counting it closed again (it was)."""
        item = self.show(id)
        now = self._now()
        closes, _ = self._core.apply("purge", int(item.id), item.record_json, self._store, now)
        if closes:
            self._core.close_one(self._store, now)
            self._rt._telemetry.dead_letter_depth(self.depth)
        return self.show(item.id)

    def request_replay(self, id: Any) -> ReplayReport:
        """Record a replay request (status `replay_requested`, a `replays` entry
        without `outcome`) for any worker's `runtime.recover(...)` to carry out.
        Returns the key and run id the replay will use; an item whose request is
        pending returns that request. `conflict` when the item is purged or
        replayed ok."""
        return self._pending(id)[1]

    def _pending(self, id: Any) -> Tuple[DeadLetter, ReplayReport]:
        """The item and its pending replay (requesting one when there is none):
        the component's `take`."""
        item = self.show(id)
        _, entry = self._core.apply("take", int(item.id), item.record_json, self._store, self._now())
        e = json.loads(entry or "{}")
        return item, ReplayReport(item.id, int(e["n"]), str(e["key"]), str(e["run_id"]))

    def replay(self, id: Any, operations: Dict[str, Any]) -> ReplayReport:
        """Run the replay now (blocking) with these operations (tool name ->
        `{"operation", "compensate"?, "checkpoint"?}` or a bare function); carries
        out a pending request, or requests one first. Returns `{id, n, key,
        run_id, outcome}`; the item becomes `replayed` when the step ended ok,
        else `open` again (the replay's own failure is a new record with
        `replay_of`). `outcome` is None when another worker holds the replay's
        lease (its `recover` is carrying it out)."""
        from .runtime import BLOCKING, _no_wait

        return _no_wait(self._replay(BLOCKING, id, operations))

    async def replay_async(self, id: Any, operations: Dict[str, Any]) -> ReplayReport:
        """`replay` for asyncio (operations may be async)."""
        from .runtime import ASYNCIO

        return await self._replay(ASYNCIO, id, operations)

    async def _replay(self, io: Any, id: Any, operations: Dict[str, Any]) -> ReplayReport:
        from .durable import Operations, run_replay

        ops = Operations.of(operations)
        item, pending = await io.store(self._store, self._pending, id)
        done = await run_replay(io, self._rt, item, pending, ops)
        return pending if done is None else ReplayReport(done.id, done.n, done.key, done.run_id, done.outcome)

    def pending_replays(self) -> List[Tuple[DeadLetter, ReplayReport]]:
        """Items whose status is `replay_requested`, with their pending replay
        (records a replay can run only)."""
        out = []
        for item in self.list(status="replay_requested"):
            entry = self._core.pending(self._store_value(item.id))
            if entry is None:
                continue
            try:
                self.replay_step(item, int(entry["n"]))
            except DeadLetterError:
                continue
            out.append((item, ReplayReport(item.id, int(entry["n"]), str(entry["key"]), str(entry["run_id"]))))
        return out

    def _store_value(self, id: str) -> Optional[str]:
        got = self._store.get(ITEM_PREFIX + id, self._now())
        return got.value if got is not None else None

    def still_pending(self, id: str, n: int) -> bool:
        """Replay `n` of item `id` is the pending one (another worker may have
        carried it out between our read and our lease)."""
        entry = self._core.pending(self._store_value(id))
        return entry is not None and entry.get("n") == n

    def replay_step(self, item: DeadLetter, n: int) -> Dict[str, Any]:
        """The step input of replay `n` of `item`: the component's `replay-step`."""
        spec: Dict[str, Any] = json.loads(self._core.call("replay-step", int(item.id), item.record_json, n))
        return spec

    def finish_replay(self, item_id: str, n: int, outcome: str, now_ms: int) -> bool:
        """Record how replay `n` of item `item_id` ended (the component's
        `finish`); True when that closed the item (`closed.count + 1`)."""
        closed: List[bool] = []

        def change(cur: Optional[str]) -> Optional[str]:
            c = self._core.call("finish", cur, n, outcome, now_ms)
            closed[:] = [bool(c.closes)]
            item: Optional[str] = c.item
            return item

        self._core.update(self._store, ITEM_PREFIX + item_id, change, now_ms)
        if closed and closed[0]:
            self._core.close_one(self._store, now_ms)
            return True
        return False
