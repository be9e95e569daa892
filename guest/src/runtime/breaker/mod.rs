//! The circuit breaker of one target: pure transitions over data the host stores.
//!
//! Every worker updates a stored breaker with a compare-and-set (`swap`), so
//! no outcome is lost; [`update`] says what an outcome does to the value the
//! store holds now, and [`window`] is the failure-rate mode's sliding window.

use serde::{Deserialize, Serialize};

use crate::config::BreakerThresholds;

pub mod update;
pub mod window;

pub use update::{Applied, MAX_SWAP_ROUNDS, Report};
pub use window::Bucket;

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
    /// When the breaker first opened in this outage, Unix ms: the next open
    /// window is a share of how long the target has been down
    /// ([`Breaker::failure`]). Absent in a closed breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_since_ms: Option<u64>,
    /// How many state changes (open, half-open, closed) this breaker went
    /// through: a call remembers the epoch it passed the gate at, and its
    /// outcome counts only while the breaker is still in that epoch
    /// ([`update`]). Absent: 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub epoch: u64,
    /// The failure-rate mode's window, ms (present: the breaker counts in
    /// that mode, so successes are recorded too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
    /// The failure-rate mode's buckets, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub window: Vec<Bucket>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The shortest open window, ms (unless the thresholds' `open_ms` is shorter).
pub const MIN_OPEN_MS: u64 = 250;

/// An open window lasts 1/`DOWN_SHARE` of how long the target has been down.
pub const DOWN_SHARE: u64 = 40;

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
        let epoch = self.epoch + u64::from(changed);
        let window_ms = self.window_ms;
        *self = Breaker {
            epoch,
            window_ms,
            ..Breaker::default()
        };
        changed
    }

    /// A transient failure: count it; open at the threshold, reopen after a
    /// failed probe. Returns true when the breaker (re)opened.
    ///
    /// The open window follows the evidence: it is `down / DOWN_SHARE` (2.5 %
    /// of how long the target has been down, since it first opened), at
    /// least [`MIN_OPEN_MS`], at most `cfg.open_ms`. So a target that comes
    /// back after a short outage is probed again within 250 ms, and one that
    /// stays down is probed ever less often, every `cfg.open_ms` at most.
    ///
    /// In the failure-rate mode (`cfg.rate`) a closed breaker records the
    /// failure in its window and opens when the window's rate reaches the
    /// threshold ([`window`]); `failures` still counts consecutive ones.
    pub fn failure(&mut self, cfg: &BreakerThresholds, now: u64) -> bool {
        self.failures = self.failures.saturating_add(1);
        let reached = match &cfg.rate {
            None => {
                self.window_ms = None;
                self.window.clear();
                self.failures >= cfg.failure_threshold.max(1)
            }
            Some(rate) if self.state == BreakerState::Closed => {
                self.window_ms = Some(rate.window_ms);
                self.record(rate.window_ms, now, true);
                self.rate_reached(rate)
            }
            Some(rate) => {
                self.window_ms = Some(rate.window_ms);
                false
            }
        };
        let open =
            self.state == BreakerState::HalfOpen || self.state == BreakerState::Open || reached;
        if open {
            let down_since = *self.down_since_ms.get_or_insert(now);
            let down = now.saturating_sub(down_since);
            self.state = BreakerState::Open;
            self.since_ms = now;
            self.open_ms = Some(open_window(down, cfg.open_ms));
            self.epoch = self.epoch.saturating_add(1);
            self.window.clear();
        }
        open
    }

    /// The target refused for a reason that outlasts the call (a quota):
    /// open now for `open_ms`, whatever the count.
    pub fn shed(&mut self, open_ms: u64, now: u64) {
        self.down_since_ms.get_or_insert(now);
        self.state = BreakerState::Open;
        self.since_ms = now;
        self.open_ms = Some(open_ms);
        self.epoch = self.epoch.saturating_add(1);
        self.window.clear();
    }

    /// The probe starts now.
    pub fn probe(&mut self, now: u64) {
        self.state = BreakerState::HalfOpen;
        self.since_ms = now;
        self.epoch = self.epoch.saturating_add(1);
    }
}

/// The open window of a target down for `down` ms: `down / DOWN_SHARE`,
/// at least [`MIN_OPEN_MS`], at most `cap` (the thresholds' `open_ms`).
pub fn open_window(down: u64, cap: u64) -> u64 {
    (down / DOWN_SHARE).max(MIN_OPEN_MS).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_failures_open_for_250_ms_then_for_a_share_of_the_outage() {
        let cfg = BreakerThresholds::default();
        let other = 5; // another worker's fallback: the stored open_ms wins
        let mut b = Breaker::default();
        assert!(!b.failure(&cfg, 0));
        assert!(!b.failure(&cfg, 1));
        assert_eq!(b.open_ms, None);
        assert!(b.failure(&cfg, 2));
        assert_eq!((b.open_ms, b.down_since_ms), (Some(250), Some(2)));
        assert_eq!(b.gate(other, 2), Gate::Blocked(250));
        assert_eq!(b.gate(other, 251), Gate::Blocked(1));
        assert_eq!(b.gate(other, 252), Gate::Probe);
        b.probe(252);
        assert_eq!(b.gate(other, 253), Gate::Blocked(249));
        // A failed probe 20 s into the outage: open for 20 000 / 40 ms.
        b.probe(20_002);
        assert!(b.failure(&cfg, 20_002));
        assert_eq!(b.state, BreakerState::Open);
        assert_eq!(b.open_ms, Some(500));
        // 30 minutes down: the window stops at the thresholds' open_ms.
        b.probe(1_800_002);
        assert!(b.failure(&cfg, 1_800_002));
        assert_eq!(b.open_ms, Some(30_000));
        assert_eq!(b.down_since_ms, Some(2));
        assert!(b.success());
        assert_eq!((b.open_ms, b.down_since_ms), (None, None));
        assert_eq!(b.gate(other, 1_800_003), Gate::Pass);
    }

    #[test]
    fn the_window_is_the_down_share_between_the_floor_and_the_cap() {
        assert_eq!(open_window(0, 30_000), MIN_OPEN_MS);
        assert_eq!(open_window(10_000, 30_000), 250);
        assert_eq!(open_window(12_000, 30_000), 300);
        assert_eq!(open_window(1_200_000, 30_000), 30_000);
        assert_eq!(open_window(10_000_000, 30_000), 30_000);
        // A cap below the floor wins.
        assert_eq!(open_window(0, 100), 100);
    }

    #[test]
    fn a_policy_threshold_opens_sooner_and_its_cap_is_applied() {
        // payments-policy's choice: 2 failures, 60 s.
        let cfg = BreakerThresholds {
            failure_threshold: 2,
            open_ms: 60_000,
            rate: None,
        };
        let mut b = Breaker::default();
        assert!(!b.failure(&cfg, 100));
        assert!(b.failure(&cfg, 200));
        let stored = serde_json::to_value(&b).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"state":"open","failures":2,"since_ms":200,"open_ms":250,"down_since_ms":200,"epoch":1})
        );
        assert_eq!(b.gate(30_000, 449), Gate::Blocked(1));
        assert_eq!(b.gate(30_000, 450), Gate::Probe);
        // Down for 40 minutes: the default thresholds in force now cap it at 30 s.
        b.probe(2_400_200);
        assert!(b.failure(&cfg, 2_400_200));
        assert_eq!(b.open_ms, Some(60_000));
        b.probe(2_460_200);
        assert!(b.failure(&BreakerThresholds::default(), 2_460_300));
        assert_eq!(b.open_ms, Some(30_000));
        assert_eq!(b.gate(1, 2_460_301), Gate::Blocked(29_999));
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
        let mut fx: Vec<serde_json::Value> = serde_json::from_str(&effects).unwrap();
        // The breaker's swap is answered: the store took it.
        if fx.last().is_some_and(|e| e["effect"] == "swap") {
            let ok = r#"{"input":"swapped","now_ms":1000,"ok":true,"version":1}"#;
            let next = advance(&state, ok).map_err(|e| e.message)?;
            fx.extend(serde_json::from_str::<Vec<serde_json::Value>>(&next.effects).unwrap());
        }
        Ok(fx)
    }

    fn retry_with(breaker: &str) -> String {
        format!(
            r#"{{"action":"retry","delay_ms":10,"envelope":{{"code":"tool.http.503_unavailable","class":"transient"}}{breaker}}}"#
        )
    }

    fn breaker_write(effects: &[serde_json::Value]) -> serde_json::Value {
        effects
            .iter()
            .find(|e| e["effect"] == "swap" && e["key"] == "agent-recovery/breaker/t")
            .map(|e| e["value"].clone())
            .unwrap_or_default()
    }

    #[test]
    fn the_loop_applies_the_decisions_breaker_unless_the_run_sets_one() {
        let one = retry_with(r#","breaker":{"failure_threshold":1,"open_ms":5000}"#);
        // The policy's threshold 1 opens the breaker at the first failure, for the first 250 ms window.
        let fx = loop_after("{}", &one).unwrap();
        assert_eq!(
            breaker_write(&fx),
            serde_json::json!({"state":"open","failures":1,"since_ms":1000,"open_ms":250,"down_since_ms":1000,"epoch":1})
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
        let fx = loop_after(r#"{"breaker":{"open_ms":70}}"#, &one).unwrap();
        assert_eq!(breaker_write(&fx)["open_ms"], 70);
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

    /// A step whose only target is open (stored open at 900 ms for 250 ms),
    /// read at 1 000 ms: the effects after the read.
    fn open_target(run_config: &str) -> Result<Vec<serde_json::Value>, String> {
        use crate::runtime::advance;
        let run = format!(
            r#"{{"input":"run","now_ms":1000,"run_id":"r","seed":7,"config":{run_config}}}"#
        );
        let mut state = advance("", &run).map_err(|e| e.message)?.state;
        let step = r#"{"input":"step","now_ms":1000,"step":{"id":"s","tool":"t","call":"tool"}}"#;
        state = advance(&state, step).map_err(|e| e.message)?.state;
        let read = r#"{"input":"read","now_ms":1000,"values":{"agent-recovery/breaker/t":{"state":"open","failures":3,"since_ms":900,"open_ms":250}}}"#;
        state = advance(&state, read).map_err(|e| e.message)?.state;
        let claimed = r#"{"input":"claimed","now_ms":1000,"ok":true}"#;
        let next = advance(&state, claimed).map_err(|e| e.message)?;
        Ok(serde_json::from_str(&next.effects).unwrap())
    }

    #[test]
    fn an_open_target_fails_at_once_unless_the_run_waits() {
        let fx = open_target("{}").unwrap();
        let finish = fx.last().unwrap();
        assert_eq!(finish["effect"], "finish");
        assert_eq!(finish["outcome"], "failed");
        assert_eq!(finish["envelope"]["code"], "runtime.circuit.open");
        assert_eq!(finish["envelope"]["retry_after_ms"], 150);
        assert!(
            !fx.iter()
                .any(|e| e["effect"] == "call" || e["effect"] == "sleep")
        );
        // `wait`: the policy decides on the short-circuit.
        let fx = open_target(r#"{"on_open":"wait"}"#).unwrap();
        let decide = fx.last().unwrap();
        assert_eq!(decide["effect"], "decide");
        let obs: serde_json::Value =
            serde_json::from_str(decide["observation"].as_str().unwrap()).unwrap();
        assert_eq!(obs["error"]["code"], "runtime.circuit.open");
        assert_eq!(obs["error"]["retry_after_ms"], 150);
        let e = open_target(r#"{"on_open":"later"}"#).unwrap_err();
        assert!(e.contains("later"), "{e}");
    }
}
