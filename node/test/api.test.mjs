// The idiomatic API against the real component.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { before, test } from 'node:test';
import { CONTRACT, Policy, PolicyError, RENDER_FORMATS } from '../src/index.js';
import { GEN_COMPONENT, loadVectors, withCustomSection } from './helpers.mjs';

let policy;
before(async () => {
  policy = await Policy.load();
});

const OBS_429 = { source: 'http', status: 429, headers: { 'Retry-After': '2' } };

test('Policy is created by load(), not new', () => {
  assert.throws(() => new Policy(), TypeError);
});

test('info and describe name the policy and the bytes', async () => {
  const info = policy.info();
  assert.equal(info.name, 'agent-recovery-reference');
  assert.match(info.version, /^\d+\.\d+\.\d+/);
  assert.equal(info.contract, CONTRACT);
  assert.equal(typeof info.description, 'string');
  const d = policy.describe();
  const bytes = await readFile(GEN_COMPONENT);
  const { createHash } = await import('node:crypto');
  assert.equal(d.sha256, createHash('sha256').update(bytes).digest('hex'));
  assert.equal(d.size, bytes.length);
  assert.equal(d.source, 'reference');
  assert.equal(d.traps, 0);
});

test('classify returns the envelope object of classifyJson', () => {
  const text = policy.classifyJson(JSON.stringify(OBS_429));
  const env = policy.classify(OBS_429);
  assert.deepEqual(env, JSON.parse(text));
  assert.equal(env.code, 'tool.http.429_rate_limited');
  assert.equal(env.retry_after_ms, 2000);
});

test('decide adds the policy that answered; decideJson stays the component bytes', () => {
  const ctx = { call: 'tool', attempt: 1, seed: 7 };
  const text = policy.decideJson(JSON.stringify(OBS_429), JSON.stringify(ctx));
  assert.ok(!text.includes('"policy"'));
  assert.ok(text.startsWith('{"action":"retry","delay_ms":2000'));
  const d = policy.decide(OBS_429, ctx);
  const { policy: who, ...rest } = d;
  assert.deepEqual(rest, JSON.parse(text));
  assert.deepEqual(who, { name: policy.info().name, version: policy.info().version, sha256: policy.describe().sha256 });
});

test('decideJson and decide default the context to {}', () => {
  const a = JSON.parse(policy.decideJson('{"source":"http","status":400}'));
  const b = policy.decide({ source: 'http', status: 400 });
  assert.equal(a.action, 'fail');
  assert.equal(b.action, 'fail');
  assert.equal(a.attempt, 1);
});

test('backoff is the same draw decide makes (tests/vectors/decisions.json)', () => {
  // "tool 503 seed 1 attempt 1: full jitter" -> 96 ms
  assert.equal(policy.backoff({ call: 'tool', attempt: 1, seed: 1 }), 96);
  assert.equal(policy.backoff({ call: 'tool', attempt: 1, seed: 1n }), 96);
  assert.equal(policy.backoff({ call: 'tool', attempt: 1, seed: '1' }), 96);
  assert.equal(policy.decide({ source: 'http', status: 503 }, { call: 'tool', attempt: 1, seed: 1 }).delay_ms, 96);
  for (let attempt = 1; attempt <= 8; attempt++) {
    const ms = policy.backoff({ call: 'llm', attempt, seed: 99n });
    assert.ok(Number.isInteger(ms) && ms >= 0 && ms <= Math.min(30_000, 1000 * 2 ** (attempt - 1)), `${attempt}: ${ms}`);
  }
  const capped = policy.backoff({
    call: 'tool',
    attempt: 10,
    seed: 3,
    config: { tool: { base_ms: 10, cap_ms: 50, max_attempts: 20 }, retry_budget_ms: 1000n },
  });
  assert.ok(capped <= 50);
  // No seed: a draw from WASI random, still within bounds.
  const r = policy.backoff({ call: 'tool', attempt: 1 });
  assert.ok(r >= 0 && r <= 250);
});

test('key: hex sha256, independent of key order, different per step', () => {
  const a = policy.key({ runId: 'run-1', stepId: 'step-1', tool: 'search', args: { q: 'x', page: 2 } });
  const b = policy.key({ runId: 'run-1', stepId: 'step-1', tool: 'search', args: { page: 2, q: 'x' } });
  const c = policy.key({ runId: 'run-1', stepId: 'step-2', tool: 'search', args: { q: 'x', page: 2 } });
  const d = policy.key({ runId: 'run-1', stepId: 'step-1', tool: 'search', argsJson: '{ "page": 2, "q": "x" }' });
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.equal(a, b);
  assert.equal(a, d);
  assert.notEqual(a, c);
});

test('registry: every code, sorted; lookup finds one', () => {
  const codes = policy.registry();
  assert.ok(codes.length > 50);
  const names = codes.map((c) => c.code);
  assert.deepEqual(names, [...names].sort());
  for (const c of codes) {
    assert.equal(typeof c.code, 'string');
    assert.ok(['transient', 'permanent', 'semantic', 'policy', 'state'].includes(c.class), c.code);
  }
  assert.equal(policy.lookup('tool.http.429_rate_limited').retryable, true);
  assert.equal(policy.lookup('no.such.code'), undefined);
  // A copy: changing it does not change the policy's.
  codes[0].code = 'changed';
  assert.notEqual(policy.registry()[0].code, 'changed');
});

test('every code the vectors produce is in the registry', () => {
  const missing = new Set();
  for (const { cases } of loadVectors()) {
    for (const c of cases) {
      if (c.expect.error !== undefined) continue;
      const env = JSON.parse(policy.classifyJson(c.obsText));
      if (!policy.lookup(env.code)) missing.add(env.code);
      const d = JSON.parse(policy.decideJson(c.obsText, c.ctxText));
      if (!policy.lookup(d.envelope.code)) missing.add(d.envelope.code);
      if (d.reason_code && !policy.lookup(d.reason_code)) missing.add(d.reason_code);
    }
  }
  assert.deepEqual([...missing], []);
});

test('render: each format, JSON parsed, text kept as text', () => {
  const env = policy.classify(OBS_429);
  for (const format of RENDER_FORMATS) {
    try {
      const out = policy.render(env, format, { id: 7, task_id: 't-1', current_agent: 'a', downstream_agent: 'b' });
      assert.ok(out !== undefined && out !== '', format);
      const raw = policy.renderJson(JSON.stringify(env), format, '{"id":7,"task_id":"t-1","current_agent":"a","downstream_agent":"b"}');
      assert.equal(typeof raw, 'string');
    } catch (e) {
      // render-json may refuse a format it does not implement yet; it must say so as a PolicyError.
      assert.ok(e instanceof PolicyError, `${format}: ${e}`);
    }
  }
  const rpc = policy.render(env, 'jsonrpc_error', { id: 7 });
  assert.equal(rpc.jsonrpc, '2.0');
  assert.equal(rpc.id, 7);
  const text = policy.render(env, 'coordinator-text');
  assert.equal(typeof text, 'string');
  assert.match(text, /^\[FAILED\]/);
});

test('smokeTests is the component smoke set', () => {
  const cases = policy.smokeTests();
  assert.ok(Array.isArray(cases) && cases.length > 0);
  for (const c of cases) {
    const d = policy.decide(c.observation, c.context ?? {});
    assert.equal(d.action, c.expect.action);
    assert.equal(d.envelope.code, c.expect.code);
  }
});

test('another copy of the component, transpiled in-process, answers byte for byte the same', async () => {
  const bytes = await readFile(GEN_COMPONENT);
  const other = await Policy.load(withCustomSection(bytes, 'api-test'));
  assert.notEqual(other.describe().sha256, policy.describe().sha256);
  assert.equal(other.describe().source, 'bytes');
  for (const { cases } of loadVectors()) {
    for (const c of cases) {
      if (c.expect.error !== undefined) continue;
      assert.equal(other.classifyJson(c.obsText), policy.classifyJson(c.obsText), c.name);
      if (c.context?.seed !== undefined) assert.equal(other.decideJson(c.obsText, c.ctxText), policy.decideJson(c.obsText, c.ctxText), c.name);
    }
  }
});

test('load takes a path, a file URL, bytes or an ArrayBuffer', async () => {
  const obs = JSON.stringify({ source: 'a2a', message: { jsonrpc: '2.0', id: 1, error: { code: -32001, message: 'x' } } });
  const bytes = await readFile(GEN_COMPONENT);
  for (const [source, label] of [
    [GEN_COMPONENT, GEN_COMPONENT],
    [pathToFileURL(GEN_COMPONENT), GEN_COMPONENT],
    [new Uint8Array(bytes), 'bytes'],
    [bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length), 'bytes'],
  ]) {
    const p = await Policy.load(source);
    assert.equal(p.describe().source, label);
    assert.equal(p.describe().sha256, policy.describe().sha256);
    assert.equal(p.classifyJson(obs), policy.classifyJson(obs));
  }
});

test('decide and classify take JSON text as well as objects (parity with Python)', async () => {
  const policy = await Policy.load();
  const obs = { source: 'http', status: 429, headers: { 'retry-after': '2' } };
  const ctx = { attempt: 1, seed: 7 };
  assert.deepEqual(policy.decide(JSON.stringify(obs), JSON.stringify(ctx)), policy.decide(obs, ctx));
  assert.deepEqual(policy.classify(JSON.stringify(obs)), policy.classify(obs));
  assert.equal(policy.registryJson(), JSON.stringify(policy.registry()));
});
