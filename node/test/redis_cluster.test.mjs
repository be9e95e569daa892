// The Redis store on a real three-node Redis Cluster started here
// (tests/store/redis_cluster.py, shared with the Rust and Python suites): the
// shared store vectors, operations while every slot holding the store's keys
// migrates (ASK, then MOVED) with none failing, dead-letter ids after the
// cluster lost its data, and an unreachable cluster.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { RedisStore, openStore } from '../src/index.js';
import { REPO } from './helpers.mjs';
import { freePort, rawCommand } from './redis_server.mjs';
import { apply, applyAsync, rebase } from './store_ops.mjs';

let fixture;
let lines;
let ports;
let n = 0;
const prefix = () => `c${process.pid}x${n++}`;
const url = (query) => `redis+cluster://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}?${query}`;
const ask = async (command) => {
  fixture.stdin.write(`${command}\n`);
  return JSON.parse((await lines.next()).value);
};

before(async () => {
  fixture = spawn('python3', [join(REPO, 'tests', 'store', 'redis_cluster.py')], { stdio: ['pipe', 'pipe', 'inherit'] });
  lines = createInterface({ input: fixture.stdout })[Symbol.asyncIterator]();
  ({ ports } = JSON.parse((await lines.next()).value));
});
after(async () => {
  fixture?.stdin.end(); // the fixture stops the servers at EOF
  await new Promise((resolve) => (fixture.exitCode !== null ? resolve() : fixture.once('exit', resolve)));
});

const cases = JSON.parse(readFileSync(join(REPO, 'tests', 'store', 'operations.json'), 'utf8')).cases;

test('RedisStore on a cluster passes the shared vectors, both faces', async () => {
  const failures = [];
  for (const c of cases) {
    const sync = new RedisStore(url(`prefix=${prefix()}&fallback=none`));
    const asyncStore = new RedisStore(url(`prefix=${prefix()}&fallback=none`), { open: false });
    const [s1, s2] = [new Map(), new Map()];
    for (const [i, op] of c.ops.entries()) {
      const got = rebase(op, s1, (o) => apply(sync, o));
      const gotAsync = await rebase(op, s2, (o) => applyAsync(asyncStore.async, o));
      for (const [face, g] of [['sync', got], ['async', gotAsync]]) {
        try {
          assert.deepStrictEqual(g, op.expect);
        } catch {
          failures.push(`${face}: case ${JSON.stringify(c.name)} op ${i} ${op.op}\n  expected: ${JSON.stringify(op.expect)}\n  got: ${JSON.stringify(g)}`);
        }
      }
    }
    sync.close();
    asyncStore.close();
  }
  assert.deepEqual(failures, []);
});

test('operations while every slot of the store migrates: none fails (ASK, then MOVED)', async () => {
  const s = new RedisStore(url(`prefix=${prefix()}&fallback=none`));
  const versions = new Map();
  const round = async (r) => {
    for (let k = 0; k < 10; k++) {
      const key = `agent-recovery/breaker/t${k}`;
      const got = k % 2 ? s.compareAndSet(key, versions.get(key) ?? null, `{"r":${r}}`, null, 1) : await s.async.compareAndSet(key, versions.get(key) ?? null, `{"r":${r}}`, null, 1);
      assert.equal(got.written, true, `round ${r} ${key}: ${JSON.stringify(got)}`);
      versions.set(key, got.version);
      assert.equal(s.get(key, 1).value, `{"r":${r}}`);
      s.append(`journal/t${k}`, `{"r":${r}}`, 1);
    }
  };
  await round(0);
  const begun = await ask('begin-all');
  assert.ok(begun.slots >= 1, JSON.stringify(begun));
  await round(1); // slots MIGRATING, half the keys moved: ASK
  const done = await ask('finish');
  assert.ok(done.moved > 0, JSON.stringify(done));
  await round(2); // slots moved: MOVED
  for (let k = 0; k < 10; k++) {
    assert.deepEqual(s.read(`journal/t${k}`, 0, 10).map(([, r]) => r), ['{"r":0}', '{"r":1}', '{"r":2}']);
  }
  assert.equal(s.keys('agent-recovery/breaker/', 1).length, 10);
  s.close();
});

test('dead-letter ids never repeat after the cluster lost its data (FLUSHALL on every node)', async () => {
  const s = new RedisStore(url(`prefix=${prefix()}&fallback=none`));
  const DL = 'agent-recovery/dead-letter';
  const before = [0, 1, 2].map((i) => s.append(DL, `${i}`, 1));
  for (const port of ports) await rawCommand(port, ['FLUSHALL']);
  const afterLoss = s.append(DL, '3', 2);
  assert.ok(before.every((id) => id < afterLoss), `${afterLoss} vs ${before}`);
  assert.ok(Number.isSafeInteger(afterLoss));
  s.close();
});

test('an unreachable cluster: unavailable with fallback=none, degraded with the default', async () => {
  const [a, b] = [await freePort(), await freePort()];
  const down = `redis+cluster://127.0.0.1:${a},127.0.0.1:${b}`;
  assert.throws(() => new RedisStore(`${down}?fallback=none&timeout_ms=300&connect_timeout_ms=300`), (e) => e.kind === 'unavailable' && e.message.includes(down));
  const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-cluster-'));
  const events = [];
  const store = openStore(`${down}?timeout_ms=300&connect_timeout_ms=300&spool=${join(dir, 'spool.sqlite')}`, {
    onEvent: (t) => events.push(JSON.parse(t).event),
  });
  assert.equal(store.compareAndSet('k', null, '1', null, 5).written, true);
  assert.deepEqual(events, ['store_degraded']);
  store.close();
  rmSync(dir, { recursive: true, force: true });
});
