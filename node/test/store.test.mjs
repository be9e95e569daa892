// The store: the shared vectors (tests/store/operations.json) against MemoryStore
// and SqliteStore (better-sqlite3), the schema shared with Rust, refusal of files
// that are not stores, and JavaScript-only bad input (wrong types, unsafe integers).

import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  APPLICATION_ID,
  MAX_VALUE_BYTES,
  MemoryStore,
  SCHEMA_SQL,
  SCHEMA_VERSION,
  STORE_ERROR_KINDS,
  SqliteStore,
  StoreError,
} from '../src/store.js';
import * as index from '../src/index.js';
import { REPO } from './helpers.mjs';
import { apply } from './store_ops.mjs';

const Database = createRequire(import.meta.url)('better-sqlite3');
const T = 1_700_000_000_000;
const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-store-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(dir, `s-${n++}.db`);

const cases = JSON.parse(readFileSync(join(REPO, 'tests', 'store', 'operations.json'), 'utf8')).cases;

function runCase(backend, store, c, failures) {
  c.ops.forEach((op, i) => {
    const got = apply(store, op);
    try {
      assert.deepStrictEqual(got, op.expect);
    } catch {
      failures.push(
        `${backend}: case ${JSON.stringify(c.name)} op ${i} ${op.op}\n  expected: ${JSON.stringify(op.expect)}\n  got:      ${JSON.stringify(got)}`,
      );
    }
  });
}

test('MemoryStore passes the shared vectors', () => {
  assert.ok(cases.length >= 10);
  const failures = [];
  for (const c of cases) runCase('memory', new MemoryStore(), c, failures);
  assert.deepEqual(failures, []);
});

test('SqliteStore passes the shared vectors', () => {
  const failures = [];
  for (const c of cases) {
    const store = new SqliteStore(fresh());
    runCase('sqlite', store, c, failures);
    store.close();
  }
  assert.deepEqual(failures, []);
});

test('the schema is the Rust schema byte for byte', () => {
  assert.equal(SCHEMA_SQL, readFileSync(join(REPO, 'host', 'src', 'store', 'schema.sql'), 'utf8'));
  assert.equal(APPLICATION_ID, Buffer.from('ARST').readUInt32BE(0));
  assert.ok(SCHEMA_SQL.includes(`PRAGMA application_id = ${APPLICATION_ID};`));
  assert.ok(SCHEMA_SQL.includes(`PRAGMA user_version = ${SCHEMA_VERSION};`));
});

test('the package exports the stores', () => {
  assert.equal(index.MemoryStore, MemoryStore);
  assert.equal(index.SqliteStore, SqliteStore);
  assert.equal(index.StoreError, StoreError);
});

test('the file has the documented pragmas and tables', () => {
  const path = fresh();
  new SqliteStore(path).close();
  const raw = new Database(path);
  assert.equal(raw.pragma('journal_mode', { simple: true }), 'wal');
  assert.equal(raw.pragma('application_id', { simple: true }), APPLICATION_ID);
  assert.equal(raw.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  const names = raw.prepare('SELECT name FROM sqlite_master ORDER BY name').pluck().all();
  assert.deepEqual(names, ['ar_entries', 'ar_entries_expiry', 'ar_meta', 'ar_records']);
  raw.close();
});

test('synchronous is full unless asked otherwise', () => {
  const path = fresh();
  const s = new SqliteStore(path);
  const fast = new SqliteStore(path, { synchronous: 'normal' });
  assert.equal(s.synchronous, 'full');
  assert.equal(fast.synchronous, 'normal');
  assert.deepEqual(fast.compareAndSet('k', null, '1', null, T), { written: true, version: 1 });
  assert.deepEqual(s.get('k', T), { value: '1', version: 1 });
  s.close();
  fast.close();
  const bads = [{ synchronous: 'off' }, { synchronous: 'FULL' }, { busyTimeoutMs: -1 }, { busyTimeoutMs: '5' }];
  for (const bad of bads) {
    assert.throws(
      () => new SqliteStore(path, bad),
      (e) => e instanceof StoreError && e.kind === 'invalid_argument',
      JSON.stringify(bad),
    );
  }
});

test('data and versions survive reopening', () => {
  const path = fresh();
  let s = new SqliteStore(path);
  assert.deepEqual(s.compareAndSet('a', null, '1', null, T), { written: true, version: 1 });
  assert.equal(s.delete('a'), true);
  assert.equal(s.append('j', '{}', T), 1);
  s.close();
  s = new SqliteStore(path);
  assert.equal(s.get('a', T), null);
  assert.deepEqual(s.compareAndSet('a', null, '1', null, T), { written: true, version: 2 });
  assert.equal(s.append('j', '{}', T), 2);
  s.close();
});

function refused(path) {
  let err;
  assert.throws(
    () => new SqliteStore(path),
    (e) => {
      err = e;
      return e instanceof StoreError;
    },
  );
  assert.ok(STORE_ERROR_KINDS.includes(err.kind));
  assert.ok(err.message.includes(path) && err.message.includes(';'), err.message);
  return err;
}

test('files that are not stores are refused with a kind', () => {
  const text = fresh();
  writeFileSync(text, 'hello, not a database\n'.repeat(100));
  assert.equal(refused(text).kind, 'corrupt');
  const garbage = fresh();
  writeFileSync(garbage, Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(4096, 0xa5)]));
  assert.equal(refused(garbage).kind, 'corrupt');

  const foreign = fresh();
  let raw = new Database(foreign);
  raw.exec('CREATE TABLE users (id INTEGER PRIMARY KEY)');
  raw.close();
  assert.equal(refused(foreign).kind, 'incompatible');

  const other = fresh();
  raw = new Database(other);
  raw.pragma('application_id = 42');
  raw.close();
  const e = refused(other);
  assert.equal(e.kind, 'incompatible');
  assert.ok(e.message.includes('application_id 42'), e.message);

  const newer = fresh();
  new SqliteStore(newer).close();
  raw = new Database(newer);
  raw.pragma('user_version = 2');
  raw.close();
  const e2 = refused(newer);
  assert.equal(e2.kind, 'incompatible');
  assert.ok(e2.message.includes('schema version 2') && e2.message.includes('upgrade'), e2.message);

  assert.equal(refused(join(dir, 'no', 'such', 'dir.db')).kind, 'io');
  const aDir = join(dir, 'a-directory');
  mkdirSync(aDir);
  assert.equal(refused(aDir).kind, 'io');
});

test('rows that break the schema read as corrupt', () => {
  const path = fresh();
  const s = new SqliteStore(path);
  const raw = new Database(path);
  raw.exec(`INSERT INTO ar_entries VALUES ('blob', x'00ff', 1, NULL, 0);
            INSERT INTO ar_entries VALUES ('huge', '1', 9007199254740992, NULL, 0);
            INSERT INTO ar_records VALUES ('s', 1, x'00ff', 0);`);
  raw.close();
  const kind = (f) => {
    try {
      f();
    } catch (e) {
      return e.kind;
    }
    return 'no error';
  };
  assert.equal(kind(() => s.get('blob', T)), 'corrupt');
  assert.equal(kind(() => s.get('huge', T)), 'corrupt');
  assert.equal(kind(() => s.read('s', 0, 10)), 'corrupt');
  assert.equal(kind(() => s.compareAndSet('huge', null, '2', null, T)), 'corrupt');
  assert.deepEqual(s.compareAndSet('ok', null, '1', null, T), { written: true, version: 1 });
  s.close();
});

test('a held write lock gives unavailable after the busy timeout', () => {
  const path = fresh();
  const s = new SqliteStore(path, { busyTimeoutMs: 20 });
  s.compareAndSet('k', null, '1', null, T);
  const holder = new Database(path);
  holder.exec('BEGIN IMMEDIATE');
  assert.throws(
    () => s.compareAndSet('k', 1, '2', null, T),
    (e) => e.kind === 'unavailable' && e.message.includes('busy timeout'),
  );
  assert.deepEqual(s.get('k', T), { value: '1', version: 1 }); // readers are not blocked (WAL)
  holder.exec('ROLLBACK');
  holder.close();
  assert.deepEqual(s.compareAndSet('k', 1, '2', null, T), { written: true, version: 2 });
  s.close();
});

test('writes purge expired rows on their way', () => {
  const path = fresh();
  const s = new SqliteStore(path);
  for (let i = 0; i < 100; i++) s.compareAndSet(`e/${i}`, null, '0', 10, T);
  const raw = new Database(path);
  const count = () => raw.prepare('SELECT COUNT(*) FROM ar_entries').pluck().get();
  assert.equal(count(), 100);
  s.compareAndSet('live', null, '1', null, T + 10);
  assert.equal(count(), 100 - 64 + 1);
  assert.equal(s.purgeExpired(T + 10), 36);
  assert.equal(count(), 1);
  raw.close();
  s.close();
});

for (const backend of ['memory', 'sqlite']) {
  test(`${backend}: JavaScript-only bad input is refused`, () => {
    const store = backend === 'memory' ? new MemoryStore() : new SqliteStore(fresh());
    const calls = [
      () => store.get(Buffer.from('k'), T),
      () => store.get(undefined, T),
      () => store.get('k', 1.5),
      () => store.get('k', -1),
      () => store.get('k', BigInt(T)),
      () => store.get('k', '1000'),
      () => store.get('k', NaN),
      () => store.get('k', Infinity),
      () => store.get('\ud800', T),
      () => store.get('k', 2 ** 53 + 2),
      () => store.compareAndSet('k', null, Buffer.from('1'), null, T),
      () => store.compareAndSet('k', null, { a: 1 }, null, T),
      () => store.compareAndSet('k', null, '"\ud800"', null, T),
      () => store.compareAndSet('k', 1.5, '1', null, T),
      () => store.compareAndSet('k', -1, '1', null, T),
      () => store.compareAndSet('k', null, '1', -5, T),
      () => store.compareAndSet('k', null, '1', 2.5, T),
      () => store.compareAndSet('k', null, ' '.repeat(MAX_VALUE_BYTES - 1) + '1 ', null, T),
      () => store.append('s', 1, T),
      () => store.read('s', 0, -1),
      () => store.read('s', 0, 2 ** 64),
      () => store.read('s', '0', 1),
      () => store.keys(null, T),
      () => store.delete(7),
      () => store.purgeExpired(-1),
    ];
    calls.forEach((call, i) => {
      assert.throws(call, (e) => e instanceof StoreError && e.kind === 'invalid_argument' && e.message.includes(';'), `call ${i}`);
    });
    // Exactly the limit is accepted (8 MiB of JSON text); 'é' counts 2 bytes.
    assert.deepEqual(store.compareAndSet('k', null, ' '.repeat(MAX_VALUE_BYTES - 2) + '1 ', null, T), { written: true, version: 1 });
    assert.throws(() => store.compareAndSet('k2', null, `"${'é'.repeat(MAX_VALUE_BYTES / 2)}"`, null, T), (e) => e.kind === 'invalid_argument');
    // Deep nesting is JSON too.
    assert.equal(store.compareAndSet('deep', null, '['.repeat(100_000) + ']'.repeat(100_000), null, T).written, true);
    assert.deepEqual(store.keys('', T), ['deep', 'k']);
    assert.deepEqual(store.read('s', 0, 10), []);
    if (backend === 'sqlite') store.close();
  });
}

test('without better-sqlite3, MemoryStore works and SqliteStore says how to install it', () => {
  // store.js (and the schema it reads) copied where no node_modules can be found: the driver is missing.
  const alone = join(dir, 'no-driver');
  mkdirSync(alone);
  copyFileSync(new URL('../src/store.js', import.meta.url), join(alone, 'store.js'));
  copyFileSync(new URL('../src/schema.sql', import.meta.url), join(alone, 'schema.sql'));
  const script = `
    import { MemoryStore, SqliteStore, StoreError } from ${JSON.stringify(join(alone, 'store.js'))};
    const m = new MemoryStore();
    const out = { memory: m.compareAndSet('k', null, '1', null, 0) };
    try { new SqliteStore(${JSON.stringify(join(alone, 's.db'))}); out.sqlite = 'opened'; }
    catch (e) { out.sqlite = { isStoreError: e instanceof StoreError, kind: e.kind, message: e.message }; }
    console.log(JSON.stringify(out));`;
  const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: alone, encoding: 'utf8' }));
  assert.deepEqual(out.memory, { written: true, version: 1 });
  assert.equal(out.sqlite.isStoreError, true);
  assert.equal(out.sqlite.kind, 'io');
  assert.match(out.sqlite.message, /better-sqlite3/);
  assert.match(out.sqlite.message, /; install it with `npm install better-sqlite3`/);
});

test('loading the package does not load better-sqlite3', () => {
  const script = `
    import { createRequire } from 'node:module';
    await import(${JSON.stringify(join(REPO, 'node', 'src', 'index.js'))});
    const require = createRequire(${JSON.stringify(join(REPO, 'node', 'src', 'store.js'))});
    const path = require.resolve('better-sqlite3');
    const dir = path.slice(0, path.lastIndexOf('better-sqlite3') + 'better-sqlite3'.length);
    const loaded = () => Object.keys(require.cache).some((k) => k.startsWith(dir));
    const before = loaded();
    require('better-sqlite3'); // the control: loading it is seen
    console.log(JSON.stringify([before, loaded()]));`;
  const loaded = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }).trim();
  assert.equal(loaded, '[false,true]');
});

test('a closed store throws io', () => {
  const s = new SqliteStore(fresh());
  s.close();
  assert.throws(() => s.get('k', T), (e) => e instanceof StoreError && e.kind === 'io' && e.message.includes('closed'));
});

test('connections racing to create the schema all open the store', async () => {
  // Many threads opening one new file at once all get the store: none mistakes the half-seen schema
  // for a foreign database's tables, none gives up on the WAL switch that SQLite refuses at once
  // while another connection holds the write lock. Worker threads (one connection each) released by
  // an Atomics barrier make the race likely; no sleep.
  const { Worker } = await import('node:worker_threads');
  const storeUrl = new URL('../src/store.js', import.meta.url).href;
  const body = `
    const { workerData, parentPort } = require('node:worker_threads');
    const gate = new Int32Array(workerData.gate);
    Atomics.add(gate, 0, 1);
    Atomics.wait(gate, 1, 0);
    import(workerData.storeUrl).then(({ SqliteStore }) => {
      try { new SqliteStore(workerData.path).close(); parentPort.postMessage(null); }
      catch (e) { parentPort.postMessage(String(e && e.message)); }
    });`;
  const openers = 6;
  for (let round = 0; round < 25; round++) {
    const path = fresh();
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const results = [...Array(openers)].map(
      () =>
        new Promise((resolve, reject) => {
          const w = new Worker(body, { eval: true, workerData: { gate: gate.buffer, path, storeUrl } });
          w.once('message', (m) => {
            resolve(m);
            w.terminate();
          });
          w.once('error', reject);
        }),
    );
    while (Atomics.load(gate, 0) < openers) await new Promise((r) => setImmediate(r));
    Atomics.store(gate, 1, 1);
    Atomics.notify(gate, 1);
    const refused = (await Promise.all(results)).filter((m) => m !== null);
    assert.deepStrictEqual(refused, [], `round ${round}`);
    const s = new SqliteStore(path);
    assert.deepStrictEqual(s.compareAndSet('k', null, '1', null, T), { written: true, version: 1 });
    s.close();
  }
});

test("the driver's compare-and-set of a value from the loop: a MemoryStore checks its size, not its JSON; a subclass's compareAndSet is still called", async () => {
  const { compareAndSetFromLoop } = await import('../src/store.js');
  const store = new MemoryStore();
  assert.deepEqual(compareAndSetFromLoop(store, 'k', null, '{"a":1}', null, T), { written: true, version: 1 });
  assert.deepEqual(compareAndSetFromLoop(store, 'k', null, '{"a":2}', null, T), { written: false, current: { value: '{"a":1}', version: 1 } });
  assert.deepEqual(store.get('k', T), { value: '{"a":1}', version: 1 });
  // The same refusal as compareAndSet for a value over the limit (multi-byte characters counted as UTF-8).
  const big = `"${'é'.repeat(MAX_VALUE_BYTES / 2)}"`;
  const refusal = (f) => {
    try {
      f();
    } catch (e) {
      return { kind: e.kind, message: e.message };
    }
    return undefined;
  };
  const expected = refusal(() => store.compareAndSet('big', null, big, null, T));
  assert.equal(expected?.kind, 'invalid_argument');
  assert.deepEqual(refusal(() => compareAndSetFromLoop(store, 'big', null, big, null, T)), expected);
  // The key, the version and the TTL are checked as ever.
  assert.throws(() => compareAndSetFromLoop(store, '', null, '1', null, T), /empty/);
  assert.throws(() => compareAndSetFromLoop(store, 'k2', 0, '1', null, T), /version 0/);
  class Counting extends MemoryStore {
    calls = 0;
    compareAndSet(...args) {
      this.calls += 1;
      return super.compareAndSet(...args);
    }
  }
  const counting = new Counting();
  compareAndSetFromLoop(counting, 'k', null, '1', null, T);
  assert.equal(counting.calls, 1);
});
