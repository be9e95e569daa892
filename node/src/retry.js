// retry(): run an operation, and on each failure ask the policy what to do.
//
// The host does what a policy must not: it runs the operation, reads the clock,
// sleeps and counts. Every choice (retry or not, how long to wait, when the
// attempts or the budget are spent) is the policy's decision.

import { PolicyError, PolicyRuntimeError, RecoveryError } from './errors.js';
import { failureOf as defaultFailureOf, fromError } from './observe.js';
import { Policy } from './policy.js';

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
 * Run `operation({attempt, idempotencyKey, signal})` until it succeeds or the
 * policy decides to stop; then throw a RecoveryError with the decision.
 *
 * @param {(a: {attempt: number, idempotencyKey?: string, signal?: AbortSignal}) => Promise<any>} operation
 * @param {object} options see index.d.ts (RetryOptions)
 */
export async function retry(operation, options = {}) {
  const {
    policy,
    call,
    provider,
    runId,
    stepId,
    tool,
    args = {},
    seed,
    maxElapsedMs,
    onDecision,
    sleep: sleepFor = sleep,
    signal,
    timeoutMs,
    context = {},
    failureOf = defaultFailureOf,
    now = Date.now,
  } = options;
  if (!(policy instanceof Policy)) {
    throw new TypeError('retry() needs `policy`: the Policy from `await Policy.load()`');
  }
  if (typeof operation !== 'function') throw new TypeError('retry() needs an operation function');
  if (maxElapsedMs !== undefined && !(Number.isSafeInteger(maxElapsedMs) && maxElapsedMs >= 0)) {
    throw new PolicyError('invalid_config', `maxElapsedMs must be a non-negative integer of milliseconds, got ${maxElapsedMs}`);
  }
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new PolicyError('invalid_argument', `timeoutMs must be a positive number of milliseconds, got ${timeoutMs}`);
  }

  // One key for every attempt: the same logical action, repeated safely.
  let idempotencyKey = options.idempotencyKey;
  if (idempotencyKey === undefined && runId !== undefined && stepId !== undefined && tool !== undefined) {
    idempotencyKey = policy.key({ runId, stepId, tool, args });
  }
  // Without a key a repeat may duplicate a side effect: say so, unless the caller knows better.
  const idempotent = options.idempotent ?? context.idempotent ?? (idempotencyKey === undefined ? false : undefined);

  // Retry delay spent so far in the run: this step's sleeps, on top of what the
  // caller says earlier steps spent (context.elapsed_ms), so one budget can span a run.
  let elapsedMs = context.elapsed_ms ?? 0;
  if (!(Number.isSafeInteger(elapsedMs) && elapsedMs >= 0)) {
    throw new PolicyError('invalid_context', `context.elapsed_ms must be a non-negative integer of milliseconds, got ${elapsedMs}`);
  }
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    const deadline = attemptDeadline(signal, timeoutMs);
    let result;
    let error;
    let observation;
    try {
      result = await operation({ attempt, idempotencyKey, signal: deadline.signal });
      observation = await failureOf(result, { call, provider });
      if (observation === undefined || observation === null) return result;
    } catch (e) {
      if (signal?.aborted) throw e; // the caller cancelled: nothing to recover
      // An inner retry() already decided, and a policy failure is not the
      // operation's: neither is retried again.
      if (e instanceof RecoveryError || e instanceof PolicyError || e instanceof PolicyRuntimeError) throw e;
      error = e;
      // Our own deadline aborted the attempt: whatever abort error the
      // operation (or the SDK it called) threw for it, that is a timeout.
      observation = fromError(e, { call, provider, timeoutMs, timedOut: deadline.fired() });
    } finally {
      deadline.clear();
    }

    const ctx = { ...context, attempt, elapsed_ms: elapsedMs, now_ms: now() };
    if (call !== undefined) ctx.call = call;
    if (seed !== undefined) ctx.seed = seed;
    if (idempotent !== undefined) ctx.idempotent = idempotent;
    if (maxElapsedMs !== undefined) ctx.config = { ...context.config, retry_budget_ms: maxElapsedMs };
    const decision = policy.decide(observation, ctx);
    if (onDecision) await onDecision({ attempt, decision, observation, idempotencyKey, error, result, elapsedMs });

    if (decision.action !== 'retry') {
      throw new RecoveryError({ decision, observation, attempts: attempt, cause: error, result, elapsedMs });
    }
    await sleepFor(decision.delay_ms, signal);
    elapsedMs += decision.delay_ms;
  }
}

/** The signal of one attempt: the caller's, plus `timeoutMs` when given. */
function attemptDeadline(signal, timeoutMs) {
  if (timeoutMs === undefined) return { signal, clear() {}, fired: () => false };
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
