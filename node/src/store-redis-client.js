// The connection behind RedisStore: the official Redis client (@redis/client,
// node-redis), asynchronous; one server (createClient) or a Redis Cluster
// (createCluster, which follows MOVED and ASK). RedisStore's asynchronous methods (`store.async`)
// use it on the calling thread; its synchronous methods reach it in a worker
// thread (src/store-redis-worker.js, through src/sync-bridge.js). Replies are
// plain objects: {ok: value} or {err: {kind, message}} (the kinds of
// STORE_ERROR_KINDS).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { redisLayout } from './store-redis-layout.js';

// [script file, number of keys, name]: cas runs with its one key on a cluster and
// with the revision as a second key on one server (host/src/store/redis/cas.lua).
const SCRIPTS = [
  ['get', 1, 'get'],
  ['cas', 1, 'cas'],
  ['cas', 2, 'casOne'],
  ['append', 1, 'append'],
  ['purge', 1, 'purge'],
  ['open', 1, 'open'],
];

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
  for (const [file, keys, name] of SCRIPTS) {
    const SCRIPT = readFileSync(new URL(`./redis/${file}.lua`, import.meta.url), 'utf8');
    out[name] = defineScript({
      SCRIPT,
      NUMBER_OF_KEYS: keys,
      parseCommand(parser, redisKeys, args) {
        for (const k of redisKeys) parser.pushKey(k);
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
  if (['LOADING', 'BUSY', 'OOM', 'MASTERDOWN', 'TRYAGAIN', 'CLUSTERDOWN', 'READONLY', 'MOVED', 'ASK'].includes(first)) {
    return new Failure('unavailable', `${msg}; the server cannot serve now, retry later`);
  }
  if (e?.constructor?.name === 'MaxCommandRedirectionsError' || /^Cannot find node /.test(msg)) {
    return new Failure('unavailable', `${msg}; the cluster is moving slots or lost a node, retry later`);
  }
  if (first === 'CROSSSLOT') {
    return new Failure('corrupt', `${msg}; every key of one call shares a hash tag, check that nothing rewrites the store's keys`);
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
  const { createClient, createCluster } = loadClient();
  const o = conn.options;
  const socket = { connectTimeout: o.connectTimeoutMs, reconnectStrategy: false };
  let client;
  if (o.cluster) {
    // Credentials and timeouts of every node connection come from `defaults`
    // (node-redis docs/clustering.md); the URLs only name the seed nodes.
    const seed = new URL(o.nodes[0]);
    const auth = {};
    if (seed.username) auth.username = decodeURIComponent(seed.username);
    if (seed.password) auth.password = decodeURIComponent(seed.password);
    client = createCluster({
      rootNodes: o.nodes.map((url) => ({ url, socket })),
      defaults: { socket, disableOfflineQueue: true, ...auth },
      scripts: conn.scripts,
      maxCommandRedirections: 16,
    });
  } else {
    client = createClient({
      url: o.clientUrl,
      socket,
      disableOfflineQueue: true,
      scripts: conn.scripts,
    });
  }
  // Errors also reach the pending command; without a listener they would crash the thread.
  client.on('error', () => {});
  conn.client = client;
  try {
    await bounded(conn, client.connect(), o.connectTimeoutMs, 'connecting');
  } catch (e) {
    drop(conn, client);
    throw classify(e);
  }
  unref(client);
  return client;
}

/** An idle connection does not keep the process alive (a command in flight does: its timer). */
function unref(client) {
  if (typeof client.unref === 'function') {
    client.unref();
    return;
  }
  for (const node of [...(client.masters ?? []), ...(client.replicas ?? [])]) node.client?.unref?.();
}

/** `args` (a command) on the node owning `key` (any node when undefined). */
function send(conn, c, key, readonly, args) {
  return conn.options.cluster ? c.sendCommand(key, readonly, args) : c.sendCommand(args);
}

/** Every key matching `pattern`: SCAN on the server, or on every primary of the cluster. */
async function scan(conn, c, pattern) {
  const nodes = conn.options.cluster ? await Promise.all(c.masters.map((m) => c.nodeClient(m))) : [c];
  const out = new Set();
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.sendCommand(['SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000']);
      for (const k of keys) out.add(k);
      cursor = String(next);
    } while (cursor !== '0');
  }
  if (conn.options.cluster) unref(c);
  return [...out];
}

/** compare_and_set: one script on one server; check, INCR, write on a cluster (cas.lua). */
async function cas(conn, c, [key, expected, value, ttl, now, grace]) {
  const entry = conn.layout.entry(key);
  const args = [expected === null ? '' : String(expected), value, ttl === null ? '' : String(ttl), String(now), String(grace)];
  if (!conn.options.cluster) return c.casOne([entry, conn.layout.rev], [...args, '']);
  const first = await c.cas([entry], [...args, '?']);
  if (!(Array.isArray(first) && first.length === 1 && first[0] === 2)) return first;
  const n = await send(conn, c, conn.layout.rev, false, ['INCR', conn.layout.rev]);
  return c.cas([entry], [...args, String(n)]);
}

async function call(conn, body) {
  const client = await connect(conn);
  try {
    return await bounded(conn, body(client), conn.options.timeoutMs, 'the command');
  } catch (e) {
    const f = classify(e);
    if (f.kind === 'unavailable') drop(conn, client); // lost, timed out or refused: reconnect on the next call
    throw f;
  } finally {
    // A redirect may have opened a connection to another node.
    if (conn.options.cluster && conn.client === client) unref(client);
  }
}

const OPS = {
  async open(conn, [schema]) {
    const r = await call(conn, (c) => c.open([conn.layout.meta], [String(schema)]));
    if (!conn.options.cluster) {
      // On a cluster EVALSHA falls back to EVAL on the node that lacks a script.
      const names = [...new Set(Object.values(conn.scripts).map((s) => s.SCRIPT))];
      await call(conn, (c) => Promise.all(names.map((s) => c.sendCommand(['SCRIPT', 'LOAD', s]))));
    }
    return r;
  },
  get: (conn, [key, now]) => call(conn, (c) => c.get([conn.layout.entry(key)], [String(now)])),
  cas: (conn, args) => call(conn, (c) => cas(conn, c, args)),
  append: (conn, [stream, record, now]) => call(conn, (c) => c.append([conn.layout.stream(stream)], [record, String(now)])),
  read: (conn, [stream, after, limit]) => {
    const key = conn.layout.stream(stream);
    return call(conn, (c) => send(conn, c, key, true, ['XRANGE', key, `(${after}-0`, '+', 'COUNT', String(limit)]));
  },
  delete: (conn, [key]) => {
    const entry = conn.layout.entry(key);
    return call(conn, (c) => send(conn, c, entry, false, ['DEL', entry]));
  },
  // A sweep: SCAN for the entries under `prefix`, then each one's liveness; UTF-8 byte order.
  keys: (conn, [prefix, now]) =>
    call(conn, async (c) => {
      const out = [];
      for (const redisKey of await scan(conn, c, conn.layout.entryPattern(prefix))) {
        const key = conn.layout.keyOf(redisKey);
        if (key === null || !key.startsWith(prefix)) continue;
        const r = await c.get([redisKey], [String(now)]);
        if (Array.isArray(r) && r.length === 2) out.push(key);
      }
      return out.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    }),
  // A sweep: SCAN for every entry, purge.lua on each (removes it when expired).
  purge: (conn, [now]) =>
    call(conn, async (c) => {
      let removed = 0;
      for (const redisKey of await scan(conn, c, conn.layout.entryPattern(''))) {
        if (conn.layout.keyOf(redisKey) === null) continue;
        removed += await c.purge([redisKey], [String(now)]);
      }
      return removed;
    }),
  ping: (conn) => call(conn, (c) => send(conn, c, undefined, true, ['PING'])),
  time: async (conn) => {
    const t0 = performance.timeOrigin + performance.now();
    const reply = await call(conn, (c) => send(conn, c, undefined, true, ['TIME']));
    const t1 = performance.timeOrigin + performance.now();
    return { reply, t0, t1 };
  },
  async close(conn) {
    drop(conn);
    return null;
  },
};

/**
 * A connection's state for `options` = {clientUrl, cluster, nodes, prefix, timeoutMs,
 * connectTimeoutMs}: connected at its first operation, again after one failed with
 * `unavailable`. `cluster`: `nodes` are the seed nodes' redis:// URLs.
 */
export function connection(options) {
  return { options, layout: redisLayout(options.prefix), client: null, connecting: null, scripts: scripts() };
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
