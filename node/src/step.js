// The options of a Runtime (the run configuration) and of a step, checked
// before the loop sees them; the twin of RuntimeBuilder (host/src/runtime/mod.rs)
// and Step (host/src/runtime/step.rs), with the same names in camelCase.

import { PolicyError } from './errors.js';
import { RawJson, describe, exactStringify, stringify } from './json.js';

/** The defaults of the run configuration (docs/runtime.md); documented here for the README table. */
export const RUNTIME_DEFAULTS = Object.freeze({
  attemptBudget: 5,
  // The loop's last resort: the `breaker` option wins, then each decision's
  // `breaker` (the active policy's thresholds), then these.
  breaker: Object.freeze({ failureThreshold: 3, openMs: 30_000 }),
  idempotencyTtlMs: 86_400_000,
  inFlightTtlMs: 300_000,
  attemptTimeoutMs: null,
  deadlineMs: null,
  policyConfig: null,
  journal: true,
  deadLetter: Object.freeze({ owner: null, runbook: null, depthThreshold: null }),
});

export const RUNTIME_OPTIONS = [
  'policy',
  'store',
  'clock',
  'seed',
  'attemptBudget',
  'breaker',
  'idempotencyTtlMs',
  'inFlightTtlMs',
  'inFlightWaitMs',
  'attemptTimeoutMs',
  'deadlineMs',
  'policyConfig',
  'journal',
  'deadLetter',
  'retryQuota',
  'config',
  'onEvent',
  'telemetry',
  'decisionLog',
];

export const STEP_OPTIONS = [
  'id',
  'tool',
  'call',
  'args',
  'target',
  'fallbacks',
  'sideEffect',
  'idempotent',
  'operation',
  'compensate',
  'checkpoint',
  'replayOf',
];

export const invalidConfig = (m) => new PolicyError('invalid_config', m);
export const invalidArg = (m) => new PolicyError('invalid_argument', m);

export function checkMs(what, v) {
  if (!Number.isSafeInteger(v) || v < 0) {
    throw invalidArg(`${what} must be a non-negative integer of milliseconds, got ${JSON.stringify(v) ?? describe(v)}`);
  }
}

/** Refuse an object with a member not in `known` (an `error(message)`, by default invalid_config). */
export function checkKeys(obj, known, what, error = invalidConfig) {
  for (const k of Object.keys(obj)) {
    if (!known.includes(k)) throw error(`${what} has unknown option ${JSON.stringify(k)}; the options are ${known.join(', ')}`);
  }
}

function uint(v, name, max = Number.MAX_SAFE_INTEGER) {
  if (!Number.isSafeInteger(v) || v < 0 || v > max) {
    throw invalidConfig(`${name} must be an integer from 0 to ${max}, got ${JSON.stringify(v) ?? describe(v)}`);
  }
  return v;
}

/** The run configuration JSON text from the typed options (or `config`, which replaces them). */
export function configText(o) {
  if (o.config !== undefined) {
    if (o.config === null || typeof o.config !== 'object' || Array.isArray(o.config)) {
      throw invalidConfig(`config must be the run configuration object (docs/runtime.md), got ${describe(o.config)}`);
    }
    return stringify(o.config);
  }
  const c = {};
  if (o.attemptBudget !== undefined) c.attempt_budget = uint(o.attemptBudget, 'attemptBudget', 2 ** 32 - 1);
  if (o.breaker !== undefined) {
    const b = o.breaker;
    if (b === null || typeof b !== 'object') throw invalidConfig(`breaker must be {failureThreshold, openMs}, got ${describe(b)}`);
    checkKeys(b, ['failureThreshold', 'openMs'], 'breaker');
    // Only the members given: each one given wins over the active policy's
    // threshold, the others stay the policy's (docs/runtime.md, "Circuit breaker").
    c.breaker = {};
    if (b.failureThreshold !== undefined) c.breaker.failure_threshold = uint(b.failureThreshold, 'breaker.failureThreshold', 2 ** 32 - 1);
    if (b.openMs !== undefined) c.breaker.open_ms = uint(b.openMs, 'breaker.openMs');
  }
  if (o.idempotencyTtlMs !== undefined) c.idempotency_ttl_ms = uint(o.idempotencyTtlMs, 'idempotencyTtlMs');
  if (o.inFlightTtlMs !== undefined) c.in_flight_ttl_ms = uint(o.inFlightTtlMs, 'inFlightTtlMs');
  if (o.inFlightWaitMs !== undefined) c.in_flight_wait_ms = uint(o.inFlightWaitMs, 'inFlightWaitMs');
  if (o.attemptTimeoutMs !== undefined && o.attemptTimeoutMs !== null) c.attempt_timeout_ms = uint(o.attemptTimeoutMs, 'attemptTimeoutMs');
  if (o.deadlineMs !== undefined && o.deadlineMs !== null) c.deadline_ms = uint(o.deadlineMs, 'deadlineMs');
  if (o.policyConfig !== undefined && o.policyConfig !== null) {
    if (typeof o.policyConfig !== 'object' || Array.isArray(o.policyConfig)) {
      throw invalidConfig(`policyConfig must be an object ({tool, llm, agent, retry_budget_ms}), got ${describe(o.policyConfig)}`);
    }
    c.policy = o.policyConfig;
  }
  if (o.journal !== undefined) {
    if (typeof o.journal !== 'boolean') throw invalidConfig(`journal must be true or false, got ${describe(o.journal)}`);
    c.journal = o.journal;
  }
  if (o.deadLetter !== undefined && o.deadLetter !== null) {
    const d = o.deadLetter;
    if (typeof d !== 'object' || Array.isArray(d)) throw invalidConfig(`deadLetter must be {owner, runbook, depthThreshold}, got ${describe(d)}`);
    checkKeys(d, ['owner', 'runbook', 'depthThreshold'], 'deadLetter');
    c.dead_letter = {};
    for (const f of ['owner', 'runbook']) {
      if (d[f] === undefined || d[f] === null) continue;
      if (typeof d[f] !== 'string') throw invalidConfig(`deadLetter.${f} must be a string, got ${describe(d[f])}`);
      c.dead_letter[f] = d[f];
    }
    if (d.depthThreshold !== undefined && d.depthThreshold !== null) c.dead_letter.depth_threshold = uint(d.depthThreshold, 'deadLetter.depthThreshold');
  }
  if (o.retryQuota !== undefined && o.retryQuota !== null) {
    const r = o.retryQuota;
    if (typeof r !== 'object' || Array.isArray(r)) {
      throw invalidConfig(`retryQuota must be {name, capacity, retryCost, timeoutCost, successRefund} (each optional), got ${describe(r)}`);
    }
    const names = { name: 'name', capacity: 'capacity', retryCost: 'retry_cost', timeoutCost: 'timeout_cost', successRefund: 'success_refund' };
    checkKeys(r, Object.keys(names), 'retryQuota');
    // Only the members given; the loop applies the defaults and the checks.
    c.retry_quota = {};
    for (const [k, wire] of Object.entries(names)) {
      if (r[k] === undefined || r[k] === null) continue;
      if (k === 'name') {
        if (typeof r.name !== 'string') throw invalidConfig(`retryQuota.name must be a string, got ${describe(r.name)}`);
        c.retry_quota.name = r.name;
      } else {
        c.retry_quota[wire] = uint(r[k], `retryQuota.${k}`);
      }
    }
  }
  return stringify(c);
}

/** What the runtime itself needs from the run configuration text: the lease TTL and the depth threshold. */
export function configFacts(text) {
  const c = JSON.parse(text);
  const ttl = c.in_flight_ttl_ms;
  const threshold = c.dead_letter?.depth_threshold;
  return {
    inFlightTtlMs: Number.isSafeInteger(ttl) && ttl > 0 ? ttl : RUNTIME_DEFAULTS.inFlightTtlMs,
    depthThreshold: Number.isSafeInteger(threshold) ? threshold : null,
  };
}

/**
 * The longest name the recovery loop takes, in UTF-8 bytes: a run id, a step
 * or fan-out id, a tool, a target or fallback. The loop component's own limit
 * (docs/runtime.md, "Limits"); a test checks that the component agrees.
 */
export const MAX_ID_BYTES = 512;

/** Refuse a name over MAX_ID_BYTES before the component sees it (a `too_large` PolicyError). */
export function checkName(what, name) {
  if (typeof name !== 'string' || name.length <= MAX_ID_BYTES / 3) return;
  const size = Buffer.byteLength(name, 'utf8');
  if (size > MAX_ID_BYTES) {
    throw new PolicyError(
      'too_large',
      `\`${what}\` is ${size} bytes, over the ${MAX_ID_BYTES}-byte limit of a name; use a shorter name (a hash of a long one) and put data in \`args\``,
    );
  }
}

export function prepareStep(step, what = 'step') {
  if (step === null || typeof step !== 'object') throw invalidArg(`${what} must be an object {id, tool, operation, ...}, got ${describe(step)}`);
  checkKeys(step, STEP_OPTIONS, what, invalidArg);
  for (const f of ['id', 'tool']) {
    if (typeof step[f] !== 'string' || step[f] === '') throw invalidArg(`${what}.${f} must be a non-empty string, got ${describe(step[f])}`);
  }
  checkName(`${what}.id`, step.id);
  checkName(`${what}.tool`, step.tool);
  checkName(`${what}.target`, step.target);
  for (const f of Array.isArray(step.fallbacks) ? step.fallbacks : []) checkName(`${what}.fallbacks[]`, f);
  if (typeof step.operation !== 'function') throw invalidArg(`${what} ${JSON.stringify(step.id)} needs an operation: (call) => value | Promise`);
  for (const f of ['compensate', 'checkpoint']) {
    if (step[f] !== undefined && step[f] !== null && typeof step[f] !== 'function') {
      throw invalidArg(`${what}.${f} must be a function, got ${describe(step[f])}`);
    }
  }
  if (step.fallbacks !== undefined && !(Array.isArray(step.fallbacks) && step.fallbacks.every((t) => typeof t === 'string'))) {
    throw invalidArg(`${what}.fallbacks must be an array of target names, got ${describe(step.fallbacks)}`);
  }
  const replayOf = step.replayOf;
  if (replayOf !== undefined && replayOf !== null) {
    if (typeof replayOf !== 'object' || typeof replayOf.key !== 'string' || !Number.isSafeInteger(replayOf.n) || replayOf.n < 1 || typeof replayOf.id !== 'string') {
      throw invalidArg(`${what}.replayOf must be {key, n, id} (the original key, the replay number from 1, the record id), got ${describe(replayOf)}`);
    }
  }
  const argsText = argsTextOf(step, what);
  const spec = {
    id: step.id,
    tool: step.tool,
    call: step.call ?? null,
    args: step.args === undefined ? null : step.args,
    target: step.target ?? null,
    fallbacks: step.fallbacks ?? [],
    side_effect: step.sideEffect ?? false,
    compensation: typeof step.compensate === 'function',
    checkpoint: typeof step.checkpoint === 'function',
    idempotent: step.idempotent ?? null,
  };
  // Only when given: a loop without durability refuses the member.
  if (replayOf !== undefined && replayOf !== null) spec.replay_of = { key: replayOf.key, n: replayOf.n, id: replayOf.id };
  const around = plainSpecText(spec);
  return around === undefined ? { step, spec } : { step, spec, text: around[0] + argsText + around[1], around };
}

/**
 * Another call of a prepared step (the same members; only `step.args` and
 * the hooks differ): a door prepares its step once, and each call only
 * writes its args.
 */
export function prepareCall(prepared, step, what = 'step') {
  if (prepared.around === undefined) return prepareStep(step, what);
  return { step, text: prepared.around[0] + argsTextOf(step, what) + prepared.around[1] };
}

/** The step's args as JSON text (`null` when absent). */
function argsTextOf(step, what) {
  if (step.args === undefined) return 'null';
  let text;
  try {
    text = exactStringify(step.args, `${what}.args`);
  } catch (e) {
    throw invalidArg(`${what} ${JSON.stringify(step.id)} cannot be sent to the loop: ${e.message}`);
  }
  if (text === undefined) throw invalidArg(`${what}.args is ${describe(step.args)}, which has no JSON form; pass plain data`);
  return text;
}

const isBool = (v) => v === true || v === false;
const isText = (v) => typeof v === 'string';

/**
 * `specText(spec)` written directly, when every member but the args has its
 * plain type (the same bytes): the text before the args' and after it;
 * undefined otherwise.
 */
function plainSpecText(spec) {
  const { call, target, side_effect: sideEffect, idempotent } = spec;
  if (
    !(call === null || isText(call)) ||
    !(target === null || isText(target)) ||
    !isBool(sideEffect) ||
    !(idempotent === null || isBool(idempotent)) ||
    spec.replay_of !== undefined
  ) {
    return undefined;
  }
  const q = JSON.stringify;
  return [
    `{"id":${q(spec.id)},"tool":${q(spec.tool)},"call":${q(call)},"args":`,
    `,"target":${q(target)},"fallbacks":${q(spec.fallbacks)},"side_effect":${sideEffect},"compensation":${spec.compensation},` +
      `"checkpoint":${spec.checkpoint},"idempotent":${idempotent}}`,
  ];
}

/**
 * A step (run.step's options) from a step as the loop reads it, in snake_case
 * (a scenario's step, a dead-letter record's `input`): `argsText`, the args'
 * JSON text when known, is passed on byte for byte; `hooks` adds the
 * operation, the fallbacks and the rest.
 */
export function inputStep(input, argsText, hooks) {
  const step = { id: input.id, tool: input.tool, args: argsText !== undefined ? new RawJson(argsText) : (input.args ?? null), sideEffect: input.side_effect ?? false, ...hooks };
  if (typeof input.call === 'string') step.call = input.call;
  if (typeof input.target === 'string') step.target = input.target;
  if (typeof input.idempotent === 'boolean') step.idempotent = input.idempotent;
  return step;
}

/** A prepared step's spec as the loop's JSON text. */
export function preparedText(prepared) {
  return prepared.text ?? specText(prepared.spec);
}

export function specText(spec) {
  try {
    return stringify(spec);
  } catch (e) {
    throw invalidArg(`step ${JSON.stringify(spec.id)} cannot be written as JSON (${e.message}); pass plain data as args`);
  }
}

