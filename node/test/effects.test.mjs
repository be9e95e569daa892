// How the driver reads a batch of effects (src/run.js effectsOf): the text is
// scanned once for each effect's members, which are parsed one by one, except
// a value to store (handed on as text). Every batch the
// loop vectors make reads as JSON.parse reads it; a malformed batch is refused.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolicyRuntimeError, Runtime } from '../src/index.js';
import { effectsOf } from '../src/run.js';
import { recordAdvances } from './helpers.mjs';

const RAW = (fx) => fx[Object.getOwnPropertySymbols(fx)[0]];

test('every batch of every loop vector reads as JSON.parse reads it, with each member kept as its text', async () => {
  const loop = (await Runtime.create()).loop;
  const batches = (await recordAdvances(loop)).filter((c) => c.out !== undefined).map((c) => c.out.effects);
  assert.ok(batches.length > 500, `${batches.length} batches`);
  const kinds = new Set();
  for (const text of batches) {
    const parsed = JSON.parse(text);
    const read = effectsOf(text);
    assert.equal(read.length, parsed.length, text);
    read.forEach((fx, i) => {
      kinds.add(fx.effect);
      const raw = RAW(fx);
      assert.deepEqual(Object.keys(raw), Object.keys(parsed[i]), text);
      for (const [name, value] of Object.entries(parsed[i])) {
        // Each member's text is the member as written, and parses to it.
        assert.deepEqual(JSON.parse(raw[name]), value, `${name} in ${text}`);
        if (name === 'value') assert.equal(fx[name], undefined);
        else assert.deepEqual(fx[name], value, `${name} in ${text}`);
      }
    });
    // The members' texts, put back together, are the batch.
    assert.equal(`[${read.map((fx) => `{${Object.entries(RAW(fx)).map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`).join(',')}]`, text);
  }
  for (const k of ['read', 'claim', 'write', 'call', 'emit', 'finish', 'decide', 'sleep', 'delete', 'append', 'swap', 'fork']) assert.ok(kinds.has(k), k);
});

test('a batch read with the state the loop returned with it reads as without it', async () => {
  const loop = (await Runtime.create()).loop;
  const outs = (await recordAdvances(loop)).filter((c) => c.out !== undefined).map((c) => c.out);
  let journaled = 0;
  for (const { state, effects } of outs) {
    if (effects.includes(state)) journaled += 1;
    const plain = effectsOf(effects);
    const hinted = effectsOf(effects, state);
    assert.deepEqual(hinted.map(RAW), plain.map(RAW), effects);
    assert.deepEqual(hinted, plain, effects);
  }
  // The state is found in the batches that write the journal.
  assert.ok(journaled > 100, `${journaled} batches hold their state`);
});

test('a known object is jumped over only where it is, nested or not', () => {
  const known = '{"a":"}{","b":[{"c":1}]}';
  for (const text of [
    `[{"effect":"write","value":{"x":${known},"y":1}}]`,
    `[{"effect":"write","value":${known}},{"effect":"emit","event":{"t_ms":0}}]`,
    `[{"effect":"write","value":{"k":"${known.replaceAll('"', '\\"')}"}}]`,
    `[{"effect":"write","value":{"x":{"a":"}{"}}}]`,
  ]) {
    assert.deepEqual(effectsOf(text, known).map(RAW), effectsOf(text).map(RAW), text);
    const members = effectsOf(text, known).map((fx) => Object.fromEntries(Object.entries(RAW(fx)).map(([k, v]) => [k, JSON.parse(v)])));
    assert.deepEqual(members, JSON.parse(text), text);
  }
});

test('escaped strings and names, numbers and nesting read as JSON.parse reads them', () => {
  const text = '[ {"effect":"emit","event":{"t_ms":0,"s":"a\\"]}b","n":[1,{"x":"}"}]},"k\\u0065y":"q\\\\","n":-1.5e3,"t":true} , {"effect":"finish","result":"\\u00e9","a":10,"z":0,"f":false,"i":900719925474099,"b":12345678901234567,"e":1e2} ]';
  const read = effectsOf(text);
  const parsed = JSON.parse(text);
  assert.deepEqual(read.map((fx) => Object.fromEntries(Object.entries(fx))), parsed);
  assert.equal(RAW(read[0]).event, '{"t_ms":0,"s":"a\\"]}b","n":[1,{"x":"}"}]}');
});

test('a malformed batch is refused as invalid output of the loop', () => {
  for (const [text, what] of [
    ['not json', 'not an array'],
    ['{}', 'not an array'],
    ['[1]', 'not an object'],
    ['[{"effect":"emit",}]', 'not JSON'],
    ['[{"effect" "emit"}]', 'not JSON'],
    ['[{effect:"emit"}]', 'not JSON'],
    ['[{"effect":}]', 'not JSON'],
    ['[{"effect":"emit"}] x', 'not JSON'],
    ['[] x', 'not JSON'],
    ['[{"effect":"emit"}', 'not JSON'],
    ['[{"effect":01}]', 'not JSON'],
    ['[{"effect":"emit","event":{"t_ms":1}]', 'not JSON'],
    ['[{"effect":"emi\\t"x}]', 'not JSON'],
    ['[{"effect":"emit","event":nul}]', 'not JSON'],
  ]) {
    assert.throws(
      () => effectsOf(text),
      (e) => e instanceof PolicyRuntimeError && e.code === 'invalid-output' && e.message.includes(`(${what})`),
      text,
    );
  }
});
