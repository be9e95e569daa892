// The event loop keeps running while Redis does not answer (docs/store.md, "Redis
// and the event loop"). A real redis-server on 127.0.0.1 is paused with SIGSTOP for
// 6 s while steps run through the runtime; a 1 ms setInterval ticker in this process
// measures how late it fires. The runtime awaits the store's asynchronous face
// (`store.async`: node-redis on this thread, no Atomics.wait), so no store call
// holds the loop: the ticker is never late by half a store timeout, where one
// blocking call would hold it for the whole timeout. (The lag itself, tens of ms
// on an idle machine, is printed; a figure, not an assertion: docs/benchmarks.md.) Each store call settles within the documented bound (timeout_ms, plus
// connect_timeout_ms when it must reconnect); then the default store serves the
// steps from its local spool (store_degraded), a bare Redis store fails them with
// `unavailable`, and after SIGCONT both serve Redis again.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FallbackStore, RedisStore, Runtime, StoreError, openStore } from '../src/index.js';
import { startRedis } from './redis_server.mjs';

const PAUSE_MS = 6000;
// The URL's documented defaults, written out: a call's bound is their sum.
const TIMEOUT_MS = 1000;
// A store call made on the loop would hold it for at least TIMEOUT_MS.
const MAX_LAG_MS = TIMEOUT_MS / 2;
const CONNECT_TIMEOUT_MS = 1000;
// Scheduling slack on top of the documented bound (2 shared cores).
const SLACK_MS = 500;

/** The lateness of a 1 ms setInterval: start() it, stop() returns every lag (ms). */
function ticker() {
  const lags = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    lags.push(now - last - 1);
    last = now;
  }, 1);
  return () => {
    clearInterval(timer);
    return lags;
  };
}

/** The real store, with each asynchronous call's duration written down (the runtime awaits `async`). */
function timed(store) {
  const took = [];
  const face = store.async;
  const methods = ['get', 'compareAndSet', 'append', 'read', 'delete', 'keys', 'purgeExpired'];
  const wrapper = { serverClock: () => store.serverClock(), subscribe: (fn) => store.subscribe?.(fn), took };
  const async = {};
  for (const m of methods) {
    async[m] = async (...args) => {
      const t0 = performance.now();
      try {
        return await face[m](...args);
      } finally {
        took.push(performance.now() - t0);
      }
    };
    wrapper[m] = (...args) => store[m](...args); // blocking callers' face, as the store's
  }
  if (face !== undefined) wrapper.async = Object.freeze(async);
  return wrapper;
}

/** A tool call: answers on the loop's next turn, as real I/O does (a loop of steps that never yields would starve any loop). */
const toolCall = () => new Promise((resolve) => setImmediate(() => resolve({ ok: true })));

/** Steps on `workers` concurrent runs until `done()`; each report {startedMs, tookMs, outcome | error}. */
function steps(rt, workers, done) {
  const reports = [];
  const one = async (w) => {
    for (let n = 0; !done(); n++) {
      const t0 = performance.now();
      try {
        const run = rt.run(`w${w}-${n}-${t0}`);
        const r = await run.step({ id: 's', tool: 't', target: 'api', operation: toolCall });
        if (!r.runFinished) await run.end();
        reports.push({ startedMs: t0, tookMs: performance.now() - t0, outcome: r.outcome });
      } catch (e) {
        reports.push({ startedMs: t0, tookMs: performance.now() - t0, error: e });
        if (!(e instanceof StoreError)) throw e;
      }
    }
  };
  return { reports, all: Promise.all(Array.from({ length: workers }, (_, w) => one(w))) };
}

/** Wait for `cond()` by yielding to the loop (polling, not timing; a hung test fails after 30 s). */
async function until(cond) {
  const end = performance.now() + 30_000;
  while (!cond()) {
    assert.ok(performance.now() < end, 'the condition did not hold within 30 s');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

test('Redis paused 6 s under the default store: no store call holds the loop, the steps go on from the spool, then Redis again', async () => {
  const redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-loop-'));
  try {
    const url = redis.url(`timeout_ms=${TIMEOUT_MS}&connect_timeout_ms=${CONNECT_TIMEOUT_MS}&probe_ms=1000&spool=${join(dir, 'spool.sqlite')}`);
    const store = openStore(url);
    assert.ok(store instanceof FallbackStore);
    const t = timed(store);
    const events = [];
    const rt = await Runtime.create({ store: t, seed: 7, onEvent: (e) => events.push(e.event) });
    const stop = ticker();
    let finished = false;
    const { reports, all } = steps(rt, 2, () => finished);
    let pausedAt;
    let resumedAt;
    try {
      await until(() => reports.length >= 20); // healthy first
      pausedAt = performance.now();
      redis.signal('SIGSTOP');
      await pause(PAUSE_MS); // the outage: the steps keep running meanwhile
      redis.signal('SIGCONT');
      resumedAt = performance.now();
      await until(() => events.includes('store_restored')); // a probe flushed the spool: Redis serves again
      const count = reports.length;
      await until(() => reports.length >= count + 20);
    } finally {
      finished = true;
      redis.signal('SIGCONT');
      await all;
    }
    const lags = stop();
    const maxLag = Math.max(...lags);
    console.log(`default store: ticker max lag ${maxLag.toFixed(1)} ms over ${lags.length} ticks; slowest store call ${Math.max(...t.took).toFixed(0)} ms`);
    assert.ok(maxLag <= MAX_LAG_MS, `the event loop was late by ${maxLag.toFixed(0)} ms (ticker max lag)`);
    assert.ok(lags.length > 1000, 'the ticker ran through the pause');
    const slowest = Math.max(...t.took);
    assert.ok(slowest <= TIMEOUT_MS + CONNECT_TIMEOUT_MS + SLACK_MS, `a store call took ${slowest.toFixed(0)} ms, over timeout_ms + connect_timeout_ms`);
    assert.ok(slowest >= TIMEOUT_MS * 0.9, `some call waited for the paused server (the pause was real): ${slowest} ms`);
    assert.deepEqual(reports.filter((r) => r.error !== undefined || r.outcome !== 'ok'), [], 'every step ended ok');
    assert.ok(reports.some((r) => r.startedMs > pausedAt + TIMEOUT_MS + CONNECT_TIMEOUT_MS && r.startedMs < resumedAt), 'steps ran from the spool during the pause');
    assert.deepEqual(events.filter((e) => e.startsWith('store_')).slice(0, 2), ['store_degraded', 'store_restored']);
    store.close();
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('Redis paused 6 s under a bare RedisStore: no store call holds the loop, steps fail unavailable within the bound, then succeed again', async () => {
  const redis = await startRedis();
  try {
    const store = new RedisStore(redis.url(`fallback=none&timeout_ms=${TIMEOUT_MS}&connect_timeout_ms=${CONNECT_TIMEOUT_MS}`));
    const rt = await Runtime.create({ store, seed: 7 });
    const stop = ticker();
    let finished = false;
    const { reports, all } = steps(rt, 2, () => finished);
    let resumedAt;
    try {
      await until(() => reports.length >= 20);
      redis.signal('SIGSTOP');
      await pause(PAUSE_MS);
      redis.signal('SIGCONT');
      resumedAt = performance.now();
      await until(() => reports.some((r) => r.startedMs > resumedAt && r.outcome === 'ok'));
    } finally {
      finished = true;
      redis.signal('SIGCONT');
      await all;
    }
    const lags = stop();
    const maxLag = Math.max(...lags);
    const failed = reports.filter((r) => r.error !== undefined);
    console.log(`bare store: ticker max lag ${maxLag.toFixed(1)} ms over ${lags.length} ticks; ${failed.length} steps failed, the slowest in ${Math.max(...failed.map((r) => r.tookMs)).toFixed(0)} ms`);
    assert.ok(maxLag <= MAX_LAG_MS, `the event loop was late by ${maxLag.toFixed(0)} ms (ticker max lag)`);
    assert.ok(failed.length > 0, 'steps ran into the paused server');
    for (const r of failed) {
      assert.equal(r.error.kind, 'unavailable', r.error.message);
      // A step's first store call fails it: one call's bound.
      assert.ok(r.tookMs <= TIMEOUT_MS + CONNECT_TIMEOUT_MS + SLACK_MS, `a failing step took ${r.tookMs.toFixed(0)} ms`);
    }
    assert.ok(reports.some((r) => r.startedMs > resumedAt && r.outcome === 'ok'), 'steps succeed again after SIGCONT');
    store.close();
  } finally {
    await redis.stop();
  }
});
