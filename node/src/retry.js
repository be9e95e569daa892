// retry(): the small door, recover(), with the older call shape: one call of a
// door made for it, so there is one loop. What maps to what is in
// docs/runtime.md ("retry(): the door with the older call shape"). The
// runtime under those doors is built once per configuration (policy, seed,
// policy configuration, breaker, clock, store, onEvent) and kept; each call
// gets a fresh MemoryStore when it names no store, as a door of its own would.

import { randomUUID } from 'node:crypto';
import { PolicyError, PolicyRuntimeError, RecoveryError } from './errors.js';
import { fromError } from './observe.js';
import { Policy } from './policy.js';
import { Failed } from './outcome.js';
import { RECOVER_DEFAULTS, callDoor, contextOf, doorOptions, doorRuntime, doorStep } from './recover.js';
import { SystemClock, sleep } from './clock.js';
import { invalidArg, invalidConfig, prepareStep } from './step.js';
import { stringify } from './json.js';
import { MemoryStore } from './store.js';

export { sleep };

/**
 * "No breaker" for one retried call: the largest threshold the loop accepts
 * (100, the most attempts a policy may allow), so the breaker of a single
 * retried call can never open before its attempts run out. The same value in
 * Rust's Retry and Python's retry().
 */
const NO_BREAKER = Object.freeze({ failureThreshold: 100 });
/** The policy's max_attempts decides when attempts run out. */
const NO_ATTEMPT_BUDGET = Object.freeze({ attemptBudget: 2 ** 32 - 1 });

/**
 * Run `operation({attempt, idempotencyKey, signal, target})` until it succeeds or
 * the policy decides to stop; then throw a RecoveryError with the decision.
 *
 * @param {(a: {attempt: number, idempotencyKey?: string, signal?: AbortSignal, target: string}) => Promise<any>} operation
 * @param {object} options see index.d.ts (RetryOptions)
 */
export async function retry(operation, options = {}) {
  const { policy, call, provider, runId, stepId, tool, args = {}, seed, maxElapsedMs, onDecision, onEvent, signal, timeoutMs,
    context = {}, failureOf, now = Date.now, store, target, fallbacks, breaker, idempotencyKey: explicitKey } = options;
  const sleepFor = options.sleep ?? sleep;
  if (!(policy instanceof Policy)) throw new TypeError('retry() needs `policy`: the Policy from `await Policy.load()`');
  if (typeof operation !== 'function') throw new TypeError('retry() needs an operation function');
  if (maxElapsedMs !== undefined && !(Number.isSafeInteger(maxElapsedMs) && maxElapsedMs >= 0)) {
    throw invalidConfig(`maxElapsedMs must be a non-negative integer of milliseconds, got ${maxElapsedMs}`);
  }
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw invalidArg(`timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`);
  }
  if (context === null || typeof context !== 'object') {
    throw new PolicyError('invalid_context', `context must be an object, got ${typeof context}`);
  }
  // config and idempotent are options of the door; the rest is the door's `context`.
  const { config: ctxConfig, idempotent: ctxIdempotent, ...rest } = context;
  contextOf(rest, 'retry()');

  // One key for every attempt: the same logical action, repeated safely.
  const ids = runId !== undefined && stepId !== undefined && tool !== undefined;
  // Without a key a repeat may duplicate a side effect: say so, unless the caller knows better.
  const idempotent = options.idempotent ?? ctxIdempotent ?? (explicitKey === undefined && !ids ? false : undefined);
  const config = maxElapsedMs === undefined ? ctxConfig : { ...ctxConfig, retry_budget_ms: maxElapsedMs };
  const keyOf = (key) => explicitKey ?? (ids ? key : undefined);

  let attemptError; // what the last attempt threw
  let attemptResult; // what it returned
  let passed; // an error the operation threw that is not retried (it ends the call as it is)
  const attempt = async (c) => {
    attemptError = undefined;
    attemptResult = undefined;
    const deadline = timeoutMs === undefined ? undefined : attemptDeadline(c, timeoutMs);
    try {
      const value = await operation({
        attempt: c.attempt,
        idempotencyKey: keyOf(c.key),
        // Read through: the attempt's AbortSignal is made only when the operation reads it.
        get signal() {
          return deadline === undefined ? c.signal : deadline.signal;
        },
        target: c.target,
      });
      attemptResult = value;
      if (failureOf !== undefined) {
        const obs = await failureOf(value, { call, provider });
        if (obs !== undefined && obs !== null) return new Failed(obs);
      }
      return value;
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      // An inner retry() already decided, and a policy failure is not the
      // operation's: neither is retried again (the Runtime passes them through).
      if (e instanceof RecoveryError || e instanceof PolicyError || e instanceof PolicyRuntimeError) throw (passed = e);
      attemptError = e;
      // Our own deadline aborted the attempt: whatever abort error the
      // operation (or the SDK it called) threw for it, that is a timeout.
      return new Failed(fromError(e, { call, provider, timeoutMs, timedOut: deadline?.fired() ?? false }));
    } finally {
      deadline?.clear();
    }
  };
  // Every option of the door, as doorOptions(…, complete) takes them.
  const door = doorOptions(
    attempt,
    {
      policy,
      store,
      clock: undefined, // made with the runtime (sharedRuntime)
      seed,
      call,
      tool: tool ?? 'operation',
      target,
      fallbacks: fallbacks === undefined ? RECOVER_DEFAULTS.fallbacks : fallbacks,
      sideEffect: false,
      idempotent,
      runId: runId ?? (explicitKey !== undefined ? `key:${explicitKey}` : `retry-${randomUUID()}`),
      stepId: stepId ?? 'retry',
      errors: 'throw',
      timeoutMs: undefined, // the attempt's deadline is retry()'s own (attemptDeadline)
      policyConfig: config,
      breaker: breaker ?? NO_BREAKER,
      onEvent,
      onDecision:
        onDecision === undefined
          ? undefined
          : (d) => onDecision({ attempt: d.attempt, decision: d.decision, observation: d.observation,
            idempotencyKey: keyOf(d.key), error: attemptError, result: attemptResult, elapsedMs: d.elapsedMs }),
      context: Object.keys(rest).length === 0 ? undefined : rest,
      args,
      signal,
      runtimeOptions: NO_ATTEMPT_BUDGET,
    },
    true,
  );
  door.direct = true; // `attempt` is async and reads only the call's attempt, key, signal and target
  const shared = await sharedRuntime(door, { now, sleepFor, store });
  door.prepared = preparedStep(shared, door);
  try {
    return await callDoor(door, shared, attempt, [], door, store === undefined ? new MemoryStore() : undefined);
  } catch (e) {
    // The door's error, with what the operation itself threw or returned.
    if (!(e instanceof RecoveryError) || e === passed || e.observation === undefined) throw e;
    throw new RecoveryError({ decision: e.decision, observation: e.observation, attempts: e.attempts, cause: attemptError,
      result: attemptResult, elapsedMs: e.elapsedMs });
  }
}

/**
 * The runtimes under retry()'s doors, by what they are built from (the
 * policy, store, clock and onEvent by identity; the seed, policy
 * configuration and breaker by value); the last 16 made are kept.
 */
const runtimes = new Map();
const RUNTIMES_LIMIT = 16;
const identities = new WeakMap();
let nextId = 0;
const idOf = (x) => {
  if (x === undefined) return '-';
  if (!identities.has(x)) identities.set(x, ++nextId);
  return identities.get(x);
};

const valueKey = (v) => (v === undefined ? '-' : v === NO_BREAKER ? 'no breaker' : stringify(v));

function sharedRuntime(door, { now, sleepFor, store }) {
  const { o } = door;
  // The clock of retry(): `now`, and `sleep` (a cancelled sleep ends early, as a SystemClock's).
  const sleepMs = async (ms, sig) => {
    try {
      await sleepFor(ms, sig);
    } catch {
      // cancelled: the runtime sees the run's signal
    }
  };
  // Date.now is read as a SystemClock reads it (whole Unix ms: nothing to check on each read).
  const clock = now === Date.now ? Object.assign(new SystemClock(), { sleepMs }) : { nowMs: () => now(), sleepMs };
  const build = () => doorRuntime({ o: { ...o, clock } }, o.store ?? new MemoryStore());
  let key;
  try {
    key = `${idOf(o.policy)} ${idOf(store)} ${idOf(now)} ${idOf(sleepFor)} ${idOf(o.onEvent)} ${typeof o.seed} ${String(o.seed)} ${valueKey(o.policyConfig)} ${valueKey(o.breaker)}`;
  } catch {
    return build(); // not a key: the runtime says what is wrong
  }
  let shared = runtimes.get(key);
  if (shared === undefined) {
    shared = build().catch((e) => {
      if (runtimes.get(key) === shared) runtimes.delete(key);
      throw e;
    });
    runtimes.set(key, shared);
    if (runtimes.size > RUNTIMES_LIMIT) runtimes.delete(runtimes.keys().next().value);
  }
  return shared;
}

/**
 * The door's step prepared once per runtime and step members (callDoor
 * prepares it on each call otherwise); the last 16 are kept.
 */
function preparedStep(shared, door) {
  const { o, tool } = door;
  const plain = (v, type) => v === undefined || typeof v === type;
  if (!(plain(o.call, 'string') && plain(o.target, 'string') && plain(o.idempotent, 'boolean'))) return undefined;
  const key = JSON.stringify([tool, o.stepId, o.call, o.target, o.idempotent, o.fallbacks]);
  shared.steps ??= new Map();
  let prepared = shared.steps.get(key);
  if (prepared === undefined) {
    prepared = prepareStep(doorStep(door));
    if (shared.steps.size >= RUNTIMES_LIMIT) shared.steps.delete(shared.steps.keys().next().value);
    shared.steps.set(key, prepared);
  }
  return prepared;
}

/** The signal of one attempt with a timeout: the run's, plus `timeoutMs`. */
function attemptDeadline(call, timeoutMs) {
  const signal = call.signal;
  const ctl = new AbortController();
  // A timer of our own (not AbortSignal.timeout, which is unref'd): the attempt
  // is work in progress, and the timer is cleared as soon as it settles.
  const timer = setTimeout(
    () => ctl.abort(new DOMException(`the attempt timed out after ${timeoutMs} ms`, 'TimeoutError')),
    timeoutMs,
  );
  return {
    signal: signal ? AbortSignal.any([signal, ctl.signal]) : ctl.signal,
    clear: () => clearTimeout(timer),
    fired: () => ctl.signal.aborted,
  };
}
