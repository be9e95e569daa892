#!/usr/bin/env node
// Benchmark: the per-call cost of the JSON entry points through jco, on a
// realistic mix of failures, and the cost of loading a policy.
//
//   npm run bench            (builds gen/ first)
//   node bench/bench.mjs [--quick]
//
// Method: process.hrtime.bigint around batches of calls, after a warmup; the
// figure is the median over batches of (batch time / calls in the batch).

import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Policy } from '../src/index.js';

const quick = process.argv.includes('--quick');
const WARMUP = quick ? 500 : 5_000;
const BATCHES = quick ? 15 : 60;
const PER_BATCH = quick ? 200 : 1_000;

/** About ten failures agents actually see, as observations (JSON text). */
const MIX = {
  'http 429 retry-after': {
    source: 'http',
    status: 429,
    headers: { 'retry-after': '2', 'content-type': 'text/plain' },
    body: 'Too Many Requests',
  },
  'openai 429 rate_limit_exceeded': {
    source: 'http',
    status: 429,
    provider: 'openai',
    call: 'llm',
    headers: {
      'x-ratelimit-limit-tokens': '30000',
      'x-ratelimit-remaining-tokens': '0',
      'x-ratelimit-reset-tokens': '1.5s',
      'x-request-id': 'req_7f3a9c',
    },
    body: {
      error: {
        message: 'Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200.',
        type: 'tokens',
        param: null,
        code: 'rate_limit_exceeded',
      },
    },
  },
  'openai 429 insufficient_quota': {
    source: 'http',
    status: 429,
    call: 'llm',
    body: JSON.stringify({
      error: { message: 'You exceeded your current quota.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' },
    }),
  },
  'openai 400 context_length': {
    source: 'http',
    status: 400,
    call: 'llm',
    body: {
      error: {
        message: "This model's maximum context length is 128000 tokens.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  'anthropic 529 overloaded': {
    source: 'http',
    status: 529,
    call: 'llm',
    headers: { 'request-id': 'req_011CX' },
    body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' }, request_id: 'req_011CX' },
  },
  'anthropic 429 rate_limit_error': {
    source: 'http',
    status: 429,
    call: 'llm',
    headers: { 'retry-after': '12', 'anthropic-ratelimit-tokens-remaining': '0' },
    body: { type: 'error', error: { type: 'rate_limit_error', message: 'Number of request tokens has exceeded your per-minute rate limit' } },
  },
  'mcp isError result': {
    source: 'mcp',
    message: {
      jsonrpc: '2.0',
      id: 3,
      result: { content: [{ type: 'text', text: "Error calling tool 'fetch_data': connection refused" }], isError: true },
    },
  },
  'a2a failed task': {
    source: 'a2a',
    message: {
      jsonrpc: '2.0',
      id: 3,
      result: {
        id: 'task-abc-123',
        contextId: 'ctx-1',
        kind: 'task',
        status: { state: 'failed', message: { role: 'agent', parts: [{ kind: 'text', text: 'Database connection refused' }] } },
      },
    },
  },
  'node ECONNRESET': { source: 'network', code: 'ECONNRESET', message: 'read ECONNRESET' },
  'read timeout (httpx)': { source: 'exception', type: 'httpx.ReadTimeout', message: 'The read operation timed out' },
};
const NAMES = Object.keys(MIX);
const TEXTS = NAMES.map((n) => JSON.stringify(MIX[n]));
const CONTEXT = '{"attempt":2,"elapsed_ms":1200,"seed":"12345678901234567890"}';

/** The component with a custom section appended (valid anywhere in a component). */
function withCustomSection(bytes, name) {
  const payload = Buffer.concat([Buffer.from([name.length]), Buffer.from(name), Buffer.from(String(Date.now()))]);
  if (payload.length > 127) throw new Error('section too long for a one-byte size');
  return Buffer.concat([bytes, Buffer.from([0, payload.length]), payload]);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Median ns/op of `fn(i)` over batches (i cycles through the mix). */
function measure(fn, n = TEXTS.length) {
  for (let i = 0; i < WARMUP; i++) fn(i % n);
  const perOp = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < PER_BATCH; i++) fn(i % n);
    perOp.push(Number(process.hrtime.bigint() - t0) / PER_BATCH);
  }
  return median(perOp);
}

async function time(fn) {
  const t0 = process.hrtime.bigint();
  const out = await fn();
  return [Number(process.hrtime.bigint() - t0) / 1e6, out];
}

function fmtNs(ns) {
  return ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : `${(ns / 1e3).toFixed(1)} µs`;
}

async function main() {
  const component = fileURLToPath(new URL('../gen/component.wasm', import.meta.url));
  const [coldMs, policy] = await time(() => Policy.load());
  const warm = [];
  for (let i = 0; i < 10; i++) warm.push((await time(() => Policy.load()))[0]);
  // A copy with one more custom section: other bytes (another sha256), so it
  // is really transpiled, not found in the cache.
  const bytes = await readFile(component);
  const [transpileMs] = await time(() => Policy.load(withCustomSection(bytes, 'bench-copy')));
  const [swapMs] = await time(() => policy.swap(bytes));

  const d = policy.describe();
  console.log(`agent-recovery bench: ${d.name} ${d.version} (${(d.size / 1024).toFixed(0)} KiB component, sha256 ${d.sha256.slice(0, 12)}…)`);
  console.log(`node ${process.version}, ${process.arch}; warmup ${WARMUP}, ${BATCHES} batches × ${PER_BATCH} calls, median ns/op\n`);

  console.log('load / instantiate');
  console.log(`  Policy.load() reference, cold (import gen/, compile, instantiate, smoke set): ${coldMs.toFixed(1)} ms`);
  console.log(`  Policy.load() reference, warm (instantiate + smoke set), median of 10:       ${median(warm).toFixed(1)} ms`);
  console.log(`  Policy.load(path): in-process jco transpile + compile + instantiate, cold:   ${transpileMs.toFixed(1)} ms`);
  console.log(`  policy.swap(bytes) of an already transpiled component (validate + switch):  ${swapMs.toFixed(1)} ms\n`);

  const rows = [
    ['classifyJson (mix of 10)', measure((i) => policy.classifyJson(TEXTS[i]))],
    ['decideJson (mix of 10)', measure((i) => policy.decideJson(TEXTS[i], CONTEXT))],
    ['classify, object in/out (mix)', measure((i) => policy.classify(MIX[NAMES[i]]))],
    ['decide, object in/out (mix)', measure((i) => policy.decide(MIX[NAMES[i]], { attempt: 2, elapsed_ms: 1200, seed: 12345678901234567890n }))],
    ['backoff (typed export)', measure((i) => policy.backoff({ call: 'llm', attempt: 1 + (i % 5), seed: 7n }))],
    ['key (typed export)', measure((i) => policy.key({ runId: 'run-1', stepId: `step-${i}`, tool: 'search', args: { q: 'x', page: i } }))],
  ];
  console.log('per call');
  for (const [name, ns] of rows) console.log(`  ${name.padEnd(34)} ${fmtNs(ns).padStart(10)}`);

  console.log('\ndecideJson per observation');
  for (let k = 0; k < NAMES.length; k++) {
    const ns = measure(() => policy.decideJson(TEXTS[k], CONTEXT), 1);
    console.log(`  ${NAMES[k].padEnd(34)} ${fmtNs(ns).padStart(10)}`);
  }
}

main().catch((e) => {
  process.stderr.write(`bench: error: ${e.stack ?? e}\n`);
  process.exit(2);
});
