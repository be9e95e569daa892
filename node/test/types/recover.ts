// Type test (`npm run typecheck`, never run): the small door as a user writes it,
// compiled against index.d.ts through the package name. A `@ts-expect-error` line
// is a misuse the declarations must refuse: tsc fails when it compiles.

import { RECOVER_DEFAULTS, type RecoverCall, VirtualClock, recover } from 'agent-recovery';

const chat = recover(
  async (call: RecoverCall, prompt: string) => `${call.target} ${call.key} ${call.attempt} ${prompt}`,
  { call: 'llm', target: 'gpt-4o', fallbacks: ['gpt-4o-mini'], clock: new VirtualClock(0), seed: 7 },
);
const answer: Promise<string> = chat('hello');
void answer;

const tool = recover(async (call, n: number) => n + call.attempt, { errors: 'model', sideEffect: true, idempotent: true });
// With errors: 'model' a failure resolves as the rendered envelope, so the result is not just a number.
// @ts-expect-error
const n: Promise<number> = tool(1);
void n;

// @ts-expect-error the arguments are the wrapped function's
void chat(42);
// @ts-expect-error an unknown option
recover(async () => 1, { fallback: ['b'] });
// @ts-expect-error errors is 'throw' or 'model'
recover(async () => 1, { errors: 'data' });

// What retry() needed, as options of the door.
recover(async () => 1, {
  onDecision: async (d) => void [d.decision.action, d.observation, d.attempt, d.key, d.elapsedMs],
  context: { elapsed_ms: 1_000, compensations_pending: 1 },
  args: { q: 'x' },
  signal: AbortSignal.timeout(1_000),
  runtimeOptions: { attemptBudget: 10 },
});
// @ts-expect-error the breaker is an option of recover() itself, not of runtimeOptions
recover(async () => 1, { runtimeOptions: { breaker: { failureThreshold: 3 } } });

const keys: string[] = Object.keys(RECOVER_DEFAULTS);
void keys;
