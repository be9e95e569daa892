// recover(): the small door. Wraps one call or one tool in the recovery
// Runtime, one run of one step per call; the loop is the component's, this
// file decides nothing.
//
//   const chat = recover(async (call, messages) =>
//     openai.chat.completions.create({ model: call.target, messages }, { headers: { 'Idempotency-Key': call.key } }),
//     { call: 'llm', target: 'gpt-4o', fallbacks: ['gpt-4o-mini'] });
//   const answer = await chat(messages);

import { randomUUID } from 'node:crypto';
import { PolicyError, RecoveryError } from './errors.js';
import { describe, parseLossless, stringify } from './json.js';
import { Policy } from './policy.js';
import { Runtime, WITH } from './runtime.js';
import { STEP_AND_END, WITH_FIRST_STEP } from './run.js';
import { invalidArg, prepareCall, prepareStep } from './step.js';
import { MemoryStore } from './store.js';

/** The options of recover(), with their defaults (see index.d.ts, RecoverOptions). */
export const RECOVER_DEFAULTS = Object.freeze({
  policy: undefined, // the reference policy
  store: undefined, // a MemoryStore per wrapped function: its breakers outlive a call
  clock: undefined, // SystemClock
  seed: undefined,
  call: undefined, // 'tool' | 'llm' | 'agent'; undefined: read from each observation
  tool: undefined, // the function's name, else 'operation'
  target: undefined, // the tool name
  fallbacks: Object.freeze([]),
  sideEffect: false,
  idempotent: undefined,
  runId: undefined, // a new id per call: `${tool}-${uuid}`; a string or a function returning one
  stepId: undefined, // the tool name
  errors: 'throw', // or 'model': resolve with the failure rendered as a model tool result
  timeoutMs: undefined,
  policyConfig: undefined,
  breaker: undefined, // the policy's thresholds
  onEvent: undefined,
  onDecision: undefined, // called (and awaited) with each decision: { decision, observation, attempt, key, elapsedMs }
  context: undefined, // members added to the policy's context of every decision (CONTEXT_MEMBERS)
  args: undefined, // the call's arguments: the step's args (part of the key)
  signal: undefined, // an AbortSignal that cancels every call of the door
  runtimeOptions: undefined, // more Runtime options (attemptBudget, deadlineMs, retryQuota, ...)
});

/**
 * The members `context` may add to the policy's context. `elapsed_ms` is the
 * retry delay earlier steps already spent (the call's sleeps add to it); the
 * loop sets the others (attempt, seed, now_ms, call, idempotent, config,
 * fallback_available) from the options.
 */
export const CONTEXT_MEMBERS = Object.freeze(['elapsed_ms', 'checkpoint_available', 'compensations_pending']);
/** Where a context member the loop sets comes from. */
const SET_BY = Object.freeze({
  attempt: 'the loop counts attempts',
  now_ms: 'the loop reads the clock (pass `clock`)',
  seed: 'pass `seed`',
  call: 'pass `call`',
  idempotent: 'pass `idempotent`',
  config: 'pass `policyConfig`',
  fallback_available: 'the loop sets it from `fallbacks`: pass `fallbacks: [...]` (the targets to fall back to, in order) and call `call.target`',
});
/** The Runtime options recover() sets itself (refused in `runtimeOptions`). */
const OWN_RUNTIME = Object.freeze(['policy', 'store', 'clock', 'seed', 'attemptTimeoutMs', 'policyConfig', 'breaker', 'onEvent']);

/** `context` checked: the members to add, and the elapsed time to add to the loop's. */
export function contextOf(context, who = 'recover()') {
  if (context === undefined) return undefined;
  if (context === null || typeof context !== 'object' || Array.isArray(context)) {
    throw new PolicyError('invalid_context', `${who} context must be an object, got ${describe(context)}`);
  }
  for (const k of Object.keys(context)) {
    if (k in SET_BY) throw new PolicyError('invalid_context', `${who} context may not set ${k}: ${SET_BY[k]}`);
    if (!CONTEXT_MEMBERS.includes(k)) {
      throw new PolicyError(
        'invalid_context',
        `${who} context has unknown member ${JSON.stringify(k)}; the members it may add are ${CONTEXT_MEMBERS.join(', ')}. ` +
          'For a fallback chain pass fallbacks: [...]',
      );
    }
  }
  const { elapsed_ms: elapsed = 0, ...extra } = context;
  if (!(Number.isSafeInteger(elapsed) && elapsed >= 0)) {
    throw new PolicyError('invalid_context', `context.elapsed_ms must be a non-negative integer of milliseconds, got ${describe(elapsed)}`);
  }
  return { extra, elapsed };
}

const warned = new WeakSet();

/**
 * Wrap `fn(call, ...args)` in the recovery runtime; returns `async (...args) => result`.
 * `call` carries `key` (the idempotency key, the same on every attempt and
 * target: send it to the service), `target`, `attempt` and `signal`.
 * @param {(call: object, ...args: any[]) => any} fn
 * @param {object} [options] see index.d.ts (RecoverOptions)
 */
export function recover(fn, options = {}) {
  const door = doorOptions(fn, options);
  const store = door.o.store ?? new MemoryStore();
  let shared; // a promise of the door's runtime, made at its first call
  let ready; // the runtime, once made

  const runtimeOf = () => {
    shared ??= doorRuntime(door, store).then(
      (r) => (ready = r),
      (e) => {
        shared = undefined;
        throw e;
      },
    );
    return shared;
  };
  const recovered = async (...args) => callDoor(door, ready ?? (await runtimeOf()), fn, args, recovered);
  Object.defineProperty(recovered, 'name', { value: door.tool });
  return recovered;
}

/**
 * @internal recover()'s options checked: `{o (with the defaults), tool, added}`.
 * `complete`: `options` names every option (as retry() makes them), so it is
 * taken as it is, without looking for unknown ones or adding the defaults.
 */
export function doorOptions(fn, options, complete = false) {
  if (typeof fn !== 'function') throw invalidArg(`recover() wraps a function, got ${describe(fn)}; pass an (async) function`);
  if (options === null || typeof options !== 'object') throw invalidArg(`recover() options must be an object, got ${describe(options)}`);
  let o = options;
  if (!complete) {
    for (const k of Object.keys(options)) {
      if (!(k in RECOVER_DEFAULTS)) {
        throw invalidArg(`recover() has no option ${JSON.stringify(k)}; the options are ${Object.keys(RECOVER_DEFAULTS).join(', ')}`);
      }
    }
    o = { ...RECOVER_DEFAULTS, ...options };
  }
  if (o.errors !== 'throw' && o.errors !== 'model') throw invalidArg(`errors is 'throw' or 'model', got ${JSON.stringify(o.errors)}`);
  if (!Array.isArray(o.fallbacks) || !o.fallbacks.every((t) => typeof t === 'string')) {
    throw invalidArg(`fallbacks is an array of target names, got ${describe(o.fallbacks)}`);
  }
  if (o.policy !== undefined && !(o.policy instanceof Policy)) throw invalidArg('policy must be a Policy (`await Policy.load()`)');
  if (o.onDecision !== undefined && typeof o.onDecision !== 'function') throw invalidArg(`onDecision must be a function, got ${describe(o.onDecision)}`);
  const added = contextOf(o.context);
  if (o.runtimeOptions !== undefined) {
    if (o.runtimeOptions === null || typeof o.runtimeOptions !== 'object') throw invalidArg(`runtimeOptions must be an object of Runtime options, got ${describe(o.runtimeOptions)}`);
    const own = Object.keys(o.runtimeOptions).filter((k) => OWN_RUNTIME.includes(k));
    if (own.length > 0) throw invalidArg(`runtimeOptions ${own.join(', ')}: options of recover() itself, pass them directly`);
  }
  return { o, tool: o.tool ?? (fn.name || 'operation'), added };
}

/** The decider of the runtime a door builds: never asked, each call brings its own (callDecider). */
const NO_DECIDER = Object.freeze({
  decideJson() {
    throw new Error('a door runs each call with its own decider');
  },
});

/**
 * @internal The runtime a door's calls share (`{rt, policy}`): built once,
 * each call runs on it with its own decider (`rt[WITH]`).
 */
export async function doorRuntime({ o }, store) {
  const policy = o.policy ?? (await Policy.load());
  const rt = await Runtime.create({
    policy: NO_DECIDER,
    store,
    ...(o.clock === undefined ? {} : { clock: o.clock }),
    ...(o.seed === undefined ? {} : { seed: o.seed }),
    ...(o.timeoutMs === undefined ? {} : { attemptTimeoutMs: o.timeoutMs }),
    ...(o.policyConfig === undefined ? {} : { policyConfig: o.policyConfig }),
    ...(o.breaker === undefined ? {} : { breaker: o.breaker }),
    ...(o.onEvent === undefined ? {} : { onEvent: o.onEvent }),
    ...o.runtimeOptions,
  });
  return { rt, policy };
}

/** The decider of one call: the policy's decision, noted in `state` (what the call's error reports). */
function callDecider(policy, { o, added }, state) {
  return {
    async decideJson(observation, ctx) {
      let context = ctx;
      if (added !== undefined) {
        // Lossless: a u64 seed keeps its digits.
        const c = { ...parseLossless(ctx), ...added.extra };
        c.elapsed_ms = (c.elapsed_ms ?? 0) + added.elapsed;
        context = stringify(c);
      }
      const text = policy.decideJson(observation, context);
      state.last = text;
      state.observation = observation;
      state.context = context;
      if (o.onDecision !== undefined) {
        const c = parseLossless(context);
        const decision = JSON.parse(text);
        decision.policy = stamp(policy);
        state.decision = decision;
        await o.onDecision({
          decision,
          observation: JSON.parse(observation),
          attempt: Number(c.attempt),
          key: state.key,
          elapsedMs: Number(c.elapsed_ms ?? 0),
        });
      }
      return text;
    },
  };
}

/**
 * @internal One call of a door: a run of one step on `shared.rt` with this
 * call's decider (and `store`, a fresh MemoryStore, when given: see
 * Runtime[WITH]), ended when it succeeds. `warnKey` is who warns once when a
 * side effect ignores its key.
 */
export async function callDoor(door, shared, fn, args, warnKey, store = undefined) {
  const { o, tool } = door;
  const { policy } = shared;
  // This call's last decision (JSON text), what it was about, and its key.
  const state = { last: undefined, decision: undefined, observation: undefined, context: undefined, key: undefined };
  const rt = shared.rt[WITH](callDecider(policy, door, state), store);
  let cause; // what the last attempt threw
  let returned; // what the last attempt returned (a response the component judged a failure)
  let keyRead = false;
  const runId = typeof o.runId === 'function' ? String(o.runId()) : (o.runId ?? `${tool}-${randomUUID()}`);
  // The run's `run` input carries its one step (one `advance` fewer).
  const run = rt.run(runId, o.signal === undefined ? { [WITH_FIRST_STEP]: true } : { signal: o.signal, [WITH_FIRST_STEP]: true });
  // The step is checked and written once per door; each call adds its args.
  door.prepared ??= prepareStep(doorStep(door));
  const step = {
    id: door.prepared.step.id,
    tool,
    target: o.target,
    args: o.args === undefined ? argsOf(args) : o.args,
    // retry()'s door: its own wrapper takes the runtime's call as it is.
    operation: door.direct ? (c) => {
      state.key = c.key;
      return fn(c).then((value) => {
        cause = undefined;
        return (returned = value);
      }, (e) => {
        cause = e;
        throw e;
      });
    } : async (c) => {
      state.key = c.key;
      const call = {
        get key() {
          keyRead = true;
          return c.key;
        },
        target: c.target,
        attempt: c.attempt,
        // Read through: the runtime makes the attempt's AbortSignal only when it is read.
        get signal() {
          return c.signal;
        },
        timeoutMs: c.timeoutMs,
      };
      try {
        returned = await fn(call, ...args);
        cause = undefined;
        return returned;
      } catch (e) {
        cause = e;
        throw e;
      } finally {
        if (o.sideEffect && !keyRead && o.idempotent !== true && !warned.has(warnKey)) {
          warned.add(warnKey);
          process.emitWarning(
            `recover(${tool}): a step with side effects did not read call.key, so a retried attempt may be applied twice; ` +
              'send call.key to the service as its idempotency key, or pass idempotent: true when repeating it is harmless',
            { type: 'KeyNotUsedWarning', code: 'AGENT_RECOVERY_KEY_NOT_USED' },
          );
        }
      }
    },
  };
  // The run ends with the step when it succeeds.
  const report = await run[STEP_AND_END](prepareCall(door.prepared, step));
  if (report.outcome === 'ok') return report.value !== undefined ? report.value : report.result;
  if (report.outcome === 'cancelled' && o.signal?.aborted) throw o.signal.reason;
  if (o.errors === 'model') {
    return report.rendered ?? policy.render(report.envelope ?? { code: `runtime.${report.outcome}` }, 'model-tool-result');
  }
  let last = state.decision;
  if (last === undefined && state.last !== undefined) {
    last = JSON.parse(state.last);
    last.policy = stamp(policy);
  }
  const decided = last !== undefined && last.action !== 'retry';
  const decision = decided
    ? last
    : { action: report.outcome, attempt: 0, reason: report.outcome, envelope: report.envelope ?? { code: `runtime.${report.outcome}` } };
  throw new RecoveryError({
    decision,
    attempts: decision.attempt,
    cause,
    result: cause === undefined ? returned : undefined,
    ...(decided ? { observation: JSON.parse(state.observation), elapsedMs: Number(parseLossless(state.context).elapsed_ms ?? 0) } : {}),
  });
}

/** @internal The step of a door's calls, to prepare once: each call brings its args and operation. */
export function doorStep({ o, tool }) {
  const step = { id: o.stepId ?? tool, tool, fallbacks: o.fallbacks, sideEffect: o.sideEffect, operation: eachCall };
  if (o.call !== undefined) step.call = o.call;
  if (o.target !== undefined) step.target = o.target;
  if (o.idempotent !== undefined) step.idempotent = o.idempotent;
  return step;
}

function eachCall() {
  throw new Error('a door passes each call its own operation');
}

/** The policy's identity, for a decision's `policy` field. */
function stamp(policy) {
  const d = policy.describe();
  return { name: d.name, version: d.version, sha256: d.sha256 };
}

/** The call's arguments as JSON (part of the key and of a dead-letter record); what JSON cannot carry is left out. */
function argsOf(args) {
  if (args.length === 0) return [];
  try {
    return JSON.parse(JSON.stringify(args)) ?? null;
  } catch {
    return null;
  }
}
