// retry(): one step under the recovery Runtime.
//
// A thin wrapper over the Runtime (the loop is written once, in the
// component, so the helpers cannot drift): one
// run of one step, the attempt budget left to the policy's own max_attempts,
// no breaker unless asked, the caller's elapsed retry time carried into every
// decision, failures judged by the component. The host still only runs the
// operation, reads the clock and sleeps.

import { randomUUID } from 'node:crypto';
import { PolicyError, PolicyRuntimeError, RecoveryError } from './errors.js';
import { fromError } from './observe.js';
import { Policy } from './policy.js';
import { parseLossless, stringify } from './json.js';
import { Failed, Runtime } from './runtime.js';
import { MemoryStore } from './store.js';

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

const U32_MAX = 2 ** 32 - 1;
/**
 * "No breaker" for one retried call: the largest threshold the loop accepts
 * (100, the most attempts a policy may allow), so the breaker of a single
 * retried call can never open before its attempts run out. The same value in
 * Rust's Retry and Python's retry().
 */
const NO_BREAKER = Object.freeze({ failureThreshold: 100 });

/** The members of the policy's context (WIT `context`): the only ones retry() accepts in `context`. */
const CONTEXT_KEYS = Object.freeze([
  'call',
  'attempt',
  'elapsed_ms',
  'seed',
  'now_ms',
  'idempotent',
  'checkpoint_available',
  'fallback_available',
  'compensations_pending',
  'config',
]);

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
    onEvent,
    sleep: sleepFor = sleep,
    signal,
    timeoutMs,
    context = {},
    failureOf,
    now = Date.now,
    store,
    target,
    breaker,
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
  if (context === null || typeof context !== 'object') {
    throw new PolicyError('invalid_context', `context must be an object, got ${typeof context}`);
  }
  for (const k of Object.keys(context)) {
    if (!CONTEXT_KEYS.includes(k)) {
      throw new PolicyError(
        'invalid_context',
        `retry() context has unknown member ${JSON.stringify(k)}; the members are ${CONTEXT_KEYS.join(', ')} (the policy's context). ` +
          'For a fallback chain use recover(fn, { target, fallbacks })',
      );
    }
  }
  const callerElapsed = context.elapsed_ms ?? 0;
  if (!(Number.isSafeInteger(callerElapsed) && callerElapsed >= 0)) {
    throw new PolicyError('invalid_context', `context.elapsed_ms must be a non-negative integer of milliseconds, got ${callerElapsed}`);
  }

  // One key for every attempt: the same logical action, repeated safely.
  const ids = runId !== undefined && stepId !== undefined && tool !== undefined;
  const explicitKey = options.idempotencyKey;
  // Without a key a repeat may duplicate a side effect: say so, unless the caller knows better.
  const idempotent = options.idempotent ?? context.idempotent ?? (explicitKey === undefined && !ids ? false : undefined);

  // What the decisions get on top of the loop's context: the caller's extra
  // fields, and its elapsed retry time (earlier steps of its own run).
  const extra = { ...context };
  for (const k of ['elapsed_ms', 'attempt', 'now_ms', 'seed', 'call', 'idempotent', 'config']) delete extra[k];
  const config = maxElapsedMs === undefined ? context.config : { ...context.config, retry_budget_ms: maxElapsedMs };

  let last; // the last decision, with what it was about
  let attemptError;
  let attemptResult;
  let loopKey;
  const stamp = () => {
    const d = policy.describe();
    return { name: d.name, version: d.version, sha256: d.sha256 };
  };
  const decider = {
    async decideJson(observation, ctxText) {
      // Lossless: a u64 seed keeps its digits.
      const ctx = { ...parseLossless(ctxText), ...extra };
      ctx.elapsed_ms = (ctx.elapsed_ms ?? 0) + callerElapsed;
      const text = policy.decideJson(observation, stringify(ctx));
      const decision = JSON.parse(text);
      decision.policy = stamp();
      last = { decision, observation: JSON.parse(observation), attempt: ctx.attempt, elapsedMs: ctx.elapsed_ms, error: attemptError, result: attemptResult };
      if (onDecision) {
        const key = explicitKey ?? (ids ? loopKey : undefined);
        await onDecision({
          attempt: ctx.attempt,
          decision,
          observation: last.observation,
          idempotencyKey: key,
          error: attemptError,
          result: attemptResult,
          elapsedMs: ctx.elapsed_ms,
        });
      }
      return text;
    },
  };

  const runtime = await Runtime.create({
    policy: decider,
    store: store ?? new MemoryStore(),
    clock: {
      nowMs: () => now(),
      async sleepMs(ms, sig) {
        try {
          await sleepFor(ms, sig);
        } catch {
          // cancelled: the runtime sees the run's signal
        }
      },
    },
    seed,
    // The policy's max_attempts decides when attempts run out.
    attemptBudget: U32_MAX,
    breaker: breaker ?? NO_BREAKER,
    ...(config === undefined ? {} : { policyConfig: config }),
    onEvent,
  });
  const run = runtime.run(runId ?? (explicitKey !== undefined ? `key:${explicitKey}` : `retry-${randomUUID()}`), { signal });
  let result;
  const report = await run.step({
    id: stepId ?? 'retry',
    tool: tool ?? 'operation',
    args,
    ...(call === undefined ? {} : { call }),
    ...(target === undefined ? {} : { target }),
    ...(idempotent === undefined ? {} : { idempotent }),
    operation: async (c) => {
      const idempotencyKey = explicitKey ?? (ids ? c.key : undefined);
      loopKey = c.key;
      attemptError = undefined;
      attemptResult = undefined;
      const deadline = attemptDeadline(c.signal, timeoutMs);
      try {
        const value = await operation({ attempt: c.attempt, idempotencyKey, signal: deadline.signal });
        attemptResult = value;
        if (failureOf !== undefined) {
          const obs = await failureOf(value, { call, provider });
          if (obs !== undefined && obs !== null) return new Failed(obs);
        }
        result = value;
        return value;
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        // An inner retry() already decided, and a policy failure is not the
        // operation's: neither is retried again (the Runtime passes them through).
        if (e instanceof RecoveryError || e instanceof PolicyError || e instanceof PolicyRuntimeError) throw e;
        attemptError = e;
        // Our own deadline aborted the attempt: whatever abort error the
        // operation (or the SDK it called) threw for it, that is a timeout.
        return new Failed(fromError(e, { call, provider, timeoutMs, timedOut: deadline.fired() }));
      } finally {
        deadline.clear();
      }
    },
  });
  if (report.outcome === 'ok') {
    // One step is the whole run: end it, so it leaves no journal entry (docs/durability.md §1).
    await run.end();
    return report.value !== undefined ? report.value : result !== undefined ? result : report.result;
  }
  if (report.outcome === 'cancelled' && signal?.aborted) throw signal.reason;
  if (last?.decision === undefined) {
    throw new PolicyRuntimeError(`retry() ended ${report.outcome} without a decision; report this with the options you passed`);
  }
  throw new RecoveryError({
    decision: last.decision,
    observation: last.observation,
    attempts: last.attempt,
    cause: last.error,
    result: last.result,
    elapsedMs: last.elapsedMs,
  });
}

/** The signal of one attempt: the run's, plus `timeoutMs` when given. */
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
