// Durability in Node (docs/durability.md): the dead-letter API over a real
// SQLite store file, the replay key, the depth event, `end`, `withRun`,
// `recover` of journaled runs, replays, and records written by the Rust CLI
// read by Node. Everything runs the real component through the real Runtime.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { REPO } from './helpers.mjs';
import {
  CLOSED_KEY,
  DeadLetterError,
  ITEM_PREFIX,
  MemoryStore,
  RawOutcome,
  Runtime,
  SqliteStore,
  VirtualClock,
  replayKey,
  runScenario,
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
      operation: () => new RawOutcome(UNAVAILABLE),
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
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait' } });
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
  // Dead-lettered by waiting for the probe, not failed at once on the open breaker.
  const runtime = await Runtime.create({ store, clock: new VirtualClock(T0), config: { on_open: 'wait' } });
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
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait' } });
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

// ------------------------------------------------------------------ with the loop's journal

const JOURNAL = 'agent-recovery/journal/';
const journalOf = (store) => store.keys(JOURNAL, Number.MAX_SAFE_INTEGER).map((k) => k.slice(JOURNAL.length));

/** A ledger of what the tools did, in order: [step, kind, key]. */
function tools(ledger, { failBook = false } = {}) {
  const op = (step) => (call) => {
    ledger.push([step, 'operation', call.key]);
    return failBook && step === 'book' ? new RawOutcome(UNAVAILABLE) : { step };
  };
  const comp = (step) => (call) => {
    ledger.push([step, 'compensation', call.key]);
    return { undone: step };
  };
  return {
    'pay.charge': { operation: op('charge'), compensate: comp('charge') },
    'air.book': { operation: op('book'), compensate: comp('book') },
  };
}

const CHARGE = { id: 'charge', tool: 'pay.charge', args: { amount: 10 }, sideEffect: true };
const BOOK = { id: 'book', tool: 'air.book', args: { flight: 'LH1' }, sideEffect: true };

test('end(): a completed run leaves no journal entry; withRun ends on return and leaves the run on a throw', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const runtime = await Runtime.create({ store, clock: new VirtualClock(T0), seed: 7, config: { on_open: 'wait' } });
  const ledger = [];
  const ops = tools(ledger);
  const run = runtime.run('ended');
  await run.step({ ...CHARGE, ...ops['pay.charge'] });
  // Between steps the journal holds the run (written before the call).
  assert.deepEqual(journalOf(store), ['ended']);
  const end = await run.end();
  assert.equal(end.outcome, 'completed');
  assert.equal(end.runFinished, true);
  assert.deepEqual(journalOf(store), []);
  assert.equal((await run.end()).outcome, 'completed');

  const value = await runtime.withRun('with', async (r) => (await r.step({ ...CHARGE, ...ops['pay.charge'] })).result);
  assert.deepEqual(value, { step: 'charge' });
  assert.deepEqual(journalOf(store), []);

  await assert.rejects(
    runtime.withRun('thrown', async (r) => {
      await r.step({ ...CHARGE, ...ops['pay.charge'] });
      throw new Error('the worker code failed after the charge');
    }),
    /worker code failed/,
  );
  assert.deepEqual(journalOf(store), ['thrown']);
});

test('recover: a run that was never ended is rolled back in reverse order and dead-lettered as interrupted', async (t) => {
  const path = tempStore(t);
  const store = new SqliteStore(path);
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait', dead_letter: { owner: 'ops', runbook: 'https://runbooks/dlq' } } });
  const ledger = [];
  const ops = tools(ledger);
  const run = runtime.run('order-1');
  await run.step({ ...CHARGE, ...ops['pay.charge'] });
  await run.step({ ...BOOK, ...ops['air.book'] });
  // The worker "dies" here: the run is never ended.
  assert.deepEqual(journalOf(store), ['order-1']);
  const [chargeKey, bookKey] = ledger.map((l) => l[2]);

  // A new worker on its own connection: too young for the default olderThanMs, then taken with 0.
  const store2 = new SqliteStore(path);
  t.after(() => store2.close());
  const events = [];
  const worker = await Runtime.create({ store: store2, clock, seed: 7, onEvent: (e) => events.push(e.event) });
  assert.deepEqual(await worker.recover(tools([]), {}), []);
  const ledger2 = [];
  const reports = await worker.recover(tools(ledger2), { olderThanMs: 0 });
  assert.equal(reports.length, 1);
  const [r] = reports;
  assert.equal(r.runId, 'order-1');
  assert.equal(r.outcome, 'interrupted');
  assert.equal(r.step, 'book');
  assert.equal(r.stepOutcome, 'ok');
  assert.equal(r.deadLetterId, '1');
  assert.deepEqual(events, r.events.map((e) => JSON.parse(e).event));
  assert.equal(JSON.parse(r.events[0]).event, 'recover');
  // book had finished: the cache answers (no call); then both compensations, in reverse order.
  assert.deepEqual(
    ledger2.map(([s, k]) => [s, k]),
    [
      ['book', 'compensation'],
      ['charge', 'compensation'],
    ],
  );
  assert.ok(r.events.some((e) => JSON.parse(e).event === 'cached'));
  assert.ok(ledger2.every(([, , key]) => key !== chargeKey && key !== bookKey), 'a compensation has its own key');
  const item = worker.deadLetters.show('1');
  assert.equal(item.record.outcome, 'interrupted');
  assert.equal(item.record.step_outcome, 'ok');
  assert.equal(item.record.recovered, true);
  assert.equal(item.record.owner, 'ops');
  assert.equal(item.record.runbook, 'https://runbooks/dlq');
  assert.equal(item.record.run_id, 'order-1');
  assert.deepEqual(journalOf(store), []);
  assert.deepEqual(store.keys('agent-recovery/recovering/', clock.nowMs()), []);
  // Nothing left to do.
  assert.deepEqual(await worker.recover(tools([]), { olderThanMs: 0 }), []);
});

test('recover: a tool with no operation is answered runtime.recover.unknown_tool, and the run still rolls back', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait' } });
  const ledger = [];
  const ops = tools(ledger);
  const run = runtime.run('order-2');
  await run.step({ ...CHARGE, ...ops['pay.charge'] });
  // Interrupted while book's call was in progress: its in-flight mark is still there.
  const book = run.step({ ...BOOK, operation: () => new Promise(() => {}) });
  void book;
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(journalOf(store), ['order-2']);
  // The recovering worker knows pay.charge only.
  const ledger2 = [];
  const only = { 'pay.charge': tools(ledger2)['pay.charge'] };
  const [r] = await runtime.recover(only, { olderThanMs: 0 });
  assert.equal(r.step, 'book');
  assert.equal(r.outcome, 'interrupted');
  assert.notEqual(r.stepOutcome, 'ok');
  const record = runtime.deadLetters.show(r.deadLetterId).record;
  assert.equal(record.outcome, 'interrupted');
  const codes = JSON.stringify(record);
  assert.match(codes, /runtime\.recover\.unknown_tool/);
  assert.deepEqual(
    ledger2.map(([s, k]) => [s, k]),
    [['charge', 'compensation']],
  );
  assert.deepEqual(journalOf(store), []);
});

test('recover: a tool registered without its compensation fails that compensation with agent_recovery.MissingCompensation', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait' } });
  const ops = tools([]);
  const run = runtime.run('order-3');
  await run.step({ ...CHARGE, ...ops['pay.charge'] });
  const book = run.step({ ...BOOK, operation: () => new Promise(() => {}) });
  void book;
  await new Promise((resolve) => setImmediate(resolve));
  // The recovering worker has pay.charge's operation, not its compensation.
  const [r] = await runtime.recover({ 'pay.charge': { operation: ops['pay.charge'].operation } }, { olderThanMs: 0 });
  assert.equal(r.outcome, 'interrupted');
  const record = JSON.stringify(runtime.deadLetters.show(r.deadLetterId).record);
  // The loop's failure for `no_compensation` (docs/runtime.md, the `attempt` input).
  assert.match(record, /agent_recovery\.MissingCompensation/);
  assert.match(record, /no compensation registered for step charge/);
});

test('dead_letter_depth: reported when the depth crosses the threshold, once per crossing', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const seen = [];
  const runtime = await Runtime.create({
    store,
    clock,
    seed: 7,
    config: { on_open: 'wait', dead_letter: { depth_threshold: 2 } },
    onEvent: (e, text) => e.event === 'dead_letter_depth' && seen.push(text),
  });
  await deadLetter(runtime, 1, 'a');
  assert.deepEqual(seen, []);
  const run = runtime.run('b1');
  await run.step({ id: 'sync', tool: 'erp.sync', target: 'erp-b1', sideEffect: true, operation: () => new RawOutcome(UNAVAILABLE) });
  assert.equal(seen.length, 1);
  const ev = JSON.parse(seen[0]);
  const dl = run.events.map((e) => JSON.parse(e)).find((e) => e.event === 'dead_letter');
  assert.deepEqual(ev, { t_ms: dl.t_ms, event: 'dead_letter_depth', step: 'sync', target: null, depth: 2, threshold: 2, id: '2' });
  // The event is in the run's timeline right after the dead_letter event.
  const names = run.events.map((e) => JSON.parse(e).event);
  assert.equal(names[names.indexOf('dead_letter') + 1], 'dead_letter_depth');
  await deadLetter(runtime, 1, 'c'); // depth 3: no new crossing
  assert.equal(seen.length, 1);
  runtime.deadLetters.purge('1');
  runtime.deadLetters.purge('2'); // depth 1
  await deadLetter(runtime, 1, 'd'); // depth 2 again: crossed again
  assert.equal(seen.length, 2);
  assert.deepEqual(JSON.parse(seen[1]), { ...JSON.parse(seen[1]), depth: 2, threshold: 2, id: '4' });
});

test('replay: the record runs again under the replay key and run id; ok closes the item, a failure is a new record', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait' } });
  await deadLetter(runtime, 2);
  const dlq = runtime.deadLetters;
  const original = dlq.show('1').record;
  assert.equal(original.input.tool, 'erp.sync');
  const calls = [];
  const ok = { 'erp.sync': { operation: (call) => (calls.push(call), { synced: true }) } };
  const r = await dlq.replay('1', ok);
  assert.deepEqual(
    { id: r.id, n: r.n, key: r.key, runId: r.runId, outcome: r.outcome },
    { id: '1', n: 1, key: replayKey(original.key, 1), runId: 'r1/replay/1', outcome: 'ok' },
  );
  assert.equal(calls.length, 1);
  assert.notEqual(calls[0].key, original.key);
  // The tool sees the replay key (the loop derives it from replay_of; replayKey is an independent copy).
  assert.equal(calls[0].key, r.key);
  const item = dlq.show('1');
  assert.equal(item.status, 'replayed');
  assert.equal(item.replays.length, 1);
  assert.deepEqual(Object.keys(item.replays[0]), ['n', 'key', 'run_id', 'requested_ms', 'outcome', 'finished_ms']);
  assert.equal(item.replays[0].outcome, 'ok');
  assert.equal(dlq.depth(), 1);
  await assert.rejects(dlq.replay('1', ok), (e) => e instanceof DeadLetterError && e.kind === 'conflict');

  // A replay that fails again: item 2 back to open, a new record 3 with replay_of.
  const failing = { 'erp.sync': { operation: () => new RawOutcome(UNAVAILABLE) } };
  const r2 = await dlq.replay('2', failing);
  assert.equal(r2.outcome, 'dead_lettered');
  assert.equal(r2.deadLetterId, '3');
  assert.equal(dlq.show('2').status, 'open');
  const again = dlq.show('3').record;
  assert.deepEqual(again.replay_of, { id: '2', n: 1 });
  assert.equal(again.run_id, 'r2/replay/1');
  assert.equal(again.key, replayKey(dlq.show('2').record.key, 1));
  assert.equal(dlq.depth(), 2);
  // The second replay of record 2 has n = 2 and another key.
  const req = dlq.requestReplay('2');
  assert.equal(req.n, 2);
  assert.equal(req.key, replayKey(dlq.show('2').record.key, 2));
  assert.throws(() => dlq.requestReplay('2'), (e) => e instanceof DeadLetterError && e.kind === 'conflict');
  // Any worker's recover carries out the request.
  const reports = await runtime.recover(ok, { olderThanMs: 0 });
  assert.equal(reports.length, 1);
  assert.equal(reports[0].runId, 'r2/replay/2');
  assert.equal(reports[0].replayOf, '2');
  assert.equal(reports[0].outcome, 'ok');
  assert.equal(dlq.show('2').status, 'replayed');
  assert.equal(dlq.depth(), 1);
  assert.deepEqual(journalOf(store), []);
});

// ------------------------------------------------------------------ other processes

const NODE_DIR = fileURLToPath(new URL('..', import.meta.url));
const WORKER = join(NODE_DIR, 'test', 'durable_worker.mjs');
const CLI = join(process.env.CARGO_TARGET_DIR ?? join(REPO, 'target'), 'release', process.platform === 'win32' ? 'agent-recovery.exe' : 'agent-recovery');

function worker(store, ledger, job) {
  return spawnSync(process.execPath, [WORKER, store, ledger, JSON.stringify(job)], { encoding: 'utf8', timeout: 120_000 });
}

test('a worker process killed by SIGKILL mid-run is recovered by another: nothing applied twice, compensations in reverse', async (t) => {
  const store = tempStore(t);
  const ledger = join(store, '..', 'ledger.db');
  const steps = [
    { id: 'charge', fail_times: 1, compensation: true, comp_fail_times: 0 },
    { id: 'book', fail_times: 0, compensation: true, comp_fail_times: 0 },
  ];
  const job = { run_id: 'k1', seed: 7, now_ms: T0, config: { policy: { tool: { base_ms: 1, cap_ms: 2 } } }, steps };
  // Points: charge before (1, fails), charge before (2), charge after (3), book before (4), book after (5).
  // Killed at 5: book's effect is applied but its outcome never reached the loop.
  const killed = worker(store, ledger, { ...job, mode: 'run', kill_at: 5 });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  const rec = worker(store, ledger, { ...job, mode: 'recover', kill_at: null });
  assert.equal(rec.status, 0, rec.stderr);
  const { reports } = JSON.parse(rec.stdout);
  assert.equal(reports.length, 1);
  assert.equal(reports[0].run_id, 'k1');
  assert.equal(reports[0].outcome, 'interrupted');
  assert.equal(reports[0].step, 'book');

  const db = new (createRequire(import.meta.url)('better-sqlite3'))(ledger, { readonly: true });
  t.after(() => db.close());
  const applied = db.prepare('SELECT step, kind, key, seq FROM applied ORDER BY seq').all();
  // book's operation was called again with the same key: applied once; then book's and charge's undo.
  assert.deepEqual(
    applied.map((a) => [a.step, a.kind]),
    [
      ['charge', 'operation'],
      ['book', 'operation'],
      ['book', 'compensation'],
      ['charge', 'compensation'],
    ],
  );
  const calls = db.prepare('SELECT step, kind, key, applied FROM calls ORDER BY n').all();
  for (const a of applied) {
    const mine = calls.filter((c) => c.step === a.step && c.kind === a.kind);
    assert.ok(mine.every((c) => c.key === a.key), `every ${a.step} ${a.kind} call carries one key`);
    assert.equal(mine.filter((c) => c.applied === 1).length, 1, `${a.step} ${a.kind} applied once`);
  }
  assert.equal(calls.filter((c) => c.step === 'book' && c.kind === 'operation').length, 2, 'book was called again after the kill');
  const s = new SqliteStore(store);
  t.after(() => s.close());
  assert.deepEqual(journalOf(s), []);
  assert.deepEqual(s.keys('agent-recovery/recovering/', Number.MAX_SAFE_INTEGER), []);
  const runtime = await Runtime.create({ store: s });
  const [item] = runtime.deadLetters.list();
  assert.equal(item.record.run_id, 'k1');
  assert.equal(item.record.outcome, 'interrupted');
});

test('a record written by the Rust CLI (simulate --store) is listed, shown and replayed by Node', async (t) => {
  assert.ok(existsSync(CLI), `${CLI} is missing; run \`cargo build --release -p agent-recovery-cli\``);
  const path = tempStore(t);
  const scenario = join(path, '..', 'scenario.json');
  writeFileSync(
    scenario,
    JSON.stringify({
      run_id: 'rust-1',
      seed: 7,
      now_ms: T0,
      config: { on_open: 'wait' },
      steps: [{ id: 'sync', tool: 'erp.sync', args: { batch: 3 }, side_effect: true, outcomes: Array(5).fill(UNAVAILABLE) }],
    }),
  );
  const sim = spawnSync(CLI, ['simulate', scenario, '--json', '--store', path], { encoding: 'utf8' });
  assert.equal(sim.status, 0, sim.stderr);
  assert.equal(JSON.parse(sim.stdout).outcome, 'dead_lettered');
  const store = new SqliteStore(path);
  t.after(() => store.close());
  const runtime = await Runtime.create({ store, clock: new VirtualClock(T0 + 60_000), seed: 7 });
  const dlq = runtime.deadLetters;
  const [item] = dlq.list();
  assert.equal(item.id, '1');
  assert.equal(item.record.run_id, 'rust-1');
  assert.equal(item.record.input.tool, 'erp.sync');
  assert.deepEqual(item.record.input.args, { batch: 3 });
  const keys = [];
  const r = await dlq.replay('1', { 'erp.sync': { operation: (call) => (keys.push(call.key), { ok: true }) } });
  assert.equal(r.outcome, 'ok');
  assert.equal(keys.length, 1);
  assert.deepEqual(keys, [replayKey(item.record.key, 1)]);
  assert.equal(dlq.show('1').status, 'replayed');
  assert.equal(dlq.depth(), 0);
});

test('scenarios: kill_after_calls leaves the run in the journal; recover: true finishes it (docs/runtime.md, Scenarios)', async () => {
  const store = new MemoryStore();
  const killed = await runScenario(
    {
      run_id: 'r1',
      seed: 7,
      now_ms: T0,
      kill_after_calls: 2,
      steps: [
        { id: 'charge', tool: 'pay.charge', side_effect: true, outcomes: ['ok'], compensation: { outcomes: ['ok'] } },
        { id: 'book', tool: 'air.book', side_effect: true, outcomes: ['ok'] },
      ],
    },
    store,
  );
  assert.equal(killed.outcome, 'killed');
  assert.deepEqual(journalOf(store), ['r1']);
  const chargeKey = killed.events.map((e) => JSON.parse(e)).find((e) => e.event === 'attempt' && e.step === 'charge')?.key;
  assert.match(chargeKey, /^[0-9a-f]{64}$/);
  // book's call was carried out (its outcome consumed) but never answered: no attempt event for it.
  assert.equal(killed.events.map((e) => JSON.parse(e)).filter((e) => e.step === 'book' && e.event === 'attempt').length, 0);

  const recovered = await runScenario(
    {
      run_id: 'unused',
      seed: 7,
      now_ms: T0 + 1000,
      recover: true,
      steps: [
        { id: 'x', tool: 'pay.charge', outcomes: [], compensation: { outcomes: ['ok'] } },
        { id: 'y', tool: 'air.book', outcomes: ['ok'] },
      ],
    },
    store,
  );
  assert.equal(recovered.outcome, 'interrupted');
  const events = recovered.events.map((e) => JSON.parse(e));
  assert.deepEqual(events[0], { ...events[0], event: 'recover', step: 'book' });
  assert.deepEqual(
    events.filter((e) => e.event === 'attempt').map((e) => [e.step, e.call]),
    [
      ['book', 'operation'],
      ['charge', 'compensation'],
    ],
  );
  assert.equal(recovered.deadLetters.length, 1);
  const record = JSON.parse(recovered.deadLetters[0]);
  assert.equal(record.outcome, 'interrupted');
  assert.equal(record.step_outcome, 'ok');
  assert.equal(record.recovered, true);
  assert.deepEqual(journalOf(store), []);
  // Nothing left: a second recovery finds no run.
  assert.equal((await runScenario({ run_id: 'u', now_ms: T0 + 2000, recover: true, steps: [{ id: 'x', tool: 'pay.charge' }] }, store)).outcome, 'none');
});

test("a fan-out's record is listed but not replayable (invalid_record): its input is the fan-out, not a step", async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const runtime = await Runtime.create({ store, clock: new VirtualClock(T0), seed: 7, config: { on_open: 'wait' } });
  const run = runtime.run('fan-1');
  await run.step({ ...CHARGE, operation: () => ({ ok: 1 }), compensate: () => ({}) });
  const quote = (id, ok) => ({ id, tool: 'quote', target: `q-${id}`, operation: () => (ok ? { price: 1 } : new RawOutcome({ source: 'http', status: 400 })) });
  const report = await run.fanout('quotes', 2, [quote('a', true), quote('b', false)]);
  assert.equal(report.outcome, 'dead_lettered');
  const dlq = runtime.deadLetters;
  const [item] = dlq.list();
  assert.equal(item.record.tool, 'fanout');
  assert.equal(item.record.input.tool, 'fanout');
  assert.throws(() => dlq.requestReplay(item.id), (e) => e instanceof DeadLetterError && e.kind === 'invalid_record');
  await assert.rejects(dlq.replay(item.id, { quote: { operation: () => ({}) } }), (e) => e instanceof DeadLetterError && e.kind === 'invalid_record');
  assert.equal(dlq.show(item.id).status, 'open');
  assert.equal(dlq.purge(item.id).status, 'purged');
});

test('recover skips a run whose lease another worker holds, and takes it once the lease expired', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7, inFlightTtlMs: 10_000 });
  const ledger = [];
  const run = runtime.run('leased');
  await run.step({ ...CHARGE, ...tools(ledger)['pay.charge'] });
  // Another worker is recovering it right now.
  assert.ok(store.compareAndSet('agent-recovery/recovering/leased', null, '{"since_ms":0,"pid":1}', 10_000, clock.nowMs()).written);
  assert.deepEqual(await runtime.recover(tools([]), { olderThanMs: 0 }), []);
  assert.deepEqual(journalOf(store), ['leased']);
  // That worker died: its lease expires after inFlightTtlMs.
  clock.advance(10_000);
  const [r] = await runtime.recover(tools([]), { olderThanMs: 0 });
  assert.equal(r.runId, 'leased');
  assert.equal(r.outcome, 'interrupted');
  assert.deepEqual(journalOf(store), []);
  assert.deepEqual(store.keys('agent-recovery/recovering/', clock.nowMs()), []);
});

test('scenarios: recover: true needs no run_id and no steps ("none"); a later step of a tool replaces an earlier one', async () => {
  const store = new MemoryStore();
  assert.equal((await runScenario({ run_id: '', now_ms: T0, recover: true, steps: [] }, store)).outcome, 'none');
  await assert.rejects(runScenario({ run_id: '', now_ms: T0, steps: [{ id: 'a', tool: 't', outcomes: ['ok'] }] }, store), (e) => e.kind === 'invalid');
  await assert.rejects(runScenario({ run_id: 'r', now_ms: T0, kill_after_calls: 0, steps: [{ id: 'a', tool: 't' }] }, store), (e) => e.kind === 'invalid');
  const killed = await runScenario({ run_id: 'r1', seed: 7, now_ms: T0, kill_after_calls: 1, steps: [{ id: 'a', tool: 't', side_effect: true, outcomes: ['ok'] }] }, store);
  assert.equal(killed.outcome, 'killed');
  // Two steps list tool t: the second one answers (its outcome "ok"; the first has none left).
  const out = await runScenario(
    {
      run_id: '',
      seed: 7,
      now_ms: T0,
      recover: true,
      steps: [
        { id: 'x', tool: 't', outcomes: [] },
        { id: 'y', tool: 't', outcomes: ['ok'] },
      ],
    },
    store,
  );
  assert.equal(out.outcome, 'interrupted');
  assert.equal(JSON.parse(out.deadLetters[0]).step_outcome, 'ok');
});

test('recover reports a journal entry it cannot drive (outcome error) and leaves it for an operator; the others still run', async (t) => {
  const store = new SqliteStore(tempStore(t));
  t.after(() => store.close());
  const clock = new VirtualClock(T0);
  const runtime = await Runtime.create({ store, clock, seed: 7, config: { on_open: 'wait' } });
  // A state the loop never returned, and an entry that is not a journal entry at all.
  assert.ok(store.compareAndSet(`${JOURNAL}a-forged`, null, '{"run_id":"a-forged","state":{"v":1,"phase":"calling"},"v":1,"written_ms":0}', null, T0).written);
  assert.ok(store.compareAndSet(`${JOURNAL}b-junk`, null, '[1,2,3]', null, T0).written);
  const run = runtime.run('c-real');
  await run.step({ ...CHARGE, ...tools([])['pay.charge'] });
  const reports = await runtime.recover(tools([]), { olderThanMs: 0 });
  assert.deepEqual(
    reports.map((r) => [r.runId, r.outcome]),
    [
      ['a-forged', 'error'],
      ['b-junk', 'error'],
      ['c-real', 'interrupted'],
    ],
  );
  assert.match(reports[0].error, /recovery loop refused/);
  assert.match(reports[1].error, /not a journal entry/);
  assert.deepEqual(journalOf(store), ['a-forged', 'b-junk']);
  assert.deepEqual(store.keys('agent-recovery/recovering/', clock.nowMs()), []);
});
