// The `exception` observation of a thrown error, read fully:
//
//   {source: 'exception', type, message, status?, headers?, body?, retryable?,
//    cause?, exceptions?}
//
// `status`, `headers` and `body` are the HTTP response the error carries (the
// Vercel AI SDK's `statusCode` / `responseHeaders` / `responseBody`, or plain
// `status` / `headers` / `body`); `retryable` is the framework's own verdict
// (`isRetryable`); `cause` is the observation of `err.cause` (a RetryError's
// `lastError`); `exceptions` those of `err.errors` (an AggregateError, the AI
// SDK's RetryError). Members the error does not carry are left out. Nothing
// here classifies.
//
// Every read is guarded (a throwing getter is skipped) and what is copied is
// bounded: MAX_DEPTH levels of causes and members below the error,
// MAX_MEMBERS members, a body of MAX_EXCEPTION_BODY_CHARS characters, cycles
// cut.

import { MAX_DEPTH, className } from './sdk.js';

/** How many members of `errors` are read: the first ones and the last (a RetryError's `lastError`). */
export const MAX_MEMBERS = 16;
/** How many characters of a body are copied; a longer text body is cut and kept as text. */
export const MAX_EXCEPTION_BODY_CHARS = 64 * 1024;
const MAX_MESSAGE_CHARS = 2000;
const MAX_HEADERS = 256;
const MAX_JSON_DEPTH = 32;
const MAX_JSON_ITEMS = 1000;

// The AI SDK marks every error it makes (AISDKError in @ai-sdk/provider), so
// that its errors are recognised across package copies and versions.
const AI_SDK_MARKER = Symbol.for('vercel.ai.error');

/** True for an error made by the Vercel AI SDK (`ai`, `@ai-sdk/*`). */
export function isAiSdkError(err) {
  try {
    return err !== null && typeof err === 'object' && err[AI_SDK_MARKER] === true;
  } catch {
    return false;
  }
}

/**
 * The `exception` observation of `err`. `nested(error, depth, above)` gives the
 * observation of a cause or a member; `above` holds the errors it is nested in.
 * @param {unknown} err
 * @param {(e: unknown, depth: number, above: unknown[]) => object} nested
 * @param {number} depth
 * @param {unknown[]} above
 */
export function describeError(err, nested, depth, above) {
  const obs = { source: 'exception', type: className(err) };
  const message = messageOf(err);
  if (message !== undefined) obs.message = message;
  if (err === null || typeof err !== 'object') return obs;
  const status = statusOf(field(err, 'statusCode')) ?? statusOf(field(err, 'status'));
  if (status !== undefined) obs.status = status;
  const headers = lowerHeaders(field(err, 'responseHeaders') ?? field(err, 'headers'));
  if (headers !== undefined) obs.headers = headers;
  const aiSdk = isAiSdkError(err);
  let body = bodyOf(field(err, 'responseBody') ?? field(err, 'body'));
  // The AI SDK keeps the provider's parsed error in `data` too (APICallError).
  if (body === undefined && aiSdk) body = bodyOf(field(err, 'data'));
  if (body !== undefined) obs.body = body;
  const retryable = field(err, 'isRetryable') ?? field(err, 'retryable');
  if (typeof retryable === 'boolean') obs.retryable = retryable;
  if (depth >= MAX_DEPTH) return obs;
  const inner = [...above, err];
  let cause = field(err, 'cause');
  // A RetryError has no `cause`; its `lastError` is what ended the retries.
  if ((cause === undefined || cause === null) && aiSdk) cause = field(err, 'lastError');
  if (cause !== undefined && cause !== null && !inner.includes(cause)) obs.cause = nested(cause, depth + 1, inner);
  const errors = field(err, 'errors');
  if (Array.isArray(errors)) {
    let members = errors.filter((e) => e !== undefined && e !== null && !inner.includes(e));
    if (members.length > MAX_MEMBERS) members = [...members.slice(0, MAX_MEMBERS - 1), members[members.length - 1]];
    if (members.length > 0) obs.exceptions = members.map((e) => nested(e, depth + 1, inner));
  }
  return obs;
}

function messageOf(err) {
  let m;
  if (err !== null && typeof err === 'object') m = field(err, 'message');
  else if (err !== undefined && err !== null) m = String(err);
  return typeof m === 'string' ? m.slice(0, MAX_MESSAGE_CHARS) : undefined;
}

function statusOf(v) {
  return Number.isInteger(v) && v >= 100 && v <= 599 ? v : undefined;
}

/** Headers (a fetch Headers, a Map, pairs or a plain object) with lower-case names and string values. */
export function lowerHeaders(h) {
  if (h === undefined || h === null || typeof h !== 'object') return undefined;
  try {
    const out = {};
    let n = 0;
    const add = (k, v) => {
      if (v === undefined || v === null || n >= MAX_HEADERS) return;
      n += 1;
      const key = String(k).toLowerCase();
      const value = Array.isArray(v) ? v.map(String).join(', ') : String(v);
      out[key] = Object.hasOwn(out, key) ? `${out[key]}, ${value}` : value;
    };
    if (typeof h.forEach === 'function' && !Array.isArray(h)) {
      h.forEach((v, k) => add(k, v));
    } else if (Array.isArray(h)) {
      for (const pair of h.slice(0, MAX_HEADERS)) {
        if (Array.isArray(pair)) add(pair[0], pair[1]);
      }
    } else {
      for (const [k, v] of Object.entries(h)) add(k, v);
    }
    return out;
  } catch {
    return undefined;
  }
}

/**
 * A body as the observation carries it: JSON text parsed, other text kept (cut
 * to MAX_EXCEPTION_BODY_CHARS), bytes decoded as UTF-8, a JSON value copied
 * within bounds; undefined for none or anything else.
 */
export function bodyOf(v) {
  if (v === undefined || v === null) return undefined;
  if (v instanceof Uint8Array || v instanceof ArrayBuffer) {
    const bytes = v instanceof ArrayBuffer ? new Uint8Array(v) : v;
    return bodyOf(new TextDecoder().decode(bytes.subarray(0, MAX_EXCEPTION_BODY_CHARS * 4)));
  }
  if (typeof v === 'string') {
    if (v === '') return undefined;
    if (v.length > MAX_EXCEPTION_BODY_CHARS) return v.slice(0, MAX_EXCEPTION_BODY_CHARS);
    try {
      return JSON.parse(v);
    } catch {
      return v;
    }
  }
  try {
    return jsonCopy(v, { chars: MAX_EXCEPTION_BODY_CHARS, items: MAX_JSON_ITEMS }, 0);
  } catch {
    return undefined;
  }
}

/** A bounded copy of a JSON value; throws when it is not JSON or too large. */
function jsonCopy(v, budget, depth) {
  if (depth > MAX_JSON_DEPTH || --budget.items < 0) throw new RangeError('body too large');
  if (v === null || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError('not JSON');
    return v;
  }
  if (typeof v === 'string') {
    budget.chars -= v.length;
    if (budget.chars < 0) throw new RangeError('body too large');
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => jsonCopy(x, budget, depth + 1));
  const proto = Object.getPrototypeOf(v);
  if (typeof v === 'object' && (proto === Object.prototype || proto === null)) {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) continue;
      budget.chars -= k.length;
      out[k] = jsonCopy(x, budget, depth + 1);
    }
    return out;
  }
  throw new TypeError('not JSON');
}

/** `o[k]`, or undefined when reading it throws (a getter, a revoked proxy). */
function field(o, k) {
  if (o === null || (typeof o !== 'object' && typeof o !== 'function')) return undefined;
  try {
    return o[k];
  } catch {
    return undefined;
  }
}
