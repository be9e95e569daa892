// The telemetry mapping's shared vectors (tests/telemetry-map/lanes.json,
// also run by the guest, the Rust host and Python) through the reference
// component's `map-lane-json` as the Node runtime calls it (jco's bindings):
// all observations in one call, then one call per observation with the state
// carried; the instructions must equal the vector's, value for value.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LoopComponent } from '../src/loop.js';
import { REPO } from './helpers.mjs';

const { cases } = JSON.parse(readFileSync(join(REPO, 'tests', 'telemetry-map', 'lanes.json'), 'utf8'));

test('every telemetry-map vector, in one call and one observation at a time', async () => {
  const loop = await LoopComponent.load();
  assert.ok(cases.length >= 7, 'the vectors are all there');
  for (const c of cases) {
    const all = loop.mapLaneJson('', JSON.stringify(c.observations));
    assert.deepStrictEqual(JSON.parse(all.instructions), c.instructions, `case ${c.name}`);
    let state = '';
    const got = [];
    for (const o of c.observations) {
      const out = loop.mapLaneJson(state, JSON.stringify([o]));
      state = out.state;
      got.push(...JSON.parse(out.instructions));
    }
    assert.deepStrictEqual(got, c.instructions, `case ${c.name}, one observation per call`);
  }
});

test('a lane that does not start with `lane` is refused with the component error', async () => {
  const loop = await LoopComponent.load();
  assert.throws(() => loop.mapLaneJson('', '[{"now_ms":1,"kind":"call_end"}]'), /starts with a `lane` observation/);
});
