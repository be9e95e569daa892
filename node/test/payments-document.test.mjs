// The payments policy document (examples/payments-policy/policy.yaml, as JSON
// in tests/equivalence/payments.json) packed into the reference component by
// packDocument and loaded by Policy.load, against the compiled payments
// component (artifacts.json's `payments-policy`): both are asked, live, on
// every observation and context of the grid, and must answer byte for byte
// alike. The Rust and Python suites run the same grid.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Policy, PolicyError, packDocument } from '../src/index.js';
import { REPO, artifact } from './helpers.mjs';

const grid = JSON.parse(readFileSync(join(REPO, 'tests', 'equivalence', 'payments.json'), 'utf8'));

/** The component's answer: its text, or its error's kind and message. */
function answer(call) {
  try {
    return call();
  } catch (e) {
    if (!(e instanceof PolicyError)) throw e;
    return `error ${e.kind}: ${e.message}`;
  }
}

test('the payments document decides what the compiled payments component decides', async () => {
  const document = await Policy.load(await packDocument(grid.document));
  assert.equal(document.describe().name, 'payments-strict');
  const compiled = await Policy.load(readFileSync(artifact(grid.compiled)));
  const contexts = grid.contexts.map((c) => JSON.stringify(c));
  const differ = [];
  let decisions = 0;
  for (const o of grid.observations) {
    const obs = JSON.stringify(o);
    const want = answer(() => compiled.classifyJson(obs));
    const got = answer(() => document.classifyJson(obs));
    if (want !== got) differ.push(`classify ${obs}\n  compiled: ${want}\n  document: ${got}`);
    for (const ctx of contexts) {
      const want = answer(() => compiled.decideJson(obs, ctx));
      const got = answer(() => document.decideJson(obs, ctx));
      if (want !== got) differ.push(`decide ${obs} ${ctx}\n  compiled: ${want}\n  document: ${got}`);
      decisions += 1;
    }
  }
  assert.equal(decisions, grid.observations.length * grid.contexts.length);
  assert.ok(decisions > 5000, `only ${decisions} decisions compared`);
  assert.deepEqual(differ, [], `${differ.length} of ${decisions} differ`);
});
