// retry(): the host loop around the policy. Sleeping is faked (delays are
// recorded, not waited), the policy is the real component.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { Policy, RecoveryError, failureOf, fromError, fromResponse, retry } from '../src/index.js';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO, fakeSleep } from './helpers.mjs';

let policy;
before(async () => {
  policy = await Policy.load();
});

const STEP = { runId: 'run-7', stepId: 'fetch-weather', tool: 'weather.get', args: { city: 'Oslo' } };

function http(status, headers = {}, body = '') {
  return new Response(body === '' ? null : body, { status, headers });
}

function econnreset() {
  // What undici's fetch throws when the peer resets the connection.
  const cause = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read', errno: -104 });
  return new TypeError('fetch failed', { cause });
}

test('a flaky tool recovers: same key every attempt, delays slept as decided', async () => {
  const { sleep, delays } = fakeSleep();
  const seen = [];
  const decisions = [];
  const result = await retry(
    async ({ attempt, idempotencyKey, signal }) => {
      seen.push({ attempt, idempotencyKey, signal });
      if (attempt === 1) return http(503, { 'Retry-After': '1' }, 'busy');
      if (attempt === 2) throw econnreset();
      return { ok: true, temperature: -3 };
    },
    { policy, call: 'tool', ...STEP, seed: 42n, sleep, onDecision: (d) => decisions.push(d) },
  );
  assert.deepEqual(result, { ok: true, temperature: -3 });
  assert.deepEqual(seen.map((s) => s.attempt), [1, 2, 3]);
  const key = policy.key(STEP);
  assert.deepEqual(seen.map((s) => s.idempotencyKey), [key, key, key]);
  assert.equal(decisions.length, 2);
  assert.deepEqual(delays, decisions.map((d) => d.decision.delay_ms));
  assert.ok(delays[0] >= 1000, `Retry-After: 1 means at least 1000 ms, got ${delays[0]}`);
  assert.equal(decisions[0].decision.envelope.code, 'tool.http.503_unavailable');
  assert.equal(decisions[1].decision.envelope.code, 'tool.network.connection_reset');
  assert.equal(decisions[1].observation.source, 'network');
  assert.ok(decisions[1].error instanceof TypeError);
  for (const d of decisions) {
    assert.equal(d.decision.action, 'retry');
    assert.equal(d.idempotencyKey, key);
    assert.equal(d.decision.policy.sha256, policy.describe().sha256);
  }
});

test('the elapsed retry time and the seed reach the policy', async () => {
  const { sleep, delays } = fakeSleep();
  const decisions = [];
  await assert.rejects(
    retry(async () => http(503), { policy, call: 'tool', ...STEP, seed: 1, sleep, onDecision: (d) => decisions.push(d.decision) }),
    RecoveryError,
  );
  // Seed 1 attempt 1 draws 96 ms (tests/vectors/decisions.json).
  assert.equal(delays[0], 96);
  let spent = 0;
  for (const d of decisions.filter((x) => x.action === 'retry')) {
    spent += d.delay_ms;
    assert.equal(d.budget_remaining_ms, 60_000 - spent);
  }
});

test('a permanent failure stops at once with a RecoveryError', async () => {
  const { sleep, delays } = fakeSleep();
  let calls = 0;
  const body = JSON.stringify({ error: { message: 'city is required', type: 'invalid_request_error', param: 'city' } });
  const err = await retry(
    async () => {
      calls++;
      return http(400, { 'content-type': 'application/json' }, body);
    },
    { policy, call: 'tool', ...STEP, sleep },
  ).catch((e) => e);
  assert.ok(err instanceof RecoveryError, String(err));
  assert.equal(calls, 1);
  assert.deepEqual(delays, []);
  assert.equal(err.action, 'fail');
  assert.equal(err.attempts, 1);
  assert.equal(err.decision.action, 'fail');
  assert.equal(err.envelope, err.decision.envelope);
  assert.match(err.code, /^tool\.http\.400/);
  assert.equal(err.result.status, 400);
  assert.equal(err.observation.status, 400);
  assert.match(err.message, /fail after attempt 1/);
});

test('attempts run out: dead_letter, or compensate with side effects pending', async () => {
  for (const [pending, action] of [
    [0, 'dead_letter'],
    [2, 'compensate'],
  ]) {
    const { sleep, delays } = fakeSleep();
    let calls = 0;
    const err = await retry(
      async () => {
        calls++;
        return http(503);
      },
      { policy, call: 'tool', ...STEP, seed: 5n, sleep, context: { compensations_pending: pending } },
    ).catch((e) => e);
    assert.ok(err instanceof RecoveryError, String(err));
    assert.equal(err.action, action);
    assert.equal(err.decision.reason, 'attempts_exhausted');
    assert.equal(calls, err.decision.max_attempts);
    assert.equal(delays.length, calls - 1);
  }
});

test('maxElapsedMs is the retry budget: the delays never exceed it', async () => {
  const { sleep, delays } = fakeSleep();
  const err = await retry(async () => http(429, { 'retry-after': '1' }), {
    policy,
    call: 'tool',
    ...STEP,
    seed: 3n,
    maxElapsedMs: 2500,
    sleep,
  }).catch((e) => e);
  assert.ok(err instanceof RecoveryError, String(err));
  assert.equal(err.action, 'dead_letter');
  assert.ok(['budget_exhausted', 'hint_exceeds_budget'].includes(err.decision.reason), err.decision.reason);
  assert.equal(err.decision.reason_code, 'runtime.budget.retry_exhausted');
  assert.ok(delays.length >= 2, `${delays}`);
  assert.ok(delays.reduce((a, b) => a + b, 0) <= 2500, `${delays}`);
});

test('context.elapsed_ms carries a run budget across steps', async () => {
  const { sleep, delays } = fakeSleep();
  const err = await retry(async () => http(503, { 'retry-after': '2' }), {
    policy,
    ...STEP,
    seed: 1,
    sleep,
    context: { elapsed_ms: 59_000 },
  }).catch((e) => e);
  assert.ok(err instanceof RecoveryError, String(err));
  assert.deepEqual(delays, []);
  assert.equal(err.decision.reason, 'hint_exceeds_budget');
  assert.equal(err.elapsedMs, 59_000);
  const ok = await retry(
    async ({ attempt }) => (attempt === 1 ? http(503, { 'retry-after': '1' }) : 'ok'),
    { policy, ...STEP, seed: 1, sleep, context: { elapsed_ms: 1000 }, onDecision: (d) => assert.equal(d.elapsedMs, 1000) },
  );
  assert.equal(ok, 'ok');
});

test('without an idempotency key an ambiguous failure is not retried', async () => {
  const { sleep, delays } = fakeSleep();
  const err = await retry(
    async ({ idempotencyKey }) => {
      assert.equal(idempotencyKey, undefined);
      throw econnreset();
    },
    { policy, call: 'tool', sleep },
  ).catch((e) => e);
  assert.equal(err.action, 'fail');
  assert.equal(err.decision.reason, 'not_idempotent');
  assert.deepEqual(delays, []);
  assert.ok(err.cause instanceof TypeError);
  // A read-only call says so and is retried.
  let n = 0;
  const out = await retry(
    async () => {
      if (++n === 1) throw econnreset();
      return 'ok';
    },
    // Seeded: unseeded full jitter draws 0 ms about once in 250 runs, and a
    // retry after 0 ms calls at once without sleeping (docs/runtime.md).
    { policy, call: 'tool', idempotent: true, sleep, seed: 7 },
  );
  assert.equal(out, 'ok');
  assert.equal(delays.length, 1);
});

test('an explicit idempotencyKey is passed through unchanged', async () => {
  const { sleep } = fakeSleep();
  const keys = [];
  await retry(
    async ({ attempt, idempotencyKey }) => {
      keys.push(idempotencyKey);
      if (attempt < 3) return http(502);
      return 'done';
    },
    { policy, idempotencyKey: 'order-123', sleep },
  );
  assert.deepEqual(keys, ['order-123', 'order-123', 'order-123']);
});

test('success on the first attempt asks the policy nothing', async () => {
  let asked = 0;
  const res = await retry(async () => http(200, {}, 'fine'), { policy, ...STEP, onDecision: () => asked++ });
  assert.equal(res.status, 200);
  assert.equal(asked, 0);
});

test('a returned MCP isError result is a failure (replan)', async () => {
  const { sleep } = fakeSleep();
  const err = await retry(async () => ({ content: [{ type: 'text', text: 'Invalid date' }], isError: true }), {
    policy,
    ...STEP,
    sleep,
  }).catch((e) => e);
  assert.ok(err instanceof RecoveryError, String(err));
  assert.equal(err.action, 'replan');
  assert.equal(err.code, 'tool.mcp.tool_error');
});

test('a per-attempt timeout becomes a timeout observation', async () => {
  const { sleep } = fakeSleep();
  const observations = [];
  let n = 0;
  const out = await retry(
    async ({ signal }) => {
      if (++n === 1) {
        await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      }
      return 'late but fine';
    },
    { policy, ...STEP, timeoutMs: 5, sleep, onDecision: (d) => observations.push(d.observation) },
  );
  assert.equal(out, 'late but fine');
  assert.deepEqual(observations[0], { source: 'timeout', phase: 'total', after_ms: 5 });
});

test('aborting the caller signal stops the retry loop during the sleep', async () => {
  const ctl = new AbortController();
  const started = Date.now();
  const p = retry(async () => http(503, { 'retry-after': '30' }), {
    policy,
    ...STEP,
    signal: ctl.signal,
    onDecision: () => setTimeout(() => ctl.abort(new Error('user cancelled')), 10),
  });
  await assert.rejects(p, /user cancelled/);
  assert.ok(Date.now() - started < 5000);
});

test('a RecoveryError from an inner retry() is not retried again', async () => {
  const { sleep, delays } = fakeSleep();
  let outer = 0;
  const err = await retry(
    async () => {
      outer++;
      return retry(async () => http(400), { policy, ...STEP, sleep });
    },
    { policy, ...STEP, sleep },
  ).catch((e) => e);
  assert.ok(err instanceof RecoveryError);
  assert.equal(outer, 1);
  assert.deepEqual(delays, []);
});

test('retry() checks its options', async () => {
  await assert.rejects(retry(async () => 1, {}), TypeError);
  await assert.rejects(retry(null, { policy }), TypeError);
  await assert.rejects(retry(async () => 1, { policy, maxElapsedMs: -1 }), /maxElapsedMs/);
  await assert.rejects(retry(async () => 1, { policy, timeoutMs: 0 }), /timeoutMs/);
});

test('fromResponse: status, headers and body text', async () => {
  const res = http(429, { 'Retry-After': '3', 'x-request-id': 'req_1' }, '{"error":{"message":"slow down"}}');
  const obs = await fromResponse(res, { call: 'llm', provider: 'openai' });
  assert.deepEqual(obs, {
    source: 'http',
    status: 429,
    headers: { 'content-type': 'text/plain;charset=UTF-8', 'retry-after': '3', 'x-request-id': 'req_1' },
    body: '{"error":{"message":"slow down"}}',
    call: 'llm',
    provider: 'openai',
  });
  const env = policy.classify(obs);
  assert.equal(env.code, 'llm.http.429_rate_limited');
  assert.equal(env.retry_after_ms, 3000);
  const empty = await fromResponse(http(503));
  assert.equal(empty.body, undefined);
  const cut = await fromResponse(http(500, {}, 'x'.repeat(100)), { maxBodyChars: 10 });
  assert.equal(cut.body, 'x'.repeat(10));
});

test('fromError: network codes, SDK errors, timeouts, exceptions', () => {
  assert.deepEqual(fromError(econnreset()), { source: 'network', code: 'ECONNRESET', message: 'fetch failed' });
  assert.equal(fromError(Object.assign(new Error('x'), { code: 'EAI_AGAIN' })).code, 'EAI_AGAIN');
  const connectTimeout = new TypeError('fetch failed', {
    cause: Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' }),
  });
  assert.equal(policy.classify(fromError(connectTimeout)).code, 'tool.timeout.connect');
  const agg = new TypeError('fetch failed', {
    cause: new AggregateError([Object.assign(new Error('a'), { code: 'ECONNREFUSED' })], 'x'),
  });
  assert.equal(fromError(agg).code, 'ECONNREFUSED');
  // A programming error is an exception, not a network failure.
  const bug = Object.assign(new TypeError('bad arg'), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.deepEqual(fromError(bug), { source: 'exception', type: 'TypeError', message: 'bad arg' });
  assert.deepEqual(fromError(new DOMException('timed out', 'TimeoutError'), { timeoutMs: 100 }), {
    source: 'timeout',
    phase: 'total',
    after_ms: 100,
  });
  // Any error with an HTTP status (an HTTP client's error), in the two body shapes the
  // OpenAI and Anthropic SDKs keep; the real SDKs' errors are in adapters.test.mjs.
  const openai = Object.assign(new Error('429 Rate limit'), {
    status: 429,
    headers: { 'retry-after-ms': '1500' },
    error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded', param: null },
  });
  const o = fromError(openai, { call: 'llm' });
  assert.deepEqual(o.body, { error: openai.error });
  assert.equal(policy.classify(o).upstream.status, 429);
  const anthropic = Object.assign(new Error('529'), {
    status: 529,
    error: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
  });
  assert.deepEqual(fromError(anthropic).body, anthropic.error);
  assert.deepEqual(fromError('just a string'), { source: 'exception', type: 'Error', message: 'just a string' });
  const own = Object.assign(new Error('x'), { observation: { source: 'timeout', phase: 'read' } });
  assert.deepEqual(fromError(own), { source: 'timeout', phase: 'read' });
});

test('failureOf: Response, MCP result, JSON-RPC error; success is undefined', async () => {
  assert.equal(await failureOf(http(204)), undefined);
  assert.equal(await failureOf({ content: [], isError: false }), undefined);
  assert.equal(await failureOf('text'), undefined);
  assert.equal((await failureOf(http(502))).status, 502);
  const rpc = { jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'bad params' } };
  assert.deepEqual(await failureOf(rpc), { source: 'jsonrpc', message: rpc });
});

test('retry() runs on the Runtime: the component judges (a 304 succeeds, a 200 with a refusal fails) and events are reported', async () => {
  const { sleep } = fakeSleep();
  const events = [];
  const notModified = await retry(async () => http(304), { policy, ...STEP, sleep, onEvent: (e) => events.push(e) });
  assert.equal(notModified.status, 304, 'a 304 is the client business, not a failure');
  assert.deepEqual(
    events.map((e) => e.event),
    ['attempt', 'ok', 'outcome'],
  );
  const refusal = JSON.stringify({ choices: [{ finish_reason: 'content_filter', message: { content: null } }] });
  const err = await retry(async () => http(200, { 'content-type': 'application/json' }, refusal), {
    policy,
    call: 'llm',
    ...STEP,
    sleep,
  }).catch((e) => e);
  assert.ok(err instanceof RecoveryError, String(err));
  assert.equal(err.observation.status, 200);
  assert.equal(err.code, policy.classify(err.observation).code);
});

test('retry() keeps a u64 seed exact: the first delay is the one decide() draws', async () => {
  const seed = 18446744073709551615n;
  const { sleep, delays } = fakeSleep();
  await retry(async ({ attempt }) => (attempt === 1 ? http(503) : 'ok'), { policy, call: 'tool', ...STEP, seed, sleep });
  // The independent formula (tests/vectors/tools/jitter.py): tool calls, 250 ms base, 30 s cap.
  const r = spawnSync('python3', [join(REPO, 'tests/vectors/tools/jitter.py'), seed.toString(), '1', '250', '30000'], { encoding: 'utf8' });
  assert.deepEqual(delays, [Number(r.stdout.trim())]);
});

test('each retry() without a store has a store of its own; calls given one store share it (the runtime under them is kept)', async () => {
  const { MemoryStore } = await import('../src/index.js');
  let calls = 0;
  const op = async () => ({ n: ++calls });
  // The same explicit key twice: no shared idempotency cache without a store, so both calls run.
  assert.deepEqual(await retry(op, { policy, idempotencyKey: 'order-7' }), { n: 1 });
  assert.deepEqual(await retry(op, { policy, idempotencyKey: 'order-7' }), { n: 2 });
  // Given one store, the second call with the key is answered from its cache.
  const store = new MemoryStore();
  assert.deepEqual(await retry(op, { policy, store, idempotencyKey: 'order-8' }), { n: 3 });
  assert.deepEqual(await retry(op, { policy, store, idempotencyKey: 'order-8' }), { n: 3 });
  assert.equal(calls, 3);
  // A breaker opened in one store stays in that store: a call with no store is not short-circuited.
  const failing = async () => Promise.reject(Object.assign(new Error('down'), { status: 503 }));
  const opts = { policy, store, target: 'api', breaker: { failureThreshold: 1, openMs: 60_000 }, sleep: fakeSleep().sleep };
  await assert.rejects(retry(failing, opts), RecoveryError);
  let reached = 0;
  await assert.rejects(retry(async () => ++reached, opts), (e) => e instanceof RecoveryError && e.decision.envelope.code === 'runtime.circuit.open');
  assert.equal(reached, 0);
  assert.equal(await retry(async () => ++reached, { ...opts, store: undefined }), 1);
});

test('a runtime with another decider keeps every other part', async () => {
  const { Runtime } = await import('../src/index.js');
  const { WITH } = await import('../src/runtime.js');
  const rt = await Runtime.create({ seed: 7, policyConfig: { max_attempts: 2 } });
  const decider = { decideJson: () => '{}' };
  const derived = rt[WITH](decider);
  assert.equal(derived.decider, decider);
  for (const k of Object.keys(rt)) if (k !== 'decider') assert.equal(derived[k], rt[k], k);
  const { MemoryStore } = await import('../src/index.js');
  const store = new MemoryStore();
  assert.equal(rt[WITH](decider, store).store, store);
});
