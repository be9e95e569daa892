// Scripted scenarios: a run whose operations answer from a script, on a
// virtual clock. The twin of Rust's host/src/runtime/scenario.rs (same format,
// same validation, same output text); the format is specified in
// docs/runtime.md ("Scenarios"). The loop vectors (tests/loops/) run through it.
//
// Each call of a step's operation (or of a fallback target, or of its
// compensation) consumes the next entry of its `outcomes`: "ok", or an
// observation that the component checks (a 200 carrying a refusal is a
// failure, a 304 is not).

import { PolicyError, PolicyRuntimeError } from './errors.js';
import { RAW, elementSpans, parseLossless } from './json.js';
import { Failed, RawOutcome, Runtime, VirtualClock } from './runtime.js';
import { MemoryStore, StoreError } from './store.js';
import { KILL_AFTER_CALLS, RunKilled, STEP_AND_END, startRun } from './run.js';
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

const SCENARIO_MEMBERS = ['run_id', 'seed', 'now_ms', 'config', 'cancel_at_ms', 'kill_after_calls', 'recover', 'steps'];
const STEP_MEMBERS = ['id', 'tool', 'call', 'target', 'args', 'side_effect', 'idempotent', 'checkpoint', 'outcomes', 'fallbacks', 'compensation', 'fanout', 'replay_of'];
const FANOUT_MEMBERS = ['min_results', 'branches'];
const TARGET_MEMBERS = ['target', 'outcomes'];
const OUTCOMES_MEMBERS = ['outcomes'];

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isU64 = (v) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) || (typeof v === 'bigint' && v >= 0n && v < 1n << 64n);

function members(obj, known, where) {
  for (const k of Object.keys(obj)) {
    if (!known.includes(k)) {
      throw invalid(`scenario: unknown field \`${k}\` in ${where}, expected one of ${known.map((x) => `\`${x}\``).join(', ')}; see docs/runtime.md, "Scenarios", for the format`);
    }
  }
}

function need(cond, msg) {
  if (!cond) throw invalid(`scenario: ${msg}; see docs/runtime.md, "Scenarios", for the format`);
}

/** Parse and check a scenario (JSON text or an object); the checks of scenario.rs. */
function parse(scenario) {
  let s;
  if (typeof scenario === 'string') {
    try {
      s = parseLossless(scenario);
    } catch (e) {
      throw invalid(`scenario: ${e.message}; see docs/runtime.md, "Scenarios", for the format`);
    }
  } else {
    s = scenario;
  }
  need(isObj(s), 'a scenario is a JSON object');
  members(s, SCENARIO_MEMBERS, 'the scenario');
  need(typeof s.run_id === 'string', 'missing field `run_id` (a string)');
  need(s.now_ms !== undefined, 'missing field `now_ms`');
  need(isU64(s.now_ms) && typeof s.now_ms === 'number', '`now_ms` must be a non-negative integer (Unix ms)');
  need(s.seed === undefined || s.seed === null || isU64(s.seed), '`seed` must be an unsigned 64-bit integer');
  need(s.cancel_at_ms === undefined || s.cancel_at_ms === null || (isU64(s.cancel_at_ms) && typeof s.cancel_at_ms === 'number'), '`cancel_at_ms` must be a non-negative integer');
  need(
    s.kill_after_calls === undefined || s.kill_after_calls === null || (typeof s.kill_after_calls === 'number' && Number.isSafeInteger(s.kill_after_calls) && s.kill_after_calls >= 1),
    '`kill_after_calls` must be an integer >= 1',
  );
  need(s.recover === undefined || typeof s.recover === 'boolean', '`recover` must be a boolean');
  need(Array.isArray(s.steps), 'missing field `steps` (an array)');
  const steps = s.steps.map((st) => checkStep(st, 'a step'));
  // A recovery runs no steps of its own: `steps` only lists the operations, `run_id` is not used.
  if (s.run_id === '' && s.recover !== true) throw invalid('scenario: `run_id` is empty; name the run');
  if (steps.length === 0 && s.recover !== true) throw invalid('scenario: `steps` is empty; give at least one step');
  const seen = new Set();
  for (const st of steps) {
    if (st.fanout) {
      if (!st.onlyFanout) {
        throw invalid(`scenario step ${JSON.stringify(st.id)}: a fan-out step has only \`id\` and \`fanout\`; put tools and outcomes in its branches`);
      }
      if (st.fanout.branches.some((b) => b.fanout)) {
        throw invalid(`scenario step ${JSON.stringify(st.id)}: a branch is itself a fan-out; fan-outs do not nest`);
      }
    } else if (st.tool === '') {
      throw invalid(`scenario step ${JSON.stringify(st.id)}: \`tool\` is missing or empty; name the tool (or give a \`fanout\`)`);
    }
    for (const x of [st, ...(st.fanout?.branches ?? [])]) {
      if (seen.has(x.id)) throw invalid(`scenario: step id ${JSON.stringify(x.id)} is used twice; step ids are unique in a run`);
      seen.add(x.id);
      checkOutcomes(x);
    }
  }
  return { ...s, steps, configRaw: s[RAW]?.config };
}

function checkStep(st, where) {
  need(isObj(st), `${where} must be an object`);
  members(st, STEP_MEMBERS, where);
  need(typeof st.id === 'string', 'missing field `id` (a string) in a step');
  need(st.tool === undefined || typeof st.tool === 'string', '`tool` must be a string');
  if (st.fanout !== undefined && st.fanout !== null) {
    need(isObj(st.fanout), `step ${JSON.stringify(st.id)}: \`fanout\` must be {"min_results", "branches"}`);
    members(st.fanout, FANOUT_MEMBERS, `the fanout of step ${JSON.stringify(st.id)}`);
    need(Array.isArray(st.fanout.branches), `step ${JSON.stringify(st.id)}: missing field \`branches\` (an array of steps)`);
    need(
      typeof st.fanout.min_results === 'number' && Number.isSafeInteger(st.fanout.min_results) && st.fanout.min_results >= 0 && st.fanout.min_results <= 2 ** 32 - 1,
      `step ${JSON.stringify(st.id)}: \`fanout.min_results\` must be an unsigned integer`,
    );
    const branches = st.fanout.branches.map((b) => checkStep(b, 'a fanout branch'));
    const onlyFanout =
      (st.tool ?? '') === '' &&
      (st.call ?? null) === null &&
      (st.target ?? null) === null &&
      (st.args ?? null) === null &&
      (st.side_effect ?? false) === false &&
      (st.idempotent ?? null) === null &&
      (st.checkpoint ?? null) === null &&
      (st.outcomes ?? []).length === 0 &&
      (st.fallbacks ?? []).length === 0 &&
      (st.compensation ?? null) === null;
    return { id: st.id, onlyFanout, fanout: { min_results: st.fanout.min_results, branches } };
  }
  need(st.replay_of === undefined || st.replay_of === null || isObj(st.replay_of), '`replay_of` must be an object {"key", "n", "id"}');
  for (const f of ['call', 'target']) need(st[f] === undefined || st[f] === null || typeof st[f] === 'string', `\`${f}\` must be a string`);
  for (const f of ['side_effect']) need(st[f] === undefined || typeof st[f] === 'boolean', `\`${f}\` must be a boolean`);
  for (const f of ['idempotent', 'checkpoint']) need(st[f] === undefined || st[f] === null || typeof st[f] === 'boolean', `\`${f}\` must be a boolean`);
  need(st.outcomes === undefined || Array.isArray(st.outcomes), '`outcomes` must be an array');
  need(st.fallbacks === undefined || Array.isArray(st.fallbacks), '`fallbacks` must be an array');
  for (const f of st.fallbacks ?? []) {
    need(isObj(f), 'a fallback is {"target", "outcomes"}');
    members(f, TARGET_MEMBERS, 'a fallback');
    need(typeof f.target === 'string', 'missing field `target` (a string) in a fallback');
    need(f.outcomes === undefined || Array.isArray(f.outcomes), '`outcomes` must be an array');
  }
  if (st.compensation !== undefined && st.compensation !== null) {
    need(isObj(st.compensation), '`compensation` is {"outcomes"}');
    members(st.compensation, OUTCOMES_MEMBERS, 'a compensation');
    need(st.compensation.outcomes === undefined || Array.isArray(st.compensation.outcomes), '`outcomes` must be an array');
  }
  return {
    ...st,
    tool: st.tool ?? '',
    // The raw text of args and outcomes, when the scenario was JSON text, so
    // the component sees the bytes of the file (10.0 stays 10.0), as in Rust.
    argsRaw: st[RAW]?.args,
    outcomes: withRaw(st, st.outcomes ?? []),
    fallbacks: (st.fallbacks ?? []).map((f) => ({ target: f.target, outcomes: withRaw(f, f.outcomes ?? []) })),
    compensation: st.compensation === undefined || st.compensation === null ? undefined : { outcomes: withRaw(st.compensation, st.compensation.outcomes ?? []) },
  };
}

/** Each outcome with its raw text (when the object came from parseLossless). */
function withRaw(obj, outcomes) {
  const text = obj[RAW]?.outcomes;
  let spans = [];
  if (text !== undefined) {
    try {
      spans = elementSpans(text);
    } catch {
      spans = [];
    }
  }
  const out = outcomes.slice();
  out.raw = outcomes.map((_, i) => (spans.length === outcomes.length ? text.slice(spans[i][0], spans[i][1]) : undefined));
  return out;
}

function checkOutcomes(st) {
  if (st.fanout) return;
  for (const o of [...st.outcomes, ...st.fallbacks.flatMap((f) => f.outcomes), ...(st.compensation?.outcomes ?? [])]) {
    if (!(o === 'ok' || isObj(o))) {
      throw invalid(`scenario step ${JSON.stringify(st.id)}: an outcome is ${JSON.stringify(o)}; use "ok" or an observation object`);
    }
  }
}

const COMPENSATION = '\u0000compensation';
const NO_OUTCOME = '{"source":"exception","type":"agent_recovery.simulate.NoOutcomeLeft"}';

/** Outcomes left per (step, target) and per compensated step, and the first call that found none. */
class Script {
  queues = new Map();
  missing;

  set(step, target, outcomes) {
    this.queues.set(
      `${step}\u0001${target}`,
      outcomes.map((value, i) => ({ value, raw: outcomes.raw?.[i] })),
    );
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
    const { value, raw } = queue.shift();
    return value === 'ok' ? null : new RawOutcome(raw ?? value);
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
 * same, docs/runtime.md, "Inputs").
 */
export async function runScenario(scenario, store = undefined, { policy, endWithLastStep = false } = {}) {
  const s = parse(scenario);
  const st = store ?? new MemoryStore();
  try {
    return await drive(s, st, policy, endWithLastStep);
  } catch (e) {
    if (e instanceof ScenarioError) throw e;
    if (e instanceof PolicyError || e instanceof PolicyRuntimeError || e instanceof StoreError) {
      throw new ScenarioError('runtime', e.message, { cause: e });
    }
    throw e;
  }
}

async function drive(s, store, policy, endWithLastStep) {
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
  const run = startRun(runtime, s.run_id, kill === undefined ? {} : { [KILL_AFTER_CALLS]: kill });
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
