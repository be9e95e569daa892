// Turning what a Node caller saw fail into an observation (the JSON input of
// classify / decide). These helpers only copy facts into the observation's
// shape; classifying them is the policy's job.

import { describeError, isAiSdkError } from './exception.js';
import { a2aTaskOf, causeChain, className, classNames, fromSdkError, networkOf, sdkOf } from './sdk.js';

const PROGRAMMING_ERRORS = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError']);

/** Text bodies are cut at this many characters by default. */
export const MAX_BODY_CHARS = 1 << 20;

/**
 * An `http` observation from a fetch `Response` (status, headers, body text).
 * Reads the body; a body that cannot be read is left out.
 * @param {Response} res
 * @param {{call?: string, provider?: string, requestId?: string, maxBodyChars?: number}} [options]
 */
export async function fromResponse(res, { call, provider, requestId, maxBodyChars = MAX_BODY_CHARS } = {}) {
  let body;
  try {
    body = await res.text();
  } catch {
    body = undefined;
  }
  if (typeof body === 'string' && body.length > maxBodyChars) body = body.slice(0, maxBodyChars);
  if (body === '') body = undefined;
  return clean({
    source: 'http',
    status: res.status,
    headers: headersOf(res.headers),
    body,
    call,
    provider,
    request_id: requestId,
  });
}

/**
 * An observation from a thrown error, read by class name and `cause` chain:
 * - an error carrying its own `observation` object is taken as is;
 * - an OpenAI, Anthropic, MCP or A2A SDK error -> its adapter (see sdk.js and
 *   the README): `APIConnectionTimeoutError` -> `timeout`, `APIError` with a
 *   status -> `http` with the SDK's headers and error body, `McpError` ->
 *   `mcp`, A2A errors -> `a2a`, ...;
 * - with `timedOut` (the caller's own deadline aborted the call): any abort
 *   (`AbortError`, `TimeoutError`, `APIUserAbortError`, anywhere in the
 *   chain) -> `timeout` (phase `total`, `after_ms` = `timeoutMs`);
 * - a Vercel AI SDK error (`AI_APICallError`, `AI_RetryError`, ...) ->
 *   `exception` with its `name` as `type`, `statusCode`, `responseHeaders`,
 *   `responseBody` and `isRetryable` as `status`, `headers`, `body` and
 *   `retryable`, its `cause` and its `errors` (a RetryError's attempts) as
 *   `cause` and `exceptions` (see exception.js);
 * - `TimeoutError` (AbortSignal.timeout) -> `timeout` (phase `total`);
 * - any other error with an HTTP `status` -> `http`;
 * - a system or undici error code on the error or in its cause chain, up to
 *   the first SDK error or error with a status in it (`TypeError: fetch
 *   failed` caused by `ECONNRESET`) -> `network`;
 * - anything else -> `exception` with the error's most specific class name,
 *   and the observations of its `cause` and of its `errors` (AggregateError).
 * An error that throws while being read (a hostile getter or proxy) is
 * `{source: 'exception', type: 'Error'}`.
 * @param {unknown} err
 * @param {{call?: string, provider?: string, requestId?: string, timeoutMs?: number, timedOut?: boolean}} [options]
 */
export function fromError(err, { call, provider, requestId, timeoutMs, timedOut = false } = {}) {
  const extra = clean({ call, provider, request_id: requestId });
  return observeSafe(err, extra, timeoutMs, timedOut, 0, []);
}

function observeSafe(err, extra, timeoutMs, timedOut, depth, above) {
  try {
    return observe(err, extra, timeoutMs, timedOut, depth, above);
  } catch {
    // A getter or proxy that throws while being read: never crash the caller's
    // recovery path over it. The documented fallback is a bare exception.
    return { source: 'exception', type: 'Error', ...extra };
  }
}

/** The observation of a cause or a member, `depth` levels down. */
function nested(err, depth, above) {
  return observeSafe(err, {}, undefined, false, depth, above);
}

/** An error that its own adapter reads (an SDK error, an error with a status): a network code under it is not the failure. */
function isStructured(e) {
  if (e === null || typeof e !== 'object') return false;
  try {
    if (sdkOf(e) !== undefined || isAiSdkError(e)) return true;
    const status = e.status ?? e.statusCode;
    return Number.isInteger(status) && status >= 100 && status <= 999;
  } catch {
    return false; // a throwing getter: not read as a response
  }
}

function observe(err, extra, timeoutMs, timedOut, depth, above) {
  if (err && typeof err === 'object' && err.observation && typeof err.observation === 'object') {
    return clean({ ...extra, ...err.observation });
  }
  if (timedOut && causeChain(err).some(isAbort)) {
    return clean({ source: 'timeout', phase: 'total', after_ms: timeoutMs, ...sdkProvider(err), ...extra });
  }
  const sdk = fromSdkError(err, { timeoutMs, timedOut });
  if (sdk !== undefined) {
    if (sdk.headers !== undefined) sdk.headers = headersOf(sdk.headers);
    return clean({ ...sdk, ...extra });
  }
  if (isAiSdkError(err)) return clean({ ...describeError(err, nested, depth, above), ...extra });
  const name = className(err);
  const message = typeof err?.message === 'string' ? err.message : err === undefined || err === null ? undefined : String(err);
  if (name === 'TimeoutError') {
    return clean({ source: 'timeout', phase: 'total', after_ms: timeoutMs, ...extra });
  }
  const status = err?.status ?? err?.statusCode;
  if (Number.isInteger(status) && status >= 100 && status <= 999) {
    return clean({ source: 'http', status, headers: headersOf(err.headers), body: sdkBody(err), ...extra });
  }
  // A TypeError with its own ERR_* code is a bug in the caller, not the network.
  let chain = causeChain(err);
  const structured = chain.findIndex((e, i) => i > 0 && isStructured(e));
  if (structured > 0) chain = chain.slice(0, structured);
  const net = networkOf(PROGRAMMING_ERRORS.has(name) ? chain.slice(1) : chain);
  if (net !== undefined) {
    if (net.source === 'timeout') return clean({ ...net, after_ms: timeoutMs, ...extra });
    return clean({ source: 'network', code: net.code, message, ...extra });
  }
  return clean({ ...describeError(err, nested, depth, above), ...extra });
}

/** An abort: a DOM AbortError / TimeoutError, an SDK's APIUserAbortError, undici's abort code. */
function isAbort(e) {
  const names = classNames(e);
  if (names.some((n) => ABORTS.has(n))) return true;
  const code = e && typeof e === 'object' ? e.code : undefined;
  return code === 'ABORT_ERR' || code === 'UND_ERR_ABORTED';
}

const ABORTS = new Set(['AbortError', 'TimeoutError', 'APIUserAbortError']);

/** `{provider}` for an OpenAI or Anthropic SDK error. */
function sdkProvider(err) {
  const sdk = sdkOf(err);
  return sdk === 'openai' || sdk === 'anthropic' ? { provider: sdk } : {};
}

/**
 * The default test for a returned (not thrown) failure: a fetch Response that
 * is not ok, an MCP `CallToolResult` with `isError: true`, an A2A Task or
 * status-update event in a failed, rejected, canceled, input-required or
 * auth-required state (the A2A JS SDK's objects, or v0.3 JSON), or a JSON-RPC
 * response with an `error`. Returns an observation, or undefined for success.
 * An MCP result and an A2A task are sent wrapped in a JSON-RPC response
 * (`id: null`), the form every released policy reads.
 */
export async function failureOf(result, options = {}) {
  if (result === null || typeof result !== 'object') return undefined;
  if (isResponse(result)) return result.ok ? undefined : fromResponse(result, options);
  const extra = { call: options.call, provider: options.provider, request_id: options.requestId };
  if (result.isError === true && Array.isArray(result.content)) {
    return clean({ source: 'mcp', message: { jsonrpc: '2.0', id: null, result }, ...extra });
  }
  const task = a2aTaskOf(result);
  if (task !== undefined) {
    return clean({ source: 'a2a', message: { jsonrpc: '2.0', id: null, result: task }, ...extra });
  }
  if (result.jsonrpc === '2.0' && result.error && typeof result.error === 'object') {
    return clean({ source: 'jsonrpc', message: result, ...extra });
  }
  return undefined;
}

function isResponse(v) {
  return typeof v.status === 'number' && typeof v.ok === 'boolean' && typeof v.text === 'function' && v.headers;
}

/** The body of an SDK's API error, as the provider sent it. */
function sdkBody(err) {
  if (err.body !== undefined) return err.body;
  const e = err.error;
  if (e === undefined || e === null) return undefined;
  // OpenAI's SDK keeps the inner `error` object, Anthropic's the whole body.
  if (typeof e === 'object' && !('error' in e) && e.type !== 'error') return { error: e };
  return e;
}

/** Headers (a fetch Headers, a Map, an array of pairs or a plain object) as an object. */
export function headersOf(h) {
  if (h === undefined || h === null) return undefined;
  const out = {};
  if (typeof h.forEach === 'function' && !Array.isArray(h)) {
    h.forEach((v, k) => {
      out[k] = String(v);
    });
    return out;
  }
  const entries = Array.isArray(h) ? h : Object.entries(h);
  for (const [k, v] of entries) {
    if (v !== undefined && v !== null) out[k] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}

function clean(o) {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}
