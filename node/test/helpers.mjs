// Shared by the tests: the shared vectors and a subset matcher.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv2020 from 'ajv/dist/2020.js';
import { MemoryStore, runScenario } from '../src/index.js';
import { RAW, parseLossless } from '../src/json.js';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const VECTORS_DIR = join(REPO, 'tests', 'vectors');
export const GEN_COMPONENT = fileURLToPath(new URL('../gen/component.wasm', import.meta.url));

/**
 * The .wasm tests/artifacts/build.rs built for a workspace package (`payments-policy`,
 * `hostile-spin`, ...), from the manifest it writes:
 * `$AGENT_RECOVERY_ARTIFACTS`, else `${CARGO_TARGET_DIR:-target}/wasm-policies/artifacts.json`.
 * Throws (so the test fails, never skips) when it has not been built.
 */
export function artifact(pkg) {
  const target = process.env.CARGO_TARGET_DIR ?? join(REPO, 'target');
  const manifest = process.env.AGENT_RECOVERY_ARTIFACTS ?? join(target, 'wasm-policies', 'artifacts.json');
  const build = 'run `cargo build --release -p agent-recovery -p agent-recovery-test-artifacts` (their build.rs build the guest components)';
  if (!existsSync(manifest)) throw new Error(`${manifest} is missing; ${build}`);
  const path = JSON.parse(readFileSync(manifest, 'utf8'))[pkg];
  if (!path || !existsSync(path)) throw new Error(`${pkg} is not built (${path ?? `not in ${manifest}`}); ${build}`);
  return path;
}

/**
 * Every vector file: [{file, cases: [{name, observation, context, expect, obsText, ctxText}]}].
 * The observation and context are kept as the raw text of the file, so a u64
 * seed (or any number) reaches the component exactly as written.
 */
export function loadVectors() {
  const files = readdirSync(VECTORS_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort();
  return files.map((file) => {
    const cases = parseLossless(readFileSync(join(VECTORS_DIR, file), 'utf8'));
    return {
      file,
      cases: cases.map((c) => ({
        ...c,
        obsText: c[RAW].observation,
        ctxText: c[RAW].context ?? '{}',
      })),
    };
  });
}

/**
 * Where `got` differs from `expected`: recursive subset on objects, exact on
 * arrays and scalars. Returns a list of "path: expected X, got Y".
 */
export function subsetDiff(expected, got, path = '$') {
  if (isObject(expected)) {
    if (!isObject(got)) return [`${path}: expected an object, got ${show(got)}`];
    return Object.keys(expected).flatMap((k) =>
      Object.hasOwn(got, k) ? subsetDiff(expected[k], got[k], `${path}.${k}`) : [`${path}.${k}: expected ${show(expected[k])}, got nothing`],
    );
  }
  return deepEqual(expected, got) ? [] : [`${path}: expected ${show(expected)}, got ${show(got)}`];
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function deepEqual(a, b) {
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return a === b;
}

export function show(v) {
  return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? `${x}n` : x));
}

/** A fake sleep that records the delays instead of waiting. */
export function fakeSleep() {
  const delays = [];
  const sleep = async (ms) => {
    delays.push(ms);
  };
  return { sleep, delays };
}

/**
 * The component with a custom section appended (valid anywhere in a component):
 * the same policy in other bytes, so it is transpiled anew, not found in a cache.
 */
export function withCustomSection(bytes, name) {
  const payload = Buffer.concat([Buffer.from([name.length]), Buffer.from(name), Buffer.from(String(Date.now()))]);
  if (payload.length > 127) throw new Error('section too long for a one-byte size');
  return Buffer.concat([bytes, Buffer.from([0, payload.length]), payload]);
}

const ajv = new Ajv2020({ allErrors: true, strict: false });
const validators = new Map();

/**
 * Where `value` breaks docs/schema/<name>.schema.json (`envelope`, `decision`,
 * `code-info`), validated by ajv (draft 2020-12); [] when it conforms.
 */
export function schemaViolations(name, value) {
  if (!validators.has(name)) {
    const schema = JSON.parse(readFileSync(join(REPO, 'docs', 'schema', `${name}.schema.json`), 'utf8'));
    validators.set(name, ajv.compile(schema));
  }
  const validate = validators.get(name);
  if (validate(value)) return [];
  return validate.errors.map((e) => `${name} schema: ${e.instancePath || '/'} ${e.message}`);
}

/** The expectation kinds a vector case may name; every runner fails on any other. */
export const EXPECT_KINDS = Object.freeze(['envelope', 'decision', 'error']);

/** A URL of 127.0.0.1 whose port nothing listens on: bind one, then close it. */
export async function closedPort() {
  const s = createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/** What a call threw (the call must fail). */
export async function thrown(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('the call succeeded; it was meant to fail');
}

/**
 * Runs every loop vector (tests/loops/, each file on a fresh MemoryStore) and
 * records each `advance` of `loop` while they run: `{state, input, out}` in
 * call order (`out` is absent when the call threw).
 */
export async function recordAdvances(loop) {
  const calls = [];
  const advance = loop.advance;
  loop.advance = function (state, input) {
    const call = { state, input };
    calls.push(call);
    call.out = advance.call(this, state, input);
    return call.out;
  };
  try {
    const dir = join(REPO, 'tests', 'loops');
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
      const store = new MemoryStore();
      for (const r of JSON.parse(readFileSync(join(dir, file), 'utf8')).runs) await runScenario(JSON.stringify(r.scenario), store);
    }
  } finally {
    loop.advance = advance;
  }
  return calls;
}
