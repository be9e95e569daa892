#!/usr/bin/env node
// Benchmark: the Node Runtime's overhead per run of one step, the twin of
// `cargo run --release -p agent-recovery --example runtime_overhead`.
//
//   node bench/runtime.mjs [--quick] [--no-journal] [--success-only]      (after `npm run build`)
//
// --success-only: only the first case, no telemetry rows (what a profiler
// should see: `node --cpu-prof bench/runtime.mjs --success-only`).
//
// Virtual clock (nothing sleeps), MemoryStore, seed 7, the reference policy;
// each run is ended (`run.end()`), so the journal entry the loop writes before
// each call is deleted, as in a worker.
// Three cases: the operation succeeds at once; one failed attempt (503) then
// success; a duplicate key answered by the idempotency cache (nothing called).
// Each case runs ROUNDS rounds of N runs after a warmup; the figure per round
// is CPU time (process.cpuUsage, user + system) / N, and wall time / N; the
// range over rounds is printed.
//
// Then telemetry (docs/telemetry.md): the failed-attempt step on two runtimes
// with `Telemetry.off()` (A, A'), one with the default `Telemetry.global()`
// and no SDK registered (the API's no-ops: a run then skips every hook), and
// one with an SDK tracer provider whose sampler drops every span and no meter
// provider (the hooks run, nothing is recorded), interleaved step by step with
// the order rotating (3 x N steps each, distinct run ids), each step timed
// alone (CPU: process.cpuUsage; wall: hrtime). A' minus A is what the machine
// cannot resolve. The twin of runtime_overhead's last rows (which has no
// sampled-out row). Needs the devDependencies (the SDK).

import { MemoryStore, RawOutcome, Runtime, Telemetry, VirtualClock } from '../src/index.js';
import { AlwaysOffSampler, BasicTracerProvider } from '@opentelemetry/sdk-trace-base';

const quick = process.argv.includes('--quick');
const successOnly = process.argv.includes('--success-only');
// --no-journal: the run configuration's `journal: false` (no journal writes), to see what the journal costs.
const journal = !process.argv.includes('--no-journal');
const N = quick ? 300 : 2_000;
const ROUNDS = 3;
const WARMUP = quick ? 100 : 500;

const clock = new VirtualClock(1_767_225_600_000);
const runtime = await Runtime.create({ clock, store: new MemoryStore(), seed: 7, journal });
const FAILED = new RawOutcome({ source: 'http', status: 503 });

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
for (const [name, fn] of Object.entries(cases).slice(0, successOnly ? 1 : undefined)) {
  await round(name, fn, WARMUP, true);
  const rs = [];
  for (let r = 0; r < ROUNDS; r++) rs.push(await round(name, fn, N, true));
  const span = (xs) => `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}`;
  console.log(`${name.padEnd(48)}  ${span(rs.map((x) => x.cpu)).padStart(9)}  ${span(rs.map((x) => x.wall)).padStart(11)}`);
}

if (successOnly) process.exit(0);

// Telemetry off vs. the default with no SDK vs. an SDK that samples nothing.
const build = (telemetry) =>
  Runtime.create({ clock: new VirtualClock(1_767_225_600_000), store: new MemoryStore(), seed: 7, ...(telemetry ? { telemetry } : {}) });
const sampledOut = new BasicTracerProvider({ sampler: new AlwaysOffSampler() });
const sides = [
  ['telemetry off (A)', await build(Telemetry.off())],
  ["telemetry off (A')", await build(Telemetry.off())],
  ['no SDK: the global no-ops (default)', await build(undefined)],
  ['SDK tracer sampling nothing, no-op meter', await build(new Telemetry({ tracerProvider: sampledOut }))],
];
const failStep = async (rt, tag, i) => {
  const r = await rt
    .run(`${tag}-${i}`)
    .step({ id: 's', tool: 'search', call: 'tool', target: `${tag}-t-${i}`, operation: (call) => (call.attempt === 1 ? FAILED : { hits: 1 }) });
  if (r.outcome !== 'ok') throw new Error(`telemetry ${tag}: ${r.outcome}`);
};
for (let i = 0; i < WARMUP; i++) for (const [k, [, rt]] of sides.entries()) await failStep(rt, `warm${k}`, i);
const steps = 3 * N;
const cpu = sides.map(() => 0);
const wall = sides.map(() => 0);
for (let i = 0; i < steps; i++) {
  for (let j = 0; j < sides.length; j++) {
    const k = (i + j) % sides.length;
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await failStep(sides[k][1], `s${k}`, i);
    wall[k] += Number(process.hrtime.bigint() - t0) / 1000;
    const c = process.cpuUsage(c0);
    cpu[k] += c.user + c.system;
  }
}
console.log(`\ntelemetry: one failed attempt then success, ${steps} steps each, interleaved  CPU µs    wall µs  CPU minus A`);
const sign = (v) => `${v >= 0 ? '+' : ''}${v.toFixed(1)}`;
for (const [k, [name]] of sides.entries()) {
  const c = cpu[k] / steps;
  console.log(`${name.padEnd(48)}  ${c.toFixed(1).padStart(9)}  ${(wall[k] / steps).toFixed(1).padStart(9)}  ${k === 0 ? '' : sign(c - cpu[0] / steps).padStart(11)}`);
}
