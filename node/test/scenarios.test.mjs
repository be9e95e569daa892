// The shared scenario vectors (tests/scenarios/, README.md there): the
// component parses and checks every scenario; each invalid one gives its
// message byte for byte (through runScenario, as a ScenarioError of kind
// invalid), each valid one its plan (as jco lifts it, in the vectors' notation).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseLossless, stringify } from '../src/json.js';
import { LoopComponent } from '../src/loop.js';
import { ScenarioError, runScenario } from '../src/scenario.js';

const DIR = fileURLToPath(new URL('../../tests/scenarios/', import.meta.url));
const read = (name) => parseLossless(readFileSync(join(DIR, name), 'utf8'));

const outcomes = (list) => list.map((o) => (o.tag === 'ok' ? 'ok' : { observation: o.val }));
const opt = (v) => (v === undefined ? null : v);

function step(s) {
  return {
    id: s.id,
    tool: s.tool,
    call: opt(s.call),
    target: opt(s.target),
    args: opt(s.args),
    side_effect: s.sideEffect,
    idempotent: opt(s.idempotent),
    checkpoint: opt(s.checkpoint),
    outcomes: outcomes(s.outcomes),
    fallbacks: s.fallbacks.map((f) => ({ target: f.target, outcomes: outcomes(f.outcomes) })),
    compensation: s.compensation === undefined || s.compensation === null ? null : outcomes(s.compensation),
    replay_of: opt(s.replayOf),
  };
}

/** The plan in the vectors' notation, members in the README's order. */
function notation(p) {
  return {
    run_id: p.runId,
    seed: opt(p.seed),
    now_ms: p.nowMs,
    config: p.config,
    cancel_at_ms: opt(p.cancelAtMs),
    kill_after_calls: opt(p.killAfterCalls),
    recover: p.recover,
    steps: p.steps.map((s) => (s.tag === 'fanout' ? { fanout: { id: s.val.id, min_results: s.val.minResults, branches: s.val.branches.map(step) } } : { step: step(s.val) })),
  };
}

test('every invalid scenario vector gives its message, byte for byte', async () => {
  const vectors = read('invalid.json');
  assert.ok(vectors.length >= 30);
  for (const v of vectors) {
    await assert.rejects(runScenario(v.text), (e) => {
      assert.ok(e instanceof ScenarioError, v.name);
      assert.equal(e.kind, 'invalid', v.name);
      assert.equal(e.message, v.message, v.name);
      return true;
    });
  }
});

test('every valid scenario vector gives its plan', async () => {
  const loop = await LoopComponent.load();
  const vectors = read('valid.json');
  assert.ok(vectors.length >= 5);
  for (const v of vectors) {
    const { plan, message } = loop.parseScenario(v.text);
    assert.equal(message, undefined, v.name);
    // u64s are BigInts on both sides (jco; parseLossless past 2^53), written as bare integers.
    assert.equal(stringify(notation(plan)), stringify(v.plan), v.name);
  }
});

test('a scenario given as an object is checked by the component the same way', async () => {
  await assert.rejects(runScenario({ run_id: 'r', now_ms: -1, steps: [] }), (e) => e.kind === 'invalid' && e.message === 'scenario: `now_ms` must be u64, got -1; see docs/runtime.md, "Scenarios", for the format');
});
