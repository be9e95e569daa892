//! Full-jitter exponential backoff in integer milliseconds.
//!
//! # Calculation of the delay
//!
//! For the retry after failed attempt `n` (from 1):
//!
//! ```text
//! ceiling = min(cap_ms, base_ms * 2^(n-1))          (saturating)
//! draw    = seeded ? mix(seed, n) : wasi random u64
//! delay   = draw mod (ceiling + 1)                  -> uniform in [0, ceiling]
//! mix(seed, n) = splitmix64(seed XOR splitmix64(n))
//! ```
//!
//! `splitmix64` is the standard finaliser (Steele, Lea, Flood 2014). Everything is
//! integer arithmetic, so every runtime computes the same delay for the same seed.
//! A server's `Retry-After` is applied by the decision as a floor, not here.

use crate::config::Backoff;
use crate::error::{ErrorKind, PolicyError};

/// The exponential ceiling for failed attempt `attempt` (from 1).
pub fn ceiling(b: &Backoff, attempt: u32) -> u64 {
    let exp = attempt.saturating_sub(1).min(63);
    let grown = b.base_ms.saturating_mul(1u64 << exp);
    grown.min(b.cap_ms)
}

/// The splitmix64 finaliser.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The reproducible draw for `seed` and `attempt`.
pub fn seeded_draw(seed: u64, attempt: u32) -> u64 {
    splitmix64(seed ^ splitmix64(u64::from(attempt)))
}

/// A full-jitter delay in `[0, ceiling(b, attempt)]`.
pub fn delay(b: &Backoff, attempt: u32, seed: Option<u64>) -> Result<u64, PolicyError> {
    if attempt == 0 {
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            "attempt must be at least 1 (got 0); attempts are counted from 1",
        ));
    }
    let c = ceiling(b, attempt);
    let draw = match seed {
        Some(s) => seeded_draw(s, attempt),
        None => getrandom::u64().map_err(|e| {
            PolicyError::new(
                ErrorKind::Internal,
                format!("the random source failed ({e}); pass a seed instead"),
            )
        })?,
    };
    Ok(match c.checked_add(1) {
        Some(n) => draw % n,
        None => draw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL: Backoff = Backoff {
        base_ms: 250,
        cap_ms: 30_000,
        max_attempts: 5,
    };

    #[test]
    fn ceiling_grows_then_caps() {
        assert_eq!(ceiling(&TOOL, 1), 250);
        assert_eq!(ceiling(&TOOL, 2), 500);
        assert_eq!(ceiling(&TOOL, 8), 30_000);
        assert_eq!(ceiling(&TOOL, u32::MAX), 30_000);
        let huge = Backoff {
            base_ms: u64::MAX,
            cap_ms: u64::MAX,
            max_attempts: 1,
        };
        assert_eq!(ceiling(&huge, 3), u64::MAX);
        assert!(delay(&huge, 3, Some(1)).is_ok());
    }

    #[test]
    fn seeded_delay_is_reproducible_and_bounded() {
        for attempt in 1..20 {
            let a = delay(&TOOL, attempt, Some(42)).unwrap();
            assert_eq!(a, delay(&TOOL, attempt, Some(42)).unwrap());
            assert!(a <= ceiling(&TOOL, attempt));
        }
    }

    #[test]
    fn splitmix_matches_reference_value() {
        // First output of the reference splitmix64 generator seeded with 0.
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn attempt_zero_is_an_error() {
        assert_eq!(
            delay(&TOOL, 0, Some(1)).unwrap_err().kind,
            ErrorKind::InvalidArgument
        );
    }
}
