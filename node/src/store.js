// The runtime's store: small, durable state shared by workers.
//
// The same store as the Rust crate's `agent_recovery::store` and the Python
// package's `agent_recovery.store`, with the same semantics and one SQLite
// schema, so Node, Python and Rust processes can share one file.
//
//   const store = new SqliteStore('state.db');
//   const now = Date.now();
//   store.compareAndSet('breaker/api', null, '{"state":"open"}', 30_000, now); // {written: true, version: 1}
//   store.get('breaker/api', now + 30_000);                                     // null: expired
//   store.append('journal/run-1', '{"step":"charge"}', now);                    // 1
//
// A store holds entries (a key mapped to JSON text and a version, changed only
// by compareAndSet, optionally with a time to live) and streams (append-only
// JSON records numbered from 1 per stream). Time is always passed in (nowMs,
// Unix milliseconds), never read by the store. Versions are store-wide
// revisions (as in etcd): never reused, even after an entry expired or was
// deleted. Arguments are checked before the store is touched, as in Rust and
// Python. See docs/store.md.
//
// SqliteStore needs the optional dependency `better-sqlite3` (a native addon),
// loaded only when a SqliteStore is created: code that only runs decisions or
// uses MemoryStore never loads it.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/** The longest key or stream name, in bytes of UTF-8. */
export const MAX_NAME_BYTES = 1024;
/** The longest value or record, in bytes of JSON text (UTF-8). */
export const MAX_VALUE_BYTES = 8 * 1024 * 1024;
/** The largest time, TTL, version or sequence number: Number.MAX_SAFE_INTEGER (2^53 - 1). */
export const MAX_INTEGER = Number.MAX_SAFE_INTEGER;
/** The schema version this package reads and writes (`PRAGMA user_version`). */
export const SCHEMA_VERSION = 1;
/** `PRAGMA application_id` of a store file: 'ARST' as a big-endian integer. */
export const APPLICATION_ID = 0x41525354;
/** How many expired entries a write removes on its way. */
const PURGE_BATCH = 64;

/** The kinds of StoreError (snake_case twins of Rust's StoreErrorKind). New kinds may be added. */
export const STORE_ERROR_KINDS = Object.freeze([
  'invalid_argument', // a bad key, value, time, TTL or version: nothing changed
  'unavailable', // another process held the write lock past the busy timeout
  'corrupt', // not an SQLite database, damaged, or a row that breaks the schema
  'incompatible', // another application's database, or a newer schema version
  'io', // the file could not be opened, read or written; or better-sqlite3 is missing
]);

/**
 * The schema: host/src/store/schema.sql, the text all three stores run, shipped
 * as it is (scripts/build.mjs copies it into src/). Run in one BEGIN IMMEDIATE
 * transaction on a file without tables.
 */
export const SCHEMA_SQL = readFileSync(new URL('./schema.sql', import.meta.url), 'utf8');

/** A store operation failed. `kind` is one of STORE_ERROR_KINDS; the message names the input and ends with a hint. */
export class StoreError extends Error {
  constructor(kind, message, options) {
    super(message, options);
    this.name = 'StoreError';
    this.kind = kind;
  }
}

// ------------------------------------------------------------------ argument checks

/** @internal (also used by store-redis.js) */
export const invalid = (message) => new StoreError('invalid_argument', message);
const show = (v) => (typeof v === 'string' ? JSON.stringify(v) : String(v));

export function checkName(what, name, emptyOk = false) {
  if (typeof name !== 'string') {
    throw invalid(`the ${what} is a ${typeof name}, not a string; pass a string`);
  }
  if (name === '') {
    if (emptyOk) return name;
    throw invalid(`the ${what} is empty; pass a non-empty name such as "breaker/api"`);
  }
  if (!name.isWellFormed()) {
    throw invalid(`the ${what} ${show(name)} has a lone surrogate; pass text that encodes as UTF-8`);
  }
  const size = Buffer.byteLength(name, 'utf8');
  if (size > MAX_NAME_BYTES) {
    throw invalid(`the ${what} is ${size} bytes long, more than ${MAX_NAME_BYTES}; hash long names into a shorter one`);
  }
  if (name.includes('\0')) {
    throw invalid(`the ${what} ${show(name)} contains a NUL character; remove it`);
  }
  return name;
}

/**
 * Check that `text` is JSON a store may hold. `fromLoop`: the text is a value
 * the recovery loop wrote in an effect (the shipped reference, whose output is
 * serde_json's, decoded from UTF-8): only its size is checked.
 */
export function checkJson(what, key, text, fromLoop = false) {
  if (fromLoop && typeof text === 'string') {
    // Every character takes at most 3 UTF-8 bytes: the exact size only when it may be too large.
    if (text.length * 3 > MAX_VALUE_BYTES) tooLarge(what, key, Buffer.byteLength(text, 'utf8'));
    return text;
  }
  if (typeof text !== 'string') {
    throw invalid(`the ${what} for ${show(key)} is a ${typeof text}, not JSON text; pass JSON.stringify(value)`);
  }
  if (!text.isWellFormed()) {
    throw invalid(`the ${what} for ${show(key)} has a lone surrogate; escape it as \\uXXXX in the JSON text`);
  }
  tooLarge(what, key, Buffer.byteLength(text, 'utf8'));
  try {
    JSON.parse(text);
  } catch (e) {
    throw invalid(`the ${what} for ${show(key)} is not JSON (${e.message}); pass JSON text, e.g. JSON.stringify(value)`);
  }
  return text;
}

function tooLarge(what, key, size) {
  if (size > MAX_VALUE_BYTES) {
    throw invalid(
      `the ${what} for ${show(key)} is ${size} bytes, more than ${MAX_VALUE_BYTES}; store large payloads elsewhere and keep a reference`,
    );
  }
}

export function checkInt(what, n) {
  if (typeof n !== 'number' || !Number.isInteger(n)) {
    throw invalid(`${what} is ${show(n)}, not an integer; pass whole Unix milliseconds or a count`);
  }
  if (n < 0 || n > MAX_INTEGER) {
    throw invalid(`${what} ${n} is outside 0..${MAX_INTEGER} (2^53 - 1); pass Unix milliseconds or a smaller number`);
  }
  return n;
}

/** Check a compare-and-set's arguments; returns the expiry time (null = never). `fromLoop`: see checkJson. */
export function checkCas(key, expected, value, ttlMs, nowMs, fromLoop = false) {
  checkName('key', key);
  checkInt('nowMs', nowMs);
  if (expected !== null && expected !== undefined) {
    checkInt('expected version', expected);
    if (expected === 0) {
      throw invalid(`expected version 0 for ${show(key)} never exists (versions start at 1); pass null to create the entry`);
    }
  }
  checkJson('value', key, value, fromLoop);
  if (ttlMs === null || ttlMs === undefined) return null;
  checkInt('ttlMs', ttlMs);
  if (ttlMs === 0) {
    throw invalid(`ttlMs 0 for ${show(key)} would expire the entry at once; pass null for no expiry or at least 1`);
  }
  return checkInt('nowMs + ttlMs', nowMs + ttlMs);
}

const isLive = (expiresAtMs, nowMs) => expiresAtMs === null || nowMs < expiresAtMs;
const byUtf8 = (a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

// ------------------------------------------------------------------ MemoryStore

const LOOP_CAS = Symbol('MemoryStore: compareAndSet of a value from the loop');

/**
 * @internal The driver's compare-and-set of a value the loop wrote in an
 * effect: a MemoryStore (whose compareAndSet is its own, not a subclass's)
 * checks only its size (checkJson's `fromLoop`); any other store checks it
 * as ever.
 */
export function compareAndSetFromLoop(store, key, expected, value, ttlMs, nowMs) {
  return store.compareAndSet === MemoryStore.prototype.compareAndSet
    ? store[LOOP_CAS](key, expected, value, ttlMs, nowMs)
    : store.compareAndSet(key, expected, value, ttlMs, nowMs);
}

/**
 * A store in process memory: the same semantics as SqliteStore, nothing persists.
 * The first write gets version 1.
 */
export class MemoryStore {
  #entries = new Map(); // key -> {value, version, expiresAtMs}
  #streams = new Map(); // stream -> [record]
  #revision = 0;
  #nextExpiry = Infinity; // no live entry expires before this (a lower bound)

  /** Remove every entry expired at `nowMs`; returns how many were removed. */
  purgeExpired(nowMs) {
    checkInt('nowMs', nowMs);
    return this.#purge(nowMs);
  }

  #purge(nowMs) {
    if (nowMs < this.#nextExpiry) return 0;
    let removed = 0;
    let next = Infinity;
    for (const [key, e] of this.#entries) {
      if (!isLive(e.expiresAtMs, nowMs)) {
        this.#entries.delete(key);
        removed += 1;
      } else if (e.expiresAtMs !== null && e.expiresAtMs < next) {
        next = e.expiresAtMs;
      }
    }
    this.#nextExpiry = next;
    return removed;
  }

  #live(key, nowMs) {
    const e = this.#entries.get(key);
    return e && isLive(e.expiresAtMs, nowMs) ? { value: e.value, version: e.version } : null;
  }

  get(key, nowMs) {
    checkName('key', key);
    checkInt('nowMs', nowMs);
    return this.#live(key, nowMs);
  }

  compareAndSet(key, expected, value, ttlMs, nowMs) {
    return this.#compareAndSet(checkCas(key, expected, value, ttlMs, nowMs), key, expected, value, nowMs);
  }

  /** @internal compareAndSet of a value the recovery loop wrote in an effect (checkJson's `fromLoop`). */
  [LOOP_CAS](key, expected, value, ttlMs, nowMs) {
    return this.#compareAndSet(checkCas(key, expected, value, ttlMs, nowMs, true), key, expected, value, nowMs);
  }

  #compareAndSet(expiresAtMs, key, expected, value, nowMs) {
    const current = this.#live(key, nowMs);
    if ((current ? current.version : null) !== (expected ?? null)) {
      return { written: false, current };
    }
    this.#purge(nowMs); // like SqliteStore: a write (not a conflict) purges on its way
    if (this.#revision >= MAX_INTEGER) {
      throw new StoreError(
        'unavailable',
        `the store has issued ${this.#revision} versions, the most it can; copy the live entries to a new store`,
      );
    }
    this.#revision += 1;
    const version = this.#revision;
    this.#entries.set(key, { value, version, expiresAtMs });
    if (expiresAtMs !== null && expiresAtMs < this.#nextExpiry) this.#nextExpiry = expiresAtMs;
    return { written: true, version };
  }

  append(stream, record, nowMs) {
    checkName('stream', stream);
    checkInt('nowMs', nowMs);
    checkJson('record', stream, record);
    let records = this.#streams.get(stream);
    if (!records) this.#streams.set(stream, (records = []));
    records.push(record);
    return records.length;
  }

  read(stream, after, limit) {
    checkName('stream', stream);
    checkInt('after', after);
    checkInt('limit', limit);
    const records = this.#streams.get(stream) ?? [];
    return records.slice(after, after + limit).map((r, i) => [after + i + 1, r]);
  }

  delete(key) {
    checkName('key', key);
    return this.#entries.delete(key);
  }

  keys(prefix, nowMs) {
    checkName('prefix', prefix, true);
    checkInt('nowMs', nowMs);
    const keys = [];
    for (const [k, e] of this.#entries) {
      if (k.startsWith(prefix) && isLive(e.expiresAtMs, nowMs)) keys.push(k);
    }
    // UTF-8 byte order, as SQLite and Rust sort (not JavaScript's UTF-16 order).
    return keys.sort(byUtf8);
  }
}

// ------------------------------------------------------------------ SqliteStore

class Corrupt extends Error {}

function storedInt(n) {
  if (!Number.isSafeInteger(n) || n < 0) throw new Corrupt(`the integer ${n} is outside 0..2^53 - 1`);
  return n;
}

function storedText(s) {
  if (typeof s !== 'string') throw new Corrupt(`a ${typeof s} where the schema has TEXT`);
  return s;
}

let Database; // better-sqlite3, loaded on first use

const REBUILD_HINT =
  'rebuild it with the local Node headers (`npm rebuild better-sqlite3` with npm_config_nodedir set to the ' +
  "directory holding include/node, e.g. the prefix of `which node`; it needs python3, make and a C++ compiler), " +
  'or, for a redis:// store, open it with fallback=none to run without the local spool';

function loadDriver() {
  if (Database) return Database;
  let Driver;
  try {
    Driver = createRequire(import.meta.url)('better-sqlite3');
  } catch (e) {
    throw new StoreError(
      'io',
      `SqliteStore needs the optional dependency better-sqlite3, which could not be loaded (${e.message}); ` +
        'install it with `npm install better-sqlite3` (it builds from source when no prebuilt binary fits: needs python3, make and a C++ compiler)',
      { cause: e },
    );
  }
  // better-sqlite3 loads its native binding on the first `new Database()`, so a
  // package installed with --ignore-scripts (no build) only fails there, and that
  // failure is not about the file being opened. Open an in-memory database once.
  try {
    new Driver(':memory:').close();
  } catch (e) {
    throw new StoreError(
      'io',
      `SqliteStore needs better-sqlite3's native binding, which is not built or does not load in this Node ` +
        `(${process.version}): ${e.message.split('\n')[0]}; ${REBUILD_HINT}`,
      { cause: e },
    );
  }
  Database = Driver;
  return Database;
}

/**
 * A store in one SQLite file (better-sqlite3), shared with Rust and Python processes.
 *
 * `new SqliteStore(path, {busyTimeoutMs = 5000, synchronous = 'full'})` opens the file,
 * creating it and its schema if absent. WAL journal (readers never block the writer);
 * synchronous 'full' (a committed write survives a power cut) or 'normal' (a power cut
 * may lose the last commits, never corrupts the file; much faster writes; both survive a
 * killed process); a busy timeout after which a write waiting for another process's lock
 * throws StoreError 'unavailable'. Every write runs in a
 * BEGIN IMMEDIATE transaction, so compareAndSet is atomic across processes.
 *
 * Throws StoreError 'corrupt' (not an SQLite database, damaged), 'incompatible' (another
 * application's database, a newer schema), 'io' (cannot open or create; better-sqlite3
 * missing) or 'unavailable' (locked past the busy timeout).
 */
export class SqliteStore {
  #db;
  #stmts;
  #path;
  #synchronous;
  #busyTimeoutMs;

  constructor(path, { busyTimeoutMs = 5000, synchronous = 'full' } = {}) {
    this.#path = String(path);
    checkInt('busyTimeoutMs', busyTimeoutMs);
    if (synchronous !== 'full' && synchronous !== 'normal') {
      throw invalid(`synchronous ${show(synchronous)} is not 'full' or 'normal'; pass one of them`);
    }
    this.#synchronous = synchronous.toUpperCase();
    this.#busyTimeoutMs = busyTimeoutMs;
    const Driver = loadDriver();
    try {
      this.#db = new Driver(this.#path, { timeout: busyTimeoutMs });
    } catch (e) {
      throw this.#error('opening', e);
    }
    try {
      this.#init();
      this.#stmts = this.#prepare();
    } catch (e) {
      this.#db.close();
      throw e instanceof StoreError ? e : this.#error('opening', e);
    }
  }

  /** The path this store was opened with. */
  get path() {
    return this.#path;
  }

  /** The connection's synchronous setting as SQLite reports it: 'full' or 'normal'. */
  get synchronous() {
    const level = this.#run('reading synchronous', () => this.#db.pragma('synchronous', { simple: true }));
    return level >= 2 ? 'full' : 'normal';
  }

  /** Close the connection (the file stays; other processes are unaffected). */
  close() {
    this.#db.close();
  }

  #error(what, e) {
    const code = typeof e?.code === 'string' ? e.code : '';
    let kind = 'io';
    let hint = 'check that the directory exists, the file is writable and the disk has space';
    if (e instanceof Corrupt) {
      kind = 'corrupt';
      hint = "a row breaks the store's schema (written by another program?); move the file aside and start a new store";
    } else if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      kind = 'unavailable';
      hint = 'another process held the write lock past the busy timeout; retry later or raise the timeout';
    } else if (code.startsWith('SQLITE_NOTADB') || code.startsWith('SQLITE_CORRUPT')) {
      kind = 'corrupt';
      hint = 'the file is not an SQLite database or is damaged; move it aside and start a new store';
    } else if (e instanceof TypeError && /not open/.test(e.message)) {
      hint = 'the store was closed; open a new SqliteStore';
    }
    return new StoreError(kind, `sqlite store ${this.#path}: ${what} failed (${e?.message ?? e}); ${hint}`, { cause: e });
  }

  #incompatible(why) {
    return new StoreError('incompatible', `${this.#path}: ${why}`);
  }

  #header() {
    return [this.#db.pragma('application_id', { simple: true }), this.#db.pragma('user_version', { simple: true })];
  }

  #checkHeader(appId, version) {
    if (appId === APPLICATION_ID) {
      if (version === SCHEMA_VERSION) return;
      if (version > SCHEMA_VERSION) {
        throw this.#incompatible(
          `the store has schema version ${version}, newer than version ${SCHEMA_VERSION} that this build reads; upgrade agent-recovery`,
        );
      }
      throw this.#incompatible(
        `the store has schema version ${version}, which never existed; the file was changed by another program, move it aside`,
      );
    }
    if (appId !== 0) {
      throw this.#incompatible(
        `an SQLite database of another application (application_id ${appId}); give the store a file of its own`,
      );
    }
    const tables = this.#db.prepare("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table') AS t").get().t;
    if (tables) {
      throw this.#incompatible(
        'an SQLite database with tables that is not an agent-recovery store; give the store a file of its own',
      );
    }
  }

  #init() {
    let step = 'reading the header';
    try {
      // The header and the table list are read in one read transaction: read apart, a schema
      // another process commits between them looks like a foreign database's tables.
      const [appId] = this.#db
        .transaction(() => {
          const header = this.#header();
          this.#checkHeader(...header);
          return header;
        })
        .deferred();
      step = 'setting WAL mode';
      this.#setWal();
      this.#db.pragma(`synchronous = ${this.#synchronous}`);
      if (appId !== 0) return;
      // Another process may be creating the schema right now: decide again under the write lock.
      step = 'creating the schema';
      this.#db
        .transaction(() => {
          const [appId2, version2] = this.#header();
          this.#checkHeader(appId2, version2);
          if (appId2 === 0) this.#db.exec(SCHEMA_SQL);
        })
        .immediate();
    } catch (e) {
      throw e instanceof StoreError ? e : this.#error(step, e);
    }
  }

  /**
   * `PRAGMA journal_mode = WAL`, retried until the busy timeout has passed. Switching a file into
   * WAL mode takes the write lock while the statement already holds a read lock, and SQLite answers
   * SQLITE_BUSY at once, without its busy handler, when another connection holds the write lock.
   * That happens whenever several processes open a new store together, so wait here instead (a
   * synchronous wait, like the driver's own busy handler).
   */
  #setWal() {
    const deadline = Date.now() + this.#busyTimeoutMs;
    let pause = 1;
    for (;;) {
      try {
        this.#db.pragma('journal_mode = WAL');
        return;
      } catch (e) {
        const code = typeof e?.code === 'string' ? e.code : '';
        const busy = code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
        if (!busy || Date.now() + pause >= deadline) throw e;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pause);
        pause = Math.min(pause * 2, 50);
      }
    }
  }

  #prepare() {
    const db = this.#db;
    return {
      entry: db.prepare('SELECT value, version, expires_at_ms FROM ar_entries WHERE key = ?'),
      purgeBatch: db.prepare(
        'DELETE FROM ar_entries WHERE key IN (SELECT key FROM ar_entries WHERE expires_at_ms <= ? ORDER BY expires_at_ms LIMIT ?)',
      ),
      bump: db.prepare("UPDATE ar_meta SET value = value + 1 WHERE name = 'revision'"),
      revision: db.prepare("SELECT value FROM ar_meta WHERE name = 'revision'").pluck(),
      put: db.prepare(
        'INSERT OR REPLACE INTO ar_entries (key, value, version, expires_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?)',
      ),
      lastSeq: db.prepare('SELECT COALESCE(MAX(seq), 0) FROM ar_records WHERE stream = ?').pluck(),
      insertRecord: db.prepare('INSERT INTO ar_records (stream, seq, record, appended_at_ms) VALUES (?, ?, ?, ?)'),
      read: db.prepare('SELECT seq, record FROM ar_records WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?').raw(),
      delete: db.prepare('DELETE FROM ar_entries WHERE key = ?'),
      keys: db
        .prepare(
          'SELECT key FROM ar_entries WHERE key >= ? AND (expires_at_ms IS NULL OR expires_at_ms > ?) ORDER BY key',
        )
        .pluck(),
      purge: db.prepare('DELETE FROM ar_entries WHERE expires_at_ms <= ?'),
    };
  }

  #run(what, body) {
    try {
      return body();
    } catch (e) {
      throw this.#error(what, e);
    }
  }

  #live(key, nowMs) {
    const row = this.#stmts.entry.get(key);
    if (!row) return null;
    const value = storedText(row.value);
    const version = storedInt(row.version);
    const expiresAtMs = row.expires_at_ms === null ? null : storedInt(row.expires_at_ms);
    return isLive(expiresAtMs, nowMs) ? { value, version } : null;
  }

  get(key, nowMs) {
    checkName('key', key);
    checkInt('nowMs', nowMs);
    return this.#run('reading an entry', () => this.#live(key, nowMs));
  }

  compareAndSet(key, expected, value, ttlMs, nowMs) {
    const expiresAtMs = checkCas(key, expected, value, ttlMs, nowMs);
    const s = this.#stmts;
    const body = this.#db.transaction(() => {
      const current = this.#live(key, nowMs);
      if ((current ? current.version : null) !== (expected ?? null)) {
        return { written: false, current };
      }
      s.purgeBatch.run(BigInt(nowMs), BigInt(PURGE_BATCH));
      s.bump.run();
      const version = storedInt(s.revision.get());
      s.put.run(key, value, BigInt(version), expiresAtMs === null ? null : BigInt(expiresAtMs), BigInt(nowMs));
      return { written: true, version };
    });
    return this.#run('compare-and-set', () => body.immediate());
  }

  append(stream, record, nowMs) {
    checkName('stream', stream);
    checkInt('nowMs', nowMs);
    checkJson('record', stream, record);
    const s = this.#stmts;
    const body = this.#db.transaction(() => {
      const seq = storedInt(s.lastSeq.get(stream)) + 1;
      s.insertRecord.run(stream, BigInt(seq), record, BigInt(nowMs));
      return seq;
    });
    return this.#run('appending a record', () => body.immediate());
  }

  read(stream, after, limit) {
    checkName('stream', stream);
    checkInt('after', after);
    checkInt('limit', limit);
    return this.#run('reading a stream', () =>
      this.#stmts.read.all(stream, BigInt(after), BigInt(limit)).map(([seq, record]) => [storedInt(seq), storedText(record)]),
    );
  }

  delete(key) {
    checkName('key', key);
    return this.#run('deleting an entry', () => this.#stmts.delete.run(key).changes > 0);
  }

  keys(prefix, nowMs) {
    checkName('prefix', prefix, true);
    checkInt('nowMs', nowMs);
    return this.#run('listing keys', () => {
      // Keys compare as UTF-8 bytes (BINARY collation): the ones with the prefix
      // are a contiguous run starting at the prefix.
      const keys = [];
      for (const key of this.#stmts.keys.iterate(prefix, BigInt(nowMs))) {
        if (!storedText(key).startsWith(prefix)) break;
        keys.push(key);
      }
      return keys;
    });
  }

  /** Remove every entry expired at `nowMs`; returns how many were removed (writes also remove up to 64 each). */
  purgeExpired(nowMs) {
    checkInt('nowMs', nowMs);
    return this.#run('purging expired entries', () => this.#stmts.purge.run(BigInt(nowMs)).changes);
  }
}

/**
 * The asynchronous face of a store, what the runtime awaits: `store.async` when the
 * store has one (RedisStore, FallbackStore: their calls never block the event
 * loop), else the store itself (MemoryStore, SqliteStore and stores of your own:
 * synchronous and local; awaiting their values is fine).
 */
export function asyncFace(store) {
  const a = store?.async;
  return a !== null && typeof a === 'object' ? a : store;
}
