//! What one call's outcome does to the breaker the store holds now.
//!
//! A worker reads a breaker, calls, and reports the outcome with a
//! compare-and-set (`swap`) on the version it read. When another worker
//! wrote in between, the store answers with the value it holds, and the
//! same outcome is applied to that value and swapped again: the outcomes
//! of all workers are applied one at a time, in the order the store accepts
//! the swaps ("consecutive" means consecutive in that order).
//!
//! A call remembers the breaker's `epoch` when it passed the gate. Its
//! outcome counts only while the breaker is still in that epoch: once the
//! breaker opened, half-opened or closed since, the outcome is stale and
//! changes nothing. So a success that started before the breaker opened
//! never closes it, and a failure that started before it closed never
//! reopens or re-counts it; only the probe's own outcome moves an open
//! breaker.

use serde::{Deserialize, Serialize};

use super::{Breaker, BreakerState};
use crate::config::{BreakerRate, BreakerThresholds};

/// Swaps of one outcome before it is given up (the store kept answering
/// with newer values): past it the outcome is not recorded and the step
/// goes on. Every round another worker's swap succeeded, so it takes more
/// than this many concurrent updates of one target to get there.
pub const MAX_SWAP_ROUNDS: u32 = 64;

/// An outcome to record in a target's breaker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// The call was let through as the half-open probe: open -> half-open.
    Probe,
    /// The target answered (a success, or a failure that is not transient).
    /// `rate`: the run configuration's failure-rate mode, if it sets one
    /// (then a closed breaker records the success in its window).
    Success {
        /// The run's failure-rate mode.
        rate: Option<BreakerRate>,
    },
    /// A transient failure, under these thresholds.
    Failure(BreakerThresholds),
    /// The target refused for a reason that outlasts the call (a quota) and
    /// the step fell back: open now, for `open_ms`, whatever the count.
    Shed {
        /// How long the breaker stays open.
        open_ms: u64,
    },
}

/// The result of applying a [`Report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The value to swap in; none: nothing changes (nothing to write).
    pub next: Option<Breaker>,
    /// The state it moved to, when it moved.
    pub became: Option<BreakerState>,
}

impl Applied {
    fn nothing() -> Self {
        Applied {
            next: None,
            became: None,
        }
    }
}

impl Breaker {
    /// Applies `report` of a call that passed the gate at `gate_epoch` to
    /// this (current) value at `now`.
    pub fn apply(&self, report: &Report, gate_epoch: u64, now: u64) -> Applied {
        if self.epoch != gate_epoch {
            return Applied::nothing();
        }
        let mut next = self.clone();
        match report {
            Report::Probe => {
                if self.state == BreakerState::Closed {
                    return Applied::nothing();
                }
                next.probe(now);
                Applied {
                    next: Some(next),
                    became: Some(BreakerState::HalfOpen),
                }
            }
            Report::Success { rate } => {
                if self.state != BreakerState::Closed {
                    next.success();
                    return Applied {
                        next: Some(next),
                        became: Some(BreakerState::Closed),
                    };
                }
                match self.window_ms.or(rate.map(|r| r.window_ms)) {
                    Some(window_ms) => {
                        next.window_ms = Some(window_ms);
                        next.failures = 0;
                        next.record(window_ms, now, false);
                    }
                    // The cheap path: a closed breaker without failures stays as it is.
                    None if self.failures == 0 => return Applied::nothing(),
                    None => next.failures = 0,
                }
                Applied {
                    next: Some(next),
                    became: None,
                }
            }
            Report::Shed { open_ms } => {
                next.shed(*open_ms, now);
                Applied {
                    next: Some(next),
                    became: Some(BreakerState::Open),
                }
            }
            Report::Failure(cfg) => {
                let opened = next.failure(cfg, now);
                Applied {
                    next: Some(next),
                    became: opened.then_some(BreakerState::Open),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure() -> Report {
        Report::Failure(BreakerThresholds::default())
    }

    #[test]
    fn a_shed_target_opens_at_once_for_its_window() {
        let stored = Breaker::default();
        let applied = stored.apply(&Report::Shed { open_ms: 30_000 }, 0, 1_000);
        let next = applied.next.expect("a shed target opens");
        assert_eq!(applied.became, Some(BreakerState::Open));
        assert_eq!(next.state, BreakerState::Open);
        assert_eq!(
            (next.since_ms, next.open_ms, next.epoch),
            (1_000, Some(30_000), 1)
        );
        // A stale shed (the breaker moved on since the call's gate) changes nothing.
        assert_eq!(
            next.apply(&Report::Shed { open_ms: 5 }, 0, 2_000).next,
            None
        );
    }

    #[test]
    fn concurrent_failures_all_count_and_the_late_ones_do_not_reopen() {
        // Eight calls passed the gate of a closed breaker (epoch 0).
        let mut stored = Breaker::default();
        let mut opened = 0;
        for t in 0..8 {
            let a = stored.apply(&failure(), 0, t);
            opened += usize::from(a.became == Some(BreakerState::Open));
            if let Some(next) = a.next {
                stored = next;
            }
        }
        assert_eq!(opened, 1);
        assert_eq!(
            (stored.state, stored.failures, stored.epoch),
            (BreakerState::Open, 3, 1)
        );
        assert_eq!(
            stored.since_ms, 2,
            "the 4th to 8th failures did not extend the window"
        );
    }

    #[test]
    fn a_stale_outcome_never_undoes_a_transition() {
        let cfg = BreakerThresholds::default();
        let mut open = Breaker::default();
        for t in 0..3 {
            open.failure(&cfg, t);
        }
        // A success (or a failure) from before the breaker opened changes nothing.
        assert_eq!(
            open.apply(&Report::Success { rate: None }, 0, 10).next,
            None
        );
        assert_eq!(open.apply(&failure(), 0, 10).next, None);
        // The probe (epoch 2) closes it; a failure of epoch 0 or 1 does not reopen it.
        let half = open.apply(&Report::Probe, 1, 300).next.unwrap();
        assert_eq!((half.state, half.epoch), (BreakerState::HalfOpen, 2));
        let closed = half
            .apply(&Report::Success { rate: None }, 2, 310)
            .next
            .unwrap();
        assert_eq!(
            (closed.state, closed.epoch, closed.failures),
            (BreakerState::Closed, 3, 0)
        );
        assert_eq!(closed.apply(&failure(), 1, 320).next, None);
        assert_eq!(closed.apply(&failure(), 0, 320).next, None);
        // A probe whose breaker closed meanwhile is no probe.
        assert_eq!(closed.apply(&Report::Probe, 3, 330).next, None);
    }

    #[test]
    fn a_success_writes_only_when_something_changes() {
        let b = Breaker::default();
        assert_eq!(
            b.apply(&Report::Success { rate: None }, 0, 1),
            Applied::nothing()
        );
        let rate = Some(BreakerRate::default());
        let rec = b.apply(&Report::Success { rate }, 0, 1).next.unwrap();
        assert_eq!((rec.totals(), rec.window_ms), ((1, 0), Some(100_000)));
    }
}
