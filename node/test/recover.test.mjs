// The small door (recover) against a local server on 127.0.0.1 that fails as
// OpenAI does, driven through the real OpenAI SDK (maxRetries 0: the door
// decides) and fetch. Error bodies follow OpenAI's error object
// (https://platform.openai.com/docs/guides/error-codes: `insufficient_quota` is
// a 429 whose error type and code are `insufficient_quota`). The runtime sleeps
// on a VirtualClock: nothing waits.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test } from 'node:test';
import OpenAI from 'openai';
import { Policy, PolicyError, RecoveryError, VirtualClock, recover, retry } from '../src/index.js';

const T0 = 1_767_225_600_000;
const QUOTA = { error: { message: 'You exceeded your current quota.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } };
const RATE = { error: { message: 'Rate limit reached.', type: 'requests', param: null, code: 'rate_limit_exceeded' } };
const BAD = { error: { message: "Invalid value for 'temperature'.", type: 'invalid_request_error', param: 'temperature', code: null } };

/** A provider: per model, answers in order, the last one repeating; a payment endpoint counting charges. */
async function provider() {
  const state = { script: {}, hits: [], chargeCalls: 0, charges: new Map() };
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = raw ? JSON.parse(raw) : {};
    const key = req.headers['idempotency-key'];
    const send = (status, payload, headers = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(payload));
    };
    if (req.url === '/v1/chat/completions') {
      state.hits.push({ model: body.model, key });
      const queue = state.script[body.model] ?? ['ok'];
      const a = queue.length > 1 ? queue.shift() : queue[0];
      if (a === 'quota') return send(429, QUOTA);
      if (a === 'rate') return send(429, RATE, { 'retry-after': '2' });
      if (a === '503') return send(503, { error: { message: 'overloaded', type: 'server_error' } });
      if (a === '400') return send(400, BAD);
      return send(200, {
        id: 'chatcmpl-1', object: 'chat.completion', created: 0, model: body.model,
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: `hi from ${body.model}` } }],
      });
    }
    if (req.url === '/charge') {
      // Applies the charge, then loses the first answer (a 503).
      state.chargeCalls += 1;
      const k = key ?? `anonymous-${state.chargeCalls}`;
      state.charges.set(k, 1);
      if (state.chargeCalls === 1) return send(503, { error: 'upstream timeout' });
      return send(200, { id: 'ch_1' });
    }
    send(404, { error: 'no such path' });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, state, close: () => new Promise((resolve) => server.close(resolve)) };
}

function chatDoor(url, clock, options = {}) {
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  return recover(
    async (call, prompt) => {
      const r = await openai.chat.completions.create(
        { model: call.target, messages: [{ role: 'user', content: prompt }] },
        { headers: { 'Idempotency-Key': call.key }, signal: call.signal },
      );
      return r.choices[0].message.content;
    },
    { call: 'llm', tool: 'chat', target: 'gpt-4o', clock, seed: 7, ...options },
  );
}

test('a quota error on the first model falls back to the next, with one key', async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['quota'] };
  const chat = chatDoor(p.url, new VirtualClock(T0), { fallbacks: ['gpt-4o-mini'] });
  assert.equal(await chat('hello'), 'hi from gpt-4o-mini');
  assert.deepEqual(p.state.hits.map((h) => h.model), ['gpt-4o', 'gpt-4o-mini']);
  assert.equal(new Set(p.state.hits.map((h) => h.key)).size, 1);
});

test('a 429 with retry-after is retried after at least that long, with the same key', async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['rate', 'ok'] };
  const clock = new VirtualClock(T0);
  const chat = chatDoor(p.url, clock);
  assert.equal(await chat('hello'), 'hi from gpt-4o');
  assert.equal(p.state.hits.length, 2);
  assert.equal(p.state.hits[0].key, p.state.hits[1].key);
  assert.ok(clock.nowMs() - T0 >= 2000, `slept ${clock.nowMs() - T0} ms, the server asked for 2 s`);
});

test('a dead model is skipped while its breaker is open, then probed', async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['503'] };
  const clock = new VirtualClock(T0);
  const chat = chatDoor(p.url, clock, { fallbacks: ['gpt-4o-mini'] });
  await assert.rejects(chat('turn 1'), RecoveryError); // the reference: 3 LLM attempts, then dead-letter
  assert.deepEqual(p.state.hits.map((h) => h.model), ['gpt-4o', 'gpt-4o', 'gpt-4o']);
  assert.equal(await chat('turn 2'), 'hi from gpt-4o-mini');
  assert.equal(await chat('turn 3'), 'hi from gpt-4o-mini');
  assert.deepEqual(p.state.hits.slice(3).map((h) => h.model), ['gpt-4o-mini', 'gpt-4o-mini']);
  p.state.script = { 'gpt-4o': ['ok'] };
  clock.advance(30_000); // the breaker's open time: one probe goes to the first model
  assert.equal(await chat('turn 4'), 'hi from gpt-4o');
});

test("errors: 'model' resolves with the compact model rendering", async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['400'] };
  const chat = chatDoor(p.url, new VirtualClock(T0), { errors: 'model' });
  const out = await chat('hello');
  assert.deepEqual(Object.keys(out), ['error']);
  assert.deepEqual(Object.keys(out.error).sort(), ['code', 'field', 'hint', 'message', 'retryable']);
  assert.equal(out.error.field, 'temperature'); // OpenAI's `param`
  assert.equal(out.error.retryable, false);
  assert.equal(p.state.hits.length, 1);
});

test('a payment sent with call.key is charged once', async (t) => {
  const p = await provider();
  t.after(p.close);
  const charge = recover(
    async (call, amount) => {
      const r = await fetch(`${p.url}/charge`, { method: 'POST', body: JSON.stringify({ amount }), headers: { 'Idempotency-Key': call.key } });
      if (!r.ok) throw Object.assign(new Error(`HTTP ${r.status}`), { status: r.status });
      return r.json();
    },
    { call: 'tool', sideEffect: true, clock: new VirtualClock(T0), seed: 7 },
  );
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  assert.deepEqual(await charge(10), { id: 'ch_1' });
  assert.equal(p.state.chargeCalls, 2);
  assert.equal(p.state.charges.size, 1);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(warnings.filter((w) => w.name === 'KeyNotUsedWarning').length, 0);
});

test('a payment that ignores call.key is charged twice, and the door warns once', async (t) => {
  const p = await provider();
  t.after(p.close);
  const charge = recover(
    async (_call, amount) => {
      const r = await fetch(`${p.url}/charge`, { method: 'POST', body: JSON.stringify({ amount }) });
      if (!r.ok) throw Object.assign(new Error(`HTTP ${r.status}`), { status: r.status });
      return r.json();
    },
    { call: 'tool', sideEffect: true, clock: new VirtualClock(T0), seed: 7 },
  );
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  assert.deepEqual(await charge(10), { id: 'ch_1' });
  assert.equal(p.state.charges.size, 2); // one charge of 10, applied twice: why the warning exists
  assert.deepEqual(await charge(10), { id: 'ch_1' }); // a second call: no second warning
  await new Promise((resolve) => setImmediate(resolve));
  const ours = warnings.filter((w) => w.name === 'KeyNotUsedWarning');
  assert.equal(ours.length, 1);
  assert.equal(ours[0].code, 'AGENT_RECOVERY_KEY_NOT_USED');
});

test('the op gets key, target and attempt; a new run id per call', async () => {
  const seen = [];
  const op = recover(
    async (call, x) => {
      seen.push({ key: call.key, target: call.target, attempt: call.attempt });
      if (call.attempt === 1) throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
      return x * 2;
    },
    { clock: new VirtualClock(T0), seed: 7, tool: 'double' },
  );
  assert.equal(await op(21), 42);
  assert.equal(await op(21), 42);
  assert.deepEqual(seen.map((s) => s.attempt), [1, 2, 1, 2]);
  assert.equal(seen[0].key, seen[1].key);
  assert.notEqual(seen[0].key, seen[2].key);
  assert.equal(seen[0].target, 'double');
  assert.match(seen[0].key, /^[0-9a-f]{64}$/);
});

test('unknown options are refused; a bad errors mode too', () => {
  assert.throws(() => recover(async () => 1, { fallback: ['b'] }), (e) => e instanceof PolicyError && /no option "fallback"/.test(e.message));
  assert.throws(() => recover(async () => 1, { errors: 'data' }), PolicyError);
  assert.throws(() => recover('nope'), PolicyError);
});

test('without fallbacks, a quota error rejects with the envelope and the SDK error as cause', async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['quota'] };
  const chat = chatDoor(p.url, new VirtualClock(T0), { policy: await Policy.load() });
  const e = await chat('hello').catch((err) => err);
  assert.ok(e instanceof RecoveryError);
  assert.equal(e.code, 'llm.quota.exhausted');
  // What retry() answered in the user trial: escalate after attempt 1 ... (no_fallback).
  assert.deepEqual([e.action, e.attempts, e.decision.reason], ['escalate', 1, 'no_fallback']);
  assert.equal(e.decision.policy.name, (await Policy.load()).describe().name);
  assert.ok(e.cause instanceof OpenAI.RateLimitError);
});

test('concurrent calls of one door each get their own decision', async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['quota'], o3: ['400'] };
  const openai = new OpenAI({ baseURL: `${p.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  const chat = recover((_call, model) => openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }), {
    call: 'llm',
    clock: new VirtualClock(T0),
  });
  const [quota, bad, ok] = await Promise.allSettled([chat('gpt-4o'), chat('o3'), chat('gpt-4o-mini')]);
  assert.equal(quota.reason.decision.envelope.code, 'llm.quota.exhausted');
  assert.equal(bad.reason.action, 'fail');
  assert.equal(bad.reason.envelope.field, 'temperature');
  assert.equal(ok.value.choices[0].message.content, 'hi from gpt-4o-mini');
});

test('retry() refuses a context member the policy does not read, and fallback_available: it takes fallbacks', async () => {
  const policy = await Policy.load();
  await assert.rejects(
    retry(async () => 1, { policy, context: { fallbackAvailable: true } }),
    (e) => e instanceof PolicyError && /fallbackAvailable/.test(e.message) && /fallbacks/.test(e.message),
  );
  // The loop sets fallback_available from `fallbacks`: a hand-set one is refused, not passed to the policy.
  await assert.rejects(
    retry(async () => 1, { policy, call: 'llm', context: { fallback_available: true } }),
    (e) => e instanceof PolicyError && e.kind === 'invalid_context' && /fallback_available/.test(e.message) && /fallbacks: \[/.test(e.message),
  );
});

/** The same chat as chatDoor, through retry(): its operation gets `target` and `idempotencyKey`. */
function chatRetry(url, clock, options = {}) {
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  return async (prompt, policy) =>
    retry(
      async ({ target, idempotencyKey, signal }) => {
        const r = await openai.chat.completions.create(
          { model: target, messages: [{ role: 'user', content: prompt }] },
          { headers: { 'Idempotency-Key': idempotencyKey }, signal },
        );
        return r.choices[0].message.content;
      },
      {
        policy, call: 'llm', runId: 'run-9', stepId: 'chat', tool: 'chat', args: { prompt }, target: 'gpt-4o', seed: 7,
        now: () => clock.nowMs(), sleep: async (ms) => clock.advance(ms), ...options,
      },
    );
}

test('a quota error through retry() falls back to the next model, with one key', async (t) => {
  const p = await provider();
  t.after(p.close);
  p.state.script = { 'gpt-4o': ['quota'] };
  const decisions = [];
  const chat = chatRetry(p.url, new VirtualClock(T0), { fallbacks: ['gpt-4o-mini'], onDecision: (d) => decisions.push(d) });
  assert.equal(await chat('hello', await Policy.load()), 'hi from gpt-4o-mini');
  assert.deepEqual(p.state.hits.map((h) => h.model), ['gpt-4o', 'gpt-4o-mini']);
  assert.equal(new Set(p.state.hits.map((h) => h.key)).size, 1);
  assert.deepEqual(decisions.map((d) => [d.decision.action, d.decision.envelope.code]), [['fallback', 'llm.quota.exhausted']]);
  assert.ok(decisions[0].error instanceof OpenAI.RateLimitError);
});

test('retry() and recover() run the same loop: attempts, keys, decisions, events and sleeps', async (t) => {
  const policy = await Policy.load();
  const script = () => ({ 'gpt-4o': ['rate', 'quota'], 'gpt-4o-mini': ['ok'] });
  const runs = [];
  for (const through of ['retry', 'recover']) {
    const p = await provider();
    t.after(p.close);
    p.state.script = script();
    const clock = new VirtualClock(T0);
    const decisions = [];
    const events = [];
    const options = { fallbacks: ['gpt-4o-mini'], onDecision: (d) => decisions.push(d.decision), onEvent: (e) => events.push(e) };
    const out =
      through === 'retry'
        ? await chatRetry(p.url, clock, options)('hello', policy)
        : await chatDoor(p.url, clock, { policy, runId: 'run-9', stepId: 'chat', args: { prompt: 'hello' }, ...options })('hello');
    runs.push({ out, hits: p.state.hits, decisions, events, slept: clock.nowMs() - T0 });
  }
  const [viaRetry, viaDoor] = runs;
  assert.equal(viaRetry.out, 'hi from gpt-4o-mini');
  assert.deepEqual(viaRetry.hits, viaDoor.hits);
  assert.deepEqual(viaRetry.hits.map((h) => h.model), ['gpt-4o', 'gpt-4o', 'gpt-4o-mini']);
  assert.deepEqual(new Set(viaRetry.hits.map((h) => h.key)), new Set([policy.key({ runId: 'run-9', stepId: 'chat', tool: 'chat', args: { prompt: 'hello' } })]));
  assert.deepEqual(viaRetry.decisions, viaDoor.decisions);
  assert.deepEqual(viaRetry.decisions.map((d) => d.action), ['retry', 'fallback']);
  assert.deepEqual(viaRetry.events, viaDoor.events);
  assert.ok(viaRetry.slept >= 2000, `the server's retry-after: 2 (seconds), slept ${viaRetry.slept}`);
  assert.equal(viaRetry.slept, viaDoor.slept);
  assert.equal(viaRetry.slept, viaRetry.decisions[0].delay_ms);
});
