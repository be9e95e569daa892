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
  | 'downstream-wrap';
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
export type PolicyLoadReason = 'read' | 'digest_mismatch' | 'transpile' | 'imports' | 'instantiate' | 'contract' | 'smoke_test';

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
  | (ObservationCommon & { source?: 'exception'; type: string; message?: string })
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
  /** Extra cases the candidate must pass before activation (array or JSON text). */
  smokeTests?: SmokeCase[] | string;
  /** `false`: skip the smoke set (tests, or forcing a policy in by hand). Default `true`. */
  verify?: boolean;
  /** Inputs over this many UTF-8 bytes are refused with code `input-too-large`. Default 16 MiB. */
  maxInputBytes?: number;
}

export interface IsolateOptions extends LoadOptions {
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
  renderJson(envelope: string, format: RenderFormat, options?: string): Promise<string>;
  render(envelope: Envelope | string, format: RenderFormat, options?: object | string): Promise<Json>;
}

export declare const DEFAULT_TIMEOUT_MS: number;
export declare const DEFAULT_LOAD_TIMEOUT_MS: number;
export declare const MAX_INPUT_BYTES: number;

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
  | 'input-too-large';
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
   * Extra context fields (checkpoint_available, fallback_available, compensations_pending, config, ...).
   * `elapsed_ms` here is the retry delay earlier steps of the run already spent: this step's sleeps add to it.
   */
  context?: Context;
  /** Per-attempt timeout: aborts the attempt's signal with a TimeoutError. */
  timeoutMs?: number;
  signal?: AbortSignal;
  onDecision?: (event: DecisionEvent<T>) => void | Promise<void>;
  /** Injectable sleep (tests): resolves after `ms`, rejects if `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Whether a returned value is a failure: its observation, or undefined. */
  failureOf?: (result: T, options: { call?: CallKind; provider?: string }) => Observation | undefined | Promise<Observation | undefined>;
  /** The clock sent as now_ms (default Date.now). */
  now?: () => number;
}

export declare function retry<T>(operation: (attempt: AttemptInfo) => Promise<T> | T, options: RetryOptions<T>): Promise<T>;
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;

export interface ObserveOptions {
  call?: CallKind;
  provider?: string;
  requestId?: string;
}
export declare function fromResponse(res: Response, options?: ObserveOptions & { maxBodyChars?: number }): Promise<Observation>;
export declare function fromError(err: unknown, options?: ObserveOptions & { timeoutMs?: number }): Observation;
export declare function failureOf(result: unknown, options?: ObserveOptions): Promise<Observation | undefined>;
