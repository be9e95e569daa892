// A store worker for the cross-process tests (python/tests/test_store_processes.py),
// same protocol as the Rust `store_worker` example and python/tests/store_worker.py:
// opens SqliteStore at argv[2] (or openStore(argv[2]) for a redis:// URL), prints {"ready":true}, then answers each JSON op read
// from stdin (the op format of tests/store/operations.json, plus `increment`) with
// one JSON line.

import { createInterface } from 'node:readline';
import { SqliteStore, StoreError } from '../src/store.js';
import { openStore } from '../src/store-redis.js';
import { apply } from './store_ops.mjs';

const kindOf = (e) => e.kind.replaceAll('_', '-');

/** `rounds` times: read `key`, write it + 1 naming the version read. */
function increment(store, op) {
  const key = op.key ?? 'counter';
  const now = op.now_ms ?? 0;
  const wins = [];
  try {
    for (let i = 0; i < (op.rounds ?? 0); i++) {
      const current = store.get(key, now);
      const n = current ? Number(current.value) : 0;
      const cas = store.compareAndSet(key, current ? current.version : null, String(n + 1), null, now);
      if (cas.written) wins.push([n, cas.version]);
    }
  } catch (e) {
    if (!(e instanceof StoreError)) throw e;
    return { error: kindOf(e), message: e.message };
  }
  return { wins };
}

/** Mean microseconds of `rounds` increments and of `rounds` gets of one key. */
function bench(store, op) {
  const rounds = Math.max(1, op.rounds ?? 1);
  let start = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) {
    const answer = increment(store, { key: 'bench', rounds: 1 });
    if (answer.error) return answer;
  }
  const casUs = Number(process.hrtime.bigint() - start) / 1e3 / rounds;
  start = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) store.get('bench', 0);
  const getUs = Number(process.hrtime.bigint() - start) / 1e3 / rounds;
  return { cas_us: casUs, get_us: getUs };
}

const handlers = { increment, bench };
let store;
try {
  // A redis:// URL goes through openStore (the Redis tests); a path keeps the synchronous option.
  store = /^rediss?:/.test(process.argv[2])
    ? openStore(process.argv[2])
    : new SqliteStore(process.argv[2], { synchronous: process.argv[3] ?? 'full' });
} catch (e) {
  if (!(e instanceof StoreError)) throw e;
  console.log(JSON.stringify({ error: kindOf(e), message: e.message }));
  process.exit(1);
}
console.log(JSON.stringify({ ready: true }));
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  const op = JSON.parse(line);
  const handler = handlers[op.op];
  console.log(JSON.stringify(handler ? handler(store, op) : apply(store, op)));
}
