// Every case of tests/vectors/*.json, against the real component through jco.
// The same files are read by the Rust and Python tests.

import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { Policy, PolicyError } from '../src/index.js';
import { parseLossless } from '../src/json.js';
import { loadVectors, show, subsetDiff } from './helpers.mjs';

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
        if (c.expect.envelope !== undefined) {
          failures.push(...check('envelope', c.expect.envelope, () => policy.classifyJson(c.obsText)));
        }
        if (c.expect.decision !== undefined) {
          failures.push(...check('decision', c.expect.decision, () => policy.decideJson(c.obsText, c.ctxText)));
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

function check(what, expected, run) {
  let text;
  try {
    text = run();
  } catch (e) {
    const got = e instanceof PolicyError ? `PolicyError ${e.kind}: ${e.message}` : String(e);
    return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      ${got}`];
  }
  const diff = subsetDiff(expected, parseLossless(text));
  if (diff.length === 0) return [];
  return [`  ${what} expected: ${show(expected)}`, `  ${what} got:      ${text}`, ...diff.map((d) => `    ${d}`)];
}
