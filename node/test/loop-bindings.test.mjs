// The loop's calls go straight to the core instance (src/loop.js, the
// canonical ABI of `advance` and `check-outcome` written out); jco's generated
// wrappers are the reference. Every call the loop vectors make, refusals,
// traps and text beyond ASCII give the same answers through both.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolicyError, PolicyRuntimeError, Runtime } from '../src/index.js';
import { compileReference } from '../src/component.js';
import { LoopComponent } from '../src/loop.js';
import { recordAdvances } from './helpers.mjs';

const direct = await LoopComponent.load();
const jco = await LoopComponent.load({ bindings: 'jco' });

/** The same answer, or the same error (class, kind, message), from both bindings. */
function same(call, what) {
  const outcome = (loop) => {
    try {
      return { value: call(loop) };
    } catch (e) {
      return { error: { type: e.constructor.name, kind: e.kind, message: e.message } };
    }
  };
  const a = outcome(direct);
  assert.deepEqual(a, outcome(jco), what);
  return a;
}

test('the direct bindings are the ones in use', () => {
  assert.equal(direct.bindings, 'direct');
  assert.equal(jco.bindings, 'jco');
  assert.throws(() => new LoopComponent(undefined, { bindings: 'fast' }), TypeError);
});

test('every advance of every loop vector gives the same state and effects through both bindings', async () => {
  // Record the calls of the shared loop while the vectors run (through the direct bindings).
  const loop = (await Runtime.create()).loop;
  assert.equal(loop.bindings, 'direct');
  const calls = (await recordAdvances(loop)).map((c) => [c.state, c.input]);
  assert.ok(calls.length > 500, `${calls.length} calls`);
  for (const [state, input] of calls) {
    const { value } = same((l) => l.advance(state, input), input);
    assert.equal(typeof value?.effects, 'string', input);
  }
});

test('refusals: the same PolicyError kind and message through both bindings', () => {
  const started = direct.advance('', '{"input":"run","now_ms":0,"run_id":"r","seed":7,"config":{}}').state;
  for (const [state, input] of [
    ['', 'not json'],
    ['', '{"input":"run"}'],
    [started, '{"input":"nonsense","now_ms":0}'],
    ['{"v":1}', '{"input":"end","now_ms":0}'],
    [started, `{"input":"run","now_ms":0,"run_id":"${'r'.repeat(5000)}","seed":7,"config":{}}`],
  ]) {
    const { error } = same((l) => l.advance(state, input), input);
    assert.equal(error?.type, 'PolicyError', input);
  }
  const { error } = same((l) => l.checkOutcome('[1,'), 'check-outcome of bad JSON');
  assert.equal(error?.type, 'PolicyError');
  assert.throws(() => direct.advance('', 'not json'), (e) => e instanceof PolicyError && e.kind === 'invalid_json');
});

test('text beyond ASCII, and a lone surrogate, cross the same way', () => {
  for (const id of ['é', 'ключ', '工具', '🦀 crab', 'a\ud800b', '\udc00']) {
    const input = `{"input":"run","now_ms":0,"run_id":${JSON.stringify(id)},"seed":7,"config":{}}`;
    same((l) => l.advance('', input), id);
    const outcome = JSON.stringify({ source: 'http', status: 500, body: `${id} `.repeat(50) });
    same((l) => l.checkOutcome(outcome), `check-outcome ${id}`);
  }
  // A long state crosses whole (the guest's memory grows under the call).
  const big = JSON.stringify({ source: 'mcp', result: { isError: true, content: [{ type: 'text', text: 'ü'.repeat(200_000) }] } });
  same((l) => l.checkOutcome(big), 'a large outcome');
  assert.equal(direct.checkOutcome('{"source":"http","status":200}'), undefined);
  assert.equal(typeof direct.checkOutcome('{"source":"http","status":503}'), 'string');
});

test('a value that is not a string fails the call, as in jco, and the next call makes a fresh instance', async () => {
  const loop = new LoopComponent(await compileReference());
  assert.throws(() => loop.advance(1, '{}'), (e) => e instanceof PolicyRuntimeError && /expected a string/.test(e.message));
  assert.equal(loop.traps, 1);
  assert.equal(typeof loop.advance('', '{"input":"run","now_ms":0,"run_id":"r","seed":7,"config":{}}').state, 'string');
  assert.equal(loop.bindings, 'direct');
});
