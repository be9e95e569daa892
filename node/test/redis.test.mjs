// The Redis store against a real redis-server started here: the shared
// store vectors on RedisStore and on FallbackStore(Redis, SQLite), the Lua scripts
// being the Rust crate's files, URL options and errors, six processes on one
// counter and one stream, Redis killed and restarted under a FallbackStore (the
// spool and its flush), and runtimes (the real component) sharing a breaker.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import {
  FallbackStore,
  RedisStore,
  RawOutcome,
  ServerClock,
  Runtime,
  SqliteStore,
  StoreError,
  VirtualClock,
  defaultSpoolPath,
  openStore,
  parseRedisUrl,
} from '../src/index.js';
import { spawnSync } from 'node:child_process';
import { REPO } from './helpers.mjs';
import { freePort, rawCommand, startRedis } from './redis_server.mjs';
import { TIME_FLOOR, apply, applyAsync, rebase } from './store_ops.mjs';
import { createRequire } from 'node:module';
import { redisLayout } from '../src/store-redis-layout.js';

const T = 1_700_000_000_000;
const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-redis-'));
let redis;
let n = 0;
const prefix = () => `t${process.pid}x${n++}`;
before(async () => {
  redis = await startRedis();
});
after(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const cases = JSON.parse(readFileSync(join(REPO, 'tests', 'store', 'operations.json'), 'utf8')).cases;

function runCases(backend, open, fromRedis = true) {
  const failures = [];
  for (const c of cases) {
    const store = open();
    const seqs = new Map();
    c.ops.forEach((op, i) => {
      const got = fromRedis ? rebase(op, seqs, (o) => apply(store, o)) : apply(store, op);
      try {
        assert.deepStrictEqual(got, op.expect);
      } catch {
        failures.push(`${backend}: case ${JSON.stringify(c.name)} op ${i} ${op.op}\n  expected: ${JSON.stringify(op.expect)}\n  got: ${JSON.stringify(got)}`);
      }
    });
    store.close();
  }
  assert.deepEqual(failures, []);
}

test('the Lua scripts are the files of host/src/store/redis, byte for byte', () => {
  const from = join(REPO, 'host', 'src', 'store', 'redis');
  const names = readdirSync(from).filter((f) => f.endsWith('.lua')).sort();
  assert.deepEqual(names, ['append.lua', 'cas.lua', 'get.lua', 'open.lua', 'purge.lua']);
  for (const name of names) {
    assert.ok(readFileSync(join(from, name)).equals(readFileSync(new URL(`../src/redis/${name}`, import.meta.url))), name);
  }
});

test('RedisStore passes the shared vectors', () => {
  assert.ok(cases.length >= 10);
  runCases('redis', () => new RedisStore(redis.url(`prefix=${prefix()}`)));
});

test('FallbackStore(Redis, SQLite) passes the shared vectors while Redis is up', () => {
  const events = [];
  runCases('fallback', () => openStore(redis.url(`prefix=${prefix()}&spool=${join(dir, `v-${n}.sqlite`)}`), { onEvent: (t) => events.push(t) }));
  assert.deepEqual(events, []);
});

test('FallbackStore(Redis, SQLite) passes the shared vectors while Redis is down (served by the spool file)', async () => {
  const port = await freePort(); // nobody listens there
  const events = [];
  runCases('fallback-degraded', () => {
    const store = openStore(`redis://127.0.0.1:${port}/0?spool=${join(dir, `d-${n++}.sqlite`)}&probe_ms=${Number.MAX_SAFE_INTEGER}`, {
      onEvent: (t) => events.push(JSON.parse(t).event),
    });
    assert.equal(store.healthy, false);
    return store;
  }, false);
  assert.deepEqual([...new Set(events)], ['store_degraded']);
});

async function runCasesAsync(backend, open, fromRedis = true) {
  const failures = [];
  for (const c of cases) {
    const store = open();
    const seqs = new Map();
    for (const [i, op] of c.ops.entries()) {
      const got = fromRedis ? await rebase(op, seqs, (o) => applyAsync(store.async, o)) : await applyAsync(store.async, op);
      try {
        assert.deepStrictEqual(got, op.expect);
      } catch {
        failures.push(`${backend}: case ${JSON.stringify(c.name)} op ${i} ${op.op}\n  expected: ${JSON.stringify(op.expect)}\n  got: ${JSON.stringify(got)}`);
      }
    }
    store.close();
  }
  assert.deepEqual(failures, []);
}

test('store.async of RedisStore and FallbackStore (up and down) passes the shared vectors', async () => {
  await runCasesAsync('redis.async', () => new RedisStore(redis.url(`prefix=${prefix()}`), { open: false }));
  await runCasesAsync('fallback.async', () => openStore(redis.url(`prefix=${prefix()}&spool=${join(dir, `va-${n}.sqlite`)}`)));
  const port = await freePort(); // nobody listens there
  await runCasesAsync('fallback-degraded.async', () =>
    openStore(`redis://127.0.0.1:${port}/0?spool=${join(dir, `da-${n++}.sqlite`)}&probe_ms=${Number.MAX_SAFE_INTEGER}`),
    false,
  );
});

test('the Redis layout is the one host/src/store/redis/README.md documents', async () => {
  const p = prefix();
  const s = new RedisStore(redis.url(`prefix=${p}`));
  const layout = redisLayout(p);
  s.compareAndSet('k', null, '{"a":1}', 5000, T);
  const seq = s.append('j', '[1]', T);
  const hash = await rawCommand(redis.port, ['HGETALL', layout.entry('k')]);
  for (const part of ['$1\r\nv\r\n$7\r\n{"a":1}\r\n', '$1\r\nn\r\n$1\r\n1\r\n', `$1\r\nx\r\n$13\r\n${T + 5000}\r\n`, `$1\r\nu\r\n$13\r\n${T}\r\n`]) {
    assert.ok(hash.includes(part), `${JSON.stringify(part)} in ${JSON.stringify(hash)}`);
  }
  assert.match(await rawCommand(redis.port, ['HGET', `{${p}}:meta`, 'app']), /agent-recovery/);
  assert.match(await rawCommand(redis.port, ['HGET', `{${p}}:meta`, 'schema']), /\b2\b/);
  assert.match(await rawCommand(redis.port, ['GET', `{${p}}:rev`]), /\b1\b/);
  // The hash also expires by itself ttl + grace_ms (60 000) after the write.
  const pttl = Number((await rawCommand(redis.port, ['PTTL', layout.entry('k')])).slice(1));
  assert.ok(pttl > 60_000 && pttl <= 65_000, `PTTL ${pttl}`);
  assert.match(await rawCommand(redis.port, ['XRANGE', layout.stream('j'), '-', '+']), new RegExp(`${seq}-0`));
  s.close();
});

test('the Redis key layout matches tests/store/redis-layout.json (shared with Rust and Python)', () => {
  const doc = JSON.parse(readFileSync(join(REPO, 'tests', 'store', 'redis-layout.json'), 'utf8'));
  // The slot as the client computes it (node-redis's own CRC16 of the hash tag).
  const calculateSlot = createRequire(import.meta.url)('@redis/client/dist/lib/utils/calculate-slot').default;
  for (const c of doc.cases) {
    const l = redisLayout(c.prefix);
    const got = { entry: () => l.entry(c.name), stream: () => l.stream(c.name), meta: () => l.meta, rev: () => l.rev, entry_pattern: () => l.entryPattern(c.name) }[c.kind]();
    assert.equal(got, c.redis_key, `${c.kind} ${c.name ?? ''}`);
    if (c.kind === 'entry') assert.equal(l.keyOf(got), c.name);
    if ('slot' in c) assert.equal(calculateSlot(got), c.slot, got);
  }
});

test('store URLs: options, defaults, unknown options, the password never shown', () => {
  const o = parseRedisUrl('redis://user:secret@db.example:6380/2');
  assert.deepEqual(
    [o.prefix, o.timeoutMs, o.connectTimeoutMs, o.fallback, o.spool, o.probeMs, o.graceMs],
    ['ar', 1000, 1000, 'local', null, 1000, 60000],
  );
  assert.ok(!o.display.includes('secret'));
  const o2 = parseRedisUrl('rediss://h/0?prefix=x&timeout_ms=5&connect_timeout_ms=6&fallback=none&spool=/tmp/s.db&probe_ms=7&grace_ms=0');
  assert.deepEqual([o2.prefix, o2.timeoutMs, o2.connectTimeoutMs, o2.fallback, o2.spool, o2.probeMs, o2.graceMs], ['x', 5, 6, 'none', '/tmp/s.db', 7, 0]);
  for (const bad of ['redis://h?colour=red', 'redis://h?timeout_ms=-1', 'redis://h?timeout_ms=0', 'redis://h?fallback=maybe', 'redis://h/x', 'http://h', 'redis://h?prefix=a}b']) {
    assert.throws(() => parseRedisUrl(bad), (e) => e instanceof StoreError && e.kind === 'invalid_argument' && e.message.includes('; '), bad);
  }
  assert.throws(() => openStore('redis://h?colour=red'), /the options are prefix, timeout_ms, connect_timeout_ms, fallback, spool, probe_ms, grace_ms/);
  // The spool's default name: sha256 of the URL without its password, under $XDG_STATE_HOME.
  const saved = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = '/state';
  try {
    // The store's identity (docs/store.md), the same text in Rust and Python: no credentials, no other option.
    const h = createHash('sha256').update('redis://db.example:6380/2?prefix=x').digest('hex').slice(0, 16);
    assert.equal(defaultSpoolPath('redis://user:secret@DB.example:6380/2?timeout_ms=5&prefix=x'), `/state/agent-recovery/spool-${h}.sqlite`);
    const d = createHash('sha256').update('redis://127.0.0.1:6379/0?prefix=ar').digest('hex').slice(0, 16);
    assert.equal(defaultSpoolPath('redis://127.0.0.1'), `/state/agent-recovery/spool-${d}.sqlite`);
    const v6 = createHash('sha256').update('redis://[::1]:7000/3?prefix=ar').digest('hex').slice(0, 16);
    assert.equal(defaultSpoolPath('redis://[::1]:7000/3'), `/state/agent-recovery/spool-${v6}.sqlite`);
  } finally {
    if (saved === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = saved;
  }
  // Anything else is a SQLite path.
  const file = openStore(join(dir, 'plain.db'));
  assert.ok(file instanceof SqliteStore);
  file.close();
  assert.ok(openStore(redis.url(`prefix=${prefix()}&fallback=none`)) instanceof RedisStore);
});

test('errors: refused is unavailable within the bound, credentials are io, foreign data corrupt or incompatible', async () => {
  const port = await freePort(); // nobody listens there
  const t0 = performance.now();
  assert.throws(
    () => new RedisStore(`redis://127.0.0.1:${port}?connect_timeout_ms=300&timeout_ms=300`),
    (e) => e.kind === 'unavailable' && e.message.includes(`127.0.0.1:${port}`) && e.message.includes('; '),
  );
  assert.ok(performance.now() - t0 < 300 + 300 + 500);

  await rawCommand(redis.port, ['ACL', 'SETUSER', 'reader', 'on', '>pw', '~*', '+ping', '+hello', '+auth']);
  assert.throws(
    () => new RedisStore(redis.url().replace('//', '//reader:wrong@')),
    (e) => e.kind === 'io' && /WRONGPASS/.test(e.message) && /credentials|password/.test(e.message) && !e.message.includes('wrong@'),
  );
  assert.throws(() => new RedisStore(redis.url().replace('//', '//reader:pw@')), (e) => e.kind === 'io' && /NOPERM/.test(e.message));

  const p = prefix();
  const s = new RedisStore(redis.url(`prefix=${p}`));
  await rawCommand(redis.port, ['SET', redisLayout(p).entry('k'), 'plain']);
  assert.throws(() => s.get('k', T), (e) => e.kind === 'corrupt' && /WRONGTYPE/.test(e.message));
  await rawCommand(redis.port, ['HSET', redisLayout(p).entry('k2'), 'v', 'x']); // no version field: absent
  assert.equal(s.get('k2', T), null);
  s.close();

  const q = prefix();
  await rawCommand(redis.port, ['HSET', `{${q}}:meta`, 'app', 'someone-else', 'schema', '1']);
  assert.throws(() => new RedisStore(redis.url(`prefix=${q}`)), (e) => e.kind === 'incompatible' && e.message.includes('someone-else'));
  const r = prefix();
  await rawCommand(redis.port, ['HSET', `{${r}}:meta`, 'app', 'agent-recovery', 'schema', '1']); // the layout before hash tags per entry
  assert.throws(() => new RedisStore(redis.url(`prefix=${r}`)), (e) => e.kind === 'incompatible' && /schema "1"/.test(e.message));
});

/** Start a store_worker.mjs on `url`; resolves with {ask(op), end()}. */
async function worker(url) {
  const child = spawn(process.execPath, [new URL('./store_worker.mjs', import.meta.url).pathname, url], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value);
  assert.deepEqual(await next(), { ready: true });
  return {
    ask: async (op) => {
      child.stdin.write(`${JSON.stringify(op)}\n`);
      return next();
    },
    end: () => child.stdin.end(),
  };
}

test('six processes: one counter and one stream through Redis, no lost update', async () => {
  const url = redis.url(`prefix=${prefix()}&fallback=none`);
  const workers = await Promise.all(Array.from({ length: 6 }, () => worker(url)));
  const answers = await Promise.all(workers.map((w) => w.ask({ op: 'increment', key: 'counter', rounds: 40, now_ms: T })));
  const wins = answers.flatMap((a) => {
    assert.equal(a.error, undefined, a.message);
    return a.wins;
  });
  wins.sort((a, b) => a[0] - b[0]);
  // Every value was incremented by exactly one winner, with consecutive versions.
  assert.deepEqual(wins.map((w) => w[0]), Array.from({ length: wins.length }, (_, i) => i));
  assert.deepEqual(wins.map((w) => w[1]), Array.from({ length: wins.length }, (_, i) => i + 1));
  const store = new RedisStore(url);
  assert.equal(store.get('counter', T).value, String(wins.length));
  assert.ok(wins.length >= 40, `${wins.length} increments`);

  const seqs = (
    await Promise.all(
      workers.map(async (w, i) => {
        const got = [];
        for (let k = 0; k < 25; k++) got.push(await w.ask({ op: 'append', stream: 'log', record: `{"w":${i},"k":${k}}`, now_ms: T }));
        return got;
      }),
    )
  ).flat();
  // One number each, no gap: the stream's first (a time floor) and the 149 after it.
  const sorted = [...seqs].sort((a, b) => a - b);
  assert.ok(sorted[0] >= TIME_FLOOR, `first ${sorted[0]}`);
  assert.deepEqual(sorted, Array.from({ length: 150 }, (_, i) => sorted[0] + i));
  assert.equal(store.read('log', 0, 1000).length, 150);
  for (const w of workers) w.end();
  store.close();
});

test('Redis killed mid-sequence: the spool takes the writes within the bound, the restart flushes them in order', async () => {
  const spool = join(dir, 'spool.sqlite');
  const TIMEOUT = 400;
  const CONNECT = 400;
  const url = redis.url(`prefix=${prefix()}&timeout_ms=${TIMEOUT}&connect_timeout_ms=${CONNECT}&probe_ms=1000&spool=${spool}`);
  const events = [];
  const store = openStore(url, { onEvent: (t) => events.push(JSON.parse(t)) });
  assert.ok(store instanceof FallbackStore);
  const J = 'agent-recovery/journal/';
  const DL = 'agent-recovery/dead-letter';
  assert.deepEqual(store.compareAndSet(`${J}r1`, null, '{"step":1}', null, T), { written: true, version: 1 });
  const first = store.append(DL, '{"n":0}', T);
  assert.ok(first >= TIME_FLOOR, `first id ${first}`);
  assert.equal(store.compareAndSet('agent-recovery/breaker/api', null, '{"state":"open"}', 30000, T).written, true);

  await redis.kill();
  const slowest = { ms: 0 };
  const timed = (fn) => {
    const t0 = performance.now();
    try {
      return fn();
    } finally {
      slowest.ms = Math.max(slowest.ms, performance.now() - t0);
    }
  };
  // Degraded: entries from the local store (where the journal entry Redis took was
  // mirrored, at version 1), the journal and dead letters spooled.
  assert.deepEqual(timed(() => store.compareAndSet(`${J}r1`, 1, '{"step":2}', null, T + 10)), { written: true, version: 2 });
  assert.equal(events.length, 1);
  assert.equal(events[0].event, 'store_degraded');
  assert.equal(events[0].kind, 'unavailable');
  assert.equal(events[0].at_ms, T + 10);
  assert.equal(events[0].store, url);
  assert.equal(typeof events[0].message, 'string');
  // The server clock, first read while Redis is down: offset 0, the local time.
  const before = Date.now();
  const clockNow = timed(() => store.serverClock().nowMs());
  assert.ok(clockNow >= before - 1 && clockNow <= Date.now() + 1, `${clockNow} vs ${before}`);
  assert.equal(store.serverClock().offsetMs, 0);
  assert.equal(timed(() => store.append(DL, '{"n":1}', T + 20)), 1, 'the local sequence number');
  assert.equal(timed(() => store.append(DL, '{"n":2}', T + 1500)), 2); // a probe goes first (refused)
  assert.equal(timed(() => store.compareAndSet('agent-recovery/attempts/x', null, '1', 5000, T + 1600)).written, true); // local only
  assert.deepEqual(timed(() => store.compareAndSet(`${J}r2`, null, '{"step":1}', 60000, T + 1700)), { written: true, version: 4 });
  assert.equal(timed(() => store.delete(`${J}r1`)), true);
  assert.deepEqual(timed(() => store.read(DL, 0, 10)), [[1, '{"n":1}'], [2, '{"n":2}']]);
  assert.equal(store.healthy, false);
  assert.equal(events.length, 1);
  // The bound of one call (timeout + connect, plus the bridge and SQLite's own writes on a busy machine).
  assert.ok(slowest.ms <= TIMEOUT + CONNECT + 500, `slowest degraded call ${slowest.ms} ms`);

  await redis.restart(); // empty: the server kept nothing
  // The next probe is due at T + 1500 + probe_ms: until then the local store answers.
  assert.equal(store.get(`${J}r2`, T + 1800).version, 4);
  assert.equal(store.healthy, false);
  const r = store.get(`${J}r2`, T + 2600); // probe, flush, restored, then Redis answers
  assert.deepEqual(events.map((e) => e.event), ['store_degraded', 'store_restored']);
  assert.deepEqual(events[1], { event: 'store_restored', store: url, at_ms: T + 2600, degraded_ms: 2590, flushed: 5 });
  assert.equal(store.healthy, true);
  assert.equal(r.value, '{"step":1}');
  const direct = new RedisStore(url);
  const flushed = direct.read(DL, 0, 10);
  assert.deepEqual(flushed.map(([, r]) => r), ['{"n":1}', '{"n":2}'], 'the spooled appends, in order');
  // Redis came back empty: the stream starts again, above every id it gave before.
  assert.ok(flushed.every(([id]) => id > first), `${JSON.stringify(flushed)} vs ${first}`);
  assert.equal(direct.get(`${J}r1`, T + 2600), null, 'the spooled delete of r1 came after its write');
  assert.equal(direct.get(`${J}r2`, T + 2600).value, '{"step":1}');
  assert.equal(direct.get('agent-recovery/attempts/x', T + 2600), null, 'counters stay local');
  direct.close();
  store.close();
});

test('openStore while Redis is down: a FallbackStore that starts degraded and serves from the spool', async () => {
  const port = await freePort(); // nobody listens there
  const events = [];
  const url = `redis://127.0.0.1:${port}/0?spool=${join(dir, 'down.sqlite')}&connect_timeout_ms=300`;
  const store = openStore(url, { onEvent: (t) => events.push(JSON.parse(t)) });
  assert.ok(store instanceof FallbackStore);
  assert.equal(store.healthy, false);
  assert.deepEqual(events.map((e) => [e.event, e.kind]), [['store_degraded', 'unavailable']]);
  assert.ok(events[0].message.includes(`127.0.0.1:${port}`));
  assert.equal(store.append('agent-recovery/dead-letter', '{}', T), 1);
  assert.equal(store.local.read('agent-recovery/spool', 0, 10).length, 1);
  // fallback=none: the caller gets the error.
  assert.throws(() => openStore(`redis://127.0.0.1:${port}/0?fallback=none&connect_timeout_ms=300`), (e) => e.kind === 'unavailable');
  store.close();
});

test("the server clock: the server's TIME, never backwards; a runtime on the store reads it unless given a clock", async () => {
  const s = new RedisStore(redis.url(`prefix=${prefix()}`));
  const clock = s.serverClock();
  assert.ok(clock instanceof ServerClock);
  assert.equal(s.serverClock(), clock, 'one clock per store');
  const time = async () => {
    const m = /\$\d+\r\n(\d+)\r\n\$\d+\r\n(\d+)\r\n/.exec(await rawCommand(redis.port, ['TIME']));
    return Number(m[1]) * 1000 + Math.floor(Number(m[2]) / 1000);
  };
  const before = await time();
  const now = clock.nowMs();
  const afterT = await time();
  assert.ok(Number.isSafeInteger(now));
  // Within the bracket of two independent TIME reads (1 ms of rounding each side).
  assert.ok(now >= before - 1 && now <= afterT + 1, `${before} <= ${now} <= ${afterT}`);
  let last = now;
  for (let i = 0; i < 1000; i++) {
    const t = clock.nowMs();
    assert.ok(t >= last);
    last = t;
  }
  // A runtime on a Redis store without a clock of its own reads this clock.
  const rt = await Runtime.create({ store: s });
  assert.equal(rt.clock.inner, clock);
  const rt2 = await Runtime.create({ store: s, clock: new VirtualClock(5) });
  assert.equal(rt2.clock.nowMs(), 5, 'a clock given wins');
  s.close();
});

const http = (status) => new RawOutcome({ source: 'http', status });
function jitter(seed, attempt, base, cap) {
  const r = spawnSync('python3', [join(REPO, 'tests/vectors/tools/jitter.py'), String(seed), String(attempt), String(base), String(cap)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout.trim());
}

test('a breaker one runtime opened on Redis short-circuits a second runtime on another connection', async () => {
  const url = redis.url(`prefix=${prefix()}&spool=${join(dir, 'rt.sqlite')}`);
  const clock = new VirtualClock(T);
  const first = await Runtime.create({ store: openStore(url), clock, seed: 7, attemptBudget: 3 });
  let calls = 0;
  const failing = {
    id: 'quote',
    tool: 'pricing.quote',
    call: 'tool',
    target: 'api.price',
    operation: () => {
      calls += 1;
      return http(503);
    },
  };
  const r1 = await first.run('r1').step(failing);
  assert.equal(calls, 3);
  assert.equal(r1.outcome, 'dead_lettered');
  const delay = (a) => jitter(7, a, 250, 30_000);
  const openedAt = T + delay(1) + delay(2);
  clock.advance(1);
  const secondStart = clock.nowMs();
  const events = [];
  const otherConnection = openStore(url);
  // on_open "wait": the step waits for the probe instead of failing at once.
  const second = await Runtime.create({ store: otherConnection, clock, seed: 7, config: { on_open: 'wait' }, onEvent: (e) => events.push(e) });
  const r2 = await second.run('r2').step({ ...failing, operation: () => ({ price: 10 }) });
  assert.equal(r2.outcome, 'ok');
  assert.equal(events[0].event, 'short_circuit');
  assert.equal(events[0].code, 'runtime.circuit.open');
  // The first open window is 250 ms (docs/fallbacks-and-breakers.md).
  assert.equal(events[0].delay_ms, 250 - (secondStart - openedAt));
  // The dead letter of run r1 is in Redis, listed through the second runtime.
  assert.equal(second.deadLetters.depth(), 1);
});

test('a runtime on a FallbackStore forwards store_degraded and store_restored to onEvent', async () => {
  const url = redis.url(`prefix=${prefix()}&spool=${join(dir, 'fw.sqlite')}&probe_ms=1000`);
  const clock = new VirtualClock(T);
  const seen = [];
  const rt = await Runtime.create({ store: openStore(url), clock, seed: 7, onEvent: (e, text) => seen.push([e.event, text]) });
  assert.equal((await rt.run('a').step({ id: 's', tool: 't', operation: () => 1 })).outcome, 'ok');
  await redis.kill();
  try {
    assert.equal((await rt.run('b').step({ id: 's', tool: 't', operation: () => 2 })).outcome, 'ok');
    const degraded = seen.filter(([e]) => e === 'store_degraded');
    assert.equal(degraded.length, 1);
    assert.equal(JSON.parse(degraded[0][1]).store, url);
  } finally {
    await redis.restart();
  }
  clock.advance(5000);
  assert.equal((await rt.run('c').step({ id: 's', tool: 't', operation: () => 3 })).outcome, 'ok');
  // That step's first call started the probe and the flush; the runtime awaits the store,
  // so they run in the background (docs/store.md, "Redis and the event loop").
  for (let i = 0; i < 1000 && !seen.some(([e]) => e === 'store_restored'); i++) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(seen.map(([e]) => e).filter((e) => e.startsWith('store_')), ['store_degraded', 'store_restored']);
});

test('the kill-test worker on a Redis URL: killed mid-run, recovered by another process through Redis', async () => {
  const url = redis.url(`prefix=${prefix()}&spool=${join(dir, 'kill.sqlite')}`);
  const ledger = join(dir, 'ledger.db');
  const WORKER = new URL('./durable_worker.mjs', import.meta.url).pathname;
  const run = (job) => spawnSync(process.execPath, [WORKER, url, ledger, JSON.stringify(job)], { encoding: 'utf8', timeout: 120_000 });
  const steps = [
    { id: 'charge', fail_times: 1, compensation: true, comp_fail_times: 0 },
    { id: 'book', fail_times: 0, compensation: true, comp_fail_times: 0 },
  ];
  const job = { run_id: 'k1', seed: 7, now_ms: T, config: { policy: { tool: { base_ms: 1, cap_ms: 2 } } }, steps };
  const killed = run({ ...job, mode: 'run', kill_at: 5 });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  const direct = new RedisStore(url);
  assert.deepEqual(direct.keys('agent-recovery/journal/', Date.now()).length, 1, 'the dead worker left its run in Redis');
  const rec = run({ ...job, mode: 'recover', kill_at: null });
  assert.equal(rec.status, 0, rec.stderr);
  const { reports } = JSON.parse(rec.stdout);
  assert.deepEqual(reports.map((r) => [r.run_id, r.outcome, r.step]), [['k1', 'interrupted', 'book']]);
  assert.deepEqual(direct.keys('agent-recovery/journal/', Date.now()), []);
  const runtime = await Runtime.create({ store: direct });
  assert.deepEqual(runtime.deadLetters.list().map((i) => [i.record.run_id, i.record.outcome]), [['k1', 'interrupted']]);
  direct.close();
});

test('a server that stops answering: the call fails unavailable after timeout_ms, the next call reconnects', async () => {
  const p = prefix();
  const s = new RedisStore(redis.url(`prefix=${p}&timeout_ms=300&connect_timeout_ms=300`));
  assert.equal(s.compareAndSet('k', null, '1', null, T).written, true);
  redis.signal('SIGSTOP');
  let elapsed;
  try {
    const t0 = performance.now();
    assert.throws(() => s.get('k', T), (e) => e.kind === 'unavailable' && /300 ms/.test(e.message));
    elapsed = performance.now() - t0;
    // Not before the response timeout, and within timeout + connect timeout (+ the bridge on a busy machine).
    assert.ok(elapsed >= 299 && elapsed <= 300 + 300 + 500, `${elapsed} ms`);
  } finally {
    redis.signal('SIGCONT');
  }
  assert.deepEqual(s.get('k', T), { value: '1', version: 1 });
  s.close();
});

test('a RedisStore works from `node -e` (CommonJS eval with a global __dirname), where synckit hung', () => {
  const url = redis.url(`prefix=${prefix()}`);
  const code = `import(${JSON.stringify(new URL('../src/index.js', import.meta.url).href)}).then((m) => {
    const s = new m.RedisStore(${JSON.stringify(url)});
    console.log(JSON.stringify(s.compareAndSet('k', null, '1', null, 5)));
    s.close();
  });`;
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '{"written":true,"version":1}');
});

test('the spool lease: while another process flushes (holds the lease), a store stays degraded until its probe after the lease expired', async () => {
  const spool = join(dir, 'lease.sqlite');
  const url = redis.url(`prefix=${prefix()}&spool=${spool}&probe_ms=1000`);
  const events = [];
  const store = openStore(url, { onEvent: (t) => events.push(JSON.parse(t)) });
  store.get('x', T); // healthy
  await redis.kill();
  try {
    assert.equal(store.append('agent-recovery/dead-letter', '{"n":1}', T + 1), 1);
  } finally {
    await redis.restart();
  }
  // Another process on this machine holds the flush lease (30 s), taken at T + 1.
  const other = new SqliteStore(spool);
  assert.equal(other.compareAndSet('agent-recovery/spool/lease', null, '{"owner":"another-process"}', 30_000, T + 1).written, true);
  other.close();
  assert.equal(store.get('agent-recovery/dead-letter/x', T + 2000), null); // probe succeeds, the lease is taken: degraded
  assert.equal(store.healthy, false);
  assert.deepEqual(events.map((e) => e.event), ['store_degraded']);
  store.get('agent-recovery/dead-letter/x', T + 30_001); // the lease expired: this store flushes
  assert.equal(store.healthy, true);
  assert.deepEqual(events.map((e) => [e.event, e.flushed]), [['store_degraded', undefined], ['store_restored', 1]]);
  const direct = new RedisStore(url);
  assert.deepEqual(direct.read('agent-recovery/dead-letter', 0, 10).map(([, r]) => r), ['{"n":1}']);
  direct.close();
  store.close();
});
