//! Hot swap: one active policy shared by every caller, replaced at runtime.
//!
//! - `handle.rs`: [`PolicyHandle`], the active policy and the atomic swap.
//! - `active.rs`: [`ActivePolicy`] and the [`Answer`] it signs.
//! - `options.rs` and `candidate.rs`: the checks a candidate must pass
//!   ([`SwapOptions`]), and `error.rs`, why one was refused ([`SwapError`]).
//! - `failure.rs`: what happens when the active policy fails a call
//!   ([`FailurePolicy`]).
//! - `events.rs` and `telemetry.rs`: what a handle reports ([`Event`],
//!   [`Stats`]), also as OpenTelemetry span events and a counter.
//! - `watch.rs`: swapping a file in when it changes ([`Watcher`]).

pub(crate) mod active;
pub(crate) mod candidate;
pub(crate) mod error;
pub(crate) mod events;
mod failure;
mod handle;
mod options;
pub(crate) mod telemetry;
mod watch;

pub use active::{ActivePolicy, Answer};
pub use error::{SwapError, SwapStage};
pub use events::{Event, Stats};
pub use failure::FailurePolicy;
pub use handle::{HandleBuilder, PolicyHandle};
pub use options::SwapOptions;
pub use watch::{WatchOptions, Watcher};
