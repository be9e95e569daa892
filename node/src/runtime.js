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

import { describe, seedText, stringify } from './json.js';
import { LoopComponent } from './loop.js';
import { Policy } from './policy.js';
import { MemoryStore } from './store.js';
import { SystemClock, VirtualClock, integerClock } from './clock.js';
import { Run, WITH_FIRST_STEP, startRun } from './run.js';
import { checkName, configFacts, configText, invalidArg, invalidConfig, RUNTIME_OPTIONS, checkKeys } from './step.js';
import { DeadLetters } from './deadletters.js';
import { recover, withRun } from './durable.js';
import { bindTelemetry } from './telemetry.js';
import { decisionLog, withDecisionLog } from './decisionlog.js';

export { SystemClock, VirtualClock } from './clock.js';
export { Failed, RawOutcome, Response } from './outcome.js';
export { RUNTIME_DEFAULTS } from './step.js';
export { Telemetry } from './telemetry.js';
export { Run };

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

/** @internal `runtime[WITH](parts)`: the same runtime with some of its parts replaced (see below). */
export const WITH = Symbol('Runtime.with');

/**
 * The run configurations (with their seed) the loop has accepted, as their
 * input text: the loop is the shipped reference and deterministic, so a
 * configuration it accepted once it accepts again (a helper that creates a
 * runtime per call checks its configuration once). Bounded.
 */
const accepted = new Set();
const ACCEPTED_LIMIT = 64;

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
  /** @internal Spans and metrics (docs/telemetry.md), or null when off. */ telemetry;
  /** @internal the run configuration's in_flight_ttl_ms (the recovery lease's TTL) */ inFlightTtlMs;
  /** @internal the run configuration's dead_letter.depth_threshold, or null */ depthThreshold;
  /** The decision log (docs/decision-logs.md), or null when off: `failedWrites` counts the lines a file could not take. */ decisionLog;
  #deadLetters;

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
    checkKeys(options, RUNTIME_OPTIONS, 'Runtime.create()');
    let config = configText(options);
    const seed = options.seed === undefined || options.seed === null ? 'null' : seedText(options.seed);
    // A store on Redis brings the server's clock: breakers, leases and TTLs then agree across workers.
    const serverClock = options.clock == null && typeof options.store?.serverClock === 'function' ? options.store.serverClock() : undefined;
    // Its first TIME sample, awaited here: later samples run in the background, never blocking the loop.
    if (typeof serverClock?.ready === 'function') await serverClock.ready();
    let clock = options.clock ?? serverClock ?? new SystemClock();
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
    const telemetry = await bindTelemetry(options.telemetry, decider);
    // The decision log (docs/decision-logs.md): the loop writes the lines, this only appends them.
    const log = decisionLog(options.decisionLog, decider);
    config = withDecisionLog(config, log);
    // A FallbackStore's store_degraded / store_restored events reach onEvent too.
    if (options.onEvent && typeof store.subscribe === 'function') {
      const onEvent = options.onEvent;
      store.subscribe((text) => onEvent(JSON.parse(text), text));
    }
    const loop = await sharedLoop();
    // The configuration is checked by the loop now, not at the first run.
    const check = `{"input":"run","now_ms":0,"run_id":"check","seed":${seed},"config":${config}}`;
    if (!accepted.has(check)) {
      loop.advance('', check);
      if (accepted.size >= ACCEPTED_LIMIT) accepted.delete(accepted.values().next().value);
      accepted.add(check);
    }
    return new Runtime(token, { loop, decider, store, clock, seed, config, onEvent: options.onEvent, telemetry, decisionLog: log, ...configFacts(config) });
  }

  /**
   * @internal The same runtime (loop, configuration, clock, telemetry, ...)
   * with another decider (a door's, for one call), and another store when
   * given (a fresh MemoryStore). Nothing is checked again: pass only a
   * decider with decideJson and no describe() (the telemetry and decision log
   * were bound for one such), and a MemoryStore (no server clock, no events
   * of its own).
   */
  [WITH](decider, store = this.store) {
    return new Runtime(token, { ...this, decider, store });
  }

  /**
   * Start a run. Its retry budget, compensations and cancellation span its
   * steps; breakers, attempt counts and the idempotency cache live in the
   * store and span runs. `signal` (an AbortSignal) cancels the run.
   */
  run(runId, { signal, cancelAtMs, [WITH_FIRST_STEP]: withFirstStep } = {}) {
    if (typeof runId !== 'string' || runId === '') throw invalidArg(`runId must be a non-empty string, got ${describe(runId)}`);
    checkName('run_id', runId);
    return startRun(this, runId, { signal, cancelAtMs, [WITH_FIRST_STEP]: withFirstStep });
  }

  /**
   * Run `fn(run)` in a new run and end the run when `fn` returns (resolving
   * with its value). When `fn` throws, the run is left in the journal for
   * `recover` (docs/durability.md §1).
   */
  withRun(runId, fn, options) {
    return withRun(this, runId, fn, options);
  }

  /**
   * Finish the runs a dead worker left in the journal, and carry out requested
   * replays. `operations`: tool name -> `{operation, compensate?, checkpoint?}`;
   * `olderThanMs` (default the run configuration's `in_flight_ttl_ms`, 300 000):
   * only entries written at least this long ago. One report per run:
   * `{runId, outcome, step, stepOutcome, deadLetterId, events}`.
   */
  recover(operations, options = {}) {
    return recover(this, operations, options);
  }

  /** The dead-letter queue of this runtime's store: list, show, replay, requestReplay, purge, depth. */
  get deadLetters() {
    this.#deadLetters ??= new DeadLetters(this);
    return this.#deadLetters;
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
