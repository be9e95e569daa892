#!/usr/bin/env node
// The frameworks table, Node rows: the Vercel AI SDK (`ai` 7) and OpenAI Agents
// JS (`@openai/agents`), each alone (its defaults) and with the adapter
// (agent-recovery/ai-sdk, agent-recovery/openai-agents), on the five scripted
// failures and the persistent 429 of the Python rows (tests/frameworks/scenarios.json, served by
// tests/frameworks/scripted_server.py, spawned on 127.0.0.1): the same task
// (the model calls `charge(5)`, then answers), the same scripts, the same
// outcomes, so each row compares with the Python frameworks' rows.
//
//   node bench/frameworks-table.mjs            (needs gen/: `npm run build`)
//
// With the adapter: the AI SDK's model is wrapped by recoveryMiddleware and the
// Agents JS model is recoveringModel (both with the fallback model), tools use
// recoverTool (and toolErrorFunction), framework retries off. Two more rows
// under the persistent 429: the adapter with the framework's retries left on
// (as the Python rows), and, for Agents JS, its runner's own hook.
//
// One JSON row per line: {"framework", "scenario", "mode": "without"|"with",
// "model_requests", "tool_requests", "side_effects", "outcome"}, as
// scripts/frameworks_table.py prints them: counts are what the server saw,
// side_effects the charges applied; outcome "completed, charged", "completed,
// model told the charge failed" (the last charge failed), "completed" (no
// charge) or "raised <error name>". Delays are real (system clock): a run
// takes about a minute.

import { readFileSync } from 'node:fs';
import { createOpenAI } from '@ai-sdk/openai';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { generateText, stepCountIs, tool as aiTool, wrapLanguageModel } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';
import { recoverTool as aiRecoverTool, recoveryMiddleware } from '../src/ai-sdk.js';
import { recoverTool as agentsRecoverTool, recoveringModel, retrySettings, toolErrorFunction } from '../src/openai-agents.js';
import { scriptedServer } from '../test/scripted_server.mjs';

const SPEC = JSON.parse(readFileSync(new URL('../../tests/frameworks/scenarios.json', import.meta.url), 'utf8'));
const { primary: PRIMARY, fallback: FALLBACK } = SPEC;
/** A queue with each `{times: n, ...}` answer as n copies of it. */
const expand = (queue) => queue.flatMap(({ times = 1, ...answer }) => Array(times).fill(answer));
const persistent429 = SPEC.scenarios.persistent_429.queues;

/** The scenarios: the script and the adapter's configuration. */
export const SCENARIOS = [
  ...Object.entries(SPEC.scenarios).map(([name, { queues }]) => ({ name, queues })),
  // The adapter with the framework's own retries left at their defaults: the layers multiply only where the framework's retry reaches the provider.
  { name: 'persistent_429_framework_retries_on', queues: persistent429, with: 'only', frameworkRetries: true },
  // OpenAI Agents JS's own hook (modelSettings.retry = retrySettings()) instead of recoveringModel.
  { name: 'persistent_429_retry_hook', queues: persistent429, with: 'only', retryHook: true, only: 'openai-agents-js' },
].map((sc) => ({ ...sc, queues: Object.fromEntries(Object.entries(sc.queues).map(([route, q]) => [route, expand(q)])) }));

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

async function aiSdk(server, scenario, withAdapter) {
  const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-test' });
  const model = withAdapter
    ? wrapLanguageModel({ model: openai.chat(PRIMARY), middleware: recoveryMiddleware({ fallbacks: [openai.chat(FALLBACK)] }) })
    : openai.chat(PRIMARY);
  const execute = withAdapter ? aiRecoverTool(keyedCharge(server), { tool: 'charge', sideEffect: true }) : plainCharge(server);
  await generateText({
    model,
    prompt: 'pay 5',
    tools: { charge: aiTool({ description: "Charge the customer's card.", inputSchema: z.object({ amount: z.number() }), execute }) },
    stopWhen: stepCountIs(3),
    ...(withAdapter && !scenario.frameworkRetries ? { maxRetries: 0 } : {}),
  });
}

async function agentsJs(server, scenario, withAdapter) {
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sk-test', ...(withAdapter && !scenario.frameworkRetries ? { maxRetries: 0 } : {}) });
  const charge = agentsTool({
    name: 'charge',
    description: "Charge the customer's card.",
    parameters: z.object({ amount: z.number() }),
    execute: withAdapter ? agentsRecoverTool(keyedCharge(server), { tool: 'charge', sideEffect: true }) : plainCharge(server),
    ...(withAdapter ? { errorFunction: toolErrorFunction() } : {}),
  });
  const primary = new OpenAIChatCompletionsModel(client, PRIMARY);
  let model = primary;
  if (withAdapter && !scenario.retryHook) model = recoveringModel({ [PRIMARY]: primary, [FALLBACK]: new OpenAIChatCompletionsModel(client, FALLBACK) });
  const agent = new Agent({
    name: 'payments',
    instructions: 'Pay.',
    model,
    ...(scenario.retryHook ? { modelSettings: { retry: retrySettings() } } : {}),
    tools: [charge],
  });
  await run(agent, 'pay 5');
}

/** How the run ended, as scripts/frameworks_table.py words it: what it raised, else what the last charge did. */
function outcomeOf(raised, stats) {
  if (raised !== undefined) {
    const code = typeof raised?.code === 'string' && raised.code.includes('.') ? ` (${raised.code})` : '';
    return `raised ${raised?.constructor?.name ?? typeof raised}${code}`;
  }
  const charges = stats.log.filter((l) => l.route === 'charge');
  if (charges.length > 0 && charges.at(-1).status >= 400) return 'completed, model told the charge failed';
  return charges.length > 0 ? 'completed, charged' : 'completed';
}

const FRAMEWORKS = [
  ['ai-sdk', aiSdk],
  ['openai-agents-js', agentsJs],
];

/** Run every scenario (or only `scenarios`); calls `emit(row)` for each row. */
export async function table(emit, { scenarios } = {}) {
  setTracingDisabled(true);
  const server = await scriptedServer();
  try {
    for (const [framework, drive] of FRAMEWORKS) {
      for (const scenario of SCENARIOS.filter((sc) => (sc.only === undefined || sc.only === framework) && (scenarios === undefined || scenarios.includes(sc.name)))) {
        for (const mode of scenario.with === 'only' ? ['with'] : ['without', 'with']) {
          await server.script(scenario.queues, SPEC.tool_args);
          let raised;
          try {
            await drive(server, scenario, mode === 'with');
          } catch (e) {
            raised = e;
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
            outcome: outcomeOf(raised, s),
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
