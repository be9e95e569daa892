//! The circuit breaker of one target: pure transitions over data the host stores.

use serde::{Deserialize, Serialize};

use super::config::BreakerConfig;

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through.
    #[default]
    Closed,
    /// Calls are short-circuited until `opened_ms + open_ms`.
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
    /// May a call go to this target at `now`?
    pub fn gate(&self, cfg: &BreakerConfig, now: u64) -> Gate {
        let until = self.since_ms.saturating_add(cfg.open_ms);
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

    /// A transient failure: count it; open at the threshold, reopen after a probe.
    /// Returns true when the breaker (re)opened.
    pub fn failure(&mut self, cfg: &BreakerConfig, now: u64) -> bool {
        self.failures = self.failures.saturating_add(1);
        let open = self.state == BreakerState::HalfOpen
            || self.state == BreakerState::Open
            || self.failures >= cfg.failure_threshold.max(1);
        if open {
            self.state = BreakerState::Open;
            self.since_ms = now;
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
        let cfg = BreakerConfig::default();
        let mut b = Breaker::default();
        assert!(!b.failure(&cfg, 0));
        assert!(!b.failure(&cfg, 1));
        assert!(b.failure(&cfg, 2));
        assert_eq!(b.gate(&cfg, 2), Gate::Blocked(30_000));
        assert_eq!(b.gate(&cfg, 30_001), Gate::Blocked(1));
        assert_eq!(b.gate(&cfg, 30_002), Gate::Probe);
        b.probe(30_002);
        assert_eq!(b.gate(&cfg, 30_003), Gate::Blocked(29_999));
        assert!(b.failure(&cfg, 30_010));
        assert_eq!(b.state, BreakerState::Open);
        assert!(b.success());
        assert_eq!(b.gate(&cfg, 30_011), Gate::Pass);
    }
}
