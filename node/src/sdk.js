// Adapters for the errors and results that client SDKs hand to the caller:
// the OpenAI and Anthropic Node SDKs (`openai`, `@anthropic-ai/sdk`), the MCP
// TypeScript SDK (`@modelcontextprotocol/sdk`) and the A2A JS SDK
// (`@a2a-js/sdk`). They are recognised by class name (the names on the
// prototype chain, and `err.name`), never by `instanceof`: this package does
// not depend on any SDK, and an SDK loaded twice (ESM and CJS builds, two
// versions in one tree) still names its classes the same way. Like the rest of
// observe.js, an adapter only copies facts into the observation's shape;
// classifying them is the policy's job.

/** How many levels of `cause` (and prototypes) are read at most. */
export const MAX_DEPTH = 8;

/**
 * Every class name of an error: `err.name`, then the name of each class on its
 * prototype chain, most derived first (`APIConnectionTimeoutError`,
 * `APIConnectionError`, `APIError`, `OpenAIError`, `Error`). Anthropic's SDK
 * also keeps the name in a static `_errorName`, which survives minifiers.
 * @param {unknown} err
 * @returns {string[]}
 */
export function classNames(err) {
  const names = [];
  if (err === null || typeof err !== 'object') return names;
  const add = (n) => {
    if (typeof n === 'string' && n !== '' && !names.includes(n)) names.push(n);
  };
  let proto;
  try {
    proto = Object.getPrototypeOf(err);
    for (let depth = 0; depth < MAX_DEPTH && proto && proto !== Object.prototype; depth++) {
      const ctor = Object.hasOwn(proto, 'constructor') ? proto.constructor : undefined;
      if (typeof ctor === 'function') {
        // Own only: a static is inherited, and a subclass without its own
        // `_errorName` would otherwise be named after its parent.
        if (Object.hasOwn(ctor, '_errorName')) add(ctor._errorName);
        add(ctor.name);
      }
      proto = Object.getPrototypeOf(proto);
    }
    // `name` last: it is often just "Error" (OpenAI's classes do not set it), and
    // A2A's JSON-RPC classes set it to the semantic name of their parent.
    const own = err.name;
    if (typeof own === 'string' && own !== '' && own !== 'Error') {
      const at = names.indexOf(own);
      if (at >= 0) names.splice(at, 1);
      names.unshift(own);
    }
  } catch {
    // A hostile proxy or getter: what was read so far is all there is.
  }
  return names;
}

/**
 * The most specific class name of an error: `err.name` unless it is the
 * generic "Error", else the constructor's name (`class ToolError extends
 * Error {}` keeps `name === "Error"`, its class says more).
 * @param {unknown} err
 */
export function className(err) {
  return classNames(err)[0] ?? 'Error';
}

/**
 * The `cause` chain of an error, the error itself first (at most MAX_DEPTH,
 * cycles cut).
 * @param {unknown} err
 * @returns {unknown[]}
 */
export function causeChain(err) {
  const chain = [];
  let e = err;
  while (chain.length < MAX_DEPTH && e !== undefined && e !== null && !chain.includes(e)) {
    chain.push(e);
    if (typeof e !== 'object') break;
    try {
      e = e.cause;
    } catch {
      break;
    }
  }
  return chain;
}

/** Which SDK an error comes from, by its base class, or undefined. */
export function sdkOf(err) {
  const names = classNames(err);
  if (names.includes('OpenAIError')) return 'openai';
  if (names.includes('AnthropicError')) return 'anthropic';
  if (names.includes('McpError')) return 'mcp';
  if (isA2aError(err, names)) return 'a2a';
  return undefined;
}

// The A2A JS SDK brands its errors with this symbol (src/errors/base.ts), so
// that `instanceof` survives the module being bundled twice.
const A2A_ERROR_BRAND = Symbol.for('@a2a-js/sdk.A2AError');

function isA2aError(err, names) {
  try {
    return (err && typeof err === 'object' && A2A_ERROR_BRAND in err) || names.includes('A2AError');
  } catch {
    return false;
  }
}

/** True when a cause-chain link is an abort with a timeout reason. */
function isTimeoutReason(e) {
  return className(e) === 'TimeoutError';
}

/**
 * The observation of an SDK error, or undefined when `err` is not from one of
 * the SDKs above. `opts.timedOut`: the caller's own deadline aborted the call.
 * @param {unknown} err
 * @param {{timeoutMs?: number, timedOut?: boolean}} opts
 */
export function fromSdkError(err, opts = {}) {
  const sdk = sdkOf(err);
  if (sdk === 'openai' || sdk === 'anthropic') return llmSdkError(sdk, err, opts);
  if (sdk === 'mcp') return mcpError(err);
  if (sdk === 'a2a') return a2aError(err);
  return undefined;
}

/**
 * OpenAI (openai/core/error.js) and Anthropic (@anthropic-ai/sdk/core/error.js)
 * share one hierarchy: APIError (status, headers, error) with a subclass per
 * status; APIConnectionError (cause: the fetch error); its subclass
 * APIConnectionTimeoutError (the SDK's own `timeout` option); APIUserAbortError
 * (the caller's signal aborted; OpenAI puts the signal's reason in `cause`).
 */
function llmSdkError(provider, err, { timeoutMs, timedOut }) {
  const names = classNames(err);
  const message = messageOf(err);
  if (names.includes('APIConnectionTimeoutError')) {
    return { source: 'timeout', phase: 'total', provider };
  }
  if (names.includes('APIUserAbortError')) {
    if (timedOut || causeChain(err).some(isTimeoutReason)) {
      return { source: 'timeout', phase: 'total', after_ms: timeoutMs, provider };
    }
    return { source: 'exception', type: 'AbortError', message, provider };
  }
  const status = err.status;
  if (Number.isInteger(status) && status >= 100 && status <= 999) {
    return { source: 'http', status, headers: err.headers, body: llmBody(provider, err.error), provider };
  }
  // A mid-stream error: the SDKs raise a bare APIError without a status for an
  // SSE `error` event (or a `data: {"error": ...}` chunk) in a stream that began
  // with a 200, keeping that response's headers and the event's error body.
  const body = err.error;
  if (names[0] === 'APIError' && body !== null && typeof body === 'object') {
    return { source: 'http', status: 200, headers: err.headers, body: llmBody(provider, body), provider };
  }
  if (names.includes('APIConnectionError')) {
    const net = networkOf(causeChain(err).slice(1));
    if (net !== undefined) return { ...net, provider };
    return { source: 'exception', type: 'APIConnectionError', message, provider };
  }
  // LengthFinishReasonError, ContentFilterFinishReasonError, ...: by class name,
  // under the SDK's module name as the Python SDK spells it.
  return { source: 'exception', type: `${provider}.${className(err)}`, message, provider };
}

/**
 * OpenAI's SDK keeps the body's `error` member (an object, or whatever the
 * server put there: `{"error": "rate_limit"}` keeps the string), so the body is
 * that member put back; Anthropic's keeps the whole body.
 */
function llmBody(provider, e) {
  if (e === undefined || e === null) return undefined;
  return provider === 'openai' ? { error: e } : e;
}

/**
 * The network code or timeout in a cause chain (links after the SDK's own):
 * a string `code` (undici's `UND_ERR_CONNECT_TIMEOUT`, libc's `ECONNREFUSED`),
 * the first error of an AggregateError (happy eyeballs), or a TimeoutError.
 */
export function networkOf(chain) {
  for (const e of chain) {
    if (e === null || typeof e !== 'object') continue;
    const code = stringField(e, 'code');
    if (code !== undefined) return { source: 'network', code, message: messageOf(e) };
    const errors = field(e, 'errors');
    if (Array.isArray(errors) && errors.length > 0) {
      const first = stringField(errors[0], 'code');
      if (first !== undefined) return { source: 'network', code: first, message: messageOf(errors[0]) };
    }
    if (isTimeoutReason(e)) return { source: 'timeout', phase: 'total' };
  }
  return undefined;
}

/**
 * McpError (sdk/dist/esm/types.js: `code`, `data`, and a message prefixed
 * "MCP error <code>: ") as the JSON-RPC error response it stands for; the
 * client's own request timeout is McpError -32001, a closed transport -32000.
 */
function mcpError(err) {
  const code = field(err, 'code');
  if (!Number.isInteger(code)) return { source: 'exception', type: className(err), message: messageOf(err) };
  let message = messageOf(err) ?? '';
  const prefix = `MCP error ${code}: `;
  if (message.startsWith(prefix)) message = message.slice(prefix.length);
  const error = { code, message };
  const data = field(err, 'data');
  if (data !== undefined) error.data = data;
  return { source: 'mcp', message: { jsonrpc: '2.0', id: null, error } };
}

/**
 * The JSON-RPC codes of the A2A errors (A2A specification, "JSON-RPC error
 * codes"; the SDK's `A2A_ERROR_CODE` in src/errors/json_rpc.ts), by the
 * semantic class name the SDK gives them on every transport.
 */
export const A2A_ERROR_CODES = Object.freeze({
  TaskNotFoundError: -32001,
  TaskNotCancelableError: -32002,
  PushNotificationNotSupportedError: -32003,
  UnsupportedOperationError: -32004,
  ContentTypeNotSupportedError: -32005,
  InvalidAgentResponseError: -32006,
  ExtendedAgentCardNotConfiguredError: -32007,
  ExtensionSupportRequiredError: -32008,
  VersionNotSupportedError: -32009,
  RequestMalformedError: -32602,
});

/**
 * An A2A SDK error: a JSON-RPC one keeps the code the server sent
 * (`envelopeCode`) and its `data`; a REST or gRPC one is mapped by class name
 * to the JSON-RPC code of the same error; one without either (a REST error of
 * no known kind) is its HTTP status, on an `agent` call.
 */
function a2aError(err) {
  const message = messageOf(err) ?? '';
  let code = field(err, 'envelopeCode');
  if (!Number.isInteger(code)) {
    const byName = classNames(err).map((n) => A2A_ERROR_CODES[n]);
    code = byName.find(Number.isInteger);
  }
  if (Number.isInteger(code)) {
    const error = { code, message };
    const data = field(err, 'data');
    if (data !== undefined) error.data = data;
    return { source: 'a2a', message: { jsonrpc: '2.0', id: null, error } };
  }
  const status = field(err, 'statusCode');
  if (Number.isInteger(status) && status >= 100 && status <= 999) {
    return { source: 'http', status, headers: field(err, 'headers'), call: 'agent', provider: 'a2a' };
  }
  return { source: 'exception', type: className(err), message };
}

/**
 * A2A TaskState (a2a.proto, `lf.a2a.v1.TaskState`): the JS SDK gives the
 * state as this enum's number; the wire JSON uses the name.
 */
export const A2A_TASK_STATES = Object.freeze([
  'TASK_STATE_UNSPECIFIED',
  'TASK_STATE_SUBMITTED',
  'TASK_STATE_WORKING',
  'TASK_STATE_COMPLETED',
  'TASK_STATE_FAILED',
  'TASK_STATE_CANCELED',
  'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_REJECTED',
  'TASK_STATE_AUTH_REQUIRED',
]);

/** States that are not a failure: a task in one of them is a success (or still running). */
const A2A_NOT_FAILED = new Set(['unspecified', 'submitted', 'working', 'completed', 'unknown', 'unrecognized']);

/**
 * An A2A Task or TaskStatusUpdateEvent (v1.0 objects from the JS SDK, with a
 * numeric state and `{content: {$case, value}}` parts, or v0.3 JSON with a
 * string state), or an SDK `SendMessageResponse`/`StreamResponse` (`{payload:
 * {$case: 'task' | 'statusUpdate', value}}`), as its wire JSON; undefined when
 * `v` is none of these or its state is not a failure.
 * @param {unknown} v
 */
export function a2aTaskOf(v) {
  if (v === null || typeof v !== 'object') return undefined;
  const payload = field(v, 'payload');
  if (payload && typeof payload === 'object' && (payload.$case === 'task' || payload.$case === 'statusUpdate')) {
    return a2aTaskOf(payload.value);
  }
  const status = field(v, 'status');
  if (status === null || typeof status !== 'object') return undefined;
  // A Task and a status-update event both carry a contextId (required in v0.3
  // and v1.0): without it, `{id, status: {state: 'failed'}}` is some other job.
  const hasId = typeof field(v, 'id') === 'string' || typeof field(v, 'taskId') === 'string';
  if (!hasId || typeof field(v, 'contextId') !== 'string') return undefined;
  let state = field(status, 'state');
  if (Number.isInteger(state)) state = A2A_TASK_STATES[state] ?? 'UNRECOGNIZED';
  if (typeof state !== 'string') return undefined;
  const lower = state.toLowerCase();
  const short = lower.replace(/^task_state_/, '').replaceAll('_', '-');
  if (A2A_NOT_FAILED.has(short)) return undefined;
  const wire = { status: { state } };
  for (const k of ['id', 'taskId', 'contextId', 'kind']) {
    const x = field(v, k);
    if (typeof x === 'string') wire[k] = x;
  }
  const msg = field(status, 'message');
  const parts = msg && typeof msg === 'object' ? field(msg, 'parts') : undefined;
  if (Array.isArray(parts)) wire.status.message = { parts: parts.map(a2aPart).filter((p) => p !== undefined) };
  const timestamp = field(status, 'timestamp');
  if (typeof timestamp === 'string') wire.status.timestamp = timestamp;
  return wire;
}

/** A v1.0 SDK part (`{content: {$case: 'text' | 'data', value}}`) or a v0.3 one, as wire JSON. */
function a2aPart(p) {
  if (p === null || typeof p !== 'object') return undefined;
  const content = field(p, 'content');
  if (content && typeof content === 'object' && typeof content.$case === 'string') {
    if (content.$case === 'text' && typeof content.value === 'string') return { text: content.value };
    if (content.$case === 'data') return { data: content.value };
    return undefined; // raw bytes and URLs say nothing about the failure
  }
  if (typeof p.text === 'string') return { text: p.text };
  if (p.data !== undefined) return { data: p.data };
  return undefined;
}

function messageOf(e) {
  const m = field(e, 'message');
  return typeof m === 'string' ? m : undefined;
}

function stringField(o, k) {
  const v = field(o, k);
  return typeof v === 'string' && v !== '' ? v : undefined;
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
