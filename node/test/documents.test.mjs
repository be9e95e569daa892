// tests/vectors/documents/*.json through the real component: each file's
// policy document packed into the reference component (packDocument),
// loaded (its smoke set runs at load) and run on every case. The Rust and
// Python suites run the same files.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Policy, PolicyError, PolicyLoadError, PolicyRuntimeError, SLOT_MARKER, packDocument } from '../src/index.js';
import { VECTORS_DIR, show, subsetDiff } from './helpers.mjs';

const DIR = join(VECTORS_DIR, 'documents');
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({ file: f, vector: JSON.parse(readFileSync(join(DIR, f), 'utf8')) }));

test('the document vector files hold cases', () => {
  assert.ok(files.length > 0 && files.every((f) => f.vector.cases.length > 0));
});

/** The canonical text, written here independently: keys sorted, no whitespace. */
function sorted(v) {
  if (Array.isArray(v)) return v.map(sorted);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
  return v;
}

for (const { file, vector } of files) {
  test(`documents/${file}`, async () => {
    const policy = await Policy.load(await packDocument(vector.document));
    const digest = createHash('sha256').update(JSON.stringify(sorted(vector.document))).digest('hex');
    const info = policy.describe();
    assert.equal(info.name, vector.document.name);
    assert.ok(info.description.endsWith(`(policy document sha256:${digest})`), info.description);
    const failures = [];
    for (const c of vector.cases) {
      const obs = JSON.stringify(c.observation);
      const ctx = JSON.stringify(c.context ?? {});
      const diff = [];
      if (c.expect.envelope) diff.push(...subsetDiff(c.expect.envelope, JSON.parse(policy.classifyJson(obs))));
      let got;
      try {
        got = JSON.parse(policy.decideJson(obs, ctx));
      } catch (e) {
        if (!(e instanceof PolicyError)) throw e;
        got = { error: { kind: e.kind, message: e.message } };
      }
      if (c.expect.decision) diff.push(...subsetDiff(c.expect.decision, got));
      if (c.expect.error) diff.push(...subsetDiff({ error: c.expect.error }, got));
      if (diff.length > 0) failures.push(`${c.name}: expected ${show(c.expect)}\n  got ${JSON.stringify(got)}\n  ${diff.join('\n  ')}`);
    }
    assert.deepEqual(failures, []);
  });
}

test('an invalid document fails at load with its path named', async () => {
  const doc = {
    format: 1,
    name: 'x',
    version: '1.0.0',
    overrides: { codes: { 'llm.http.409_conflict': { action: 'retyr' } } },
    smoke_tests: [{ observation: { source: 'http', status: 503 }, expect: { action: 'retry' } }],
  };
  await assert.rejects(Policy.load(await packDocument(doc)), (e) => {
    assert.ok(e instanceof PolicyLoadError, String(e));
    assert.match(e.message, /overrides\.codes\["llm\.http\.409_conflict"\]\.action: unknown action "retyr"/);
    return true;
  });
});

test('a packed component is not packed again', async () => {
  const packed = await packDocument(files[0].vector.document);
  await assert.rejects(packDocument(files[0].vector.document, packed), (e) => {
    assert.ok(e instanceof PolicyRuntimeError);
    assert.equal(e.code, 'invalid-argument');
    assert.match(e.message, /already holds a policy document/);
    return true;
  });
  assert.equal(SLOT_MARKER.length, 32);
});
