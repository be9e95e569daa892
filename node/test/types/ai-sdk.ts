// Type test (`npm run typecheck`, never run): the AI SDK adapter as a user writes it,
// through the package's subpath export. A `@ts-expect-error` line is a misuse the
// declarations must refuse.

import { generateText, tool, wrapLanguageModel } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import { VirtualClock } from 'agent-recovery';
import { MIDDLEWARE_DEFAULTS, recoverTool, recoveryMiddleware } from 'agent-recovery/ai-sdk';

const openai = createOpenAI({ apiKey: 'sk-test' });
const model = wrapLanguageModel({
  model: openai.chat('gpt-4o'),
  middleware: recoveryMiddleware({ fallbacks: [openai.chat('gpt-4o-mini')], clock: new VirtualClock(0), streamErrors: 'part' }),
});
void generateText({ model, prompt: 'hi', maxRetries: 0 });

const charge = tool({
  description: 'Charge',
  inputSchema: z.object({ amount: z.number() }),
  execute: recoverTool(async (call, { amount }: { amount: number }) => ({ key: call.key, amount }), { tool: 'charge', sideEffect: true }),
});
void charge;

// @ts-expect-error fallbacks are model instances, not ids
recoveryMiddleware({ fallbacks: ['gpt-4o-mini'] });
// @ts-expect-error streamErrors is 'throw' or 'part'
recoveryMiddleware({ streamErrors: 'drop' });
// @ts-expect-error the tool's errors are always data ('model')
recoverTool(async () => 1, { errors: 'throw' });

const keys: string[] = Object.keys(MIDDLEWARE_DEFAULTS);
void keys;
