// The loop across a fleet (docs/runtime.md, "The rules"): two
// runtimes, each with its own handle on one SQLite file, as two workers.
//
// - one half-open probe: two worker threads (each its own Runtime and
//   SqliteStore connection) both read the open breaker before either claims
//   the probe lease (an Atomics rendezvous at the claim; no sleep); exactly
//   one calls.
// - the retry quota: a bucket drained by one worker refuses the other's retry.
//
// The real loop component runs through jco; the stores are real SqliteStore
// files. Expected values come from the rules (lease TTL = the breaker's
// open_ms, costs and refunds from the run configuration).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';

import { Failed, Runtime, SqliteStore, VirtualClock } from '../src/index.js';

const T0 = 1_767_225_600_000;
const PROBE = 'agent-recovery/probe/';

function tempStore(t, name) {
  const dir = mkdtempSync(join(tmpdir(), 'ar-fleet-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, name);
}

// One worker: its claim of a probe lease waits (up to 10 s) until the other
// worker reached its own claim.
const WORKER = `
  const { workerData, parentPort } = require('node:worker_threads');
  const { name, path, gate, indexUrl, T0 } = workerData;
  const meet = new Int32Array(gate);
  import(indexUrl).then(async ({ Runtime, SqliteStore, VirtualClock }) => {
    const db = new SqliteStore(path);
    const store = {
      get: (...a) => db.get(...a),
      compareAndSet: (key, ...rest) => {
        if (key.startsWith('agent-recovery/probe/')) {
          Atomics.add(meet, 0, 1);
          Atomics.notify(meet, 0);
          const deadline = Date.now() + 10000;
          for (let n = Atomics.load(meet, 0); n < 2 && Date.now() < deadline; n = Atomics.load(meet, 0)) {
            Atomics.wait(meet, 0, n, 100);
          }
        }
        return db.compareAndSet(key, ...rest);
      },
      append: (...a) => db.append(...a),
      read: (...a) => db.read(...a),
      delete: (...a) => db.delete(...a),
      keys: (...a) => db.keys(...a),
    };
    const events = [];
    let calls = 0;
    const rt = await Runtime.create({ store, clock: new VirtualClock(T0), seed: 7, onEvent: (e) => events.push(e) });
    const report = await rt.run(name).step({
      id: 'pay', tool: 'payments.charge', call: 'tool', target: 'api.pay',
      operation: () => { calls += 1; return 'charged'; },
    });
    db.close();
    parentPort.postMessage({ name, outcome: report.outcome, events, calls });
  }).catch((e) => parentPort.postMessage({ name, error: String(e && e.stack) }));`;

test('two runtimes racing for a probe make one half-open call', async (t) => {
  const path = tempStore(t, 'fleet.db');
  const db = new SqliteStore(path);
  // Another worker opened it 10 minutes ago for 10 minutes: the probe is due now.
  const breaker = { state: 'open', failures: 3, since_ms: T0 - 600_000, open_ms: 600_000 };
  db.compareAndSet('agent-recovery/breaker/api.pay', null, JSON.stringify(breaker), null, T0);
  db.close();
  const gate = new SharedArrayBuffer(4);
  const indexUrl = new URL('../src/index.js', import.meta.url).href;
  const results = await Promise.all(
    ['w1', 'w2'].map(
      (name) =>
        new Promise((resolve, reject) => {
          const w = new Worker(WORKER, { eval: true, workerData: { name, path, gate, indexUrl, T0 } });
          w.once('message', (m) => {
            resolve(m);
            w.terminate();
          });
          w.once('error', reject);
        }),
    ),
  );
  for (const r of results) assert.equal(r.error, undefined, r.error);
  const calls = results.reduce((n, r) => n + r.calls, 0);
  assert.equal(calls, 1, JSON.stringify(results));
  const halfOpen = results.flatMap((r) => r.events).filter((e) => e.event === 'breaker' && e.state === 'half_open');
  assert.equal(halfOpen.length, 1, JSON.stringify(results));
  const winner = results.find((r) => r.calls === 1);
  const loser = results.find((r) => r.calls === 0);
  assert.equal(winner.outcome, 'ok');
  // It read `open` too (it reached the claim), lost it, and was short-circuited
  // for the lease's 10 minutes: longer than the run's 60 s retry budget.
  const short = loser.events.find((e) => e.event === 'short_circuit');
  assert.equal(short?.delay_ms, 600_000, JSON.stringify(loser.events));
  assert.ok(!loser.events.some((e) => e.event === 'attempt'), JSON.stringify(loser.events));
  const check = new SqliteStore(path);
  const lease = JSON.parse(check.get(`${PROBE}api.pay`, T0).value);
  check.close();
  assert.deepEqual([lease.since_ms, lease.open_ms], [T0, 600_000]);
});

test('a retry quota drained by one worker refuses the other\'s retry', async (t) => {
  const path = tempStore(t, 'quota.db');
  const e503 = { source: 'http', status: 503 };
  const worker = async (name, outcomes) => {
    const store = new SqliteStore(path);
    const rt = await Runtime.create({ store, clock: new VirtualClock(T0), seed: 7, retryQuota: { capacity: 10 } });
    const left = [...outcomes];
    const report = await rt.run(name).step({
      id: 'sync', tool: 'erp.sync', call: 'tool', target: name,
      operation: () => {
        const o = left.shift();
        return o === 'ok' ? null : new Failed(o);
      },
    });
    store.close();
    return report;
  };
  const tokens = () => {
    const s = new SqliteStore(path);
    const v = JSON.parse(s.get('agent-recovery/quota/default', T0).value).tokens;
    s.close();
    return v;
  };
  // Worker 1: two retries take 5 + 5 of the 10 tokens, the third is refused.
  let r = await worker('w1', [e503, e503, e503]);
  assert.deepEqual([r.outcome, r.envelope?.code], ['dead_lettered', 'runtime.budget.retry_quota_exhausted']);
  assert.equal(tokens(), 0);
  // Worker 2, another runtime on the same file: its first retry is refused.
  r = await worker('w2', [e503, 'ok']);
  assert.deepEqual([r.outcome, r.envelope?.code], ['dead_lettered', 'runtime.budget.retry_quota_exhausted']);
  // Worker 3: a success without a retry refunds success_refund (1).
  assert.equal((await worker('w3', ['ok'])).outcome, 'ok');
  assert.equal(tokens(), 1);
});

test('retryQuota is checked: unknown members and bad values are invalid-config with a hint', async () => {
  await assert.rejects(Runtime.create({ retryQuota: { cost: 1 } }), (e) => /unknown option "cost"/.test(e.message));
  // The loop checks the run configuration when the runtime is created: a cost above the capacity.
  await assert.rejects(
    Runtime.create({ clock: new VirtualClock(T0), retryQuota: { capacity: 3 } }),
    (e) => e.kind === 'invalid_config' && /retry_quota\.retry_cost is 5; give 1\.\.capacity \(3\)/.test(e.message),
  );
});
