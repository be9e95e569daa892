#!/usr/bin/env node
// A small agent loop that recovers through the policy.
//
//   (cd node && npm install && npm run build)
//   node examples/node/agent-loop.mjs
//
// Step 1 calls a flaky tool: 503 with Retry-After, then a connection reset,
// then success. Step 2 calls an LLM that fails with real provider error shapes:
// OpenAI 429 rate_limit_exceeded (with x-ratelimit headers), Anthropic 529
// overloaded_error, then OpenAI 400 context_length_exceeded, which the policy
// answers with `replan`: the agent trims its context and asks again.
//
// The host only runs, sleeps and counts; every choice is the policy's. Sleeping
// is shortened here (a hundredth of the delay, at most 20 ms) so the demo is quick.

import { Policy, RecoveryError, retry } from '../../node/src/index.js';

const policy = await Policy.load();
const RUN = 'run-demo-1';
const SEED = 20261122n; // reproducible jitter for the demo; omit it in production

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms / 100, 20)));

function show({ attempt, decision }) {
  const env = decision.envelope;
  const wait = decision.action === 'retry' ? `wait ${decision.delay_ms} ms` : `(${decision.reason})`;
  const seen = [env.upstream.provider, env.upstream.status, env.upstream.code ?? env.upstream.type].filter((x) => x != null);
  console.log(`  attempt ${attempt}  ${env.code.padEnd(30)} ${decision.action.padEnd(7)} ${wait.padEnd(14)} [${seen.join(' ')}]`);
  if (decision.action !== 'retry') console.log(`             hint: ${env.hint}`);
}

// --- a flaky tool -------------------------------------------------------------

let weatherCalls = 0;
async function weatherTool({ city }, { idempotencyKey }) {
  weatherCalls += 1;
  if (weatherCalls === 1) {
    return new Response('<html><body>503 Service Unavailable</body></html>', {
      status: 503,
      headers: { 'retry-after': '1', 'content-type': 'text/html' },
    });
  }
  if (weatherCalls === 2) {
    // What undici's fetch throws when the server resets the connection.
    const cause = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' });
    throw new TypeError('fetch failed', { cause });
  }
  return Response.json({ city, temp_c: -3, conditions: 'snow', served_for: idempotencyKey.slice(0, 12) });
}

// --- an LLM behind a router, failing the way providers do ----------------------

let llmCalls = 0;
async function llm(messages) {
  llmCalls += 1;
  if (llmCalls === 1) {
    return Response.json(
      {
        error: {
          message:
            'Rate limit reached for gpt-4o in organization org-demo on tokens per min (TPM): Limit 30000, Used 30000, Requested 1840. Please try again in 1.5s.',
          type: 'tokens',
          param: null,
          code: 'rate_limit_exceeded',
        },
      },
      {
        status: 429,
        headers: {
          'x-request-id': 'req_5c1f0e9b2a',
          'x-ratelimit-limit-requests': '10000',
          'x-ratelimit-remaining-requests': '9998',
          'x-ratelimit-reset-requests': '12ms',
          'x-ratelimit-limit-tokens': '30000',
          'x-ratelimit-remaining-tokens': '0',
          'x-ratelimit-reset-tokens': '1.5s',
        },
      },
    );
  }
  if (llmCalls === 2) {
    return Response.json(
      { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' }, request_id: 'req_011CXdemo' },
      { status: 529, headers: { 'request-id': 'req_011CXdemo', 'x-should-retry': 'true' } },
    );
  }
  const tokens = messages.reduce((n, m) => n + m.content.length, 0);
  if (tokens > 4000) {
    return Response.json(
      {
        error: {
          message: `This model's maximum context length is 128000 tokens. However, your messages resulted in ${tokens * 40} tokens. Please reduce the length of the messages.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      },
      { status: 400, headers: { 'x-request-id': 'req_8d2e' } },
    );
  }
  return Response.json({ choices: [{ message: { role: 'assistant', content: 'Dress warmly: -3 °C and snow in Oslo.' } }] });
}

// --- the loop -----------------------------------------------------------------

console.log(`policy: ${policy.info().name} ${policy.info().version} (sha256 ${policy.describe().sha256.slice(0, 12)}…)\n`);

console.log('step 1: tool weather.get {city: "Oslo"}');
const args = { city: 'Oslo' };
const weather = await retry(({ idempotencyKey }) => weatherTool(args, { idempotencyKey }), {
  policy,
  call: 'tool',
  runId: RUN,
  stepId: 'step-1',
  tool: 'weather.get',
  args,
  seed: SEED,
  sleep,
  onDecision: show,
}).then((res) => res.json());
console.log(`  attempt ${weatherCalls}  ok: ${JSON.stringify(weather)}\n`);

console.log('step 2: llm "what should I wear?"');
let messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: `Earlier conversation: ${'lorem ipsum '.repeat(400)}` },
  { role: 'tool', content: JSON.stringify(weather) },
  { role: 'user', content: 'What should I wear today?' },
];
let answer;
for (let plan = 1; plan <= 2 && answer === undefined; plan++) {
  try {
    const res = await retry(() => llm(messages), {
      policy,
      call: 'llm',
      runId: RUN,
      stepId: `step-2-plan-${plan}`,
      tool: 'llm.chat',
      args: { messages: messages.length },
      seed: SEED,
      sleep,
      onDecision: show,
    });
    answer = (await res.json()).choices[0].message.content;
  } catch (e) {
    if (!(e instanceof RecoveryError)) throw e;
    if (e.action !== 'replan') {
      console.log(`  stopped: ${e.action} (${e.code}); the agent would ${e.action === 'fallback' ? 'switch models' : 'give up this step'}`);
      break;
    }
    // Re-plan with the hint: here, drop the long history and keep the essentials.
    console.log(`  re-planning: dropping the earlier conversation (field: ${e.envelope.field ?? 'n/a'})`);
    messages = messages.filter((m) => !m.content.startsWith('Earlier conversation'));
  }
}
console.log(`  answer: ${answer}\n`);
console.log(`done: ${weatherCalls} tool calls, ${llmCalls} LLM calls`);
