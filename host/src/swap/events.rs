//! What a [`PolicyHandle`](crate::PolicyHandle) reports: [`Event`]s as they
//! happen, and running totals in [`Stats`].
//!
//! # Why a callback and not a logging framework?
//!
//! The host library stays free of `log`/`tracing` and their setup: a host
//! passes one `Fn(&Event)` (see [`HandleBuilder::on_event`](crate::HandleBuilder::on_event))
//! and forwards events to whatever it logs with. `Display` gives one line per
//! event, which is what the CLI prints on stderr.
//!
//! Each event is also an OpenTelemetry span event on the caller's current
//! span, and swaps and refusals are counted, through the OpenTelemetry API
//! only (no-ops unless your program installs an SDK); see
//! [`HandleBuilder::telemetry`](crate::HandleBuilder::telemetry).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::PolicyId;
use crate::error::Error;
use crate::swap::error::SwapError;

/// Something a [`PolicyHandle`](crate::PolicyHandle) did or refused to do.
///
/// New variants may be added.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Event {
    /// A candidate passed its checks and is now active.
    Swapped {
        /// The policy that was active before.
        from: Arc<PolicyId>,
        /// The policy now active.
        to: Arc<PolicyId>,
    },
    /// A candidate was refused; `active` keeps answering.
    Refused {
        /// The policy still active.
        active: Arc<PolicyId>,
        /// Why the candidate was refused.
        error: SwapError,
    },
    /// The active policy failed a call (trap, fuel, memory, invalid output)
    /// and the caller got the error ([`FailurePolicy::FailClosed`](crate::FailurePolicy::FailClosed),
    /// or the fallback failed too).
    Failed {
        /// The policy that failed.
        policy: Arc<PolicyId>,
        /// What happened.
        error: Error,
    },
    /// The active policy failed a call and the reference answered instead
    /// ([`FailurePolicy::FallbackToReference`](crate::FailurePolicy::FallbackToReference)).
    FellBack {
        /// The policy that failed.
        policy: Arc<PolicyId>,
        /// What happened.
        error: Error,
        /// The reference policy that answered.
        reference: Arc<PolicyId>,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Swapped { from, to } => write!(f, "swapped policy {from} -> {to}"),
            Event::Refused { active, error } => {
                let sha = error
                    .candidate_sha256()
                    .map_or_else(String::new, |s| format!(" sha256:{s}"));
                write!(
                    f,
                    "refused policy{sha} at {}: {}; still active: {active}",
                    error.stage().as_str(),
                    error.message()
                )
            }
            Event::Failed { policy, error } => write!(
                f,
                "policy {policy} failed a call ({}): {error}",
                error.kind().as_str()
            ),
            Event::FellBack {
                policy,
                error,
                reference,
            } => write!(
                f,
                "policy {policy} failed a call ({}), {reference} answered instead: {error}",
                error.kind().as_str()
            ),
        }
    }
}

/// Running totals of a [`PolicyHandle`](crate::PolicyHandle) since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Candidates activated.
    pub swaps: u64,
    /// Candidates refused.
    pub refusals: u64,
    /// Calls on which the active policy failed (trap, fuel, memory, invalid
    /// output), whatever happened next.
    pub failures: u64,
    /// Of those, calls the reference policy answered instead.
    pub fallbacks: u64,
}

/// The atomic counters behind [`Stats`].
#[derive(Default)]
pub(crate) struct Counters {
    swaps: AtomicU64,
    refusals: AtomicU64,
    failures: AtomicU64,
    fallbacks: AtomicU64,
}

impl Counters {
    /// Counts `event`.
    pub(crate) fn count(&self, event: &Event) {
        let counter = match event {
            Event::Swapped { .. } => &self.swaps,
            Event::Refused { .. } => &self.refusals,
            Event::Failed { .. } => &self.failures,
            Event::FellBack { .. } => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                &self.fallbacks
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            swaps: self.swaps.load(Ordering::Relaxed),
            refusals: self.refusals.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
        }
    }
}

/// The host's event callback.
pub(crate) type Sink = Arc<dyn Fn(&Event) + Send + Sync>;
