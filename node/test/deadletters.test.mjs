// The dead-letter lifecycle vectors (tests/deadletters/*.json) through the
// component's `agent:recovery/dead-letters@0.3.0`, with jco's bindings, as
// the Node runtime calls it (`runtime.loop.deadLetters`): every answer byte
// for byte as the vectors give it (guest/tests/deadletters.rs runs the same).

import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LoopComponent } from '../src/loop.js';
import { REPO } from './helpers.mjs';

const DIR = join(REPO, 'tests', 'deadletters');
const FILES = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();

/** WIT u64 parameters (BigInt in jco), by function. */
const U64 = {
  apply: [1, 4],
  finish: [1, 3],
  'replay-key': [1],
  'replay-step': [0, 2],
  depth: [0],
  'depth-event': [0, 1, 2, 3],
};

const camel = (name) => name.replace(/-([a-z])/g, (_, c) => c.toUpperCase());

/** A value jco returned, as the vectors write it (BigInt as a number, none as null, records as plain objects). */
function plain(v) {
  if (typeof v === 'bigint') return Number(v);
  if (v === undefined || v === null) return null;
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

function call(loop, name, args) {
  const big = U64[name] ?? [];
  const params = args.map((a, i) => (big.includes(i) ? BigInt(a) : a === null ? undefined : a));
  try {
    return { ok: plain(loop.deadLetters(name, (dl) => dl[camel(name)](...params))) };
  } catch (e) {
    if (e?.payload === undefined) throw e;
    return { err: plain(e.payload) };
  }
}

test('every dead-letter vector, byte for byte, through jco', async () => {
  const loop = await LoopComponent.load();
  let count = 0;
  for (const file of FILES) {
    const { cases } = JSON.parse(readFileSync(join(DIR, file), 'utf8'));
    for (const c of cases) {
      const want = 'ok' in c ? { ok: c.ok } : { err: c.err };
      assert.deepEqual(call(loop, c.call, c.args), want, `${file}: ${c.name}`);
      count += 1;
    }
  }
  assert.ok(count >= 50, `only ${count} cases`);
});
