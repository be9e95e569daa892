// Every case of tests/vectors/*.json, against the real component through jco.
// The same files are read by the Rust and Python tests.

import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { Policy, PolicyError } from '../src/index.js';
import { parseLossless } from '../src/json.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXPECT_KINDS, REPO, loadVectors, schemaViolations, show, subsetDiff } from './helpers.mjs';

const files = loadVectors();
let policy;
before(async () => {
  policy = await Policy.load();
});

test('the vector files hold cases', () => {
  assert.ok(files.length > 0, 'no tests/vectors/*.json found');
  assert.ok(files.every((f) => f.cases.length > 0));
});

for (const { file, cases } of files) {
  describe(file, () => {
    for (const c of cases) {
      test(c.name, () => {
        const failures = [];
        for (const kind of Object.keys(c.expect)) {
          if (!EXPECT_KINDS.includes(kind)) failures.push(`  unknown expectation kind ${JSON.stringify(kind)} (this runner checks ${EXPECT_KINDS.join(', ')})`);
        }
        if (c.expect.envelope !== undefined) {
          failures.push(...check('envelope', c.expect.envelope, () => policy.classifyJson(c.obsText), 'envelope'));
        }
        if (c.expect.decision !== undefined) {
          failures.push(...check('decision', c.expect.decision, () => policy.decideJson(c.obsText, c.ctxText), 'decision'));
        }
        if (c.expect.error !== undefined) {
          failures.push(...checkError('classify error', c.expect.error, () => policy.classifyJson(c.obsText)));
          if (c.context !== undefined) {
            failures.push(...checkError('decide error', c.expect.error, () => policy.decideJson(c.obsText, c.ctxText)));
          }
        }
        if (failures.length > 0) assert.fail(`vector ${JSON.stringify(c.name)} (${file})\n${failures.join('\n')}`);
      });
    }
  });
}

/** `expected` is a subset of the PolicyError's {kind, message}. */
function checkError(what, expected, run) {
  let text;
  try {
    text = run();
  } catch (e) {
    if (!(e instanceof PolicyError)) return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      ${e}`];
    const diff = subsetDiff(expected, { kind: e.kind, message: e.message });
    if (diff.length === 0) return [];
    return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      PolicyError ${e.kind}: ${e.message}`, ...diff.map((d) => `    ${d}`)];
  }
  return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      ${text}`];
}

function check(what, expected, run, schema) {
  let text;
  try {
    text = run();
  } catch (e) {
    const got = e instanceof PolicyError ? `PolicyError ${e.kind}: ${e.message}` : String(e);
    return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      ${got}`];
  }
  // Every envelope and decision produced must match the published schema.
  const diff = [...schemaViolations(schema, JSON.parse(text)), ...subsetDiff(expected, parseLossless(text))];
  if (diff.length === 0) return [];
  return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      ${text}`, ...diff.map((d) => `    ${d}`)];
}

// tests/vectors/keys/keys.json: keys computed by an independent implementation
// of the documented canonical form (tests/vectors/tools/keys.py).
test('idempotency keys match the independent implementation', () => {
  const cases = JSON.parse(readFileSync(join(REPO, 'tests', 'vectors', 'keys', 'keys.json'), 'utf8'));
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    const got = policy.key({ runId: c.run_id, stepId: c.step_id, tool: c.tool, argsJson: c.args_json });
    assert.equal(got, c.key, `${c.name}: canonical form ${c.canonical}`);
  }
});

test('a schema violation is reported', () => {
  const decision = JSON.parse(policy.decideJson('{"source":"http","status":503}', '{}'));
  assert.deepEqual(schemaViolations('decision', decision), []);
  decision.action = 'retry_later';
  decision.envelope.class = true;
  assert.ok(schemaViolations('decision', decision).length >= 2);
});

test('every registry row matches the code-info schema', () => {
  const rows = policy.registry();
  assert.ok(rows.length > 50);
  assert.deepEqual(rows.flatMap((r) => schemaViolations('code-info', r)), []);
});
