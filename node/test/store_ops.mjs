// One store operation in the JSON form of tests/store/operations.json. Shared
// by store.test.mjs (the vectors) and store_worker.mjs (the worker the
// cross-process tests drive); the Rust and Python suites have the same function.

import assert from 'node:assert/strict';
import { StoreError } from '../src/store.js';

const versioned = (v) => (v === null ? null : { value: v.value, version: v.version });

function outcome(run, ok) {
  let result;
  try {
    result = run();
  } catch (e) {
    if (!(e instanceof StoreError)) throw e;
    assert.ok(e.message.includes(';'), `error message without a hint: ${e.message}`);
    // Node kinds are snake_case; the vectors write Rust's names.
    return { error: e.kind.replaceAll('_', '-') };
  }
  return ok(result);
}

/** A Redis stream starts at the server's clock in microseconds, not at 1 (host/src/store/redis/append.lua). */
export const TIME_FLOOR = 1_000_000_000_000_000; // 2001-09-09 in microseconds

/**
 * The ops of a case on a Redis store, its stream numbers read relative to each stream's
 * first: `seqs` (a Map) keeps each stream's first number minus one, which must be a
 * time floor (>= TIME_FLOOR); `op` comes back in the vectors' numbering (from 1).
 */
export function rebase(op, seqs, run) {
  const base = seqs.get(op.stream) ?? 0;
  if (op.op === 'read') {
    const after = base === 0 || op.after === 0 || typeof op.after !== 'number' ? op.after : Math.min(op.after + base, Number.MAX_SAFE_INTEGER);
    const got = run({ ...op, after });
    const map = (r) => (Array.isArray(r) ? r.map(([seq, rec]) => [seq - base, rec]) : r);
    return typeof got?.then === 'function' ? got.then(map) : map(got);
  }
  if (op.op !== 'append') return run(op);
  const first = (n) => {
    if (typeof n !== 'number') return n;
    if (!seqs.has(op.stream)) {
      assert.ok(n >= TIME_FLOOR, `the first number of stream ${op.stream} is ${n}, not a time floor`);
      seqs.set(op.stream, n - 1);
    }
    return n - seqs.get(op.stream);
  };
  const got = run(op);
  return typeof got?.then === 'function' ? got.then(first) : first(got);
}

const casJson = (cas) =>
  cas.written ? { written: { version: cas.version } } : { conflict: { current: versioned(cas.current) } };

export function apply(store, op) {
  switch (op.op) {
    case 'get':
      return outcome(() => store.get(op.key, op.now_ms), versioned);
    case 'cas':
      return outcome(() => store.compareAndSet(op.key, op.expected, op.value, op.ttl_ms, op.now_ms), casJson);
    case 'append':
      return outcome(() => store.append(op.stream, op.record, op.now_ms), (n) => n);
    case 'read':
      return outcome(() => store.read(op.stream, op.after, op.limit), (records) => records);
    case 'delete':
      return outcome(() => store.delete(op.key), (b) => b);
    case 'keys':
      return outcome(() => store.keys(op.prefix, op.now_ms), (k) => k);
    case 'purge_expired':
      return outcome(() => store.purgeExpired(op.now_ms), (n) => n);
    default:
      throw new Error(`unknown op ${JSON.stringify(op.op)}`);
  }
}

async function outcomeAsync(run, ok) {
  let result;
  try {
    result = await run();
  } catch (e) {
    if (!(e instanceof StoreError)) throw e;
    assert.ok(e.message.includes(';'), `error message without a hint: ${e.message}`);
    return { error: e.kind.replaceAll('_', '-') };
  }
  return ok(result);
}

/** `apply` on a store's asynchronous face (`store.async`): the same answers, awaited. */
export function applyAsync(face, op) {
  switch (op.op) {
    case 'get':
      return outcomeAsync(() => face.get(op.key, op.now_ms), versioned);
    case 'cas':
      return outcomeAsync(() => face.compareAndSet(op.key, op.expected, op.value, op.ttl_ms, op.now_ms), casJson);
    case 'append':
      return outcomeAsync(() => face.append(op.stream, op.record, op.now_ms), (n) => n);
    case 'read':
      return outcomeAsync(() => face.read(op.stream, op.after, op.limit), (records) => records);
    case 'delete':
      return outcomeAsync(() => face.delete(op.key), (b) => b);
    case 'keys':
      return outcomeAsync(() => face.keys(op.prefix, op.now_ms), (k) => k);
    case 'purge_expired':
      return outcomeAsync(() => face.purgeExpired(op.now_ms), (n) => n);
    default:
      throw new Error(`unknown op ${JSON.stringify(op.op)}`);
  }
}
