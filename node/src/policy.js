// The Policy: an idiomatic face on one loaded component, with hot swap.
//
// Every object-returning method is built on the component's JSON entry points
// (JSON.parse of the text it printed), so Node, Rust and Python see the same
// data. The *Json methods return that text unchanged.

import { PolicyError, PolicyLoadError, PolicyRuntimeError } from './errors.js';
import { PolicyInstance } from './instance.js';
import { policyTelemetry } from './telemetry.js';
import { describe, seedText, stringify } from './json.js';
import { verify } from './verify.js';
import { requireSignatureOption } from './signing.js';

/**
 * The render formats: those of the 0.1 contract (WIT `render-format`), then
 * those reached by name through the 0.2 `runtime` interface (`render-named`).
 */
export const RENDER_FORMATS = Object.freeze([
  'jsonrpc-error',
  'mcp-tool-result',
  'a2a-task-status',
  'problem-json',
  'model-tool-result',
  'coordinator-text',
  'downstream-wrap',
  'ag-ui-run-error',
]);
/** The formats not in the 0.1 `render-format` enum: rendered through `render-named`. */
const NAMED_ONLY = new Set(['ag-ui-run-error']);

const CALL_KINDS = ['tool', 'llm', 'agent'];
const U32_MAX = 2 ** 32 - 1;
const U64_MAX = (1n << 64n) - 1n;
const token = Symbol('Policy.load');

/**
 * Load, validate and return a candidate. Every failure is a PolicyLoadError
 * whose `reason` names the step that refused it.
 */
async function prepare(source, options) {
  const { sha256, smokeTests, verify: check = true, maxInputBytes = MAX_INPUT_BYTES } = options ?? {};
  if (!Number.isSafeInteger(maxInputBytes) || maxInputBytes < 0) {
    throw new PolicyError('invalid_argument', `maxInputBytes must be a non-negative integer, got ${describe(maxInputBytes)}`);
  }
  const requireSignature = requireSignatureOption(options?.requireSignature);
  let instance;
  try {
    instance = await PolicyInstance.load(source, { sha256, requireSignature });
  } catch (e) {
    if (e instanceof PolicyLoadError) throw e;
    throw new PolicyLoadError('instantiate', `the component failed while starting (${e.message})`, { cause: e });
  }
  if (check !== false) verify(instance, smokeTests);
  instance.maxInputBytes = maxInputBytes;
  return instance;
}

/** The default limit on one input (observation, context, envelope, args), as in Rust and Python. */
export const MAX_INPUT_BYTES = 16 << 20;

/** Refuse text over the active policy's input limit (UTF-8 bytes), before the component sees it. */
function fits(active, value, what) {
  const max = active.maxInputBytes;
  if (value.length * 3 <= max) return value;
  const size = Buffer.byteLength(value, 'utf8');
  if (size > max) {
    throw new PolicyError(
      'too_large',
      `${what} is ${size} bytes, over the ${max}-byte input limit; truncate large bodies before asking the policy (or raise maxInputBytes)`,
      { code: 'input-too-large' },
    );
  }
  return value;
}

export class Policy {
  #active;
  #swaps = Promise.resolve();
  /** Swaps and refusals as OpenTelemetry span events and a counter, or null (off). */
  #tel;

  /** Use `Policy.load()`. */
  constructor(key, instance, tel = null) {
    if (key !== token) throw new TypeError('use `await Policy.load(source?)` to create a Policy');
    this.#active = instance;
    this.#tel = tel;
  }

  /**
   * Load a policy component and validate it (its smoke set must pass).
   * No source: the shipped reference (gen/, made by `npm run build`).
   * A path, file URL, Uint8Array or ArrayBuffer: that component, transpiled in-process.
   *
   * Options (all optional): `sha256` pins the component's digest (64 hex digits,
   * with or without `sha256:`); `smokeTests` adds cases to its own smoke set;
   * `verify: false` skips the smoke set (tests, or forcing a policy in by hand);
   * `maxInputBytes` (default 16 MiB) refuses larger inputs with `input-too-large`;
   * `requireSignature: {trustedKeys, signature?}` refuses a component without a
   * valid Ed25519 signature by one of `trustedKeys` (PEM text or KeyObjects):
   * a path's signature is read from `PATH.sig`, bytes need `signature` (the
   * `.sig` text); a refusal is a SignatureError, code `signature` (docs/signing.md);
   * `isolate: 'worker'` runs the component in a worker thread with a deadline of
   * `timeoutMs` (default 1000) per call and `loadTimeoutMs` (default 30 000)
   * for the load: the result is an IsolatedPolicy whose methods return
   * promises (see README, "Untrusted policies").
   * `telemetry` (default `Telemetry.global()`, read now; `Telemetry.off()`;
   * `new Telemetry({meterProvider})`): each swap and refusal is a span event on
   * the span active when `swap()` is called and counts in
   * `agent_recovery.policy.swaps` (docs/telemetry.md, "Policy swaps"); an
   * IsolatedPolicy has no swap and ignores it.
   * @param {string | URL | Uint8Array | ArrayBuffer} [source]
   * @param {{sha256?: string, requireSignature?: {trustedKeys: Array<string | Buffer | import('node:crypto').KeyObject>, signature?: string | Uint8Array}, smokeTests?: object[] | string, verify?: boolean, maxInputBytes?: number, isolate?: 'worker', timeoutMs?: number, loadTimeoutMs?: number, telemetry?: object}} [options]
   */
  static async load(source, options) {
    const { telemetry, ...rest } = options ?? {};
    const tel = policyTelemetry(telemetry);
    if (rest.isolate !== undefined && rest.isolate !== 'in-process') {
      if (rest.isolate !== 'worker') {
        throw new PolicyError('invalid_argument', `isolate must be 'worker' or 'in-process', got ${describe(rest.isolate)}`);
      }
      const { IsolatedPolicy } = await import('./isolated.js');
      return IsolatedPolicy.load(source, rest);
    }
    return new Policy(token, await prepare(source, rest), tel);
  }

  /**
   * Replace the active component. The candidate is loaded and validated first
   * (digest pin, imports, instantiation, contract, info, smoke set); only then is
   * it switched in, in one assignment. On any failure the old policy stays active
   * and the PolicyLoadError says why. Swaps run one at a time, in call order.
   * @returns {Promise<object>} `describe()` of the new policy
   */
  swap(source, options) {
    const tel = this.#tel;
    const cx = tel?.context();
    const run = this.#swaps.then(async () => {
      let candidate;
      try {
        candidate = await prepare(source, options);
      } catch (e) {
        tel?.refused(cx, this.#active.identity, e);
        throw e;
      }
      const previous = this.#active.identity;
      this.#active = candidate;
      tel?.swapped(cx, previous, candidate.identity);
      return this.describe();
    });
    this.#swaps = run.catch(() => {});
    return run;
  }

  /** Who answers: name, version, contract, description, sha256, size, source, loadedAt, traps. */
  describe() {
    const p = this.#active;
    return { ...p.identity, traps: p.traps };
  }

  /** The component's `meta.info()`: name, version, contract, description. */
  info() {
    const { name, version, contract, description } = this.#active.identity;
    return { name, version, contract, description };
  }

  /** The component's smoke set, parsed. */
  smokeTests() {
    const active = this.#active;
    return parseOutput(active, 'smokeTests', active.call('smokeTests', (api) => api.smokeTests()));
  }

  /** classify-json: the envelope as the component printed it. */
  classifyJson(observation) {
    text(observation, 'classifyJson', 'observation');
    const active = this.#active;
    fits(active, observation, 'observation');
    return active.call('classifyJson', (api) => api.classifyJson(observation));
  }

  /** decide-json: the decision as the component printed it (context defaults to `{}`). */
  decideJson(observation, context = '{}') {
    text(observation, 'decideJson', 'observation');
    text(context, 'decideJson', 'context');
    const active = this.#active;
    fits(active, observation, 'observation');
    fits(active, context, 'context');
    return active.call('decideJson', (api) => api.decideJson(observation, context));
  }

  /** Classify an observation (object, or JSON text); returns the envelope object. */
  classify(observation) {
    const obs = jsonText(observation, 'observation', 'invalid_observation');
    const active = this.#active;
    fits(active, obs, 'observation');
    return parseOutput(active, 'classifyJson', active.call('classifyJson', (api) => api.classifyJson(obs)));
  }

  /**
   * Decide the next step for an observation (object, or JSON text). `context`
   * (object, or JSON text) uses the JSON field names (`attempt`, `elapsed_ms`,
   * `seed`, ...); a seed may be a bigint or a decimal string. The result
   * carries `policy: {name, version, sha256}`.
   */
  decide(observation, context) {
    const obs = jsonText(observation, 'observation', 'invalid_observation');
    const ctx = typeof context === 'string' ? context : contextText(context);
    const active = this.#active;
    fits(active, obs, 'observation');
    fits(active, ctx, 'context');
    const out = parseOutput(active, 'decideJson', active.call('decideJson', (api) => api.decideJson(obs, ctx)));
    out.policy = active.stamp;
    return out;
  }

  /** The full-jitter delay in ms before the retry that follows failed attempt `attempt`. */
  backoff({ call, attempt, seed, config } = {}) {
    if (!CALL_KINDS.includes(call)) {
      throw new PolicyError('invalid_argument', `call must be one of ${CALL_KINDS.join(', ')}, got ${JSON.stringify(call)}`);
    }
    if (!Number.isInteger(attempt) || attempt < 0 || attempt > U32_MAX) {
      throw new PolicyError('invalid_argument', `attempt must be an integer from 1, got ${JSON.stringify(attempt)}; attempts are counted from 1`);
    }
    const s = seedText(seed);
    const cfg = typedConfig(config);
    const ms = this.#active.call('backoff', (api) => api.delay(call, attempt, s === undefined ? undefined : BigInt(s), cfg));
    return Number(ms);
  }

  /** The idempotency key (hex sha256) of one logical action; `args` is any JSON value. */
  key({ runId, stepId, tool, args = {}, argsJson } = {}) {
    for (const [name, v] of [['runId', runId], ['stepId', stepId], ['tool', tool]]) {
      if (typeof v !== 'string') throw new PolicyError('invalid_argument', `${name} must be a string, got ${describe(v)}`);
    }
    const a = argsJson ?? toText(args, 'args', 'invalid_argument');
    text(a, 'key', 'argsJson');
    const active = this.#active;
    fits(active, a, 'args');
    return active.call('key', (api) => api.key(runId, stepId, tool, a));
  }

  /** Every code the policy can emit (the registry), sorted by code. */
  registry() {
    return structuredClone(this.#active.registry());
  }

  /** codes-json: the registry as the component printed it. */
  registryJson() {
    return this.#active.call('codesJson', (api) => api.codesJson());
  }

  /**
   * The MCP `## Errors` block for a tool description (`errors-block`): a
   * heading and a fenced JSON array of `{code, retryable, severity, category,
   * hint}`. `codes` lists codes or code prefixes (`'tool.http.'`); empty means every code.
   * @param {string[]} [codes]
   */
  errorsBlock(codes = []) {
    if (!Array.isArray(codes) || !codes.every((c) => typeof c === 'string')) {
      throw new PolicyError('invalid_argument', `errorsBlock() takes an array of codes or code prefixes, got ${describe(codes)}; pass e.g. ['tool.']`);
    }
    return this.#active.call('errorsBlock', (api) => api.errorsBlock([...codes]));
  }

  /** One registry row, or undefined. */
  lookup(code) {
    const row = this.#active.registry().find((r) => r.code === code);
    return row === undefined ? undefined : structuredClone(row);
  }

  /** render-json: the rendered text as the component printed it. */
  renderJson(envelope, format, options = '') {
    text(envelope, 'renderJson', 'envelope');
    text(options, 'renderJson', 'options');
    const f = renderFormat(format);
    const active = this.#active;
    fits(active, envelope, 'envelope');
    fits(active, options, 'options');
    if (NAMED_ONLY.has(f)) {
      return active.call('renderNamed', (api) => {
        if (typeof api.renderNamed !== 'function') {
          throw new PolicyError(
            'invalid_argument',
            `render format ${JSON.stringify(f)} needs a component that exports agent:recovery/runtime@0.2.0 render-named, and ${active.identity.name} does not; render it with the reference policy (\`await Policy.load()\`)`,
          );
        }
        return api.renderNamed(envelope, f, options);
      });
    }
    return active.call('renderJson', (api) => api.renderJson(envelope, f, options));
  }

  /**
   * Render an envelope (object or JSON text) for a boundary. Returns the parsed
   * JSON, or the text itself when the format's output is not JSON.
   */
  render(envelope, format, options) {
    const env = typeof envelope === 'string' ? envelope : toText(envelope, 'envelope', 'invalid_argument');
    const opts = options === undefined || options === null ? '' : typeof options === 'string' ? options : toText(options, 'options', 'invalid_argument');
    const out = this.renderJson(env, format, opts);
    try {
      return JSON.parse(out);
    } catch {
      return out;
    }
  }
}

/** The component's JSON output, parsed; output that is not JSON is a bug of the policy. */
function parseOutput(active, what, out) {
  try {
    return JSON.parse(out);
  } catch (e) {
    throw new PolicyRuntimeError(
      `${active.identity.name} ${active.identity.version} printed invalid JSON from ${what} (${e.message}); this is a bug in the policy: report it`,
      { cause: e, code: 'invalid-output' },
    );
  }
}

function text(v, fn, name) {
  if (typeof v !== 'string') {
    throw new PolicyError('invalid_argument', `${fn}() takes ${name} as JSON text (a string), got ${describe(v)}; use the object methods for objects`);
  }
}

/** JSON text given as a string is passed as is; anything else is written as JSON. */
function jsonText(value, what, kind) {
  return typeof value === 'string' ? value : toText(value, what, kind);
}

function toText(value, what, kind) {
  let out;
  try {
    out = stringify(value);
  } catch (e) {
    throw new PolicyError(kind, `${what} cannot be written as JSON (${e.message}); pass plain data`);
  }
  if (out === undefined) {
    throw new PolicyError(kind, `${what} is ${describe(value)}, which has no JSON form; pass an object`);
  }
  return out;
}

function contextText(context) {
  if (context === undefined || context === null) return '{}';
  if (typeof context !== 'object' || Array.isArray(context)) {
    throw new PolicyError('invalid_context', `context must be an object, got ${describe(context)}; pass e.g. {attempt: 1}`);
  }
  const c = { ...context };
  if ('seed' in c) {
    const s = seedText(c.seed);
    if (s === undefined) delete c.seed;
    else c.seed = s;
  }
  return toText(c, 'context', 'invalid_context');
}

function renderFormat(format) {
  const f = typeof format === 'string' ? format.replaceAll('_', '-') : format;
  if (!RENDER_FORMATS.includes(f)) {
    throw new PolicyError('invalid_argument', `render format ${JSON.stringify(format)} is not one of ${RENDER_FORMATS.join(', ')}`);
  }
  return f;
}

function typedConfig(config) {
  if (config === undefined || config === null) return undefined;
  const bad = (m) => new PolicyError('invalid_config', m);
  if (typeof config !== 'object' || Array.isArray(config)) throw bad(`config must be an object, got ${describe(config)}`);
  for (const k of Object.keys(config)) {
    if (![...CALL_KINDS, 'retry_budget_ms'].includes(k)) {
      throw bad(`config has unknown field ${JSON.stringify(k)}; use tool, llm, agent, retry_budget_ms`);
    }
  }
  const out = {};
  for (const call of CALL_KINDS) {
    const b = config[call];
    if (b === undefined || b === null) continue;
    for (const f of ['base_ms', 'cap_ms', 'max_attempts']) {
      if (b[f] === undefined) {
        throw bad(`config.${call}.${f} is missing; backoff() takes complete configs ({base_ms, cap_ms, max_attempts})`);
      }
    }
    out[call] = {
      baseMs: u64(b.base_ms, `config.${call}.base_ms`),
      capMs: u64(b.cap_ms, `config.${call}.cap_ms`),
      maxAttempts: Number(intIn(b.max_attempts, 0n, BigInt(U32_MAX), `config.${call}.max_attempts`)),
    };
  }
  if (config.retry_budget_ms !== undefined && config.retry_budget_ms !== null) {
    out.retryBudgetMs = u64(config.retry_budget_ms, 'config.retry_budget_ms');
  }
  return out;
}

function u64(v, name) {
  return intIn(v, 0n, U64_MAX, name);
}

function intIn(v, lo, hi, name) {
  let big;
  if (typeof v === 'bigint') big = v;
  else if (typeof v === 'number' && Number.isSafeInteger(v)) big = BigInt(v);
  if (big === undefined || big < lo || big > hi) {
    throw new PolicyError('invalid_config', `${name} must be an integer from ${lo} to ${hi}, got ${JSON.stringify(String(v))}`);
  }
  return big;
}
