// The Redis key layout of a store prefix (host/src/store/redis/README.md), the
// same text in Rust, Node and Python (tests/store/redis-layout.json pins it).
// Every entry and every stream has its own hash tag `{P:<tag>}`, <tag> the
// first 8 hex digits of the SHA-256 of its name, so a Redis Cluster spreads
// them over its slots and every script touches one slot; the store-wide keys
// (metadata, revision) share the tag `{P}`.

import { createHash } from 'node:crypto';

/** The schema version the scripts implement (`open.lua` checks `{P}:meta`). */
export const REDIS_SCHEMA = 2;

/** The first 8 hex digits of the SHA-256 of `name`'s UTF-8 bytes. */
export function redisTag(name) {
  return createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 8);
}

const globEscape = (s) => s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/** The keys of one store prefix: {meta, rev, entry(key), stream(name), entryPattern(start), keyOf(redisKey)}. */
export function redisLayout(prefix) {
  const head = `{${prefix}:`;
  return {
    meta: `{${prefix}}:meta`,
    rev: `{${prefix}}:rev`,
    entry: (key) => `${head}${redisTag(key)}}:e:${key}`,
    stream: (name) => `${head}${redisTag(name)}}:s:${name}`,
    entryPattern: (start) => `{${globEscape(prefix)}:????????}:e:${globEscape(start)}*`,
    keyOf(redisKey) {
      if (!redisKey.startsWith(head)) return null;
      const tag = redisKey.slice(head.length, head.length + 8);
      const rest = redisKey.slice(head.length + 8);
      return /^[0-9a-f]{8}$/.test(tag) && rest.startsWith('}:e:') ? rest.slice(4) : null;
    },
  };
}
