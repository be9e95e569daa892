// Durability in Node (docs/durability.md): the dead-letter API over a real
// SQLite store file, the replay key, the depth event, `end`, `withRun`,
// `recover` of journaled runs, replays, and records written by the Rust CLI
// read by Node. Everything runs the real component through the real Runtime.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  CLOSED_KEY,
  DeadLetterError,
  ITEM_PREFIX,
  Response as Judged,
  Runtime,
  SqliteStore,
  VirtualClock,
  replayKey,
} from '../src/index.js';

const T0 = 1_767_225_600_000;
const UNAVAILABLE = { source: 'http', status: 503 };

/** A fresh store file in a temporary directory; removed after the test. */
function tempStore(t, name = 'store.db') {
  const dir = mkdtempSync(join(tmpdir(), 'ar-durable-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, name);
}

/** `n` runs whose one step keeps failing (503) until its attempts run out: one dead-letter record each. */
async function deadLetter(runtime, n, prefix = 'r') {
  for (let i = 1; i <= n; i++) {
    const report = await runtime.run(`${prefix}${i}`).step({
      id: 'sync',
      tool: 'erp.sync',
      target: `erp-${prefix}${i}`,
      args: { batch: i },
      sideEffect: true,
      operation: () => new Judged(UNAVAILABLE),
    });
    assert.equal(report.outcome, 'dead_lettered');
  }
}

test('the replay key is sha256 of ["agent-recovery/replay", key, n] (values from sha256sum)', () => {
  // printf '%s' '["agent-recovery/replay","abc",1]' | sha256sum
  assert.equal(replayKey('abc', 1), '092037d1642e98534d5638f2988ca5004d2ff1ab64f48feacec92c9b855965e5');
  assert.equal(replayKey('abc', 2), 'd7dcb3e0f7f9390eb696d4b6d57eebdf18e5e5a4d9c8136f269decd21e222752');
  assert.throws(() => replayKey('abc', 0), (e) => e instanceof DeadLetterError && e.kind === 'invalid_argument');
});

test('deadLetters on a SQLite file: list, show, purge, depth; a second connection sees the same', async (t) => {
  const path = tempStore(t);
  const store = new SqliteStore(path);
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7 });
  await deadLetter(runtime, 3);
  const dlq = runtime.deadLetters;
  const items = dlq.list();
  assert.equal(items.length, 3);
  assert.deepEqual(
    items.map((i) => [i.id, i.status, i.replays.length]),
    [
      ['1', 'open', 0],
      ['2', 'open', 0],
      ['3', 'open', 0],
    ],
  );
  assert.equal(dlq.depth(), 3);
  assert.equal(dlq.show('2').record.step_id, items[1].record.step_id);
  assert.equal(dlq.show(2).id, '2');

  clock.advance(5);
  const at = clock.nowMs();
  const purged = dlq.purge('2');
  assert.equal(purged.status, 'purged');
  assert.equal(purged.purgedMs, at);
  assert.equal(dlq.depth(), 2);
  assert.deepEqual(
    dlq.list().map((i) => i.id),
    ['1', '3'],
  );
  assert.deepEqual(
    dlq.list({ status: 'all' }).map((i) => i.id),
    ['1', '2', '3'],
  );
  assert.deepEqual(
    dlq.list({ status: 'purged' }).map((i) => i.id),
    ['2'],
  );
  assert.deepEqual(
    dlq.list({ after: '1', limit: 1 }).map((i) => i.id),
    ['3'],
  );
  // The stored forms (docs/durability.md §3): the item and the closed count.
  assert.deepEqual(JSON.parse(store.get(`${ITEM_PREFIX}2`, clock.nowMs()).value), { status: 'purged', replays: [], purged_ms: purged.purgedMs });
  assert.deepEqual(JSON.parse(store.get(CLOSED_KEY, clock.nowMs()).value), { count: 1 });

  // Purging twice changes nothing (and does not close twice).
  assert.equal(dlq.purge('2').purgedMs, at);
  assert.equal(dlq.depth(), 2);
  assert.deepEqual(JSON.parse(store.get(CLOSED_KEY, clock.nowMs()).value), { count: 1 });

  // Another connection (another process would be the same) reads the same queue.
  const other = new SqliteStore(path);
  t.after(() => other.close());
  const runtime2 = await Runtime.create({ store: other, clock });
  assert.equal(runtime2.deadLetters.depth(), 2);
  assert.deepEqual(
    runtime2.deadLetters.list().map((i) => i.id),
    ['1', '3'],
  );
});

test('deadLetters: bad ids and a missing record are DeadLetterErrors, nothing changes', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const runtime = await Runtime.create({ store, clock: new VirtualClock(T0) });
  await deadLetter(runtime, 1);
  const dlq = runtime.deadLetters;
  for (const bad of ['0', '-1', 'x', '1.5', '', null, 1.5, '01']) {
    assert.throws(() => dlq.show(bad), (e) => e instanceof DeadLetterError && e.kind === 'invalid_argument', String(bad));
  }
  assert.throws(() => dlq.show('7'), (e) => e instanceof DeadLetterError && e.kind === 'not_found');
  assert.throws(() => dlq.purge('7'), (e) => e instanceof DeadLetterError && e.kind === 'not_found');
  assert.throws(() => dlq.list({ status: 'gone' }), (e) => e instanceof DeadLetterError && e.kind === 'invalid_argument');
  await assert.rejects(dlq.replay('1', { 'erp.sync': {} }), (e) => e instanceof DeadLetterError && e.kind === 'invalid_argument');
  assert.equal(dlq.depth(), 1);
  assert.deepEqual(store.keys(ITEM_PREFIX, T0), []);
});

test('item changes are compare-and-set: a change made by another connection in between is kept', async (t) => {
  const path = tempStore(t);
  const store = new SqliteStore(path);
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7 });
  await deadLetter(runtime, 1);
  // A second operator, on its own connection, purges record 1 right after our first read of
  // its item: our compare-and-set then fails (the version moved) and reads again.
  const other = new SqliteStore(path);
  t.after(() => other.close());
  const operator = await Runtime.create({ store: other, clock });
  let raced = false;
  const racing = new Proxy(store, {
    get(target, prop) {
      if (prop === 'compareAndSet') {
        return (key, ...rest) => {
          if (!raced && key === `${ITEM_PREFIX}1`) {
            raced = true;
            operator.deadLetters.purge('1');
          }
          return target.compareAndSet(key, ...rest);
        };
      }
      const v = Reflect.get(target, prop);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  const ours = await Runtime.create({ store: racing, clock });
  ours.deadLetters.purge('1');
  assert.ok(raced);
  assert.equal(ours.deadLetters.show('1').status, 'purged');
  // Closed once, not twice.
  assert.equal(ours.deadLetters.depth(), 0);
  assert.deepEqual(JSON.parse(store.get(CLOSED_KEY, clock.nowMs()).value), { count: 1 });
});
