#!/usr/bin/env node
// Instructions per successful Runtime step, for callgrind (load-independent):
//
//   valgrind --tool=callgrind --smc-check=all-non-file --callgrind-out-file=A node bench/step_instructions.mjs 2000
//   valgrind --tool=callgrind --smc-check=all-non-file --callgrind-out-file=B node bench/step_instructions.mjs 8000
//   python3 ../scripts/callgrind-diff.py A B 6000      # per step, by object and by function
//
// After 3,000 warm-up runs (V8's tiers and the component's compilation
// settle), runs N one-step runs (`runtime.run(id)` then one successful
// `step`) on a MemoryStore and a virtual clock; the difference of two runs
// divided by the difference of N is the cost of one. Optional second
// argument: another checkout's node/ directory to measure instead.

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const n = Number(process.argv[2]);
if (!Number.isSafeInteger(n) || n < 0) throw new Error('usage: node bench/step_instructions.mjs N [OTHER/node]');
const dir = process.argv[3] === undefined ? new URL('..', import.meta.url).pathname : resolve(process.argv[3]);
const m = await import(pathToFileURL(`${dir}/src/index.js`).href);
const runtime = await m.Runtime.create({ clock: new m.VirtualClock(1_767_225_600_000), store: new m.MemoryStore(), seed: 7 });
const ok = async () => 1;
let i = 0;
const one = async () => {
  const run = runtime.run(`r-${i++}`);
  const report = await run.step({ id: 's', tool: 'noop', call: 'tool', operation: ok });
  if (report.outcome !== 'ok') throw new Error(`the step ended ${report.outcome}`);
};
for (let k = 0; k < 3000 + n; k++) await one();
