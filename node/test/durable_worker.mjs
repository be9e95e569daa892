#!/usr/bin/env node
// The Node kill-test worker (docs/durability.md §5), the twin of
// host/examples/durable_worker.rs and python/tests/durable_worker.py:
//
//   node node/test/durable_worker.mjs STORE LEDGER JOB
//
// JOB is JSON text: {"mode": "run" | "recover" | "replay", "run_id", "seed",
// "now_ms", "kill_at", "config", "steps": [{"id", "fail_times", "compensation",
// "comp_fail_times", "fail_always", "permanent"}], "id"?}. The worker opens
// the runtime on openStore(STORE) (a file or a redis:// URL) with the system clock; the LEDGER is an
// SQLite file standing for the external system (the tools apply their effect
// there, idempotently by key). At the `kill_at`-th point of interest the
// worker sends itself SIGKILL. Prints one JSON line and exits 0.

import { createRequire } from 'node:module';
import { Failed, Runtime, SystemClock, openStore } from '../src/index.js';

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
function point() {
  points += 1;
  if (job.kill_at !== null && job.kill_at !== undefined && points === job.kill_at) process.kill(process.pid, 'SIGKILL');
}

/** The operation (kind `operation`) or the compensation of job step `s`. */
function tool(s, kind) {
  const failTimes = (kind === 'operation' ? s.fail_times : s.comp_fail_times) ?? 0;
  return async (call) => {
    point();
    if (!callOnce.immediate(s, kind, call, failTimes)) {
      return new Failed({ source: 'http', status: s.permanent ? 400 : 503 });
    }
    point();
    return { step: s.id };
  };
}

function operations() {
  const ops = {};
  for (const s of job.steps ?? []) {
    ops[`t.${s.id}`] = { operation: tool(s, 'operation'), ...(s.compensation ? { compensate: tool(s, 'compensation') } : {}) };
  }
  return ops;
}

// ------------------------------------------------------------------ the modes

const store = openStore(storePath); // a file path, or a redis:// URL
const runtime = await Runtime.create({ store, clock: new SystemClock(), seed: job.seed ?? undefined, config: job.config ?? {} });

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
  for (const s of job.steps) {
    const ops = operations()[`t.${s.id}`];
    const report = await run.step({
      id: s.id,
      tool: `t.${s.id}`,
      args: { step: s.id },
      sideEffect: true,
      operation: ops.operation,
      ...(ops.compensate ? { compensate: ops.compensate } : {}),
    });
    if (report.outcome !== 'ok') {
      outcome = report.outcome;
      break;
    }
  }
  if (outcome === 'completed') await run.end();
  line = JSON.stringify({ outcome, points });
} else if (job.mode === 'recover') {
  const reports = await runtime.recover(operations(), { olderThanMs: 0 });
  line = `{"reports":[${reports.map(reportJson).join(',')}]}`;
} else if (job.mode === 'replay') {
  const r = await runtime.deadLetters.replay(String(job.id), operations());
  line = JSON.stringify({ replay: { id: r.id, n: r.n, key: r.key, run_id: r.runId, outcome: r.outcome ?? null } });
} else {
  process.stderr.write(`durable_worker: unknown mode ${JSON.stringify(job.mode)}; use run, recover or replay\n`);
  process.exit(2);
}
store.close();
ledger.close();
process.stdout.write(`${line}\n`);
