// What FallbackStore(RedisStore, SqliteStore) honours while degraded, against a real
// redis-server the test starts, pauses (SIGSTOP), resumes and kills (docs/store.md, "When
// Redis is down"): idempotency entries written while healthy are seen while degraded; the
// flush's conflict rule (a spooled claim never replaces an entry Redis has, a spooled write
// does); on the asynchronous face the probe and the flush run in the background, never in
// the call that started them.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { FallbackStore, RedisStore, Runtime, SqliteStore, VirtualClock } from '../src/index.js';
import { startRedis } from './redis_server.mjs';

const T = 1_700_000_000_000;
const KEY = 'agent-recovery/idem/run-1/charge/abc';
const IN_FLIGHT = '{"status":"in_flight","since_ms":1}';
const DONE = '{"status":"done","result":{"ok":true},"target":"t","at_ms":2}';
const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-degraded-'));
let redis;
let n = 0;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  redis.signal('SIGCONT');
  await redis.stop();
});

function fallback(timeoutMs = 300) {
  const name = `d${process.pid}x${n++}`;
  const url = redis.url(`prefix=${name}&timeout_ms=${timeoutMs}&connect_timeout_ms=${timeoutMs}`);
  const events = [];
  const store = new FallbackStore(new RedisStore(url), new SqliteStore(join(dir, `${name}.sqlite`)), {
    probeMs: 100,
    name,
    onEvent: (t) => events.push(JSON.parse(t)),
  });
  return { store, events, direct: () => new RedisStore(redis.url(`prefix=${name}&fallback=none`)) };
}

async function put(s, key, value, now) {
  const cur = await s.get(key, now);
  assert.equal((await s.compareAndSet(key, cur ? cur.version : null, value, 600_000, now)).written, true);
}

/** Call at later virtual times until the store serves Redis again (polling a condition, not timing). */
async function untilRestored(store, now) {
  for (let i = 0; i < 6000; i++) {
    await store.async.get('agent-recovery/ping', now);
    if (store.healthy && !store.reconnecting) return now;
    if (!store.reconnecting) now += 100; // virtual time stands still while a flush runs
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the store never left degraded mode');
}

test('a key completed while healthy is honoured while Redis is paused and while it is dead', async () => {
  const { store } = fallback();
  const a = store.async;
  assert.equal((await a.compareAndSet(KEY, null, IN_FLIGHT, 600_000, T)).written, true);
  await put(a, KEY, DONE, T + 1);
  assert.equal(store.healthy, true);
  redis.signal('SIGSTOP');
  let seen;
  try {
    seen = await a.get(KEY, T + 2);
    assert.equal(store.healthy, false, 'a paused Redis degrades the store');
    // A second claim of the key loses, as it would on Redis.
    const cas = await a.compareAndSet(KEY, null, IN_FLIGHT, 600_000, T + 3);
    assert.equal(cas.written, false);
    assert.equal(cas.current.value, DONE);
  } finally {
    redis.signal('SIGCONT');
  }
  assert.equal(seen.value, DONE);
  await untilRestored(store, T + 200);
  await redis.kill();
  try {
    const dead = await a.get(KEY, T + 10_000);
    assert.equal(store.healthy, false, 'a dead Redis degrades the store');
    assert.equal(dead.value, DONE);
  } finally {
    await redis.restart();
  }
  store.close();
});

test('a completed entry wins over an in-flight claim when the spool is flushed', async () => {
  const { store, direct } = fallback();
  const a = store.async;
  const redisDirect = direct();
  const other = 'agent-recovery/idem/run-2/charge/def';
  assert.equal((await a.compareAndSet(KEY, null, IN_FLIGHT, 600_000, T)).written, true); // in the spool file too
  await put(redisDirect.async, other, DONE, T); // by a worker of another machine: not in the spool file
  redis.signal('SIGSTOP');
  try {
    await put(a, KEY, DONE, T + 1); // completed here while degraded: a write over the claim
    assert.equal(store.healthy, false);
    // Claimed here while degraded: this machine cannot see the other's entry.
    assert.equal((await a.compareAndSet(other, null, IN_FLIGHT, 600_000, T + 2)).written, true);
  } finally {
    redis.signal('SIGCONT');
  }
  await untilRestored(store, T + 200);
  assert.equal((await redisDirect.async.get(KEY, T + 300)).value, DONE, 'the completed entry replaced the claim');
  assert.equal((await redisDirect.async.get(other, T + 300)).value, DONE, 'the spooled claim did not replace the completed entry');
  redisDirect.close();
  store.close();
});

test('on the asynchronous face the probe and the flush run in the background, not in the call', async () => {
  // A long timeout: the probe of the paused server stays in progress after the call returned.
  const { store, events, direct } = fallback(2_000);
  const a = store.async;
  await a.get('x', T);
  redis.signal('SIGSTOP');
  try {
    await a.get('x', T + 1); // a read degrades it (a timed-out write may still land on resume)
    assert.equal(store.healthy, false);
    await a.append('agent-recovery/dead-letter', '{"n":1}', T + 2);
    // Due to probe: the call starts it and is served locally at once, while the probe
    // still waits for the paused server.
    assert.equal(await a.get(KEY, T + 500), null);
    assert.equal(store.reconnecting, true, 'the call returned only after the probe ended: it ran in the call');
    await a.append('agent-recovery/dead-letter', '{"n":2}', T + 600);
    assert.equal(store.reconnecting && !store.healthy, true);
  } finally {
    redis.signal('SIGCONT');
  }
  await untilRestored(store, T + 700);
  const restored = events.filter((e) => e.event === 'store_restored');
  assert.equal(restored.length, 1, JSON.stringify(events));
  assert.equal(restored[0].flushed, 2);
  const d = direct();
  assert.deepEqual((await d.async.read('agent-recovery/dead-letter', 0, 10)).map(([, r]) => JSON.parse(r)), [{ n: 1 }, { n: 2 }]);
  d.close();
  store.close();
});

test('a key a degraded process completed in the spool is honoured by one serving Redis', async () => {
  // Two processes of one machine on one spool file: `a` (degraded, its next probe an hour
  // away) completes a key in the spool only; `b`, serving Redis, must see it and lose its
  // claim, and flushes it to Redis.
  const name = `d${process.pid}x${n++}`;
  const url = redis.url(`prefix=${name}&timeout_ms=300&connect_timeout_ms=300`);
  const spool = join(dir, `${name}.sqlite`);
  const a = new FallbackStore(new RedisStore(url), new SqliteStore(spool), { probeMs: 3_600_000, name });
  const b = new FallbackStore(new RedisStore(url), new SqliteStore(spool), { probeMs: 100, name });
  await b.async.get('agent-recovery/ping', T);
  redis.signal('SIGSTOP');
  await a.async.get('agent-recovery/ping', T);
  assert.equal(a.healthy, false);
  redis.signal('SIGCONT');

  assert.equal((await a.async.compareAndSet(KEY, null, IN_FLIGHT, 600_000, T + 1)).written, true);
  await put(a.async, KEY, DONE, T + 2);
  assert.equal(a.healthy, false);
  assert.equal(b.healthy, true);
  const direct = new RedisStore(redis.url(`prefix=${name}&fallback=none`));
  assert.equal(await direct.async.get(KEY, T + 3), null);

  assert.equal((await b.async.get(KEY, T + 3))?.value, DONE);
  const cas = await b.async.compareAndSet(KEY, null, IN_FLIGHT, 600_000, T + 4);
  assert.equal(cas.written, false);
  assert.equal(cas.current?.value, DONE);

  let now = T + 200;
  for (let i = 0; (await direct.async.get(KEY, now)) === null || b.reconnecting; i++) {
    assert.ok(i < 6000, 'never flushed');
    await b.async.get(KEY, now);
    now += 200;
    await new Promise((r) => setTimeout(r, 10)); // polling for a condition, not timing
  }
  assert.equal((await direct.async.get(KEY, now))?.value, DONE);
  assert.equal((await b.async.get(KEY, now))?.value, DONE);
  for (const s of [a, b, direct]) s.close();
});

test('while Redis is dead, probes are bounded by probeMs on a virtual clock; after a restart the spool reaches Redis', async () => {
  const probeMs = 1000;
  const name = `probes${process.pid}`;
  const url = redis.url(`prefix=${name}&timeout_ms=300&connect_timeout_ms=300`);
  const store = new FallbackStore(new RedisStore(url), new SqliteStore(join(dir, `${name}.sqlite`)), { probeMs, name });
  // A virtual clock: the runtime passes its time to every store call, so the probe interval
  // is counted in virtual milliseconds, nothing sleeps.
  const clock = new VirtualClock(T);
  const rt = await Runtime.create({ store, clock, seed: 7 });
  const step = async (runId) => (await rt.run(runId).step({ id: 'charge', tool: 'payments.charge', call: 'tool', operation: async () => ({ ok: true }) })).outcome;
  assert.equal(await step('healthy'), 'ok');
  assert.equal(store.healthy, true);
  assert.equal(store.probes, 0);

  await redis.kill();
  const start = clock.nowMs();
  for (let i = 0; i < 40; i++) {
    clock.advance(100);
    assert.equal(await step(`down-${i}`), 'ok');
  }
  assert.equal(store.healthy, false, 'a dead Redis degrades the store');
  const span = clock.nowMs() - start;
  // Every store call of the 40 steps was due to probe if nothing bounded it; at most one
  // probe starts per probeMs of the calls' nowMs.
  const probes = store.probes;
  assert.ok(probes >= 1 && probes <= Math.floor(span / probeMs) + 1, `${probes} probes in ${span} virtual ms with probeMs ${probeMs}`);

  // Restarted empty (no persistence): what reaches Redis is what the spool held, the
  // idempotency entries of the 40 steps run while it was dead.
  await redis.restart();
  const now = await untilRestored(store, clock.nowMs() + probeMs);
  const direct = new RedisStore(redis.url(`prefix=${name}&fallback=none`));
  const keys = await direct.async.keys('agent-recovery/idem/', now);
  assert.equal(keys.length, 40, JSON.stringify(keys));
  for (const key of keys) assert.equal(JSON.parse((await direct.async.get(key, now)).value).status, 'done', key);
  assert.ok(store.probes > probes, 'the restart was found by a probe');
  direct.close();
  store.close();
});
