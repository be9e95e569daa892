// The connection behind RedisStore: the official Redis client (@redis/client,
// node-redis), asynchronous. RedisStore's asynchronous methods (`store.async`)
// use it on the calling thread; its synchronous methods reach it in a worker
// thread (src/store-redis-worker.js, through src/sync-bridge.js). Replies are
// plain objects: {ok: value} or {err: {kind, message}} (the kinds of
// STORE_ERROR_KINDS).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const SCRIPT_NAMES = ['get', 'cas', 'append', 'delete', 'keys', 'purge', 'open'];

let redis; // @redis/client, loaded on first open

class Failure extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function loadClient() {
  if (redis) return redis;
  try {
    redis = createRequire(import.meta.url)('@redis/client');
  } catch (e) {
    throw new Failure(
      'io',
      `RedisStore needs the optional dependency @redis/client, which could not be loaded (${e.message}); install it with \`npm install @redis/client\``,
    );
  }
  return redis;
}

let defined; // the scripts, defined once per thread

function scripts() {
  if (defined) return defined;
  const { defineScript } = loadClient();
  const out = {};
  for (const name of SCRIPT_NAMES) {
    const SCRIPT = readFileSync(new URL(`./redis/${name}.lua`, import.meta.url), 'utf8');
    out[name] = defineScript({
      SCRIPT,
      NUMBER_OF_KEYS: 0,
      parseCommand(parser, ...args) {
        parser.push(...args);
      },
      transformReply: (reply) => reply,
    });
  }
  defined = out;
  return out;
}

/** Race `promise` against `ms`; on expiry the connection is dropped (its state is unknown). */
function bounded(conn, promise, ms, what) {
  let timer;
  const expiry = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure('unavailable', `${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([promise, expiry]).finally(() => clearTimeout(timer));
}

/** Close the connection's client (`only`: when it is still that one; a newer one stays). */
function drop(conn, only) {
  const c = conn.client;
  if (only !== undefined && c !== only) return;
  conn.client = null;
  if (c) {
    try {
      c.destroy();
    } catch {
      // already closed
    }
  }
}

/** The store kind of an error from the client or the server. */
function classify(e) {
  if (e instanceof Failure) return e;
  const msg = String(e?.message ?? e);
  const first = msg.split(' ', 1)[0];
  if (['NOAUTH', 'WRONGPASS', 'NOPERM'].includes(first)) {
    return new Failure('io', `${msg}; check the user and password in the store URL`);
  }
  if (['LOADING', 'BUSY', 'OOM', 'MASTERDOWN', 'TRYAGAIN', 'CLUSTERDOWN', 'READONLY'].includes(first)) {
    return new Failure('unavailable', `${msg}; the server cannot serve now, retry later`);
  }
  if (msg.includes('max number of clients reached')) {
    return new Failure('unavailable', `${msg}; the server has no connection to spare, retry later or raise maxclients`);
  }
  if (first === 'WRONGTYPE') {
    return new Failure('corrupt', `${msg}; a key under the store's prefix was written by another program, use another prefix`);
  }
  if (e?.constructor?.name === 'ErrorReply' || e?.constructor?.name === 'SimpleError') {
    return new Failure('corrupt', `the server answered an error (${msg}); a key under the store's prefix holds data the scripts do not expect`);
  }
  return new Failure('unavailable', `${msg}; is redis-server running and reachable?`);
}

/** The connection's ready client; concurrent callers share one connection attempt. */
function connect(conn) {
  if (conn.client?.isReady) return Promise.resolve(conn.client);
  conn.connecting ??= open(conn).finally(() => {
    conn.connecting = null;
  });
  return conn.connecting;
}

async function open(conn) {
  drop(conn);
  const { createClient } = loadClient();
  const o = conn.options;
  const client = createClient({
    url: o.clientUrl,
    socket: { connectTimeout: o.connectTimeoutMs, reconnectStrategy: false },
    disableOfflineQueue: true,
    scripts: conn.scripts,
  });
  // Errors also reach the pending command; without a listener they would crash the thread.
  client.on('error', () => {});
  conn.client = client;
  try {
    await bounded(conn, client.connect(), o.connectTimeoutMs, 'connecting');
  } catch (e) {
    drop(conn, client);
    throw classify(e);
  }
  // An idle connection does not keep the process alive (a command in flight does: its timer).
  client.unref();
  return client;
}

async function call(conn, body) {
  const client = await connect(conn);
  try {
    return await bounded(conn, body(client), conn.options.timeoutMs, 'the command');
  } catch (e) {
    const f = classify(e);
    if (f.kind === 'unavailable') drop(conn, client); // lost, timed out or refused: reconnect on the next call
    throw f;
  }
}

const OPS = {
  async open(conn, [schema]) {
    const r = await call(conn, (c) => c.open(conn.prefix, String(schema)));
    const names = Object.values(conn.scripts).map((s) => s.SCRIPT);
    await call(conn, (c) => Promise.all(names.map((s) => c.sendCommand(['SCRIPT', 'LOAD', s]))));
    return r;
  },
  get: (conn, [key, now]) => call(conn, (c) => c.get(conn.prefix, key, String(now))),
  cas: (conn, [key, expected, value, ttl, now, grace, batch]) =>
    call(conn, (c) =>
      c.cas(conn.prefix, key, expected === null ? '' : String(expected), value, ttl === null ? '' : String(ttl), String(now), String(grace), String(batch)),
    ),
  append: (conn, [stream, record, now]) => call(conn, (c) => c.append(conn.prefix, stream, record, String(now))),
  read: (conn, [stream, after, limit]) =>
    call(conn, (c) => c.sendCommand(['XRANGE', `${conn.prefix}:s:${stream}`, `(${after}-0`, '+', 'COUNT', String(limit)])),
  delete: (conn, [key]) => call(conn, (c) => c.delete(conn.prefix, key)),
  keys: (conn, [prefix, now]) => call(conn, (c) => c.keys(conn.prefix, prefix, String(now))),
  purge: (conn, [now]) => call(conn, (c) => c.purge(conn.prefix, String(now))),
  ping: (conn) => call(conn, (c) => c.sendCommand(['PING'])),
  time: async (conn) => {
    const t0 = performance.timeOrigin + performance.now();
    const reply = await call(conn, (c) => c.sendCommand(['TIME']));
    const t1 = performance.timeOrigin + performance.now();
    return { reply, t0, t1 };
  },
  async close(conn) {
    drop(conn);
    return null;
  },
};

/**
 * A connection's state for `options` = {clientUrl, prefix, timeoutMs, connectTimeoutMs}:
 * connected at its first operation, again after one failed with `unavailable`.
 */
export function connection(options) {
  return { options, prefix: `{${options.prefix}}`, client: null, connecting: null, scripts: scripts() };
}

/** Run operation `op` (a key of OPS) on `conn`: resolves with {ok: value} or {err: {kind, message}}, never rejects. */
export async function perform(conn, op, args) {
  try {
    return { ok: await OPS[op](conn, args) };
  } catch (e) {
    const f = classify(e);
    return { err: { kind: f.kind, message: f.message } };
  }
}
