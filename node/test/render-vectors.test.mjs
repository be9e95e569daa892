// tests/vectors/render/*.json: rendered outputs (subset match) and refusals, the
// same files the Rust (host/tests/vectors.rs) and Python (test_vectors.py) suites
// read. Each `ag-ui-run-error` output is also validated against the real
// `@ag-ui/core` RunErrorEventSchema (zod).

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { RunErrorEventSchema } from '@ag-ui/core/schemas';
import { Policy, PolicyError } from '../src/index.js';
import { REPO, subsetDiff } from './helpers.mjs';

const DIR = join(REPO, 'tests', 'vectors', 'render');
const cases = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .flatMap((f) => JSON.parse(readFileSync(join(DIR, f), 'utf8')).map((c) => ({ file: f, ...c })));

let policy;
before(async () => {
  policy = await Policy.load();
});

test('the render vectors hold cases with an output and a refusal', () => {
  assert.ok(cases.some((c) => c.expect.output !== undefined));
  assert.ok(cases.some((c) => c.expect.error !== undefined));
});

for (const c of cases) {
  test(`${c.file}: ${c.name}`, () => {
    if (c.expect.error !== undefined) {
      assert.throws(() => policy.render(c.envelope, c.format, c.options), (e) => e instanceof PolicyError && e.kind === c.expect.error);
      return;
    }
    const got = policy.render(c.envelope, c.format, c.options);
    assert.deepEqual(subsetDiff(c.expect.output, got), [], `expected ${JSON.stringify(c.expect.output)}\n     got ${JSON.stringify(got)}`);
    if (c.format.replaceAll('_', '-') === 'ag-ui-run-error') assert.deepEqual(RunErrorEventSchema.parse(got), got);
  });
}

test('a RUN_ERROR without its message is refused by the schema (the validation can fail)', () => {
  const got = policy.render({ code: 'llm.http.429_rate_limited' }, 'ag-ui-run-error');
  delete got.message;
  assert.equal(RunErrorEventSchema.safeParse(got).success, false);
});
