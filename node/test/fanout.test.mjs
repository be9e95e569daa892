// run.fanout(): branches as their own little runs, with the real component.
// On a real clock they run concurrently (shown by a barrier no branch passes
// until every branch has started); on a virtual clock one after another from
// the fork's time, the join at the latest end. Expected values from the rules
// (fan-out notes, docs/runtime.md) and tests/vectors/tools/jitter.py.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { PolicyError, RawOutcome, Runtime, VirtualClock } from '../src/index.js';
import { REPO } from './helpers.mjs';

const T0 = 1_767_225_600_000;

function jitter(seed, attempt, base, cap) {
  const r = spawnSync('python3', [join(REPO, 'tests/vectors/tools/jitter.py'), String(seed), String(attempt), String(base), String(cap)], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout.trim());
}

test('on a real clock the branches run concurrently; min_results of them suffice; results in branch order', { timeout: 20_000 }, async () => {
  const runtime = await Runtime.create({ seed: 7 });
  const run = runtime.run('r-fan');
  let started = 0;
  let release;
  const barrier = new Promise((r) => {
    release = r;
  });
  const branch = (id, answer) => ({
    id,
    tool: 'quote',
    call: 'tool',
    target: `${id}.example`,
    operation: async () => {
      started += 1;
      if (started === 3) release();
      await barrier; // passes only once all three branches are in their call
      return answer;
    },
  });
  const report = await run.fanout('quotes', 2, [
    branch('a', { price: 10 }),
    branch('b', new RawOutcome({ source: 'http', status: 400 })),
    branch('c', { price: 12 }),
  ]);
  assert.equal(report.outcome, 'ok');
  assert.equal(report.runFinished, false);
  assert.deepEqual(report.result, [{ price: 10 }, null, { price: 12 }]);
  // The run's events: each branch's in branch order, then the fan-out's outcome.
  const events = run.events.map((t) => JSON.parse(t));
  const steps = events.map((e) => e.step);
  const firstOf = (s) => steps.indexOf(s);
  const lastOf = (s) => steps.lastIndexOf(s);
  assert.ok(lastOf('a') < firstOf('b') && lastOf('b') < firstOf('c'), steps.join(' '));
  assert.deepEqual(events.at(-1), { ...events.at(-1), event: 'outcome', step: 'quotes', state: 'ok' });
});

test('on a virtual clock the branches run in order from the fork time; the join is at the latest end', async () => {
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ clock, seed: 7 });
  const run = runtime.run('r-fan-virtual');
  const seen = [];
  const report = await run.fanout('pair', 2, [
    {
      id: 'slow',
      tool: 'quote',
      call: 'tool',
      target: 's',
      operation: (call) => {
        seen.push(['slow', call.attempt, clock.nowMs() - T0]);
        return call.attempt === 1 ? new RawOutcome({ source: 'http', status: 503 }) : 'slow ok';
      },
    },
    {
      id: 'fast',
      tool: 'quote',
      call: 'tool',
      target: 'f',
      operation: () => {
        seen.push(['fast', 1, clock.nowMs() - T0]);
        return 'fast ok';
      },
    },
  ]);
  const d1 = jitter(7, 1, 250, 30_000);
  assert.equal(report.outcome, 'ok');
  assert.deepEqual(report.result, ['slow ok', 'fast ok']);
  assert.deepEqual(seen, [
    ['slow', 1, 0],
    ['slow', 2, d1],
    ['fast', 1, 0],
  ]);
  assert.equal(clock.nowMs(), T0 + d1);
});

test('fewer ok branches than min_results: the completed steps are compensated, a successful branch included', async () => {
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ clock, seed: 7 });
  const run = runtime.run('r-fan-short');
  const undone = [];
  await run.step({ id: 'book', tool: 'hotel.book', sideEffect: true, operation: () => 'booked', compensate: () => void undone.push('book') });
  const report = await run.fanout('holds', 2, [
    { id: 'hold-a', tool: 'seat.hold', sideEffect: true, operation: () => 'held', compensate: () => void undone.push('hold-a') },
    { id: 'hold-b', tool: 'seat.hold', operation: () => new RawOutcome({ source: 'http', status: 400 }) },
  ]);
  assert.equal(report.outcome, 'dead_lettered');
  assert.equal(report.runFinished, true);
  assert.deepEqual(undone, ['hold-a', 'book']);
  assert.equal(report.envelope.code, 'runtime.fanout.insufficient');
});

test('fan-out bad inputs are typed errors', async () => {
  const runtime = await Runtime.create({ clock: new VirtualClock(T0) });
  const run = runtime.run('r-fan-bad');
  const op = () => 1;
  assert.throws(() => run.fanout('f', 1, []), PolicyError);
  assert.throws(() => run.fanout('f', 0, [{ id: 'a', tool: 't', operation: op }]), PolicyError);
  assert.throws(() => run.fanout('f', 1, [{ id: 'a', tool: 't' }]), PolicyError);
  await assert.rejects(run.fanout('f', 1, [{ id: 'a', tool: 't', operation: op }, { id: 'a', tool: 't', operation: op }]), PolicyError);
  // More than the branches: the loop refuses it.
  await assert.rejects(run.fanout('g', 3, [{ id: 'b', tool: 't', operation: op }]), (e) => e instanceof PolicyError && e.kind === 'invalid_argument');
});
