// agent-recovery/openai-agents against the real `@openai/agents` 0.20 runner (chat
// completions model over the real `openai` client) and the scripted provider
// (tests/frameworks/scripted_server.py) on 127.0.0.1.
//
// Expected values come from the scripts and from sources outside this package:
// Retry-After in seconds (RFC 9110 section 10.2.3); the reference policy's
// defaults (docs/envelope-and-decision.md, "Defaults": llm max attempts 3);
// @openai/agents-core src/runner/modelRetry.ts (the runner asks
// modelSettings.retry.policy after each failed attempt, from attempt 1, and
// waits `delayMs`); src/tool.ts (errorFunction's string is the tool output).
// Real delays are short: the tests set the llm base delay to 1 ms.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { VirtualClock } from '../src/index.js';
import { recoverTool, recoveringModel, retryPolicy, retrySettings, toolErrorFunction } from '../src/openai-agents.js';
import { BODIES, scriptedServer } from './scripted_server.mjs';

const FAST = { llm: { base_ms: 1, cap_ms: 5 } };

let server;
let client;
before(async () => {
  setTracingDisabled(true);
  server = await scriptedServer();
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-test', maxRetries: 0 });
});
after(() => server.close());

const agentWith = (retry, tools = []) =>
  new Agent({ name: 'payments', instructions: 'Pay.', model: new OpenAIChatCompletionsModel(client, 'gpt-a'), modelSettings: { retry }, tools });

test('a 429 with Retry-After: 1 is retried once, after the delay the policy decided (at least 1 000 ms)', async () => {
  await server.script({ 'model:gpt-a': [{ status: 429, headers: { 'retry-after': '1' }, body: BODIES.rateLimit }] });
  const decided = [];
  const inner = retryPolicy({ seed: 7, policyConfig: FAST });
  const policy = async (ctx) => {
    const d = await inner(ctx);
    decided.push({ attempt: ctx.attempt, ...d });
    return d;
  };
  const result = await run(agentWith({ maxRetries: 10, policy }), 'hi');
  assert.equal(result.finalOutput, 'done');
  assert.equal((await server.stats()).requests['model:gpt-a'], 2);
  assert.equal(decided.length, 1);
  assert.equal(decided[0].retry, true);
  assert.ok(decided[0].delayMs >= 1000, `decided ${decided[0].delayMs} ms, Retry-After said 1 s`);
});

test('a persistent 429: the provider sees exactly the policy attempts (3), not a product of retry layers', async () => {
  await server.script({ 'model:gpt-a': Array(20).fill({ status: 429, body: BODIES.rateLimit }) });
  const err = await run(agentWith(retrySettings({ seed: 7, policyConfig: FAST })), 'hi').catch((e) => e);
  assert.equal(err?.status, 429, `got ${err}`);
  assert.equal((await server.stats()).requests['model:gpt-a'], 3);
});

test('a quota error is not retried (the policy says fallback, and the runner has no fallback model)', async () => {
  await server.script({ 'model:gpt-a': [{ status: 429, body: BODIES.quota }] });
  const err = await run(agentWith(retrySettings({ seed: 7, policyConfig: FAST })), 'hi').catch((e) => e);
  assert.equal(err?.status, 429);
  assert.equal((await server.stats()).requests['model:gpt-a'], 1);
});

/** The payment tool: sends call.key, hands a failed response back to the door. */
const chargeTool = () =>
  tool({
    name: 'charge',
    description: 'Charge the card',
    parameters: z.object({ amount: z.number() }),
    execute: recoverTool(
      async (call, { amount }) => {
        const r = await fetch(`${server.url}/charge`, { method: 'POST', body: JSON.stringify({ amount }), headers: { 'Idempotency-Key': call.key } });
        return r.ok ? r.json() : r;
      },
      { tool: 'charge', sideEffect: true, clock: new VirtualClock(0), seed: 7 },
    ),
    errorFunction: toolErrorFunction(),
  });

/** The tool outputs of a run (an object as the tool returned it; errorFunction's JSON text parsed). */
const toolOutputs = (result) =>
  result.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => (typeof i.output === 'string' ? JSON.parse(i.output) : i.output));

test('a lost charge response (applied, then 503) is retried with the same key and charged once', async () => {
  await server.script({ charge: [{ status: 503, apply: true }] }, { amount: 10 });
  const result = await run(agentWith(retrySettings({ policyConfig: FAST }), [chargeTool()]), 'pay');
  assert.equal(result.finalOutput, 'done');
  const s = await server.stats();
  assert.equal(s.charges, 1);
  assert.equal(s.requests.charge, 2);
  assert.equal(new Set(s.log.filter((l) => l.route === 'charge').map((l) => l.key)).size, 1);
  assert.equal(toolOutputs(result)[0].status, 'succeeded');
});

test('a card decline (402) reaches the model as data, not retried, nothing charged', async () => {
  await server.script({ charge: [{ status: 402, body: BODIES.declined }] }, { amount: 10 });
  const result = await run(agentWith(retrySettings({ policyConfig: FAST }), [chargeTool()]), 'pay');
  const [out] = toolOutputs(result);
  assert.equal(out.error.retryable, false);
  assert.match(out.error.code, /declined/);
  const s = await server.stats();
  assert.equal(s.requests.charge, 1);
  assert.equal(s.charges, 0);
});

test('toolErrorFunction renders what a tool threw as model-tool-result', async () => {
  await server.script({});
  const broken = tool({
    name: 'lookup',
    description: 'Look up',
    parameters: z.object({}),
    execute: async () => {
      throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' });
    },
    errorFunction: toolErrorFunction(),
  });
  const result = await run(agentWith(retrySettings({ policyConfig: FAST }), [broken]), 'look');
  const [out] = toolOutputs(result);
  assert.equal(typeof out.error.hint, 'string');
  assert.equal(out.error.retryable, true); // a refused connection is transient
});

test('the adapters refuse unknown options, naming them', () => {
  assert.throws(() => retryPolicy({ maxRetries: 3 }), /no option "maxRetries"/);
  assert.throws(() => toolErrorFunction({ seed: 1 }), /no option "seed"/);
});

test('recoveringModel: a quota error moves to the fallback model, and a stream falls back before its first event', async () => {
  const model = recoveringModel(
    { 'gpt-a': new OpenAIChatCompletionsModel(client, 'gpt-a'), 'gpt-b': new OpenAIChatCompletionsModel(client, 'gpt-b') },
    { clock: new VirtualClock(0), seed: 7 },
  );
  const agent = new Agent({ name: 'payments', instructions: 'Pay.', model });
  await server.script({ 'model:gpt-a': Array(5).fill({ status: 429, body: BODIES.quota }) });
  assert.equal((await run(agent, 'hi')).finalOutput, 'done');
  assert.deepEqual((await server.stats()).requests, { 'model:gpt-a': 1, 'model:gpt-b': 1 });

  await server.script({ 'model:gpt-a': Array(5).fill({ status: 429, body: BODIES.quota }) });
  const streamed = await run(agent, 'hi', { stream: true });
  for await (const _ of streamed) void _;
  await streamed.completed;
  assert.equal(streamed.finalOutput, 'done');
  assert.deepEqual((await server.stats()).requests, { 'model:gpt-a': 1, 'model:gpt-b': 1 });
});

test('recoveringModel: under a persistent 429 a single model sees the policy attempts (3)', async () => {
  const model = recoveringModel({ 'gpt-a': new OpenAIChatCompletionsModel(client, 'gpt-a') }, { clock: new VirtualClock(0), seed: 7 });
  await server.script({ 'model:gpt-a': Array(20).fill({ status: 429, body: BODIES.rateLimit }) });
  const err = await run(new Agent({ name: 'a', instructions: 'x', model }), 'hi').catch((e) => e);
  assert.equal(err?.name, 'RecoveryError', `got ${err}`);
  assert.equal((await server.stats()).requests['model:gpt-a'], 3);
  assert.throws(() => recoveringModel(['gpt-a']), /takes the models by name/);
});
