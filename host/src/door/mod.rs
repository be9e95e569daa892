//! The small door: one fallible call under the recovery runtime, in one line.
//!
//! ```
//! use agent_recovery::door::{Door, Recoverable};
//! use agent_recovery::runtime::Call;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! # rt.block_on(async {
//! let door = Door::builder().tool("payments.charge").call("tool").build()?;
//! let charge = |call: Call| async move {
//!     match call.attempt {
//!         1 => Err(503), // the status of a failed HTTP call
//!         _ => Ok(format!("ch_1 (key {})", &call.key[..8])), // send call.key to the service
//!     }
//! };
//! let answer = charge
//!     .recover(&door)
//!     .observe(|status| format!(r#"{{"source":"http","status":{status}}}"#))
//!     .await?;
//! assert!(answer.starts_with("ch_1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! Each call is a run of one step of a [`Runtime`]: the loop and every
//! decision are the component's, the door only carries them out. It mirrors
//! `recover` of the Node and Python packages: the embedded reference policy
//! decides, the run id is generated, the step id is the tool name, the
//! operation gets the idempotency key, the target and the attempt number in
//! its [`Call`], breakers are kept in the door's store across calls (a
//! `fallbacks` chain starts at the first target whose breaker is not open),
//! and a failure comes back as a [`DoorError`] that also carries the envelope
//! rendered for the model ([`DoorError::for_model`]).
//!
//! [`Recoverable`] is for closures returning a future of a `Result`: the
//! runtime's async driver runs the step in the caller's task (no thread of
//! its own; retry sleeps on tokio's timer, a blocking store's calls on
//! tokio's blocking pool). [`BlockingRecoverable`] is its blocking twin. An
//! error with no `observe` is read as the network failure it names when it
//! is or wraps a [`std::io::Error`], else as an exception of its type. With the `tower` feature,
//! [`RecoverLayer`] runs each request of a `tower::Service` as a step.

mod blocking;
mod error;
mod future;
#[cfg(feature = "tower")]
mod layer;
mod observe;
mod options;
mod outcome;

use std::sync::Arc;

pub use blocking::{BlockingRecover, BlockingRecoverable};
pub use error::DoorError;
pub use future::{Recover, RecoverFuture, Recoverable};
#[cfg(feature = "tower")]
pub use layer::{RecoverLayer, RecoverService};
pub use options::{DoorBuilder, OPTIONS};

use crate::Policy;
use crate::runtime::Runtime;

/// One wrapped operation's runtime and options, shared by all its calls
/// (`Send + Sync`; clone the `Arc` or borrow it).
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`policy`](DoorBuilder::policy) | the embedded reference policy |
/// | [`store`](DoorBuilder::store) | a [`MemoryStore`](crate::MemoryStore) per door: its breakers outlive a call |
/// | [`clock`](DoorBuilder::clock) | [`SystemClock`](crate::runtime::SystemClock) |
/// | [`seed`](DoorBuilder::seed) | none: jitter from WASI random |
/// | [`call`](DoorBuilder::call) | none: read from each observation; `tool`, `llm` or `agent` |
/// | [`tool`](DoorBuilder::tool) | `operation` |
/// | [`target`](DoorBuilder::target) | the tool name (a breaker's key); the operation gets it as `call.target` |
/// | [`fallbacks`](DoorBuilder::fallbacks) | none: the targets to fall back to, in order |
/// | [`side_effect`](DoorBuilder::side_effect) | false |
/// | [`idempotent`](DoorBuilder::idempotent) | unknown |
/// | [`run_id`](DoorBuilder::run_id) | a new id per call, `<tool>-<32 hex digits>` |
/// | [`step_id`](DoorBuilder::step_id) | the tool name |
/// | [`timeout_ms`](DoorBuilder::timeout_ms) | none: the runtime's `attempt_timeout_ms` |
/// | [`policy_config`](DoorBuilder::policy_config) | none: the policy's defaults |
/// | [`breaker`](DoorBuilder::breaker) | none: the policy's thresholds |
/// | [`on_event`](DoorBuilder::on_event) | none |
/// | [`decision_log`](DoorBuilder::decision_log) | none: no decision log (docs/decision-logs.md) |
#[derive(Clone)]
pub struct Door {
    runtime: Arc<Runtime>,
    policy: Arc<Policy>,
    options: Arc<options::StepOptions>,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Door {
    /// Options; see [`Door`] for every default.
    pub fn builder() -> DoorBuilder {
        DoorBuilder::default()
    }

    /// The door's runtime (its store holds the breakers of every call).
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
}
