//! The recovery loop as a pure, sans-I/O state machine (`agent:recovery/runtime@0.2.0`).
//!
//! [`advance`] takes the run's state (JSON text the host stores) and one input
//! (what just happened), and returns the new state and the effects the host
//! carries out, in order: read or write store keys, call the operation, ask the
//! active policy to decide, sleep, restore a checkpoint, emit an event, append a
//! dead-letter record, finish the step. Nothing is kept between calls; every
//! host (Rust, Node, Python) drives the same transitions, so the loop cannot
//! drift. The whole protocol is specified in `docs/runtime.md`.
//!
//! ```
//! use agent_recovery_policy::advance;
//! let run = advance("", r#"{"input":"run","now_ms":0,"run_id":"r1","seed":7}"#).unwrap();
//! let step = r#"{"input":"step","now_ms":0,"step":{"id":"s1","tool":"search"}}"#;
//! let next = advance(&run.state, step).unwrap();
//! assert!(next.effects.starts_with(r#"[{"effect":"read","keys":["agent-recovery/breaker/search""#));
//! ```

pub mod breaker;
pub mod config;
pub mod decision_log;
pub mod effect;
mod fanout;
mod fanout_recover;
pub mod input;
mod machine;
pub mod outcome;
pub mod state;
mod swap;

use crate::error::{ErrorKind, PolicyError};

pub use outcome::check_json as check_outcome;

/// The new state and the effects, both JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advanced {
    /// The new state: pass it to the next call unchanged.
    pub state: String,
    /// A JSON array of effects.
    pub effects: String,
}

/// Feed one input to the loop. `state` is empty for a new run.
pub fn advance(state: &str, input: &str) -> Result<Advanced, PolicyError> {
    let (input, now) = input::parse(input)?;
    let state = if state.trim().is_empty() {
        None
    } else {
        crate::api::check_size("state", state)?;
        Some(serde_json::from_str::<state::State>(state).map_err(|e| {
            PolicyError::new(
                ErrorKind::InvalidArgument,
                format!("state is not a state returned by advance ({e}); pass the previous state unchanged"),
            )
        })?)
    };
    let (state, mut effects) = machine::advance(state, input, now)?;
    let state = crate::api::to_json(&state)?;
    // The journal holds the state this batch returns: serialized once, the same bytes.
    fill_journals(&mut effects, &state)?;
    Ok(Advanced {
        state,
        effects: crate::api::to_json(&effects)?,
    })
}

/// Fills the journal entries of a batch that have no state yet with `state`
/// (the JSON text of the state the batch leaves behind). A resumed fan-out
/// branch's entries are filled with the branch's own state first.
fn fill_journals(effects: &mut [effect::Effect], state: &str) -> Result<(), PolicyError> {
    for fx in effects {
        if let effect::Effect::Journal { value, .. } = fx
            && value.state.is_none()
        {
            value.state = Some(
                serde_json::value::RawValue::from_string(state.to_owned()).map_err(|e| {
                    PolicyError::new(
                        ErrorKind::Internal,
                        format!("the state is not JSON ({e}); please report this"),
                    )
                })?,
            );
        }
    }
    Ok(())
}
