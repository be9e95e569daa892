#!/usr/bin/env node
// Latency of the Redis store, one process, one key: mean µs of `rounds` calls of
// get / compareAndSet / append through RedisStore (the synchronous bridge:
// synckit + a worker thread running @redis/client), and of the same scripts
// called directly with the async client (EVALSHA, awaited one by one) in this
// thread: the difference is the bridge's cost. Five passes; each figure is the
// median of the five means (the machine is shared: single passes vary a lot).
// Starts its own redis-server (on PATH).
//
//   node bench/redis.mjs [rounds=1000]

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { RedisStore } from '../src/store-redis.js';
import { startRedis } from '../test/redis_server.mjs';

const rounds = Number(process.argv[2] ?? 1000);
const PASSES = 5;
const T = 1_700_000_000_000;
const server = await startRedis();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function mean(fn) {
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) await fn(i);
  return ((performance.now() - t0) * 1000) / rounds;
}

try {
  const store = new RedisStore(server.url('prefix=bench'));
  const { createClient } = createRequire(import.meta.url)('@redis/client');
  const client = createClient({ url: server.url() });
  client.on('error', () => {});
  await client.connect();
  const sha = {};
  for (const s of ['get', 'cas', 'append']) {
    sha[s] = await client.sendCommand(['SCRIPT', 'LOAD', readFileSync(new URL(`../src/redis/${s}.lua`, import.meta.url), 'utf8')]);
  }
  const ev = (s, ...args) => client.sendCommand(['EVALSHA', sha[s], '0', '{bench}', ...args]);
  let version = store.compareAndSet('k', null, '{"n":0}', null, T).version;
  let dversion = store.compareAndSet('d', null, '{"n":0}', null, T).version;
  const cases = {
    get: () => store.get('k', T),
    compareAndSet: (i) => {
      version = store.compareAndSet('k', version, `{"n":${i}}`, null, T).version;
    },
    append: () => store.append('s', '{"r":1}', T),
    'direct get': () => ev('get', 'k', String(T)),
    'direct compareAndSet': async (i) => {
      [, dversion] = await ev('cas', 'd', String(dversion), `{"n":${i}}`, '', String(T), '60000', '64');
    },
    'direct append': () => ev('append', 't', '{"r":1}', String(T)),
  };
  const results = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  for (let pass = 0; pass <= PASSES; pass++) {
    for (const [name, fn] of Object.entries(cases)) {
      const m = await mean(fn);
      if (pass > 0) results[name].push(m); // pass 0 warms up
    }
  }
  store.close();
  await client.close();
  const f = (name) => median(results[name]).toFixed(0);
  console.log(
    `redis, mean µs of ${rounds} calls (median of ${PASSES} passes): RedisStore get ${f('get')}, compareAndSet ${f('compareAndSet')}, append ${f('append')}; ` +
      `direct async client get ${f('direct get')}, compareAndSet ${f('direct compareAndSet')}, append ${f('direct append')}`,
  );
} finally {
  await server.stop();
}
