// A SqliteStore's file, reached from a worker thread: the same methods returning
// promises. FallbackStore's asynchronous face serves its local spool through it,
// so the spool's writes (an fsync each with synchronous=full) never hold the
// event loop while Redis is down.

import { Worker } from 'node:worker_threads';
import { StoreError } from './store.js';

export class SqliteOffThread {
  #path;
  #options;
  #worker = null;
  #pending = new Map();
  #seq = 0;
  #closed = false;

  /** `path` and `options` ({busyTimeoutMs, synchronous}) as SqliteStore's. */
  constructor(path, options = {}) {
    this.#path = path;
    this.#options = options;
  }

  #start() {
    const w = new Worker(new URL('./store-sqlite-worker.js', import.meta.url), { workerData: { path: this.#path, options: this.#options }, execArgv: [] });
    w.on('message', ({ id, ok, err }) => {
      const p = this.#pending.get(id);
      if (p === undefined) return;
      this.#pending.delete(id);
      if (this.#pending.size === 0) w.unref();
      if (err) p.reject(new StoreError(err.kind, err.message));
      else p.resolve(ok);
    });
    const fail = (why) => {
      this.#worker = null;
      for (const p of this.#pending.values()) p.reject(new StoreError('io', `the SQLite worker thread for ${this.#path} ${why}; retry, or report it`));
      this.#pending.clear();
    };
    w.on('error', (e) => fail(`failed (${e.message})`));
    w.on('exit', () => fail('exited'));
    w.unref();
    this.#worker = w;
  }

  #call(method, args) {
    // After close() no worker starts again: a late background call fails instead of
    // holding the process open.
    if (this.#closed) return Promise.reject(new StoreError('io', `the SQLite store ${this.#path} is closed; open a new store`));
    if (this.#worker === null) this.#start();
    const id = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      if (this.#pending.size === 1) this.#worker.ref(); // a call in flight keeps the process alive
      this.#worker.postMessage({ id, method, args });
    });
  }

  get(...a) {
    return this.#call('get', a);
  }
  compareAndSet(...a) {
    return this.#call('compareAndSet', a);
  }
  append(...a) {
    return this.#call('append', a);
  }
  read(...a) {
    return this.#call('read', a);
  }
  delete(...a) {
    return this.#call('delete', a);
  }
  keys(...a) {
    return this.#call('keys', a);
  }
  purgeExpired(...a) {
    return this.#call('purgeExpired', a);
  }

  /** Stop the worker thread (the file stays). */
  close() {
    this.#closed = true;
    const w = this.#worker;
    this.#worker = null;
    w?.terminate();
  }
}
