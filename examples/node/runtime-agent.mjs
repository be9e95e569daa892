// An agent run under the recovery Runtime: a fallback chain, a fan-out, a
// breaker, a compensation and a dead letter, with simulated tools (no network) on a
// virtual clock (nothing sleeps). The real component decides and runs the loop.
//
//   node examples/node/runtime-agent.mjs
//
// Needs the package built (`cd node && npm run build`).

import { MemoryStore, RawOutcome, Runtime, VirtualClock } from '../../node/src/index.js';

const T0 = 1_767_225_600_000;
const store = new MemoryStore(); // SqliteStore('state.db') to share breakers between processes
const clock = new VirtualClock(T0); // the system clock by default

function line(e) {
  const details = Object.entries(e)
    .filter(([k]) => !['t_ms', 'event', 'step', 'target', 'key'].includes(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  console.log(`${String(e.t_ms).padStart(7)} ms  ${e.event.padEnd(13)} ${String(e.step).padEnd(8)} ${String(e.target ?? '-').padEnd(17)} ${details}`);
}

const runtime = await Runtime.create({
  clock,
  store,
  seed: 7, // reproducible jitter
  // The run configuration (docs/runtime.md): 3 consecutive failures open a target (its
  // open window grows with the outage up to 30 s); on_open 'wait' waits for the probe
  // instead of failing at once, so the payment below ends dead-lettered, its hold released.
  config: { breaker: { failure_threshold: 3, open_ms: 30_000 }, on_open: 'wait' },
  onEvent: line,
});

console.log('   t_ms  event         step     target            details');
const run = runtime.run('order-1042');

// 1. A side effect with its undo.
const reserved = await run.step({
  id: 'reserve',
  tool: 'inventory.reserve',
  call: 'tool',
  args: { sku: 'A-1', qty: 1 },
  sideEffect: true,
  operation: () => ({ hold: 'h_9' }),
  compensate: (call) => {
    console.log(`          (releasing hold h_9 under its own key ${call.key.slice(0, 12)}…)`);
    return null;
  },
});
console.log(`=> reserve: ${reserved.outcome} ${JSON.stringify(reserved.result)}\n`);

// 2. A fallback chain: OpenAI is out of quota (a policy refusal), Anthropic answers.
const answer = await run.step({
  id: 'answer',
  tool: 'llm.chat',
  call: 'llm',
  target: 'openai',
  fallbacks: ['anthropic'],
  operation: (call) =>
    call.target === 'openai'
      ? new RawOutcome({ source: 'http', status: 429, body: { error: { type: 'insufficient_quota', code: 'insufficient_quota', message: 'quota' } } })
      : { text: 'Your order ships Monday.' },
});
console.log(`=> answer: ${answer.outcome} ${JSON.stringify(answer.result)} (from the fallback)\n`);

// 3. A fan-out: three shipping quotes, two are enough (graceful degradation).
const quote = (id, answer) => ({ id, tool: 'shipping.quote', call: 'tool', target: `${id}.example`, operation: () => answer });
const quotes = await run.fanout('quotes', 2, [
  quote('dhl', { eur: 12 }),
  quote('ups', new RawOutcome({ source: 'http', status: 400 })),
  quote('gls', { eur: 9 }),
]);
console.log(`=> quotes: ${quotes.outcome} ${JSON.stringify(quotes.result)}\n`);

// 4. A target that keeps failing: retries, the breaker opens and short-circuits,
//    the attempt budget runs out, the hold is released, the input is dead-lettered.
let charges = 0;
const charged = await run.step({
  id: 'charge',
  tool: 'payments.charge',
  call: 'tool',
  target: 'api.pay',
  args: { amount: 1999 },
  operation: () => {
    charges += 1;
    return new RawOutcome({ source: 'http', status: 503 });
  },
});
console.log(`=> charge: ${charged.outcome} after ${charges} calls (${charged.envelope?.code})`);
for (const [, record] of store.read('agent-recovery/dead-letter', 0, 10)) {
  const r = JSON.parse(record);
  console.log(`dead letter: step ${r.step_id}, ${r.attempts} attempts, compensations ${JSON.stringify(r.compensations.map((c) => [c.step, c.outcome]))}`);
}
if (reserved.outcome !== 'ok' || answer.outcome !== 'ok' || quotes.outcome !== 'ok' || charged.outcome !== 'dead_lettered') process.exit(1);
