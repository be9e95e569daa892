// agent-recovery/ai-sdk against the real `ai` 7 and `@ai-sdk/openai` packages and
// the scripted provider (tests/frameworks/scripted_server.py) on 127.0.0.1.
//
// Expected values come from the scripts and from sources outside this package:
// Retry-After in seconds (RFC 9110 section 10.2.3); the reference policy's
// defaults table (docs/envelope-and-decision.md, "Defaults": llm max attempts 3);
// the AG-UI RUN_ERROR event as `@ag-ui/core` RunErrorEventSchema validates it;
// the stream part types of @ai-sdk/provider (LanguageModelV4StreamPart).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import { RunErrorEventSchema } from '@ag-ui/core/schemas';
import { generateText, stepCountIs, streamText, tool, wrapLanguageModel } from 'ai';
import { z } from 'zod';
import { RecoveryError, VirtualClock } from '../src/index.js';
import { recoverTool, recoveryMiddleware } from '../src/ai-sdk.js';
import { BODIES, scriptedServer } from './scripted_server.mjs';

/** A virtual clock that keeps every sleep it was asked for. */
class RecordingClock extends VirtualClock {
  sleeps = [];
  async sleepMs(ms) {
    this.sleeps.push(ms);
    return super.sleepMs(ms);
  }
}

let server;
let openai;
before(async () => {
  server = await scriptedServer();
  openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-test' });
});
after(() => server.close());

const wrapped = (id, options) => wrapLanguageModel({ model: openai.chat(id), middleware: recoveryMiddleware(options) });

test('a 429 with Retry-After: 2 is retried once, after at least 2 000 ms', async () => {
  await server.script({ 'model:gpt-a': [{ status: 429, headers: { 'retry-after': '2' }, body: BODIES.rateLimit }] });
  const clock = new RecordingClock(0);
  const { text } = await generateText({ model: wrapped('gpt-a', { clock, seed: 7 }), prompt: 'hi', maxRetries: 0 });
  assert.equal(text, 'done');
  assert.equal((await server.stats()).requests['model:gpt-a'], 2);
  assert.equal(clock.sleeps.length, 1);
  assert.ok(clock.sleeps[0] >= 2000, `slept ${clock.sleeps[0]} ms, Retry-After said 2 s`);
});

test('a persistent 429: the provider sees exactly the policy attempts, even with the SDK retries left on', async () => {
  const rateLimited = { status: 429, body: BODIES.rateLimit };
  await server.script({ 'model:gpt-a': Array(20).fill(rateLimited) });
  // maxRetries left at the AI SDK's default (2): a RecoveryError is not an APICallError, so it is not retried.
  const err = await generateText({ model: wrapped('gpt-a', { clock: new VirtualClock(0), seed: 7 }), prompt: 'hi' }).catch((e) => e);
  assert.ok(err instanceof RecoveryError, `got ${err}`);
  assert.equal(err.decision.max_attempts, 3);
  assert.equal((await server.stats()).requests['model:gpt-a'], 3);
});

test('a quota error moves to the fallback model; the first model is not retried', async () => {
  await server.script({ 'model:gpt-a': [{ status: 429, body: BODIES.quota }] });
  const model = wrapped('gpt-a', { fallbacks: [openai.chat('gpt-b')], clock: new VirtualClock(0), seed: 7 });
  const { text } = await generateText({ model, prompt: 'hi', maxRetries: 0 });
  assert.equal(text, 'done');
  const { requests } = await server.stats();
  assert.deepEqual(requests, { 'model:gpt-a': 1, 'model:gpt-b': 1 });
});

test('while the first model\'s breaker is open, later calls go straight to the fallback', async () => {
  const down = { status: 503, body: BODIES.overloaded };
  await server.script({ 'model:gpt-a': Array(20).fill(down) });
  const model = wrapped('gpt-a', { fallbacks: [openai.chat('gpt-b')], clock: new VirtualClock(0), seed: 7, breaker: { failureThreshold: 2, openMs: 60_000 } });
  const first = await generateText({ model, prompt: 'hi', maxRetries: 0 }).catch((e) => e);
  const afterFirst = (await server.stats()).requests;
  const second = await generateText({ model, prompt: 'hi', maxRetries: 0 });
  const afterSecond = (await server.stats()).requests;
  assert.equal(second.text, 'done');
  assert.equal(afterSecond['model:gpt-a'], afterFirst['model:gpt-a'], `gpt-a was called again while open (first call: ${first?.text ?? first})`);
  assert.equal(afterSecond['model:gpt-b'], (afterFirst['model:gpt-b'] ?? 0) + 1);
});

test('streamErrors: "part" ends a stream recovery gave up on with an AG-UI RUN_ERROR error part', async () => {
  await server.script({ 'model:gpt-a': [{ status: 429, body: BODIES.quota }] });
  const errors = [];
  const result = streamText({
    model: wrapped('gpt-a', { clock: new VirtualClock(0), seed: 7, streamErrors: 'part' }),
    prompt: 'hi',
    maxRetries: 0,
    onError: ({ error }) => errors.push(error),
  });
  const parts = [];
  for await (const part of result.fullStream) parts.push(part);
  const errorParts = parts.filter((p) => p.type === 'error');
  assert.equal(errorParts.length, 1, JSON.stringify(parts));
  // The AI SDK wraps an error part's plain object in a StreamProviderError (ai src/prompt/normalize-stream-provider-error.ts): `data` is the event.
  const err = errorParts[0].error;
  const event = err.data;
  assert.deepEqual(RunErrorEventSchema.parse(event), event);
  assert.equal(event.type, 'RUN_ERROR');
  assert.match(event.code, /quota/);
  assert.equal(err.code, event.code);
  assert.equal(err.message, BODIES.quota.error.message);
  assert.equal(event.metadata.error.retryable, false);
  assert.equal(event.metadata.error.category, 'quota');
  assert.deepEqual(errors, [err]);
  const finish = parts.find((p) => p.type === 'finish');
  assert.equal(finish.finishReason, 'error');
  assert.equal((await server.stats()).requests['model:gpt-a'], 1);
});

test('streamErrors: "throw" (the default) leaves the RecoveryError to the AI SDK', async () => {
  await server.script({ 'model:gpt-a': [{ status: 429, body: BODIES.quota }] });
  const errors = [];
  const result = streamText({ model: wrapped('gpt-a', { clock: new VirtualClock(0) }), prompt: 'hi', maxRetries: 0, onError: ({ error }) => errors.push(error) });
  for await (const _ of result.fullStream) void _;
  assert.equal(errors.length, 1);
  assert.ok(errors[0] instanceof RecoveryError);
});

/** The payment tool: sends call.key, hands a failed response back to the door. */
function chargeTool(clock) {
  return tool({
    description: 'Charge the card',
    inputSchema: z.object({ amount: z.number() }),
    execute: recoverTool(
      async (call, { amount }) => {
        const r = await fetch(`${server.url}/charge`, { method: 'POST', body: JSON.stringify({ amount }), headers: { 'Idempotency-Key': call.key } });
        return r.ok ? r.json() : r;
      },
      { tool: 'charge', sideEffect: true, clock, seed: 7 },
    ),
  });
}

test('a lost charge response (applied, then 503) is retried with the same key and charged once', async () => {
  await server.script({ charge: [{ status: 503, apply: true }] }, { amount: 10 });
  const model = wrapped('gpt-a', { clock: new VirtualClock(0) });
  const r = await generateText({ model, prompt: 'pay', tools: { charge: chargeTool(new VirtualClock(0)) }, stopWhen: stepCountIs(3), maxRetries: 0 });
  assert.equal(r.text, 'done');
  const s = await server.stats();
  assert.equal(s.charges, 1);
  assert.equal(s.requests.charge, 2);
  const keys = s.log.filter((l) => l.route === 'charge').map((l) => l.key);
  assert.equal(new Set(keys).size, 1);
  assert.match(keys[0], /^[0-9a-f]{64}$/);
  const output = r.steps[0].toolResults[0].output;
  assert.equal(output.status, 'succeeded');
});

test('a card decline (402 card_declined) reaches the model as data, not retried, nothing charged', async () => {
  await server.script({ charge: [{ status: 402, body: BODIES.declined }] }, { amount: 10 });
  const model = wrapped('gpt-a', { clock: new VirtualClock(0) });
  const r = await generateText({ model, prompt: 'pay', tools: { charge: chargeTool(new VirtualClock(0)) }, stopWhen: stepCountIs(3), maxRetries: 0 });
  const output = r.steps[0].toolResults[0].output;
  assert.equal(typeof output.error.hint, 'string');
  assert.equal(output.error.retryable, false);
  assert.match(output.error.code, /declined/);
  const s = await server.stats();
  assert.equal(s.requests.charge, 1);
  assert.equal(s.charges, 0);
  assert.equal(s.requests['model:gpt-a'], 2); // the model read the error and answered
});

test('recoveryMiddleware refuses unknown options and non-model fallbacks, naming them', () => {
  assert.throws(() => recoveryMiddleware({ fallback: [] }), /no option "fallback"/);
  assert.throws(() => recoveryMiddleware({ fallbacks: ['gpt-b'] }), /fallbacks is an array of language models/);
  assert.throws(() => recoveryMiddleware({ streamErrors: 'drop' }), /streamErrors is 'throw' or 'part'/);
});
