// Type test (`npm run typecheck`, never run): the OpenAI Agents JS adapter as a user
// writes it, through the package's subpath export. A `@ts-expect-error` line is a
// misuse the declarations must refuse.

import OpenAI from 'openai';
import { Agent, OpenAIChatCompletionsModel, tool } from '@openai/agents';
import { z } from 'zod';
import { MAX_RETRIES, recoverTool, recoveringModel, retryPolicy, retrySettings, toolErrorFunction } from 'agent-recovery/openai-agents';

const client = new OpenAI({ apiKey: 'sk-test', maxRetries: 0 });
const charge = tool({
  name: 'charge',
  description: 'Charge',
  parameters: z.object({ amount: z.number() }),
  execute: recoverTool(async (call, { amount }: { amount: number }) => ({ key: call.key, amount }), { tool: 'charge', sideEffect: true }),
  errorFunction: toolErrorFunction(),
});
const agent = new Agent({
  name: 'payments',
  model: new OpenAIChatCompletionsModel(client, 'gpt-4o'),
  modelSettings: { retry: retrySettings({ seed: 7, policyConfig: { llm: { max_attempts: 5 } } }) },
  tools: [charge],
});
void agent;
const custom = { maxRetries: MAX_RETRIES, policy: retryPolicy() };
void custom;
const chain = new Agent({
  name: 'chain',
  model: recoveringModel({ 'gpt-4o': new OpenAIChatCompletionsModel(client, 'gpt-4o'), 'gpt-4o-mini': new OpenAIChatCompletionsModel(client, 'gpt-4o-mini') }),
});
void chain;
// @ts-expect-error the models are named (an object), not listed
recoveringModel([new OpenAIChatCompletionsModel(client, 'gpt-4o')]);

// @ts-expect-error policyConfig members are the policy's (tool, llm, agent, retry_budget_ms)
retrySettings({ policyConfig: { model: {} } });
// @ts-expect-error toolErrorFunction takes only a policy
toolErrorFunction({ seed: 7 });
