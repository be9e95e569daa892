// A run yields to the event loop between steps: a loop of steps that resolve
// at once (idempotency-cache hits on a MemoryStore and a VirtualClock, or
// synchronous operations) runs on microtasks only, and would otherwise starve
// timers and I/O (docs/runtime.md, "Node").

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryStore, Runtime, VirtualClock } from '../src/index.js';

const T0 = 1_767_225_600_000;
const STEPS = 60;

/** Blocks the thread until `ms` have passed, so a timer of 0 ms is due. */
function letTimersFallDue(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/** Runs STEPS steps; returns after how many steps each of a timer and an immediate fired (or null). */
async function stepsBeforeCallbacks(run, operation) {
  let done = 0;
  const fired = { timeout: null, immediate: null };
  setTimeout(() => (fired.timeout = done), 0);
  setImmediate(() => (fired.immediate = done));
  letTimersFallDue(5);
  for (let i = 0; i < STEPS; i++) {
    const r = await run.step({ id: `s${i}`, tool: 'kv.get', args: { i }, operation });
    assert.equal(r.outcome, 'ok');
    done += 1;
  }
  return fired;
}

test('timers fire during a loop of 60 cached steps', async () => {
  const store = new MemoryStore();
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7, store });
  let calls = 0;
  const operation = () => {
    calls += 1;
    return { v: 1 };
  };
  await stepsBeforeCallbacks(runtime.run('warm'), operation);
  assert.equal(calls, STEPS);
  // The same run id and steps again: every step is an idempotency-cache hit.
  const fired = await stepsBeforeCallbacks(runtime.run('warm'), () => assert.fail('a cached step was called'));
  assert.equal(calls, STEPS);
  assert.notEqual(fired.immediate, null, 'setImmediate never ran during the loop');
  assert.notEqual(fired.timeout, null, 'setTimeout never ran during the loop');
  assert.ok(fired.timeout < STEPS && fired.immediate < STEPS, JSON.stringify(fired));
});

test('timers fire during a loop of 60 synchronous steps', async () => {
  const runtime = await Runtime.create({ clock: new VirtualClock(T0), seed: 7 });
  const fired = await stepsBeforeCallbacks(runtime.run('sync'), () => 1);
  assert.ok(fired.timeout !== null && fired.timeout < STEPS, JSON.stringify(fired));
  assert.ok(fired.immediate !== null && fired.immediate < STEPS, JSON.stringify(fired));
});
