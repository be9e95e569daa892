// `Policy.load(source, {isolate: 'worker', timeoutMs})`: an untrusted policy
// runs in a worker thread; a runaway is terminated at its deadline and
// reported as a trap, and the main thread's event loop keeps running.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { IsolatedPolicy, Policy, PolicyLoadError, PolicyRuntimeError } from '../src/index.js';
import { artifact } from './helpers.mjs';

const OBS = '{"source":"http","status":503}';

/** Counts setInterval ticks on the main thread while `run` is pending. */
async function ticksDuring(run) {
  let ticks = 0;
  const timer = setInterval(() => {
    ticks += 1;
  }, 10);
  try {
    return { result: await run().then((v) => ({ v }), (e) => ({ e })), ticks };
  } finally {
    clearInterval(timer);
  }
}

test('a looping policy is stopped at its deadline while the event loop keeps running', async () => {
  const spin = readFileSync(artifact('hostile-spin'));
  // Loaded unchecked: its smoke set would loop too (see the next test).
  const policy = await Policy.load(spin, { isolate: 'worker', timeoutMs: 300, verify: false });
  assert.ok(policy instanceof IsolatedPolicy);
  const started = process.hrtime.bigint();
  const { result, ticks } = await ticksDuring(() => policy.decideJson(OBS));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  assert.ok(result.e instanceof PolicyRuntimeError, `expected a PolicyRuntimeError, got ${JSON.stringify(result)}`);
  assert.equal(result.e.code, 'trap');
  assert.match(result.e.message, /did not answer decideJson within 300 ms/);
  assert.ok(ms >= 290 && ms < 5000, `stopped after ${ms} ms`);
  // A 10 ms interval over >= 300 ms: the main thread was never blocked.
  assert.ok(ticks >= 10, `only ${ticks} ticks while the policy looped`);
  // The next call gets a fresh worker, and loops (and is stopped) again.
  await assert.rejects(policy.info().then(() => policy.decideJson(OBS)), (e) => e.code === 'trap');
  assert.ok(policy.restarts >= 1);
  policy.close();
});

test('a looping smoke set is refused at load with a trap, the event loop free', async () => {
  const spin = readFileSync(artifact('hostile-spin'));
  const started = process.hrtime.bigint();
  const { result, ticks } = await ticksDuring(() => Policy.load(spin, { isolate: 'worker', loadTimeoutMs: 3000 }));
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  assert.ok(ms >= 2990, `refused after ${ms} ms, before its deadline: ${result.e}`);
  assert.ok(result.e instanceof PolicyLoadError, String(result.e));
  assert.equal(result.e.code, 'trap');
  assert.match(result.e.message, /within 3000 ms/);
  assert.ok(ticks >= 100, `only ${ticks} ticks`);
});

test('worker mode answers byte for byte as in-process', async () => {
  const inProcess = await Policy.load();
  const isolated = await Policy.load(undefined, { isolate: 'worker', timeoutMs: 5000 });
  const ctx = '{"attempt":1,"seed":7}';
  assert.equal(await isolated.decideJson(OBS, ctx), inProcess.decideJson(OBS, ctx));
  assert.deepEqual(await isolated.decide(JSON.parse(OBS), { attempt: 1, seed: 7n }), inProcess.decide(JSON.parse(OBS), { attempt: 1, seed: 7n }));
  assert.deepEqual(await isolated.lookup('tool.http.503_unavailable'), inProcess.lookup('tool.http.503_unavailable'));
  // Errors keep their class and code across the thread boundary.
  await assert.rejects(isolated.decideJson('{not json'), (e) => e.name === 'PolicyError' && e.code === 'policy/invalid-json');
  isolated.close();
});

test('isolate and timeoutMs are validated', async () => {
  await assert.rejects(Policy.load(undefined, { isolate: 'process' }), (e) => e.code === 'policy/invalid-argument');
  await assert.rejects(Policy.load(undefined, { isolate: 'worker', timeoutMs: 0 }), (e) => e.code === 'policy/invalid-argument');
  await assert.rejects(Policy.load(undefined, { isolate: 'worker', loadTimeoutMs: 1.5 }), (e) => e.code === 'policy/invalid-argument');
});
