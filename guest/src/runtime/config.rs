//! The run's configuration: budgets, breaker thresholds, cache TTL, timeouts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Circuit breaker thresholds (seed 000: 3 consecutive failures open it for 30 s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive transient failures on a target that open its breaker. Default 3.
    pub failure_threshold: u32,
    /// How long an open breaker short-circuits calls before one probe. Default 30 000 ms.
    pub open_ms: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 3,
            open_ms: 30_000,
        }
    }
}

/// The run's configuration (the `config` member of the `run` input).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Calls allowed per input (idempotency key) over its lifetime, persisted
    /// in the store (seed 002 §5). Default 5.
    pub attempt_budget: u32,
    /// Circuit breaker thresholds.
    pub breaker: BreakerConfig,
    /// How long a recorded outcome answers a duplicate key. Default 86 400 000 ms (24 h).
    pub idempotency_ttl_ms: u64,
    /// How long a key's in-flight mark holds (a lease): a worker that died
    /// mid-call blocks its key this long, not for the whole TTL. Default
    /// 300 000 ms (5 min); capped by `idempotency_ttl_ms`.
    pub in_flight_ttl_ms: u64,
    /// Per-attempt timeout handed to the host with each call; none by default.
    pub attempt_timeout_ms: Option<u64>,
    /// Run deadline, ms after the run started; none by default. No call starts
    /// and no retry sleep ends after it: the step ends as a `timeout` (phase
    /// `total`) that exhausts it, and calls get at most the time left.
    pub deadline_ms: Option<u64>,
    /// The policy configuration passed as `context.config` to every decision
    /// (`{"tool":{..},"llm":{..},"agent":{..},"retry_budget_ms":..}`); none by default.
    pub policy: Option<Value>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            attempt_budget: 5,
            breaker: BreakerConfig::default(),
            idempotency_ttl_ms: 86_400_000,
            in_flight_ttl_ms: 300_000,
            attempt_timeout_ms: None,
            deadline_ms: None,
            policy: None,
        }
    }
}
