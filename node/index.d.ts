// Types of the agent-recovery Node package (hand-written; see README.md).
// The JSON shapes are the component's, with snake_case field names: fields may
// be added in later versions, never renamed or removed.

/** The kind of call that failed. */
export type CallKind = 'tool' | 'llm' | 'agent';
export type ErrorClass = 'transient' | 'permanent' | 'semantic' | 'policy' | 'state';
export type Severity = 'info' | 'warning' | 'error' | 'fatal';
export type Category =
  | 'validation'
  | 'auth'
  | 'rate_limit'
  | 'quota'
  | 'timeout'
  | 'network'
  | 'dependency'
  | 'not_found'
  | 'conflict'
  | 'state'
  | 'safety'
  | 'cancelled'
  | 'input_required'
  | 'internal';
export type SourceKind = 'http' | 'jsonrpc' | 'mcp' | 'a2a' | 'network' | 'exception' | 'timeout';
/** The next step the caller should take. */
export type Action =
  | 'retry'
  | 'fail'
  | 'replan'
  | 'fallback'
  | 'restore'
  | 'escalate'
  | 'await_input'
  | 'compensate'
  | 'dead_letter';
export type RenderFormat =
  | 'jsonrpc-error'
  | 'mcp-tool-result'
  | 'a2a-task-status'
  | 'problem-json'
  | 'model-tool-result'
  | 'coordinator-text'
  | 'downstream-wrap'
  /** An AG-UI `RUN_ERROR` event; needs a component with the 0.2 `render-named` (the reference). */
  | 'ag-ui-run-error';
/** The kinds of policy-error (WIT `error-kind`, snake_case). */
export type PolicyErrorKind =
  | 'invalid_json'
  | 'invalid_observation'
  | 'invalid_context'
  | 'invalid_config'
  | 'invalid_argument'
  | 'too_large'
  | 'internal';
/** Which step refused a component. */
export type PolicyLoadReason = 'read' | 'digest_mismatch' | 'transpile' | 'imports' | 'instantiate' | 'contract' | 'smoke_test' | 'transpiler_missing' | 'signature';

/** A JSON value; bigint is written as a bare integer literal. */
export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json | undefined };

/** Header name/value pairs (names are matched case-insensitively). */
export type Headers = Record<string, string> | Array<[string, string]>;

interface ObservationCommon {
  /** The kind of call, if known (else inferred from the shape). */
  call?: CallKind;
  /** `openai`, `anthropic`, `google`, `aws`, `stripe`; else recognised from body and headers. */
  provider?: string;
  /** The caller's request id, used when the response carries none. */
  request_id?: string | number;
  /** The caller's clock (Unix ms), to read an HTTP-date Retry-After. */
  now_ms?: number;
  /** A decision context embedded in the observation (decide only). */
  context?: Context;
}

/** A failed call as observed: the input of classify and decide. */
export type Observation =
  | (ObservationCommon & { source?: 'http'; status: number; headers?: Headers; body?: Json })
  | (ObservationCommon & { source?: 'jsonrpc' | 'mcp' | 'a2a'; message: Json })
  | (ObservationCommon & { source?: 'network'; code: string; message?: string })
  | (ObservationCommon & {
      source?: 'exception';
      type: string;
      message?: string;
      /** The HTTP status the error carries (the AI SDK's `statusCode`). */
      status?: number;
      /** The response headers the error carries, names lower-case. */
      headers?: Record<string, string>;
      /** The response body the error carries: JSON when it is JSON, else the text. */
      body?: Json;
      /** The framework's own retry verdict (the AI SDK's `isRetryable`). */
      retryable?: boolean;
      /** The observation of the error's `cause`. */
      cause?: Observation;
      /** The observations of its `errors` (an AggregateError, the AI SDK's RetryError). */
      exceptions?: Observation[];
    })
  | (ObservationCommon & { source?: 'timeout'; phase?: 'connect' | 'read' | 'write' | 'pool' | 'total'; after_ms?: number });

export interface BackoffConfig {
  base_ms?: number | bigint;
  cap_ms?: number | bigint;
  max_attempts?: number;
}

/** Parameter overrides; unset fields keep the policy's defaults. */
export interface PolicyConfig {
  tool?: BackoffConfig;
  llm?: BackoffConfig;
  agent?: BackoffConfig;
  /** Total retry delay a run may spend, in ms. */
  retry_budget_ms?: number | bigint;
}

/** What the caller knows about the step (JSON field names). */
export interface Context {
  /** Overrides the observation's `call`. */
  call?: CallKind;
  /** The attempt that just failed, from 1 (default 1). */
  attempt?: number;
  /** Retry delay already spent in this run, ms. */
  elapsed_ms?: number;
  /** Seed for reproducible jitter: a bigint or decimal string up to 2^64-1 (or a safe integer). */
  seed?: bigint | string | number;
  /** The caller's clock, Unix ms. */
  now_ms?: number;
  /** False when a repeat could duplicate a side effect. */
  idempotent?: boolean;
  /** False when there is no checkpoint to restore. */
  checkpoint_available?: boolean;
  /** False when there is no fallback path. */
  fallback_available?: boolean;
  /** Side effects taken that need compensation on exhaustion. */
  compensations_pending?: number;
  config?: PolicyConfig;
}

export interface Upstream {
  source: SourceKind | null;
  provider: string | null;
  status: number | null;
  code: string | null;
  type: string | null;
}

/** The agent-readable error envelope. */
export interface Envelope {
  code: string;
  message: string;
  class: ErrorClass;
  retryable: boolean;
  severity: Severity;
  category: Category;
  /** classify: the delay the server asked for; a retry decision: the delay chosen. */
  retry_after_ms: number | null;
  field: string | null;
  allowed_values: Json;
  suggested_value: Json;
  hint: string;
  request_id: string | null;
  related_codes: string[];
  docs_url: string | null;
  upstream: Upstream;
}

/** Which policy answered (added by the wrapper, not part of decideJson's text). */
export interface PolicyStamp {
  name: string;
  version: string;
  /** Hex sha256 of the component bytes. */
  sha256: string;
}

export interface Decision {
  action: Action;
  /** For `retry`: ms to wait before the next attempt. */
  delay_ms: number | null;
  attempt: number;
  max_attempts: number;
  budget_remaining_ms: number;
  /** `transient`, `attempts_exhausted`, `budget_exhausted`, `hint_exceeds_budget`, `permanent`, `not_idempotent`, ... */
  reason: string;
  reason_code: string | null;
  envelope: Envelope;
  policy: PolicyStamp;
}

export interface CodeInfo {
  code: string;
  class: ErrorClass;
  severity: Severity;
  category: Category;
  retryable: boolean;
  cause: string;
  recovery: string;
  stability: 'stable' | 'beta' | 'deprecated';
  replaced_by: string | null;
  related_codes: string[];
}

export interface PolicyInfo {
  name: string;
  version: string;
  contract: string;
  description: string;
}

export interface PolicyDescription extends PolicyInfo {
  sha256: string;
  /** Size of the component in bytes. */
  size: number;
  /** `reference`, `bytes`, or the path it was loaded from. */
  source: string;
  /** ISO time of loading. */
  loadedAt: string;
  /** Traps seen since loading (each replaced the instance). */
  traps: number;
}

/** One smoke case: the component's own set, or the caller's `smokeTests`. */
export interface SmokeCase {
  observation: Observation | Json;
  context?: Context;
  expect: { action?: Action; code?: string };
}

export type ComponentSource = string | URL | Uint8Array | ArrayBuffer;

export interface LoadOptions {
  /** Refuse the component unless its bytes have this hex sha256 (`sha256:` prefix allowed). */
  sha256?: string;
  /**
   * Refuse the component unless it carries a valid Ed25519 signature by one of `trustedKeys`
   * (docs/signing.md): a path's is read from `PATH.sig`; bytes need `signature`, the `.sig` text.
   * A refusal is a SignatureError (code `signature`). The embedded reference needs none.
   */
  requireSignature?: RequireSignature;
  /** Extra cases the candidate must pass before activation (array or JSON text). */
  smokeTests?: SmokeCase[] | string;
  /** `false`: skip the smoke set (tests, or forcing a policy in by hand). Default `true`. */
  verify?: boolean;
  /** Inputs over this many UTF-8 bytes are refused with code `input-too-large`. Default 16 MiB. */
  maxInputBytes?: number;
  /** `Policy.load` only: `'in-process'` (the default) runs the component in this thread; `'worker'`: see IsolateOptions. */
  isolate?: 'in-process';
  /**
   * `Policy.load` only: where swaps and refusals are reported (span events on the span active
   * when `swap()` is called, and the `agent_recovery.policy.swaps` counter; docs/telemetry.md,
   * "Policy swaps"). Default `Telemetry.global()`, read by `Policy.load`; ignored by `swap()`
   * and by an IsolatedPolicy (it has no swap).
   */
  telemetry?: Telemetry;
}

export interface IsolateOptions extends Omit<LoadOptions, 'isolate'> {
  /** Run the component in a worker thread (`Policy.load` then returns an IsolatedPolicy). */
  isolate: 'worker';
  /** Deadline per call, in ms. Default 1000. */
  timeoutMs?: number;
  /** Deadline for the load (transpile, instantiate, smoke set), in ms. Default 30 000. */
  loadTimeoutMs?: number;
}

/** A policy in a worker thread with a deadline per call: Policy's methods, returning promises. */
export declare class IsolatedPolicy {
  private constructor();
  /** Load and verify a policy in a worker, within `loadTimeoutMs` (what `Policy.load` with `isolate: 'worker'` does). */
  static load(source?: ComponentSource, options?: Omit<IsolateOptions, 'isolate'> & { isolate?: 'worker' }): Promise<IsolatedPolicy>;
  /** How many times the worker was terminated at its deadline (or died) and replaced. */
  restarts: number;
  /** Stops the worker; a later call starts a new one. */
  close(): void;
  describe(): Promise<PolicyDescription>;
  info(): Promise<PolicyInfo>;
  smokeTests(): Promise<SmokeCase[]>;
  classifyJson(observation: string): Promise<string>;
  decideJson(observation: string, context?: string): Promise<string>;
  classify(observation: Observation | string): Promise<Envelope>;
  decide(observation: Observation | string, context?: Context | string): Promise<Decision>;
  backoff(args: { call: CallKind; attempt: number; seed?: bigint | string | number; config?: PolicyConfig }): Promise<number>;
  key(args: { runId: string; stepId: string; tool: string; args?: Json; argsJson?: string }): Promise<string>;
  registry(): Promise<CodeInfo[]>;
  registryJson(): Promise<string>;
  lookup(code: string): Promise<CodeInfo | undefined>;
  errorsBlock(codes?: string[]): Promise<string>;
  renderJson(envelope: string, format: RenderFormat, options?: string): Promise<string>;
  render(envelope: Envelope | string, format: RenderFormat, options?: object | string): Promise<Json>;
}

export declare const DEFAULT_TIMEOUT_MS: number;
export declare const DEFAULT_LOAD_TIMEOUT_MS: number;
export declare const MAX_INPUT_BYTES: number;
/** The longest name the recovery loop takes, in UTF-8 bytes (a run id, a step or fan-out id, a tool, a target): 512 (docs/runtime.md, "Limits"). */
export declare const MAX_ID_BYTES: number;

/** The host error codes shared by Rust, Node and Python (docs/hosts.md). */
export type ErrorCode =
  | 'io'
  | 'invalid-argument'
  | 'digest-mismatch'
  | 'load'
  | 'incompatible'
  | 'smoke-test'
  | 'trap'
  | 'out-of-fuel'
  | 'memory-limit'
  | 'invalid-output'
  | 'input-too-large'
  | 'signature';
export declare const ERROR_CODES: readonly ErrorCode[];

export declare class Policy {
  private constructor();
  /**
   * Load and validate a policy. No source: the shipped reference (gen/, made by
   * `npm run build`). A path, file URL or bytes: that component, transpiled in-process.
   * @throws PolicyLoadError
   */
  static load(source?: ComponentSource, options?: LoadOptions): Promise<Policy>;
  static load(source: ComponentSource | undefined, options: IsolateOptions): Promise<IsolatedPolicy>;
  /**
   * Validate a candidate, then switch to it atomically. On failure the current
   * policy stays active and the PolicyLoadError says why.
   */
  swap(source: ComponentSource, options?: LoadOptions): Promise<PolicyDescription>;
  describe(): PolicyDescription;
  info(): PolicyInfo;
  smokeTests(): SmokeCase[];
  /** The component's envelope JSON text, unchanged. */
  classifyJson(observation: string): string;
  /** The component's decision JSON text, unchanged. `context` defaults to `{}`. */
  decideJson(observation: string, context?: string): string;
  /** `observation` is an object, or JSON text. */
  classify(observation: Observation | string): Envelope;
  /** `observation` and `context` are objects, or JSON text. */
  decide(observation: Observation | string, context?: Context | string): Decision;
  /** The full-jitter delay in ms; `config` entries must be complete for this call. */
  backoff(args: { call: CallKind; attempt: number; seed?: bigint | string | number; config?: PolicyConfig }): number;
  /** Hex sha256 idempotency key; `args` is any JSON value (or pass `argsJson` text). */
  key(args: { runId: string; stepId: string; tool: string; args?: Json; argsJson?: string }): string;
  registry(): CodeInfo[];
  /** The registry JSON text, unchanged (codes-json). */
  registryJson(): string;
  lookup(code: string): CodeInfo | undefined;
  /** The MCP `## Errors` block for a tool description; `codes`: codes or prefixes (empty: every code). */
  errorsBlock(codes?: string[]): string;
  /** The rendered text, unchanged. `options` is JSON text or empty. */
  renderJson(envelope: string, format: RenderFormat, options?: string): string;
  /** Parsed JSON, or the text itself for formats whose output is not JSON (coordinator-text). */
  render(
    envelope: Envelope | string,
    format: RenderFormat,
    options?: { id?: Json; task_id?: string; current_agent?: string; downstream_agent?: string } | string,
  ): Json;
}

export declare const RENDER_FORMATS: readonly RenderFormat[];
export declare const CONTRACT: string;
/** The WASI interfaces a policy component may import. */
export declare const GRANTED_IMPORTS: readonly string[];
/**
 * A copy of the reference component (or `component`, with an empty slot) with
 * a policy document (an object, or JSON text) packed into its slot
 * (docs/policy-documents.md). Load it with `Policy.load(bytes)`.
 */
export declare function packDocument(document: object | string, component?: Uint8Array): Promise<Uint8Array>;
/** The 32 bytes that open the reference component's policy document slot. */
export declare const SLOT_MARKER: Uint8Array;
/** The size of the policy document slot, in bytes. */
export declare const SLOT_BYTES: number;
export declare const POLICY_ERROR_KINDS: readonly PolicyErrorKind[];

/** The policy refused the input. */
export declare class PolicyError extends Error {
  constructor(kind: PolicyErrorKind, message: string, options?: { code?: string });
  readonly name: 'PolicyError';
  kind: PolicyErrorKind;
  /** `policy/<kind>` (e.g. `policy/invalid-json`), or `input-too-large` when this host refused the input. */
  code: string;
}

/** The component failed (a trap, an instantiation failure): not an answer about the input. */
export declare class PolicyRuntimeError extends Error {
  constructor(message: string, options?: { cause?: unknown; code?: ErrorCode });
  /** `trap` (default), `invalid-output`, ... (docs/hosts.md). */
  code: ErrorCode;
}

/** A public key a signed policy may be signed with: PEM text (SubjectPublicKeyInfo) or a KeyObject. */
export type TrustedKey = string | Buffer | import('node:crypto').KeyObject;

/** `requireSignature`: the trusted keys, and for bytes the `.sig` text. */
export interface RequireSignature {
  trustedKeys: TrustedKey[];
  /** The `.sig` text (or bytes) of a Uint8Array or ArrayBuffer source; a path's is read from `PATH.sig`. */
  signature?: string | Uint8Array;
}

/** Why a signature was refused, in the order the checks run. */
export type SignatureProblem = 'missing' | 'malformed' | 'unsupported-alg' | 'unknown-key' | 'bad-signature';
export declare const SIGNATURE_PROBLEMS: readonly SignatureProblem[];

/** A required signature was refused: code `signature`; `problem` says why. */
export declare class SignatureError extends PolicyLoadError {
  constructor(problem: SignatureProblem, message: string);
  readonly name: 'SignatureError';
  problem: SignatureProblem;
}

/** A new Ed25519 key pair: PKCS#8 and SubjectPublicKeyInfo PEM, and the key id. */
export declare function generateSigningKey(): { privatePem: string; publicPem: string; id: string };
/** The key id of a key: `sha256:` and the hex sha256 of its SubjectPublicKeyInfo DER. */
export declare function keyId(key: TrustedKey): string;
/** Signs `bytes` with an Ed25519 private key (PKCS#8 PEM or KeyObject); returns the `.sig` JSON text. */
export declare function sign(bytes: Uint8Array, privateKey: string | Buffer | import('node:crypto').KeyObject): string;
/** Where the signature of `path` is: `path` with `.sig` appended. */
export declare function signaturePath(path: string | URL): string;
/**
 * Checks a `.sig` (text or bytes; null: none) over `bytes`; returns the signer's key id.
 * @throws SignatureError
 */
export declare function verifySignature(
  bytes: Uint8Array,
  signature: string | Uint8Array | null | undefined,
  trustedKeys: TrustedKey[],
  label?: string,
): string;
/**
 * Reads a policy file and its `.sig` and checks the signature; resolves to the verified bytes.
 * @throws SignatureError
 */
export declare function readSigned(path: string | URL, options: { trustedKeys: TrustedKey[] }): Promise<Buffer>;

/** A component could not be loaded, or failed validation before activation. */
export declare class PolicyLoadError extends PolicyRuntimeError {
  constructor(reason: PolicyLoadReason, message: string, options?: { cause?: unknown; code?: ErrorCode });
  /** DEPRECATED: the step that refused it; match on `code`. */
  reason: PolicyLoadReason;
}

/** retry() stopped: the policy's action was not `retry`. */
export declare class RecoveryError extends Error {
  decision: Decision;
  envelope: Envelope;
  action: Action;
  code: string;
  observation: Observation;
  attempts: number;
  /** The failed result, when the operation returned a failure instead of throwing. */
  result?: unknown;
  /** Retry delay spent in the run when it stopped (ms), earlier steps included. */
  elapsedMs: number;
  /** The last thrown error, if the operation threw. */
  cause?: unknown;
}

export interface AttemptInfo {
  /** The attempt number, from 1. */
  attempt: number;
  /** The same key on every attempt (undefined without runId/stepId/tool or idempotencyKey). */
  idempotencyKey?: string;
  /** The caller's signal, combined with the per-attempt timeout. */
  signal?: AbortSignal;
  /** The target to call: `target`, or one of `fallbacks`. */
  target: string;
}

export interface DecisionEvent<T> {
  attempt: number;
  decision: Decision;
  observation: Observation;
  idempotencyKey?: string;
  error?: unknown;
  result?: T;
  /** Retry delay spent in the run before this decision (ms). */
  elapsedMs: number;
}

export interface RetryOptions<T> {
  policy: Policy;
  call?: CallKind;
  provider?: string;
  /** With stepId and tool: the idempotency key is computed by the policy. */
  runId?: string;
  stepId?: string;
  tool?: string;
  /** The tool's arguments (part of the key). */
  args?: Json;
  /** An explicit key instead of runId/stepId/tool. */
  idempotencyKey?: string;
  /** Whether a repeat is safe; default: true when there is a key, false without one. */
  idempotent?: boolean;
  seed?: bigint | string | number;
  /** The retry budget: total delay ms (sent as config.retry_budget_ms). */
  maxElapsedMs?: number;
  /**
   * `config` (the policy configuration, as recover's policyConfig), `idempotent`, and the members recover's
   * `context` adds: `elapsed_ms` (the retry delay earlier steps of the run already spent: this step's sleeps
   * add to it), `checkpoint_available`, `compensations_pending`. A member the loop sets (attempt, seed, now_ms,
   * call, fallback_available) or any other is refused (PolicyError `invalid_context`): for a fallback chain
   * pass `fallbacks`.
   */
  context?: Context;
  /**
   * Per-attempt timeout: aborts the attempt's signal with a TimeoutError. Whatever abort error
   * the operation throws for it (an SDK's APIUserAbortError included) is observed as a timeout.
   */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called (and awaited) after each decision, with what it was about. */
  onDecision?: (event: DecisionEvent<T>) => void | Promise<void>;
  /** Each runtime event (docs/runtime.md, "Events"), parsed, and its JSON text. */
  onEvent?: (event: RuntimeEvent, text: string) => void;
  /** Share breakers and the idempotency cache with other runs (default: a fresh MemoryStore per call). */
  store?: Store;
  /** The first target, a breaker's key (default: the tool name, or 'operation'); the operation gets it as `target`. */
  target?: string;
  /** The targets to fall back to, in order (a `fallback` decision calls the next); the operation gets the one to call as `target`. */
  fallbacks?: string[];
  /** The breaker (default: off, i.e. failureThreshold 100). */
  breaker?: { failureThreshold?: number; openMs?: number };
  /** Injectable sleep (tests): resolves after `ms`, rejects if `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Whether a returned value is a failure: its observation, or undefined. Default: none, the component judges the value (check-outcome). */
  failureOf?: (result: T, options: { call?: CallKind; provider?: string }) => Observation | undefined | Promise<Observation | undefined>;
  /** The clock sent as now_ms (default Date.now). */
  now?: () => number;
}

export declare function retry<T>(operation: (attempt: AttemptInfo) => Promise<T> | T, options: RetryOptions<T>): Promise<T>;
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;

// ------------------------------------------------------------------ the small door (docs/getting-started.md)

/** What the wrapped function gets as its first argument, on every attempt. */
export interface RecoverCall {
  /**
   * The idempotency key: the same on every attempt and every target of one call. Send it to the
   * service (an Idempotency-Key header): an attempt that failed may still have been applied.
   */
  readonly key: string;
  /** The target to call: `target`, or one of `fallbacks`. */
  readonly target: string;
  /** The call number of this key, from 1. */
  readonly attempt: number;
  /** Aborted when the attempt timed out or the run was cancelled. */
  readonly signal: AbortSignal;
  /** Give up after this long (ms); null: no limit. */
  readonly timeoutMs: number | null;
}

export interface RecoverOptions {
  /** Default: the reference policy. */
  policy?: Policy;
  /** Default: a MemoryStore per wrapped function, so its breakers outlive a call. */
  store?: Store;
  /** Default: SystemClock; a VirtualClock in tests. */
  clock?: Clock;
  seed?: bigint | string | number;
  /** Default: read from each observation. */
  call?: CallKind;
  /** Default: the function's name, else 'operation'. */
  tool?: string;
  /** The first target (a breaker's key). Default: the tool name. */
  target?: string;
  /** The targets to fall back to, in order; the function gets the one to call as `call.target`. */
  fallbacks?: string[];
  /** Default false. With true, a call that does not read `call.key` warns once (KeyNotUsedWarning) unless `idempotent: true`. */
  sideEffect?: boolean;
  idempotent?: boolean;
  /** Default: a new id per call, `${tool}-${uuid}`. */
  runId?: string | (() => string);
  /** Default: the tool name. */
  stepId?: string;
  /** 'throw' (default): a RecoveryError; 'model': resolve with the failure rendered `model-tool-result`. */
  errors?: 'throw' | 'model';
  /** Per-attempt timeout (the runtime's attemptTimeoutMs). */
  timeoutMs?: number;
  policyConfig?: PolicyConfig;
  /** Default: the policy's thresholds. */
  breaker?: { failureThreshold?: number; openMs?: number };
  onEvent?: (event: RuntimeEvent, text: string) => void;
  /** Called (and awaited) after each decision, with the decision (its `policy` field set) and what it was about. */
  onDecision?: (event: RecoverDecision) => void | Promise<void>;
  /**
   * Members added to the policy's context of every decision: `elapsed_ms` (retry delay earlier steps already
   * spent, added to the call's), `checkpoint_available`, `compensations_pending`. Any other is refused
   * (PolicyError `invalid_context`).
   */
  context?: { elapsed_ms?: number; checkpoint_available?: boolean; compensations_pending?: number };
  /** The step's args (part of the key). Default: the call's arguments. */
  args?: Json;
  /** Cancels every call of the door: a call in progress rejects with the signal's reason. */
  signal?: AbortSignal;
  /** More Runtime options (attemptBudget, deadlineMs, retryQuota, ...); the ones recover() sets itself are refused. */
  runtimeOptions?: Omit<RuntimeOptions, 'policy' | 'store' | 'clock' | 'seed' | 'attemptTimeoutMs' | 'policyConfig' | 'breaker' | 'onEvent'>;
}

/** What recover()'s `onDecision` gets. */
export interface RecoverDecision {
  decision: Decision;
  observation: Observation;
  /** The attempt the decision is about, from 1. */
  attempt: number;
  /** The call's idempotency key. */
  key?: string;
  /** Retry delay spent before this decision (ms), `context.elapsed_ms` included. */
  elapsedMs: number;
}

/** The defaults of recover()'s options (every option it accepts is a key). */
export declare const RECOVER_DEFAULTS: Readonly<Record<keyof RecoverOptions, unknown>>;

/**
 * Wrap `fn(call, ...args)` in the recovery runtime: one run of one step per call. Unknown options
 * throw a PolicyError (`invalid_argument`). With `errors: 'model'` a failure resolves as the
 * envelope rendered for the model (`{error: {code, message, retryable, hint, ...}}`).
 */
export declare function recover<A extends unknown[], T>(
  fn: (call: RecoverCall, ...args: A) => Promise<T> | T,
  options: RecoverOptions & { errors: 'model' },
): (...args: A) => Promise<T | Json>;
export declare function recover<A extends unknown[], T>(
  fn: (call: RecoverCall, ...args: A) => Promise<T> | T,
  options?: RecoverOptions & { errors?: 'throw' },
): (...args: A) => Promise<T>;

export interface ObserveOptions {
  call?: CallKind;
  provider?: string;
  requestId?: string;
}
export declare function fromResponse(res: globalThis.Response, options?: ObserveOptions & { maxBodyChars?: number }): Promise<Observation>;

export interface FromErrorOptions extends ObserveOptions {
  /** The caller's deadline for the call, in ms: sent as `after_ms` of a timeout observation. */
  timeoutMs?: number;
  /**
   * The caller's own deadline aborted the call (retry() sets it when its `timeoutMs` fired):
   * any abort in the error's cause chain (`AbortError`, `TimeoutError`, an SDK's
   * `APIUserAbortError`) is then a `timeout` observation, not a cancellation. Default false.
   */
  timedOut?: boolean;
}

/**
 * The observation of a thrown error, read by class name (`err.name` and the class names on
 * its prototype chain) and `cause` chain. SDK errors straight in, no hand work:
 * - `openai` / `@anthropic-ai/sdk`: `APIConnectionTimeoutError` -> `timeout` (phase `total`);
 *   `APIError` with a status (`RateLimitError`, `InternalServerError`, Anthropic's
 *   `OverloadedError` and per-`error_code` classes, ...) -> `http` with the SDK's headers and
 *   the provider's error body; a bare `APIError` without a status (an error event in a stream
 *   that began with a 200) -> `http` with status 200 and the event's error body; `APIConnectionError` -> `network` with the code in its cause
 *   chain (`ECONNREFUSED`, `UND_ERR_CONNECT_TIMEOUT`, ...); `APIUserAbortError` -> a
 *   cancellation (`exception` `AbortError`), or `timeout` when `timedOut` or a `TimeoutError`
 *   reason is in its cause chain; other SDK errors -> `exception` `openai.<Class>` /
 *   `anthropic.<Class>`. `provider` is set to `openai` / `anthropic` unless given.
 * - `@modelcontextprotocol/sdk` `McpError` (and `UrlElicitationRequiredError`) -> `mcp`, the
 *   JSON-RPC error it carries (`code`, `message` without the SDK's "MCP error N: " prefix, `data`).
 * - `@a2a-js/sdk` errors (`TaskNotFoundError`, ...) -> `a2a`, the JSON-RPC error code the server
 *   sent or, for REST / gRPC errors, the code of the same A2A error.
 * - Vercel AI SDK errors (`AI_APICallError`, `AI_RetryError`, ...) -> `exception` with the
 *   error's `name`, `statusCode` / `responseHeaders` / `responseBody` / `isRetryable` as
 *   `status` / `headers` / `body` / `retryable`, and its `cause` and `errors` observed as
 *   `cause` and `exceptions`.
 * - Anything else: `TimeoutError` -> `timeout`; an HTTP `status` -> `http`; a string `code` on
 *   the error or its causes (up to the first SDK error or error with a status) -> `network`;
 *   else `exception` with the most specific class name, its `cause` and its `errors`
 *   (AggregateError) observed as `cause` and `exceptions`.
 * Never throws: an error that throws while being read is `{source: 'exception', type: 'Error'}`.
 */
export declare function fromError(err: unknown, options?: FromErrorOptions): Observation;

/**
 * The observation of a returned failure, or undefined for success: a fetch `Response` that is
 * not ok; an MCP `CallToolResult` with `isError: true`; an A2A Task or status-update event (the
 * `@a2a-js/sdk` objects, a `SendMessage` / stream response holding one, or v0.3 JSON; it must
 * have a `contextId`) in a failed, rejected, canceled, input-required or auth-required state;
 * a JSON-RPC response with an `error`. MCP results and A2A tasks are sent wrapped in a JSON-RPC
 * response with `id: null`.
 */
export declare function failureOf(result: unknown, options?: ObserveOptions): Promise<Observation | undefined>;

// ------------------------------------------------------------------ store (src/store.js, docs/store.md)

/** The kinds of StoreError (snake_case twins of Rust's StoreErrorKind). New kinds may be added. */
export type StoreErrorKind = 'invalid_argument' | 'unavailable' | 'corrupt' | 'incompatible' | 'io';
export declare const STORE_ERROR_KINDS: readonly StoreErrorKind[];
/** The schema text, identical to host/src/store/schema.sql. */
export declare const SCHEMA_SQL: string;
/** The schema version this package reads and writes (PRAGMA user_version): 1. */
export declare const SCHEMA_VERSION: number;
/** PRAGMA application_id of a store file: 'ARST' (1095914324). */
export declare const APPLICATION_ID: number;
/** The longest key or stream name, in bytes of UTF-8: 1024. */
export declare const MAX_NAME_BYTES: number;
/** The longest value or record, in bytes of JSON text: 8 MiB. */
export declare const MAX_VALUE_BYTES: number;
/** The largest time, TTL, version or sequence number: Number.MAX_SAFE_INTEGER. */
export declare const MAX_INTEGER: number;

/** A store operation failed; the message names the input and ends with a hint. */
export declare class StoreError extends Error {
  constructor(kind: StoreErrorKind, message: string, options?: ErrorOptions);
  kind: StoreErrorKind;
}

/** A value (JSON text, exactly as written) and the version of its write. */
export interface Versioned {
  value: string;
  version: number;
}

/** The result of compareAndSet: written with a new version, or a conflict with the live entry. */
export type Cas = { written: true; version: number } | { written: false; current: Versioned | null };

/** The store interface, shared with Rust and Python. Times are Unix ms, passed in; integers 0..2^53-1. */
export interface Store {
  /** The live value at `key` (null when absent or expired at `nowMs`). */
  get(key: string, nowMs: number): Versioned | null;
  /** Write `value` (JSON text) iff the live version is `expected` (null = absent or expired); expires at nowMs + ttlMs (null = never). */
  compareAndSet(key: string, expected: number | null, value: string, ttlMs: number | null, nowMs: number): Cas;
  /** Append a record (JSON text); returns its sequence number (from 1, per stream). */
  append(stream: string, record: string, nowMs: number): number;
  /** Records of `stream` with sequence > `after`, oldest first, at most `limit`: [seq, record] pairs. */
  read(stream: string, after: number, limit: number): Array<[number, string]>;
  /** Remove `key`; true when it existed (unspecified for an expired, unpurged entry). */
  delete(key: string): boolean;
  /** Live keys starting with `prefix`, sorted by UTF-8 bytes. */
  keys(prefix: string, nowMs: number): string[];
  /** Remove every entry expired at `nowMs`; returns how many were removed. */
  purgeExpired(nowMs: number): number;
}

/**
 * The same methods returning promises: what the runtime awaits (`store.async` of a
 * RedisStore or FallbackStore, never blocking the event loop; docs/store.md,
 * "Redis and the event loop"). A store without `async` is called as it is.
 */
export interface AsyncStore {
  get(key: string, nowMs: number): Promise<Versioned | null>;
  compareAndSet(key: string, expected: number | null, value: string, ttlMs: number | null, nowMs: number): Promise<Cas>;
  append(stream: string, record: string, nowMs: number): Promise<number>;
  read(stream: string, after: number, limit: number): Promise<Array<[number, string]>>;
  delete(key: string): Promise<boolean>;
  keys(prefix: string, nowMs: number): Promise<string[]>;
  purgeExpired(nowMs: number): Promise<number>;
}

/** A store in process memory: the same semantics as SqliteStore, nothing persists. */
export declare class MemoryStore implements Store {
  constructor();
  get(key: string, nowMs: number): Versioned | null;
  compareAndSet(key: string, expected: number | null, value: string, ttlMs: number | null, nowMs: number): Cas;
  append(stream: string, record: string, nowMs: number): number;
  read(stream: string, after: number, limit: number): Array<[number, string]>;
  delete(key: string): boolean;
  keys(prefix: string, nowMs: number): string[];
  purgeExpired(nowMs: number): number;
}

export interface SqliteStoreOptions {
  /** How long a write waits for another process's write lock before StoreError 'unavailable' (default 5000). */
  busyTimeoutMs?: number;
  /** 'full' (default): a commit survives a power cut. 'normal': a power cut may lose the last commits; much faster writes. */
  synchronous?: 'full' | 'normal';
}

/**
 * A store in one SQLite file, shared with Rust and Python processes (WAL; synchronous FULL by default).
 * Needs the optional dependency better-sqlite3, loaded on first construction.
 */
export declare class SqliteStore implements Store {
  constructor(path: string, options?: SqliteStoreOptions);
  readonly path: string;
  /** The connection's synchronous setting as SQLite reports it. */
  readonly synchronous: 'full' | 'normal';
  close(): void;
  get(key: string, nowMs: number): Versioned | null;
  compareAndSet(key: string, expected: number | null, value: string, ttlMs: number | null, nowMs: number): Cas;
  append(stream: string, record: string, nowMs: number): number;
  read(stream: string, after: number, limit: number): Array<[number, string]>;
  delete(key: string): boolean;
  keys(prefix: string, nowMs: number): string[];
  purgeExpired(nowMs: number): number;
}

// ------------------------------------------------------------------ the Redis store

/** The options of a redis:// store URL (its query string) and their defaults. */
export declare const REDIS_URL_DEFAULTS: Readonly<{
  prefix: 'ar';
  timeout_ms: 1000;
  connect_timeout_ms: 1000;
  fallback: 'local';
  spool: null;
  probe_ms: 1000;
  grace_ms: 60000;
}>;
/** The local stream the spool writes while Redis is down: 'agent-recovery/spool'. */
export declare const SPOOL_STREAM: string;
/**
 * Key prefixes (idempotency entries, journals, dead-letter items) whose writes and deletes are
 * copied to the spool file while Redis answers and spooled while it is down (appends to any
 * stream are spooled).
 */
export declare const SPOOLED_PREFIXES: readonly string[];

/** A parsed store URL (the password only in `url` and `clientUrl`). */
export interface RedisUrlOptions {
  url: string;
  /** The URL with the password replaced by ***. */
  display: string;
  clientUrl: string;
  /** The URL without its password (the spool's name hashes it). */
  safeUrl: string;
  prefix: string;
  timeoutMs: number;
  connectTimeoutMs: number;
  fallback: 'local' | 'none';
  spool: string | null;
  probeMs: number;
  graceMs: number;
}
/** Parse redis://[user:pass@]host[:port][/db][?opts] (or rediss://); StoreError 'invalid_argument' on a bad URL or option. */
export declare function parseRedisUrl(spec: string): RedisUrlOptions;
/** $XDG_STATE_HOME (else ~/.local/state)/agent-recovery/spool-<16 hex of sha256(URL without password)>.sqlite. */
export declare function defaultSpoolPath(spec: string): string;

/** The server's clock: TIME sampled on first use and every 10 s, never backwards, the last offset when unreachable. */
export declare class ServerClock implements Clock {
  readonly offsetMs: number;
  /** Take the first TIME sample unless one was taken; resolves when it is done. */
  ready(): Promise<void>;
  /** Never waits for Redis: a due sample runs in the background. */
  nowMs(): number;
  sleepMs(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * A store on Redis 7 (the shared Lua scripts), synchronous like SqliteStore (blocking on a
 * worker thread), with `async` for callers on the event loop. Needs the optional dependency @redis/client.
 */
export declare class RedisStore implements Store {
  /** `options.open` (default true): check the store's metadata now, blocking; false: at the first call. */
  constructor(url: string, options?: { open?: boolean });
  /** The same methods returning promises, on a client of this thread (never blocks it); also ping and sampleTime. */
  readonly async: AsyncStore & { ping(): Promise<void> };
  /** The URL without its password. */
  readonly url: string;
  /** The parsed URL options, without the URLs that carry the password. */
  readonly options: Omit<RedisUrlOptions, 'url' | 'clientUrl'>;
  serverClock(): ServerClock;
  /** PING; StoreError 'unavailable' when the server does not answer. */
  ping(): void;
  close(): void;
  get(key: string, nowMs: number): Versioned | null;
  compareAndSet(key: string, expected: number | null, value: string, ttlMs: number | null, nowMs: number): Cas;
  append(stream: string, record: string, nowMs: number): number;
  read(stream: string, after: number, limit: number): Array<[number, string]>;
  delete(key: string): boolean;
  keys(prefix: string, nowMs: number): string[];
  purgeExpired(nowMs: number): number;
}

export interface FallbackStoreOptions {
  /** Called with each event's JSON text: store_degraded, store_restored. */
  onEvent?: (text: string) => void;
  /** While degraded, try the primary again at most this often, in the calls' nowMs (default 1000). */
  probeMs?: number;
  /** The store's name in events (default primary.url). */
  name?: string;
}

/** A primary store (Redis) that falls back to a local store (the spool) while the primary is unavailable. */
export declare class FallbackStore implements Store {
  constructor(primary: Store, local: Store, options?: FallbackStoreOptions);
  readonly primary: Store;
  readonly local: Store;
  /** True while calls go to the primary. */
  readonly healthy: boolean;
  /** True while a background probe or flush runs (calls meanwhile are served locally, without waiting). */
  readonly reconnecting: boolean;
  /** How many probes of the primary were started: while degraded at most one per `probeMs` of the calls' `nowMs`. */
  readonly probes: number;
  /** The same methods returning promises: the primary's `async` awaited, the local store called in place. */
  readonly async: AsyncStore;
  /** Also call `fn` with each event's JSON text; returns a function that stops it. */
  subscribe(fn: (text: string) => void): () => void;
  serverClock(): ServerClock | undefined;
  close(): void;
  get(key: string, nowMs: number): Versioned | null;
  compareAndSet(key: string, expected: number | null, value: string, ttlMs: number | null, nowMs: number): Cas;
  append(stream: string, record: string, nowMs: number): number;
  read(stream: string, after: number, limit: number): Array<[number, string]>;
  delete(key: string): boolean;
  keys(prefix: string, nowMs: number): string[];
  purgeExpired(nowMs: number): number;
}

/** A redis:// URL -> FallbackStore(RedisStore, spool) (RedisStore with fallback=none); anything else -> SqliteStore(path). */
export declare function openStore(spec: string, options?: { onEvent?: (text: string) => void }): Store & { close(): void };

// ------------------------------------------------------------------ the recovery runtime (docs/runtime.md)

/** Where the runtime reads the time and sleeps. */
export interface Clock {
  /** Now, Unix ms (an integer). */
  nowMs(): number;
  /** Sleep `ms`; may resolve early when `signal` aborts (the run was cancelled). */
  sleepMs(ms: number, signal?: AbortSignal): Promise<void>;
  /** True for a virtual clock: timeouts are measured instead of raced, fan-out branches run one after another. */
  readonly virtual?: boolean;
  /** Set the time (virtual clocks only). */
  set?(nowMs: number): void;
}

/** Date.now and real, cancellable timers (the default). */
export declare class SystemClock implements Clock {
  nowMs(): number;
  sleepMs(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Sleeping advances it at once; nothing waits. For tests and scenarios. */
export declare class VirtualClock implements Clock {
  constructor(nowMs?: number);
  readonly virtual: true;
  nowMs(): number;
  advance(ms: number): void;
  set(nowMs: number): void;
  sleepMs(ms: number): Promise<void>;
}

/** An explicit failure: answered `{"failed": observation}`. */
export declare class Failed {
  constructor(observation: Observation | string);
  observation: Observation | string;
}

/** A raw outcome the component judges: answered `{"response": outcome}` (a 200 with a refusal fails, a 304 succeeds). */
export declare class RawOutcome {
  constructor(outcome: Observation | string);
  outcome: Observation | string;
}
/** @deprecated Use `RawOutcome` (the same class); `Response` shadows fetch's global `Response`. */
export declare const Response: typeof RawOutcome;
/** @deprecated Use `RawOutcome` (the same class); `Response` shadows fetch's global `Response`. */
export type Response = RawOutcome;

/** One call the runtime makes. */
export interface Call {
  kind: 'operation' | 'fallback' | 'compensation';
  step: string;
  target: string;
  /** The idempotency key: the same on every attempt of a step, on every target. */
  key: string;
  /** Call number of this key, from 1. */
  attempt: number;
  timeoutMs: number | null;
  /** Aborted when the attempt times out (TimeoutError) or the run is cancelled (AbortError). */
  signal: AbortSignal;
}

export interface StepOptions<T = unknown> {
  id: string;
  tool: string;
  call?: CallKind;
  args?: Json;
  target?: string;
  fallbacks?: string[];
  sideEffect?: boolean;
  idempotent?: boolean;
  /** A plain value succeeds; a throw is observed with fromError; Failed / RawOutcome are explicit. */
  operation: (call: Call) => T | Failed | RawOutcome | Promise<T | Failed | RawOutcome>;
  compensate?: (call: Call) => unknown;
  /** Restore the checkpoint; return false (or throw) when it could not. */
  checkpoint?: () => boolean | void | Promise<boolean | void>;
  /** This step replays dead-letter record `id` for the `n`-th time (its key is derived from `key` and `n`); set by `deadLetters.replay`. */
  replayOf?: { key: string; n: number; id: string };
}

export interface StepReport<T = unknown> {
  outcome: 'ok' | 'failed' | 'escalated' | 'replan' | 'awaiting_input' | 'dead_lettered' | 'cancelled' | 'in_flight' | string;
  runFinished: boolean;
  result: Json;
  envelope: Envelope | null;
  rendered: Json;
  token: string | null;
  /** The operation's own value for an `ok` from a call (e.g. a fetch Response); undefined when cached. */
  value: T | undefined;
}

export interface RuntimeEvent {
  t_ms: number;
  event: string;
  step: string | null;
  target: string | null;
  attempt?: number;
  call?: string;
  key?: string;
  action?: Action;
  code?: string;
  delay_ms?: number;
  state?: string;
}

export interface RuntimeOptions {
  /** Default: the reference policy. Any Policy (hot swap: policy.swap), an IsolatedPolicy, or {decideJson}. */
  policy?: Policy | IsolatedPolicy | { decideJson(observation: string, context: string): string | Promise<string> };
  store?: Store;
  clock?: Clock;
  seed?: bigint | string | number;
  attemptBudget?: number;
  breaker?: { failureThreshold?: number; openMs?: number };
  idempotencyTtlMs?: number;
  inFlightTtlMs?: number;
  /** 0 (the default): a step whose key is in flight in another worker ends `in_flight` at once; > 0: it waits up to this long for that call. */
  inFlightWaitMs?: number;
  attemptTimeoutMs?: number | null;
  deadlineMs?: number | null;
  policyConfig?: PolicyConfig | null;
  /** Write the journal before every side effect (default true; docs/durability.md). */
  journal?: boolean;
  /** The dead-letter queue's owner and runbook (in every record) and the depth that raises `dead_letter_depth` (all default null). */
  deadLetter?: { owner?: string | null; runbook?: string | null; depthThreshold?: number | null } | null;
  /**
   * The fleet retry quota (default: off): a token bucket in the store that every retry takes from
   * and every success refills; each member optional (`'default'`, 500, 5, 10, 1). An empty bucket
   * stops retries on every worker sharing the store.
   */
  retryQuota?: { name?: string; capacity?: number; retryCost?: number; timeoutCost?: number; successRefund?: number } | null;
  /** The raw run configuration (docs/runtime.md); replaces the typed options above. */
  config?: Record<string, Json>;
  onEvent?: (event: RuntimeEvent, text: string) => void;
  /** Spans and metrics (docs/telemetry.md). Default: Telemetry.global(), the API's global providers (no-ops until an SDK is registered). */
  telemetry?: Telemetry;
  /**
   * Log every decision, one JSON line each (docs/decision-logs.md): appended
   * to the file `path` (renamed to `path.1` at 64 MiB), or passed to
   * `write(line)`. `observation`: 'full' (default, replayable) or 'digest';
   * `maxRecordBytes`: the largest line (>= 16384, default 65536). Default: off.
   */
  decisionLog?: DecisionLogOptions;
}

/** The `decisionLog` option of a Runtime. */
export type DecisionLogOptions = ({ path: string; write?: never } | { write: (line: string) => void | Promise<void>; path?: never }) & {
  observation?: 'full' | 'digest';
  maxRecordBytes?: number;
};

/** A Runtime's decision log, as `runtime.decisionLog`. */
export interface DecisionLog {
  /** Lines the file could not take (the runs went on without them; the first one is a process warning); 0 for `write(line)`. */
  readonly failedWrites: number;
}

/**
 * Where a Runtime sends its OpenTelemetry spans and metrics (docs/telemetry.md).
 * `new Telemetry({tracerProvider, meterProvider})`: these providers (a missing
 * one: the global one). An unknown member or a provider without
 * getTracer / getMeter is a PolicyError of kind `invalid_config`.
 */
export declare class Telemetry {
  constructor(providers?: {
    tracerProvider?: import('@opentelemetry/api').TracerProvider;
    meterProvider?: import('@opentelemetry/api').MeterProvider;
    /** None by default; e.g. a LoggerProvider of @opentelemetry/sdk-logs: a WARN log record per dead-letter write. */
    loggerProvider?: { getLogger(name: string, version?: string): object };
  });
  /** The global providers as they are now: the default. */
  static global(): Telemetry;
  /** No spans, no metrics, no call into OpenTelemetry at all. */
  static off(): Telemetry;
}

export declare const RUNTIME_DEFAULTS: Readonly<{
  attemptBudget: number;
  /** What applies when neither the `breaker` option nor the active policy's decisions set it (the reference's thresholds). */
  breaker: Readonly<{ failureThreshold: number; openMs: number }>;
  idempotencyTtlMs: number;
  inFlightTtlMs: number;
  attemptTimeoutMs: null;
  deadlineMs: null;
  policyConfig: null;
  journal: true;
  deadLetter: Readonly<{ owner: null; runbook: null; depthThreshold: null }>;
}>;

export declare class Runtime {
  static create(options?: RuntimeOptions): Promise<Runtime>;
  readonly store: Store;
  readonly clock: Clock;
  /** The decision log (docs/decision-logs.md), or null when off. */
  readonly decisionLog: DecisionLog | null;
  run(runId: string, options?: { signal?: AbortSignal; cancelAtMs?: number }): Run;
  /** Run `fn(run)`, then end the run; when `fn` throws, the run is left in the journal for `recover`. */
  withRun<T>(runId: string, fn: (run: Run) => Promise<T> | T, options?: { signal?: AbortSignal; cancelAtMs?: number }): Promise<T>;
  /** Finish the runs a dead worker left in the journal, then the requested replays (docs/durability.md §2). */
  recover(operations: Operations, options?: { olderThanMs?: number }): Promise<RecoverReport[]>;
  /** The dead-letter queue of this runtime's store. */
  readonly deadLetters: DeadLetters;
  /** The failure's envelope, or undefined for a success. */
  checkOutcome(outcome: Observation | string): Envelope | undefined;
  checkOutcomeJson(text: string): string | undefined;
}

export declare class Run {
  readonly runId: string;
  /** Every event so far, the component's JSON text. */
  readonly events: string[];
  readonly state: string;
  readonly finished: string | undefined;
  step<T>(step: StepOptions<T>): Promise<StepReport<T>>;
  fanout(id: string, minResults: number, steps: StepOptions[]): Promise<StepReport<unknown[]>>;
  cancel(): Promise<StepReport>;
  cancelAt(nowMs: number): void;
  /** The run is complete: its journal entry is deleted (outcome `completed`). A run never ended is rolled back by `recover`. */
  end(): Promise<StepReport>;
}

/** Tool name -> the callables of its steps, as `recover` and `deadLetters.replay` take them. */
export type Operations = Record<string, { operation: StepOptions['operation']; compensate?: StepOptions['compensate']; checkpoint?: StepOptions['checkpoint'] }>;

export interface RecoverReport {
  runId: string;
  /** `interrupted`, `dead_lettered`, `cancelled`; a replay's: the replayed step's outcome; `error`: the loop refused the journaled state (see `error`). */
  outcome: string;
  /** The step in progress when the run was interrupted (null between steps); a replay's: the replayed step. */
  step: string | null;
  /** The outcome the resumed step reached (the record's `step_outcome`). */
  stepOutcome: string | null;
  /** The dead-letter record the run wrote, if any. */
  deadLetterId: string | null;
  /** The run's events, the component's JSON text. */
  events: string[];
  /** For a replay: the record replayed. */
  replayOf?: string;
  /** For outcome `error`: why (the journal entry stays). */
  error?: string;
}

export type DeadLetterStatus = 'open' | 'replay_requested' | 'replayed' | 'purged';
export declare const DEAD_LETTER_STATUSES: readonly DeadLetterStatus[];
export type DeadLetterErrorKind = 'not_found' | 'invalid_argument' | 'conflict' | 'invalid_record';
export declare const DEAD_LETTER_ERROR_KINDS: readonly DeadLetterErrorKind[];
export declare class DeadLetterError extends Error {
  kind: DeadLetterErrorKind;
}
export declare const ITEM_PREFIX: string;
export declare const CLOSED_KEY: string;
export declare const LEASE_PREFIX: string;
export declare const JOURNAL_PREFIX: string;
/** `hex(sha256(canonical_json(["agent-recovery/replay", key, n])))`. */
export declare function replayKey(key: string, n: number): string;

export interface DeadLetterReplay {
  n: number;
  key: string;
  run_id: string;
  requested_ms: number;
  outcome?: string;
  finished_ms?: number;
}
export interface DeadLetterItem {
  /** The record's sequence number in the stream, a decimal string. */
  id: string;
  status: DeadLetterStatus;
  /** The record (docs/durability.md §3; fields may be added, never removed). */
  record: Record<string, Json>;
  replays: DeadLetterReplay[];
  purgedMs?: number;
}
export interface ReplayReport {
  id: string;
  n: number;
  key: string;
  runId: string;
  outcome?: string;
  deadLetterId?: string | null;
  events?: string[];
}
export declare class DeadLetters {
  list(options?: { status?: DeadLetterStatus | 'all'; after?: string | number; limit?: number }): DeadLetterItem[];
  show(id: string | number): DeadLetterItem;
  depth(): number;
  purge(id: string | number): DeadLetterItem;
  requestReplay(id: string | number): ReplayReport;
  replay(id: string | number, operations: Operations): Promise<ReplayReport>;
}

export type ScenarioErrorKind = 'invalid' | 'runtime';
export declare const SCENARIO_ERROR_KINDS: readonly ScenarioErrorKind[];
export declare const DEAD_LETTER_STREAM: string;
export declare class ScenarioError extends Error {
  kind: ScenarioErrorKind;
}
export interface ScenarioOutput {
  outcome: string;
  events: string[];
  deadLetters: string[];
  /** The exact text of Rust's ScenarioOutput::to_json. */
  json: string;
}
export declare function runScenario(scenario: string | object, store?: Store, options?: { policy?: RuntimeOptions['policy'] }): Promise<ScenarioOutput>;
export declare function runBatch(lines: AsyncIterable<string> | Iterable<string>, options?: { policy?: RuntimeOptions['policy'] }): AsyncGenerator<string>;
export declare function outputJson(output: { outcome: string; events: string[]; deadLetters: string[] }): string;
