#!/usr/bin/env node
// Benchmark: the Node Runtime's overhead per run of one step, the twin of
// `cargo run --release -p agent-recovery --example runtime_overhead`.
//
//   node bench/runtime.mjs [--quick] [--no-journal]      (after `npm run build`)
//
// Virtual clock (nothing sleeps), MemoryStore, seed 7, the reference policy;
// each run is ended (`run.end()`), so the journal entry the loop writes before
// each call is deleted, as in a worker.
// Three cases: the operation succeeds at once; one failed attempt (503) then
// success; a duplicate key answered by the idempotency cache (nothing called).
// Each case runs ROUNDS rounds of N runs after a warmup; the figure per round
// is CPU time (process.cpuUsage, user + system) / N, and wall time / N; the
// range over rounds is printed.

import { MemoryStore, Response as Judged, Runtime, VirtualClock } from '../src/index.js';

const quick = process.argv.includes('--quick');
// --no-journal: the run configuration's `journal: false` (no journal writes), to see what the journal costs.
const journal = !process.argv.includes('--no-journal');
const N = quick ? 300 : 2_000;
const ROUNDS = 3;
const WARMUP = quick ? 100 : 500;

const clock = new VirtualClock(1_767_225_600_000);
const runtime = await Runtime.create({ clock, store: new MemoryStore(), seed: 7, journal });
const FAILED = new Judged({ source: 'http', status: 503 });

/** One run of one step, ended (its journal entry deleted), as a worker runs it (docs/durability.md §1). */
async function oneStep(runId, step) {
  const run = runtime.run(runId);
  const report = await run.step(step);
  await run.end();
  return report;
}

const cases = {
  'the operation succeeds at once': (i) => oneStep(`ok-${i}`, { id: 's', tool: 'search', call: 'tool', operation: () => ({ hits: 1 }) }),
  'one failed attempt (503), then success': (i) =>
    oneStep(`fail-${i}`, { id: 's', tool: 'search', call: 'tool', target: `t-${i}`, operation: (call) => (call.attempt === 1 ? FAILED : { hits: 1 }) }),
  'duplicate key answered by the idempotency cache': (i) => oneStep(`cache-${i}`, { id: 's', tool: 'search', call: 'tool', operation: () => ({ hits: 1 }) }),
};

let serial = 0;
async function round(name, fn, n, check) {
  const base = serial;
  serial += n;
  if (name.startsWith('duplicate')) {
    // The first run of each key fills the cache (not timed).
    for (let i = 0; i < n; i++) await fn(base + i);
  }
  const cpu = process.cpuUsage();
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const r = await fn(base + i);
    if (check && r.outcome !== 'ok') throw new Error(`${name}: ${r.outcome}`);
  }
  const wall = Number(process.hrtime.bigint() - t) / 1000 / n;
  const used = process.cpuUsage(cpu);
  return { cpu: (used.user + used.system) / n, wall };
}

console.log(`node ${process.version}, ${N} runs x ${ROUNDS} rounds per case (virtual clock, MemoryStore, journal ${journal ? 'on' : 'off'})`);
console.log('per run of one step                               CPU µs      wall µs');
for (const [name, fn] of Object.entries(cases)) {
  await round(name, fn, WARMUP, true);
  const rs = [];
  for (let r = 0; r < ROUNDS; r++) rs.push(await round(name, fn, N, true));
  const span = (xs) => `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}`;
  console.log(`${name.padEnd(48)}  ${span(rs.map((x) => x.cpu)).padStart(9)}  ${span(rs.map((x) => x.wall)).padStart(11)}`);
}
