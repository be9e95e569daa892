// Bad input gives a PolicyError (a kind and a message), never a crash, and the
// policy keeps answering afterwards.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { Policy, PolicyError, PolicyRuntimeError } from '../src/index.js';

let policy;
before(async () => {
  policy = await Policy.load();
});

function assertPolicyError(fn, kind, pattern) {
  let caught;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, `expected a PolicyError ${kind}, got no error`);
  assert.ok(caught instanceof PolicyError, `expected a PolicyError ${kind}, got ${caught?.name}: ${caught?.message}`);
  assert.ok(!(caught instanceof PolicyRuntimeError));
  assert.equal(caught.kind, kind, caught.message);
  assert.equal(caught.name, 'PolicyError');
  assert.ok(caught.message.length > 0);
  if (pattern) assert.match(caught.message, pattern);
  return caught;
}

test('malformed JSON is invalid_json', () => {
  for (const text of ['', '{', '{"source":"http",}', 'nul', '{"status": 429} trailing', '\u0000']) {
    assertPolicyError(() => policy.classifyJson(text), 'invalid_json');
  }
  assertPolicyError(() => policy.decideJson('{"source":"http","status":503}', '{attempt:1}'), 'invalid_json');
});

test('JSON that is not an observation is invalid_observation', () => {
  for (const obs of ['[]', '"http"', '42', 'null', 'true', '{}', '{"source":"carrier-pigeon"}']) {
    assertPolicyError(() => policy.classifyJson(obs), 'invalid_observation');
  }
});

test('wrong types in an observation are invalid_observation naming the field', () => {
  assertPolicyError(() => policy.classify({ source: 'http', status: 'abc' }), 'invalid_observation', /status/);
  assertPolicyError(() => policy.classify({ source: 'http', status: 42 }), 'invalid_observation', /status/);
  assertPolicyError(() => policy.classify({ source: 'http', status: 70000 }), 'invalid_observation', /status/);
  assertPolicyError(() => policy.classify({ source: 'http', status: 503, headers: 5 }), 'invalid_observation', /headers/);
  assertPolicyError(() => policy.classify({ source: 'timeout', phase: 'lunch' }), 'invalid_observation', /phase/);
  assertPolicyError(() => policy.classify({ source: 'http', status: 503, call: 'robot' }), 'invalid_observation', /call/);
});

test('a bad context is invalid_context, bad parameters invalid_config', () => {
  const obs = { source: 'http', status: 503 };
  assertPolicyError(() => policy.decide(obs, { attempt: 0 }), 'invalid_context', /attempt/);
  assertPolicyError(() => policy.decide(obs, { attempt: -1 }), 'invalid_context');
  assertPolicyError(() => policy.decide(obs, { attempt: 'two' }), 'invalid_context');
  assertPolicyError(() => policy.decide(obs, { call: 'robot' }), 'invalid_context', /call/);
  assertPolicyError(() => policy.decide(obs, []), 'invalid_context');
  assertPolicyError(() => policy.decideJson('{"source":"http","status":503}', '[1]'), 'invalid_context');
  assertPolicyError(
    () => policy.decide(obs, { attempt: 1, config: { tool: { base_ms: 500, cap_ms: 100 } } }),
    'invalid_config',
    /cap_ms/,
  );
});

test('an unknown context field is invalid_context, an unknown config field invalid_config', () => {
  const obs = { source: 'http', status: 503 };
  assertPolicyError(() => policy.decide(obs, { attemptz: 1 }), 'invalid_context', /attemptz/);
  assertPolicyError(
    () => policy.decide(obs, { attempt: 1, config: { tool: { base_ms: 1, cap_ms: 2, max_attempts: 3, jitter: 1 } } }),
    'invalid_config',
    /jitter/,
  );
});

test('seeds: a bigint or decimal string up to 2^64-1; an unsafe number is refused', () => {
  const obs = { source: 'http', status: 503 };
  const max = (1n << 64n) - 1n;
  const a = policy.decide(obs, { call: 'tool', attempt: 1, seed: max });
  const b = policy.decide(obs, { call: 'tool', attempt: 1, seed: max.toString() });
  assert.equal(a.delay_ms, 160); // tests/vectors/decisions.json, seed 2^64-1
  assert.equal(b.delay_ms, a.delay_ms);
  assertPolicyError(() => policy.decide(obs, { attempt: 1, seed: 2 ** 60 }), 'invalid_context', /bigint or a decimal string/);
  assertPolicyError(() => policy.decide(obs, { attempt: 1, seed: max + 1n }), 'invalid_context');
  assertPolicyError(() => policy.decide(obs, { attempt: 1, seed: -1n }), 'invalid_context');
  assertPolicyError(() => policy.decide(obs, { attempt: 1, seed: 1.5 }), 'invalid_context');
  assertPolicyError(() => policy.decide(obs, { attempt: 1, seed: {} }), 'invalid_context');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 1, seed: max + 1n }), 'invalid_context');
});

test('a 10 MB body is classified (or refused) without a crash', () => {
  const body = `{"error":{"message":"${'x'.repeat(10 * 1024 * 1024)}","type":"server_error"}}`;
  const env = policy.classify({ source: 'http', status: 500, body });
  assert.equal(env.class, 'transient');
  assert.equal(typeof env.code, 'string');
  const text = 'y'.repeat(10 * 1024 * 1024);
  const env2 = policy.classify({ source: 'http', status: 502, body: text });
  assert.equal(env2.upstream.status, 502);
});

test('input over the size limit is too_large', () => {
  const body = 'z'.repeat(33 * 1024 * 1024);
  assertPolicyError(() => policy.classify({ source: 'http', status: 500, body }), 'too_large', /limit/);
});

test('deep nesting is refused or classified, never a crash', () => {
  for (const depth of [200, 10_000, 100_000]) {
    const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`;
    assertPolicyError(() => policy.classifyJson(`{"source":"http","status":500,"body":${deep}}`), 'invalid_json', /recursion/);
    // As a text body the nesting is not parsed up front.
    const env = policy.classify({ source: 'http', status: 500, body: deep });
    assert.equal(env.upstream.status, 500);
    const objs = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    assertPolicyError(() => policy.decideJson(`{"source":"http","status":503,"body":${objs}}`, '{}'), 'invalid_json');
  }
});

test('arguments of the wrong JS type are invalid_argument from the wrapper', () => {
  assertPolicyError(() => policy.classifyJson({ source: 'http' }), 'invalid_argument', /string/);
  assertPolicyError(() => policy.decideJson('{}', {}), 'invalid_argument');
  assertPolicyError(() => policy.classify(undefined), 'invalid_observation');
  const cyclic = { source: 'http', status: 500 };
  cyclic.self = cyclic;
  assertPolicyError(() => policy.classify(cyclic), 'invalid_observation', /JSON/);
  assertPolicyError(() => policy.backoff({ call: 'robot', attempt: 1 }), 'invalid_argument');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: -1 }), 'invalid_argument');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 1.5 }), 'invalid_argument');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 2 ** 32 }), 'invalid_argument');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 1, config: { tool: { base_ms: 1 } } }), 'invalid_config');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 1, config: { tool: { base_ms: -1, cap_ms: 1, max_attempts: 1 } } }), 'invalid_config');
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 1, config: { toool: {} } }), 'invalid_config');
  assertPolicyError(() => policy.key({ runId: 1, stepId: 's', tool: 't' }), 'invalid_argument');
  assertPolicyError(() => policy.key({ runId: 'r', stepId: 's', tool: 't', argsJson: '{' }), 'invalid_json');
  assertPolicyError(() => policy.render({}, 'smoke-signals'), 'invalid_argument', /format/);
});

test('the component validates what it is given: attempt 0, cap below base', () => {
  assertPolicyError(() => policy.backoff({ call: 'tool', attempt: 0 }), 'invalid_argument', /attempt/);
  assertPolicyError(
    () => policy.backoff({ call: 'tool', attempt: 1, config: { tool: { base_ms: 500, cap_ms: 100, max_attempts: 3 } } }),
    'invalid_config',
    /cap_ms/,
  );
  assertPolicyError(() => policy.render('{"not":"an envelope"}', 'jsonrpc-error'), 'invalid_argument');
});

test('after all that the policy still answers, and nothing trapped', () => {
  const d = policy.decide({ source: 'http', status: 429, headers: { 'retry-after': '1' } }, { attempt: 1, seed: 7 });
  assert.equal(d.action, 'retry');
  assert.equal(policy.describe().traps, 0);
});
