// The Redis store, the fallback spool and openStore(spec): many workers on many
// machines sharing one state through Redis 7 (docs/store.md, "The Redis backend").
//
//   const store = openStore('redis://localhost:6379/0?prefix=ar');   // FallbackStore(RedisStore, spool)
//   const store = openStore('redis://localhost:6379?fallback=none'); // RedisStore alone
//   const store = openStore('state.db');                             // SqliteStore
//
// RedisStore has the synchronous interface of SqliteStore; the official client
// (@redis/client, an optional dependency) runs in a worker thread this thread
// blocks on (src/sync-bridge.js: Atomics.wait on the worker's reply). Every
// state change is one of the Lua scripts of host/src/store/redis/ (copied into src/redis/ by scripts/build.mjs; a test
// compares the copies), run with EVALSHA and EVAL on NOSCRIPT.

import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { SystemClock } from './clock.js';
import { SyncBridge } from './sync-bridge.js';
import { SCHEMA_VERSION, SqliteStore, StoreError, checkCas, checkInt, checkJson, checkName, invalid } from './store.js';

/** The options of a redis:// store URL and their defaults (the query string). */
export const REDIS_URL_DEFAULTS = Object.freeze({
  prefix: 'ar',
  timeout_ms: 1000,
  connect_timeout_ms: 1000,
  fallback: 'local',
  spool: null,
  probe_ms: 1000,
  grace_ms: 60000,
});
/** How many expired entries a write removes on its way (as SqliteStore). */
const PURGE_BATCH = 64;
/** The local stream the spool writes to, and its lease and cursor entries. */
export const SPOOL_STREAM = 'agent-recovery/spool';
const SPOOL_LEASE = 'agent-recovery/spool/lease';
const SPOOL_CURSOR = 'agent-recovery/spool/cursor';
const SPOOL_LEASE_MS = 30_000;
/** Keys whose writes and deletes the spool keeps while Redis is down (appends: every stream). */
export const SPOOLED_PREFIXES = Object.freeze(['agent-recovery/journal/', 'agent-recovery/dead-letter/']);
/** How often the server clock samples TIME. */
const CLOCK_SAMPLE_MS = 10_000;

// ------------------------------------------------------------------ URL

/** The URL without its password (for messages, events and the spool's name). */
function redact(url) {
  const u = new URL(url.href);
  if (u.password) u.password = '***';
  return u.href;
}

function intOption(name, text, min) {
  if (!/^[0-9]+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text))) {
    throw invalid(`the store URL option ${name}=${text} is not a whole number >= ${min}; pass e.g. ${name}=${REDIS_URL_DEFAULTS[name]}`);
  }
  return Number(text);
}

/**
 * Parse `redis://[user:pass@]host[:port][/db][?opts]` (or rediss:// for TLS).
 * Returns {url, display, clientUrl, prefix, timeoutMs, connectTimeoutMs, fallback, spool, probeMs, graceMs}.
 */
export function parseRedisUrl(spec) {
  let url;
  try {
    url = new URL(spec);
  } catch {
    throw invalid(`the store URL ${JSON.stringify(spec)} does not parse; write redis://[user:pass@]host[:port][/db][?options]`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw invalid(`the store URL scheme ${url.protocol} is not redis: or rediss:; write redis://host:port`);
  }
  if (!/^(\/[0-9]*)?$/.test(url.pathname)) {
    throw invalid(`the store URL path ${url.pathname} is not a database number; write redis://host:port/0`);
  }
  const o = { ...REDIS_URL_DEFAULTS };
  for (const [k, v] of url.searchParams) {
    if (!(k in REDIS_URL_DEFAULTS)) {
      throw invalid(`the store URL option ${JSON.stringify(k)} is unknown; the options are ${Object.keys(REDIS_URL_DEFAULTS).join(', ')}`);
    }
    o[k] = v;
  }
  for (const k of ['timeout_ms', 'connect_timeout_ms', 'probe_ms']) o[k] = typeof o[k] === 'string' ? intOption(k, o[k], 1) : o[k];
  if (typeof o.grace_ms === 'string') o.grace_ms = intOption('grace_ms', o.grace_ms, 0);
  if (o.fallback !== 'local' && o.fallback !== 'none') {
    throw invalid(`the store URL option fallback=${o.fallback} is not local or none; pass fallback=local (the default) or fallback=none`);
  }
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(o.prefix)) {
    throw invalid(`the store URL option prefix=${o.prefix} must be 1 to 64 letters, digits, '_', '.' or '-'; pass e.g. prefix=ar`);
  }
  const client = new URL(url.href);
  client.search = '';
  client.hash = '';
  const noPassword = new URL(url.href);
  noPassword.password = '';
  return {
    url: url.href,
    display: redact(url),
    clientUrl: client.href,
    safeUrl: noPassword.href,
    prefix: o.prefix,
    timeoutMs: o.timeout_ms,
    connectTimeoutMs: o.connect_timeout_ms,
    fallback: o.fallback,
    spool: o.spool,
    probeMs: o.probe_ms,
    graceMs: o.grace_ms,
  };
}

/**
 * The store a URL names, the same text in Rust, Node and Python (docs/store.md,
 * "URL"): `<scheme>://<host>:<port>/<db>?prefix=<prefix>`, the host lowercased
 * (an IPv6 address in brackets), port 6379 and db 0 when left out; no
 * credentials, no other option. Workers of any language on one machine that
 * name one store get one default spool file.
 */
export function spoolIdentity(spec) {
  const url = new URL(spec);
  const { prefix } = parseRedisUrl(spec);
  const host = url.hostname.toLowerCase();
  const db = url.pathname.replace(/^\//, '') === '' ? 0 : Number(url.pathname.slice(1));
  return `${url.protocol}//${host}:${url.port === '' ? 6379 : Number(url.port)}/${db}?prefix=${prefix}`;
}

/** The default spool file of a URL: $XDG_STATE_HOME/agent-recovery/spool-<16 hex of sha256(spoolIdentity(URL))>.sqlite. */
export function defaultSpoolPath(spec) {
  const identity = spoolIdentity(spec);
  const base = process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  const h = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  return join(base, 'agent-recovery', `spool-${h}.sqlite`);
}

// ------------------------------------------------------------------ RedisStore

let bridge; // one worker thread for every RedisStore of the process, started on first use
let nextId = 1;

function callWorker(id, op, args, waitMs) {
  bridge ??= new SyncBridge(new URL('./store-redis-worker.js', import.meta.url));
  try {
    return bridge.call({ id, op, args }, waitMs);
  } catch (e) {
    return { err: { kind: 'unavailable', message: `${e.message}; retry, or report it` } };
  }
}

const badShape = (what, reply) =>
  new Error(`${what}: a reply of an unexpected shape (${JSON.stringify(reply)?.slice(0, 120)})`);

function replyInt(what, n) {
  if (!Number.isSafeInteger(n) || n < 0) throw badShape(what, n);
  return n;
}

/**
 * A store on a Redis 7 server (or Valkey), shared by every process that opens the same
 * URL and prefix. `new RedisStore(url)`; the URL's options: README, "Stores".
 * Same methods and errors as SqliteStore; `serverClock()` reads the server's clock.
 */
export class RedisStore {
  #id;
  #o;
  #closed = false;
  #clock;

  constructor(url) {
    this.#o = parseRedisUrl(url);
    this.#id = nextId++;
    this.#call('init', [{ clientUrl: this.#o.clientUrl, prefix: this.#o.prefix, timeoutMs: this.#o.timeoutMs, connectTimeoutMs: this.#o.connectTimeoutMs }]);
    try {
      this.#open();
    } catch (e) {
      this.close(); // the worker forgets the connection
      throw e;
    }
  }

  #open() {
    const r = this.#call('open', [SCHEMA_VERSION], 'opening');
    if (!Array.isArray(r) || r.length !== 3) throw this.#corrupt('opening', badShape('open', r));
    if (r[0] !== 1) {
      throw new StoreError(
        'incompatible',
        `redis store ${this.#o.display}: the prefix {${this.#o.prefix}} holds app ${JSON.stringify(r[1])} schema ${JSON.stringify(r[2])}, not agent-recovery schema <= ${SCHEMA_VERSION}; upgrade agent-recovery or use another prefix=`,
      );
    }
  }

  /** The URL without its password. */
  get url() {
    return this.#o.display;
  }

  /** The parsed URL options (timeoutMs, connectTimeoutMs, probeMs, graceMs, prefix, ...). */
  get options() {
    return { ...this.#o, url: undefined, clientUrl: undefined };
  }

  #corrupt(what, e) {
    return new StoreError('corrupt', `redis store ${this.#o.display}: ${what} failed (${e.message}); the data under prefix {${this.#o.prefix}} was written by another program, use another prefix`);
  }

  #call(op, args, what = op) {
    if (this.#closed) throw new StoreError('io', `redis store ${this.#o.display}: ${what} after close(); open a new RedisStore`);
    // The worker bounds each step itself; this is the backstop: connect, a command and
    // (on open) SCRIPT LOAD, plus a second for the thread.
    const reply = callWorker(this.#id, op, args, this.#o.connectTimeoutMs + 2 * this.#o.timeoutMs + 1000);
    if (reply && 'ok' in reply) return reply.ok;
    const err = reply?.err ?? { kind: 'unavailable', message: 'no reply from the worker thread' };
    const at = err.message.indexOf('; ');
    const [why, hint] = at < 0 ? [err.message, 'retry later'] : [err.message.slice(0, at), err.message.slice(at + 2)];
    throw new StoreError(err.kind, `redis store ${this.#o.display}: ${what} failed (${why.replaceAll('\n', ' ')}); ${hint}`);
  }

  get(key, nowMs) {
    checkName('key', key);
    checkInt('nowMs', nowMs);
    const r = this.#call('get', [key, nowMs], `reading ${JSON.stringify(key)}`);
    try {
      if (!Array.isArray(r)) throw badShape('get', r);
      if (r.length === 0) return null;
      if (r.length !== 2 || typeof r[0] !== 'string') throw badShape('get', r);
      return { value: r[0], version: replyInt('get', r[1]) };
    } catch (e) {
      throw this.#corrupt(`reading ${JSON.stringify(key)}`, e);
    }
  }

  compareAndSet(key, expected, value, ttlMs, nowMs) {
    checkCas(key, expected, value, ttlMs, nowMs);
    const r = this.#call(
      'cas',
      [key, expected ?? null, value, ttlMs ?? null, nowMs, this.#o.graceMs, PURGE_BATCH],
      `compare-and-set of ${JSON.stringify(key)}`,
    );
    try {
      if (!Array.isArray(r)) throw badShape('cas', r);
      if (r[0] === 1 && r.length === 2) return { written: true, version: replyInt('cas', r[1]) };
      if (r[0] === 0 && r.length === 1) return { written: false, current: null };
      if (r[0] === 0 && r.length === 3 && typeof r[1] === 'string') {
        return { written: false, current: { value: r[1], version: replyInt('cas', r[2]) } };
      }
      throw badShape('cas', r);
    } catch (e) {
      throw this.#corrupt(`compare-and-set of ${JSON.stringify(key)}`, e);
    }
  }

  append(stream, record, nowMs) {
    checkName('stream', stream);
    checkInt('nowMs', nowMs);
    checkJson('record', stream, record);
    const r = this.#call('append', [stream, record, nowMs], `appending to ${JSON.stringify(stream)}`);
    try {
      return replyInt('append', r);
    } catch (e) {
      throw this.#corrupt(`appending to ${JSON.stringify(stream)}`, e);
    }
  }

  read(stream, after, limit) {
    checkName('stream', stream);
    checkInt('after', after);
    checkInt('limit', limit);
    if (limit === 0) return [];
    const r = this.#call('read', [stream, after, limit], `reading ${JSON.stringify(stream)}`);
    try {
      if (!Array.isArray(r)) throw badShape('read', r);
      return r.map((entry) => {
        const [id, fields] = Array.isArray(entry) ? entry : [];
        const m = typeof id === 'string' ? /^([0-9]+)-0$/.exec(id) : null;
        if (!m || !Array.isArray(fields)) throw badShape('read', entry);
        const at = fields.findIndex((f, i) => i % 2 === 0 && f === 'r');
        if (at < 0 || typeof fields[at + 1] !== 'string') throw badShape('read', entry);
        return [replyInt('read', Number(m[1])), fields[at + 1]];
      });
    } catch (e) {
      throw this.#corrupt(`reading ${JSON.stringify(stream)}`, e);
    }
  }

  delete(key) {
    checkName('key', key);
    const r = this.#call('delete', [key], `deleting ${JSON.stringify(key)}`);
    if (r !== 0 && r !== 1) throw this.#corrupt(`deleting ${JSON.stringify(key)}`, badShape('delete', r));
    return r === 1;
  }

  keys(prefix, nowMs) {
    checkName('prefix', prefix, true);
    checkInt('nowMs', nowMs);
    const r = this.#call('keys', [prefix, nowMs], 'listing keys');
    if (!Array.isArray(r) || r.some((k) => typeof k !== 'string')) throw this.#corrupt('listing keys', badShape('keys', r));
    return r;
  }

  /** Remove every entry expired at `nowMs`; returns how many were removed. */
  purgeExpired(nowMs) {
    checkInt('nowMs', nowMs);
    const r = this.#call('purge', [nowMs], 'purging expired entries');
    try {
      return replyInt('purge', r);
    } catch (e) {
      throw this.#corrupt('purging expired entries', e);
    }
  }

  /** PING the server: throws StoreError 'unavailable' when it does not answer within timeout_ms. */
  ping() {
    this.#call('ping', [], 'PING');
  }

  /** @internal One TIME sample: {serverMs, t0, t1} (local ms before and after the round trip). */
  sampleTime() {
    const { reply, t0, t1 } = this.#call('time', [], 'TIME');
    if (!Array.isArray(reply) || reply.length !== 2 || !reply.every((x) => /^[0-9]+$/.test(String(x)))) {
      throw this.#corrupt('TIME', badShape('time', reply));
    }
    return { serverMs: Number(reply[0]) * 1000 + Math.floor(Number(reply[1]) / 1000), t0, t1 };
  }

  /**
   * The server's clock (one per store): TIME sampled on first use and every 10 s; offset =
   * server time - midpoint of the round trip; now = local monotonic time + offset, never
   * going backwards. When Redis does not answer it keeps the last offset (0 at first).
   */
  serverClock() {
    this.#clock ??= new ServerClock(this);
    return this.#clock;
  }

  /** Close the connection (the data stays in Redis). */
  close() {
    if (this.#closed) return;
    this.#call('close', []);
    this.#closed = true;
  }
}

/** A clock reading a Redis server's TIME (see RedisStore.serverClock). */
export class ServerClock {
  #store;
  #offset = 0;
  #sampledAt = -Infinity; // local ms of the last attempt
  #last = 0;

  constructor(store) {
    this.#store = store;
  }

  /** The offset (server - local ms) in use. */
  get offsetMs() {
    return this.#offset;
  }

  nowMs() {
    const local = performance.timeOrigin + performance.now();
    if (local - this.#sampledAt >= CLOCK_SAMPLE_MS) {
      this.#sampledAt = local;
      try {
        const { serverMs, t0, t1 } = this.#store.sampleTime();
        this.#offset = serverMs - (t0 + t1) / 2;
      } catch {
        // unreachable: keep the last offset
      }
    }
    const now = Math.floor(performance.timeOrigin + performance.now() + this.#offset);
    this.#last = Math.max(this.#last, now);
    return this.#last;
  }

  /** Sleep `ms` real milliseconds; resolves early when `signal` aborts (SystemClock's sleep). */
  sleepMs(ms, signal) {
    return REAL_SLEEP.sleepMs(ms, signal);
  }
}

const REAL_SLEEP = new SystemClock();

// ------------------------------------------------------------------ FallbackStore

const spooled = (key) => SPOOLED_PREFIXES.some((p) => key.startsWith(p));

/**
 * A store over a primary (a RedisStore) that falls back to a local store (the spool, a
 * SqliteStore) while the primary is `unavailable`, and flushes what must not be lost
 * when it answers again. `options`: {onEvent(text), probeMs = 1000, name}. See
 * docs in README, "Stores".
 */
export class FallbackStore {
  #primary;
  #local;
  #probeMs;
  #name;
  #listeners = [];
  #healthy = true;
  #startup = true;
  #degradedAt = 0;
  #lastProbe = 0;
  #lastNow = 0;
  #owner = randomUUID();

  constructor(primary, local, { onEvent, probeMs = 1000, name } = {}) {
    checkInt('probeMs', probeMs);
    if (onEvent !== undefined && typeof onEvent !== 'function') throw invalid('onEvent must be a function (text) => void');
    this.#primary = primary;
    this.#local = local;
    this.#probeMs = probeMs;
    this.#name = name ?? primary.url ?? 'primary';
    if (onEvent) this.#listeners.push(onEvent);
  }

  /** The primary store (the RedisStore). */
  get primary() {
    return this.#primary;
  }

  /** The local store (the spool file). */
  get local() {
    return this.#local;
  }

  /** True while calls go to the primary. */
  get healthy() {
    return this.#healthy;
  }

  /** Call `fn(text)` with each store event (JSON text) too; returns a function that stops it. */
  subscribe(fn) {
    this.#listeners.push(fn);
    return () => {
      this.#listeners = this.#listeners.filter((f) => f !== fn);
    };
  }

  /** The primary's server clock, when it has one. */
  serverClock() {
    return typeof this.#primary.serverClock === 'function' ? this.#primary.serverClock() : undefined;
  }

  #emit(event) {
    const text = JSON.stringify(event);
    for (const fn of this.#listeners) {
      try {
        fn(text);
      } catch {
        // a listener's failure never fails a store call
      }
    }
  }

  #degrade(nowMs, err) {
    this.#healthy = false;
    this.#degradedAt = nowMs;
    this.#lastProbe = nowMs;
    this.#emit({ event: 'store_degraded', store: this.#name, at_ms: nowMs, kind: err.kind, message: err.message });
  }

  #probe() {
    if (typeof this.#primary.ping === 'function') this.#primary.ping();
    else this.#primary.get('agent-recovery/ping', this.#lastNow);
  }

  /** Flush the spool to the primary; true when it is empty now. Throws the primary's errors. */
  #flush(nowMs) {
    const start = this.#local.get(SPOOL_CURSOR, nowMs);
    if (this.#local.read(SPOOL_STREAM, start ? JSON.parse(start.value).seq : 0, 1).length === 0) return { done: true, flushed: 0 };
    const lease = this.#local.get(SPOOL_LEASE, nowMs);
    const mine = JSON.stringify({ owner: this.#owner });
    if (lease && lease.value !== mine) return { done: false, flushed: 0 };
    const took = this.#local.compareAndSet(SPOOL_LEASE, lease ? lease.version : null, mine, SPOOL_LEASE_MS, nowMs);
    if (!took.written) return { done: false, flushed: 0 };
    let flushed = 0;
    try {
      for (;;) {
        const cur = this.#local.get(SPOOL_CURSOR, nowMs);
        const seq = cur ? JSON.parse(cur.value).seq : 0;
        const batch = this.#local.read(SPOOL_STREAM, seq, 64);
        if (batch.length === 0) break;
        let cursor = cur;
        for (const [n, text] of batch) {
          this.#apply(JSON.parse(text));
          flushed += 1;
          const w = this.#local.compareAndSet(SPOOL_CURSOR, cursor ? cursor.version : null, JSON.stringify({ seq: n }), null, nowMs);
          cursor = w.written ? { version: w.version } : this.#local.get(SPOOL_CURSOR, nowMs);
        }
      }
    } finally {
      const held = this.#local.get(SPOOL_LEASE, nowMs);
      if (held && held.value === mine) this.#local.delete(SPOOL_LEASE);
    }
    return { done: true, flushed };
  }

  #apply(rec) {
    const p = this.#primary;
    if (rec.op === 'append') p.append(rec.stream, rec.record, rec.now_ms);
    else if (rec.op === 'delete') p.delete(rec.key);
    else if (rec.op === 'set') {
      // Last writer wins: the spooled value replaces whatever version is there.
      for (let i = 0; ; i++) {
        const cur = p.get(rec.key, rec.now_ms);
        if (p.compareAndSet(rec.key, cur ? cur.version : null, rec.value, rec.ttl_ms, rec.now_ms).written) return;
        if (i >= 100) throw new StoreError('unavailable', `flushing ${JSON.stringify(rec.key)}: 100 conflicting writes in a row; the flush resumes at the next probe`);
      }
    }
  }

  #restore(nowMs) {
    const { done, flushed } = this.#flush(nowMs);
    if (!done) return false;
    const wasDegraded = !this.#healthy;
    this.#healthy = true;
    if (wasDegraded || flushed > 0) {
      this.#emit({ event: 'store_restored', store: this.#name, at_ms: nowMs, degraded_ms: wasDegraded ? Math.max(0, nowMs - this.#degradedAt) : 0, flushed });
    }
    return true;
  }

  /** Run `primary()` or, degraded, `local()`. */
  #route(nowMs, primary, local) {
    if (nowMs !== undefined) this.#lastNow = Math.max(this.#lastNow, nowMs);
    const now = nowMs ?? this.#lastNow;
    if (this.#startup && this.#healthy) {
      try {
        this.#restore(now); // a spool left by an earlier process
        this.#startup = false;
      } catch (e) {
        if (!(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
        this.#degrade(now, e);
      }
    }
    if (!this.#healthy && now >= this.#lastProbe + this.#probeMs) {
      this.#lastProbe = now;
      try {
        this.#probe();
        this.#restore(now);
        this.#startup = false;
      } catch (e) {
        if (!(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
      }
    }
    if (this.#healthy) {
      try {
        return primary();
      } catch (e) {
        if (!(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
        this.#degrade(now, e);
      }
    }
    return local();
  }

  #spool(record, nowMs) {
    this.#local.append(SPOOL_STREAM, JSON.stringify(record), nowMs);
  }

  get(key, nowMs) {
    return this.#route(nowMs, () => this.#primary.get(key, nowMs), () => this.#local.get(key, nowMs));
  }

  compareAndSet(key, expected, value, ttlMs, nowMs) {
    return this.#route(
      nowMs,
      () => this.#primary.compareAndSet(key, expected, value, ttlMs, nowMs),
      () => {
        const r = this.#local.compareAndSet(key, expected, value, ttlMs, nowMs);
        if (r.written && spooled(key)) this.#spool({ op: 'set', key, value, ttl_ms: ttlMs ?? null, now_ms: nowMs }, nowMs);
        return r;
      },
    );
  }

  append(stream, record, nowMs) {
    return this.#route(
      nowMs,
      () => this.#primary.append(stream, record, nowMs),
      () => {
        checkName('stream', stream);
        checkInt('nowMs', nowMs);
        checkJson('record', stream, record);
        // The spool first: a crash between the two leaves the record to flush, never lost.
        this.#spool({ op: 'append', stream, record, now_ms: nowMs }, nowMs);
        return this.#local.append(stream, record, nowMs);
      },
    );
  }

  read(stream, after, limit) {
    return this.#route(undefined, () => this.#primary.read(stream, after, limit), () => this.#local.read(stream, after, limit));
  }

  delete(key) {
    return this.#route(
      undefined,
      () => this.#primary.delete(key),
      () => {
        const existed = this.#local.delete(key);
        // Spooled even when absent here: the entry may exist in the primary only.
        if (spooled(key)) this.#spool({ op: 'delete', key }, this.#lastNow);
        return existed;
      },
    );
  }

  keys(prefix, nowMs) {
    return this.#route(nowMs, () => this.#primary.keys(prefix, nowMs), () => this.#local.keys(prefix, nowMs));
  }

  purgeExpired(nowMs) {
    return this.#route(nowMs, () => this.#primary.purgeExpired(nowMs), () => this.#local.purgeExpired(nowMs));
  }

  /** Close both stores. */
  close() {
    this.#primary.close?.();
    this.#local.close?.();
  }
}

// ------------------------------------------------------------------ openStore

/**
 * Open a store from a spec: a redis:// or rediss:// URL -> FallbackStore(RedisStore, spool)
 * (or the bare RedisStore with fallback=none); anything else -> SqliteStore(path).
 * `options.onEvent(text)`: the FallbackStore's event listener.
 */
export function openStore(spec, { onEvent } = {}) {
  if (typeof spec !== 'string' || spec === '') throw invalid('the store spec must be a non-empty string: a file path or a redis:// URL');
  if (!/^rediss?:\/\//i.test(spec)) return new SqliteStore(spec);
  const o = parseRedisUrl(spec);
  let primary;
  try {
    primary = new RedisStore(spec);
  } catch (e) {
    if (o.fallback === 'none' || !(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
    primary = new LazyRedisStore(spec, e);
  }
  if (o.fallback === 'none') return primary;
  const spool = o.spool ?? defaultSpoolPath(spec);
  mkdirSync(dirname(spool), { recursive: true });
  const store = new FallbackStore(primary, new SqliteStore(spool), { onEvent, probeMs: o.probeMs, name: o.display });
  if (primary instanceof LazyRedisStore) store.get('agent-recovery/ping', Date.now()); // degrade now, with the opening error
  return store;
}

/** A RedisStore opened at its first successful call (when Redis was down at openStore). */
class LazyRedisStore {
  #spec;
  #store = null;
  #error;
  #clock;

  constructor(spec, error) {
    this.#spec = spec;
    this.#error = error;
  }

  get url() {
    return parseRedisUrl(this.#spec).display;
  }

  #s() {
    if (this.#store) return this.#store;
    this.#store = new RedisStore(this.#spec);
    return this.#store;
  }

  serverClock() {
    const lazy = this;
    this.#clock ??= new ServerClock({ sampleTime: () => lazy.#s().sampleTime() });
    return this.#clock;
  }

  get(...a) {
    return this.#s().get(...a);
  }
  compareAndSet(...a) {
    return this.#s().compareAndSet(...a);
  }
  append(...a) {
    return this.#s().append(...a);
  }
  read(...a) {
    return this.#s().read(...a);
  }
  delete(...a) {
    return this.#s().delete(...a);
  }
  keys(...a) {
    return this.#s().keys(...a);
  }
  purgeExpired(...a) {
    return this.#s().purgeExpired(...a);
  }
  ping() {
    this.#s().ping();
  }
  close() {
    this.#store?.close();
  }
  /** @internal the error Redis answered when the store was opened. */
  get openingError() {
    return this.#error;
  }
}
