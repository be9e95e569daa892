// The recovery runtime: carries out every decision, with the loop written once
// in the component.
//
// The loop (retries, fallbacks past open breakers, restores, compensations,
// dead letters, budgets, the idempotency cache, fan-out) is the reference
// component's `agent:recovery/runtime@0.2.0` export, a sans-I/O state machine.
// This module only does I/O: it calls your operation, sleeps on a clock, asks
// the active policy to decide, reads and writes a store, and reports events.
// It never reads the state, never counts, never judges whether an outcome
// failed. The protocol is specified in docs/runtime.md; the Rust twin is
// host/src/runtime/.
//
//   const runtime = await Runtime.create({ seed: 7 });
//   const run = runtime.run('run-1');
//   const report = await run.step({ id: 'charge', tool: 'payments.charge', operation: async (call) => ... });

import { PolicyError, PolicyRuntimeError, RecoveryError } from './errors.js';
import { RawJson, describe, elementSpans, parseLossless, rawMembers, seedText, stringify } from './json.js';
import { LoopComponent } from './loop.js';
import { failureOf, fromError, fromResponse } from './observe.js';
import { Policy } from './policy.js';
import { MemoryStore, StoreError } from './store.js';

// ------------------------------------------------------------------ clocks

/** The system clock: Date.now and real (cancellable) timers. */
export class SystemClock {
  /** Now, Unix ms. */
  nowMs() {
    return Date.now();
  }

  /** Sleep `ms` milliseconds; resolves early (without error) when `signal` aborts. */
  sleepMs(ms, signal) {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const onAbort = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
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
function integerClock(c) {
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

// ------------------------------------------------------------------ outcomes an operation returns

/** An explicit failure: answered `{"failed": observation}` (an observation object or its JSON text). */
export class Failed {
  constructor(observation) {
    this.observation = observation;
  }
}

/**
 * A raw outcome for the component to judge: answered `{"response": outcome}`
 * (a 200 carrying a refusal fails, a 304 succeeds). An observation-shaped
 * object or its JSON text. Import it under another name if it shadows fetch's
 * `Response` in your module (`import { Response as Judged } from 'agent-recovery'`).
 */
export class Response {
  constructor(outcome) {
    this.outcome = outcome;
  }
}

// ------------------------------------------------------------------ options

/** The defaults of the run configuration (docs/runtime.md); documented here for the README table. */
export const RUNTIME_DEFAULTS = Object.freeze({
  attemptBudget: 5,
  breaker: Object.freeze({ failureThreshold: 3, openMs: 30_000 }),
  idempotencyTtlMs: 86_400_000,
  inFlightTtlMs: 300_000,
  attemptTimeoutMs: null,
  deadlineMs: null,
  policyConfig: null,
});

const RUNTIME_OPTIONS = [
  'policy',
  'store',
  'clock',
  'seed',
  'attemptBudget',
  'breaker',
  'idempotencyTtlMs',
  'inFlightTtlMs',
  'attemptTimeoutMs',
  'deadlineMs',
  'policyConfig',
  'config',
  'onEvent',
];

const STEP_OPTIONS = [
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
];

const invalidConfig = (m) => new PolicyError('invalid_config', m);
const invalidArg = (m) => new PolicyError('invalid_argument', m);

function checkMs(what, v) {
  if (!Number.isSafeInteger(v) || v < 0) {
    throw invalidArg(`${what} must be a non-negative integer of milliseconds, got ${JSON.stringify(v) ?? describe(v)}`);
  }
}

function unknownKeys(obj, known, what) {
  for (const k of Object.keys(obj)) {
    if (!known.includes(k)) {
      return `${what} has unknown option ${JSON.stringify(k)}; the options are ${known.join(', ')}`;
    }
  }
  return undefined;
}

function uint(v, name, max = Number.MAX_SAFE_INTEGER) {
  if (!Number.isSafeInteger(v) || v < 0 || v > max) {
    throw invalidConfig(`${name} must be an integer from 0 to ${max}, got ${JSON.stringify(v) ?? describe(v)}`);
  }
  return v;
}

/** The run configuration JSON text from the typed options (or `config`, which replaces them). */
function configText(o) {
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
    const bad = unknownKeys(b, ['failureThreshold', 'openMs'], 'breaker');
    if (bad) throw invalidConfig(bad);
    c.breaker = {
      failure_threshold: uint(b.failureThreshold ?? RUNTIME_DEFAULTS.breaker.failureThreshold, 'breaker.failureThreshold', 2 ** 32 - 1),
      open_ms: uint(b.openMs ?? RUNTIME_DEFAULTS.breaker.openMs, 'breaker.openMs'),
    };
  }
  if (o.idempotencyTtlMs !== undefined) c.idempotency_ttl_ms = uint(o.idempotencyTtlMs, 'idempotencyTtlMs');
  if (o.inFlightTtlMs !== undefined) c.in_flight_ttl_ms = uint(o.inFlightTtlMs, 'inFlightTtlMs');
  if (o.attemptTimeoutMs !== undefined && o.attemptTimeoutMs !== null) c.attempt_timeout_ms = uint(o.attemptTimeoutMs, 'attemptTimeoutMs');
  if (o.deadlineMs !== undefined && o.deadlineMs !== null) c.deadline_ms = uint(o.deadlineMs, 'deadlineMs');
  if (o.policyConfig !== undefined && o.policyConfig !== null) {
    if (typeof o.policyConfig !== 'object' || Array.isArray(o.policyConfig)) {
      throw invalidConfig(`policyConfig must be an object ({tool, llm, agent, retry_budget_ms}), got ${describe(o.policyConfig)}`);
    }
    c.policy = o.policyConfig;
  }
  return stringify(c);
}

// ------------------------------------------------------------------ the runtime

// The reference policy (when no policy is given) and the loop are loaded once
// per process and shared: both are stateless between calls.
let referencePolicy;
let loopComponent;

function defaultPolicy() {
  referencePolicy ??= Policy.load().catch((e) => {
    referencePolicy = undefined;
    throw e;
  });
  return referencePolicy;
}

function sharedLoop() {
  loopComponent ??= LoopComponent.load().catch((e) => {
    loopComponent = undefined;
    throw e;
  });
  return loopComponent;
}

const token = Symbol('Runtime.create');

/** Runs steps under the recovery loop. Create it once (`await Runtime.create(options)`), share it. */
export class Runtime {
  /** @internal */ loop;
  /** @internal */ decider;
  /** The store (breakers, attempt counts, the idempotency cache, dead letters). */
  store;
  /** The clock it reads and sleeps on. */
  clock;
  /** @internal */ seed;
  /** @internal */ config;
  /** @internal */ onEvent;

  /** Use `await Runtime.create(options)`. */
  constructor(key, fields) {
    if (key !== token) throw new TypeError('use `await Runtime.create(options)` to create a Runtime');
    Object.assign(this, fields);
  }

  /**
   * Load the loop (and the reference policy when no `policy` is given) and
   * check the options. Every option and its default: README, "Runtime".
   */
  static async create(options = {}) {
    if (options === null || typeof options !== 'object') throw invalidConfig(`Runtime options must be an object, got ${describe(options)}`);
    const bad = unknownKeys(options, RUNTIME_OPTIONS, 'Runtime.create()');
    if (bad) throw invalidConfig(bad);
    const config = configText(options);
    const seed = options.seed === undefined || options.seed === null ? 'null' : seedText(options.seed);
    let clock = options.clock ?? new SystemClock();
    if (typeof clock.nowMs !== 'function' || typeof clock.sleepMs !== 'function') {
      throw invalidConfig('clock must have nowMs() and sleepMs(ms, signal): a SystemClock, a VirtualClock or your own');
    }
    if (!(clock instanceof SystemClock || clock instanceof VirtualClock)) clock = integerClock(clock);
    const store = options.store ?? new MemoryStore();
    for (const m of ['get', 'compareAndSet', 'append', 'read', 'delete']) {
      if (typeof store[m] !== 'function') throw invalidConfig(`store has no ${m}(); pass a MemoryStore, a SqliteStore or a store with the same methods`);
    }
    if (options.onEvent !== undefined && typeof options.onEvent !== 'function') {
      throw invalidConfig(`onEvent must be a function (event, text) => void, got ${describe(options.onEvent)}`);
    }
    let decider = options.policy;
    if (decider === undefined || decider === null) decider = await defaultPolicy();
    else if (typeof decider.decideJson !== 'function') {
      throw invalidConfig('policy must be a Policy (await Policy.load(...)), an IsolatedPolicy, or an object with decideJson(observation, context)');
    }
    const loop = await sharedLoop();
    // The configuration is checked by the loop now, not at the first run.
    loop.advance('', `{"input":"run","now_ms":0,"run_id":"check","seed":${seed},"config":${config}}`);
    return new Runtime(token, { loop, decider, store, clock, seed, config, onEvent: options.onEvent });
  }

  /**
   * Start a run. Its retry budget, compensations and cancellation span its
   * steps; breakers, attempt counts and the idempotency cache live in the
   * store and span runs. `signal` (an AbortSignal) cancels the run.
   */
  run(runId, { signal, cancelAtMs } = {}) {
    if (typeof runId !== 'string' || runId === '') throw invalidArg(`runId must be a non-empty string, got ${describe(runId)}`);
    return new Run(token, this, runId, { signal, cancelAtMs });
  }

  /**
   * Was this outcome (an observation-shaped object, or its JSON text) a
   * failure? The failure's envelope, or undefined for a success. The component
   * decides: a 200 carrying a refusal is a failure, a 304 is not.
   */
  checkOutcome(outcome) {
    const text = typeof outcome === 'string' ? outcome : stringify(outcome);
    if (text === undefined) throw invalidArg(`outcome must be an object or JSON text, got ${describe(outcome)}`);
    const env = this.loop.checkOutcome(text);
    return env === undefined ? undefined : JSON.parse(env);
  }

  /** `checkOutcome` on JSON text: the envelope's JSON text as the component printed it, or undefined. */
  checkOutcomeJson(text) {
    if (typeof text !== 'string') throw invalidArg(`checkOutcomeJson takes JSON text, got ${describe(text)}`);
    return this.loop.checkOutcome(text);
  }
}

// ------------------------------------------------------------------ a run

/** A step's options, checked; and its spec for the loop's `step` input. */
function prepareStep(step, what = 'step') {
  if (step === null || typeof step !== 'object') throw invalidArg(`${what} must be an object {id, tool, operation, ...}, got ${describe(step)}`);
  const bad = unknownKeys(step, STEP_OPTIONS, what);
  if (bad) throw invalidArg(bad);
  for (const f of ['id', 'tool']) {
    if (typeof step[f] !== 'string' || step[f] === '') throw invalidArg(`${what}.${f} must be a non-empty string, got ${describe(step[f])}`);
  }
  if (typeof step.operation !== 'function') throw invalidArg(`${what} ${JSON.stringify(step.id)} needs an operation: (call) => value | Promise`);
  for (const f of ['compensate', 'checkpoint']) {
    if (step[f] !== undefined && step[f] !== null && typeof step[f] !== 'function') {
      throw invalidArg(`${what}.${f} must be a function, got ${describe(step[f])}`);
    }
  }
  if (step.fallbacks !== undefined && !(Array.isArray(step.fallbacks) && step.fallbacks.every((t) => typeof t === 'string'))) {
    throw invalidArg(`${what}.fallbacks must be an array of target names, got ${describe(step.fallbacks)}`);
  }
  if (step.args !== undefined) {
    let text;
    try {
      text = stringify(step.args);
    } catch (e) {
      throw invalidArg(`${what}.args cannot be written as JSON (${e.message}); pass plain data`);
    }
    if (text === undefined) throw invalidArg(`${what}.args is ${describe(step.args)}, which has no JSON form; pass plain data`);
  }
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
  return { step, spec };
}

function specText(spec) {
  try {
    return stringify(spec);
  } catch (e) {
    throw invalidArg(`step ${JSON.stringify(spec.id)} cannot be written as JSON (${e.message}); pass plain data as args`);
  }
}

function badEffect(what) {
  return new PolicyRuntimeError(`the recovery loop emitted a malformed effect (${what}); this is a bug, please report it`, {
    code: 'invalid-output',
  });
}

const q = (s) => JSON.stringify(s);

/** Errors that say the recovery machinery failed (not the operation): they pass through a step. */
function passesThrough(e) {
  return e instanceof PolicyError || e instanceof PolicyRuntimeError || e instanceof StoreError || e instanceof RecoveryError;
}

/** The JSON text of an operation's value; a value with no JSON form is recorded as null. */
function valueText(v) {
  if (v === undefined) return 'null';
  try {
    return stringify(v) ?? 'null';
  } catch {
    return 'null';
  }
}

function observationText(obs, what) {
  if (typeof obs === 'string') {
    try {
      JSON.parse(obs);
      return obs;
    } catch {
      // not JSON: reported as an exception below
    }
  } else if (obs !== null && typeof obs === 'object') {
    try {
      const t = stringify(obs);
      if (t !== undefined) return t;
    } catch {
      // cyclic: reported as an exception below
    }
  }
  return stringify({
    source: 'exception',
    type: 'agent_recovery.InvalidObservation',
    message: `the operation returned ${what} that is not JSON: ${String(obs).slice(0, 200)}`,
  });
}

/** True for a fetch Response (duck-typed, as failureOf does). */
function isFetchResponse(v) {
  return (
    v !== null &&
    typeof v === 'object' &&
    typeof v.status === 'number' &&
    typeof v.ok === 'boolean' &&
    typeof v.text === 'function' &&
    typeof v.clone === 'function' &&
    v.headers
  );
}

/**
 * What an operation returned, as the `result` member of the `attempt` input:
 * a plain value is `{"ok": value}`; Failed / Response are explicit; a fetch
 * Response, an MCP `isError` result, an A2A task or a JSON-RPC error are raw
 * outcomes the component judges (`{"response": ..}`).
 */
async function resultOf(value) {
  if (value instanceof Failed) return `{"failed":${observationText(value.observation, 'a Failed observation')}}`;
  if (value instanceof Response) return `{"response":${observationText(value.outcome, 'a Response outcome')}}`;
  if (isFetchResponse(value)) {
    // A non-2xx, or a JSON body (where a refusal would be), is read from a clone
    // for the component to judge; the caller keeps the untouched Response.
    const type = String(value.headers.get?.('content-type') ?? '');
    const readBody = !value.ok || type.includes('json');
    const obs = readBody ? await fromResponse(value.clone()) : { source: 'http', status: value.status };
    return `{"response":${stringify(obs)}}`;
  }
  if (value !== null && typeof value === 'object') {
    const obs = await failureOf(value);
    if (obs !== undefined) return `{"response":${stringify(obs)}}`;
  }
  return `{"ok":${valueText(value)}}`;
}

const NO_REPORT = Object.freeze({});

/** A run of steps under one run id (`runtime.run(runId)`). */
export class Run {
  #rt;
  #holder = { state: '', events: [], branch: false };
  #undo = new Map();
  #cancel = new AbortController();
  #cancelAtMs;
  #finished;
  #busy = null;
  #ids = new Set();
  /** Every event so far, as the component's JSON text (docs/runtime.md, "Events"); a fan-out's in branch order. */
  get events() {
    return this.#holder.events;
  }
  /** The run id. */
  runId;

  constructor(key, rt, runId, { signal, cancelAtMs } = {}) {
    if (key !== token) throw new TypeError('use runtime.run(runId) to start a run');
    this.#rt = rt;
    this.runId = runId;
    if (cancelAtMs !== undefined && cancelAtMs !== null) {
      checkMs('cancelAtMs', cancelAtMs);
      this.#cancelAtMs = cancelAtMs;
    }
    if (signal !== undefined && signal !== null) {
      if (typeof signal.aborted !== 'boolean') throw invalidArg(`signal must be an AbortSignal, got ${describe(signal)}`);
      if (signal.aborted) this.#cancel.abort();
      else signal.addEventListener('abort', () => this.#cancel.abort(), { once: true });
    }
    const input = `{"input":"run","now_ms":${rt.clock.nowMs()},"run_id":${q(runId)},"seed":${rt.seed === 'null' ? 'null' : rt.seed},"config":${rt.config}}`;
    this.#holder.state = rt.loop.advance('', input).state;
  }

  /** The run's state as the loop returned it (JSON text; do not edit it). */
  get state() {
    return this.#holder.state;
  }

  /** The outcome that ended the run, or undefined while it goes on. */
  get finished() {
    return this.#finished;
  }

  /** Cancel when the clock reaches `nowMs` (Unix ms); a sleep crossing it is cut short there. */
  cancelAt(nowMs) {
    checkMs('cancelAt nowMs', nowMs);
    this.#cancelAtMs = nowMs;
  }

  #cancelled() {
    return this.#cancel.signal.aborted || (this.#cancelAtMs !== undefined && this.#rt.clock.nowMs() >= this.#cancelAtMs);
  }

  /**
   * Run a step to its end and report how it ended:
   * `{outcome, runFinished, result, envelope, rendered, token, value}`.
   * Rejects only when the loop, the policy or the store failed, or the options are wrong.
   */
  step(step) {
    const prepared = prepareStep(step);
    return this.#exclusive(async () => {
      if (this.#finished !== undefined) return afterTheEnd(this.#finished);
      this.#claimIds([step.id]);
      const ctx = { step: prepared.step, last: undefined };
      const input = `{"input":"step","now_ms":${this.#rt.clock.nowMs()},"step":${specText(prepared.spec)}}`;
      const report = await this.#drive(this.#holder, input, ctx);
      if (report.outcome === 'ok' && typeof step.compensate === 'function') this.#undo.set(step.id, step.compensate);
      return this.#end(report);
    });
  }

  /**
   * A fan-out: `steps` run concurrently (one after another on a VirtualClock,
   * for determinism), each as its own little run with its own breaker target;
   * it succeeds when at least `minResults` of them do. The report's `result`
   * is an array with each branch's result (null where it did not end ok).
   */
  fanout(id, minResults, steps) {
    if (typeof id !== 'string' || id === '') throw invalidArg(`fanout id must be a non-empty string, got ${describe(id)}`);
    if (!Array.isArray(steps) || steps.length === 0) throw invalidArg('fanout needs a non-empty array of steps');
    if (!Number.isSafeInteger(minResults) || minResults < 1) {
      throw invalidArg(`fanout minResults must be a positive integer, got ${JSON.stringify(minResults) ?? describe(minResults)}`);
    }
    const prepared = steps.map((s, i) => prepareStep(s, `fanout branch ${i}`));
    return this.#exclusive(async () => {
      if (this.#finished !== undefined) return afterTheEnd(this.#finished);
      this.#claimIds([id, ...prepared.map((p) => p.spec.id)]);
      const byId = new Map(prepared.map((p) => [p.spec.id, p.step]));
      const ctx = { step: null, branches: byId, last: undefined };
      const spec = { id, min_results: minResults, branches: prepared.map((p) => p.spec) };
      const input = `{"input":"fanout","now_ms":${this.#rt.clock.nowMs()},"fanout":${specText(spec)}}`;
      return this.#end(await this.#drive(this.#holder, input, ctx));
    });
  }

  /**
   * Cancel the run: no new attempts, the compensations of the completed steps
   * run (in reverse order), the outcome is `cancelled`. During a step, the step
   * in progress ends `cancelled` and its report is returned; between steps,
   * the compensations run now.
   */
  async cancel() {
    this.#cancel.abort();
    if (this.#busy !== null) {
      try {
        return await this.#busy;
      } catch {
        // the step's own caller sees its error
      }
    }
    return this.#exclusive(async () => {
      if (this.#finished !== undefined) return afterTheEnd(this.#finished);
      const ctx = { step: null, last: undefined };
      return this.#end(await this.#drive(this.#holder, this.#cancelInput(), ctx));
    });
  }

  /** Step ids are unique in a run (docs/runtime.md, "Inputs"). */
  #claimIds(ids) {
    const seen = new Set();
    for (const id of ids) {
      if (this.#ids.has(id) || seen.has(id)) {
        throw invalidArg(
          `step id ${JSON.stringify(id)} is used twice in run ${JSON.stringify(this.runId)}; step ids are unique in a run (to resume a step that ended awaiting_input, start a new run with the same run id)`,
        );
      }
      seen.add(id);
    }
    for (const id of ids) this.#ids.add(id);
  }

  #end(report) {
    if (report.runFinished) this.#finished = report.outcome;
    return report;
  }

  async #exclusive(body) {
    if (this.#busy !== null) {
      throw invalidArg('a step of this run is still in progress; the steps of a run go one after another (await each step, or use fanout)');
    }
    const p = body();
    this.#busy = p;
    try {
      return await p;
    } finally {
      this.#busy = null;
    }
  }

  #cancelInput() {
    return `{"input":"cancel","now_ms":${this.#rt.clock.nowMs()}}`;
  }

  /** Feed `input`, carry out the effects, answer the last one, until `finish`. */
  async #drive(holder, input, ctx) {
    for (;;) {
      const adv = this.#rt.loop.advance(holder.state, input);
      holder.state = adv.state;
      const text = adv.effects;
      let effects;
      let spans;
      try {
        effects = JSON.parse(text);
        spans = elementSpans(text);
      } catch {
        throw badEffect('not JSON');
      }
      if (!Array.isArray(effects) || spans.length !== effects.length) throw badEffect('not an array');
      let next;
      for (let i = 0; i < effects.length; i++) {
        const fx = effects[i];
        if (fx === null || typeof fx !== 'object') throw badEffect('not an object');
        fx[RAW_TEXT] = text.slice(spans[i][0], spans[i][1]);
        const answer = await this.#effect(fx, ctx, holder);
        if (answer === NO_REPORT) continue;
        if (typeof answer === 'string') next = answer;
        else return answer;
      }
      if (next === undefined) throw badEffect('a batch without an effect to answer');
      input = next;
    }
  }

  /** Carry out one effect: NO_REPORT, the input that answers it, or the step's report. */
  async #effect(fx, ctx, holder) {
    const rt = this.#rt;
    const raw = fx.effect === 'emit' ? emitted(fx[RAW_TEXT]) : RAW_EFFECTS.has(fx.effect) ? rawMembers(fx[RAW_TEXT]) : {};
    switch (fx.effect) {
      case 'emit': {
        if (raw.event === undefined) throw badEffect('emit without event');
        holder.events.push(raw.event);
        if (rt.onEvent) rt.onEvent(fx.event, raw.event);
        return NO_REPORT;
      }
      case 'read': {
        if (!Array.isArray(fx.keys)) throw badEffect('read without keys');
        const now = rt.clock.nowMs();
        const parts = fx.keys.map((k) => `${q(k)}:${rt.store.get(k, now)?.value ?? 'null'}`);
        return `{"input":"read","now_ms":${now},"values":{${parts.join(',')}}}`;
      }
      case 'write': {
        if (typeof fx.key !== 'string' || raw.value === undefined) throw badEffect('write without key or value');
        put(rt.store, fx.key, raw.value, fx.ttl_ms ?? null, rt.clock.nowMs());
        return NO_REPORT;
      }
      case 'claim': {
        if (typeof fx.key !== 'string' || raw.value === undefined) throw badEffect('claim without key or value');
        const now = rt.clock.nowMs();
        const cas = rt.store.compareAndSet(fx.key, null, raw.value, fx.ttl_ms ?? null, now);
        if (cas.written) return `{"input":"claimed","now_ms":${now},"ok":true}`;
        return `{"input":"claimed","now_ms":${now},"ok":false,"current":${cas.current?.value ?? 'null'}}`;
      }
      case 'delete': {
        if (typeof fx.key !== 'string') throw badEffect('delete without key');
        rt.store.delete(fx.key);
        return NO_REPORT;
      }
      case 'append': {
        if (typeof fx.stream !== 'string' || raw.record === undefined) throw badEffect('append without stream or record');
        rt.store.append(fx.stream, raw.record, rt.clock.nowMs());
        return NO_REPORT;
      }
      case 'decide': {
        if (typeof fx.observation !== 'string' || typeof fx.context !== 'string') throw badEffect('decide without observation or context');
        const decision = await rt.decider.decideJson(fx.observation, fx.context);
        if (typeof decision !== 'string') throw badEffect('the policy returned a decision that is not JSON text');
        return `{"input":"decision","now_ms":${rt.clock.nowMs()},"decision":${decision}}`;
      }
      case 'sleep': {
        const ms = fx.ms ?? 0;
        const cancellable = fx.cancellable ?? true;
        if (cancellable && this.#cancelled()) return this.#cancelInput();
        const at = this.#cancelAtMs;
        if (cancellable && at !== undefined && rt.clock.nowMs() + ms > at) {
          await rt.clock.sleepMs(Math.max(0, at - rt.clock.nowMs()), this.#cancel.signal);
          return this.#cancelInput();
        }
        await rt.clock.sleepMs(ms, cancellable ? this.#cancel.signal : undefined);
        if (cancellable && this.#cancel.signal.aborted) return this.#cancelInput();
        return `{"input":"slept","now_ms":${rt.clock.nowMs()}}`;
      }
      case 'restore': {
        const hook = this.#stepOf(ctx, fx.step)?.checkpoint;
        let ok = false;
        if (typeof hook === 'function') {
          try {
            ok = (await hook()) !== false;
          } catch (e) {
            if (passesThrough(e)) throw e;
            ok = false;
          }
        }
        return `{"input":"restored","now_ms":${rt.clock.nowMs()},"ok":${ok}}`;
      }
      case 'call':
        return this.#callEffect(fx, ctx, holder);
      case 'fork':
        return this.#fork(fx, ctx, holder);
      case 'finish': {
        return {
          outcome: String(fx.outcome ?? ''),
          runFinished: fx.run_finished ?? true,
          result: fx.result === undefined || fx.result === null ? null : resultValue(fx[RAW_TEXT], fx.result),
          envelope: fx.envelope ?? null,
          rendered: fx.rendered ?? null,
          token: fx.token ?? null,
          /** The operation's own JS value for an `ok` from a call in this run (e.g. a fetch Response); undefined when cached. */
          value: fx.outcome === 'ok' ? ctx.last : undefined,
        };
      }
      default:
        throw badEffect(String(fx.effect));
    }
  }

  /** The step (with its hooks) a call or restore is about. */
  #stepOf(ctx, id) {
    if (ctx.step && (id === undefined || ctx.step.id === id)) return ctx.step;
    return ctx.branches?.get(id) ?? ctx.step;
  }

  async #callEffect(fx, ctx, holder) {
    const rt = this.#rt;
    const kind = String(fx.call ?? '');
    const compensation = kind === 'compensation';
    if (!compensation && this.#cancelled()) return this.#cancelInput();
    const timeoutMs = fx.timeout_ms ?? null;
    const attemptCtl = new AbortController();
    const call = {
      kind,
      step: String(fx.step ?? ''),
      target: String(fx.target ?? ''),
      key: String(fx.key ?? ''),
      attempt: fx.attempt ?? 1,
      timeoutMs,
      signal: attemptCtl.signal,
    };
    let fn;
    if (compensation) {
      fn = holder.branch ? undefined : this.#undo.get(call.step);
      if (fn === undefined) {
        return `{"input":"attempt","now_ms":${rt.clock.nowMs()},"result":{"failed":${stringify({
          source: 'exception',
          type: 'agent_recovery.MissingCompensation',
          message: `no compensation registered for step ${call.step}`,
        })}}}`;
      }
    } else {
      fn = this.#stepOf(ctx, call.step)?.operation;
      if (typeof fn !== 'function') throw badEffect(`a call of step ${call.step}, which has no operation here`);
    }
    const started = rt.clock.nowMs();
    const virtual = rt.clock.virtual === true;
    // The operation, settled into {value} or {error}.
    const settled = (async () => fn(call))().then(
      (value) => ({ value }),
      (error) => ({ error }),
    );
    const racers = [settled];
    let timer;
    let onCancel;
    if (timeoutMs !== null && !virtual) {
      racers.push(
        new Promise((resolve) => {
          timer = setTimeout(() => resolve({ timedOut: true }), timeoutMs);
        }),
      );
    }
    if (!compensation) {
      racers.push(
        new Promise((resolve) => {
          if (this.#cancel.signal.aborted) return resolve({ cancelled: true });
          onCancel = () => resolve({ cancelled: true });
          this.#cancel.signal.addEventListener('abort', onCancel, { once: true });
        }),
      );
    }
    const first = await Promise.race(racers);
    clearTimeout(timer);
    if (onCancel) this.#cancel.signal.removeEventListener('abort', onCancel);
    if (first.cancelled) {
      attemptCtl.abort(new DOMException('the run was cancelled', 'AbortError'));
      return this.#cancelInput();
    }
    const took = Math.max(0, rt.clock.nowMs() - started);
    if (first.timedOut || (timeoutMs !== null && took > timeoutMs)) {
      if (first.timedOut) attemptCtl.abort(new DOMException(`the attempt timed out after ${timeoutMs} ms`, 'TimeoutError'));
      return `{"input":"attempt","now_ms":${rt.clock.nowMs()},"result":{"failed":{"source":"timeout","phase":"total","after_ms":${took}}}}`;
    }
    let result;
    if ('error' in first) {
      if (passesThrough(first.error)) throw first.error;
      const obs = fromError(first.error, { call: undefined, timeoutMs: timeoutMs ?? undefined });
      result = `{"failed":${stringify(obs)}}`;
    } else {
      result = await resultOf(first.value);
      if (!compensation) ctx.last = first.value;
    }
    return `{"input":"attempt","now_ms":${rt.clock.nowMs()},"result":${result}}`;
  }

  /**
   * The `fork` effect: drive every branch as its own little run (concurrently,
   * or one after another from the fork's time on a VirtualClock), then answer
   * `joined` with each branch's final state, in branch order.
   */
  async #fork(fx, ctx, holder) {
    const rt = this.#rt;
    if (!Array.isArray(fx.branches)) throw badEffect('fork without branches');
    if (holder.branch || ctx.branches === undefined) throw badEffect('fork outside a fan-out');
    if (fx.branches.length !== ctx.branches.size) throw badEffect('fork with a different number of branches');
    const forkAt = rt.clock.nowMs();
    const rawBranches = elementSpans(rawMembers(fx[RAW_TEXT]).branches ?? '[]');
    const branchesText = rawMembers(fx[RAW_TEXT]).branches ?? '[]';
    const branchRaw = fx.branches.map((b, i) => {
      const span = rawBranches[i];
      const r = span ? rawMembers(branchesText.slice(span[0], span[1])) : {};
      if (typeof b?.state !== 'string' || r.step === undefined) throw badEffect('a fork branch without state or step');
      return { state: b.state, stepText: r.step, id: b.step?.id };
    });
    // Each branch is a lane of its own: its state, its events (appended to the
    // run's in branch order once all are done, as Rust does), no compensations
    // of its own (the run compensates after the join).
    const runBranch = async (b, now) => {
      const lane = { state: b.state, events: [], branch: true };
      const step = ctx.branches?.get(b.id);
      const bctx = { step: step ?? null, branches: ctx.branches, last: undefined };
      const report = await this.#drive(lane, `{"input":"step","now_ms":${now},"step":${b.stepText}}`, bctx);
      return { lane, report, step };
    };
    let ends;
    if (rt.clock.virtual === true && typeof rt.clock.set === 'function') {
      ends = [];
      let latest = forkAt;
      for (const b of branchRaw) {
        rt.clock.set(forkAt);
        ends.push(await runBranch(b, forkAt));
        latest = Math.max(latest, rt.clock.nowMs());
      }
      rt.clock.set(latest);
    } else {
      ends = await Promise.all(branchRaw.map((b) => runBranch(b, rt.clock.nowMs())));
    }
    const states = [];
    for (const { lane, report, step } of ends) {
      holder.events.push(...lane.events);
      if (report.outcome === 'ok' && typeof step?.compensate === 'function') this.#undo.set(step.id, step.compensate);
      states.push(lane.state);
    }
    return `{"input":"joined","now_ms":${rt.clock.nowMs()},"states":[${states.map(q).join(',')}]}`;
  }
}

// ------------------------------------------------------------------ raw JSON text

/** Where each effect's own text is kept (the component's bytes, passed on unchanged). */
const RAW_TEXT = Symbol('raw effect text');
/** Effects with a member whose bytes are passed on unchanged (event, value, record, branches). */
const RAW_EFFECTS = new Set(['emit', 'write', 'claim', 'append', 'fork']);

const EMIT_HEAD = '{"effect":"emit","event":';

/** The members of an `emit` effect: its event's bytes (serde writes `effect` first, then `event`). */
function emitted(t) {
  if (t.startsWith(EMIT_HEAD) && t.endsWith('}')) return { event: t.slice(EMIT_HEAD.length, -1) };
  return rawMembers(t);
}

/** A finish's result; integers beyond 2^53 are kept exact (as BigInt). */
function resultValue(text, parsed) {
  const raw = rawMembers(text).result;
  return raw !== undefined && /\d{16}/.test(raw) ? parseLossless(raw) : parsed;
}

function afterTheEnd(outcome) {
  return { outcome, runFinished: true, result: null, envelope: null, rendered: null, token: null, value: undefined };
}

/** Last-writer-wins put on top of compare-and-set. */
function put(store, key, value, ttlMs, now) {
  for (let i = 0; i < 16; i++) {
    const current = store.get(key, now);
    const cas = store.compareAndSet(key, current ? current.version : null, value, ttlMs, now);
    if (cas.written) return;
  }
  throw new StoreError(
    'unavailable',
    `could not write ${key}: 16 compare-and-set conflicts in a row; the store is contended, retry the run`,
  );
}
