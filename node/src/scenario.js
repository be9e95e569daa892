// Scripted scenarios: a run whose operations answer from a script, on a
// virtual clock. The twin of Rust's host/src/runtime/scenario.rs (same output
// text); the format is specified in docs/runtime.md ("Scenarios"), and the
// component parses and checks a scenario (`scenario@0.3.0`): this file runs
// its plan. The loop vectors (tests/loops/) run through it.
//
// Each call of a step's operation (or of a fallback target, or of its
// compensation) consumes the next entry of its `outcomes`: "ok", or an
// observation that the component checks (a 200 carrying a refusal is a
// failure, a 304 is not).

import { PolicyError, PolicyRuntimeError } from './errors.js';
import { elementSpans, parseLossless, stringify } from './json.js';
import { LoopComponent } from './loop.js';
import { Failed, RawOutcome, Runtime, VirtualClock } from './runtime.js';
import { MemoryStore, StoreError } from './store.js';
import { KILL_AFTER_CALLS, RunKilled, STEP_AND_END, WITH_FIRST_STEP, startRun } from './run.js';
import { inputStep, prepareStep } from './step.js';
import { streamLast } from './deadletters.js';
import { DEAD_LETTER_STREAM } from './keys.js';

// The dead-letter stream (docs/runtime.md, "Store keys").
export { DEAD_LETTER_STREAM };

/** The kinds of ScenarioError, as Rust's ScenarioError variants (lowercase). */
export const SCENARIO_ERROR_KINDS = Object.freeze(['invalid', 'runtime']);

/**
 * A scenario could not run. `kind`: `invalid` (bad JSON, a missing or unknown
 * member, an outcome missing for a call: the message names it and ends with a
 * hint) or `runtime` (the runtime failed: `cause` is the PolicyError,
 * PolicyRuntimeError or StoreError).
 */
export class ScenarioError extends Error {
  constructor(kind, message, options) {
    super(message, options);
    this.name = 'ScenarioError';
    this.kind = kind;
  }
}

const invalid = (m) => new ScenarioError('invalid', m);

/** The loop instance that parses scenarios (one per process, made on first use). */
let parser;

/**
 * The scenario's plan (JSON text or an object): the component parses and
 * checks it (`scenario@0.3.0`), and the plan is put in the shape `drive` runs.
 */
async function parse(scenario) {
  let text;
  if (typeof scenario === 'string') {
    text = scenario;
  } else {
    try {
      text = stringify(scenario) ?? 'null';
    } catch (e) {
      throw invalid(`scenario: ${e.message}; see docs/runtime.md, "Scenarios", for the format`);
    }
  }
  parser ??= await LoopComponent.load();
  const { plan, message } = parser.parseScenario(text);
  if (message !== undefined) throw invalid(message);
  const opt = (v) => (v === undefined || v === null ? undefined : v);
  const num = (v) => (v === undefined || v === null ? undefined : Number(v));
  return {
    run_id: plan.runId,
    seed: opt(plan.seed),
    now_ms: Number(plan.nowMs),
    config: parseLossless(plan.config),
    cancel_at_ms: num(plan.cancelAtMs),
    kill_after_calls: num(plan.killAfterCalls),
    recover: plan.recover,
    steps: plan.steps.map((s) => (s.tag === 'fanout' ? { id: s.val.id, fanout: { min_results: s.val.minResults, branches: s.val.branches.map(planStep) } } : planStep(s.val))),
  };
}

/** A plan step in the shape `inputStep` and the Script read. */
function planStep(p) {
  const outcomes = (list) => list.map((o) => (o.tag === 'ok' ? 'ok' : new RawOutcome(o.val)));
  const st = {
    id: p.id,
    tool: p.tool,
    argsRaw: p.args ?? undefined,
    side_effect: p.sideEffect,
    outcomes: outcomes(p.outcomes),
    fallbacks: p.fallbacks.map((f) => ({ target: f.target, outcomes: outcomes(f.outcomes) })),
    compensation: p.compensation === undefined || p.compensation === null ? undefined : { outcomes: outcomes(p.compensation) },
  };
  if (p.call !== undefined && p.call !== null) st.call = p.call;
  if (p.target !== undefined && p.target !== null) st.target = p.target;
  if (p.idempotent !== undefined && p.idempotent !== null) st.idempotent = p.idempotent;
  if (p.checkpoint !== undefined && p.checkpoint !== null) st.checkpoint = p.checkpoint;
  if (p.replayOf !== undefined && p.replayOf !== null) st.replay_of = parseLossless(p.replayOf);
  return st;
}

const COMPENSATION = '\u0000compensation';
const NO_OUTCOME = '{"source":"exception","type":"agent_recovery.simulate.NoOutcomeLeft"}';

/** Outcomes left per (step, target) and per compensated step, and the first call that found none. */
class Script {
  queues = new Map();
  missing;

  set(step, target, outcomes) {
    this.queues.set(`${step}\u0001${target}`, outcomes.slice());
  }

  /** The queues of a scenario step's target, fallbacks and compensation, under `name`. */
  load(name, step) {
    this.set(name, step.target ?? step.tool, step.outcomes);
    for (const fb of step.fallbacks) this.set(name, fb.target, fb.outcomes);
    if (step.compensation) this.set(name, COMPENSATION, step.compensation.outcomes);
  }

  /** The operation, compensation and checkpoint hooks of a scenario step: each call takes the next outcome under `name`. */
  hooks(name, step) {
    const hooks = { operation: (call) => this.next(name, call.target, call.kind === 'fallback' ? 'fallback target' : 'target') };
    if (step.compensation) hooks.compensate = () => this.next(name, COMPENSATION, 'the compensation of');
    if (step.checkpoint !== undefined && step.checkpoint !== null) hooks.checkpoint = () => step.checkpoint;
    return hooks;
  }

  /** Forget every queue of `step` (a later scenario step of the same tool replaces it). */
  clear(step) {
    for (const k of [...this.queues.keys()]) if (k.startsWith(`${step}\u0001`)) this.queues.delete(k);
  }

  next(step, target, what) {
    const queue = this.queues.get(`${step}\u0001${target}`) ?? [];
    if (queue.length === 0) {
      this.missing ??= `scenario step ${JSON.stringify(step)}: a call of ${what} ${JSON.stringify(target)} found no outcome left; add one to its \`outcomes\``;
      return new Failed(NO_OUTCOME);
    }
    const value = queue.shift();
    return value === 'ok' ? null : value;
  }
}

/** `{"outcome":..,"events":[..],"dead_letters":[..]}`: the component's bytes, as Rust's ScenarioOutput::to_json. */
export function outputJson({ outcome, events, deadLetters }) {
  return `{"outcome":${JSON.stringify(outcome)},"events":[${events.join(',')}],"dead_letters":[${deadLetters.join(',')}]}`;
}

/**
 * Run `scenario` (JSON text or an object) against `store` (default: a fresh
 * MemoryStore), deciding with `policy` (default: the reference). Returns
 * `{outcome, events, deadLetters, json}` where `json` is the exact text Rust's
 * `ScenarioOutput::to_json` prints. Throws a ScenarioError.
 * `endWithLastStep`: send the last step (not a fan-out) with `"end": true`, the
 * way a door runs its one step, instead of a separate `end` (the output is the
 * same, docs/runtime.md, "Inputs"). `withFirstStep`: send the first step in
 * the `run` input, the way a door starts its run (the output is the same).
 */
export async function runScenario(scenario, store = undefined, { policy, endWithLastStep = false, withFirstStep = false } = {}) {
  const s = await parse(scenario);
  const st = store ?? new MemoryStore();
  try {
    return await drive(s, st, policy, endWithLastStep, withFirstStep);
  } catch (e) {
    if (e instanceof ScenarioError) throw e;
    if (e instanceof PolicyError || e instanceof PolicyRuntimeError || e instanceof StoreError) {
      throw new ScenarioError('runtime', e.message, { cause: e });
    }
    throw e;
  }
}

async function drive(s, store, policy, endWithLastStep, withFirstStep) {
  const clock = new VirtualClock(s.now_ms);
  const options = { store, clock, config: s.config ?? {} };
  if (s.seed !== undefined && s.seed !== null) options.seed = s.seed;
  if (policy !== undefined) options.policy = policy;
  const runtime = await Runtime.create(options);
  const deadBefore = streamLast(store);
  if (s.recover === true) return driveRecover(s, store, runtime, deadBefore);

  const script = new Script();
  for (const step of s.steps.flatMap((st) => (st.fanout ? st.fanout.branches : [st]))) script.load(step.id, step);

  const kill = s.kill_after_calls ?? undefined;
  const run = startRun(runtime, s.run_id, { [KILL_AFTER_CALLS]: kill, [WITH_FIRST_STEP]: withFirstStep });
  if (s.cancel_at_ms !== undefined && s.cancel_at_ms !== null) run.cancelAt(s.now_ms + s.cancel_at_ms);
  let outcome = 'completed';
  try {
    for (const [i, step] of s.steps.entries()) {
      const fused = endWithLastStep && i === s.steps.length - 1;
      const report = step.fanout
        ? await run.fanout(step.id, step.fanout.min_results, step.fanout.branches.map((b) => scriptedStep(b, script)))
        : fused
          ? await run[STEP_AND_END](prepareStep(scriptedStep(step, script)))
          : await run.step(scriptedStep(step, script));
      checkScript(script);
      if (report.outcome !== 'ok') {
        outcome = report.outcome;
        break;
      }
    }
    // A completed run is ended, so it leaves no journal entry (docs/runtime.md, "Scenarios");
    // a step sent with `end` ended it already.
    if (outcome === 'completed' && run.finished === undefined) await run.end();
  } catch (e) {
    if (!(e instanceof RunKilled)) throw e;
    checkScript(script);
    outcome = 'killed';
  }
  const deadLetters = store.read(DEAD_LETTER_STREAM, deadBefore, Number.MAX_SAFE_INTEGER).map(([, r]) => r);
  const out = { outcome, events: run.events, deadLetters };
  return { ...out, json: outputJson(out) };
}

function checkScript(script) {
  if (script.missing !== undefined) {
    const m = script.missing;
    script.missing = undefined;
    throw invalid(m);
  }
}

/**
 * `"recover": true`: what `runtime.recover(operations, {olderThanMs: 0})`
 * does on this store; `steps` are the operations, found by the `call`
 * effect's tool.
 */
async function driveRecover(s, store, runtime, deadBefore) {
  const script = new Script();
  const operations = {};
  // Every step and fan-out branch, in order; a later step of a tool replaces an earlier one (as in Rust).
  for (const step of s.steps.flatMap((st) => (st.fanout ? st.fanout.branches : [st]))) {
    if (step.tool === '') continue;
    script.clear(step.tool);
    script.load(step.tool, step);
    operations[step.tool] = script.hooks(step.tool, step);
  }
  const reports = await runtime.recover(operations, { olderThanMs: 0 });
  checkScript(script);
  const events = reports.flatMap((r) => r.events);
  const deadLetters = store.read(DEAD_LETTER_STREAM, deadBefore, Number.MAX_SAFE_INTEGER).map(([, r]) => r);
  const out = { outcome: reports.length === 0 ? 'none' : reports[reports.length - 1].outcome, events, deadLetters };
  return { ...out, json: outputJson(out) };
}

function scriptedStep(step, script) {
  const s = inputStep(step, step.argsRaw, { fallbacks: step.fallbacks.map((f) => f.target), ...script.hooks(step.id, step) });
  if (step.replay_of !== undefined && step.replay_of !== null) s.replayOf = step.replay_of;
  return s;
}

/**
 * The batch driver of the cross-runtime conformance check: each line of
 * `lines` is a JSON array of scenarios, run in order against ONE fresh
 * MemoryStore; yields one output line per scenario (`{"error":"<kind>"}` for a
 * ScenarioError).
 */
export async function* runBatch(lines, { policy } = {}) {
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const store = new MemoryStore();
    let scenarios;
    try {
      scenarios = parseLossless(line);
    } catch {
      yield '{"error":"invalid"}';
      continue;
    }
    if (!Array.isArray(scenarios)) {
      yield '{"error":"invalid"}';
      continue;
    }
    // The raw text of each scenario (so u64 seeds keep their digits).
    const raws = elementSpans(line).map(([from, to]) => line.slice(from, to));
    for (let i = 0; i < scenarios.length; i++) {
      try {
        yield (await runScenario(raws[i] ?? scenarios[i], store, { policy })).json;
      } catch (e) {
        if (e instanceof ScenarioError) yield `{"error":${JSON.stringify(e.kind)}}`;
        else throw e;
      }
    }
  }
}
