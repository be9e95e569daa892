#!/usr/bin/env node
// The frameworks table: the Vercel AI SDK (`ai` 7) and OpenAI Agents JS
// (`@openai/agents`), each alone (its defaults) and with the adapter
// (agent-recovery/ai-sdk, agent-recovery/openai-agents), on scripted failures
// from tests/frameworks/scripted_server.py (spawned on 127.0.0.1).
//
//   node bench/frameworks-table.mjs            (needs gen/: `npm run build`)
//
// With the adapter: the AI SDK's model is wrapped by recoveryMiddleware and the
// Agents JS model is recoveringModel (both with the fallback model gpt-b), tools
// use recoverTool (and toolErrorFunction), framework retries off; the last rows
// leave the framework's retries on, and try the Agents JS runner's own hook.
//
// One JSON row per line: {"framework", "scenario", "mode": "without"|"with",
// "model_requests", "tool_requests", "side_effects", "outcome"}. Counts are
// what the server saw; side_effects is charges applied. outcome: "ok" (the
// model answered, every tool call succeeded), "tool_error_to_model" (the model
// answered after a tool failure was handed to it), "error" (the run threw).
// Delays are real (system clock), so a run takes about a minute.

import { createOpenAI } from '@ai-sdk/openai';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { generateText, stepCountIs, tool as aiTool, wrapLanguageModel } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { recoverTool as aiRecoverTool, recoveryMiddleware } from '../src/ai-sdk.js';
import { recoverTool as agentsRecoverTool, recoveringModel, retrySettings, toolErrorFunction } from '../src/openai-agents.js';
import { BODIES, scriptedServer } from '../test/scripted_server.mjs';

const times = (n, answer) => Array(n).fill(answer);

/** The scenarios: the script, whether the model is offered the payment tool, and the adapter's configuration. */
export const SCENARIOS = [
  { name: 'rate_limit_retry_after', queues: { 'model:gpt-a': [{ status: 429, headers: { 'retry-after': '2' }, body: BODIES.rateLimit }] } },
  { name: 'overloaded_503', queues: { 'model:gpt-a': [{ status: 503, body: BODIES.overloaded }] } },
  { name: 'lost_charge_503', tools: true, queues: { charge: [{ status: 503, apply: true }] } },
  { name: 'quota_with_fallback', queues: { 'model:gpt-a': times(20, { status: 429, body: BODIES.quota }) } },
  { name: 'card_declined_402', tools: true, queues: { charge: times(5, { status: 402, body: BODIES.declined }) } },
  { name: 'persistent_429', queues: { 'model:gpt-a': times(30, { status: 429, body: BODIES.rateLimit }) } },
  // The adapter with the framework's own retries left at their defaults: the layers multiply only where the framework's retry reaches the provider.
  { name: 'persistent_429_framework_retries_on', queues: { 'model:gpt-a': times(30, { status: 429, body: BODIES.rateLimit }) }, with: 'only', frameworkRetries: true },
  // OpenAI Agents JS's own hook (modelSettings.retry = retrySettings()) instead of recoveringModel.
  { name: 'persistent_429_retry_hook', queues: { 'model:gpt-a': times(30, { status: 429, body: BODIES.rateLimit }) }, with: 'only', retryHook: true, only: 'openai-agents-js' },
];

const chargeBody = (amount) => ({ method: 'POST', body: JSON.stringify({ amount }) });

/** A charge without the adapter: no key, a failure thrown as the frameworks expect. */
const plainCharge = (server) => async ({ amount }) => {
  const r = await fetch(`${server.url}/charge`, chargeBody(amount));
  if (!r.ok) throw new Error(`charge failed: HTTP ${r.status}`);
  return r.json();
};

/** A charge through the door: the key sent, a failed Response handed back for the policy to judge. */
const keyedCharge = (server) => async (call, { amount }) => {
  const r = await fetch(`${server.url}/charge`, { ...chargeBody(amount), headers: { 'Idempotency-Key': call.key } });
  return r.ok ? r.json() : r;
};

const isToolError = (output) => {
  if (typeof output === 'string') {
    try {
      return isToolError(JSON.parse(output));
    } catch {
      return /error/i.test(output);
    }
  }
  return output !== null && typeof output === 'object' && output.error !== undefined;
};

async function aiSdk(server, scenario, withAdapter) {
  const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-test' });
  const model = withAdapter
    ? wrapLanguageModel({ model: openai.chat('gpt-a'), middleware: recoveryMiddleware({ fallbacks: [openai.chat('gpt-b')] }) })
    : openai.chat('gpt-a');
  const execute = withAdapter ? aiRecoverTool(keyedCharge(server), { tool: 'charge', sideEffect: true }) : plainCharge(server);
  const tools = scenario.tools ? { charge: aiTool({ description: 'Charge the card', inputSchema: z.object({ amount: z.number() }), execute }) } : undefined;
  const r = await generateText({
    model,
    prompt: 'Charge 10 EUR',
    tools,
    stopWhen: stepCountIs(3),
    ...(withAdapter && !scenario.frameworkRetries ? { maxRetries: 0 } : {}),
  });
  const failed = r.steps.some((s) => s.content.some((p) => p.type === 'tool-error' || (p.type === 'tool-result' && isToolError(p.output))));
  return failed ? 'tool_error_to_model' : 'ok';
}

async function agentsJs(server, scenario, withAdapter) {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-test', ...(withAdapter && !scenario.frameworkRetries ? { maxRetries: 0 } : {}) });
  const charge = agentsTool({
    name: 'charge',
    description: 'Charge the card',
    parameters: z.object({ amount: z.number() }),
    execute: withAdapter ? agentsRecoverTool(keyedCharge(server), { tool: 'charge', sideEffect: true }) : plainCharge(server),
    ...(withAdapter ? { errorFunction: toolErrorFunction() } : {}),
  });
  const primary = new OpenAIChatCompletionsModel(client, 'gpt-a');
  let model = primary;
  if (withAdapter && !scenario.retryHook) model = recoveringModel({ 'gpt-a': primary, 'gpt-b': new OpenAIChatCompletionsModel(client, 'gpt-b') });
  const agent = new Agent({
    name: 'payments',
    instructions: 'Pay.',
    model,
    ...(scenario.retryHook ? { modelSettings: { retry: retrySettings() } } : {}),
    tools: scenario.tools ? [charge] : [],
  });
  const result = await run(agent, 'Charge 10 EUR');
  const outputs = result.newItems.filter((i) => i.type === 'tool_call_output_item').map((i) => i.output);
  return outputs.some(isToolError) ? 'tool_error_to_model' : 'ok';
}

const FRAMEWORKS = [
  ['ai-sdk', aiSdk],
  ['openai-agents-js', agentsJs],
];

/** Run every scenario; calls `emit(row)` for each row. */
export async function table(emit) {
  setTracingDisabled(true);
  const server = await scriptedServer();
  try {
    for (const [framework, drive] of FRAMEWORKS) {
      for (const scenario of SCENARIOS.filter((sc) => sc.only === undefined || sc.only === framework)) {
        for (const mode of scenario.with === 'only' ? ['with'] : ['without', 'with']) {
          await server.script(scenario.queues, { amount: 10 });
          let outcome;
          try {
            outcome = await drive(server, scenario, mode === 'with');
          } catch {
            outcome = 'error';
          }
          const s = await server.stats();
          const modelRequests = Object.entries(s.requests).filter(([k]) => k.startsWith('model:')).reduce((n, [, v]) => n + v, 0);
          emit({
            framework,
            scenario: scenario.name,
            mode,
            model_requests: modelRequests,
            tool_requests: s.requests.charge ?? 0,
            side_effects: s.charges,
            outcome,
          });
        }
      }
    }
  } finally {
    await server.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await table((row) => process.stdout.write(`${JSON.stringify(row)}\n`));
}
