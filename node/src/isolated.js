// `Policy.load(source, {isolate: 'worker', timeoutMs})`: an untrusted policy in
// a worker thread, with a deadline per call.
//
// Node has no fuel metering: a policy that loops forever in-process blocks the
// event loop for good. Here the component runs in a `worker_threads` Worker;
// every call (and the load, which runs the smoke set) has a deadline, and a
// call that overruns it terminates the worker and fails with a
// PolicyRuntimeError whose code is `trap`. The next call starts a fresh worker
// (the component is not verified again: same bytes). The main thread's event
// loop stays free throughout, which is why every method returns a promise.
//
// Calls run one at a time, in order. The cost is a message round trip per call
// (structured clone of the arguments and the result); see README, "Untrusted
// policies" for the measured figure.

import { Worker } from 'node:worker_threads';
import { readSource } from './component.js';
import { PolicyError, PolicyLoadError, PolicyRuntimeError } from './errors.js';
import { requireSignatureOption, signatureFor, verifySignature } from './signing.js';

/** The default deadline per call. */
export const DEFAULT_TIMEOUT_MS = 1000;
/** The default deadline for the load: transpiling, instantiating, the smoke set. */
export const DEFAULT_LOAD_TIMEOUT_MS = 30_000;

const WORKER_URL = new URL('./worker.js', import.meta.url);

function rebuild(data) {
  const options = data.code ? { code: data.code } : undefined;
  if (data.name === 'PolicyError') return new PolicyError(data.kind, data.message, options);
  if (data.name === 'PolicyLoadError') return new PolicyLoadError(data.reason, data.message, options);
  if (data.name === 'PolicyRuntimeError') return new PolicyRuntimeError(data.message, options);
  if (data.name === 'TypeError') return new TypeError(data.message);
  return new PolicyRuntimeError(data.message, options);
}

/** One worker thread holding one loaded component. */
class Thread {
  #worker;
  #pending = new Map();
  #next = 1;
  #dead = null;

  constructor(source, options) {
    this.#worker = new Worker(WORKER_URL, { workerData: { source, options } });
    this.#worker.unref();
    this.#worker.on('message', ({ id, value, error }) => {
      const p = this.#pending.get(id);
      if (!p) return;
      this.#pending.delete(id);
      if (error) p.reject(rebuild(error));
      else p.resolve(value);
    });
    const fail = (why) => {
      this.#dead = why;
      for (const p of this.#pending.values()) p.reject(new PolicyRuntimeError(why, { code: 'trap' }));
      this.#pending.clear();
    };
    this.#worker.on('error', (e) => fail(`the policy's worker thread failed (${e?.message ?? e})`));
    this.#worker.on('exit', (code) => fail(`the policy's worker thread exited (code ${code})`));
  }

  get dead() {
    return this.#dead !== null;
  }

  /** Waits for message `id` (0: the load) for at most `timeoutMs`. */
  wait(id, timeoutMs, what) {
    return new Promise((resolve, reject) => {
      if (this.#dead) {
        reject(new PolicyRuntimeError(this.#dead, { code: 'trap' }));
        return;
      }
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        this.terminate();
        reject(
          new PolicyRuntimeError(
            `the policy did not answer ${what} within ${timeoutMs} ms; its worker thread was terminated (a runaway policy; raise timeoutMs if it is only slow)`,
            { code: 'trap' },
          ),
        );
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  call(method, args, timeoutMs) {
    const id = this.#next++;
    const answer = this.wait(id, timeoutMs, method);
    if (!this.#dead) this.#worker.postMessage({ id, method, args });
    return answer;
  }

  terminate() {
    this.#dead ??= 'the policy worker was terminated';
    this.#worker.terminate().catch(() => {});
  }
}

/**
 * A policy running in a worker thread. Same methods as Policy, each returning
 * a promise. Create it with `Policy.load(source, {isolate: 'worker', timeoutMs})`.
 */
export class IsolatedPolicy {
  #bytes;
  #options;
  #timeoutMs;
  #thread;
  #queue = Promise.resolve();
  #loadTimeoutMs = DEFAULT_LOAD_TIMEOUT_MS;
  /** How many times a worker was terminated at its deadline or died. */
  restarts = 0;

  constructor(bytes, options, timeoutMs, thread) {
    this.#bytes = bytes;
    this.#options = options;
    this.#timeoutMs = timeoutMs;
    this.#thread = thread;
  }

  /**
   * Loads and verifies `source` in a worker, within `loadTimeoutMs` (transpiling
   * a component takes about a second; a smoke set that loops is stopped here).
   */
  static async load(source, options = {}) {
    const { isolate: _isolate, timeoutMs = DEFAULT_TIMEOUT_MS, loadTimeoutMs = DEFAULT_LOAD_TIMEOUT_MS, ...rest } = options;
    for (const [name, v] of [['timeoutMs', timeoutMs], ['loadTimeoutMs', loadTimeoutMs]]) {
      if (!Number.isSafeInteger(v) || v <= 0) {
        throw new PolicyError('invalid_argument', `${name} must be a positive integer (ms), got ${JSON.stringify(v)}`);
      }
    }
    // The reference is loaded from gen/ inside the worker; other sources are
    // read here, so a worker restart needs no file access.
    const { requireSignature: required, ...workerOptions } = rest;
    const requireSignature = requireSignatureOption(required);
    let bytes;
    if (source !== undefined && source !== null) {
      const read = await readSource(source);
      bytes = read.bytes;
      // Checked here, on the bytes the worker gets.
      if (requireSignature) verifySignature(bytes, await signatureFor(source, requireSignature), requireSignature.trustedKeys, read.label);
    }
    const thread = new Thread(bytes, workerOptions);
    try {
      await thread.wait(0, loadTimeoutMs, 'its load and smoke set');
    } catch (e) {
      thread.terminate();
      if (e instanceof PolicyLoadError) throw e;
      const code = e instanceof PolicyRuntimeError ? e.code : 'trap';
      throw new PolicyLoadError('smoke_test', `the candidate was refused: ${e.message}`, { cause: e, code });
    }
    // The worker verified these bytes; a restarted worker does not run the smoke set again.
    const policy = new IsolatedPolicy(bytes, { ...workerOptions, verify: false, smokeTests: undefined }, timeoutMs, thread);
    policy.#loadTimeoutMs = loadTimeoutMs;
    return policy;
  }

  #call(method, ...args) {
    const run = this.#queue.then(async () => {
      if (this.#thread.dead) {
        this.restarts += 1;
        this.#thread = new Thread(this.#bytes, this.#options);
        await this.#thread.wait(0, this.#loadTimeoutMs, 'its restart');
      }
      return this.#thread.call(method, args, this.#timeoutMs);
    });
    this.#queue = run.catch(() => {});
    return run;
  }

  /** Stops the worker thread; later calls start a new one. */
  close() {
    this.#thread.terminate();
  }

  describe() { return this.#call('describe'); }
  info() { return this.#call('info'); }
  smokeTests() { return this.#call('smokeTests'); }
  classifyJson(observation) { return this.#call('classifyJson', observation); }
  decideJson(observation, context = '{}') { return this.#call('decideJson', observation, context); }
  classify(observation) { return this.#call('classify', observation); }
  decide(observation, context) { return this.#call('decide', observation, context); }
  backoff(options) { return this.#call('backoff', options); }
  key(options) { return this.#call('key', options); }
  registry() { return this.#call('registry'); }
  registryJson() { return this.#call('registryJson'); }
  lookup(code) { return this.#call('lookup', code); }
  errorsBlock(codes) { return this.#call('errorsBlock', codes); }
  renderJson(envelope, format, options = '') { return this.#call('renderJson', envelope, format, options); }
  render(envelope, format, options) { return this.#call('render', envelope, format, options); }
}
