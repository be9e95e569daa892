//! The run's configuration: budgets, breaker thresholds, cache TTL, timeouts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{BreakerOverrides, BreakerThresholds};

/// The run configuration's `breaker`: each member it sets wins over the
/// active policy's thresholds (a decision's `breaker`), which win over seed
/// 000's 3 failures / 30 000 ms. Validated like a policy's `config.breaker`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BreakerOverrides", into = "BreakerOverrides")]
pub struct BreakerConfig(pub BreakerOverrides);

impl TryFrom<BreakerOverrides> for BreakerConfig {
    type Error = String;
    fn try_from(o: BreakerOverrides) -> Result<Self, String> {
        BreakerThresholds::default()
            .with(&o)
            .map_err(|e| e.message)?;
        Ok(BreakerConfig(o))
    }
}

impl From<BreakerConfig> for BreakerOverrides {
    fn from(c: BreakerConfig) -> Self {
        c.0
    }
}

/// The run's configuration (the `config` member of the `run` input).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Calls allowed per input (idempotency key) over its lifetime, persisted
    /// in the store. Default 5.
    pub attempt_budget: u32,
    /// Circuit breaker thresholds set by the run (none: the policy's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerConfig>,
    /// How long a recorded outcome answers a duplicate key. Default 86 400 000 ms (24 h).
    pub idempotency_ttl_ms: u64,
    /// How long a key's in-flight mark holds (a lease): a worker that died
    /// mid-call blocks its key this long, not for the whole TTL. Default
    /// 300 000 ms (5 min); capped by `idempotency_ttl_ms`.
    pub in_flight_ttl_ms: u64,
    /// How long a step whose key is in flight elsewhere waits for it (polling
    /// the key every 250 ms at most) before ending `in_flight`. Default 0: no wait.
    #[serde(skip_serializing_if = "is_zero")]
    pub in_flight_wait_ms: u64,
    /// Per-attempt timeout handed to the host with each call; none by default.
    pub attempt_timeout_ms: Option<u64>,
    /// Run deadline, ms after the run started; none by default. No call starts
    /// and no retry sleep ends after it: the step ends as a `timeout` (phase
    /// `total`) that exhausts it, and calls get at most the time left.
    pub deadline_ms: Option<u64>,
    /// The policy configuration passed as `context.config` to every decision
    /// (`{"tool":{..},"llm":{..},"agent":{..},"retry_budget_ms":..}`); none by default.
    pub policy: Option<Value>,
    /// Write the journal before every main-lane call and fork, delete it when
    /// the run ends (docs/durability.md §1). Default true; `false` for a store
    /// where nothing survives anyway.
    #[serde(skip_serializing_if = "is_true")]
    pub journal: bool,
    /// The dead-letter queue's owner, runbook and depth threshold; none by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterConfig>,
    /// The fleet retry quota (a token bucket in the store shared by every
    /// worker); none by default (off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_quota: Option<RetryQuota>,
    /// What a step does when every target left in its chain has an open
    /// breaker. Default `fail`: the step ends `failed` at once with the
    /// `runtime.circuit.open` envelope (`retry_after_ms`: the time to the next
    /// probe); `wait`: the policy decides on that envelope (the reference
    /// policy retries after `retry_after_ms`, within the run's retry budget).
    #[serde(skip_serializing_if = "OnOpen::is_fail")]
    pub on_open: OnOpen,
    /// The decision log (docs/decision-logs.md): when set, every decision
    /// is followed by a `log` effect with its line; none by default (off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_log: Option<super::decision_log::DecisionLogConfig>,
}

/// The run configuration's `on_open`: what a step does when every target
/// left in its chain is open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnOpen {
    /// End the step `failed` at once, with the `runtime.circuit.open` envelope.
    #[default]
    Fail,
    /// Ask the policy about the `runtime.circuit.open` envelope (usually a
    /// retry after the time to the next probe).
    Wait,
}

impl OnOpen {
    fn is_fail(&self) -> bool {
        *self == OnOpen::Fail
    }
}

/// The largest retry quota capacity (tokens).
pub const MAX_QUOTA: u64 = 1_000_000;

/// The run configuration's `retry_quota`: a token bucket under
/// `agent-recovery/quota/<name>` that every retry takes from and every
/// success refills (AWS SDK retry quota, gRPC retry throttling).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RetryQuotaFields")]
pub struct RetryQuota {
    /// The bucket's name (its store key). Default `default`.
    pub name: String,
    /// Tokens in a full bucket (an absent bucket is full). Default 500.
    pub capacity: u64,
    /// Tokens a retry takes. Default 5.
    pub retry_cost: u64,
    /// Tokens a retry after a timeout takes. Default 10.
    pub timeout_cost: u64,
    /// Tokens a success without a retry gives back. Default 1.
    pub success_refund: u64,
}

/// `retry_quota` as written, before its checks.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RetryQuotaFields {
    name: String,
    capacity: u64,
    retry_cost: u64,
    timeout_cost: u64,
    success_refund: u64,
}

impl Default for RetryQuotaFields {
    fn default() -> Self {
        RetryQuotaFields {
            name: "default".to_owned(),
            capacity: 500,
            retry_cost: 5,
            timeout_cost: 10,
            success_refund: 1,
        }
    }
}

impl TryFrom<RetryQuotaFields> for RetryQuota {
    type Error = String;
    fn try_from(f: RetryQuotaFields) -> Result<Self, String> {
        let name_ok = !f.name.is_empty()
            && f.name.len() <= 128
            && f.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok {
            return Err(format!(
                "retry_quota.name is {:?}; use 1 to 128 letters, digits, '-', '_' or '.' (e.g. \"default\")",
                f.name
            ));
        }
        if f.capacity == 0 || f.capacity > MAX_QUOTA {
            return Err(format!(
                "retry_quota.capacity is {}; give 1..{MAX_QUOTA} tokens (e.g. 500)",
                f.capacity
            ));
        }
        for (what, cost) in [
            ("retry_cost", f.retry_cost),
            ("timeout_cost", f.timeout_cost),
        ] {
            if cost == 0 || cost > f.capacity {
                return Err(format!(
                    "retry_quota.{what} is {cost}; give 1..capacity ({}) tokens (e.g. 5 for retry_cost, 10 for timeout_cost)",
                    f.capacity
                ));
            }
        }
        if f.success_refund > f.capacity {
            return Err(format!(
                "retry_quota.success_refund is {}; give 0..capacity ({}) tokens (e.g. 1)",
                f.success_refund, f.capacity
            ));
        }
        Ok(RetryQuota {
            name: f.name,
            capacity: f.capacity,
            retry_cost: f.retry_cost,
            timeout_cost: f.timeout_cost,
            success_refund: f.success_refund,
        })
    }
}

impl RetryQuota {
    /// The bucket's store key.
    pub fn key(&self) -> String {
        format!("{}{}", super::effect::QUOTA_PREFIX, self.name)
    }
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The run configuration's `dead_letter`: who owns the queue, where its
/// runbook is, and the depth at which the runtime reports `dead_letter_depth`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DeadLetterFields")]
pub struct DeadLetterConfig {
    /// The queue's owner (a team, a person); copied into every record.
    pub owner: Option<String>,
    /// The runbook link; copied into every record.
    pub runbook: Option<String>,
    /// The depth (records not replayed nor purged) at which the runtime
    /// reports `dead_letter_depth` when a write crosses it; at least 1.
    pub depth_threshold: Option<u64>,
}

/// `dead_letter` as written, before its checks.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct DeadLetterFields {
    owner: Option<String>,
    runbook: Option<String>,
    depth_threshold: Option<u64>,
}

impl TryFrom<DeadLetterFields> for DeadLetterConfig {
    type Error = String;
    fn try_from(f: DeadLetterFields) -> Result<Self, String> {
        if f.depth_threshold == Some(0) {
            return Err(
                "dead_letter.depth_threshold is 0; give a positive integer (e.g. 10) or null"
                    .into(),
            );
        }
        Ok(DeadLetterConfig {
            owner: f.owner,
            runbook: f.runbook,
            depth_threshold: f.depth_threshold,
        })
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            attempt_budget: 5,
            breaker: None,
            idempotency_ttl_ms: 86_400_000,
            in_flight_ttl_ms: 300_000,
            in_flight_wait_ms: 0,
            attempt_timeout_ms: None,
            deadline_ms: None,
            policy: None,
            journal: true,
            dead_letter: None,
            retry_quota: None,
            on_open: OnOpen::Fail,
            decision_log: None,
        }
    }
}

impl RunConfig {
    /// The thresholds that apply to a failure the active policy decided on:
    /// each member from the run configuration when it set it, else from the
    /// decision's `breaker`, else the default (3 / 30 000 ms).
    pub fn breaker_for(&self, decided: Option<BreakerThresholds>) -> BreakerThresholds {
        let base = decided.unwrap_or_default();
        let run = self.breaker.map(|b| b.0).unwrap_or_default();
        BreakerThresholds {
            failure_threshold: run.failure_threshold.unwrap_or(base.failure_threshold),
            open_ms: run.open_ms.unwrap_or(base.open_ms),
            rate: run.rate.or(base.rate),
        }
    }

    /// How long a stored breaker without its own `open_ms` (written before
    /// breakers stored it) stays open: the run configuration's, else 30 000 ms.
    pub fn fallback_open_ms(&self) -> u64 {
        self.breaker_for(None).open_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: &str) -> Result<RunConfig, serde_json::Error> {
        serde_json::from_str(config)
    }

    #[test]
    fn precedence_run_then_decision_then_seed_000() {
        let thresholds = BreakerThresholds {
            failure_threshold: 2,
            open_ms: 60_000,
            rate: None,
        };
        let policy = Some(thresholds);
        let none = run("{}").unwrap();
        assert_eq!(none.breaker_for(None), BreakerThresholds::default());
        assert_eq!(none.breaker_for(policy), thresholds);
        assert_eq!(none.fallback_open_ms(), 30_000);
        let both = run(r#"{"breaker":{"failure_threshold":3,"open_ms":30000}}"#).unwrap();
        assert_eq!(both.breaker_for(policy), BreakerThresholds::default());
        // A member the run leaves unset comes from the policy.
        let one = run(r#"{"breaker":{"failure_threshold":5}}"#).unwrap();
        let got = one.breaker_for(policy);
        assert_eq!((got.failure_threshold, got.open_ms), (5, 60_000));
        assert_eq!(one.fallback_open_ms(), 30_000);
        let open = run(r#"{"breaker":{"open_ms":1000}}"#).unwrap();
        assert_eq!(open.fallback_open_ms(), 1_000);
    }

    #[test]
    fn bad_breaker_values_are_refused_with_a_hint() {
        for (config, hint) in [
            (r#"{"breaker":{"failure_threshold":0}}"#, "e.g. 3"),
            (r#"{"breaker":{"failure_threshold":101}}"#, "e.g. 3"),
            (r#"{"breaker":{"open_ms":0}}"#, "e.g. 30000"),
            (r#"{"breaker":{"open_ms":604800001}}"#, "e.g. 30000"),
        ] {
            let e = run(config).unwrap_err().to_string();
            assert!(e.contains(hint), "{config}: {e}");
        }
        let e = run(r#"{"breaker":{"failures":2}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `failures`"), "{e}");
    }

    #[test]
    fn journal_and_dead_letter_defaults_and_checks() {
        let none = run("{}").unwrap();
        assert!(none.journal);
        assert_eq!(none.dead_letter, None);
        assert!(!run(r#"{"journal":false}"#).unwrap().journal);
        let dl = run(
            r#"{"dead_letter":{"owner":"payments","runbook":"https://r/1","depth_threshold":3}}"#,
        )
        .unwrap()
        .dead_letter
        .unwrap();
        assert_eq!(dl.owner.as_deref(), Some("payments"));
        assert_eq!(dl.runbook.as_deref(), Some("https://r/1"));
        assert_eq!(dl.depth_threshold, Some(3));
        let empty = run(r#"{"dead_letter":{}}"#).unwrap().dead_letter.unwrap();
        assert_eq!(empty, DeadLetterConfig::default());
        for (config, needle) in [
            (r#"{"journal":"yes"}"#, "expected a boolean"),
            (
                r#"{"dead_letter":{"depth_threshold":0}}"#,
                "positive integer",
            ),
            (r#"{"dead_letter":{"depth_threshold":-1}}"#, "invalid value"),
            (r#"{"dead_letter":{"depth_threshold":1.5}}"#, "invalid type"),
            (r#"{"dead_letter":{"owner":7}}"#, "invalid type"),
            (r#"{"dead_letter":{"runbook":["a"]}}"#, "invalid type"),
            (r#"{"dead_letter":{"team":"x"}}"#, "unknown field `team`"),
            (r#"{"dead_letter":"ops"}"#, "invalid type"),
        ] {
            let e = run(config).unwrap_err().to_string();
            assert!(e.contains(needle), "{config}: {e}");
        }
    }

    #[test]
    fn in_flight_wait_is_off_by_default_and_not_in_the_state() {
        let none = run("{}").unwrap();
        assert_eq!(none.in_flight_wait_ms, 0);
        assert!(
            !serde_json::to_string(&none)
                .unwrap()
                .contains("in_flight_wait_ms")
        );
        let set = run(r#"{"in_flight_wait_ms":5000}"#).unwrap();
        assert_eq!(set.in_flight_wait_ms, 5000);
        let e = run(r#"{"in_flight_wait_ms":-1}"#).unwrap_err().to_string();
        assert!(e.contains("invalid value"), "{e}");
        // Above one week: the `run` input is refused with invalid-config and a hint.
        let e = crate::runtime::advance(
            "",
            r#"{"input":"run","now_ms":0,"run_id":"r","config":{"in_flight_wait_ms":604800001}}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::InvalidConfig);
        assert!(e.message.contains("(e.g. 5000)"), "{}", e.message);
        assert!(
            crate::runtime::advance(
                "",
                r#"{"input":"run","now_ms":0,"run_id":"r","config":{"in_flight_wait_ms":604800000}}"#,
            )
            .is_ok()
        );
    }

    #[test]
    fn retry_quota_defaults_and_checks() {
        assert_eq!(run("{}").unwrap().retry_quota, None);
        let q = run(r#"{"retry_quota":{}}"#).unwrap().retry_quota.unwrap();
        assert_eq!(
            (
                q.name.as_str(),
                q.capacity,
                q.retry_cost,
                q.timeout_cost,
                q.success_refund
            ),
            ("default", 500, 5, 10, 1)
        );
        assert_eq!(q.key(), "agent-recovery/quota/default");
        let q = run(r#"{"retry_quota":{"name":"erp","capacity":20,"retry_cost":2}}"#)
            .unwrap()
            .retry_quota
            .unwrap();
        assert_eq!((q.capacity, q.retry_cost, q.timeout_cost), (20, 2, 10));
        for (config, needle) in [
            (r#"{"retry_quota":{"name":""}}"#, "e.g. \"default\""),
            (r#"{"retry_quota":{"name":"a/b"}}"#, "letters, digits"),
            (r#"{"retry_quota":{"capacity":0}}"#, "e.g. 500"),
            (r#"{"retry_quota":{"capacity":1000001}}"#, "e.g. 500"),
            (r#"{"retry_quota":{"retry_cost":0}}"#, "1..capacity (500)"),
            (r#"{"retry_quota":{"capacity":8}}"#, "timeout_cost is 10"),
            (r#"{"retry_quota":{"success_refund":501}}"#, "e.g. 1"),
            (r#"{"retry_quota":{"cost":1}}"#, "unknown field `cost`"),
            (r#"{"retry_quota":{"capacity":-1}}"#, "invalid value"),
            (r#"{"retry_quota":5}"#, "invalid type"),
        ] {
            let e = run(config).unwrap_err().to_string();
            assert!(e.contains(needle), "{config}: {e}");
        }
    }

    #[test]
    fn an_unset_breaker_is_not_written_into_the_state() {
        let text = serde_json::to_string(&RunConfig::default()).unwrap();
        assert!(!text.contains("breaker"), "{text}");
        let set = run(r#"{"breaker":{"open_ms":1000}}"#).unwrap();
        let text = serde_json::to_string(&set).unwrap();
        assert!(text.contains(r#""breaker":{"open_ms":1000}"#), "{text}");
        assert_eq!(run(&text).unwrap(), set);
    }
}
