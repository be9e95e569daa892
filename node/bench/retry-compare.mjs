// The figures of scripts/bench.sh for Node: agent-recovery's small door (recover) next to
// p-retry and cockatiel on the same no-op operation, and what a step costs while the Redis
// store is unreachable.
//
//   node bench/retry-compare.mjs        (p-retry and cockatiel are devDependencies)
//   node bench/retry-compare.mjs door   (only recover and retry)
//
// - retry(): the door with the older call shape (a door per call, on a runtime kept per
//   configuration, with a MemoryStore per call; it sleeps through a no-op sleep), on the
//   same operations;
// - success: the operation succeeds at once;
// - one failure: it throws once (a 503), then succeeds. recover runs on a VirtualClock
//   (its sleep returns at once); p-retry waits 0 ms (it skips the timer), cockatiel's
//   ConstantBackoff(0) still awaits setTimeout(0), a timer turn of the event loop (at
//   least 1 ms in Node), as its users get;
// - degraded step: a one-step run on a Runtime over the default Redis store (openStore,
//   the server clock) whose Redis refuses connections, so every call is served by the
//   local spool file (through its worker thread).
//
// Each figure is the median of 5 rounds (wall time per call of a round). The last line is
// JSON, read by scripts/bench.py.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConstantBackoff, handleAll, retry } from 'cockatiel';
import pRetry from 'p-retry';
import { Policy, Runtime, VirtualClock, openStore, recover, retry as ourRetry } from '../src/index.js';

const ROUNDS = 5;

async function medianUs(n, f) {
  for (let i = 0; i < Math.max(1, n / 10); i++) await f(); // warm up
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await f();
    rounds.push(Number(process.hrtime.bigint() - t) / 1e3 / n);
  }
  rounds.sort((a, b) => a - b);
  return rounds[Math.floor(ROUNDS / 2)];
}

/** A no-op that throws on every other call: the first attempt of each call fails. */
function failsOnce() {
  let n = 0;
  return async () => {
    n += 1;
    if (n % 2 === 1) throw Object.assign(new Error('unavailable'), { status: 503 });
    return 1;
  };
}

const ok = async () => 1;

async function ours() {
  const clock = new VirtualClock(0);
  const once = failsOnce();
  const a = recover(ok, { call: 'tool', tool: 'noop', clock, seed: 7 });
  const b = recover(() => once(), { call: 'tool', tool: 'noop', clock, seed: 7 });
  return { ok: await medianUs(3000, a), retry: await medianUs(3000, b) };
}

async function retryFigures() {
  const policy = await Policy.load();
  const once = failsOnce();
  const options = { policy, call: 'tool', tool: 'noop', seed: 7, sleep: async () => {} };
  return { ok: await medianUs(3000, () => ourRetry(ok, options)), retry: await medianUs(3000, () => ourRetry(once, options)) };
}

async function pRetryFigures() {
  const opts = { retries: 2, minTimeout: 0, maxTimeout: 0, factor: 1, randomize: false };
  const once = failsOnce();
  return {
    ok: await medianUs(5000, () => pRetry(ok, opts)),
    retry: await medianUs(5000, () => pRetry(once, opts)),
  };
}

async function cockatielFigures() {
  const policy = retry(handleAll, { maxAttempts: 2, backoff: new ConstantBackoff(0) });
  const once = failsOnce();
  return {
    ok: await medianUs(5000, () => policy.execute(ok)),
    retry: await medianUs(300, () => policy.execute(once)),
  };
}

async function degradedStepMs() {
  // A port nothing listens on: connections are refused.
  const server = createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  const dir = mkdtempSync(join(tmpdir(), 'agent-recovery-bench-'));
  const store = openStore(`redis://127.0.0.1:${port}/0?spool=${join(dir, 'spool.sqlite')}`);
  const rt = await Runtime.create({ store, seed: 7 });
  let n = 0;
  const ms = (await medianUs(100, async () => {
    n += 1; // a new run each time (a repeated one is an idempotency-cache hit)
    const report = await rt.run(`down-${n}`).step({ id: 's', tool: 'noop', call: 'tool', operation: ok });
    if (report.outcome !== 'ok') throw new Error(`step ended ${report.outcome}`);
  })) / 1e3;
  store.close();
  rmSync(dir, { recursive: true, force: true });
  return ms;
}

const a = await ours();
const o = await retryFigures();
console.log(`recover,   success / one failure then success  ${a.ok.toFixed(1)} / ${a.retry.toFixed(1)} µs`);
console.log(`retry,     success / one failure then success  ${o.ok.toFixed(1)} / ${o.retry.toFixed(1)} µs`);
if (process.argv[2] === 'door') process.exit(0);
const p = await pRetryFigures();
const c = await cockatielFigures();
const d = await degradedStepMs();
console.log(`p-retry,   success / one failure then success  ${p.ok.toFixed(2)} / ${p.retry.toFixed(1)} µs`);
console.log(`cockatiel, success / one failure then success  ${c.ok.toFixed(2)} / ${c.retry.toFixed(1)} µs`);
console.log(`step on the Redis store, Redis down            ${d.toFixed(3)} ms`);
const r = (x, k) => Number(x.toFixed(k));
console.log(JSON.stringify({
  recover_ok_us: r(a.ok, 2), recover_retry_us: r(a.retry, 2),
  retry_ok_us: r(o.ok, 2), retry_retry_us: r(o.retry, 2),
  p_retry_ok_us: r(p.ok, 3), p_retry_retry_us: r(p.retry, 2),
  cockatiel_ok_us: r(c.ok, 3), cockatiel_retry_us: r(c.retry, 2),
  degraded_step_ms: r(d, 3),
}));
process.exit(0);
