// Durability (docs/durability.md): `runtime.recover(operations, options)`
// finishes the runs a dead worker left in the journal, and carries out the
// replays operators requested; `runtime.withRun(runId, fn)` ends a run when
// its callback returns. The twin of Rust's `Runtime::recover` and Python's
// `runtime.recover`.
//
// The loop writes `agent-recovery/journal/<run_id>` before every side effect
// and deletes it when the run ends. An entry that is still there, older than
// `olderThanMs`, belongs to a worker that died (or never ended its run):
// `recover` takes the run's lease, feeds the journaled state the `recover`
// input, and carries out the effects like any run, with this runtime's store,
// clock, policy and events. The loop decides what happens (resume the step
// with the same key, finish the compensations, write the dead-letter record
// with outcome `interrupted`); this module only finds the runs and the tools.

import { PolicyError, PolicyRuntimeError } from './errors.js';
import { describe, parseLossless, rawMembers } from './json.js';
import { RECOVER, UNKNOWN_TOOL, resumeRun } from './run.js';
import { checkMs, invalidArg } from './step.js';
import { asyncFace } from './store.js';
import { LEASE_PREFIX, checkOperations, operationsOf, takeLease } from './deadletters.js';

/** The journal key prefix: `agent-recovery/journal/<run_id>`. */
export const JOURNAL_PREFIX = 'agent-recovery/journal/';

/**
 * `runtime.recover(operations, {olderThanMs})`: every interrupted run whose
 * journal entry was written at least `olderThanMs` ago (default: the run
 * configuration's `in_flight_ttl_ms`, 300 000 ms, so a live worker's call in
 * progress is not stolen; a restarted single worker passes 0), then every
 * requested replay. Returns one report per run:
 * `{runId, outcome, step, stepOutcome, deadLetterId, events}` (`replayOf`: the
 * record id, for a replay).
 */
export async function recover(rt, operations, options = {}) {
  if (options === null || typeof options !== 'object') throw invalidArg(`recover options must be an object {olderThanMs}, got ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (k !== 'olderThanMs') throw invalidArg(`recover has unknown option ${JSON.stringify(k)}; the option is olderThanMs`);
  }
  checkOperations(operations);
  const olderThanMs = options.olderThanMs ?? rt.inFlightTtlMs;
  checkMs('olderThanMs', olderThanMs);
  const store = asyncFace(rt.store);
  if (typeof store.keys !== 'function') throw invalidArg('recover needs a store with keys(prefix, nowMs): a MemoryStore or a SqliteStore');
  const reports = [];
  for (const key of await store.keys(JOURNAL_PREFIX, rt.clock.nowMs())) {
    const report = await recoverOne(rt, operations, key, olderThanMs);
    if (report !== undefined) reports.push(report);
  }
  const dlq = rt.deadLetters;
  for (const { rid, record, text, entry } of await dlq.pendingReplays()) {
    const tool = record.input?.tool;
    const ops = (typeof tool === 'string' && operationsOf(operations, tool)) || { operation: UNKNOWN_TOOL };
    const done = await dlq.runPending(rid, record, entry, { [tool]: ops }, text);
    if (done === undefined) continue; // another worker is replaying it
    // As Rust's report of a replay: the outcome is the replayed step's.
    reports.push({ runId: done.runId, outcome: done.outcome, step: record.input.id, stepOutcome: done.outcome, deadLetterId: done.deadLetterId, events: done.events, replayOf: rid });
  }
  return reports;
}

async function recoverOne(rt, operations, key, olderThanMs) {
  const store = asyncFace(rt.store);
  const now = rt.clock.nowMs();
  const cur = await store.get(key, now);
  if (cur === null) return undefined; // ended meanwhile
  let entry;
  let stateText;
  try {
    entry = parseLossless(cur.value);
    stateText = rawMembers(cur.value).state;
  } catch {
    entry = undefined;
  }
  const runId = key.slice(JOURNAL_PREFIX.length);
  if (entry === null || typeof entry !== 'object' || stateText === undefined || !Number.isSafeInteger(entry.written_ms) || entry.run_id !== runId) {
    // Never silence: the entry stays, and the report says why nothing was done.
    return failedReport(runId, [], `${key} is not a journal entry {"v":1,"run_id","state","written_ms"}; inspect it, then delete it by hand`);
  }
  if (entry.written_ms + olderThanMs > now) return undefined; // a live worker may be calling
  const lease = LEASE_PREFIX + runId;
  if (!(await takeLease(store, lease, now, rt.inFlightTtlMs))) return undefined; // another worker is recovering it
  try {
    // The journal may have gone while we took the lease (its run ended): look again.
    const again = await store.get(key, rt.clock.nowMs());
    if (again === null || again.version !== cur.version) return undefined;
    const run = resumeRun(rt, runId, stateText);
    let r;
    try {
      r = await run[RECOVER](operations);
    } catch (e) {
      // The loop refused the journaled state: the entry stays, for an operator
      // (`agent-recovery recover --store PATH` lists it).
      if (e instanceof PolicyError || e instanceof PolicyRuntimeError) return failedReport(runId, run.events, e.message);
      throw e;
    }
    const last = r.deadLetters.at(-1);
    let stepOutcome = null;
    if (last !== undefined) {
      try {
        stepOutcome = JSON.parse(last.record).step_outcome ?? null;
      } catch {
        stepOutcome = null;
      }
    }
    return {
      runId,
      outcome: r.outcome,
      step: recoverEventStep(run.events),
      stepOutcome: stepOutcome ?? r.outcome,
      deadLetterId: last?.id ?? null,
      events: run.events,
    };
  } finally {
    await store.delete(lease);
  }
}

/** The `step` of the run's `recover` event: the step in progress when it was interrupted. */
function recoverEventStep(events) {
  for (const text of events) {
    const ev = JSON.parse(text);
    if (ev.event === 'recover') return ev.step ?? null;
  }
  return null;
}

/**
 * `runtime.withRun(runId, fn, options)`: run `fn(run)`, then end the run and
 * resolve with what `fn` returned. When `fn` throws, the run is not ended: it
 * stays in the journal for `recover` (docs/durability.md §1).
 */
export async function withRun(rt, runId, fn, options) {
  if (typeof fn !== 'function') throw invalidArg(`withRun needs a function (run) => ..., got ${describe(fn)}`);
  const run = rt.run(runId, options);
  const value = await fn(run);
  await run.end();
  return value;
}

/** The report of a run `recover` could not finish (outcome `error`; its journal entry stays). */
function failedReport(runId, events, error) {
  return { runId, outcome: 'error', step: null, stepOutcome: null, deadLetterId: null, events, error };
}
