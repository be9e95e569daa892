#!/usr/bin/env node
// The Node kill-test worker (docs/durability.md §5), the twin of
// host/examples/durable_worker.rs and python/tests/durable_worker.py:
//
//   node node/test/durable_worker.mjs STORE LEDGER JOB
//
// JOB is JSON text: {"mode": "run" | "recover" | "replay", "run_id", "seed",
// "now_ms", "kill_at", "config", "steps": [{"id", "fail_times", "compensation",
// "comp_fail_times", "fail_always", "permanent"} | {"id", "fanout": {"min_results",
// "branches": [step, ..]}}], "id"?}. The worker opens
// the runtime on openStore(STORE) (a file or a redis:// URL) with the system clock; the LEDGER is an
// SQLite file standing for the external system (the tools apply their effect
// there, idempotently by key). At the `kill_at`-th point of interest the
// worker sends itself SIGKILL. Prints one JSON line and exits 0.
//
// The fleet harness (tests/fleet/fleet.py) adds optional job fields, the same
// as python/tests/durable_worker.py and host/examples/durable_worker.rs:
// - "clock": "virtual": the runtime runs on a VirtualClock from the job's
//   now_ms (sleeps advance it, nothing really waits); default: the system clock;
// - "events": true: the line also carries "events" (every event the runtime
//   and its store emitted, in order) and "max_store_call_ms" (the slowest
//   store call, real time, in ms);
// - "hold_at": N, "hold_file": PATH: at the N-th point of interest the worker
//   creates PATH + ".reached" and waits until PATH exists (the harness acts,
//   e.g. kills Redis, at a known point of the run).

import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { Failed, Runtime, SystemClock, VirtualClock, openStore } from '../src/index.js';

const [storePath, ledgerPath, jobText] = process.argv.slice(2);
if (jobText === undefined) {
  process.stderr.write('usage: durable_worker.mjs STORE LEDGER JOB\n');
  process.exit(2);
}
const job = JSON.parse(jobText);

// ------------------------------------------------------------------ the ledger

const Database = createRequire(import.meta.url)('better-sqlite3');
const ledger = new Database(ledgerPath, { timeout: 10_000 });
ledger.pragma('journal_mode = WAL');
ledger.exec(`
CREATE TABLE IF NOT EXISTS applied(key TEXT PRIMARY KEY, step TEXT, kind TEXT, seq INTEGER);
CREATE TABLE IF NOT EXISTS calls(n INTEGER PRIMARY KEY AUTOINCREMENT, step TEXT, kind TEXT, key TEXT, attempt INTEGER, pid INTEGER, applied INTEGER);
`);
const countCalls = ledger.prepare('SELECT COUNT(*) FROM calls WHERE key = ? AND kind = ?').pluck();
const insertCall = ledger.prepare('INSERT INTO calls(step, kind, key, attempt, pid, applied) VALUES (?, ?, ?, ?, ?, ?)');
const apply = ledger.prepare(
  'INSERT OR IGNORE INTO applied(key, step, kind, seq) VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM applied))',
);
/** One call of step `s` (§5 steps 2-3), in one IMMEDIATE transaction as the Rust worker: true when it succeeded. */
const callOnce = ledger.transaction((s, kind, call, failTimes) => {
  const k = countCalls.get(call.key, kind);
  if ((kind === 'operation' && s.fail_always) || k < failTimes) {
    insertCall.run(s.id, kind, call.key, call.attempt, process.pid, 0);
    return false;
  }
  const added = apply.run(call.key, s.id, kind).changes;
  insertCall.run(s.id, kind, call.key, call.attempt, process.pid, added === 1 ? 1 : 0);
  return true;
});

// ------------------------------------------------------------------ points of interest

let points = 0;
if (job.hold_at != null && typeof job.hold_file !== 'string') {
  process.stderr.write('durable_worker: hold_at needs hold_file\n');
  process.exit(2);
}
async function point() {
  points += 1;
  if (job.hold_at != null && points === job.hold_at) {
    writeFileSync(`${job.hold_file}.reached`, '');
    // waiting for the harness to act, not timing
    while (!existsSync(job.hold_file)) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  if (job.kill_at !== null && job.kill_at !== undefined && points === job.kill_at) process.kill(process.pid, 'SIGKILL');
}

/** The operation (kind `operation`) or the compensation of job step `s`. */
function tool(s, kind) {
  const failTimes = (kind === 'operation' ? s.fail_times : s.comp_fail_times) ?? 0;
  return async (call) => {
    await point();
    if (!callOnce.immediate(s, kind, call, failTimes)) {
      return new Failed({ source: 'http', status: s.permanent ? 400 : 503 });
    }
    await point();
    return { step: s.id };
  };
}

/** The job's steps and its fan-outs' branches, flat. */
function plainSteps() {
  return (job.steps ?? []).flatMap((s) => (s.fanout ? s.fanout.branches : [s]));
}

function operations() {
  const ops = {};
  for (const s of plainSteps()) {
    ops[`t.${s.id}`] = { operation: tool(s, 'operation'), ...(s.compensation ? { compensate: tool(s, 'compensation') } : {}) };
  }
  return ops;
}

// ------------------------------------------------------------------ the modes

/**
 * The store with the slowest call's real duration recorded (`events: true`);
 * `serverClock` and `subscribe` (a Redis store's clock, a FallbackStore's
 * events) are passed through so the runtime sees what it would see unwrapped.
 */
function timed(inner) {
  const wrapper = { maxMs: 0 };
  for (const m of ['get', 'compareAndSet', 'append', 'read', 'delete', 'keys']) {
    wrapper[m] = (...args) => {
      const start = performance.now();
      try {
        return inner[m](...args);
      } finally {
        wrapper.maxMs = Math.max(wrapper.maxMs, performance.now() - start);
      }
    };
  }
  for (const m of ['serverClock', 'subscribe', 'purgeExpired']) {
    if (typeof inner[m] === 'function') wrapper[m] = (...args) => inner[m](...args);
  }
  return wrapper;
}

let clock;
if (job.clock === 'virtual') {
  if (!Number.isSafeInteger(job.now_ms)) {
    process.stderr.write('durable_worker: clock "virtual" needs the job\'s now_ms (integer Unix ms)\n');
    process.exit(2);
  }
  clock = new VirtualClock(job.now_ms);
} else if (job.clock == null || job.clock === 'system') {
  clock = new SystemClock();
} else {
  process.stderr.write(`durable_worker: unknown clock ${JSON.stringify(job.clock)}; use "virtual" or "system"\n`);
  process.exit(2);
}
const store = openStore(storePath); // a file path, or a redis:// URL
const events = [];
const timedStore = timed(store);
const runtime = await Runtime.create({
  store: job.events ? timedStore : store,
  clock,
  seed: job.seed ?? undefined,
  config: job.config ?? {},
  ...(job.events ? { onEvent: (_event, text) => events.push(text) } : {}),
});
/** With `events: true`, the line's object also carries the events (their JSON texts) and the slowest store call. */
const finish = (line) => (job.events ? `${line.slice(0, -1)},"events":[${events.join(',')}],"max_store_call_ms":${timedStore.maxMs}}` : line);

/**
 * A recover report as Rust's RecoverReport::to_json prints it:
 * `{run_id, outcome, step, step_outcome, dead_letter_id, events, error?}`, the
 * events as the component's bytes.
 */
function reportJson(r) {
  const head = { run_id: r.runId, outcome: r.outcome, step: r.step, step_outcome: r.stepOutcome, dead_letter_id: r.deadLetterId ?? null };
  const tail = r.error === undefined ? '' : `,"error":${JSON.stringify(r.error)}`;
  return `${JSON.stringify(head).slice(0, -1)},"events":[${r.events.join(',')}]${tail}}`;
}

let line;
if (job.mode === 'run') {
  const run = runtime.run(job.run_id);
  let outcome = 'completed';
  const stepOf = (s) => {
    const ops = operations()[`t.${s.id}`];
    return {
      id: s.id,
      tool: `t.${s.id}`,
      args: { step: s.id },
      sideEffect: true,
      operation: ops.operation,
      ...(ops.compensate ? { compensate: ops.compensate } : {}),
    };
  };
  for (const s of job.steps) {
    const report = s.fanout
      ? await run.fanout(s.id, s.fanout.min_results, s.fanout.branches.map(stepOf))
      : await run.step(stepOf(s));
    if (report.outcome !== 'ok') {
      outcome = report.outcome;
      break;
    }
  }
  if (outcome === 'completed') await run.end();
  line = finish(JSON.stringify({ outcome, points }));
} else if (job.mode === 'recover') {
  const reports = await runtime.recover(operations(), { olderThanMs: 0 });
  line = finish(`{"reports":[${reports.map(reportJson).join(',')}]}`);
} else if (job.mode === 'replay') {
  const r = await runtime.deadLetters.replay(String(job.id), operations());
  line = finish(JSON.stringify({ replay: { id: r.id, n: r.n, key: r.key, run_id: r.runId, outcome: r.outcome ?? null } }));
} else {
  process.stderr.write(`durable_worker: unknown mode ${JSON.stringify(job.mode)}; use run, recover or replay\n`);
  process.exit(2);
}
store.close();
ledger.close();
process.stdout.write(`${line}\n`);
