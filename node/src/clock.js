// The runtime's clocks: the system clock, and a virtual one for tests and
// scenarios (sleeping advances it at once). The twin of host/src/runtime/clock.rs.

import { checkMs, invalidArg } from './step.js';

/** The system clock: Date.now and real (cancellable) timers. */
export class SystemClock {
  /** Now, Unix ms. */
  nowMs() {
    return Date.now();
  }

  /** Sleep `ms` milliseconds; resolves early (without error) when `signal` aborts. */
  sleepMs(ms, signal) {
    return sleep(ms, signal).catch(() => {});
  }
}

/** Sleep `ms` milliseconds; rejects with the signal's reason if it aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A virtual clock: sleeping advances it at once, nothing really waits. For
 * tests and scenarios. An operation may call `advance(ms)` to take time.
 */
export class VirtualClock {
  #now;

  /** A clock that starts at `nowMs` (Unix ms). */
  constructor(nowMs = 0) {
    checkMs('VirtualClock nowMs', nowMs);
    this.#now = nowMs;
  }

  /** Virtual: the runtime measures timeouts on it instead of racing a timer. */
  get virtual() {
    return true;
  }

  nowMs() {
    return this.#now;
  }

  /** Move the clock forward without sleeping. */
  advance(ms) {
    checkMs('advance ms', ms);
    this.#now += ms;
  }

  /** Set the clock (scenarios set it back to a fork's time for each branch). */
  set(nowMs) {
    checkMs('VirtualClock nowMs', nowMs);
    this.#now = nowMs;
  }

  async sleepMs(ms) {
    this.#now += ms;
  }
}

/** Your own clock, read as whole Unix ms (the loop takes integers; performance-style floats are floored). */
export function integerClock(c) {
  return {
    nowMs() {
      const t = Number(c.nowMs());
      if (!Number.isFinite(t) || t < 0) throw invalidArg(`the clock's nowMs() returned ${t}; return Unix ms, a non-negative number`);
      return Math.floor(t);
    },
    sleepMs: (ms, signal) => c.sleepMs(ms, signal),
    virtual: c.virtual === true,
    set: typeof c.set === 'function' ? (ms) => c.set(ms) : undefined,
    /** The clock you passed. */
    inner: c,
  };
}

