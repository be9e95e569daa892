// The worker thread behind SqliteOffThread (src/store-sqlite-async.js): one
// SqliteStore connection, answering {id, method, args} with {id, ok} or
// {id, err: {kind, message}}. Its writes wait for their fsync here, not on the
// thread that awaits them.

import { parentPort, workerData } from 'node:worker_threads';
import { SqliteStore } from './store.js';

let store;
let failed;
try {
  store = new SqliteStore(workerData.path, workerData.options);
} catch (e) {
  failed = e;
}

parentPort.on('message', ({ id, method, args }) => {
  try {
    if (failed) throw failed;
    parentPort.postMessage({ id, ok: store[method](...args) });
  } catch (e) {
    parentPort.postMessage({ id, err: { kind: typeof e?.kind === 'string' ? e.kind : 'io', message: String(e?.message ?? e) } });
  }
});
