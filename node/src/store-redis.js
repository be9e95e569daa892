// The Redis store, the fallback spool and openStore(spec): many workers on many
// machines sharing one state through Redis 7 (docs/store.md, "The Redis backend").
//
//   const store = openStore('redis://localhost:6379/0?prefix=ar');   // FallbackStore(RedisStore, spool)
//   const store = openStore('redis://localhost:6379?fallback=none'); // RedisStore alone
//   const store = openStore('redis+cluster://10.0.0.1:7000,10.0.0.2:7000'); // a Redis Cluster
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
import { connection, perform } from './store-redis-client.js';
import { REDIS_SCHEMA } from './store-redis-layout.js';
import { SqliteOffThread } from './store-sqlite-async.js';
import { SyncBridge } from './sync-bridge.js';
import { SqliteStore, StoreError, asyncFace, checkCas, checkInt, checkJson, checkName, invalid } from './store.js';

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
/** The local stream the spool writes to, and its lease and cursor entries. */
export const SPOOL_STREAM = 'agent-recovery/spool';
const SPOOL_LEASE = 'agent-recovery/spool/lease';
const SPOOL_CURSOR = 'agent-recovery/spool/cursor';
/** The flush lease's time to live, renewed at each batch: a process that died flushing holds the others back this long at most. */
const SPOOL_LEASE_MS = 5_000;
/** Spool records a flush applies between two renewals of its lease. */
const SPOOL_BATCH = 256;
/**
 * Keys whose writes and deletes are copied to the spool file while Redis answers (so they are
 * honoured while it is down) and spooled while it is down (so they reach Redis again):
 * idempotency entries, run journals, dead-letter items. Appends: every stream.
 */
export const SPOOLED_PREFIXES = Object.freeze(['agent-recovery/idem/', 'agent-recovery/journal/', 'agent-recovery/dead-letter/']);
/** How many times a mirror write retries on a local conflict. */
const MIRROR_RETRIES = 4;
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
  if (typeof spec === 'string' && spec.startsWith('redis+cluster://')) return parseClusterUrl(spec);
  let url;
  try {
    url = new URL(spec);
  } catch {
    throw invalid(`the store URL ${JSON.stringify(spec)} does not parse; write redis://[user:pass@]host[:port][/db][?options] or redis+cluster://host:port,host:port[?options]`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw invalid(`the store URL scheme ${url.protocol} is not redis: or rediss:; write redis://host:port`);
  }
  if (!/^(\/[0-9]*)?$/.test(url.pathname)) {
    throw invalid(`the store URL path ${url.pathname} is not a database number; write redis://host:port/0`);
  }
  const o = urlOptions(url.searchParams);
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
    cluster: false,
    nodes: [client.href],
    ...o,
  };
}

/**
 * Parse `redis+cluster://[user:pass@]host:port[,host:port..][/][?opts]`: the seed
 * nodes of a Redis Cluster (any reachable one gives the others), no database.
 */
function parseClusterUrl(spec) {
  const rest = spec.slice('redis+cluster://'.length);
  const q = rest.indexOf('?');
  const [authority, query] = q < 0 ? [rest, ''] : [rest.slice(0, q), rest.slice(q + 1)];
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at + 1);
  const hosts = (at < 0 ? authority : authority.slice(at + 1)).replace(/\/$/, '');
  const seeds = hosts.split(',');
  const safeUserinfo = userinfo.includes(':') ? `${userinfo.slice(0, userinfo.indexOf(':'))}:***@` : userinfo;
  const display = `redis+cluster://${safeUserinfo}${hosts}`;
  if (hosts === '' || seeds.some((h) => !/^(\[[0-9A-Fa-f:.]+\]|[^\s/:,@?#[\]]+):[0-9]{1,5}$/.test(h))) {
    throw invalid(`the cluster URL ${display} does not name host:port seed nodes (and no database); write redis+cluster://host1:port1,host2:port2`);
  }
  const nodes = seeds.map((h) => `redis://${userinfo}${h}`);
  const o = urlOptions(new URLSearchParams(query));
  const noPassword = userinfo.includes(':') ? `redis+cluster://${userinfo.slice(0, userinfo.indexOf(':'))}@${hosts}` : `redis+cluster://${userinfo}${hosts}`;
  return { url: spec, display, clientUrl: nodes[0], safeUrl: noPassword, cluster: true, nodes, ...o };
}

/** The options of a store URL's query string, checked, with their defaults. */
function urlOptions(searchParams) {
  const o = { ...REDIS_URL_DEFAULTS };
  for (const [k, v] of searchParams) {
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
  return {
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
  const { prefix, cluster, nodes } = parseRedisUrl(spec);
  if (cluster) {
    // The seed nodes lowercased and sorted, without credentials.
    const seeds = nodes.map((n) => n.slice(n.lastIndexOf('@') + 1).replace(/^redis:\/\//, '').toLowerCase()).sort();
    return `redis+cluster://${seeds.join(',')}?prefix=${prefix}`;
  }
  const url = new URL(spec);
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

/** The reply of one operation as its value, or the StoreError it stands for. */
function unwrap(display, reply, what) {
  if (reply && 'ok' in reply) return reply.ok;
  const err = reply?.err ?? { kind: 'unavailable', message: 'no reply from the worker thread' };
  const at = err.message.indexOf('; ');
  const [why, hint] = at < 0 ? [err.message, 'retry later'] : [err.message.slice(0, at), err.message.slice(at + 2)];
  throw new StoreError(err.kind, `redis store ${display}: ${what} failed (${why.replaceAll('\n', ' ')}); ${hint}`);
}

/** The methods a store offers as `store.async`, each resolving as its synchronous twin returns. */
export const ASYNC_METHODS = Object.freeze(['get', 'compareAndSet', 'append', 'read', 'delete', 'keys', 'purgeExpired']);

/**
 * A store on a Redis 7 server (or Valkey), shared by every process that opens the same
 * URL and prefix. `new RedisStore(url)`; the URL's options: README, "Stores".
 * Same methods and errors as SqliteStore; `serverClock()` reads the server's clock.
 *
 * Two faces on two connections: the synchronous methods block the calling thread
 * (a worker thread runs the client, src/sync-bridge.js), for scripts and blocking
 * callers; `store.async` has the same methods returning promises, on a client of
 * this thread that never blocks it. The runtime uses `store.async`.
 */
export class RedisStore {
  #id;
  #o;
  #closed = false;
  #clock;
  #conn = null; // this thread's connection (store.async)
  #opening = null; // open.lua on it, once
  #async;
  #syncOpen = false; // the worker's connection checked the store's metadata

  /**
   * `options.open` (default true): check the store's metadata now, blocking
   * (`open.lua`; throws `unavailable` when Redis does not answer). With false
   * nothing is sent until the first call, and each face checks it then.
   */
  constructor(url, { open = true } = {}) {
    this.#o = parseRedisUrl(url);
    this.#id = nextId++;
    if (open) this.#openSync();
  }

  /** The worker's connection, its metadata checked (once; again after a failure). */
  #openSync() {
    if (this.#syncOpen) return;
    this.#call('init', [this.#connOptions()]);
    try {
      this.#checkOpen(this.#call('open', [REDIS_SCHEMA], 'opening'));
    } catch (e) {
      this.#call('close', []); // the worker forgets the connection
      throw e;
    }
    this.#syncOpen = true;
  }

  #connOptions() {
    const o = this.#o;
    return { clientUrl: o.clientUrl, cluster: o.cluster, nodes: o.nodes, prefix: o.prefix, timeoutMs: o.timeoutMs, connectTimeoutMs: o.connectTimeoutMs };
  }

  #checkOpen(r) {
    if (!Array.isArray(r) || r.length !== 3) throw this.#corrupt('opening', badShape('open', r));
    if (r[0] !== 1) {
      throw new StoreError(
        'incompatible',
        `redis store ${this.#o.display}: the prefix {${this.#o.prefix}} holds app ${JSON.stringify(r[1])} schema ${JSON.stringify(r[2])}, not agent-recovery schema ${REDIS_SCHEMA}; use another prefix=, or drain a store of another schema with the agent-recovery version that wrote it`,
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

  #closedError(what) {
    return new StoreError('io', `redis store ${this.#o.display}: ${what} after close(); open a new RedisStore`);
  }

  #call(op, args, what = op) {
    if (this.#closed) throw this.#closedError(what);
    // The worker bounds each step itself; this is the backstop: connect, a command and
    // (on open) SCRIPT LOAD, plus a second for the thread.
    const reply = callWorker(this.#id, op, args, this.#o.connectTimeoutMs + 2 * this.#o.timeoutMs + 1000);
    return unwrap(this.#o.display, reply, what);
  }

  /** `op` on this thread's connection (never blocks it): bounded by connect_timeout_ms + timeout_ms per step. */
  async #callAsync(op, args, what = op) {
    if (this.#closed) throw this.#closedError(what);
    try {
      this.#conn ??= connection(this.#connOptions());
    } catch (e) {
      throw new StoreError(e.kind ?? 'io', `redis store ${this.#o.display}: ${e.message}`);
    }
    if (op !== 'ping' && op !== 'time') {
      // The store's metadata is checked on this connection too, once (again after a failure).
      this.#opening ??= perform(this.#conn, 'open', [REDIS_SCHEMA]).then((reply) => this.#checkOpen(unwrap(this.#o.display, reply, 'opening')));
      try {
        await this.#opening;
      } catch (e) {
        this.#opening = null;
        throw e;
      }
    }
    return unwrap(this.#o.display, await perform(this.#conn, op, args), what);
  }

  /** Run `plan` = [op, args, what, parse] blocking. */
  #sync([op, args, what, parse]) {
    if (this.#closed) throw this.#closedError(what);
    this.#openSync();
    return parse(this.#call(op, args, what));
  }

  /** Run `plan` = [op, args, what, parse] on this thread's connection. */
  async #await([op, args, what, parse]) {
    return parse(await this.#callAsync(op, args, what));
  }

  #getPlan(key, nowMs) {
    checkName('key', key);
    checkInt('nowMs', nowMs);
    const what = `reading ${JSON.stringify(key)}`;
    return ['get', [key, nowMs], what, (r) => {
      try {
        if (!Array.isArray(r)) throw badShape('get', r);
        if (r.length === 0) return null;
        if (r.length !== 2 || typeof r[0] !== 'string') throw badShape('get', r);
        return { value: r[0], version: replyInt('get', r[1]) };
      } catch (e) {
        throw this.#corrupt(what, e);
      }
    }];
  }

  #casPlan(key, expected, value, ttlMs, nowMs) {
    checkCas(key, expected, value, ttlMs, nowMs);
    const what = `compare-and-set of ${JSON.stringify(key)}`;
    return ['cas', [key, expected ?? null, value, ttlMs ?? null, nowMs, this.#o.graceMs], what, (r) => {
      try {
        if (!Array.isArray(r)) throw badShape('cas', r);
        if (r[0] === 1 && r.length === 2) return { written: true, version: replyInt('cas', r[1]) };
        if (r[0] === 0 && r.length === 1) return { written: false, current: null };
        if (r[0] === 0 && r.length === 3 && typeof r[1] === 'string') {
          return { written: false, current: { value: r[1], version: replyInt('cas', r[2]) } };
        }
        throw badShape('cas', r);
      } catch (e) {
        throw this.#corrupt(what, e);
      }
    }];
  }

  #appendPlan(stream, record, nowMs) {
    checkName('stream', stream);
    checkInt('nowMs', nowMs);
    checkJson('record', stream, record);
    const what = `appending to ${JSON.stringify(stream)}`;
    return ['append', [stream, record, nowMs], what, (r) => {
      try {
        return replyInt('append', r);
      } catch (e) {
        throw this.#corrupt(what, e);
      }
    }];
  }

  #readPlan(stream, after, limit) {
    checkName('stream', stream);
    checkInt('after', after);
    checkInt('limit', limit);
    const what = `reading ${JSON.stringify(stream)}`;
    return ['read', [stream, after, limit], what, (r) => {
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
        throw this.#corrupt(what, e);
      }
    }];
  }

  #deletePlan(key) {
    checkName('key', key);
    const what = `deleting ${JSON.stringify(key)}`;
    return ['delete', [key], what, (r) => {
      if (r !== 0 && r !== 1) throw this.#corrupt(what, badShape('delete', r));
      return r === 1;
    }];
  }

  #keysPlan(prefix, nowMs) {
    checkName('prefix', prefix, true);
    checkInt('nowMs', nowMs);
    return ['keys', [prefix, nowMs], 'listing keys', (r) => {
      if (!Array.isArray(r) || r.some((k) => typeof k !== 'string')) throw this.#corrupt('listing keys', badShape('keys', r));
      return r;
    }];
  }

  #purgePlan(nowMs) {
    checkInt('nowMs', nowMs);
    return ['purge', [nowMs], 'purging expired entries', (r) => {
      try {
        return replyInt('purge', r);
      } catch (e) {
        throw this.#corrupt('purging expired entries', e);
      }
    }];
  }

  #timePlan() {
    return ['time', [], 'TIME', ({ reply, t0, t1 }) => {
      if (!Array.isArray(reply) || reply.length !== 2 || !reply.every((x) => /^[0-9]+$/.test(String(x)))) {
        throw this.#corrupt('TIME', badShape('time', reply));
      }
      return { serverMs: Number(reply[0]) * 1000 + Math.floor(Number(reply[1]) / 1000), t0, t1 };
    }];
  }

  get(key, nowMs) {
    return this.#sync(this.#getPlan(key, nowMs));
  }

  compareAndSet(key, expected, value, ttlMs, nowMs) {
    return this.#sync(this.#casPlan(key, expected, value, ttlMs, nowMs));
  }

  append(stream, record, nowMs) {
    return this.#sync(this.#appendPlan(stream, record, nowMs));
  }

  read(stream, after, limit) {
    const plan = this.#readPlan(stream, after, limit);
    return limit === 0 ? [] : this.#sync(plan);
  }

  delete(key) {
    return this.#sync(this.#deletePlan(key));
  }

  keys(prefix, nowMs) {
    return this.#sync(this.#keysPlan(prefix, nowMs));
  }

  /** Remove every entry expired at `nowMs`; returns how many were removed. */
  purgeExpired(nowMs) {
    return this.#sync(this.#purgePlan(nowMs));
  }

  /** PING the server: throws StoreError 'unavailable' when it does not answer within timeout_ms. */
  ping() {
    this.#sync(['ping', [], 'PING', () => undefined]);
  }

  /** @internal One TIME sample: {serverMs, t0, t1} (local ms before and after the round trip). */
  sampleTime() {
    return this.#sync(this.#timePlan());
  }

  /**
   * The same methods returning promises, on a connection of this thread: a call never
   * blocks the event loop; it settles within timeout_ms (plus connect_timeout_ms when it
   * must connect). Also `ping()` and `sampleTime()`.
   */
  get async() {
    this.#async ??= Object.freeze({
      get: async (key, nowMs) => this.#await(this.#getPlan(key, nowMs)),
      compareAndSet: async (key, expected, value, ttlMs, nowMs) => this.#await(this.#casPlan(key, expected, value, ttlMs, nowMs)),
      append: async (stream, record, nowMs) => this.#await(this.#appendPlan(stream, record, nowMs)),
      read: async (stream, after, limit) => {
        const plan = this.#readPlan(stream, after, limit);
        return limit === 0 ? [] : this.#await(plan);
      },
      delete: async (key) => this.#await(this.#deletePlan(key)),
      keys: async (prefix, nowMs) => this.#await(this.#keysPlan(prefix, nowMs)),
      purgeExpired: async (nowMs) => this.#await(this.#purgePlan(nowMs)),
      ping: async () => {
        await this.#callAsync('ping', [], 'PING');
      },
      sampleTime: async () => this.#await(this.#timePlan()),
    });
    return this.#async;
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

  /** Close both connections (the data stays in Redis). */
  close() {
    if (this.#closed) return;
    if (this.#conn) perform(this.#conn, 'close', []);
    if (this.#syncOpen) this.#call('close', []);
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

  /**
   * Take a sample now unless one was taken already; resolves when it is done (the
   * runtime awaits it at creation, so its first readings are the server's).
   */
  async ready() {
    if (this.#sampledAt === -Infinity) {
      this.#sampledAt = performance.timeOrigin + performance.now();
      await this.#sample();
    } else {
      await this.#pending;
    }
  }

  #pending = undefined;

  /** One TIME round trip; sets the offset when Redis answered. */
  async #sample() {
    const sampler = this.#store.async?.sampleTime;
    try {
      const { serverMs, t0, t1 } = sampler ? await (this.#pending = sampler()) : this.#store.sampleTime();
      this.#offset = serverMs - (t0 + t1) / 2;
    } catch {
      // unreachable: keep the last offset
    } finally {
      this.#pending = undefined;
    }
  }

  /**
   * The server's time now, Unix ms. A due sample runs in the background on the
   * store's asynchronous connection (`store.async`, when it has one): this call
   * answers at once with the offset it has, and never waits for Redis.
   */
  nowMs() {
    const local = performance.timeOrigin + performance.now();
    if (local - this.#sampledAt >= CLOCK_SAMPLE_MS) {
      this.#sampledAt = local;
      this.#sample();
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
/** What a FallbackStore call yields for work its asynchronous face runs in the background. */
const DETACH = Symbol('detach');
/** What a FallbackStore call yields for an operation of its local store: [LOCAL, method, args]. */
const LOCAL = Symbol('local');

/**
 * A store over a primary (a RedisStore) that falls back to a local store (the spool, a
 * SqliteStore) while the primary is `unavailable`, and flushes what must not be lost
 * when it answers again. `options`: {onEvent(text), probeMs = 1000, name}. See
 * docs in README, "Stores".
 *
 * Each call is written once, as a generator that yields the primary's operations
 * ([method, args]) and does the local store's (synchronous, on this machine) itself;
 * the synchronous methods carry them out blocking, `store.async` awaits the
 * primary's asynchronous face, so a primary that stopped answering never holds
 * the event loop.
 */
export class FallbackStore {
  #primary;
  #local;
  #probeMs;
  #name;
  #listeners = [];
  #healthy = true;
  #startup = true;
  #startupSpool = false; // degraded only because an earlier process left a spool
  #reconnecting = false; // a background probe or flush of this store is in progress
  #closedStore = false; // close() was called: no background probe or flush starts
  #flushing = false; // a flush of this store is in progress (async calls interleave)
  #spoolEnd = 0; // the last spool record this store wrote
  #localAsync = undefined; // the local store's asynchronous face, made at the first awaited call
  #degradedAt = 0;
  #lastProbe = 0;
  #lastNow = 0;
  #probes = 0; // probes of the primary started
  #owner = randomUUID();
  #async;

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

  /** True while a background probe or flush runs (calls meanwhile are served locally, without waiting). */
  get reconnecting() {
    return this.#reconnecting;
  }

  /**
   * How many probes of the primary this store has started (each tries the primary and, when it
   * answers, flushes the spool). While degraded there is at most one per `probeMs` of the
   * `nowMs` passed in, whatever the number of calls.
   */
  get probes() {
    return this.#probes;
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
    if (!this.#healthy) return; // concurrent calls that failed together: one event
    this.#healthy = false;
    this.#degradedAt = nowMs;
    this.#lastProbe = nowMs;
    this.#emit({ event: 'store_degraded', store: this.#name, at_ms: nowMs, kind: err.kind, message: err.message });
  }

  *#probe() {
    if (typeof this.#primary.ping === 'function') yield ['ping', []];
    else yield ['get', ['agent-recovery/ping', this.#lastNow]];
  }

  /** Flush the spool to the primary; {done, flushed}: done when it is empty now. Throws the primary's errors. */
  *#flush(nowMs) {
    if (this.#flushing) return { done: false, flushed: 0 };
    const start = yield [LOCAL, 'get', [SPOOL_CURSOR, nowMs]];
    if ((yield [LOCAL, 'read', [SPOOL_STREAM, start ? JSON.parse(start.value).seq : 0, 1]]).length === 0) return { done: true, flushed: 0 };
    if (this.#flushing) return { done: false, flushed: 0 };
    const lease = yield [LOCAL, 'get', [SPOOL_LEASE, nowMs]];
    const mine = JSON.stringify({ owner: this.#owner });
    // Another process is flushing: serve the primary again once it has flushed this store's
    // records (so every process of the machine stops adding to the spool soon).
    if (lease && lease.value !== mine) return { done: !this.#startupSpool && (start ? JSON.parse(start.value).seq : 0) >= this.#spoolEnd, flushed: 0 };
    if (this.#flushing) return { done: false, flushed: 0 };
    this.#flushing = true;
    let flushed = 0;
    let opened = false;
    let held = false;
    try {
      const took = yield [LOCAL, 'compareAndSet', [SPOOL_LEASE, lease ? lease.version : null, mine, SPOOL_LEASE_MS, nowMs]];
      if (!took.written) return { done: false, flushed: 0 };
      held = true;
      let leaseVersion = took.version;
      // What this machine's processes had spooled when the flush began.
      let target = this.#spoolEnd;
      for (let at = start ? JSON.parse(start.value).seq : 0; ; ) {
        const page = yield [LOCAL, 'read', [SPOOL_STREAM, at, 1024]];
        if (page.length === 0) break;
        at = page[page.length - 1][0];
        target = Math.max(target, at);
      }
      for (;;) {
        const cur = yield [LOCAL, 'get', [SPOOL_CURSOR, nowMs]];
        const seq = cur ? JSON.parse(cur.value).seq : 0;
        const batch = yield [LOCAL, 'read', [SPOOL_STREAM, seq, SPOOL_BATCH]];
        if (batch.length === 0) break;
        // Renew the lease (from the latest time a call passed in).
        const at = Math.max(nowMs, this.#lastNow);
        let renewed = yield [LOCAL, 'compareAndSet', [SPOOL_LEASE, leaseVersion, mine, SPOOL_LEASE_MS, at]];
        // Expired and nobody took it: take it again.
        if (!renewed.written && !renewed.current) renewed = yield [LOCAL, 'compareAndSet', [SPOOL_LEASE, null, mine, SPOOL_LEASE_MS, at]];
        if (!renewed.written) throw new StoreError('unavailable', 'the spool lease expired under this flush (another process took it); will probe again');
        leaseVersion = renewed.version;
        // The batch's entry writes first, the last one per key (a run's journal writes and
        // delete are one delete, an idempotency claim and its completion one write); then its
        // appends in order, the cursor after each (at least once: a crash repeats at most the
        // append it was applying).
        const keyed = new Map();
        const steps = [];
        for (const [n, text] of batch) {
          let rec = JSON.parse(text);
          flushed += 1;
          if (typeof rec.key !== 'string') {
            steps.push([n, rec]);
            continue;
          }
          if (keyed.delete(rec.key) && rec.claim === true) rec = { ...rec, claim: false }; // after an earlier op on the key here: a write
          keyed.set(rec.key, rec);
        }
        for (const rec of keyed.values()) yield* this.#apply(rec);
        const last = batch[batch.length - 1][0];
        if (steps.length === 0 || steps[steps.length - 1][0] !== last) steps.push([last, null]);
        let cursor = cur;
        for (const [n, rec] of steps) {
          if (rec) yield* this.#apply(rec);
          const w = yield [LOCAL, 'compareAndSet', [SPOOL_CURSOR, cursor ? cursor.version : null, JSON.stringify({ seq: n }), null, nowMs]];
          if (!w.written) throw new StoreError('unavailable', 'the spool cursor moved under this flush (another process flushed); will probe again');
          cursor = { version: w.version };
        }
        if (!this.#healthy && (batch.length < SPOOL_BATCH || batch[batch.length - 1][0] >= target)) {
          // The last batch, or past what this store had spooled when the flush began, is in
          // the primary: new calls go to it from here, so calls served locally meanwhile (the
          // asynchronous face) cannot keep the spool growing faster than this flush drains
          // it; the tail they spooled is drained by this loop.
          this.#healthy = true;
          opened = true;

        }
      }
    } catch (e) {
      if (opened && this.#healthy) this.#healthy = false; // still degraded: the flush goes on at the next probe
      throw e;
    } finally {
      this.#flushing = false;
      if (held) {
        const now = yield [LOCAL, 'get', [SPOOL_LEASE, Math.max(nowMs, this.#lastNow)]];
        if (now && now.value === mine) yield [LOCAL, 'delete', [SPOOL_LEASE]];
      }
    }
    return { done: true, flushed };
  }

  *#apply(rec) {
    if (rec.op === 'append') yield ['append', [rec.stream, rec.record, rec.now_ms]];
    else if (rec.op === 'delete') yield ['delete', [rec.key]];
    else if (rec.op === 'set') {
      // A claim (a create-only write) never replaces an entry the primary has: the earlier
      // claim or the completed entry there wins. Any other write replaces it (last writer wins).
      let expected = null; // create first: one round trip when absent
      for (let i = 0; ; i++) {
        const w = yield ['compareAndSet', [rec.key, expected, rec.value, rec.ttl_ms, rec.now_ms]];
        if (w.written || rec.claim === true) return;
        expected = w.current ? w.current.version : null;
        if (i >= 100) throw new StoreError('unavailable', `flushing ${JSON.stringify(rec.key)}: 100 conflicting writes in a row; the flush resumes at the next probe`);
      }
    }
  }

  *#restore(nowMs) {
    const wasDegraded = !this.#healthy;
    const { done, flushed } = yield* this.#flush(nowMs);
    if (!done) return false;
    this.#healthy = true;
    const startup = this.#startupSpool;
    this.#startupSpool = false;
    // A process that was not degraded (it flushed the machine's spool) says nothing.
    if (wasDegraded) {
      // A spool left by an earlier process: this one was never degraded.
      const degradedMs = wasDegraded && !startup ? Math.max(0, nowMs - this.#degradedAt) : 0;
      this.#emit({ event: 'store_restored', store: this.#name, at_ms: nowMs, degraded_ms: degradedMs, flushed });
    }
    return true;
  }

  /** Probe the primary and, when it answers, flush the spool and serve it again. */
  *#reconnect(now) {
    this.#reconnecting = true;
    try {
      yield* this.#probe();
      yield* this.#restore(now);
    } catch (e) {
      if (this.#startupSpool && e instanceof StoreError) {
        // An earlier process's spool, not flushed: degraded like any other, and says so.
        this.#startupSpool = false;
        this.#emit({ event: 'store_degraded', store: this.#name, at_ms: now, kind: e.kind, message: e.message });
      }
      if (!(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
    } finally {
      this.#reconnecting = false;
    }
  }

  /**
   * The call: `primary` = [method, args] on the primary or, degraded, the generator `local()`;
   * `mirror(result)`, a generator of local operations, copies what the primary took to the
   * spool file (best effort: the primary answered).
   */
  *#route(nowMs, primary, local, mirror, key) {
    if (nowMs !== undefined) this.#lastNow = Math.max(this.#lastNow, nowMs);
    const now = nowMs ?? this.#lastNow;
    if (this.#startup) {
      this.#startup = false;
      if ((yield* this.#pending(now)) && this.#healthy) {
        // A spool left by an earlier process: served locally (where those entries are)
        // until it is flushed.
        this.#healthy = false;
        this.#startupSpool = true;
        this.#degradedAt = now;
        this.#lastProbe = now - this.#probeMs;
      }
    }
    // The machine's rule: while the spool file has records not yet in the primary, every
    // process sharing it serves mirrored keys from it (docs/store.md, "One place for mirrored keys").
    // (A spool file that cannot be read now does not hold the call back.)
    let pending = false;
    if (this.#healthy && key !== undefined && spooled(key)) {
      try {
        pending = yield* this.#pending(now);
      } catch {
        pending = false;
      }
    }
    if ((!this.#healthy || pending) && !this.#reconnecting && now >= this.#lastProbe + this.#probeMs) {
      this.#lastProbe = now;
      this.#probes += 1;
      // Awaited (store.async): the probe and the flush run in the background and this call
      // is served locally at once. Blocking (the synchronous methods): this call probes and
      // flushes, then goes on.
      yield [DETACH, this.#reconnect(now)];
    }
    if (this.#healthy && !pending) {
      let result;
      let answered = false;
      try {
        result = yield primary;
        answered = true;
      } catch (e) {
        if (!(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
        this.#degrade(now, e);
      }
      if (answered) {
        if (mirror) {
          try {
            yield* mirror(result);
          } catch {
            // best effort: the primary took the write
          }
        }
        return result;
      }
    }
    return yield* local();
  }

  /** Whether the spool file has records after its cursor (not yet in the primary). */
  *#pending(now) {
    const cur = yield [LOCAL, 'get', [SPOOL_CURSOR, now]];
    return (yield [LOCAL, 'read', [SPOOL_STREAM, cur ? JSON.parse(cur.value).seq : 0, 1]]).length > 0;
  }

  /** Copy a write the primary took to the spool file, so it is honoured while degraded. */
  *#mirrorSet(key, value, ttlMs, nowMs) {
    for (let i = 0; i < MIRROR_RETRIES; i++) {
      const cur = yield [LOCAL, 'get', [key, nowMs]];
      if ((yield [LOCAL, 'compareAndSet', [key, cur ? cur.version : null, value, ttlMs ?? null, nowMs]]).written) return;
    }
  }

  /** Carry out a call's generator, blocking on the primary's and the local store's synchronous methods. */
  #runSync(gen) {
    let step = gen.next();
    while (!step.done) {
      const [method, a, b] = step.value;
      let value;
      try {
        if (method === DETACH) value = this.#runSync(a);
        else if (method === LOCAL) value = this.#local[a](...b);
        else value = this.#primary[method](...a);
      } catch (e) {
        step = gen.throw(e);
        continue;
      }
      step = gen.next(value);
    }
    return step.value;
  }

  /** The local store's asynchronous face: a SqliteStore's file through a worker thread. */
  #localFace() {
    if (this.#localAsync === undefined) {
      const l = this.#local;
      this.#localAsync = l instanceof SqliteStore ? new SqliteOffThread(l.path, { synchronous: l.synchronous }) : asyncFace(l);
    }
    return this.#localAsync;
  }

  /** Carry out a call's generator, awaiting the primary's and the local store's asynchronous faces. */
  async #runAsync(gen) {
    const primary = asyncFace(this.#primary);
    let step = gen.next();
    while (!step.done) {
      const [method, a, b] = step.value;
      if (method === DETACH) {
        // A background probe or flush does not start once the store is closed.
        if (this.#closedStore) {
          step = gen.next();
          continue;
        }
        // A store error other than `unavailable` there is retried at the next probe.
        this.#runAsync(a).catch(() => {});
        step = gen.next();
        continue;
      }
      let value;
      try {
        value = method === LOCAL ? await this.#localFace()[a](...b) : await primary[method](...a);
      } catch (e) {
        step = gen.throw(e);
        continue;
      }
      step = gen.next(value);
    }
    return step.value;
  }

  *#spool(record, nowMs) {
    const seq = yield [LOCAL, 'append', [SPOOL_STREAM, JSON.stringify(record), nowMs]];
    this.#spoolEnd = Math.max(this.#spoolEnd, seq);
  }

  #get(key, nowMs) {
    return this.#route(nowMs, ['get', [key, nowMs]], function* () {
      return yield [LOCAL, 'get', [key, nowMs]];
    }, undefined, key);
  }

  #compareAndSet(key, expected, value, ttlMs, nowMs) {
    const self = this;
    return this.#route(nowMs, ['compareAndSet', [key, expected, value, ttlMs, nowMs]], function* () {
      const r = yield [LOCAL, 'compareAndSet', [key, expected, value, ttlMs, nowMs]];
      if (r.written && spooled(key)) yield* self.#spool({ op: 'set', key, value, ttl_ms: ttlMs ?? null, now_ms: nowMs, claim: expected == null }, nowMs);
      return r;
    }, function* (r) {
      if (r.written && spooled(key)) yield* self.#mirrorSet(key, value, ttlMs, nowMs);
    }, key);
  }

  #append(stream, record, nowMs) {
    const self = this;
    return this.#route(nowMs, ['append', [stream, record, nowMs]], function* () {
      checkName('stream', stream);
      checkInt('nowMs', nowMs);
      checkJson('record', stream, record);
      // The spool first: a crash between the two leaves the record to flush, never lost.
      yield* self.#spool({ op: 'append', stream, record, now_ms: nowMs }, nowMs);
      return yield [LOCAL, 'append', [stream, record, nowMs]];
    });
  }

  #read(stream, after, limit) {
    return this.#route(undefined, ['read', [stream, after, limit]], function* () {
      return yield [LOCAL, 'read', [stream, after, limit]];
    });
  }

  #delete(key) {
    const self = this;
    return this.#route(undefined, ['delete', [key]], function* () {
      const existed = yield [LOCAL, 'delete', [key]];
      // Spooled even when absent here: the entry may exist in the primary only.
      if (spooled(key)) yield* self.#spool({ op: 'delete', key }, self.#lastNow);
      return existed;
    }, function* () {
      if (spooled(key)) yield [LOCAL, 'delete', [key]];
    }, key);
  }

  #keys(prefix, nowMs) {
    return this.#route(nowMs, ['keys', [prefix, nowMs]], function* () {
      return yield [LOCAL, 'keys', [prefix, nowMs]];
    });
  }

  #purgeExpired(nowMs) {
    return this.#route(nowMs, ['purgeExpired', [nowMs]], function* () {
      return yield [LOCAL, 'purgeExpired', [nowMs]];
    });
  }

  get(key, nowMs) {
    return this.#runSync(this.#get(key, nowMs));
  }

  compareAndSet(key, expected, value, ttlMs, nowMs) {
    return this.#runSync(this.#compareAndSet(key, expected, value, ttlMs, nowMs));
  }

  append(stream, record, nowMs) {
    return this.#runSync(this.#append(stream, record, nowMs));
  }

  read(stream, after, limit) {
    return this.#runSync(this.#read(stream, after, limit));
  }

  delete(key) {
    return this.#runSync(this.#delete(key));
  }

  keys(prefix, nowMs) {
    return this.#runSync(this.#keys(prefix, nowMs));
  }

  purgeExpired(nowMs) {
    return this.#runSync(this.#purgeExpired(nowMs));
  }

  /**
   * The same methods returning promises: the primary's are awaited on its
   * asynchronous face (a RedisStore's `async`), the local SQLite spool's in a
   * worker thread. A call waits for Redis at most its timeout, then is served
   * locally; the probe and the flush run in the background.
   */
  get async() {
    this.#async ??= Object.freeze({
      get: (key, nowMs) => this.#runAsync(this.#get(key, nowMs)),
      compareAndSet: (key, expected, value, ttlMs, nowMs) => this.#runAsync(this.#compareAndSet(key, expected, value, ttlMs, nowMs)),
      append: (stream, record, nowMs) => this.#runAsync(this.#append(stream, record, nowMs)),
      read: (stream, after, limit) => this.#runAsync(this.#read(stream, after, limit)),
      delete: (key) => this.#runAsync(this.#delete(key)),
      keys: (prefix, nowMs) => this.#runAsync(this.#keys(prefix, nowMs)),
      purgeExpired: (nowMs) => this.#runAsync(this.#purgeExpired(nowMs)),
    });
    return this.#async;
  }

  /** Close both stores. */
  close() {
    this.#closedStore = true;
    this.#primary.close?.();
    this.#local.close?.();
    if (this.#localAsync !== this.#local) this.#localAsync?.close?.();
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
  if (!/^(rediss?|redis\+cluster):\/\//i.test(spec)) return new SqliteStore(spec);
  const o = parseRedisUrl(spec);
  let primary;
  let down = false;
  try {
    primary = new RedisStore(spec);
  } catch (e) {
    if (o.fallback === 'none' || !(e instanceof StoreError) || e.kind !== 'unavailable') throw e;
    primary = new RedisStore(spec, { open: false }); // opened at its first successful call
    down = true;
  }
  if (o.fallback === 'none') return primary;
  const spool = o.spool ?? defaultSpoolPath(spec);
  mkdirSync(dirname(spool), { recursive: true });
  // synchronous 'normal' (WAL): a spooled write survives a killed process without an fsync per
  // call; a power cut may lose the last ones (docs/store.md, "When Redis is down").
  const store = new FallbackStore(primary, new SqliteStore(spool, { synchronous: 'normal' }), { onEvent, probeMs: o.probeMs, name: o.display });
  if (down) store.get('agent-recovery/ping', Date.now()); // degrade now, with the opening error
  return store;
}
