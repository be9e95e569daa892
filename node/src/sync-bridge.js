// A synchronous call into a worker thread: post a message, block on
// Atomics.wait until the worker notifies, take the reply with
// receiveMessageOnPort. What RedisStore needs to offer the store's synchronous
// interface over the asynchronous Redis client.
//
// Written here rather than taken from synckit (tried first: 0.12.3) because
// RedisStore needs two things it lacks: a wait bounded per call (synckit's
// timeout is fixed per worker file, shared by every store of the process), and
// no unbounded hang when the worker cannot start (synckit 0.12.3 finds its
// preload from a global __dirname when one exists, as under `node -e`, and then
// its worker dies before its failure guard runs, leaving Atomics.wait
// waiting forever). A reply that comes after its call gave up is dropped by id.

import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';

/** How long the first call also waits for the worker thread to start and load its module. */
const STARTUP_MS = 10_000;

export class SyncBridge {
  #worker = null;
  #port = null;
  #flag = null;
  #seq = 0;
  #started = false;
  #dead = null;
  #url;

  /** `url`: the worker module (it calls serveSync). */
  constructor(url) {
    this.#url = url;
  }

  #start() {
    this.#flag = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.#worker = new Worker(this.#url, { workerData: { flag: this.#flag, port: port2 }, transferList: [port2], execArgv: [] });
    this.#worker.on('error', (e) => {
      this.#dead = e;
    });
    this.#worker.on('exit', () => {
      this.#dead ??= new Error('the worker thread exited');
      this.#worker = null;
    });
    this.#worker.unref();
    this.#port.unref();
    this.#started = false;
  }

  /**
   * Send `message` and block until its reply, at most `waitMs` (plus the start-up
   * allowance on the first call). Throws an Error when there is no reply in time.
   */
  call(message, waitMs) {
    if (!this.#worker) {
      this.#dead = null;
      this.#start();
    }
    const id = ++this.#seq;
    Atomics.store(this.#flag, 0, 0);
    this.#worker.postMessage({ id, message });
    const deadline = performance.now() + waitMs + (this.#started ? 0 : STARTUP_MS);
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      Atomics.wait(this.#flag, 0, 0, left);
      Atomics.store(this.#flag, 0, 0);
      let got;
      while ((got = receiveMessageOnPort(this.#port))) {
        if (got.message.id === id) {
          this.#started = true;
          return got.message.reply;
        }
        // a late reply to a call that gave up: dropped
      }
      if (this.#dead) break;
    }
    const why = this.#dead ? `the worker thread failed (${this.#dead.message})` : `no reply from the worker thread within ${Math.round(waitMs)} ms`;
    if (this.#dead) this.#stop();
    throw new Error(why);
  }

  #stop() {
    const w = this.#worker;
    this.#worker = null;
    w?.terminate();
  }
}

/** In the worker: answer each message with `await handle(message)`. */
export async function serveSync(handle) {
  const { parentPort, workerData } = await import('node:worker_threads');
  const { flag, port } = workerData;
  parentPort.on('message', async ({ id, message }) => {
    let reply;
    try {
      reply = await handle(message);
    } catch (e) {
      reply = { err: { kind: 'unavailable', message: `the worker thread failed (${e?.message ?? e}); retry, or report it` } };
    }
    port.postMessage({ id, reply });
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  });
}
