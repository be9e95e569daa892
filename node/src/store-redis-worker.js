// The worker thread behind RedisStore's synchronous methods: the Redis client
// is asynchronous, the synchronous store interface blocks this process's
// calling thread on Atomics.wait (src/sync-bridge.js) while this worker runs
// the operation (src/store-redis-client.js). One worker serves every
// RedisStore of the process; each store has its own connection here, keyed by
// an id. RedisStore's asynchronous methods (`store.async`) never come here.

import { serveSync } from './sync-bridge.js';
import { connection, perform } from './store-redis-client.js';

const conns = new Map(); // id -> connection

serveSync(async ({ id, op, args }) => {
  if (op === 'init') {
    try {
      conns.set(id, connection(args[0]));
    } catch (e) {
      return { err: { kind: e.kind ?? 'io', message: e.message } };
    }
    return { ok: null };
  }
  const conn = conns.get(id);
  if (!conn) return { err: { kind: 'io', message: 'the store was closed; open a new RedisStore' } };
  const reply = await perform(conn, op, args);
  if (op === 'close') conns.delete(id);
  return reply;
});
