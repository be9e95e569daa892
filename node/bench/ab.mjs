#!/usr/bin/env node
// Benchmark: a successful call three ways, in one process: a Runtime step (a
// run of one step, ended), the door (recover) and retry(), each on a no-op
// operation; optionally against another checkout's node/ directory in the
// same process (blocks of runs alternating, so both see the same load).
//
//   node bench/ab.mjs [--blocks 30] [--size 200] [OTHER/node]   (after `npm run build` in each)
//   node bench/ab.mjs --crossing [--blocks 30] [--size 200]
//
// Virtual clocks for the Runtime and the door (nothing sleeps), seed 7, the
// reference policy, a MemoryStore per Runtime and per door (retry(): a store
// per call, its default). The figure is CPU time (process.cpuUsage, user +
// system) per call of a block of --size calls; the median and the quartiles
// of the --blocks blocks are printed.
//
// --crossing: the loop calls of one successful run of one step (`advance`,
// recorded once), replayed through the loop's direct bindings and through
// jco's generated ones (src/loop.js), alternating: CPU µs per call.

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(args[i + 1]);
  args.splice(i, 2);
  return v;
};
const crossing = args.includes('--crossing');
if (crossing) args.splice(args.indexOf('--crossing'), 1);
const BLOCKS = option('--blocks', 30);
const SIZE = option('--size', 200);
const checkouts = [['this', new URL('..', import.meta.url).pathname], ...args.map((p) => [p, resolve(p)])];

async function cases(dir) {
  const m = await import(pathToFileURL(`${dir}/src/index.js`).href);
  const runtime = await m.Runtime.create({ clock: new m.VirtualClock(1_767_225_600_000), store: new m.MemoryStore(), seed: 7 });
  const policy = await m.Policy.load();
  const ok = async () => 1;
  const door = m.recover(ok, { call: 'tool', tool: 'noop', clock: new m.VirtualClock(0), seed: 7 });
  const retryOptions = { policy, call: 'tool', tool: 'noop', seed: 7, sleep: async () => {} };
  let n = 0;
  return {
    'Runtime step (run of one step, ended)': async () => {
      const run = runtime.run(`ok-${n++}`);
      const r = await run.step({ id: 's', tool: 'noop', call: 'tool', operation: ok });
      if (r.outcome !== 'ok') throw new Error(`step ended ${r.outcome}`);
      await run.end();
    },
    'recover() door': async () => {
      if ((await door()) !== 1) throw new Error('door');
    },
    'retry()': async () => {
      if ((await m.retry(ok, retryOptions)) !== 1) throw new Error('retry');
    },
  };
}

const at = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const row = (xs) => `${at(xs, 0.5).toFixed(2)} (${at(xs, 0.25).toFixed(2)}–${at(xs, 0.75).toFixed(2)})`;

if (crossing) {
  const { LoopComponent } = await import('../src/loop.js');
  const m = await import('../src/index.js');
  const runtime = await m.Runtime.create({ clock: new m.VirtualClock(1_767_225_600_000), store: new m.MemoryStore(), seed: 7 });
  const calls = [];
  const advance = runtime.loop.advance;
  runtime.loop.advance = function (state, input) {
    calls.push([state, input]);
    return advance.call(this, state, input);
  };
  const run = runtime.run('r');
  await run.step({ id: 's', tool: 'noop', call: 'tool', operation: () => 1 });
  await run.end();
  const loops = { direct: await LoopComponent.load(), jco: await LoopComponent.load({ bindings: 'jco' }) };
  const cpu = { direct: [], jco: [] };
  for (let b = 0; b < BLOCKS; b++) {
    for (const k of b % 2 === 0 ? ['direct', 'jco'] : ['jco', 'direct']) {
      const loop = loops[k];
      const c = process.cpuUsage();
      for (let i = 0; i < SIZE; i++) for (const [state, input] of calls) loop.advance(state, input);
      const u = process.cpuUsage(c);
      cpu[k].push((u.user + u.system) / SIZE / calls.length);
    }
  }
  console.log(`node ${process.version}, the ${calls.length} advance calls of a run of one step, ${BLOCKS} blocks x ${SIZE}; load average ${load}`);
  console.log(`CPU µs per call: median (quartiles)   direct: ${row(cpu.direct)}   jco: ${row(cpu.jco)}`);
  process.exit(0);
}

const sides = [];
for (const [label, dir] of checkouts) sides.push({ label, cases: await cases(dir) });
const names = Object.keys(sides[0].cases);
const cpu = sides.map(() => Object.fromEntries(names.map((k) => [k, []])));
for (const s of sides) for (const f of Object.values(s.cases)) for (let i = 0; i < 300; i++) await f(); // warm up
for (let b = 0; b < BLOCKS; b++) {
  for (const name of names) {
    const order = b % 2 === 0 ? sides.keys() : [...sides.keys()].reverse();
    for (const k of order) {
      const f = sides[k].cases[name];
      const c = process.cpuUsage();
      for (let i = 0; i < SIZE; i++) await f();
      const u = process.cpuUsage(c);
      cpu[k][name].push((u.user + u.system) / SIZE);
    }
  }
}
console.log(`node ${process.version}, ${BLOCKS} blocks x ${SIZE} calls, alternating; load average ${load}`);
console.log(`CPU µs per call: median (quartiles)`);
for (const name of names) {
  const cells = sides.map((s, k) => `${s.label}: ${at(cpu[k][name], 0.5).toFixed(1)} (${at(cpu[k][name], 0.25).toFixed(1)}–${at(cpu[k][name], 0.75).toFixed(1)})`);
  console.log(`${name.padEnd(40)} ${cells.join('   ')}`);
}
process.exit(0);
