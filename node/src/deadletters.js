// The dead-letter queue as an operable thing (docs/durability.md §3): list,
// show, replay, request a replay, purge, depth, on any store, whoever wrote
// the records (a Rust, Python or Node runtime, or the CLI). The twin of Rust's
// `runtime.dead_letters()` and Python's `runtime.dead_letters`.
//
//   const dlq = runtime.deadLetters;
//   for (const item of dlq.list()) console.log(item.id, item.status, item.record.tool);
//   await dlq.replay('3', { 'payments.charge': { operation: charge } });
//   dlq.purge('4');
//
// The records stay in the append-only stream `agent-recovery/dead-letter`; a
// record's id is its sequence number there (a decimal string). What happened to
// a record since lives beside it, in the item key
// `agent-recovery/dead-letter/item/<id>`, changed only by compare-and-set, so
// two operators or workers never lose each other's change. Depth = records in
// the stream - `agent-recovery/dead-letter/closed`.count.
//
// Every rule (the item status state machine, the replay entry and its key,
// the replay step, record ids, the depth and its event, the compare-and-set
// round cap, the error kinds and messages) is the component's
// (`agent:recovery/dead-letters@0.3.0`, through `runtime.loop`); this file
// reads and writes the store and keeps the public API.

import { createHash } from 'node:crypto';
import { RAW, describe, parseLossless } from './json.js';
import { inputStep } from './step.js';
import { StoreError, asyncFace } from './store.js';
import { isComponentError } from './errors.js';
import { DEAD_LETTERS, NO_COMPENSATION, WITH_FIRST_STEP, sequence, then } from './run.js';
import { recordDeadLetterDepth } from './telemetry.js';
import { CLOSED_KEY, DEAD_LETTER_STREAM, ITEM_PREFIX } from './keys.js';

// The dead-letter stream, the item key prefix and the count of records
// replayed successfully or purged (docs/runtime.md, "Store keys").
export { CLOSED_KEY, DEAD_LETTER_STREAM, ITEM_PREFIX };
/** The recovery lease of a run (and of a replay run): `agent-recovery/recovering/<run_id>`. */
export const LEASE_PREFIX = 'agent-recovery/recovering/';

/** The statuses of an item (docs/durability.md §3, "Item status"). */
export const DEAD_LETTER_STATUSES = Object.freeze(['open', 'replay_requested', 'replayed', 'purged']);

/** The kinds of DeadLetterError. */
export const DEAD_LETTER_ERROR_KINDS = Object.freeze([
  'not_found', // no record with that id in the stream
  'invalid_argument', // a bad id, status, option or operations map: nothing changed
  'conflict', // the item's status does not allow it (replayed, purged, a replay pending), or another worker runs its replay
  'invalid_record', // the record cannot be replayed (written before record format 1: no `input`)
]);

/** A dead-letter operation could not be done. `kind` is one of DEAD_LETTER_ERROR_KINDS; the message ends with a hint. */
export class DeadLetterError extends Error {
  constructor(kind, message, options) {
    super(message, options);
    this.name = 'DeadLetterError';
    this.kind = kind;
  }
}

/**
 * The idempotency key of the `n`-th replay of a record whose key was `key`:
 * `hex(sha256(canonical_json(["agent-recovery/replay", key, n])))`
 * (docs/durability.md §3, "Replay"). The component derives the key a replay
 * runs under (and writes it in the item); this function computes it without a
 * runtime, to print or check it.
 */
export function replayKey(key, n) {
  if (typeof key !== 'string') throw new DeadLetterError('invalid_argument', `a replay key needs the original key as a string, got ${describe(key)}`);
  if (!Number.isSafeInteger(n) || n < 1) throw new DeadLetterError('invalid_argument', `a replay number is an integer from 1, got ${describe(n)}`);
  return createHash('sha256').update(JSON.stringify(['agent-recovery/replay', key, n]), 'utf8').digest('hex');
}

/** The WIT error kinds of `dead-letters@0.3.0` as DeadLetterError kinds. */
const KINDS = Object.freeze({ 'invalid-argument': 'invalid_argument', 'not-found': 'not_found', closed: 'conflict', conflict: 'conflict', 'invalid-record': 'invalid_record' });

/** A call of the component's dead-letter rules; its refusal as a DeadLetterError. */
function core(rt, what, call) {
  try {
    return rt.loop.deadLetters(what, call);
  } catch (e) {
    if (isComponentError(e)) throw fromCore(e.payload);
    throw e;
  }
}

const fromCore = (p) => new DeadLetterError(KINDS[p.kind] ?? 'invalid_argument', p.message);

/** `none` on the way in. */
const opt = (v) => (v === null || v === undefined ? undefined : v);

/** A record id as the decimal string the APIs use; throws on anything else. */
function recordId(rt, id) {
  const text = typeof id === 'number' && Number.isSafeInteger(id) ? String(id) : typeof id === 'string' ? id : describe(id);
  return String(core(rt, 'parse-id', (dl) => dl.parseId(text)));
}

/**
 * A stream's record count and last sequence number (0 when empty), read a page
 * at a time. Sequence numbers increase but need not start at 1 or be dense (the
 * Redis store starts a stream at its clock), so the count is not the last number.
 */
function* streamEnd(store, stream) {
  let count = 0;
  let last = 0;
  for (;;) {
    const page = yield store.read(stream, last, 4096);
    if (page.length === 0) return { count, last };
    count += page.length;
    last = page[page.length - 1][0];
  }
}

/** The last sequence number of a stream (0 when empty). */
export function streamLast(store, stream = DEAD_LETTER_STREAM) {
  return then(sequence(streamEnd(store, stream)), (end) => end.last);
}

/**
 * The depth: records in the dead-letter stream - `closed.count` (the
 * component's rule). Like every store helper here, a value on a store's
 * synchronous face and a promise on its asynchronous face (`asyncFace(store)`).
 */
export function depthOf(rt, store, nowMs) {
  return sequence(
    (function* () {
      const closed = yield store.get(CLOSED_KEY, nowMs);
      const { count } = yield* streamEnd(store, DEAD_LETTER_STREAM);
      return Number(core(rt, 'depth', (dl) => dl.depth(BigInt(count), opt(closed?.value))));
    })(),
  );
}

/** What a `casUpdate` change returns to leave the value as it is (nothing written). */
const UNCHANGED = Symbol('unchanged');

/**
 * Change the value of `key` by compare-and-set: `change(current)` (its text,
 * or undefined when absent) returns the next text, UNCHANGED, or throws;
 * repeated on a conflict, at most the component's `cas-rounds` times.
 */
function* casUpdate(rt, store, key, nowMs, change) {
  const rounds = core(rt, 'cas-rounds', (dl) => dl.casRounds());
  for (let round = 0; round < rounds; round++) {
    const cur = yield store.get(key, nowMs);
    const next = change(cur === null ? undefined : cur.value);
    if (next === UNCHANGED) return;
    const cas = yield store.compareAndSet(key, cur === null ? null : cur.version, next, null, nowMs);
    if (cas.written) return;
  }
  throw new StoreError('unavailable', core(rt, 'cas-exhausted', (dl) => dl.casExhausted(key)));
}

/** closed.count + 1, by compare-and-set. */
function closeOne(rt, store, nowMs) {
  return casUpdate(rt, store, CLOSED_KEY, nowMs, (cur) => core(rt, 'close-one', (dl) => dl.closeOne(cur)));
}

/** The component's `apply(action, ...)`: `{item, closes, entry}` (item/entry undefined for none). */
function apply(rt, action, rid, recordText, cur, nowMs) {
  return core(rt, 'apply', (dl) => dl.apply(action, BigInt(rid), recordText, cur, BigInt(nowMs)));
}

/** The pending replay entry of an item value (parsed), or undefined. */
function pendingEntry(rt, cur) {
  const text = core(rt, 'pending', (dl) => dl.pending(opt(cur)));
  return text === null || text === undefined ? undefined : JSON.parse(text);
}

/**
 * The `dead_letter_depth` event after record `seq` (its text) was appended,
 * when the threshold is set (the append effect's `depth_threshold`, the
 * loop's choice of the run configuration's and the policy document's; else
 * the run configuration's `dead_letter.depth_threshold`) and the depth crossed
 * it with this append (the component's `depth-event`); else undefined.
 * `{event, text}`; `t_ms` is that of the loop's `dead_letter` event just
 * before the append; `depthNow()` is the depth after the append (read only
 * when a threshold is set).
 */
export function depthEvent(rt, seq, recordText, tMs, depthNow, effectThreshold = undefined) {
  const threshold = effectThreshold ?? rt.depthThreshold;
  if (threshold === null || threshold === undefined) return undefined;
  const depth = depthNow();
  const text = core(rt, 'depth-event', (dl) => dl.depthEvent(BigInt(threshold), BigInt(depth), BigInt(tMs), BigInt(seq), recordText));
  if (text === null || text === undefined) return undefined;
  return { event: JSON.parse(text), text };
}

/**
 * The dead-letter queue of a runtime's store (`runtime.deadLetters`). Reads
 * need only the store; `replay` runs the record's step again through the
 * runtime (its clock, policy, configuration and events).
 */
export class DeadLetters {
  #rt;

  /** @internal use `runtime.deadLetters`. */
  constructor(runtime) {
    this.#rt = runtime;
  }

  get #store() {
    return this.#rt.store;
  }

  /** The store's asynchronous face (the paths that await: replay, recover). */
  get #async() {
    return asyncFace(this.#rt.store);
  }

  #now() {
    return this.#rt.clock.nowMs();
  }

  /** The record `id` as [parsed, raw text], or a not_found error (a promise of it on the asynchronous face). */
  #record(id, store = this.#store) {
    return then(store.read(DEAD_LETTER_STREAM, Number(id) - 1, 1), (rows) => {
      if (rows.length === 0 || rows[0][0] !== Number(id)) throw fromCore(core(this.#rt, 'not-found', (dl) => dl.notFound(id)));
      return [parseLossless(rows[0][1]), rows[0][1]];
    });
  }

  #item(id, recordText) {
    const v = this.#store.get(ITEM_PREFIX + id, this.#now());
    const item = JSON.parse(core(this.#rt, 'item', (dl) => dl.item(opt(v?.value))));
    return { id, status: item.status, record: parseLossless(recordText), replays: item.replays, ...(item.purged_ms === undefined ? {} : { purgedMs: item.purged_ms }) };
  }

  /**
   * Items `{id, status, record, replays}` in id order. `status`: one of
   * DEAD_LETTER_STATUSES or `'all'` (default: every item but the purged ones);
   * `after`: the id to start after (default: from the first); `limit`: at most
   * this many items (default: all).
   */
  list({ status, after, limit } = {}) {
    if (status !== undefined && status !== 'all' && !DEAD_LETTER_STATUSES.includes(status)) {
      throw new DeadLetterError('invalid_argument', `status must be one of ${DEAD_LETTER_STATUSES.join(', ')} or all, got ${describe(status)}`);
    }
    let from = 0;
    if (after !== undefined && after !== null && after !== 0 && after !== '0') from = Number(recordId(this.#rt, after));
    if (limit !== undefined && limit !== null && !(Number.isSafeInteger(limit) && limit >= 0)) {
      throw new DeadLetterError('invalid_argument', `limit must be a non-negative integer, got ${describe(limit)}`);
    }
    const max = limit ?? Number.MAX_SAFE_INTEGER;
    const out = [];
    const PAGE = 256;
    while (out.length < max) {
      const rows = this.#store.read(DEAD_LETTER_STREAM, from, PAGE);
      for (const [seq, text] of rows) {
        const item = this.#item(String(seq), text);
        const keep = status === 'all' || (status === undefined ? item.status !== 'purged' : item.status === status);
        if (keep) out.push(item);
        if (out.length >= max) break;
      }
      if (rows.length < PAGE) break;
      from = rows[rows.length - 1][0];
    }
    return out;
  }

  /** One item `{id, status, record, replays}`; a DeadLetterError `not_found` when there is no such record. */
  show(id) {
    const rid = recordId(this.#rt, id);
    const [, text] = this.#record(rid);
    return this.#item(rid, text);
  }

  /** The depth: records in the stream - records closed (replayed successfully or purged). */
  depth() {
    return depthOf(this.#rt, this.#store, this.#now());
  }

  /**
   * Give up on item `id`: status `purged` (+ `purged_ms`), `closed.count + 1`
   * (a replayed item was counted closed already). The record stays in the
   * stream (streams are append-only); `list` hides it. Purging a purged item
   * changes nothing. Returns the item.
   */
  purge(id) {
    const rt = this.#rt;
    const rid = recordId(rt, id);
    const [, text] = this.#record(rid);
    const now = this.#now();
    let closes = false;
    sequence(casUpdate(rt, this.#store, ITEM_PREFIX + rid, now, (cur) => {
      const change = apply(rt, 'purge', rid, text, cur, now);
      closes = change.closes;
      return change.item ?? UNCHANGED;
    }));
    if (closes) {
      sequence(closeOne(rt, this.#store, now));
      recordDeadLetterDepth(rt.telemetry, () => this.depth());
    }
    return this.#item(rid, text);
  }

  /**
   * Record a replay request: status `replay_requested` and a `replays` entry
   * `{n, key, run_id, requested_ms}` without an outcome, for any worker's
   * `runtime.recover(...)` to carry out. `conflict` when the item is purged,
   * replayed ok, or already has a request pending. Returns `{id, n, key, runId}`:
   * the key and run id the replay will use.
   */
  requestReplay(id) {
    const rid = recordId(this.#rt, id);
    const [, text] = this.#record(rid);
    const entry = this.#request(rid, text, 'request');
    return { id: rid, n: entry.n, key: entry.key, runId: entry.run_id };
  }

  /**
   * The component's `request` (a new replays entry) or `take` (the pending
   * one, else a new one) on the item; on `store`'s face (a promise of it on
   * the asynchronous one). Returns the entry.
   */
  #request(rid, recordText, action, store = this.#store) {
    const rt = this.#rt;
    const now = this.#now();
    let entry;
    const updated = sequence(casUpdate(rt, store, ITEM_PREFIX + rid, now, (cur) => {
      const change = apply(rt, action, rid, recordText, cur, now);
      entry = change.entry;
      return change.item ?? UNCHANGED;
    }));
    return then(updated, () => JSON.parse(entry));
  }

  /**
   * Replay record `id` now with these operations (tool name ->
   * `{operation, compensate?, checkpoint?}`): its `input` step runs again as
   * run `<run_id>/replay/<n>` under the replay key, the outcome is recorded on
   * the item (`replayed` and closed when the step ended ok, else back to
   * `open`; a failure is a new record with `replay_of`). A pending request is
   * carried out instead of a new one. Returns `{id, n, key, runId, outcome}`.
   */
  async replay(id, operations) {
    const rt = this.#rt;
    const rid = recordId(rt, id);
    const [record, text] = await this.#record(rid, this.#async);
    checkOperations(operations);
    core(rt, 'replay-step', (dl) => dl.replayStep(BigInt(rid), text, 1n));
    const tool = record.input?.tool;
    if (typeof tool === 'string' && operationsOf(operations, tool) === undefined) {
      throw new DeadLetterError('invalid_argument', `no operation for tool ${JSON.stringify(tool)} of dead-letter record ${rid}; pass {${JSON.stringify(tool)}: {operation}}`);
    }
    const entry = await this.#request(rid, text, 'take', this.#async);
    const done = await this.runPending(rid, record, entry, operations, text);
    if (done === undefined) {
      throw new DeadLetterError('conflict', `dead-letter ${rid}: replay ${entry.n} is being run by another worker (lease ${LEASE_PREFIX}${entry.run_id}); try later`);
    }
    return done;
  }

  /**
   * @internal Run the pending replay `entry` of record `rid` (`text`: the
   * record's JSON text) under its lease; undefined when another worker holds
   * the lease. Used by `replay` and by `runtime.recover` for requested replays.
   */
  async runPending(rid, record, entry, operations, text) {
    const rt = this.#rt;
    const store = this.#async;
    const lease = LEASE_PREFIX + entry.run_id;
    const start = this.#now();
    const ttl = rt.inFlightTtlMs;
    if (!(await takeLease(store, lease, start, ttl))) return undefined;
    let outcome;
    let events;
    let deadLetterId;
    try {
      // Another worker may have carried it out between our read and the lease.
      const now0 = this.#now();
      const cur = await store.get(ITEM_PREFIX + rid, now0);
      if (pendingEntry(rt, cur?.value)?.n !== entry.n) return undefined;
      const ops = operationsOf(operations, record.input.tool);
      const step = replayStep(rt, text, entry, rid, ops);
      // The run's `run` input carries the replayed step (one `advance` fewer).
      const run = rt.run(entry.run_id, { [WITH_FIRST_STEP]: true });
      const report = await run.step(step);
      outcome = report.outcome;
      if (!report.runFinished) await run.end();
      events = run.events;
      deadLetterId = run[DEAD_LETTERS].at(-1)?.id ?? null;
      const now = this.#now();
      let closes = false;
      await sequence(casUpdate(rt, store, ITEM_PREFIX + rid, now, (cur) => {
        const change = core(rt, 'finish', (dl) => dl.finish(opt(cur), BigInt(entry.n), outcome, BigInt(now)));
        closes = change.closes;
        return change.item ?? UNCHANGED;
      }));
      if (closes) {
        await sequence(closeOne(rt, store, now));
        await this.#recordDepth(now);
      }
    } finally {
      await store.delete(lease);
    }
    return { id: rid, n: entry.n, key: entry.key, runId: entry.run_id, outcome, deadLetterId, events };
  }

  /** The depth gauge, its store reads awaited (only when telemetry records). */
  async #recordDepth(now) {
    const tel = this.#rt.telemetry;
    if (tel === null || tel === undefined || tel.tel.inert()) return;
    let depth;
    try {
      depth = await depthOf(this.#rt, this.#async, now);
    } catch {
      return; // telemetry never fails what it observes
    }
    recordDeadLetterDepth(tel, () => depth);
  }

  /** @internal The items with a pending replay request: [{rid, record, text, entry}], in id order (awaits the store). */
  async pendingReplays() {
    const rt = this.#rt;
    const now = this.#now();
    const out = [];
    for (const key of await this.#async.keys(ITEM_PREFIX, now)) {
      const rid = key.slice(ITEM_PREFIX.length);
      const v = await this.#async.get(key, now);
      const entry = pendingEntry(rt, v?.value);
      if (entry === undefined) continue;
      let record;
      let text;
      try {
        [record, text] = await this.#record(recordId(rt, rid), this.#async);
        core(rt, 'replay-step', (dl) => dl.replayStep(BigInt(rid), text, BigInt(entry.n)));
      } catch (e) {
        if (e instanceof DeadLetterError) continue; // no record, or one a replay cannot run: nothing to run
        throw e;
      }
      out.push({ rid, record, text, entry });
    }
    return out.sort((a, b) => Number(a.rid) - Number(b.rid));
  }
}

/** Take a recovery lease (a claim: created only when absent or expired); false when another worker holds it. */
export async function takeLease(store, key, nowMs, ttlMs) {
  return (await store.compareAndSet(key, null, `{"since_ms":${nowMs},"pid":${process.pid}}`, ttlMs, nowMs)).written;
}

/** Check an operations map: tool name -> {operation, compensate?, checkpoint?}. */
export function checkOperations(operations) {
  if (operations === null || typeof operations !== 'object' || Array.isArray(operations)) {
    throw new DeadLetterError('invalid_argument', `operations must map each tool name to {operation, compensate?, checkpoint?}, got ${describe(operations)}`);
  }
  for (const [tool, ops] of Object.entries(operations)) {
    if (ops === null || typeof ops !== 'object' || typeof ops.operation !== 'function') {
      throw new DeadLetterError('invalid_argument', `operations[${JSON.stringify(tool)}] must be {operation, compensate?, checkpoint?} with operation a function, got ${describe(ops)}`);
    }
    for (const f of ['compensate', 'checkpoint']) {
      if (ops[f] !== undefined && ops[f] !== null && typeof ops[f] !== 'function') {
        throw new DeadLetterError('invalid_argument', `operations[${JSON.stringify(tool)}].${f} must be a function, got ${describe(ops[f])}`);
      }
    }
  }
}

/** The operations of `tool` (own members only: a tool named "constructor" is not Object's). */
export function operationsOf(operations, tool) {
  return Object.hasOwn(operations, tool) ? operations[tool] : undefined;
}

/**
 * The step of a replay: the component's `replay-step` (the record's `input`
 * as recorded, args byte for byte, plus `replay_of`) with the operations.
 */
function replayStep(rt, recordText, entry, rid, ops) {
  const input = parseLossless(core(rt, 'replay-step', (dl) => dl.replayStep(BigInt(rid), recordText, BigInt(entry.n))));
  const step = inputStep(input, input[RAW]?.args, {
    fallbacks: Array.isArray(input.fallbacks) ? input.fallbacks : [],
    operation: ops.operation,
    replayOf: input.replay_of,
  });
  // The flags as recorded (so the replay's step input is the record's): a
  // compensation the operations lack is answered `no_compensation`; a
  // missing checkpoint hook restores nothing.
  if (input.compensation === true) step.compensate = typeof ops.compensate === 'function' ? ops.compensate : NO_COMPENSATION;
  if (input.checkpoint === true) step.checkpoint = typeof ops.checkpoint === 'function' ? ops.checkpoint : () => false;
  return step;
}

export { StoreError };
