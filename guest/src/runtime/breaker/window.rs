//! The failure-rate mode's sliding window: calls and transient failures in
//! ten time buckets, stored with the breaker.
//!
//! A call at `now` is counted in the bucket that starts at
//! `now - now % (window_ms / 10)`; buckets that start `window_ms` or more
//! before the current bucket drop out. The breaker opens when the window
//! holds at least `minimum_calls` calls and `failures * 100 >=
//! failure_rate_threshold * calls` (resilience4j's "equal or greater").

use serde::{Deserialize, Serialize};

use super::Breaker;
use crate::config::BreakerRate;

/// Buckets per window.
pub const BUCKETS: u64 = 10;

/// One bucket of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    /// When the bucket starts, Unix ms (a multiple of `window_ms / 10`).
    pub at_ms: u64,
    /// Calls recorded in it (successes and transient failures).
    pub calls: u32,
    /// Transient failures recorded in it.
    pub failures: u32,
}

/// The length of one bucket of a `window_ms` window (at least 1 ms).
pub fn bucket_ms(window_ms: u64) -> u64 {
    (window_ms / BUCKETS).max(1)
}

impl Breaker {
    /// Records one call at `now` (`failed`: a transient failure) in a
    /// `window_ms` window, dropping the buckets that left it.
    pub fn record(&mut self, window_ms: u64, now: u64, failed: bool) {
        let size = bucket_ms(window_ms);
        let start = now - now % size;
        self.window
            .retain(|b| b.at_ms.saturating_add(window_ms) > start);
        let i = match self.window.iter().position(|b| b.at_ms == start) {
            Some(i) => i,
            None => {
                let at = self
                    .window
                    .iter()
                    .position(|b| b.at_ms > start)
                    .unwrap_or(self.window.len());
                self.window.insert(
                    at,
                    Bucket {
                        at_ms: start,
                        ..Bucket::default()
                    },
                );
                at
            }
        };
        if let Some(b) = self.window.get_mut(i) {
            b.calls = b.calls.saturating_add(1);
            b.failures = b.failures.saturating_add(u32::from(failed));
        }
    }

    /// Calls and transient failures in the window.
    pub fn totals(&self) -> (u64, u64) {
        self.window.iter().fold((0, 0), |(c, f), b| {
            (c + u64::from(b.calls), f + u64::from(b.failures))
        })
    }

    /// Whether the window's failure rate opens the breaker under `rate`.
    pub fn rate_reached(&self, rate: &BreakerRate) -> bool {
        let (calls, failures) = self.totals();
        calls >= u64::from(rate.minimum_calls)
            && failures * 100 >= u64::from(rate.failure_rate_threshold) * calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BreakerThresholds;

    fn rate(threshold: u32, min: u32) -> BreakerThresholds {
        BreakerThresholds {
            rate: Some(BreakerRate {
                failure_rate_threshold: threshold,
                minimum_calls: min,
                window_ms: 10_000,
            }),
            ..BreakerThresholds::default()
        }
    }

    #[test]
    fn one_failure_in_ten_stays_below_the_rate_and_the_minimum_gates_it() {
        let cfg = rate(50, 10);
        let mut b = Breaker::default();
        // One failure alone is 100 %, but below the minimum of 10 calls.
        assert!(!b.failure(&cfg, 0));
        for t in 1..10 {
            b.record(10_000, t, false);
        }
        assert_eq!(b.totals(), (10, 1));
        assert!(!b.rate_reached(cfg.rate.as_ref().unwrap()));
    }

    #[test]
    fn the_rate_opens_at_the_threshold_and_old_buckets_drop_out() {
        let cfg = rate(50, 4);
        let mut b = Breaker::default();
        b.record(10_000, 0, false);
        assert!(!b.failure(&cfg, 1));
        b.record(10_000, 2, false);
        // 2 of 4 = 50 %: equal opens.
        assert!(b.failure(&cfg, 3));
        assert_eq!((b.epoch, b.window.len()), (1, 0));
        // Buckets of 1 000 ms: at 10 500 the bucket of 0 has left the window.
        let mut c = Breaker::default();
        c.record(10_000, 0, true);
        c.record(10_000, 9_999, false);
        assert_eq!(c.totals(), (2, 1));
        c.record(10_000, 10_500, false);
        assert_eq!(c.totals(), (2, 0));
        assert_eq!(c.window.first().map(|b| b.at_ms), Some(9_000));
    }
}
