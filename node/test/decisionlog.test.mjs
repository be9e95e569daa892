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

/** Runs one case of the vector with `decisionLog` (its observation option added): the runtime, each step's report, the run's events. */
async function runCase(c, decisionLog) {
  const runtime = await Runtime.create({
    policy,
    clock: new VirtualClock(c.now_ms),
    seed: c.seed,
    decisionLog: { observation: c.observation, ...decisionLog },
  });
  const run = runtime.run(c.run_id);
  const reports = [];
  for (const s of c.steps) {
    const report = await run.step({
      id: s.id,
      tool: s.tool,
      call: s.call,
      operation: ({ attempt }) => {
        const o = s.outcomes[attempt - 1] ?? { source: 'http', status: 500 };
        if (o === 'ok') return null;
        throw new Failed(o);
      },
    });
    reports.push(report);
  }
  return { runtime, reports, events: run.events };
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

for (const kind of ['a directory', '/dev/full']) {
  test(`a file that cannot be written (${kind}) is counted, warned about once, and the run goes on`, async () => {
    // Real files the log cannot write: a directory (opening it fails), /dev/full (each write fails).
    const path = kind === 'a directory' ? dir : '/dev/full';
    const c = VECTOR.cases[0];
    const without = await runCase(c, { write: () => {} });
    const warnings = [];
    const onWarning = (w) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const got = await runCase(c, { path });
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      assert.deepEqual(got.reports, without.reports);
      assert.deepEqual(got.events, without.events);
      assert.equal(got.runtime.decisionLog.failedWrites, expected(c).length);
    } finally {
      process.off('warning', onWarning);
    }
    const ours = warnings.filter((w) => w.code === 'AGENT_RECOVERY_DECISION_LOG_WRITE');
    assert.equal(ours.length, 1, ours.map((w) => w.message).join('\n'));
    assert.match(ours[0].message, new RegExp(path.replaceAll('/', '\\/')));
  });
}

test('a write(line) log counts no failed writes; no log is null', async () => {
  const { runtime } = await runCase(VECTOR.cases[0], { write: () => {} });
  assert.equal(runtime.decisionLog.failedWrites, 0);
  assert.equal((await Runtime.create({ policy })).decisionLog, null);
});

test('bad options are refused with a hint', async () => {
  await assert.rejects(Runtime.create({ policy, decisionLog: { path: 'a', write: () => {} } }), /exactly one of path/);
  await assert.rejects(Runtime.create({ policy, decisionLog: { file: 'a' } }), /unknown option "file"/);
  await assert.rejects(Runtime.create({ policy, decisionLog: { write: () => {}, maxRecordBytes: 100 } }), /max_record_bytes is 100.*e\.g\. 65536/);
  await assert.rejects(Runtime.create({ policy, decisionLog: { write: () => {}, observation: 'all' } }), /'full' or 'digest'/);
});
