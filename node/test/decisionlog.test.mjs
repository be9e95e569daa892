// The decision log (docs/decision-logs.md) through the real component: the
// shared vector tests/vectors/decision_log/lines.json byte for byte (the
// same lines the Rust and Python runtimes write), the file sink, and the
// option checks.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Failed, Policy, Runtime, VirtualClock } from '../src/index.js';
import { VECTORS_DIR } from './helpers.mjs';

const VECTOR = JSON.parse(readFileSync(join(VECTORS_DIR, 'decision_log', 'lines.json'), 'utf8'));

let policy;
let dir;
before(async () => {
  policy = await Policy.load();
  dir = mkdtempSync(join(tmpdir(), 'agent-recovery-decisionlog-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs one case of the vector with `decisionLog` (its observation option added). */
async function runCase(c, decisionLog) {
  const runtime = await Runtime.create({
    policy,
    clock: new VirtualClock(c.now_ms),
    seed: c.seed,
    decisionLog: { observation: c.observation, ...decisionLog },
  });
  const run = runtime.run(c.run_id);
  for (const s of c.steps) {
    await run.step({
      id: s.id,
      tool: s.tool,
      call: s.call,
      operation: ({ attempt }) => {
        const o = s.outcomes[attempt - 1] ?? { source: 'http', status: 500 };
        if (o === 'ok') return null;
        throw new Failed(o);
      },
    });
  }
}

const expected = (c) => c.lines.map((l) => l.replaceAll('$REFERENCE', `sha256:${policy.describe().sha256}`));

test('the shared vector, byte for byte', async () => {
  for (const c of VECTOR.cases) {
    const lines = [];
    await runCase(c, { write: (line) => lines.push(line) });
    assert.deepEqual(lines, expected(c), c.name);
  }
});

test('a file sink appends the same lines', async () => {
  const c = VECTOR.cases[0];
  const path = join(dir, 'decisions.jsonl');
  await runCase(c, { path });
  assert.equal(readFileSync(path, 'utf8'), `${expected(c).join('\n')}\n`);
});

test('bad options are refused with a hint', async () => {
  await assert.rejects(Runtime.create({ policy, decisionLog: { path: 'a', write: () => {} } }), /exactly one of path/);
  await assert.rejects(Runtime.create({ policy, decisionLog: { file: 'a' } }), /unknown option "file"/);
  await assert.rejects(Runtime.create({ policy, decisionLog: { write: () => {}, maxRecordBytes: 100 } }), /max_record_bytes is 100.*e\.g\. 65536/);
  await assert.rejects(Runtime.create({ policy, decisionLog: { write: () => {}, observation: 'all' } }), /'full' or 'digest'/);
});
