"""The store on Redis, and the local spool that keeps a worker going when Redis is down.

```python
from agent_recovery.store import open_store

store = open_store("redis://127.0.0.1:6379/0")        # FallbackStore(RedisStore, spool)
store = open_store("redis://127.0.0.1:6379/0?fallback=none")  # a bare RedisStore
store = open_store("state.db")                        # SqliteStore, as before
```

`RedisStore` is the store interface of `store.py` on Redis 7, with the same
semantics (it passes tests/store/operations.json): every state change is one
of the Lua scripts of host/src/store/redis/ (copied into the package at build
time), run with `EVALSHA` (redis-py's `Script` helper falls back to `EVAL` on
`NOSCRIPT`). It needs the `redis` package: `pip install 'agent-recovery[redis]'`.

`FallbackStore(primary, local)` serves every call from the primary until one
fails with `unavailable`, then serves entries from the local `SqliteStore`
(fail-open), spools appends and journal / dead-letter writes to the local
stream `agent-recovery/spool`, probes the primary every `probe_ms` and, once
it answers, flushes the spool in order and serves from the primary again. See
docs/store.md, "The Redis backend" and "When Redis is down".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
import time
import weakref
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Dict, Final, List, Optional, Tuple
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from ._redis_layout import REDIS_SCHEMA, RedisLayout
from .store import (
    Cas,
    Conflict,
    SqliteStore,
    StoreError,
    Versioned,
    Written,
    _check_cas,
    _check_int,
    _check_json,
    _check_name,
    _invalid,
)

#: The options of a `redis://` URL's query string and their defaults.
URL_OPTIONS: Final = {
    "prefix": "ar",
    "timeout_ms": 1000,
    "connect_timeout_ms": 1000,
    "fallback": "local",
    "spool": None,
    "probe_ms": 1000,
    "grace_ms": 60000,
}
#: How many redirects (MOVED, ASK) and retries one cluster command may take.
CLUSTER_ATTEMPTS: Final = 12
#: How often `ServerClock` samples `TIME` (local monotonic ms).
CLOCK_SAMPLE_MS: Final = 10_000
#: The spool stream and the flush's entries in the local store.
SPOOL_STREAM: Final = "agent-recovery/spool"
SPOOL_LEASE: Final = "agent-recovery/spool/lease"
SPOOL_CURSOR: Final = "agent-recovery/spool/cursor"
#: The flush lease's time to live (ms), renewed at each batch: a process that
#: died while flushing holds the others back this long at most.
SPOOL_LEASE_TTL_MS: Final = 5_000
#: Spool records a flush applies between two renewals of its lease.
SPOOL_BATCH: Final = 256
#: Keys whose writes and deletes are copied to the local store while healthy
#: (so they are honoured while degraded) and spooled while degraded (so they
#: reach Redis again): idempotency entries, run journals, dead-letter items.
SPOOLED_PREFIXES: Final = ("agent-recovery/idem/", "agent-recovery/journal/", "agent-recovery/dead-letter/")
#: How many times a mirror write retries on a local conflict.
_MIRROR_RETRIES: Final = 4
_SCRIPTS: Final = ("get", "cas", "append", "purge", "open")
_PREFIX_RE: Final = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def script_text(name: str) -> str:
    """The text of Lua script `name` (`get`, `cas`, ...) as packaged."""
    return (resources.files("agent_recovery") / "_redis" / f"{name}.lua").read_text(encoding="utf-8")


# ---------------------------------------------------------------- the URL


class RedisUrl:
    """A parsed `redis://[user:pass@]host[:port][/db][?opts]`, or
    `redis+cluster://[user:pass@]host:port[,host:port..][?opts]` for a Redis
    Cluster (the seed nodes; any reachable one gives the others). See `URL_OPTIONS`."""

    def __init__(self, url: str) -> None:
        if not isinstance(url, str):
            raise _invalid(f"the store URL is a {type(url).__name__}, not a str; pass e.g. redis://127.0.0.1:6379/0")
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "redis+cluster"):
            raise _invalid(
                f"{url!r} is not a redis://, rediss:// or redis+cluster:// URL; pass e.g. redis://127.0.0.1:6379/0"
            )
        self.scheme = parts.scheme
        self.cluster = parts.scheme == "redis+cluster"
        userinfo, _, hosts = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        self.username = unquote(user) if user else None
        self.password = unquote(password) if ":" in userinfo else None
        #: The (host, port) of each node named: one server, or a cluster's seeds.
        self.nodes: List[Tuple[str, int]] = []
        if self.cluster:
            for seed in hosts.split(","):
                host, _, port_text = seed.rpartition(":")
                host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
                if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
                    raise _invalid(
                        f"the cluster URL names {seed!r}, not a host:port seed node; pass e.g. redis+cluster://10.0.0.1:7000,10.0.0.2:7000"
                    )
                self.nodes.append((host, int(port_text)))
            if parts.path.strip("/"):
                raise _invalid("a cluster URL has no database (a cluster has only db 0); remove the /<db> part")
            self.host, self.port = self.nodes[0]
            self.db = 0
        else:
            try:
                port = parts.port
            except ValueError:
                port = -1
            hostname = parts.hostname
            if not hostname or port == -1:
                raise _invalid(f"the store URL has no host or a bad port; pass e.g. {parts.scheme}://127.0.0.1:6379/0")
            path = parts.path.strip("/")
            if path and not path.isdigit():
                raise _invalid(f"the database {path!r} of the store URL is not a number; pass e.g. /0")
            self.host = hostname
            self.port = port or 6379
            self.db = int(path or 0)
            self.nodes = [(self.host, self.port)]
        opts: Dict[str, Any] = dict(URL_OPTIONS)
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name not in URL_OPTIONS:
                raise _invalid(
                    f"unknown option {name!r} in the store URL; the options are {', '.join(URL_OPTIONS)}"
                )
            if name.endswith("_ms"):
                if not value.isdigit() or not 1 <= int(value) <= 86_400_000:
                    raise _invalid(f"option {name}={value!r} of the store URL is not a whole number of ms from 1 to 86400000; pass e.g. {name}={URL_OPTIONS[name]}")
                opts[name] = int(value)
            elif name == "fallback" and value not in ("local", "none"):
                raise _invalid(f"option fallback={value!r} of the store URL is not local or none; pass one of them")
            elif name == "prefix" and not _PREFIX_RE.match(value):
                raise _invalid(f"option prefix={value!r} of the store URL is not 1 to 64 of A-Z a-z 0-9 _ . : -; pass e.g. prefix=ar")
            elif name == "spool" and not value:
                raise _invalid("option spool= of the store URL is empty; pass a file path")
            else:
                opts[name] = value
        self.options = opts
        # Without the password (messages, events, the spool's name).
        user = f"{quote(self.username, safe='')}@" if self.username else ""
        query = f"?{parts.query}" if parts.query else ""
        if self.cluster:
            seeds = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.nodes)
            self.display = f"{self.scheme}://{user}{seeds}{query}"
        else:
            netloc_host = f"[{self.host}]" if ":" in self.host else self.host
            self.display = f"{self.scheme}://{user}{netloc_host}:{self.port}/{self.db}{query}"

    @property
    def hash_tag(self) -> str:
        """The hash tag of the store-wide keys: `{<prefix>}`."""
        return "{" + str(self.options["prefix"]) + "}"

    def identity(self) -> str:
        """The store this URL names, the same text in Rust, Node and Python
        (docs/store.md, "URL"): `<scheme>://<host>:<port>/<db>?prefix=<prefix>`,
        the host lowercased (an IPv6 address in brackets); no credentials, no
        other option. Workers of any language on one machine that name one
        store get one default spool file. A cluster's identity is
        `redis+cluster://<host>:<port>,..?prefix=<prefix>`, the seed nodes
        lowercased and sorted."""
        if self.cluster:
            seeds = sorted(f"[{h.lower()}]:{p}" if ":" in h else f"{h.lower()}:{p}" for h, p in self.nodes)
            return f"redis+cluster://{','.join(seeds)}?prefix={self.options['prefix']}"
        host = self.host.lower()
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}/{self.db}?prefix={self.options['prefix']}"

    def spool_path(self) -> Path:
        """`spool=` or `$XDG_STATE_HOME/agent-recovery/spool-<h>.sqlite` (else ~/.local/state/...)."""
        if self.options["spool"]:
            return Path(str(self.options["spool"]))
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        digest = hashlib.sha256(self.identity().encode("utf-8")).hexdigest()[:16]
        return Path(base) / "agent-recovery" / f"spool-{digest}.sqlite"


# ---------------------------------------------------------------- RedisStore


def _import_redis() -> Any:
    try:
        import redis
    except ImportError:
        raise StoreError(
            "io",
            "the Redis store needs the redis package, which is not installed; "
            "pip install 'agent-recovery[redis]'",
        ) from None
    return redis


class RedisStore:
    """The store interface on Redis 7 (see the module docs).

    `RedisStore(url)` takes a `redis://` URL (`rediss://` for TLS) with the
    options `prefix` (default `ar`: keys are `{ar}:...`), `timeout_ms`
    (1000: every command's response timeout), `connect_timeout_ms` (1000) and
    `grace_ms` (60000: how long after its logical expiry Redis deletes an
    entry by itself); `fallback`, `spool` and `probe_ms` are `open_store`'s.
    With `connect=True` (default) it checks the store's metadata now
    (`open.lua`), else at the first call. Errors: `unavailable` (refused,
    timed out, connection lost, `LOADING`, `BUSY`, `OOM`), `io` (`NOAUTH`,
    `WRONGPASS`, `NOPERM`, no `redis` package), `corrupt` (`WRONGTYPE`, a
    reply of an unexpected shape), `incompatible` (another application's
    keys or a newer schema). A call never waits longer than `timeout_ms`,
    plus `connect_timeout_ms` when it must reconnect; the next call after a
    lost connection reconnects. Thread-safe (redis-py's connection pool).
    """

    def __init__(self, url: str, *, connect: bool = True) -> None:
        self._url = RedisUrl(url)
        _import_redis()
        u = self._url
        self._tag = u.hash_tag
        self._layout = RedisLayout(str(u.options["prefix"]))
        self._grace = str(int(u.options["grace_ms"]))
        self._opened = False
        self._open_lock = threading.Lock()
        self._client_lock = threading.Lock()
        self._client: Any = None
        self._scripts: Dict[str, Any] = {}
        self._clock: Optional["ServerClock"] = None
        if connect:
            self._ensure_open()

    @property
    def _redis(self) -> Any:
        """The client: `redis.Redis`, or `redis.cluster.RedisCluster` (built at
        its first use: it reads the cluster's slots from a seed node)."""
        if self._client is not None:
            return self._client
        from redis import exceptions as rx

        with self._client_lock:
            if self._client is None:
                try:
                    client = self._make_client()
                except (rx.RedisError, rx.RedisClusterException, OSError) as e:
                    raise self._error("connecting", e) from None
                self._scripts = {name: client.register_script(script_text(name)) for name in _SCRIPTS}
                self._client = client
        return self._client

    def _make_client(self) -> Any:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        u = self._url
        kwargs: Dict[str, Any] = {
            "username": u.username,
            "password": u.password,
            "socket_timeout": int(u.options["timeout_ms"]) / 1000,
            "socket_connect_timeout": int(u.options["connect_timeout_ms"]) / 1000,
            # One try per call: the bound on a call's time is ours to keep.
            "retry": Retry(NoBackoff(), 0),
        }
        if u.cluster:
            from redis.cluster import ClusterNode, RedisCluster

            # RedisCluster follows MOVED and ASK (redis-py's cluster.py, up to
            # its request TTL of 16 redirects) and retries TRYAGAIN.
            return RedisCluster(
                startup_nodes=[ClusterNode(h, p) for h, p in u.nodes],  # type: ignore[no-untyped-call]
                require_full_coverage=False,
                **kwargs,
            )
        kwargs.update(host=u.host, port=u.port, db=u.db, health_check_interval=0)
        if u.scheme == "rediss":
            kwargs["ssl"] = True
        return redis.Redis(**kwargs)

    @property
    def url(self) -> str:
        """The URL without its password."""
        return self._url.display

    @property
    def options(self) -> Dict[str, Any]:
        """The URL's options with their defaults filled in."""
        return dict(self._url.options)

    def close(self) -> None:
        """Close the connections (the data stays in Redis)."""
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> "RedisStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- errors

    def _error(self, what: str, e: BaseException) -> StoreError:
        from redis import exceptions as rx

        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        upper = text.upper()
        where = f"redis store {self._url.display}: {what} failed ({text})"
        if isinstance(e, (rx.AuthenticationError, rx.AuthenticationWrongNumberOfArgsError)) or any(
            code in upper for code in ("NOAUTH", "WRONGPASS", "NOPERM")
        ):
            return StoreError("io", f"{where}; check the user name and password in the store URL and the user's ACL")
        if isinstance(e, rx.ClusterCrossSlotError) or upper.startswith("CROSSSLOT"):
            return StoreError(
                "corrupt",
                f"{where}; every key of one call shares a hash tag: check that nothing rewrites the store's keys",
            )
        if isinstance(
            e,
            (
                rx.ConnectionError,
                rx.TimeoutError,
                OSError,
                # A cluster that cannot be reached, is down, or is moving slots.
                rx.RedisClusterException,
                rx.ClusterError,
                rx.ClusterDownError,
                rx.SlotNotCoveredError,
                rx.MovedError,
                rx.AskError,
                rx.TryAgainError,
                rx.MasterDownError,
            ),
        ) or any(
            upper.startswith(code) or f" {code} " in f" {upper} "
            for code in ("LOADING", "BUSY", "OOM", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK")
        ):
            return StoreError(
                "unavailable",
                f"{where}; check that Redis runs at {self._url.host}:{self._url.port} and answers within timeout_ms",
            )
        if "WRONGTYPE" in upper:
            return StoreError("corrupt", f"{where}; another program wrote keys under {self._tag}: give the store another prefix")
        return StoreError("io", f"{where}; check the Redis server's log")

    def _corrupt(self, what: str, reply: Any) -> StoreError:
        return StoreError(
            "corrupt",
            f"redis store {self._url.display}: {what} got an unexpected reply {reply!r:.200}; "
            f"another program wrote keys under {self._tag}: give the store another prefix",
        )

    def _run(self, what: str, name: str, keys: List[str], *args: Any) -> Any:
        self._ensure_open()
        return self._raw(what, name, keys, *args)

    def _raw(self, what: str, name: str, keys: List[str], *args: Any) -> Any:
        from redis import exceptions as rx

        client = self._redis
        try:
            return self._scripts[name](keys=keys, args=list(args), client=client)
        except (rx.RedisError, rx.RedisClusterException, OSError) as e:
            raise self._error(what, e) from None

    def _command(self, what: str, fn: Callable[[Any], Any]) -> Any:
        from redis import exceptions as rx

        self._ensure_open()
        try:
            return fn(self._redis)
        except (rx.RedisError, rx.RedisClusterException, OSError) as e:
            raise self._error(what, e) from None

    def _scan(self, what: str, pattern: str) -> List[str]:
        """Every key matching `pattern` (SCAN, on every primary of a cluster)."""
        if self._url.cluster:
            from redis.cluster import RedisCluster

            found = self._command(
                what, lambda c: list(c.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES))
            )
        else:
            found = self._command(what, lambda c: list(c.scan_iter(match=pattern, count=1000)))
        try:
            return sorted({_text(k) for k in found})
        except (UnicodeDecodeError, TypeError):
            raise self._corrupt(what, found) from None

    def _ensure_open(self) -> None:
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            reply = self._raw("opening the store", "open", [self._layout.meta], REDIS_SCHEMA)
            if not isinstance(reply, list) or len(reply) != 3:
                raise self._corrupt("opening the store", reply)
            status, app, schema = reply[0], _text(reply[1]), _text(reply[2])
            if status != 1:
                raise StoreError(
                    "incompatible",
                    f"redis store {self._url.display}: the keys under {self._tag} belong to app {app!r} "
                    f"with schema {schema!r}, not agent-recovery schema {REDIS_SCHEMA}; give the store another "
                    "prefix, or drain a store of another schema with the agent-recovery version that wrote it",
                )
            self._opened = True

    # -- the clock

    def server_clock(self) -> "ServerClock":
        """The server's clock (`TIME`), shared by every caller of this store."""
        with self._open_lock:
            if self._clock is None:
                self._clock = ServerClock(self)
            return self._clock

    def time_ms(self) -> int:
        """The server's `TIME`, in Unix ms (raises `StoreError` as the operations do)."""
        from redis import exceptions as rx

        try:
            reply = self._redis.time()
            if isinstance(reply, dict):  # a cluster may answer per node
                reply = next(iter(reply.values()))
            sec, usec = reply
        except (rx.RedisError, rx.RedisClusterException, OSError) as e:
            raise self._error("reading TIME", e) from None
        except (TypeError, ValueError):
            raise self._corrupt("reading TIME", None) from None
        return int(sec) * 1000 + int(usec) // 1000

    def ping(self) -> None:
        """`PING` (then the metadata check once): the probe of `FallbackStore`."""
        from redis import exceptions as rx

        try:
            self._redis.ping()
        except (rx.RedisError, rx.RedisClusterException, OSError) as e:
            raise self._error("PING", e) from None
        self._ensure_open()

    # -- operations

    def get(self, key: str, now_ms: int) -> Optional[Versioned]:
        _check_name("key", key)
        _check_int("now_ms", now_ms)
        reply = self._run(f"reading {key!r}", "get", [self._layout.entry(key)], str(now_ms))
        if reply == []:
            return None
        if not isinstance(reply, list) or len(reply) != 2 or not isinstance(reply[1], int):
            raise self._corrupt(f"reading {key!r}", reply)
        return Versioned(self._value(key, reply[0]), reply[1])

    def _value(self, key: str, raw: Any) -> str:
        try:
            return _text(raw)
        except (UnicodeDecodeError, TypeError):
            raise self._corrupt(f"reading {key!r}", raw) from None

    def compare_and_set(
        self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int
    ) -> Cas:
        _check_cas(key, expected, value, ttl_ms, now_ms)
        what = f"compare-and-set of {key!r}"
        entry = self._layout.entry(key)
        args = ("" if expected is None else str(expected), value, "" if ttl_ms is None else str(ttl_ms), str(now_ms), self._grace)
        if not self._url.cluster:
            reply = self._run(what, "cas", [entry, self._layout.rev], *args, "")
        else:
            # The entry's slot checks, the revision's slot issues the version,
            # the entry's slot checks again and writes (cas.lua).
            reply = self._run(what, "cas", [entry], *args, "?")
            if reply == [2]:
                n = self._command(what, lambda c: c.incr(self._layout.rev))
                reply = self._run(what, "cas", [entry], *args, str(n))
        if isinstance(reply, list) and reply and reply[0] == 1 and len(reply) == 2 and isinstance(reply[1], int):
            return Written(reply[1])
        if isinstance(reply, list) and reply == [0]:
            return Conflict(None)
        if isinstance(reply, list) and len(reply) == 3 and reply[0] == 0 and isinstance(reply[2], int):
            return Conflict(Versioned(self._value(key, reply[1]), reply[2]))
        raise self._corrupt(what, reply)

    def append(self, stream: str, record: str, now_ms: int) -> int:
        _check_name("stream", stream)
        _check_int("now_ms", now_ms)
        _check_json("record", stream, record)
        reply = self._run(f"appending to {stream!r}", "append", [self._layout.stream(stream)], record, str(now_ms))
        if not isinstance(reply, int) or reply < 1:
            raise self._corrupt(f"appending to {stream!r}", reply)
        return reply

    def read(self, stream: str, after: int, limit: int) -> List[Tuple[int, str]]:
        from redis import exceptions as rx

        _check_name("stream", stream)
        _check_int("after", after)
        _check_int("limit", limit)
        if limit == 0:
            return []
        self._ensure_open()
        what = f"reading stream {stream!r}"
        try:
            rows = self._redis.xrange(self._layout.stream(stream), f"({after}-0", "+", count=limit)
        except (rx.RedisError, rx.RedisClusterException, OSError) as e:
            raise self._error(what, e) from None
        out: List[Tuple[int, str]] = []
        try:
            for rid, fields in rows:
                seq = int(_text(rid).split("-", 1)[0])
                out.append((seq, _text(fields[b"r"])))
        except (KeyError, ValueError, TypeError, UnicodeDecodeError):
            raise self._corrupt(what, rows) from None
        return out

    def delete(self, key: str) -> bool:
        _check_name("key", key)
        entry = self._layout.entry(key)
        reply = self._command(f"deleting {key!r}", lambda c: c.delete(entry))
        if reply not in (0, 1):
            raise self._corrupt(f"deleting {key!r}", reply)
        return bool(reply)

    def keys(self, prefix: str, now_ms: int) -> List[str]:
        _check_name("prefix", prefix, empty_ok=True)
        _check_int("now_ms", now_ms)
        # A sweep: SCAN for the entries under `prefix`, then each one's liveness.
        out = []
        for redis_key in self._scan("listing keys", self._layout.entry_pattern(prefix)):
            key = self._layout.key_of(redis_key)
            if key is not None and key.startswith(prefix) and self.get(key, now_ms) is not None:
                out.append(key)
        return sorted(out, key=lambda k: k.encode("utf-8"))

    def purge_expired(self, now_ms: int) -> int:
        """Remove every entry expired at `now_ms`; returns how many were removed."""
        _check_int("now_ms", now_ms)
        # A sweep: SCAN for every entry, purge.lua on each (removes it when expired).
        removed = 0
        for redis_key in self._scan("purging expired entries", self._layout.entry_pattern("")):
            if self._layout.key_of(redis_key) is None:
                continue
            reply = self._run("purging expired entries", "purge", [redis_key], str(now_ms))
            if not isinstance(reply, int):
                raise self._corrupt("purging expired entries", reply)
            removed += reply
        return removed


def _text(raw: Any) -> str:
    if isinstance(raw, bytes):
        return raw.decode("utf-8")
    if isinstance(raw, str):
        return raw
    raise TypeError(f"{type(raw).__name__} is not text")


# ---------------------------------------------------------------- the server's clock


def _runtime_clock() -> Any:
    from .runtime import Clock

    return Clock


class ServerClock(_runtime_clock()):  # type: ignore[misc]
    """The Redis server's clock, as a runtime `Clock`.

    Samples `TIME` at the first `now_ms()` and every 10 s after (local
    monotonic time): offset = server time - the local time at the middle of
    the round trip; `now_ms()` = local monotonic-derived ms + offset, never
    going backwards within the process. When Redis does not answer, the last
    offset (0 at first) is kept, and it tries again 10 s later. Workers on
    one Redis then agree on the time within half a round trip, whatever
    their own clocks say. `sleep_ms` sleeps for real.

    Only the first sample of a blocking caller runs in its `now_ms()`; every
    re-sample (and the first one on a thread running an asyncio loop) runs
    in a background thread, and `now_ms()` answers at once with the offset
    it has; the new offset applies when the sample is back. A caller never
    waits for Redis to answer `TIME` after the first read.
    """

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._wall0 = time.time_ns() // 1_000_000
        self._mono0 = time.monotonic_ns()
        self._offset = 0
        self._sampled_at: Optional[int] = None
        self._sampling = False
        self._last = 0

    def _local_ms(self, mono_ns: int) -> int:
        return self._wall0 + (mono_ns - self._mono0) // 1_000_000

    @property
    def offset_ms(self) -> int:
        """The last measured offset (server - local), ms."""
        return self._offset

    def now_ms(self) -> int:
        """The server's time now, Unix ms."""
        mono = time.monotonic_ns()
        with self._lock:
            first = self._sampled_at is None
            due = not self._sampling and (
                self._sampled_at is None or (mono - self._sampled_at) // 1_000_000 >= CLOCK_SAMPLE_MS
            )
            if due:
                self._sampled_at = mono
                self._sampling = not first or _on_event_loop()
            background = due and self._sampling
        if background:
            try:
                threading.Thread(target=self._sample, name="agent-recovery-clock", daemon=True).start()
            except RuntimeError:  # no thread now: tried again after the period
                with self._lock:
                    self._sampling = False
        elif due:
            self._sample()
            mono = time.monotonic_ns()
        with self._lock:
            now = max(self._last, self._local_ms(mono) + self._offset)
            self._last = now
            return now

    def _sample(self) -> None:
        """One `TIME` round trip; sets the offset when Redis answered."""
        t0 = time.monotonic_ns()
        try:
            server = self._store.time_ms()
        except StoreError:
            server = None
        t1 = time.monotonic_ns()
        with self._lock:
            if server is not None:
                self._offset = server - self._local_ms((t0 + t1) // 2)
            self._sampling = False

    def sleep_ms(self, ms: int) -> None:
        """`time.sleep(ms / 1000)`."""
        time.sleep(ms / 1000)


#: The name of the thread a `FallbackStore` flushes in for the async paths.
_FLUSH_THREAD = "agent-recovery-flush"


def _on_event_loop() -> bool:
    """True on a thread that runs an asyncio event loop now."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


# ---------------------------------------------------------------- FallbackStore


class FallbackStore:
    """A primary store (Redis) with a local `SqliteStore` for when it is down.

    Healthy, every call goes to `primary`. A call failing with `unavailable`
    makes it degraded (event `store_degraded`): that call and the next ones
    are served by `local` (entries: fail-open local state, shared by this
    machine's processes through the file). Writes and deletes of keys under
    `SPOOLED_PREFIXES` (idempotency entries, journals, dead-letter items)
    the primary took are copied to `local` too, so they are honoured while
    degraded; while degraded, they and appends are recorded, in order, in the
    local stream `agent-recovery/spool`. `append` then returns the local
    sequence number. While degraded, a call whose `now_ms` (else the last one
    seen) is at least `probe_ms` after the last probe starts a background
    thread and is served locally at once: the thread probes the primary (its
    `ping()`, else `get("agent-recovery/ping")`) and, when it answers,
    flushes the spool to it in order under a local lease (at least once: a
    crash mid-flush may append one record twice, never loses one; a spooled
    create-only write never replaces an entry the primary has, any other
    write does), then the store is healthy again (event `store_restored` with
    `flushed` and `degraded_ms`). A spool left by an earlier process is
    flushed the same way, calls served locally until it is. Other errors pass
    through.

    `on_event` is called with each event's JSON text; `subscribe(fn)` adds
    more listeners (a Runtime built on this store forwards them). `store` is
    the name events carry (the URL without its password).
    """

    def __init__(
        self,
        primary: Any,
        local: Any,
        *,
        probe_ms: int = 1000,
        on_event: Optional[Callable[[str], Any]] = None,
        store: Optional[str] = None,
    ) -> None:
        _check_int("probe_ms", probe_ms)
        if on_event is not None and not callable(on_event):
            raise _invalid("on_event must be callable (it gets each event's JSON text); pass a function")
        self._primary = primary
        self._local = local
        self._probe_ms = probe_ms
        self._name = store if store is not None else str(getattr(primary, "url", type(primary).__name__))
        self._listeners: List[Callable[[str], Any]] = [on_event] if on_event is not None else []
        self._lock = threading.RLock()
        self._degraded_at: Optional[int] = None
        self._last_probe = 0
        self._last_now = 0
        self._startup_done = False
        #: The last spool record this store wrote.
        self._spool_end = 0
        #: The background thread is probing or flushing.
        self._reconnecting = False
        #: Degraded only because an earlier process left a spool.
        self._startup_spool = False
        #: How many probes of the primary were started.
        self._probes = 0

    @property
    def primary(self) -> Any:
        """The primary store."""
        return self._primary

    @property
    def local(self) -> Any:
        """The local store (the spool file)."""
        return self._local

    @property
    def degraded(self) -> bool:
        """True while calls are served locally."""
        return self._degraded_at is not None

    @property
    def reconnecting(self) -> bool:
        """True while the background thread probes the primary or flushes
        the spool (calls meanwhile are served locally, without waiting)."""
        return self._reconnecting

    @property
    def probes(self) -> int:
        """How many probes of the primary this store has started (each one a
        background thread that tries the primary and, when it answers,
        flushes the spool). While degraded there is at most one per
        `probe_ms` of the `now_ms` passed in, whatever the number of calls."""
        return self._probes

    def subscribe(self, listener: Callable[[str], Any]) -> None:
        """Call `listener` with the JSON text of every later event too."""
        with self._lock:
            self._listeners.append(listener)

    def server_clock(self) -> Any:
        """The primary's server clock (`RedisStore.server_clock`)."""
        return self._primary.server_clock()

    def close(self) -> None:
        """Close both stores."""
        for s in (self._primary, self._local):
            close = getattr(s, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> "FallbackStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- events

    def _emit(self, event: Dict[str, Any]) -> None:
        text = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
        for listener in list(self._listeners):
            try:
                listener(text)
            except Exception:  # a listener's bug never breaks a store call
                pass

    # -- the switch

    def _degrade(self, t: int, e: StoreError) -> None:
        with self._lock:
            if self._degraded_at is not None:
                return
            self._degraded_at = t
            self._last_probe = t
        self._emit({"event": "store_degraded", "store": self._name, "at_ms": t, "kind": e.kind, "message": e.message})

    def _probe(self) -> None:
        ping = getattr(self._primary, "ping", None)
        if callable(ping):
            ping()
        else:
            self._primary.get("agent-recovery/ping", self._last_now)

    def _restore(self, t: int, *, due: bool = False, pending: bool = False) -> None:
        """Start the background probe and flush when one is due (or `due`);
        the call goes on locally at once, never waiting for them. `pending`:
        also when this store is not degraded (the machine's spool is)."""
        with self._lock:
            if (self._degraded_at is None and not pending) or self._reconnecting:
                return
            if not due and t < self._last_probe + self._probe_ms:
                return
            self._last_probe = t
            self._reconnecting = True
            since = self._degraded_at if self._degraded_at is not None else t
            # Degraded: up to what was spooled when the flush began, so calls
            # served locally meanwhile (other threads) cannot keep it going
            # forever. Not degraded (the machine's spool is): to its end.
            until = self._spool_end if self._degraded_at is not None else None
        try:
            # Not a daemon: a process that exits waits for a flush in progress
            # (bounded by Redis's timeouts and the spool's size) rather than
            # leave it half done.
            threading.Thread(
                target=self._reconnect_quietly, args=(t, since, until), name=_FLUSH_THREAD, daemon=False
            ).start()
            with self._lock:
                self._probes += 1
        except RuntimeError:  # no thread now: the next due call tries again
            with self._lock:
                self._reconnecting = False

    def _reconnect_quietly(self, t: int, since: int, until: Optional[int]) -> None:
        try:
            self._reconnect(t, since, until)
        except StoreError:
            pass  # retried at the next probe
        finally:
            with self._lock:
                self._reconnecting = False

    def _reconnect(self, t: int, since: int, until: Optional[int]) -> None:
        try:
            self._probe()
            # Up to what this machine's processes had spooled when the flush began.
            flushed = self._flush(t, None if until is None else max(until, self._spool_last(t)))
        except StoreError as e:
            with self._lock:
                startup, self._startup_spool = self._startup_spool, False
            if startup:  # an earlier process's spool, not flushed: degraded like any other
                self._emit({"event": "store_degraded", "store": self._name, "at_ms": t, "kind": e.kind, "message": e.message})
            if e.kind == "unavailable":
                return
            raise
        if flushed is None:
            # Another process is flushing: serve Redis again once it has
            # flushed this process's records (so every process of the machine
            # stops adding to the spool soon); until then stay degraded.
            if self._startup_spool or self._cursor(t)[0] < (until or 0):
                return
            flushed = 0
        with self._lock:
            if self._degraded_at is None:
                return
            self._degraded_at = None
            startup, self._startup_spool = self._startup_spool, False
        self._emit(
            {
                "event": "store_restored",
                "store": self._name,
                "at_ms": t,
                # A spool left by an earlier process: this one was never degraded.
                "degraded_ms": 0 if startup else max(0, t - since),
                "flushed": flushed,
            }
        )
        # Drain what the machine's processes spooled meanwhile, to the end
        # (they serve Redis again as the cursor passes their last record; what
        # is left waits for the next flush if Redis went away again).
        try:
            self._flush(t)
        except StoreError as e:
            if e.kind != "unavailable":
                raise

    def _pending(self) -> bool:
        cursor = self._cursor(self._last_now)[0]
        return bool(self._local.read(SPOOL_STREAM, cursor, 1))

    def _pending_quietly(self) -> bool:
        """`_pending`, False when the spool file cannot be read now (it does
        not hold a call to the primary back)."""
        try:
            return self._pending()
        except StoreError:
            return False

    def _spool_last(self, t: int) -> int:
        """The last record's sequence number in the spool (reads only)."""
        last = self._cursor(t)[0]
        while True:
            batch = self._local.read(SPOOL_STREAM, last, 1024)
            if not batch:
                return last
            last = batch[-1][0]

    def _cursor(self, t: int) -> Tuple[int, Optional[int]]:
        got = self._local.get(SPOOL_CURSOR, t)
        if got is None:
            return 0, None
        try:
            seq = json.loads(got.value)["seq"]
        except (ValueError, KeyError, TypeError):
            seq = 0
        return (seq if isinstance(seq, int) and seq >= 0 else 0), got.version

    def _flush(self, t: int, until: Optional[int] = None) -> Optional[int]:
        """Apply the spool after the cursor to the primary (up to record
        `until` when given, else to its end); how many records, or None when
        another process holds the flush lease."""
        lease = json.dumps({"pid": os.getpid()}, separators=(",", ":"))
        took = self._local.compare_and_set(SPOOL_LEASE, None, lease, SPOOL_LEASE_TTL_MS, t)
        if isinstance(took, Conflict):
            return None
        held = took.version
        flushed = 0
        try:
            seq, version = self._cursor(t)
            while True:
                batch = self._local.read(SPOOL_STREAM, seq, SPOOL_BATCH)
                if not batch or (until is not None and seq >= until):
                    return flushed
                # Renew the lease (from the latest time a call passed in).
                at = max(t, self._last_now)
                renewed = self._local.compare_and_set(SPOOL_LEASE, held, lease, SPOOL_LEASE_TTL_MS, at)
                if isinstance(renewed, Conflict) and renewed.current is None:  # expired, nobody took it
                    renewed = self._local.compare_and_set(SPOOL_LEASE, None, lease, SPOOL_LEASE_TTL_MS, at)
                if isinstance(renewed, Conflict):
                    raise StoreError("unavailable", "the spool lease expired under this flush (another process took it); will probe again")
                held = renewed.version
                # A batch's entry writes first, the last one per key (a run's
                # journal writes and delete are one delete, an idempotency
                # claim and its completion one write); then its appends in
                # order, the cursor after each (at least once: a crash
                # repeats at most the append it was applying).
                keyed: Dict[str, Dict[str, Any]] = {}
                appends: List[Tuple[int, Dict[str, Any]]] = []
                for n, text in batch:
                    rec = _spool_op(text)
                    if rec is None:
                        continue
                    flushed += 1
                    if rec["op"] == "append":
                        appends.append((n, rec))
                        continue
                    if keyed.pop(rec["key"], None) is not None and rec.get("claim") is True:
                        rec = {**rec, "claim": False}  # after an earlier op on the key here: a write
                    keyed[rec["key"]] = rec
                for rec in keyed.values():
                    self._apply_rec(rec)
                for n, rec in appends + [(batch[-1][0], None)]:
                    if rec is not None:
                        self._apply_rec(rec)
                    if n == seq:
                        continue
                    seq = n
                    cas = self._local.compare_and_set(SPOOL_CURSOR, version, json.dumps({"seq": seq}), None, t)
                    if not isinstance(cas, Written):
                        raise StoreError("unavailable", "the spool cursor moved under this flush (another process flushed); will probe again")
                    version = cas.version
        finally:
            live = self._local.get(SPOOL_LEASE, max(t, self._last_now))
            if live is not None and live.version == held:
                self._local.delete(SPOOL_LEASE)

    def _apply_rec(self, rec: Dict[str, Any]) -> None:
        """Apply one spool op; a record the primary refuses as an invalid
        argument is skipped: the flush goes on rather than stall."""
        try:
            self._apply(rec)
        except StoreError as e:
            if e.kind != "invalid_argument":
                raise

    def _apply(self, rec: Dict[str, Any]) -> None:
        op = rec.get("op")
        if op == "append":
            self._primary.append(rec["stream"], rec["record"], rec["now_ms"])
        elif op == "delete":
            self._primary.delete(rec["key"])
        elif op == "set":
            # A claim (a create-only write) never replaces an entry the
            # primary has: the earlier claim or the completed entry there
            # wins. Any other write replaces it (last writer wins).
            key, now, claim = rec["key"], rec.get("now_ms", 0), rec.get("claim") is True
            expected: Optional[int] = None  # create first: one round trip when absent
            for _ in range(1000):
                cas = self._primary.compare_and_set(key, expected, rec["value"], rec.get("ttl_ms"), now)
                if isinstance(cas, Written) or claim:
                    return
                expected = cas.current.version if cas.current is not None else None
            raise StoreError("unavailable", f"flushing {key!r}: 1000 conflicts in a row; the flush resumes at the next probe")

    def _spool(self, record: Dict[str, Any], t: int) -> None:
        seq = self._local.append(SPOOL_STREAM, json.dumps(record, separators=(",", ":"), ensure_ascii=False), t)
        with self._lock:
            self._spool_end = max(self._spool_end, seq)

    # -- the calls

    def _call(
        self,
        now: Optional[int],
        on_primary: Callable[[], Any],
        on_local: Callable[[], Any],
        mirror: Optional[Callable[[Any], None]] = None,
        key: Optional[str] = None,
    ) -> Any:
        with self._lock:
            if now is not None and now > self._last_now:
                self._last_now = now
            t = now if now is not None else self._last_now
        if not self._startup_done:
            self._startup(t)
        if self._degraded_at is not None:
            self._restore(t)
        elif key is not None and key.startswith(SPOOLED_PREFIXES) and self._pending_quietly():
            # The machine's rule: while the spool file has records not yet in
            # the primary, every process sharing it serves mirrored keys from
            # it (docs/store.md, "One place for mirrored keys").
            self._restore(t, pending=True)
            return on_local()
        if self._degraded_at is None:
            try:
                out = on_primary()
            except StoreError as e:
                if e.kind != "unavailable":
                    raise
                self._degrade(t, e)
            else:
                if mirror is not None:
                    mirror(out)
                return out
        return on_local()

    def _startup(self, t: int) -> None:
        """A spool an earlier process left: served locally (where those
        entries are) until the background thread has flushed it."""
        with self._lock:
            if self._startup_done:
                return
            self._startup_done = True
        if not self._pending():
            return
        with self._lock:
            if self._degraded_at is None:
                self._degraded_at = t
                self._startup_spool = True
        self._restore(t, due=True)

    def _mirror_set(self, key: str, value: str, ttl_ms: Optional[int], now_ms: int) -> None:
        """Copy a write the primary took to the local store, so it is
        honoured while degraded; best effort (the primary answered)."""
        try:
            for _ in range(_MIRROR_RETRIES):
                cur = self._local.get(key, now_ms)
                cas = self._local.compare_and_set(key, cur.version if cur else None, value, ttl_ms, now_ms)
                if isinstance(cas, Written):
                    return
        except StoreError:
            pass

    def _mirror_delete(self, key: str) -> None:
        try:
            self._local.delete(key)
        except StoreError:
            pass

    def get(self, key: str, now_ms: int) -> Optional[Versioned]:
        _check_name("key", key)
        _check_int("now_ms", now_ms)
        return self._call(  # type: ignore[no-any-return]
            now_ms, lambda: self._primary.get(key, now_ms), lambda: self._local.get(key, now_ms), key=key
        )

    def compare_and_set(
        self, key: str, expected: Optional[int], value: str, ttl_ms: Optional[int], now_ms: int
    ) -> Cas:
        _check_cas(key, expected, value, ttl_ms, now_ms)

        def local() -> Cas:
            cas = self._local.compare_and_set(key, expected, value, ttl_ms, now_ms)
            if isinstance(cas, Written) and key.startswith(SPOOLED_PREFIXES):
                rec = {"op": "set", "key": key, "value": value, "ttl_ms": ttl_ms, "now_ms": now_ms, "claim": expected is None}
                self._spool(rec, now_ms)
            return cas  # type: ignore[no-any-return]

        def mirror(cas: Cas) -> None:
            if isinstance(cas, Written) and key.startswith(SPOOLED_PREFIXES):
                self._mirror_set(key, value, ttl_ms, now_ms)

        return self._call(  # type: ignore[no-any-return]
            now_ms, lambda: self._primary.compare_and_set(key, expected, value, ttl_ms, now_ms), local, mirror, key
        )

    def append(self, stream: str, record: str, now_ms: int) -> int:
        _check_name("stream", stream)
        _check_int("now_ms", now_ms)
        _check_json("record", stream, record)

        def local() -> int:
            # Spooled first: a crash between the two loses nothing.
            self._spool({"op": "append", "stream": stream, "record": record, "now_ms": now_ms}, now_ms)
            return self._local.append(stream, record, now_ms)  # type: ignore[no-any-return]

        return self._call(now_ms, lambda: self._primary.append(stream, record, now_ms), local)  # type: ignore[no-any-return]

    def read(self, stream: str, after: int, limit: int) -> List[Tuple[int, str]]:
        _check_name("stream", stream)
        _check_int("after", after)
        _check_int("limit", limit)
        return self._call(  # type: ignore[no-any-return]
            None, lambda: self._primary.read(stream, after, limit), lambda: self._local.read(stream, after, limit)
        )

    def delete(self, key: str) -> bool:
        _check_name("key", key)

        def local() -> bool:
            if key.startswith(SPOOLED_PREFIXES):
                self._spool({"op": "delete", "key": key}, self._last_now)
            return self._local.delete(key)  # type: ignore[no-any-return]

        def mirror(_: bool) -> None:
            if key.startswith(SPOOLED_PREFIXES):
                self._mirror_delete(key)

        return self._call(None, lambda: self._primary.delete(key), local, mirror, key)  # type: ignore[no-any-return]

    def keys(self, prefix: str, now_ms: int) -> List[str]:
        _check_name("prefix", prefix, empty_ok=True)
        _check_int("now_ms", now_ms)
        return self._call(  # type: ignore[no-any-return]
            now_ms, lambda: self._primary.keys(prefix, now_ms), lambda: self._local.keys(prefix, now_ms)
        )

    def purge_expired(self, now_ms: int) -> int:
        """The primary's (or, degraded, the local store's) `purge_expired`."""
        _check_int("now_ms", now_ms)
        return self._call(  # type: ignore[no-any-return]
            now_ms, lambda: self._primary.purge_expired(now_ms), lambda: self._local.purge_expired(now_ms)
        )


def _spool_op(text: str) -> Optional[Dict[str, Any]]:
    """A spool record's op, or None when it is not one (another program
    wrote it): the flush skips it rather than stall."""
    try:
        rec = json.loads(text)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("now_ms", 0), int):
        return None
    op = rec.get("op")
    if op == "append" and isinstance(rec.get("stream"), str) and isinstance(rec.get("record"), str):
        return rec
    if op == "delete" and isinstance(rec.get("key"), str):
        return rec
    if op == "set" and isinstance(rec.get("key"), str) and isinstance(rec.get("value"), str):
        return rec
    return None


# ---------------------------------------------------------------- open_store


def open_redis(url: str, on_event: Optional[Callable[[str], Any]] = None) -> Any:
    """`open_store` for a `redis://` URL (see `store.open_store`)."""
    parsed = RedisUrl(url)
    if parsed.options["fallback"] == "none":
        return RedisStore(url)
    spool = parsed.spool_path()
    try:
        spool.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError("io", f"cannot create the spool directory {spool.parent} ({e}); pass spool=<path> in the store URL") from None
    # synchronous=NORMAL (WAL): a spooled write survives a killed process
    # without an fsync per call; a power cut may lose the last ones
    # (docs/store.md, "When Redis is down").
    return FallbackStore(
        RedisStore(url, connect=False),
        SqliteStore(spool, synchronous="normal"),
        probe_ms=int(parsed.options["probe_ms"]),
        on_event=on_event,
        store=parsed.display,
    )


def _weak_listener(target: Any, method: str) -> Callable[[str], None]:
    """A listener that calls `target.<method>(text)` while `target` lives."""
    ref = weakref.ref(target)

    def listener(text: str) -> None:
        obj = ref()
        if obj is not None:
            getattr(obj, method)(text)

    return listener


__all__ = [
    "FallbackStore",
    "RedisStore",
    "RedisUrl",
    "ServerClock",
    "URL_OPTIONS",
    "open_redis",
    "script_text",
]
