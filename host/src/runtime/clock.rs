//! The runtime's clock: real, or virtual for tests and `simulate`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the runtime reads the time and sleeps.
pub trait Clock: Send + Sync {
    /// Now, Unix ms.
    fn now_ms(&self) -> u64;
    /// Sleep `ms` milliseconds.
    fn sleep_ms(&self, ms: u64);
    /// A virtual clock (tests, `simulate`): the branches of a fan-out then
    /// run one after another, each from the fork's time, instead of on
    /// threads, so a run reproduces exactly. Default: false.
    fn is_virtual(&self) -> bool {
        false
    }
    /// Set the time (Unix ms); called only when [`is_virtual`](Self::is_virtual).
    /// Default: does nothing.
    fn set_ms(&self, now_ms: u64) {
        let _ = now_ms;
    }
}

/// The system clock and `std::thread::sleep`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// A virtual clock: sleeping advances it instantly, nothing really waits.
///
/// ```
/// use agent_recovery::runtime::{Clock, VirtualClock};
/// let clock = VirtualClock::new(1_000);
/// clock.sleep_ms(250);
/// assert_eq!(clock.now_ms(), 1_250);
/// ```
#[derive(Debug, Default)]
pub struct VirtualClock {
    now: AtomicU64,
}

impl VirtualClock {
    /// A clock that starts at `now_ms`.
    pub fn new(now_ms: u64) -> Self {
        VirtualClock {
            now: AtomicU64::new(now_ms),
        }
    }
    /// Move the clock forward without sleeping.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
    fn sleep_ms(&self, ms: u64) {
        self.advance(ms);
    }
    fn is_virtual(&self) -> bool {
        true
    }
    fn set_ms(&self, now_ms: u64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }
}
