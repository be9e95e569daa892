// The errors the wrapper throws. Three families, so callers can tell them apart:
//
// - PolicyError: the policy refused the input (bad JSON, bad context, ...). It is
//   the component's own `policy-error`, unchanged: `.kind` and `.message`.
// - PolicyRuntimeError: the component itself failed (a trap, an instantiation
//   failure). Never caused by the observed failure; report it. PolicyLoadError is
//   the subclass for a component that could not be loaded or failed validation.
// - RecoveryError: thrown by `retry()` when the policy decided to stop; carries
//   the decision and the envelope.

/** The kinds of `policy-error` (WIT `error-kind`, in snake_case). */
export const POLICY_ERROR_KINDS = Object.freeze([
  'invalid_json',
  'invalid_observation',
  'invalid_context',
  'invalid_config',
  'invalid_argument',
  'too_large',
  'internal',
]);

/**
 * The host error codes, one spelling shared by the Rust, Node and Python hosts
 * (docs/hosts.md). Every error this package throws has a `code`: one of these,
 * or `policy/<kind>` (e.g. `policy/invalid-json`) for a PolicyError.
 */
export const ERROR_CODES = Object.freeze([
  'io',
  'invalid-argument',
  'digest-mismatch',
  'load',
  'incompatible',
  'smoke-test',
  'trap',
  'out-of-fuel',
  'memory-limit',
  'invalid-output',
  'input-too-large',
  'signature',
]);

/** DEPRECATED `PolicyLoadError.reason` spellings -> the shared code. */
const REASON_CODES = Object.freeze({
  read: 'io',
  digest_mismatch: 'digest-mismatch',
  transpile: 'load',
  transpiler_missing: 'load',
  imports: 'incompatible',
  contract: 'incompatible',
  instantiate: 'load',
  smoke_test: 'smoke-test',
});

/**
 * The policy refused the input. `kind` is one of POLICY_ERROR_KINDS; `code` is
 * `policy/<kind>` in the shared spelling (`policy/invalid-json`), or
 * `input-too-large` when this host refused the input before the policy saw it.
 */
export class PolicyError extends Error {
  constructor(kind, message, { code } = {}) {
    super(message);
    this.name = 'PolicyError';
    this.kind = kind;
    this.code = code ?? `policy/${String(kind).replaceAll('_', '-')}`;
  }

  /** From a jco `ComponentError` payload (`{kind: 'invalid-json', message}`). */
  static fromPayload(payload) {
    const kind = String(payload?.kind ?? 'internal').replaceAll('-', '_');
    return new PolicyError(kind, String(payload?.message ?? 'the policy returned an error without a message'));
  }
}

/**
 * The component failed (trap, runaway, output that breaks the contract): not an
 * answer about the input. `code` is `trap` (the default), `invalid-output`, ...
 */
export class PolicyRuntimeError extends Error {
  constructor(message, options) {
    const { code, ...rest } = options ?? {};
    super(message, rest);
    this.name = 'PolicyRuntimeError';
    this.code = code ?? 'trap';
  }
}

/**
 * A component could not be loaded, or failed validation before activation.
 * `code` says why, in the spelling all three hosts share: `io`,
 * `invalid-argument` (a malformed pin), `digest-mismatch`, `load`,
 * `incompatible`, `smoke-test`, or `trap` / `invalid-output` when the policy
 * misbehaved while running its smoke set.
 *
 * DEPRECATED: `reason` (`read`, `digest_mismatch`, `transpile`, `imports`,
 * `instantiate`, `contract`, `smoke_test`) names the step; kept for existing
 * callers, use `code`.
 */
export class PolicyLoadError extends PolicyRuntimeError {
  constructor(reason, message, options) {
    const { code, ...rest } = options ?? {};
    super(message, { ...rest, code: code ?? REASON_CODES[reason] ?? 'load' });
    this.name = 'PolicyLoadError';
    this.reason = reason;
  }
}

/** `retry()` stopped because the policy's action was not `retry`. */
export class RecoveryError extends Error {
  constructor({ decision, observation, attempts, cause, result, elapsedMs = 0 }) {
    const env = decision.envelope;
    super(`${decision.action} after attempt ${decision.attempt}: ${env.code} (${decision.reason}): ${env.message}`, {
      cause,
    });
    this.name = 'RecoveryError';
    /** The decision object (with its `policy` field). */
    this.decision = decision;
    /** The envelope of the last failure, as decided. */
    this.envelope = env;
    /** The next step the policy chose, e.g. `fail`, `dead_letter`, `replan`. */
    this.action = decision.action;
    /** The registry code of the last failure. */
    this.code = env.code;
    /** The observation the policy was asked about. */
    this.observation = observation;
    /** How many attempts were made. */
    this.attempts = attempts;
    /** The failed result, when the operation returned a failure instead of throwing. */
    this.result = result;
    /** Retry delay spent in the run when it stopped (ms), earlier steps included. */
    this.elapsedMs = elapsedMs;
  }
}

/** True for what a jco-transpiled export throws for a top-level `result` error. */
export function isComponentError(e) {
  return e instanceof Error && Object.hasOwn(e, 'payload') && typeof e.payload === 'object';
}
