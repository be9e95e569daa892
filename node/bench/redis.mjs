#!/usr/bin/env node
// Latency of the Redis store (mean of 1000 calls each, one process, one key):
// get / compareAndSet / append through RedisStore (the synchronous bridge:
// synckit + a worker thread running @redis/client), and the same scripts
// called directly with the async client (EVALSHA, awaited one by one) in this
// thread: the difference is the bridge's cost. Starts its own redis-server.
//
//   node bench/redis.mjs [rounds=1000]

import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { RedisStore } from '../src/store-redis.js';
import { startRedis } from '../test/redis_server.mjs';

const rounds = Number(process.argv[2] ?? 1000);
const T = 1_700_000_000_000;
const server = await startRedis();
const us = (t0, n) => ((performance.now() - t0) * 1000) / n;
try {
  const store = new RedisStore(server.url('prefix=bench'));
  store.compareAndSet('k', null, '{"n":0}', null, T);
  for (let i = 0; i < 200; i++) store.get('k', T); // warm up
  let t0 = performance.now();
  for (let i = 0; i < rounds; i++) store.get('k', T);
  const get = us(t0, rounds);
  t0 = performance.now();
  for (let i = 0; i < rounds; i++) {
    const cur = store.get('c', T);
    store.compareAndSet('c', cur ? cur.version : null, `{"n":${i}}`, null, T);
  }
  const getCas = us(t0, rounds);
  t0 = performance.now();
  let v = store.get('k', T).version;
  for (let i = 0; i < rounds; i++) v = store.compareAndSet('k', v, `{"n":${i}}`, null, T).version;
  const cas = us(t0, rounds);
  t0 = performance.now();
  for (let i = 0; i < rounds; i++) store.append('s', '{"r":1}', T);
  const append = us(t0, rounds);
  store.close();

  const { createClient } = createRequire(import.meta.url)('@redis/client');
  const client = createClient({ url: server.url() });
  client.on('error', () => {});
  await client.connect();
  const sha = await client.sendCommand(['SCRIPT', 'LOAD', readFileSync(new URL('../src/redis/get.lua', import.meta.url), 'utf8')]);
  for (let i = 0; i < 200; i++) await client.sendCommand(['EVALSHA', sha, '0', '{bench}', 'k', String(T)]);
  t0 = performance.now();
  for (let i = 0; i < rounds; i++) await client.sendCommand(['EVALSHA', sha, '0', '{bench}', 'k', String(T)]);
  const directGet = us(t0, rounds);
  await client.close();

  const f = (x) => x.toFixed(0);
  console.log(
    `redis ${rounds} calls, mean µs: get ${f(get)}, compareAndSet ${f(cas)}, get+compareAndSet ${f(getCas)}, append ${f(append)}; ` +
      `direct async get (same script, no bridge) ${f(directGet)}: the sync bridge adds ${f(get - directGet)} µs a call`,
  );
} finally {
  await server.stop();
}
