// The host conformance vectors (tests/hosts/conformance.json), run by the Node
// host; the Rust (host/tests/hosts.rs) and Python (python/tests/test_hosts.py)
// hosts run the same file. docs/hosts.md documents the rules and the codes.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Policy } from '../src/index.js';
import { REPO, artifact } from './helpers.mjs';

const HOST = 'node';
const VECTORS = JSON.parse(readFileSync(join(REPO, 'tests', 'hosts', 'conformance.json'), 'utf8'));

/** The case as this host runs it: `hosts.node` overrides its members. */
function forThisHost(c) {
  return { ...c, ...(c.hosts?.[HOST] ?? {}) };
}

function componentBytes(c) {
  const bytes = readFileSync(artifact(c.component));
  if (c.bytes === undefined) return bytes;
  if (c.bytes === 'truncate-half') return bytes.subarray(0, Math.floor(bytes.length / 2));
  if (c.bytes === 'not-wasm') return Buffer.from('<html>');
  throw new Error(`unknown bytes transform ${c.bytes}`);
}

function pin(template, bytes) {
  const hex = createHash('sha256').update(bytes).digest('hex');
  return template.replaceAll('{sha256}', hex).replaceAll('{SHA256}', hex.toUpperCase());
}

function options(c, bytes) {
  const o = {};
  if (c.pin !== undefined) o.sha256 = pin(c.pin, bytes);
  if (c.isolate !== undefined) o.isolate = c.isolate;
  if (c.timeout_ms !== undefined) o.timeoutMs = c.timeout_ms;
  if (c.load_timeout_ms !== undefined) o.loadTimeoutMs = c.load_timeout_ms;
  return o;
}

/** An error as the vectors spell it; anything without a shared code is a bug. */
function errorOutcome(e) {
  assert.equal(typeof e?.code, 'string', `an error without a code: ${e?.stack ?? e}`);
  return { error: e.code };
}

async function loadOutcome(c) {
  const bytes = componentBytes(c);
  try {
    const policy = await Policy.load(bytes, options(c, bytes));
    policy.close?.();
    return { ok: true };
  } catch (e) {
    return errorOutcome(e);
  }
}

function observation(c) {
  if (c.observation_bytes !== undefined) {
    const head = '{"source":"http","status":400,"body":"';
    return `${head}${'x'.repeat(c.observation_bytes - head.length - 2)}"}`;
  }
  return c.observation;
}

async function callOutcome(c) {
  const bytes = componentBytes(c);
  const policy = await Policy.load(bytes, { ...options(c, bytes), verify: false });
  assert.equal(c.op, 'decide', `unknown op ${c.op}`);
  try {
    const d = await policy.decide(observation(c), '{}');
    return { action: d.action, code: d.envelope?.code };
  } catch (e) {
    return errorOutcome(e);
  } finally {
    policy.close?.();
  }
}

/** Compares every expectation kind the case names; an unknown one fails the test. */
export function check(kinds, expect, got, name) {
  for (const [kind, want] of Object.entries(expect)) {
    assert.ok(kinds.includes(kind), `${name}: unknown expectation kind ${JSON.stringify(kind)} (this runner checks ${kinds.join(', ')})`);
    assert.deepEqual(got[kind], want, `${name}: expected ${kind} ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
  }
}

for (const raw of VECTORS.load) {
  const c = forThisHost(raw);
  test(`host conformance, load: ${c.name}`, async () => {
    check(['ok', 'error'], c.expect, await loadOutcome(c), c.name);
  });
}

for (const raw of VECTORS.call) {
  const c = forThisHost(raw);
  test(`host conformance, call: ${c.name}`, async () => {
    check(['error', 'action', 'code'], c.expect, await callOutcome(c), c.name);
  });
}

test('an unknown expectation kind fails the runner', () => {
  assert.throws(() => check(['ok', 'error'], { eror: 'load' }, { error: 'load' }, 'typo'), /unknown expectation kind "eror"/);
});
