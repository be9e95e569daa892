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
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

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
_CAS_TRIES = 64
_MAX_ID = 2**53 - 1


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


def _id_of(id: Any) -> int:
    """A record id (decimal string or int) as its sequence number."""
    if isinstance(id, bool):
        seq = None
    elif isinstance(id, int):
        seq = id
    elif isinstance(id, str) and id.isascii() and id.isdigit() and len(id) <= 16 and not id.startswith("0"):
        seq = int(id)
    else:
        seq = None
    if seq is None or not 1 <= seq <= _MAX_ID:
        raise DeadLetterError(
            "invalid_argument",
            f"dead-letter id {id!r} is not a record id; ids are the decimal sequence numbers `list` prints (1, 2, ...)",
        )
    return seq


def _loads(text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _item_state(value: Any) -> Tuple[str, List[Dict[str, Any]], Optional[int]]:
    """(status, replays, purged_ms) of a stored item value (absent or unreadable: open)."""
    if not isinstance(value, dict):
        return "open", [], None
    status = value.get("status")
    replays = value.get("replays")
    purged = value.get("purged_ms")
    return (
        status if status in STATUSES else "open",
        [r for r in replays if isinstance(r, dict)] if isinstance(replays, list) else [],
        purged if isinstance(purged, int) and not isinstance(purged, bool) else None,
    )


#: Returned by an `update` change: write nothing.
KEEP = object()


def update(store: Any, key: str, change: Callable[[Any], Any], now_ms: int, ttl_ms: Optional[int] = None) -> Any:
    """Compare-and-set loop: `change(current parsed value or None)` returns the
    new value, or `KEEP` to write nothing (raising leaves the key as it was);
    retried on conflict. Returns the value written (or kept)."""
    for _ in range(_CAS_TRIES):
        current = store.get(key, now_ms)
        parsed = _loads(current.value) if current is not None else None
        new = change(parsed)
        if new is KEEP:
            return parsed
        version = current.version if current is not None else None
        if isinstance(store.compare_and_set(key, version, _dumps(new), ttl_ms, now_ms), Written):
            return new
    raise StoreError(
        "unavailable", f"could not update {key}: {_CAS_TRIES} compare-and-set conflicts in a row; retry"
    )


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


def closed_count(store: Any, now_ms: int) -> int:
    """`closed.count` (0 when absent)."""
    value = store.get(CLOSED_KEY, now_ms)
    parsed = _loads(value.value) if value is not None else None
    count = parsed.get("count") if isinstance(parsed, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0


def _bump_closed(store: Any, now_ms: int) -> None:
    def change(cur: Any) -> Any:
        count = cur.get("count") if isinstance(cur, dict) else None
        return {"count": (count if isinstance(count, int) and not isinstance(count, bool) else 0) + 1}

    update(store, CLOSED_KEY, change, now_ms)


def depth_event(
    store: Any, config: Any, seq: int, step: Any, t_ms: int, now_ms: int, threshold: Any = None
) -> Optional[str]:
    """The `dead_letter_depth` event text after record `seq` was appended, when
    a threshold is set (`threshold`: the append effect's, the loop's choice of
    the run configuration's and the policy document's; else the
    configuration's `dead_letter.depth_threshold`) and the depth crossed it
    with this append (`before < T <= after`); else None."""
    if threshold is None:
        dl = config.get("dead_letter") if isinstance(config, dict) else None
        threshold = dl.get("depth_threshold") if isinstance(dl, dict) else None
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        return None
    after = stream_count(store) - closed_count(store, now_ms)
    if not (after - 1 < threshold <= after):
        return None
    return (
        f'{{"t_ms":{t_ms},"event":"dead_letter_depth","step":{_dumps(step)},"target":null,'
        f'"depth":{after},"threshold":{threshold},"id":"{seq}"}}'
    )


class DeadLetters:
    """The dead-letter API over a runtime's store and clock (`runtime.dead_letters`).

    Every method reads the time from the runtime's clock. `replay` and
    `replay_async` also need the runtime's loop and policy: they run the
    record's step as a new run of that runtime.
    """

    def __init__(self, runtime: "Runtime") -> None:
        self._rt = runtime

    @property
    def _store(self) -> Any:
        return self._rt.store

    def _now(self) -> int:
        return self._rt.clock.now_ms()

    def _items(self) -> Dict[int, Any]:
        now = self._now()
        out: Dict[int, Any] = {}
        for key in self._store.keys(ITEM_PREFIX, now):
            tail = key[len(ITEM_PREFIX):]
            if tail.isascii() and tail.isdigit():
                got = self._store.get(key, now)
                if got is not None:
                    out[int(tail)] = _loads(got.value)
        return out

    def _item(self, seq: int, text: str, value: Any) -> DeadLetter:
        status, replays, purged = _item_state(value)
        return DeadLetter(str(seq), status, _loads(text), replays, purged, text)

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
        cursor = 0 if after is None or after in (0, "0") else _id_of(after)
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
        seq = _id_of(id)
        page = self._store.read(DEAD_LETTER_STREAM, seq - 1, 1)
        if not page or page[0][0] != seq:
            raise DeadLetterError(
                "not_found", f"no dead-letter record {seq} in this store; `list` shows the ids there are"
            )
        got = self._store.get(ITEM_PREFIX + str(seq), self._now())
        return self._item(seq, page[0][1], _loads(got.value) if got is not None else None)

    def depth(self) -> int:
        """Records in the stream − `closed.count`: neither replayed ok nor purged."""
        return max(0, stream_count(self._store) - closed_count(self._store, self._now()))

    def purge(self, id: Any) -> DeadLetter:
        """Give up on an item: status `purged` (+ `purged_ms`), `closed.count + 1`.
        The record stays in the stream (streams are append-only); `list` hides it.
        Purging a purged item changes nothing; a `replayed` one becomes
        `purged` without counting it closed again (it was)."""
        item = self.show(id)
        now = self._now()
        changed: List[bool] = []

        def change(cur: Any) -> Any:
            status, replays, purged = _item_state(cur)
            changed.clear()
            if status == "purged":
                return KEEP
            if status != "replayed":
                changed.append(True)
            value = dict(cur) if isinstance(cur, dict) else {}
            value.update({"status": "purged", "replays": replays, "purged_ms": now})
            return value

        update(self._store, ITEM_PREFIX + item.id, change, now)
        if changed:
            _bump_closed(self._store, now)
            self._rt._telemetry.dead_letter_depth(self.depth)
        return self.show(item.id)

    def request_replay(self, id: Any) -> ReplayReport:
        """Record a replay request (status `replay_requested`, a `replays` entry
        without `outcome`) for any worker's `runtime.recover(...)` to carry out.
        Returns the key and run id the replay will use; an item whose request is
        pending returns that request. `conflict` when the item is purged or
        replayed ok."""
        return self._pending(id)[1]

    def _request(self, item: DeadLetter, now: int) -> ReplayReport:
        record = item.record
        entry: Dict[str, Any] = {}
        # (a request is recorded under the item's CAS: two workers asking at once get one request)

        def change(cur: Any) -> Any:
            status, replays, _ = _item_state(cur)
            entry.clear()
            if status == "replay_requested" and replays and "outcome" not in replays[-1]:
                entry.update(replays[-1])  # a request is pending: that one
                return KEEP
            if status not in ("open", "replay_requested"):
                raise DeadLetterError("conflict", _not_open(item.id, status))
            n = len(replays) + 1
            entry.update(
                {"n": n, "key": replay_key(record["key"], n), "run_id": f"{record['run_id']}/replay/{n}",
                 "requested_ms": now}
            )
            value = dict(cur) if isinstance(cur, dict) else {}
            value.update({"status": "replay_requested", "replays": replays + [dict(entry)]})
            return value

        update(self._store, ITEM_PREFIX + item.id, change, now)
        return ReplayReport(item.id, int(entry["n"]), str(entry["key"]), str(entry["run_id"]))

    def _pending(self, id: Any) -> Tuple[DeadLetter, ReplayReport]:
        """The item and its pending replay (requesting one when there is none)."""
        item = self.show(id)
        _replayable(item)
        return item, self._request(item, self._now())

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
        """Items whose status is `replay_requested`, with their pending replay."""
        out = []
        for item in self.list(status="replay_requested"):
            if item.replays and "outcome" not in item.replays[-1] and _can_replay(item):
                last = item.replays[-1]
                out.append((item, ReplayReport(item.id, int(last["n"]), str(last["key"]), str(last["run_id"]))))
        return out


def finish_replay(store: Any, item_id: str, n: int, outcome: str, now_ms: int) -> bool:
    """Record how replay `n` of item `item_id` ended: the entry gets `outcome`
    and `finished_ms`; status `replayed` (and `closed.count + 1`) when `ok`, else `open`."""
    closed: List[bool] = []

    def change(cur: Any) -> Any:
        status, replays, _ = _item_state(cur)
        closed.clear()
        replays = [dict(r) for r in replays]
        for r in replays:
            if r.get("n") == n and "outcome" not in r:
                r["outcome"] = outcome
                r["finished_ms"] = now_ms
        value = dict(cur) if isinstance(cur, dict) else {}
        value["replays"] = replays
        if status not in ("purged", "replayed"):
            value["status"] = "replayed" if outcome == "ok" else "open"
            if outcome == "ok":
                closed.append(True)
        return value

    update(store, ITEM_PREFIX + item_id, change, now_ms)
    if closed:
        _bump_closed(store, now_ms)
    return bool(closed)


def _can_replay(item: DeadLetter) -> bool:
    """A record with its key, run id and step: the `input` (record format 1),
    or for an older record its `step_id` and `tool`."""
    r = item.record
    if not (isinstance(r, dict) and isinstance(r.get("key"), str) and isinstance(r.get("run_id"), str)):
        return False
    given = r.get("input")
    step: Dict[str, Any] = given if isinstance(given, dict) else r
    args = step.get("args")
    if step.get("tool") == "fanout" and isinstance(args, dict) and isinstance(args.get("branches"), list):
        return False  # a fan-out's record: its branches are not a step (each wrote its own record)
    return isinstance(r.get("input"), dict) or (isinstance(r.get("step_id"), str) and isinstance(r.get("tool"), str))


def _replayable(item: DeadLetter) -> None:
    if not _can_replay(item):
        raise DeadLetterError(
            "invalid_record",
            f"dead-letter {item.id} cannot be replayed: it is a fan-out's record (replay its branches' "
            "records) or has no key, run id or step; purge it",
        )


def _not_open(id: str, status: str) -> str:
    return f"dead-letter record {id} is {status}; only open records are replayed or purged"

