//! Codes for the policy's own decisions.

use super::{CodeDef, RUNTIME, code_def};

pub(super) const DEFS: &[CodeDef] = &[
    code_def!(
        "budget.attempts_exhausted",
        RUNTIME,
        Permanent,
        Error,
        Dependency,
        false,
        "The step used all its attempts.",
        "A retryable failure on the last allowed attempt (max_attempts).",
        "Stop retrying: run compensations if side effects were taken, then dead-letter the input.",
        related = ["budget.retry_exhausted"]
    ),
    code_def!(
        "budget.retry_exhausted",
        RUNTIME,
        Permanent,
        Error,
        Dependency,
        false,
        "The run's retry budget is spent.",
        "The next delay (or the server's Retry-After) does not fit in the run's remaining retry budget.",
        "Stop retrying: run compensations if side effects were taken, then dead-letter the input.",
        related = ["budget.attempts_exhausted"]
    ),
    code_def!(
        "policy.not_idempotent",
        RUNTIME,
        Permanent,
        Error,
        Conflict,
        false,
        "The call may have taken effect and is not safe to repeat.",
        "An ambiguous failure (timeout, reset, 5xx) on a call the caller marked not idempotent.",
        "Check whether the call took effect before repeating it; pass an idempotency key to make retries safe."
    ),
    code_def!(
        "state.checkpoint_missing",
        RUNTIME,
        State,
        Fatal,
        State,
        false,
        "A state error needs a checkpoint, and there is none.",
        "A state-class failure while the caller reported no checkpoint to restore.",
        "Escalate to a human; the run cannot be restored automatically."
    ),
    code_def!(
        "policy.no_fallback",
        RUNTIME,
        Policy,
        Fatal,
        Safety,
        false,
        "A policy error needs a fallback, and there is none.",
        "A policy-class failure while the caller reported no fallback path.",
        "Escalate to a human with the envelope."
    ),
    code_def!(
        "circuit.open",
        RUNTIME,
        Transient,
        Error,
        Dependency,
        true,
        "The target's circuit breaker is open; the call was not made.",
        "The target failed with consecutive transient failures up to the breaker's threshold, and its open period has not ended (by default 3 failures, 30 s).",
        "Take a fallback target, or wait retry_after_ms (the time until the breaker lets one probe through) and try again.",
        related = ["budget.retry_exhausted"]
    ),
    code_def!(
        "fanout.insufficient",
        RUNTIME,
        Permanent,
        Error,
        Dependency,
        false,
        "Fewer branches of a fan-out succeeded than it needs.",
        "A fan-out ended with fewer branches ok than its min_results (graceful degradation); each branch was already retried, fallen back or dead-lettered under its own decisions.",
        "Do not retry the fan-out as a whole: act on the failed branches' envelopes (their dead-letter records), or lower min_results if fewer answers are acceptable.",
        related = ["budget.attempts_exhausted", "circuit.open"]
    ),
    code_def!(
        "recover.unknown_tool",
        RUNTIME,
        Permanent,
        Error,
        NotFound,
        false,
        "The recovering worker has no operation for the interrupted step's tool.",
        "recover() resumed a journaled run whose next call is for a tool missing from the operations it was given (docs/durability.md §2): the call was not made.",
        "Pass recover() an operation (and compensation) for every tool your runs use; the run was rolled back and dead-lettered, so replay its record once the tool is registered."
    ),
    code_def!(
        "budget.retry_quota_exhausted",
        RUNTIME,
        Permanent,
        Error,
        Dependency,
        false,
        "The fleet's retry quota is spent: the retry was not made.",
        "A retry decision found fewer tokens in the shared retry quota (run configuration retry_quota, a token bucket in the store) than the retry costs: the fleet is already retrying too much against failing targets (AWS SDK retry quota, gRPC retry throttling).",
        "Stop retrying: run compensations if side effects were taken, then dead-letter the input; replay it once the targets recover (successes refill the quota).",
        related = ["budget.attempts_exhausted", "budget.retry_exhausted"]
    ),
];
