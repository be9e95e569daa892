// The loop vectors (tests/loops/*.json) through the real component and the
// real Node Runtime, on a virtual clock: the rules of host/tests/loops.rs.
// Each vector's runs share one fresh MemoryStore, in order; the expectation
// is matched as a subset (objects member by member, arrays element by element
// with the same length); every attempt of a step carries one key; running a
// vector twice gives the same bytes.

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { Failed, JOURNAL_PREFIX, MemoryStore, Runtime, VirtualClock, runScenario } from '../src/index.js';
import { STEP_AND_END, WITH_FIRST_STEP } from '../src/run.js';
import { prepareStep } from '../src/step.js';
import { REPO } from './helpers.mjs';

const DIR = join(REPO, 'tests', 'loops');
const VECTORS = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((file) => ({ file, v: JSON.parse(readFileSync(join(DIR, file), 'utf8')) }));

/** Where `actual` does not contain `expected` (docs/runtime.md, "Loop vectors"). */
function subset(expected, actual, path) {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected)) {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return [`${path}: expected an object, got ${JSON.stringify(actual)}`];
    return Object.keys(expected).flatMap((k) =>
      Object.hasOwn(actual, k) ? subset(expected[k], actual[k], `${path}.${k}`) : [`${path}.${k}: missing in ${JSON.stringify(actual)}`],
    );
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${path}: expected an array, got ${JSON.stringify(actual)}`];
    if (expected.length !== actual.length) return [`${path}: expected ${expected.length} items, got ${actual.length}: ${JSON.stringify(actual)}`];
    return expected.flatMap((e, i) => subset(e, actual[i], `${path}[${i}]`));
  }
  return expected === actual ? [] : [`${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`];
}

async function runVector(v, endWithLastStep = false, withFirstStep = false) {
  const store = new MemoryStore();
  const out = [];
  for (const r of v.runs) {
    const o = await runScenario(JSON.stringify(r.scenario), store, { endWithLastStep, withFirstStep });
    // The run ids with a journal entry after the run, in key order (`expect.journal`).
    o.journal = store.keys(JOURNAL_PREFIX, Number.MAX_SAFE_INTEGER).map((k) => k.slice(JOURNAL_PREFIX.length));
    // The named keys' values (null: absent) when the run ended: its now_ms plus its last event's t_ms (`expect.store`).
    if (r.expect.store !== undefined) {
      const events = JSON.parse(o.json).events;
      const end = r.scenario.now_ms + (events.length ? events[events.length - 1].t_ms : 0);
      o.store = Object.fromEntries(Object.keys(r.expect.store).map((k) => [k, JSON.parse(store.get(k, end)?.value ?? 'null')]));
    }
    out.push(o);
  }
  return out;
}

test('there are loop vectors', () => {
  assert.ok(VECTORS.length >= 16, `expected the loop vectors in ${DIR}`);
});

for (const { file, v } of VECTORS) {
  test(`loop vector ${file}`, async () => {
    const outs = await runVector(v);
    const failures = [];
    v.runs.forEach((r, i) => {
      const actual = JSON.parse(outs[i].json);
      if (r.expect.journal !== undefined) actual.journal = outs[i].journal;
      if (r.expect.store !== undefined) actual.store = outs[i].store;
      failures.push(...subset(r.expect, actual, `${file} run ${i}`));
      // Every attempt of a step carries one key; a compensation its own.
      const keys = new Map();
      for (const e of actual.events) {
        if (e.event !== 'attempt') continue;
        assert.match(e.key, /^[0-9a-f]{64}$/, `${file}: key is a sha256`);
        const comp = e.call === 'compensation';
        const id = `${e.step}/${comp}`;
        if (!keys.has(id)) keys.set(id, e.key);
        assert.equal(keys.get(id), e.key, `${file}: step ${e.step} changed its key between attempts`);
        if (comp) assert.notEqual(keys.get(`${e.step}/false`), e.key, `${file}: a compensation reuses its step's key`);
      }
    });
    assert.deepEqual(failures, []);
    // The same scenario gives the same bytes.
    const again = await runVector(v);
    assert.deepEqual(
      again.map((o) => o.json),
      outs.map((o) => o.json),
    );
  });
}

// docs/runtime.md, "Inputs": a `step` with `"end": true` ends the run as the
// step then `end` do. Every vector, its last step sent with `end`, gives the
// same bytes and the same journal as the step then `end`.
for (const { file, v } of VECTORS) {
  test(`loop vector ${file}, the last step sent with end`, async () => {
    const [fused, plain] = [await runVector(v, true), await runVector(v, false)];
    assert.deepEqual(
      fused.map((o) => [o.json, o.journal]),
      plain.map((o) => [o.json, o.journal]),
    );
  });
}

// docs/runtime.md, "Inputs": the `run` input carrying the run's first step
// is `run` then that step. Every vector, its first step sent in the `run`
// input (and its last with `end`, as a door runs), gives the same bytes, the
// same journal and the same store as `run`, the steps, then `end`.
for (const { file, v } of VECTORS) {
  test(`loop vector ${file}, the first step sent in the run input`, async () => {
    const dump = (o) => [o.json, o.journal];
    const plain = (await runVector(v)).map(dump);
    assert.deepEqual((await runVector(v, false, true)).map(dump), plain);
    assert.deepEqual((await runVector(v, true, true)).map(dump), plain);
  });
}

test('a run of one step, its end and its run input in the calls of the step alone', async () => {
  const advances = async (withFirstStep) => {
    const rt = await Runtime.create({ store: new MemoryStore(), clock: new VirtualClock(1_767_225_600_000), seed: 7 });
    const loop = rt.loop;
    const inputs = [];
    rt.loop = { advance: (state, input) => (inputs.push(JSON.parse(input).input), loop.advance(state, input)) };
    const run = rt.run('r', { [WITH_FIRST_STEP]: withFirstStep });
    const report = await run[STEP_AND_END](prepareStep({ id: 's', tool: 'search', operation: () => ({ hits: 1 }) }));
    return [inputs, report.outcome, report.value, run.finished, run.events];
  };
  const [fused, plain] = [await advances(true), await advances(false)];
  assert.deepEqual(fused[0], ['run', 'attempt']);
  assert.deepEqual(plain[0], ['run', 'step', 'attempt']);
  assert.deepEqual(fused.slice(1), plain.slice(1));
  assert.deepEqual(fused.slice(1, 4), ['ok', { hits: 1 }, 'completed']);
});

// docs/runtime.md, "Inputs": runtime.run(id) notes the time and calls the
// loop nothing; the first step sends the `run` input with `started_ms`. The
// run is the one whose `run` input went at once: its deadline and its events'
// t_ms count from run(id), byte for byte, one loop call fewer.
test('a run sends its run input with its first step, started when run() was called', async () => {
  const drive = async (atOnce, failFirst, waitMs = 6_000) => {
    const clock = new VirtualClock(1_767_225_600_000);
    const rt = await Runtime.create({ store: new MemoryStore(), clock, seed: 7, config: { deadline_ms: 5000 } });
    const loop = rt.loop;
    const inputs = [];
    rt.loop = { advance: (state, input) => (inputs.push(JSON.parse(input).input), loop.advance(state, input)) };
    const run = rt.run('r', atOnce ? { [WITH_FIRST_STEP]: false } : {});
    clock.advance(waitMs);
    const operation = (c) => (failFirst && c.attempt === 1 ? new Failed({ source: 'http', status: 503 }) : { hits: 1 });
    const report = await run.step({ id: 's', tool: 'search', call: 'tool', operation });
    return [inputs, [report.outcome, report.value, run.events]];
  };
  let late;
  for (const failFirst of [false, true]) {
    const atOnce = await drive(true, failFirst);
    late = await drive(false, failFirst);
    assert.deepEqual(late[1], atOnce[1]);
    assert.deepEqual(atOnce[0].slice(0, 2), ['run', 'step']);
    assert.deepEqual(late[0], ['run', ...atOnce[0].slice(2)]);
  }
  // 6 s after run(id) with a 5 s deadline, the failed attempt is not retried.
  assert.equal(late[1][0], 'dead_lettered');
  assert.ok(late[1][2].every((e) => JSON.parse(e).t_ms >= 6_000));
  const [inputs, [outcome, value]] = await drive(false, false, 10);
  assert.deepEqual([inputs, outcome, value], [['run', 'attempt'], 'ok', { hits: 1 }]);
});

// docs/runtime.md, "A claim in the call's batch": the idempotency claim and
// the call come in one batch; when another worker's mark wins the race
// between the read and the claim, the runtime stops the batch there: no
// call, no attempt count, no journal entry, and the step ends `in_flight`.
test('a claim lost in the call batch makes no call', async () => {
  class Racing extends MemoryStore {
    compareAndSet(key, expected, value, ttlMs, nowMs) {
      if (key.startsWith('agent-recovery/idem/') && this.get(key, nowMs) === null) {
        super.compareAndSet(key, null, '{"since_ms":1,"status":"in_flight"}', null, nowMs);
      }
      return super.compareAndSet(key, expected, value, ttlMs, nowMs);
    }
  }
  const store = new Racing();
  const rt = await Runtime.create({ store, clock: new VirtualClock(1_767_225_600_000), seed: 7 });
  const loop = rt.loop;
  const inputs = [];
  rt.loop = { advance: (state, input) => (inputs.push(JSON.parse(input).input), loop.advance(state, input)) };
  const made = [];
  const run = rt.run('r');
  const report = await run.step({ id: 's', tool: 'search', call: 'tool', operation: (c) => (made.push(c), 1) });
  assert.deepEqual([report.outcome, made, inputs], ['in_flight', [], ['run', 'claimed']]);
  assert.deepEqual(run.events.map((e) => JSON.parse(e).event), ['in_flight', 'outcome']);
  assert.equal(await store.get(`${JOURNAL_PREFIX}r`, 1_767_225_600_000), null);
});

test('a step sent with end ends the run in the same advance', async () => {
  const advances = async (fused) => {
    const rt = await Runtime.create({ store: new MemoryStore(), clock: new VirtualClock(1_767_225_600_000), seed: 7 });
    const loop = rt.loop;
    const inputs = [];
    rt.loop = { advance: (state, input) => (inputs.push(input), loop.advance(state, input)) };
    const run = rt.run('r');
    const step = { id: 's', tool: 'search', operation: () => ({ hits: 1 }) };
    let report;
    if (fused) report = await run[STEP_AND_END](prepareStep(step));
    else {
      report = await run.step(step);
      await run.end();
    }
    return [inputs.length, report.outcome, report.value, run.finished];
  };
  const [fused, plain] = [await advances(true), await advances(false)];
  assert.deepEqual(fused, [plain[0] - 1, 'ok', { hits: 1 }, 'completed']);
  assert.deepEqual(plain.slice(1), ['ok', { hits: 1 }, 'completed']);
});

const OK_SCENARIO = { run_id: 'r', seed: 7, now_ms: 1_767_225_600_000, steps: [{ id: 'a', tool: 't', outcomes: ['ok'] }] };

test('a bad scenario is a ScenarioError of kind invalid, as in Rust', async () => {
  const { ScenarioError } = await import('../src/index.js');
  const bad = [
    'not json',
    '[]',
    { ...OK_SCENARIO, extra: 1 },
    { ...OK_SCENARIO, run_id: '' },
    { ...OK_SCENARIO, steps: [] },
    { run_id: 'r', steps: [{ id: 'a', tool: 't' }] },
    { ...OK_SCENARIO, steps: [{ id: 'a', tool: 't', outcomes: [3] }] },
    { ...OK_SCENARIO, steps: [{ id: 'a', tool: 't' }, { id: 'a', tool: 't' }] },
    { ...OK_SCENARIO, steps: [{ id: 'a' }] },
    { ...OK_SCENARIO, steps: [{ id: 'a', tool: 't', outcomes: [] }] }, // a call finds no outcome left
    { ...OK_SCENARIO, steps: [{ id: 'f', tool: 't', fanout: { min_results: 1, branches: [{ id: 'b', tool: 't', outcomes: ['ok'] }] } }] },
  ];
  for (const s of bad) {
    await assert.rejects(runScenario(typeof s === 'string' ? s : JSON.stringify(s)), (e) => e instanceof ScenarioError && e.kind === 'invalid', JSON.stringify(s));
  }
  // A bad run configuration is refused by the loop: a runtime error.
  await assert.rejects(runScenario({ ...OK_SCENARIO, config: { attempt_budget: 'x' } }), (e) => e instanceof ScenarioError && e.kind === 'runtime');
});

test('the batch driver: one store per line, one output line per scenario, errors by kind', () => {
  const lines = [
    JSON.stringify([OK_SCENARIO, OK_SCENARIO]), // the second run finds the first's cached key
    JSON.stringify([{ ...OK_SCENARIO, run_id: '' }, OK_SCENARIO]),
  ].join('\n');
  const r = spawnSync(process.execPath, [join(REPO, 'node', 'scripts', 'scenarios.mjs')], { input: `${lines}\n`, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = r.stdout.trim().split('\n');
  assert.equal(out.length, 4);
  assert.deepEqual(JSON.parse(out[0]).events.map((e) => e.event), ['attempt', 'ok', 'outcome']);
  assert.deepEqual(JSON.parse(out[1]).events.map((e) => e.event), ['cached', 'outcome']);
  assert.equal(out[2], '{"error":"invalid"}');
  // A fresh store for the second line: the key is not cached there.
  assert.deepEqual(JSON.parse(out[3]).events.map((e) => e.event), ['attempt', 'ok', 'outcome']);
});

test('a second implementation: the Rust `agent-recovery simulate --json` prints the same bytes for every vector', async () => {
  const { existsSync, mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const target = process.env.CARGO_TARGET_DIR ?? join(REPO, 'target');
  const exe = join(target, 'release', 'agent-recovery');
  assert.ok(existsSync(exe), `${exe} is missing; run \`cargo build --release -p agent-recovery-cli\``);
  const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-loops-'));
  try {
    for (const { file, v } of VECTORS) {
      // The runs of a vector share one store: a SQLite file for the CLI, one MemoryStore here.
      const db = join(dir, `${file}.db`);
      const ours = await runVector(v);
      v.runs.forEach((r, i) => {
        const path = join(dir, `${file}.${i}.json`);
        writeFileSync(path, JSON.stringify(r.scenario));
        const out = spawnSync(exe, ['simulate', path, '--json', '--store', db], { encoding: 'utf8' });
        assert.equal(out.status, 0, out.stderr);
        assert.equal(ours[i].json, out.stdout.trim(), `${file} run ${i}`);
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
