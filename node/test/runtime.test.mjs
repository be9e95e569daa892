// The Runtime API with real operations, the real component and the real
// stores. Expected values come from the rules of docs/runtime.md and from the
// independent backoff formula (tests/vectors/tools/jitter.py), never from
// running this code.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  Failed,
  MemoryStore,
  Policy,
  PolicyError,
  RawOutcome,
  Runtime,
  SqliteStore,
  StoreError,
  SystemClock,
  VirtualClock,
} from '../src/index.js';
import { REPO, artifact } from './helpers.mjs';

const T0 = 1_767_225_600_000;
const DEAD = 'agent-recovery/dead-letter';

/** The seeded full-jitter delay, from the independent Python implementation. */
function jitter(seed, attempt, base, cap) {
  const r = spawnSync('python3', [join(REPO, 'tests/vectors/tools/jitter.py'), String(seed), String(attempt), String(base), String(cap)], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout.trim());
}
const toolDelay = (attempt) => jitter(7, attempt, 250, 30_000);

let policy;
let dir;
before(async () => {
  policy = await Policy.load();
  dir = mkdtempSync(join(tmpdir(), 'agent-recovery-runtime-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** A runtime on a virtual clock that records the events. */
async function virtualRuntime(options = {}) {
  const clock = new VirtualClock(T0);
  const events = [];
  const texts = [];
  const runtime = await Runtime.create({
    clock,
    seed: 7,
    onEvent: (e, text) => {
      events.push(e);
      texts.push(text);
    },
    ...options,
  });
  return { runtime, clock, events, texts };
}

const http = (status, extra = {}) => new RawOutcome({ source: 'http', status, ...extra });
const QUOTA = { source: 'http', status: 429, body: { error: { type: 'insufficient_quota', code: 'insufficient_quota', message: 'quota' } } };

test('a fallback chain: a quota refusal on the first target moves to the next, same key', async () => {
  const { runtime, events } = await virtualRuntime();
  const run = runtime.run('r-fallback');
  const calls = [];
  const report = await run.step({
    id: 'answer',
    tool: 'llm.chat',
    call: 'llm',
    target: 'openai',
    fallbacks: ['anthropic', 'mistral'],
    operation: (call) => {
      calls.push(call);
      return call.target === 'openai' ? new RawOutcome(QUOTA) : { text: 'ships Monday', from: call.target };
    },
  });
  assert.equal(report.outcome, 'ok');
  assert.equal(report.runFinished, false);
  assert.deepEqual(report.result, { text: 'ships Monday', from: 'anthropic' });
  assert.deepEqual(
    calls.map((c) => [c.kind, c.target, c.attempt]),
    [
      ['operation', 'openai', 1],
      ['fallback', 'anthropic', 2],
    ],
  );
  const key = policy.key({ runId: 'r-fallback', stepId: 'answer', tool: 'llm.chat', args: null });
  assert.deepEqual(
    calls.map((c) => c.key),
    [key, key],
  );
  assert.deepEqual(
    events.map((e) => [e.event, e.target, e.action ?? e.state ?? null]),
    [
      ['attempt', 'openai', null],
      ['decision', 'openai', 'fallback'],
      // A quota outlasts the call: the target's breaker opens (docs/fallbacks-and-breakers.md).
      ['breaker', 'openai', 'open'],
      ['fallback', 'anthropic', null],
      ['attempt', 'anthropic', null],
      ['ok', 'anthropic', null],
      ['outcome', 'anthropic', 'ok'],
    ],
  );
  assert.equal(events[1].code, 'llm.quota.exhausted');
});

test('a later step exhausted with a side effect pending: the compensation runs under its own key, then the dead letter', async () => {
  const store = new MemoryStore();
  const { runtime, clock, events } = await virtualRuntime({ store, attemptBudget: 2 });
  const run = runtime.run('r-comp');
  const undone = [];
  const reserved = await run.step({
    id: 'reserve',
    tool: 'inventory.reserve',
    call: 'tool',
    args: { sku: 'A-1' },
    sideEffect: true,
    operation: () => ({ hold: 'h_9' }),
    compensate: (call) => {
      undone.push(call);
      return null;
    },
  });
  assert.equal(reserved.outcome, 'ok');
  let charges = 0;
  const report = await run.step({
    id: 'charge',
    tool: 'payments.charge',
    call: 'tool',
    target: 'api.pay',
    operation: () => {
      charges += 1;
      return http(503);
    },
  });
  // Attempt budget 2: two calls, one retry sleep between them; the third call
  // would exceed the budget, so the loop compensates and dead-letters.
  assert.equal(charges, 2);
  assert.equal(report.outcome, 'dead_lettered');
  assert.equal(report.runFinished, true);
  assert.equal(undone.length, 1);
  assert.equal(undone[0].kind, 'compensation');
  assert.equal(undone[0].step, 'reserve');
  assert.equal(undone[0].key, policy.key({ runId: 'r-comp', stepId: 'reserve', tool: 'compensate:inventory.reserve', args: { sku: 'A-1' } }));
  const d1 = toolDelay(1);
  const d2 = toolDelay(2);
  assert.equal(clock.nowMs(), T0 + d1 + d2);
  const budget = events.find((e) => e.event === 'decision' && e.code === 'runtime.budget.attempts_exhausted');
  assert.ok(budget, JSON.stringify(events));
  assert.equal(budget.action, 'compensate');
  const comp = events.filter((e) => e.event === 'compensate');
  assert.equal(comp.length, 1);
  assert.equal(comp[0].step, 'reserve');
  const records = store.read(DEAD, 0, 10).map(([, r]) => JSON.parse(r));
  assert.equal(records.length, 1);
  assert.equal(records[0].step_id, 'charge');
  assert.equal(records[0].attempts, 2);
  assert.deepEqual(
    records[0].compensations.map((c) => [c.step, c.outcome, c.attempts]),
    [['reserve', 'ok', 1]],
  );
  // After the run ended, a step is not run.
  const later = await run.step({ id: 'ship', tool: 'ship', operation: () => assert.fail('not called') });
  assert.equal(later.outcome, 'dead_lettered');
  assert.equal(later.runFinished, true);
});

test('a breaker opened by one run short-circuits the next run sharing the SQLite file', async () => {
  const path = join(dir, 'breaker.db');
  const clock = new VirtualClock(T0);
  const first = await Runtime.create({ store: new SqliteStore(path), clock, seed: 7, attemptBudget: 3 });
  let calls = 0;
  const failing = {
    id: 'quote',
    tool: 'pricing.quote',
    call: 'tool',
    target: 'api.price',
    operation: () => {
      calls += 1;
      return http(503);
    },
  };
  const r1 = await first.run('r1').step(failing);
  assert.equal(calls, 3);
  assert.equal(r1.outcome, 'dead_lettered');
  // The third failure opened it (threshold 3), after the sleeps of attempts 1
  // and 2; the retry sleep after it ran before the budget stopped the step.
  const openedAt = T0 + toolDelay(1) + toolDelay(2);
  assert.equal(clock.nowMs(), openedAt + toolDelay(3));

  // Another runtime, another connection to the same file, one ms later.
  clock.advance(1);
  const secondStart = clock.nowMs();
  const events = [];
  // on_open "wait": the step waits for the probe instead of failing at once.
  const second = await Runtime.create({ store: new SqliteStore(path), clock, seed: 7, config: { on_open: 'wait' }, onEvent: (e) => events.push(e) });
  const seen = [];
  const r2 = await second.run('r2').step({
    ...failing,
    operation: () => {
      seen.push(clock.nowMs());
      return { price: 10 };
    },
  });
  assert.equal(r2.outcome, 'ok');
  assert.deepEqual(r2.result, { price: 10 });
  assert.equal(events[0].event, 'short_circuit');
  assert.equal(events[0].code, 'runtime.circuit.open');
  // The first open window is 250 ms (docs/fallbacks-and-breakers.md).
  assert.equal(events[0].delay_ms, 250 - (secondStart - openedAt));
  // The one probe goes once the breaker's window is over, and closes it.
  assert.equal(seen.length, 1);
  assert.ok(seen[0] >= openedAt + 250, `probe at ${seen[0] - openedAt} ms after opening`);
  const breaker = events.filter((e) => e.event === 'breaker').map((e) => e.state);
  assert.deepEqual(breaker, ['half_open', 'closed']);
  assert.equal(events.filter((e) => e.event === 'attempt').length, 1);
});

test('cancel between steps: compensations in reverse order, the outcome says cancelled', async () => {
  const { runtime, events } = await virtualRuntime();
  const run = runtime.run('r-cancel');
  const undone = [];
  for (const id of ['a', 'b']) {
    const r = await run.step({ id, tool: `t.${id}`, sideEffect: true, operation: () => id, compensate: (call) => void undone.push(call.step) });
    assert.equal(r.outcome, 'ok');
  }
  const report = await run.cancel();
  assert.equal(report.outcome, 'cancelled');
  assert.equal(report.runFinished, true);
  assert.deepEqual(undone, ['b', 'a']);
  assert.ok(events.some((e) => e.event === 'cancelled'));
  const after = await run.step({ id: 'c', tool: 't.c', operation: () => assert.fail('not called after a cancel') });
  assert.equal(after.outcome, 'cancelled');
});

test('an AbortSignal cuts a real retry sleep short; the completed step is compensated', { timeout: 15_000 }, async () => {
  const ctl = new AbortController();
  // Aborted once the 30 s sleep has started (the turn after its `sleep` event), not after a time.
  const onEvent = (e) => e.event === 'sleep' && setImmediate(() => ctl.abort());
  const runtime = await Runtime.create({ seed: 7, clock: new SystemClock(), onEvent });
  const run = runtime.run('r-signal', { signal: ctl.signal });
  const undone = [];
  await run.step({ id: 'book', tool: 'hotel.book', sideEffect: true, operation: () => 'ok', compensate: () => void undone.push('book') });
  let calls = 0;
  const report = await run.step({
    id: 'pay',
    tool: 'payments.charge',
    call: 'tool',
    operation: () => {
      calls += 1;
      return http(503, { headers: { 'retry-after': '30' } }); // a 30 s retry sleep, cut short by the abort
    },
  });
  assert.equal(report.outcome, 'cancelled');
  assert.equal(calls, 1);
  assert.deepEqual(undone, ['book']);
});

test('attempt timeout on the virtual clock: a slow call is a timeout observation the policy decides on', async () => {
  const { runtime, clock, events } = await virtualRuntime({ attemptTimeoutMs: 1000 });
  const run = runtime.run('r-slow');
  const report = await run.step({
    id: 's',
    tool: 'search',
    call: 'tool',
    operation: (call) => {
      assert.equal(call.timeoutMs, 1000);
      if (call.attempt === 1) clock.advance(1500); // took 1.5 s
      return 'late';
    },
  });
  assert.equal(report.outcome, 'ok');
  const decision = events.find((e) => e.event === 'decision');
  assert.equal(decision.code, 'tool.timeout.total');
  assert.equal(decision.action, 'retry');
});

test('attempt timeout on the system clock really cancels the call (its signal aborts)', async () => {
  const events = [];
  const runtime = await Runtime.create({ seed: 7, attemptTimeoutMs: 30, onEvent: (e) => events.push(e) });
  const signals = [];
  const report = await runtime.run('r-real-slow').step({
    id: 's',
    tool: 'search',
    call: 'tool',
    idempotent: true,
    operation: (call) => {
      signals.push(call.signal);
      if (call.attempt === 1) return new Promise(() => {}); // never settles
      return 'second try';
    },
  });
  assert.equal(report.outcome, 'ok');
  assert.equal(report.result, 'second try');
  assert.equal(signals[0].aborted, true);
  assert.equal(signals[0].reason.name, 'TimeoutError');
  assert.equal(signals[1].aborted, false);
  assert.equal(events.find((e) => e.event === 'decision').code, 'tool.timeout.total');
});

test('call.signal read only after the attempt timed out is already aborted (TimeoutError)', async () => {
  const runtime = await Runtime.create({ seed: 7, attemptTimeoutMs: 30 });
  const calls = [];
  const report = await runtime.run('r-late-signal').step({
    id: 's',
    tool: 'search',
    call: 'tool',
    idempotent: true,
    operation: (call) => {
      calls.push(call);
      return call.attempt === 1 ? new Promise(() => {}) : 'second try';
    },
  });
  assert.equal(report.outcome, 'ok');
  assert.equal(calls[0].signal.aborted, true);
  assert.equal(calls[0].signal.reason.name, 'TimeoutError');
  assert.equal(calls[1].signal.aborted, false);
});

test('an operation that cancels its own run and returns a plain value ends the step cancelled', async () => {
  const { runtime } = await virtualRuntime();
  const controller = new AbortController();
  const run = runtime.run('r-self-cancel', { signal: controller.signal });
  let call;
  const report = await run.step({
    id: 's',
    tool: 'search',
    call: 'tool',
    operation: (c) => {
      call = c;
      controller.abort();
      return { hits: 1 };
    },
  });
  assert.equal(report.outcome, 'cancelled');
  assert.equal(call.signal.aborted, true);
  assert.equal(call.signal.reason.name, 'AbortError');
});

test('a thrown error becomes an observation with fromError; Failed is a failure as given', async () => {
  const { runtime, events } = await virtualRuntime();
  const cause = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  const report = await runtime.run('r-throw').step({
    id: 's',
    tool: 'search',
    call: 'tool',
    idempotent: true,
    operation: (call) => {
      if (call.attempt === 1) throw new TypeError('fetch failed', { cause });
      if (call.attempt === 2) return new Failed({ source: 'http', status: 502 });
      return { hits: 1 };
    },
  });
  assert.equal(report.outcome, 'ok');
  const codes = events.filter((e) => e.event === 'decision').map((e) => e.code);
  assert.deepEqual(codes, ['tool.network.connection_reset', 'tool.http.502_bad_gateway']);
});

test('a fetch Response is judged by the component: a 304 succeeds, a 200 with a refusal fails', async () => {
  const { runtime, events } = await virtualRuntime();
  const notModified = new globalThis.Response(null, { status: 304 });
  const r1 = await runtime.run('r-304').step({ id: 'page', tool: 'cdn.get', operation: () => notModified });
  assert.equal(r1.outcome, 'ok');
  assert.equal(r1.value, notModified, 'the caller gets its own Response back');
  const refusal = { choices: [{ finish_reason: 'content_filter', message: { content: null } }] };
  const report = await runtime.run('r-refusal').step({
    id: 'answer',
    tool: 'llm.chat',
    call: 'llm',
    operation: () => new globalThis.Response(JSON.stringify(refusal), { status: 200, headers: { 'content-type': 'application/json' } }),
  });
  assert.notEqual(report.outcome, 'ok');
  const decision = events.find((e) => e.event === 'decision');
  assert.ok(decision, 'the 200 with a refusal was decided on as a failure');
  assert.equal(decision.code, runtime.checkOutcome({ source: 'http', status: 200, body: refusal }).code);
});

test('checkOutcome: the component says what failed', async () => {
  const runtime = await Runtime.create();
  assert.equal(runtime.checkOutcome({ source: 'http', status: 304 }), undefined);
  assert.equal(runtime.checkOutcome('{"source":"http","status":200,"body":{"ok":true}}'), undefined);
  assert.equal(runtime.checkOutcome({ source: 'http', status: 503 }).code, 'tool.http.503_unavailable');
  const refusal = runtime.checkOutcome({
    source: 'http',
    status: 200,
    provider: 'openai',
    body: { choices: [{ finish_reason: 'content_filter', message: { content: null } }] },
  });
  assert.ok(refusal.code, JSON.stringify(refusal));
  assert.equal(typeof runtime.checkOutcomeJson('{"source":"http","status":500}'), 'string');
  assert.throws(() => runtime.checkOutcome('not json'), PolicyError);
});

test('a hot swap takes effect at the next decision of the same step', async () => {
  // The reference allows 5 tool attempts; payments-policy 3 (docs/custom-policies.md).
  const swappable = await Policy.load();
  const { runtime, events } = await virtualRuntime({ policy: swappable, breaker: { failureThreshold: 100 } });
  let calls = 0;
  const report = await runtime.run('r-swap').step({
    id: 'refund',
    tool: 'payments.refund',
    call: 'tool',
    operation: async (call) => {
      calls += 1;
      if (call.attempt === 2) await swappable.swap(artifact('payments-policy'));
      return http(503);
    },
  });
  assert.notEqual(swappable.describe().sha256, policy.describe().sha256, 'the swap happened');
  assert.equal(report.outcome, 'dead_lettered');
  assert.equal(calls, 3, JSON.stringify(events));
});

test('bad inputs are typed errors, never a crash', async () => {
  await assert.rejects(Runtime.create({ retries: 3 }), (e) => e instanceof PolicyError && e.kind === 'invalid_config' && /retries/.test(e.message));
  await assert.rejects(Runtime.create({ attemptBudget: -1 }), (e) => e instanceof PolicyError && e.kind === 'invalid_config');
  await assert.rejects(Runtime.create({ breaker: { threshold: 3 } }), (e) => e instanceof PolicyError && /threshold/.test(e.message));
  await assert.rejects(Runtime.create({ config: { attempt_budget: 'five' } }), (e) => e instanceof PolicyError && e.kind === 'invalid_config');
  await assert.rejects(Runtime.create({ policy: {} }), PolicyError);
  const { runtime } = await virtualRuntime();
  const run = runtime.run('r-bad');
  assert.throws(() => run.step({ id: 's', tool: 't', operation: () => 1, retries: 2 }), (e) => e instanceof PolicyError && /retries/.test(e.message));
  assert.throws(() => run.step({ id: 's', tool: 't' }), PolicyError);
  assert.throws(() => run.step({ id: '', tool: 't', operation: () => 1 }), PolicyError);
  assert.throws(() => runtime.run(''), PolicyError);
  assert.equal((await run.step({ id: 's', tool: 't', operation: () => 1 })).outcome, 'ok');
  // A step id repeated in a run: the loop refuses it.
  await assert.rejects(run.step({ id: 's', tool: 't', operation: () => 1 }), (e) => e instanceof PolicyError && e.kind === 'invalid_argument');
  // Two steps at once in one run.
  let finish;
  const slow = run.step({ id: 'u', tool: 't', operation: () => new Promise((r) => (finish = r)) });
  await assert.rejects(run.step({ id: 'v', tool: 't', operation: () => 1 }), /in progress/);
  while (finish === undefined) await new Promise(setImmediate);
  finish(1);
  assert.equal((await slow).outcome, 'ok');
});

test('a store that fails surfaces as a StoreError', async () => {
  class Broken extends MemoryStore {
    get() {
      throw new StoreError('unavailable', 'the disk is gone');
    }
  }
  const { runtime } = await virtualRuntime({ store: new Broken() });
  await assert.rejects(runtime.run('r-store').step({ id: 's', tool: 't', operation: () => 1 }), (e) => e instanceof StoreError && e.kind === 'unavailable');
});

test('the idempotency cache answers a repeated key without calling', async () => {
  const store = new MemoryStore();
  const { runtime, events } = await virtualRuntime({ store });
  let calls = 0;
  const step = { id: 's', tool: 'lookup', args: { id: 7 }, operation: () => ({ n: ++calls }) };
  assert.deepEqual((await runtime.run('r-cache').step(step)).result, { n: 1 });
  const again = await runtime.run('r-cache').step(step);
  assert.equal(again.outcome, 'ok');
  assert.deepEqual(again.result, { n: 1 });
  assert.equal(again.value, undefined);
  assert.equal(calls, 1);
  assert.equal(events.at(-2).event, 'cached');
});

test('run.cancel() during a step: the call in flight is aborted, the step ends cancelled, its report is returned', { timeout: 20_000 }, async () => {
  const runtime = await Runtime.create({ seed: 7 });
  const run = runtime.run('r-cancel-in-flight');
  const undone = [];
  await run.step({ id: 'hold', tool: 'seat.hold', sideEffect: true, operation: () => 'held', compensate: () => void undone.push('hold') });
  let signal;
  let entered;
  const inCall = new Promise((r) => {
    entered = r;
  });
  const pending = run.step({
    id: 'pay',
    tool: 'payments.charge',
    operation: (call) => {
      signal = call.signal;
      entered();
      return new Promise(() => {}); // hangs until cancelled
    },
  });
  await inCall;
  const report = await run.cancel();
  assert.equal(report.outcome, 'cancelled');
  assert.equal((await pending).outcome, 'cancelled');
  assert.equal(signal.aborted, true);
  assert.equal(signal.reason.name, 'AbortError');
  assert.deepEqual(undone, ['hold']);
  const events = run.events.map((t) => JSON.parse(t).event);
  assert.ok(!events.includes('decision'), 'nothing was decided about the aborted call');
  assert.equal(events.at(-1), 'outcome');
});

test('deadlineMs: a retry that would sleep past the deadline ends the step as a total timeout', async () => {
  const d1 = toolDelay(1);
  const d2 = toolDelay(2);
  // The deadline falls inside the second retry's sleep (rules: "Run deadline").
  const deadline = d1 + Math.floor(d2 / 2) + 1;
  const { runtime, events } = await virtualRuntime({ deadlineMs: deadline });
  let calls = 0;
  const report = await runtime.run('r-deadline').step({
    id: 'sync',
    tool: 'erp.sync',
    call: 'tool',
    operation: () => {
      calls += 1;
      return http(503);
    },
  });
  assert.equal(calls, 2);
  assert.equal(report.outcome, 'dead_lettered');
  assert.equal(events.filter((e) => e.event === 'decision').at(-1).code, 'tool.timeout.total');
});

test('idempotencyTtlMs: the cache answers within the TTL, and the key is called again after it', async () => {
  const { runtime, clock } = await virtualRuntime({ idempotencyTtlMs: 1000 });
  let calls = 0;
  const step = { id: 's', tool: 'lookup', operation: () => ++calls };
  assert.equal((await runtime.run('r-ttl').step(step)).result, 1);
  clock.advance(999);
  assert.equal((await runtime.run('r-ttl').step(step)).result, 1);
  clock.advance(1);
  assert.equal((await runtime.run('r-ttl').step(step)).result, 2);
  assert.equal(calls, 2);
});

test('your own clock: fractional ms are floored (the loop takes integers), sleeps go through it', async () => {
  let now = T0 + 0.75;
  const slept = [];
  const clock = {
    nowMs: () => now,
    sleepMs: async (ms) => {
      slept.push(ms);
      now += ms;
    },
  };
  const runtime = await Runtime.create({ clock, seed: 7 });
  const report = await runtime.run('r-own-clock').step({
    id: 's',
    tool: 'search',
    call: 'tool',
    operation: (call) => (call.attempt === 1 ? http(503) : 'ok'),
  });
  assert.equal(report.outcome, 'ok');
  assert.deepEqual(slept, [toolDelay(1)]);
});

test('an IsolatedPolicy (worker thread) decides for the runtime', { timeout: 60_000 }, async () => {
  const isolated = await Policy.load(undefined, { isolate: 'worker' });
  try {
    const { runtime, events } = await virtualRuntime({ policy: isolated });
    const report = await runtime.run('r-isolated').step({
      id: 's',
      tool: 'search',
      call: 'tool',
      operation: (call) => (call.attempt === 1 ? http(503) : 'ok'),
    });
    assert.equal(report.outcome, 'ok');
    const decision = events.find((e) => e.event === 'decision');
    assert.equal(decision.action, 'retry');
    assert.equal(decision.delay_ms, toolDelay(1));
  } finally {
    isolated.close();
  }
});
