//! Policy parameters and their validation.
//!
//! # Default
//!
//! | call  | base_ms | cap_ms | max_attempts |
//! |-------|---------|--------|--------------|
//! | tool  | 250     | 30000  | 5            |
//! | llm   | 1000    | 30000  | 3            |
//! | agent | 1000    | 30000  | 3            |
//!
//! `retry_budget_ms`: 60000 (total retry delay one run may spend).
//!
//! `breaker`: `{"failure_threshold": 3, "open_ms": 30000}` (three
//! consecutive transient failures open a target's circuit breaker for 30 s).

use crate::error::{ErrorKind, PolicyError};
use crate::model::CallKind;
use serde::{Deserialize, Serialize};

/// The largest cap or budget accepted: one week, in ms.
pub const MAX_MS: u64 = 7 * 24 * 3600 * 1000;
/// The largest attempt limit accepted.
pub const MAX_ATTEMPTS: u32 = 100;

/// Backoff parameters for one kind of call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Base delay, ms.
    pub base_ms: u64,
    /// Cap, ms.
    pub cap_ms: u64,
    /// Attempts allowed, including the first.
    pub max_attempts: u32,
}

/// Circuit-breaker thresholds of a policy: how many consecutive
/// transient failures open a target's breaker, and how long it stays open
/// before one probe. Every decision carries them as its `breaker` member; the
/// recovery loop applies them when it records the failure it decided on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerThresholds {
    /// Consecutive transient failures on a target that open its breaker. Default 3.
    pub failure_threshold: u32,
    /// How long an open breaker short-circuits calls before one probe, ms. Default 30 000.
    pub open_ms: u64,
    /// The failure-rate mode: when set, the breaker opens on the rate of
    /// transient failures over a sliding time window instead of on
    /// `failure_threshold` consecutive ones. None (the default): consecutive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<BreakerRate>,
}

impl Default for BreakerThresholds {
    fn default() -> Self {
        Self {
            failure_threshold: 3,
            open_ms: 30_000,
            rate: None,
        }
    }
}

/// The failure-rate mode of a breaker (in the manner of resilience4j's
/// time-based sliding window): it opens when, over the last `window_ms`, at
/// least `minimum_calls` calls were recorded and at least
/// `failure_rate_threshold` percent of them failed transiently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerRate {
    /// The failure rate that opens the breaker, percent (1..=100). Default 50.
    pub failure_rate_threshold: u32,
    /// Calls the window must hold before the rate counts. Default 100.
    pub minimum_calls: u32,
    /// The sliding window, ms (recorded in ten buckets). Default 100 000.
    pub window_ms: u64,
}

impl Default for BreakerRate {
    fn default() -> Self {
        Self {
            failure_rate_threshold: 50,
            minimum_calls: 100,
            window_ms: 100_000,
        }
    }
}

/// The largest `minimum_calls` accepted.
pub const MAX_MINIMUM_CALLS: u32 = 100_000;

impl BreakerRate {
    /// `failure_rate_threshold` 1..=100, `minimum_calls` 1..=[`MAX_MINIMUM_CALLS`],
    /// `window_ms` 10..=[`MAX_MS`]; the error names `what` and ends with a hint.
    pub fn validate(&self, what: &str) -> Result<(), PolicyError> {
        if self.failure_rate_threshold == 0 || self.failure_rate_threshold > 100 {
            return Err(invalid(format!(
                "{what}.rate.failure_rate_threshold must be between 1 and 100 (got {}); it is a percentage, e.g. 50",
                self.failure_rate_threshold
            )));
        }
        if self.minimum_calls == 0 || self.minimum_calls > MAX_MINIMUM_CALLS {
            return Err(invalid(format!(
                "{what}.rate.minimum_calls must be between 1 and {MAX_MINIMUM_CALLS} (got {}); use e.g. 100",
                self.minimum_calls
            )));
        }
        if self.window_ms < 10 || self.window_ms > MAX_MS {
            return Err(invalid(format!(
                "{what}.rate.window_ms must be between 10 and {MAX_MS} (got {}); use e.g. 100000",
                self.window_ms
            )));
        }
        Ok(())
    }
}

impl BreakerThresholds {
    /// These thresholds with the members `o` sets replaced, validated.
    pub fn with(mut self, o: &BreakerOverrides) -> Result<Self, PolicyError> {
        if let Some(n) = o.failure_threshold {
            self.failure_threshold = n;
        }
        if let Some(ms) = o.open_ms {
            self.open_ms = ms;
        }
        if let Some(r) = o.rate {
            self.rate = Some(r);
        }
        self.validate("breaker")?;
        Ok(self)
    }

    /// `failure_threshold` from 1 to [`MAX_ATTEMPTS`], `open_ms` from 1 to
    /// [`MAX_MS`]; the error (`invalid-config`) names `what` and ends with a hint.
    pub fn validate(&self, what: &str) -> Result<(), PolicyError> {
        if self.failure_threshold == 0 || self.failure_threshold > MAX_ATTEMPTS {
            return Err(invalid(format!(
                "{what}.failure_threshold must be between 1 and {MAX_ATTEMPTS} (got {}); it counts consecutive transient failures, e.g. 3",
                self.failure_threshold
            )));
        }
        if self.open_ms == 0 || self.open_ms > MAX_MS {
            return Err(invalid(format!(
                "{what}.open_ms must be between 1 and {MAX_MS} (got {}); use e.g. 30000",
                self.open_ms
            )));
        }
        if let Some(r) = &self.rate {
            r.validate(what)?;
        }
        Ok(())
    }
}

/// Breaker overrides (JSON `{"failure_threshold":..,"open_ms":..}`); unset members keep the policy's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerOverrides {
    /// Consecutive transient failures that open a target's breaker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<u32>,
    /// How long an open breaker stays open, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_ms: Option<u64>,
    /// The failure-rate mode (its members default to 50 %, 100 calls, 100 000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<BreakerRate>,
}

/// All policy parameters, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Tool calls.
    pub tool: Backoff,
    /// LLM calls.
    pub llm: Backoff,
    /// Agent calls.
    pub agent: Backoff,
    /// Retry budget per run, ms.
    pub retry_budget_ms: u64,
    /// Circuit-breaker thresholds the decisions carry.
    pub breaker: BreakerThresholds,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            tool: Backoff {
                base_ms: 250,
                cap_ms: 30_000,
                max_attempts: 5,
            },
            llm: Backoff {
                base_ms: 1000,
                cap_ms: 30_000,
                max_attempts: 3,
            },
            agent: Backoff {
                base_ms: 1000,
                cap_ms: 30_000,
                max_attempts: 3,
            },
            retry_budget_ms: 60_000,
            breaker: BreakerThresholds::default(),
        }
    }
}

impl Config {
    /// The backoff for a kind of call.
    pub fn for_call(&self, call: CallKind) -> Backoff {
        match call {
            CallKind::Tool => self.tool,
            CallKind::Llm => self.llm,
            CallKind::Agent => self.agent,
        }
    }

    /// Apply overrides, then validate the result.
    pub fn with(mut self, o: &ConfigOverrides) -> Result<Self, PolicyError> {
        for (slot, ov, name) in [
            (&mut self.tool, &o.tool, "tool"),
            (&mut self.llm, &o.llm, "llm"),
            (&mut self.agent, &o.agent, "agent"),
        ] {
            if let Some(ov) = ov {
                if let Some(b) = ov.base_ms {
                    slot.base_ms = b;
                }
                if let Some(c) = ov.cap_ms {
                    slot.cap_ms = c;
                }
                if let Some(m) = ov.max_attempts {
                    slot.max_attempts = m;
                }
            }
            validate(slot, name)?;
        }
        if let Some(b) = o.retry_budget_ms {
            if b > MAX_MS {
                return Err(invalid(format!(
                    "retry_budget_ms {b} exceeds the maximum {MAX_MS}; use a budget of at most one week"
                )));
            }
            self.retry_budget_ms = b;
        }
        self.breaker = self.breaker.with(&o.breaker.unwrap_or_default())?;
        Ok(self)
    }
}

fn invalid(msg: String) -> PolicyError {
    PolicyError::new(ErrorKind::InvalidConfig, msg)
}

fn validate(b: &Backoff, name: &str) -> Result<(), PolicyError> {
    if b.base_ms == 0 {
        return Err(invalid(format!(
            "{name}.base_ms must be at least 1 (got 0); use e.g. 250"
        )));
    }
    if b.cap_ms < b.base_ms {
        return Err(invalid(format!(
            "{name}.cap_ms ({}) must not be less than {name}.base_ms ({}); raise the cap or lower the base",
            b.cap_ms, b.base_ms
        )));
    }
    if b.cap_ms > MAX_MS {
        return Err(invalid(format!(
            "{name}.cap_ms {} exceeds the maximum {MAX_MS}; use at most one week",
            b.cap_ms
        )));
    }
    if b.max_attempts == 0 || b.max_attempts > MAX_ATTEMPTS {
        return Err(invalid(format!(
            "{name}.max_attempts must be between 1 and {MAX_ATTEMPTS} (got {}); attempts include the first call",
            b.max_attempts
        )));
    }
    Ok(())
}

/// Backoff overrides for one kind of call (JSON `{"base_ms":..,"cap_ms":..,"max_attempts":..}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffOverrides {
    /// Base delay.
    pub base_ms: Option<u64>,
    /// Cap.
    pub cap_ms: Option<u64>,
    /// Attempts.
    pub max_attempts: Option<u32>,
}

/// Overrides of the defaults; unset fields keep them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigOverrides {
    /// Tool calls.
    pub tool: Option<BackoffOverrides>,
    /// LLM calls.
    pub llm: Option<BackoffOverrides>,
    /// Agent calls.
    pub agent: Option<BackoffOverrides>,
    /// Retry budget.
    pub retry_budget_ms: Option<u64>,
    /// Circuit-breaker thresholds.
    pub breaker: Option<BreakerOverrides>,
}

impl ConfigOverrides {
    /// Resolve against the defaults.
    pub fn resolve(&self) -> Result<Config, PolicyError> {
        Config::default().with(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breaker_defaults_are_seed_000_and_overrides_are_validated() {
        let d = Config::default().breaker;
        assert_eq!((d.failure_threshold, d.open_ms), (3, 30_000));
        let o: ConfigOverrides =
            serde_json::from_str(r#"{"breaker":{"failure_threshold":2}}"#).unwrap();
        let b = o.resolve().unwrap().breaker;
        assert_eq!((b.failure_threshold, b.open_ms), (2, 30_000));
        let o: ConfigOverrides = serde_json::from_str(r#"{"breaker":{"open_ms":0}}"#).unwrap();
        let e = o.resolve().unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidConfig);
        assert!(
            e.message
                .starts_with("breaker.open_ms must be between 1 and"),
            "{e:?}"
        );
        assert!(e.message.ends_with("use e.g. 30000"), "{e:?}");
        // A policy's own defaults are checked too, so a bad `RecoveryPolicy::breaker` shows.
        let bad = Config {
            breaker: BreakerThresholds {
                failure_threshold: 0,
                open_ms: 1,
                rate: None,
            },
            ..Config::default()
        };
        assert!(bad.with(&ConfigOverrides::default()).is_err());
    }

    /// `decide_json` refuses a bad `context.config.breaker` as `invalid_config`
    /// (the shared vector format cannot say "decide fails, classify does not").
    #[test]
    fn decide_json_refuses_bad_breaker_config() {
        for bad in [
            r#"{"failure_threshold":0}"#,
            r#"{"failure_threshold":101}"#,
            r#"{"open_ms":0}"#,
            r#"{"open_ms":604800001}"#,
            r#"{"failures":2}"#,
            r#"{"failure_threshold":"3"}"#,
        ] {
            let ctx = format!(r#"{{"attempt":1,"config":{{"breaker":{bad}}}}}"#);
            let e = crate::decide_json(r#"{"source":"http","status":503}"#, &ctx).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidConfig, "{bad}: {e:?}");
        }
    }
}
