// Turning what a Node caller saw fail into an observation (the JSON input of
// classify / decide). These helpers only copy facts into the observation's
// shape; classifying them is the policy's job.

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
 * An observation from a thrown error:
 * - `TimeoutError` (AbortSignal.timeout) -> `timeout` (phase `total`);
 * - an SDK error with an HTTP `status` (OpenAI, Anthropic clients) -> `http`,
 *   with the SDK's `headers` and error body;
 * - a system or undici error code (`err.code`, or `err.cause.code` as fetch
 *   reports them: `TypeError: fetch failed` caused by `ECONNRESET`) -> `network`;
 * - anything else -> `exception` with the error's name.
 * An error carrying its own `observation` object is taken as is.
 * @param {unknown} err
 * @param {{call?: string, provider?: string, requestId?: string, timeoutMs?: number}} [options]
 */
export function fromError(err, { call, provider, requestId, timeoutMs } = {}) {
  const extra = { call, provider, request_id: requestId };
  if (err && typeof err === 'object' && err.observation && typeof err.observation === 'object') {
    return clean({ ...extra, ...err.observation });
  }
  const name = errorName(err);
  const message = err instanceof Error ? err.message : err === undefined ? undefined : String(err);
  if (name === 'TimeoutError') {
    return clean({ source: 'timeout', phase: 'total', after_ms: timeoutMs, ...extra });
  }
  const status = err?.status ?? err?.statusCode;
  if (Number.isInteger(status) && status >= 100 && status <= 999) {
    return clean({ source: 'http', status, headers: headersOf(err.headers), body: sdkBody(err), ...extra });
  }
  const code = networkCode(err);
  if (code !== undefined) {
    return clean({ source: 'network', code, message, ...extra });
  }
  return clean({ source: 'exception', type: name, message, ...extra });
}

/**
 * The default test for a returned (not thrown) failure: a fetch Response that
 * is not ok, an MCP `CallToolResult` with `isError: true`, or a JSON-RPC
 * response with an `error`. Returns an observation, or undefined for success.
 */
export async function failureOf(result, options = {}) {
  if (result === null || typeof result !== 'object') return undefined;
  if (isResponse(result)) return result.ok ? undefined : fromResponse(result, options);
  const extra = { call: options.call, provider: options.provider, request_id: options.requestId };
  if (result.isError === true && Array.isArray(result.content)) {
    return clean({ source: 'mcp', message: { jsonrpc: '2.0', id: null, result }, ...extra });
  }
  if (result.jsonrpc === '2.0' && result.error && typeof result.error === 'object') {
    return clean({ source: 'jsonrpc', message: result, ...extra });
  }
  return undefined;
}

function isResponse(v) {
  return typeof v.status === 'number' && typeof v.ok === 'boolean' && typeof v.text === 'function' && v.headers;
}

function errorName(err) {
  if (err instanceof Error || (err && typeof err === 'object' && typeof err.name === 'string')) {
    return err.name || err.constructor?.name || 'Error';
  }
  return 'Error';
}

/** A system/undici code on the error or on its causes (at most 4 deep). */
function networkCode(err) {
  let e = err;
  for (let depth = 0; depth < 4 && e && typeof e === 'object'; depth++) {
    // A TypeError with its own ERR_* code is a bug in the caller, not the network.
    const own = depth > 0 || !PROGRAMMING_ERRORS.has(errorName(e));
    if (own && typeof e.code === 'string' && e.code !== '') return e.code;
    // AggregateError (happy eyeballs): take the first error's code.
    if (Array.isArray(e.errors) && e.errors.length > 0 && typeof e.errors[0]?.code === 'string') return e.errors[0].code;
    e = e.cause;
  }
  return undefined;
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
