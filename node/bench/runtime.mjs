#!/usr/bin/env node
// Benchmark: the Node Runtime's overhead per run of one step, the twin of
// `cargo run --release -p agent-recovery --example runtime_overhead`.
//
//   node bench/runtime.mjs [--quick]      (after `npm run build`)
//
// Virtual clock (nothing sleeps), MemoryStore, seed 7, the reference policy.
// Three cases: the operation succeeds at once; one failed attempt (503) then
// success; a duplicate key answered by the idempotency cache (nothing called).
// Each case runs ROUNDS rounds of N runs after a warmup; the figure per round
// is CPU time (process.cpuUsage, user + system) / N, and wall time / N; the
// range over rounds is printed.
//
// Then telemetry (docs/telemetry.md): the failed-attempt step on two runtimes
// with `Telemetry.off()` (A, A') and one with the default `Telemetry.global()`
// and no SDK registered (the API's no-op providers), interleaved step by step
// with the order rotating (3 x N steps each, distinct run ids), each step
// timed alone (CPU: process.cpuUsage; wall: hrtime). No-op minus A is the cost
// of telemetry when nobody configured an exporter; A' minus A is what the
// machine cannot resolve. The twin of runtime_overhead's last rows. Last, the
// telemetry hooks alone, without the runtime: the calls run.js makes for that
// step (a lane, 2 calls, a decide answer, its 6 events, the finish) with the
// no-op providers, 200 000 times: what the difference above cannot resolve.

import { MemoryStore, Policy, Response as Judged, Runtime, Telemetry, VirtualClock } from '../src/index.js';
import { bindTelemetry, runTelemetry } from '../src/telemetry.js';

const quick = process.argv.includes('--quick');
const N = quick ? 300 : 2_000;
const ROUNDS = 3;
const WARMUP = quick ? 100 : 500;

const clock = new VirtualClock(1_767_225_600_000);
const runtime = await Runtime.create({ clock, store: new MemoryStore(), seed: 7 });
const FAILED = new Judged({ source: 'http', status: 503 });

const cases = {
  'the operation succeeds at once': (i) =>
    runtime.run(`ok-${i}`).step({ id: 's', tool: 'search', call: 'tool', operation: () => ({ hits: 1 }) }),
  'one failed attempt (503), then success': (i) =>
    runtime
      .run(`fail-${i}`)
      .step({ id: 's', tool: 'search', call: 'tool', target: `t-${i}`, operation: (call) => (call.attempt === 1 ? FAILED : { hits: 1 }) }),
  'duplicate key answered by the idempotency cache': (i) =>
    runtime.run(`cache-${i}`).step({ id: 's', tool: 'search', call: 'tool', operation: () => ({ hits: 1 }) }),
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

console.log(`node ${process.version}, ${N} runs x ${ROUNDS} rounds per case (virtual clock, MemoryStore)`);
console.log('per run of one step                               CPU µs      wall µs');
for (const [name, fn] of Object.entries(cases)) {
  await round(name, fn, WARMUP, true);
  const rs = [];
  for (let r = 0; r < ROUNDS; r++) rs.push(await round(name, fn, N, true));
  const span = (xs) => `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}`;
  console.log(`${name.padEnd(48)}  ${span(rs.map((x) => x.cpu)).padStart(9)}  ${span(rs.map((x) => x.wall)).padStart(11)}`);
}

// Telemetry off vs. the no-op global providers (the default).
const build = (telemetry) =>
  Runtime.create({ clock: new VirtualClock(1_767_225_600_000), store: new MemoryStore(), seed: 7, ...(telemetry ? { telemetry } : {}) });
const sides = [
  ['telemetry off (A)', await build(Telemetry.off())],
  ["telemetry off (A')", await build(Telemetry.off())],
  ['no-op global (default)', await build(undefined)],
];
const failStep = async (rt, tag, i) => {
  const r = await rt
    .run(`${tag}-${i}`)
    .step({ id: 's', tool: 'search', call: 'tool', target: `${tag}-t-${i}`, operation: (call) => (call.attempt === 1 ? FAILED : { hits: 1 }) });
  if (r.outcome !== 'ok') throw new Error(`telemetry ${tag}: ${r.outcome}`);
};
for (let i = 0; i < WARMUP; i++) for (const [k, [, rt]] of sides.entries()) await failStep(rt, `warm${k}`, i);
const steps = 3 * N;
const cpu = [0, 0, 0];
const wall = [0, 0, 0];
for (let i = 0; i < steps; i++) {
  for (let j = 0; j < 3; j++) {
    const k = (i + j) % 3;
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await failStep(sides[k][1], `s${k}`, i);
    wall[k] += Number(process.hrtime.bigint() - t0) / 1000;
    const c = process.cpuUsage(c0);
    cpu[k] += c.user + c.system;
  }
}
console.log(`\ntelemetry: one failed attempt then success, ${steps} steps per runtime, interleaved   CPU µs   wall µs`);
for (const [k, [name]] of sides.entries()) {
  console.log(`${name.padEnd(48)}  ${(cpu[k] / steps).toFixed(1).padStart(9)}  ${(wall[k] / steps).toFixed(1).padStart(9)}`);
}
const diff = (x, a, b) => (x[a] - x[b]) / steps;
const sign = (v) => `${v >= 0 ? '+' : ''}${v.toFixed(1)}`;
console.log(
  `${'no-op global minus off (A)'.padEnd(48)}  ${sign(diff(cpu, 2, 0)).padStart(9)}  ${sign(diff(wall, 2, 0)).padStart(9)}   (A' minus A: ${sign(diff(cpu, 1, 0))} CPU, ${sign(diff(wall, 1, 0))} wall)`,
);

// The hooks alone, no-op providers: the calls run.js makes for that step.
const bound = await bindTelemetry(undefined, await Policy.load());
const call = (attempt) => ({ kind: 'operation', step: 's', target: 'search', key: 'f'.repeat(64), attempt, timeoutMs: null });
const ev = (event, m = {}) => ({ t_ms: 0, event, step: 's', target: 'search', ...m });
const EVENTS = [
  [ev('attempt', { attempt: 1, call: 'operation', key: 'f'.repeat(64) }), ev('decision', { attempt: 1, action: 'retry', code: 'tool.http.503_unavailable', delay_ms: 53 }), ev('sleep', { delay_ms: 53 })],
  [ev('attempt', { attempt: 2, call: 'operation', key: 'f'.repeat(64) }), ev('ok', { attempt: 2 }), ev('outcome', { state: 'ok' })],
];
const hooks = (i) => {
  const lane = runTelemetry(bound, `h-${i}`).lane({ step: { id: 's', tool: 'search' } }, 0);
  lane.callStart(call(1), 0);
  lane.callEnd(0);
  lane.decided('{"action":"retry","envelope":{"class":"transient","retryable":true}}');
  for (const e of EVENTS[0]) lane.event(e, 0);
  lane.callStart(call(2), 53);
  lane.callEnd(53);
  for (const e of EVENTS[1]) lane.event(e, 53);
  lane.finish('ok', null, 53);
};
const H = 200_000;
for (let i = 0; i < H / 10; i++) hooks(i);
const hc = process.cpuUsage();
for (let i = 0; i < H; i++) hooks(i);
const hu = process.cpuUsage(hc);
console.log(`${'the telemetry hooks alone (no-op providers)'.padEnd(48)}  ${((hu.user + hu.system) / H).toFixed(2).padStart(9)}  µs CPU per step, ${H} steps`);
