// Odd values an operation returns or throws: each becomes a structured outcome
// or a clear error, and the run stays usable (a following step completes).
// Expected shapes from docs/runtime.md ("Steps and outcomes", "Inputs": an
// observation the loop cannot use is decided on as an `exception` observation
// of type `agent_recovery.InvalidObservation`) and docs/errors.md.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Failed, MAX_ID_BYTES, PolicyError, RawOutcome, Runtime, VirtualClock } from '../src/index.js';

const T0 = 1_767_225_600_000;
const INVALID = { source: 'exception', type: 'agent_recovery.InvalidObservation' };
const HTTP_400 = { source: 'http', status: 400 };

function cycle(status = 503) {
  const o = { source: 'http', status };
  o.self = o;
  return o;
}
const returns = (v) => () => v;
const throws = (e) => () => {
  throw e;
};
function hostileError(member) {
  const e = new Error('x');
  Object.defineProperty(e, member, {
    get() {
      throw new Error(`${member} getter threw`);
    },
  });
  return e;
}
class ToStringThrows extends Error {
  toString() {
    throw new Error('toString threw');
  }
}

// [name, operation, what the envelope's `upstream` must contain]
const FAILURES = [
  ['failed-nan', returns(new Failed(NaN)), INVALID],
  ['failed-nan-status', returns(new Failed({ source: 'http', status: NaN })), INVALID],
  ['failed-infinity-status', returns(new Failed({ source: 'http', status: Infinity })), INVALID],
  ['failed-cycle', returns(new Failed(cycle())), INVALID],
  ['failed-null', returns(new Failed(null)), INVALID],
  ['failed-undefined', returns(new Failed(undefined)), INVALID],
  ['failed-number', returns(new Failed(42)), INVALID],
  ['failed-array', returns(new Failed([1, 2])), INVALID],
  ['failed-empty-object', returns(new Failed({})), INVALID],
  ['failed-unknown-source', returns(new Failed({ source: 'carrier-pigeon' })), INVALID],
  ['failed-status-text', returns(new Failed({ source: 'http', status: '503' })), INVALID],
  ['failed-bigint-status', returns(new Failed({ source: 'http', status: 2n ** 70n })), INVALID],
  // A large integer in a body is written as it is: the failure is kept.
  ['failed-bigint-body', returns(new Failed({ source: 'http', status: 400, body: { id: 2n ** 70n } })), HTTP_400],
  ['failed-not-json-text', returns(new Failed('{nope')), INVALID],
  // A lone surrogate in an observation's text becomes U+FFFD: the failure is kept.
  ['failed-lone-surrogate', returns(new Failed({ source: 'http', status: 400, body: '\ud800' })), HTTP_400],
  ['failed-lone-surrogate-text', returns(new Failed('{"source":"http","status":400,"body":"\ud800"}')), HTTP_400],
  ['failed-surrogate-escape', returns(new Failed('{"source":"http","status":400,"body":"\\ud800"}')), HTTP_400],
  ['response-nan', returns(new RawOutcome({ source: 'http', status: NaN })), INVALID],
  ['response-cycle', returns(new RawOutcome(cycle())), INVALID],
  ['response-null', returns(new RawOutcome(null)), INVALID],
  ['response-string', returns(new RawOutcome('ok')), INVALID],
  ['response-lone-surrogate', returns(new RawOutcome({ source: 'http', status: 400, body: '\udfff' })), HTTP_400],
  ['throws-message-getter', throws(hostileError('message')), { source: 'exception' }],
  ['throws-name-getter', throws(hostileError('name')), { source: 'exception' }],
  ['throws-tostring', throws(new ToStringThrows('x')), { source: 'exception' }],
  ['throws-lone-surrogate', throws(new TypeError('\ud800')), { source: 'exception', type: 'TypeError' }],
  ['throws-null', throws(null), { source: 'exception' }],
  ['throws-undefined', throws(undefined), { source: 'exception' }],
  ['throws-bigint', throws(10n), { source: 'exception' }],
  ['rejects-cycle', () => Promise.reject(cycle(400)), HTTP_400],
];

async function runtime() {
  return Runtime.create({ clock: new VirtualClock(T0), seed: 7 });
}

async function nextStepCompletes(run) {
  const r = await run.step({ id: 'after', tool: 't.after', operation: () => ({ fine: true }) });
  assert.ok(['ok', 'failed', 'escalated', 'dead_lettered', 'replan'].includes(r.outcome), JSON.stringify(r));
  if (r.outcome === 'ok') assert.deepEqual(r.result, { fine: true });
}

for (const [name, operation, upstream] of FAILURES) {
  test(`an odd failure is a structured outcome and the run goes on: ${name}`, async () => {
    const run = (await runtime()).run(`odd-${name}`);
    const r = await run.step({ id: 'odd', tool: 't.odd', call: 'tool', operation });
    assert.ok(['failed', 'dead_lettered'].includes(r.outcome), JSON.stringify(r));
    assert.ok(r.envelope && r.envelope.code, JSON.stringify(r));
    const got = Object.fromEntries(Object.keys(upstream).map((k) => [k, r.envelope.upstream[k]]));
    assert.deepEqual(got, upstream);
    if (upstream === INVALID) assert.match(r.envelope.message, /^the operation/);
    await nextStepCompletes(run);
  });
}

// An ok value JSON cannot carry exactly stays the value itself in the report.
const ODD_RESULTS = [
  ['nan', NaN],
  ['cycle', cycle()],
  ['bigint-over-u64', 2n ** 64n],
  ['bigint-below-i64', -(2n ** 63n) - 1n],
  ['nested-bigint', { n: [1, 2n ** 70n] }],
  ['lone-surrogate', '\ud800'],
  ['function', () => 1],
];

for (const [name, value] of ODD_RESULTS) {
  test(`an odd ok value keeps its identity and the run goes on: ${name}`, async () => {
    const run = (await runtime()).run(`odd-ok-${name}`);
    const r = await run.step({ id: 'odd', tool: 't.odd', operation: returns(value) });
    assert.equal(r.outcome, 'ok');
    assert.equal(r.value, value);
    assert.equal(r.result, null); // recorded as null, never as an altered copy
    await nextStepCompletes(run);
  });
}

test('bigints inside [-2^63, 2^64) round-trip as exact integers', async () => {
  for (const n of [-(2n ** 63n), 2n ** 63n - 1n, 2n ** 64n - 1n]) {
    const run = (await runtime()).run(`int-${n}`);
    const r = await run.step({ id: 'n', tool: 't.n', operation: returns({ n }) });
    assert.equal(r.outcome, 'ok');
    assert.equal(r.value.n, n);
  }
});

for (const [args, path] of [
  [{ n: 2n ** 64n }, 'args.n'],
  [{ a: [0, -(2n ** 63n) - 1n] }, 'args.a[1]'],
  [{ x: NaN }, 'args.x'],
  [{ s: 'a\ud800' }, 'args.s'],
]) {
  test(`args JSON cannot carry are refused naming ${path}`, async () => {
    const run = (await runtime()).run('args');
    // Step options are checked when the step is given, before anything runs.
    assert.throws(() => run.step({ id: 's', tool: 't', args, operation: returns(1) }), (e) => {
      assert.ok(e instanceof PolicyError, String(e));
      assert.ok(e.message.includes(path), e.message);
      return true;
    });
    await nextStepCompletes(run);
  });
}

const LONG = 'n'.repeat(MAX_ID_BYTES + 1);
for (const [member, make] of [
  ['run_id', (rt) => rt.run(LONG)],
  ['run_id', (rt) => rt.run('r'.repeat(10_000_000))],
  ['step.id', (rt) => rt.run('r').step({ id: LONG, tool: 't', operation: returns(1) })],
  ['step.tool', (rt) => rt.run('r').step({ id: 's', tool: LONG, operation: returns(1) })],
  ['step.target', (rt) => rt.run('r').step({ id: 's', tool: 't', target: LONG, operation: returns(1) })],
  ['step.fallbacks[]', (rt) => rt.run('r').step({ id: 's', tool: 't', fallbacks: ['a', LONG], operation: returns(1) })],
  ['fanout.id', (rt) => rt.run('r').fanout(LONG, 1, [{ id: 'b', tool: 't', operation: returns(1) }])],
]) {
  test(`a name over the limit is refused before the component: ${member}`, async () => {
    const rt = await runtime();
    assert.throws(
      () => make(rt),
      (e) => e instanceof PolicyError && e.kind === 'too_large' && e.message.startsWith(`\`${member}\` is `) && e.message.endsWith('put data in `args`'),
    );
  });
}

test('the component has the same name limit (fed straight to advance)', async () => {
  const rt = await runtime();
  const input = (id) => JSON.stringify({ input: 'run', now_ms: 0, run_id: id });
  assert.ok(rt.loop.advance('', input('n'.repeat(MAX_ID_BYTES))).state);
  assert.throws(() => rt.loop.advance('', input(LONG)), (e) => e.kind === 'too_large' && e.message.includes(`${MAX_ID_BYTES}-byte limit`));
});

test('names at the limit run', async () => {
  const run = (await runtime()).run('n'.repeat(MAX_ID_BYTES));
  const r = await run.step({ id: 's'.repeat(MAX_ID_BYTES), tool: 't'.repeat(MAX_ID_BYTES), operation: returns(1) });
  assert.equal(r.outcome, 'ok');
  assert.equal(r.result, 1);
});
