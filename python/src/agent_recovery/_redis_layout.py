"""The Redis key layout of a store prefix (host/src/store/redis/README.md),
the same text in Rust, Node and Python (tests/store/redis-layout.json pins it).

Every entry and every stream has its own hash tag `{P:<tag>}`, <tag> the first
8 hex digits of the SHA-256 of its name, so a Redis Cluster spreads them over
its slots and every script touches one slot; the store-wide keys (metadata,
revision) share the tag `{P}`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final, Optional

#: The schema version the scripts implement (`open.lua` checks `{P}:meta`).
REDIS_SCHEMA: Final = "2"

_GLOB: Final = re.compile(r"([*?\[\]\\])")
_TAG: Final = re.compile(r"^[0-9a-f]{8}$")


def redis_tag(name: str) -> str:
    """The first 8 hex digits of the SHA-256 of `name`'s UTF-8 bytes."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]


def _glob_escape(text: str) -> str:
    return _GLOB.sub(r"\\\1", text)


class RedisLayout:
    """The Redis keys of one store prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._head = "{" + prefix + ":"
        #: `{P}:meta`: the store's metadata hash.
        self.meta = "{" + prefix + "}:meta"
        #: `{P}:rev`: the store-wide revision counter.
        self.rev = "{" + prefix + "}:rev"

    def entry(self, key: str) -> str:
        """`{P:<tag>}:e:<key>`: one entry's hash."""
        return f"{self._head}{redis_tag(key)}}}:e:{key}"

    def stream(self, name: str) -> str:
        """`{P:<tag>}:s:<stream>`: one stream."""
        return f"{self._head}{redis_tag(name)}}}:s:{name}"

    def entry_pattern(self, start: str) -> str:
        """The `SCAN MATCH` pattern of every entry whose key starts with `start`."""
        return "{" + _glob_escape(self.prefix) + ":????????}:e:" + _glob_escape(start) + "*"

    def key_of(self, redis_key: str) -> Optional[str]:
        """The store key of an entry's Redis key (None when it is not one)."""
        if not redis_key.startswith(self._head):
            return None
        tag = redis_key[len(self._head) : len(self._head) + 8]
        rest = redis_key[len(self._head) + 8 :]
        if not _TAG.match(tag) or not rest.startswith("}:e:"):
            return None
        return rest[4:]
