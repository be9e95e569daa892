// Per-call cost of `isolate: 'worker'` against in-process, decideJson on one
// HTTP 429 observation (a message round trip per call, calls in sequence).
//
//   node bench/worker.mjs [calls=5000]

import { Policy } from '../src/index.js';

const N = Number(process.argv[2] ?? 5000);
const OBS = '{"source":"http","status":429,"headers":{"retry-after":"2"}}';
const CTX = '{"call":"tool","attempt":1,"seed":7}';

const inProcess = await Policy.load();
const isolated = await Policy.load(undefined, { isolate: 'worker', timeoutMs: 5000 });

async function perCall(run) {
  for (let i = 0; i < 3000; i++) await run(); // warm up (JIT, both threads)
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await run();
  return Number(process.hrtime.bigint() - t) / 1e3 / N;
}

const a = await perCall(() => inProcess.decideJson(OBS, CTX));
const b = await perCall(() => isolated.decideJson(OBS, CTX));
console.log(`decideJson per call over ${N} calls: in-process ${a.toFixed(1)} µs, worker ${b.toFixed(1)} µs (+${(b - a).toFixed(1)} µs)`);
isolated.close();
