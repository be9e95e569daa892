//! The circuit breaker of one target: pure transitions over data the host stores.

use serde::{Deserialize, Serialize};

use crate::config::BreakerThresholds;

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through.
    #[default]
    Closed,
    /// Calls are short-circuited until `since_ms + open_ms`.
    Open,
    /// One probe is in flight; other calls are short-circuited.
    HalfOpen,
}

/// A breaker as stored under `agent-recovery/breaker/<target>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Breaker {
    /// The state.
    pub state: BreakerState,
    /// Consecutive transient failures.
    pub failures: u32,
    /// When it opened (or the probe started), Unix ms.
    pub since_ms: u64,
    /// How long it stays open: the duration in force when it opened, so every
    /// worker agrees on when it half-opens whatever its own configuration.
    /// Absent in a closed breaker and in values stored before it existed
    /// (then the reader's run configuration or 30 000 ms applies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_ms: Option<u64>,
}

/// What a breaker allows now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Call.
    Pass,
    /// Call as the one half-open probe (the breaker moves to half-open).
    Probe,
    /// Do not call; the probe is allowed in this many ms.
    Blocked(u64),
}

impl Breaker {
    /// May a call go to this target at `now`? `fallback_open_ms` applies
    /// when the stored value has no `open_ms` of its own.
    pub fn gate(&self, fallback_open_ms: u64, now: u64) -> Gate {
        let open_ms = self.open_ms.unwrap_or(fallback_open_ms);
        let until = self.since_ms.saturating_add(open_ms);
        match self.state {
            BreakerState::Closed => Gate::Pass,
            // A half-open probe that never reported back frees the slot after another open period.
            BreakerState::Open | BreakerState::HalfOpen if now >= until => Gate::Probe,
            BreakerState::Open | BreakerState::HalfOpen => Gate::Blocked(until - now),
        }
    }

    /// The call succeeded, or failed in a way that proves the target answers
    /// (a non-transient failure): the breaker closes.
    pub fn success(&mut self) -> bool {
        let changed = self.state != BreakerState::Closed;
        *self = Breaker::default();
        changed
    }

    /// A transient failure: count it; open at the threshold for `cfg.open_ms`,
    /// reopen after a probe. Returns true when the breaker (re)opened.
    pub fn failure(&mut self, cfg: &BreakerThresholds, now: u64) -> bool {
        self.failures = self.failures.saturating_add(1);
        let open = self.state == BreakerState::HalfOpen
            || self.state == BreakerState::Open
            || self.failures >= cfg.failure_threshold.max(1);
        if open {
            self.state = BreakerState::Open;
            self.since_ms = now;
            self.open_ms = Some(cfg.open_ms);
        }
        open
    }

    /// The probe starts now.
    pub fn probe(&mut self, now: u64) {
        self.state = BreakerState::HalfOpen;
        self.since_ms = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_three_failures_thirty_seconds() {
        let cfg = BreakerThresholds::default();
        let other = 5; // another worker's fallback: the stored open_ms wins
        let mut b = Breaker::default();
        assert!(!b.failure(&cfg, 0));
        assert!(!b.failure(&cfg, 1));
        assert_eq!(b.open_ms, None);
        assert!(b.failure(&cfg, 2));
        assert_eq!(b.open_ms, Some(30_000));
        assert_eq!(b.gate(other, 2), Gate::Blocked(30_000));
        assert_eq!(b.gate(other, 30_001), Gate::Blocked(1));
        assert_eq!(b.gate(other, 30_002), Gate::Probe);
        b.probe(30_002);
        assert_eq!(b.gate(other, 30_003), Gate::Blocked(29_999));
        assert!(b.failure(&cfg, 30_010));
        assert_eq!(b.state, BreakerState::Open);
        assert!(b.success());
        assert_eq!(b.open_ms, None);
        assert_eq!(b.gate(other, 30_011), Gate::Pass);
    }

    #[test]
    fn a_policy_threshold_opens_sooner_and_its_duration_is_stored() {
        // payments-policy's choice: 2 failures, 60 s.
        let cfg = BreakerThresholds {
            failure_threshold: 2,
            open_ms: 60_000,
        };
        let mut b = Breaker::default();
        assert!(!b.failure(&cfg, 100));
        assert!(b.failure(&cfg, 200));
        let stored = serde_json::to_value(&b).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"state":"open","failures":2,"since_ms":200,"open_ms":60000})
        );
        assert_eq!(b.gate(30_000, 60_199), Gate::Blocked(1));
        assert_eq!(b.gate(30_000, 60_200), Gate::Probe);
        // A probe that fails reopens for the thresholds in force now.
        b.probe(60_200);
        assert!(b.failure(&BreakerThresholds::default(), 60_300));
        assert_eq!(b.open_ms, Some(30_000));
        assert_eq!(b.gate(1, 60_301), Gate::Blocked(29_999));
    }

    #[test]
    fn a_value_stored_without_open_ms_uses_the_fallback() {
        let b: Breaker =
            serde_json::from_str(r#"{"state":"open","failures":3,"since_ms":1000}"#).unwrap();
        assert_eq!(b.open_ms, None);
        assert_eq!(b.gate(30_000, 1_000), Gate::Blocked(30_000));
        assert_eq!(b.gate(500, 1_499), Gate::Blocked(1));
        assert_eq!(b.gate(500, 1_500), Gate::Probe);
        // A closed breaker is stored as before.
        assert_eq!(
            serde_json::to_string(&Breaker::default()).unwrap(),
            r#"{"state":"closed","failures":0,"since_ms":0}"#
        );
    }

    /// Drives the loop to the decision on a first 503 of target `t`, answers
    /// it with `decision`, and returns the effects (or the error).
    fn loop_after(run_config: &str, decision: &str) -> Result<Vec<serde_json::Value>, String> {
        use crate::runtime::advance;
        let run = format!(
            r#"{{"input":"run","now_ms":1000,"run_id":"r","seed":7,"config":{run_config}}}"#
        );
        let mut state = advance("", &run).map_err(|e| e.message)?.state;
        let mut effects = String::new();
        for input in [
            r#"{"input":"step","now_ms":1000,"step":{"id":"s","tool":"t","call":"tool"}}"#.to_owned(),
            r#"{"input":"read","now_ms":1000,"values":{}}"#.to_owned(),
            r#"{"input":"claimed","now_ms":1000,"ok":true}"#.to_owned(),
            r#"{"input":"attempt","now_ms":1000,"result":{"failed":{"source":"http","status":503}}}"#.to_owned(),
            format!(r#"{{"input":"decision","now_ms":1000,"decision":{decision}}}"#),
        ] {
            let next = advance(&state, &input).map_err(|e| e.message)?;
            state = next.state;
            effects = next.effects;
        }
        Ok(serde_json::from_str(&effects).unwrap())
    }

    fn retry_with(breaker: &str) -> String {
        format!(
            r#"{{"action":"retry","delay_ms":10,"envelope":{{"code":"tool.http.503_unavailable","class":"transient"}}{breaker}}}"#
        )
    }

    fn breaker_write(effects: &[serde_json::Value]) -> serde_json::Value {
        effects
            .iter()
            .find(|e| e["effect"] == "write" && e["key"] == "agent-recovery/breaker/t")
            .map(|e| e["value"].clone())
            .unwrap_or_default()
    }

    #[test]
    fn the_loop_applies_the_decisions_breaker_unless_the_run_sets_one() {
        let one = retry_with(r#","breaker":{"failure_threshold":1,"open_ms":5000}"#);
        // The policy's threshold 1 opens the breaker at the first failure, for its 5 s.
        let fx = loop_after("{}", &one).unwrap();
        assert_eq!(
            breaker_write(&fx),
            serde_json::json!({"state":"open","failures":1,"since_ms":1000,"open_ms":5000})
        );
        assert!(
            fx.iter()
                .any(|e| e["event"]["event"] == "breaker" && e["event"]["state"] == "open")
        );
        // The run configuration's explicit threshold wins over the policy's.
        let fx = loop_after(r#"{"breaker":{"failure_threshold":2}}"#, &one).unwrap();
        assert_eq!(
            breaker_write(&fx),
            serde_json::json!({"state":"closed","failures":1,"since_ms":0})
        );
        // The run sets only open_ms: the threshold is still the policy's 1.
        let fx = loop_after(r#"{"breaker":{"open_ms":7000}}"#, &one).unwrap();
        assert_eq!(breaker_write(&fx)["open_ms"], 7000);
        // A decision without `breaker` (a policy built before it): the default threshold 3.
        let fx = loop_after("{}", &retry_with("")).unwrap();
        assert_eq!(breaker_write(&fx)["state"], "closed");
    }

    #[test]
    fn a_malformed_decision_breaker_is_an_error_with_a_hint() {
        for bad in [
            r#","breaker":{"failure_threshold":0,"open_ms":5000}"#,
            r#","breaker":{"failure_threshold":2}"#,
            r#","breaker":"fast""#,
        ] {
            let e = loop_after("{}", &retry_with(bad)).unwrap_err();
            assert!(
                e.contains("the decision's `breaker` is invalid"),
                "{bad}: {e}"
            );
            assert!(e.ends_with("or omit it"), "{bad}: {e}");
        }
    }
}
