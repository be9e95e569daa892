//! Scripted scenarios: parsing and validation (`agent:recovery/scenario@0.3.0`).
//!
//! A scenario is a run whose operations answer from a script, on a virtual
//! clock (`docs/runtime.md`, "Scenarios"). [`parse`] reads its JSON text,
//! checks every member and rule, and returns a [`Plan`]: the scenario with its
//! defaults filled in, which a host runs without checking anything again. Open
//! JSON values (args, observations, `replay_of`, the run configuration) stay
//! the text of the scenario as written, so every host hands the loop the same
//! bytes.
//!
//! ```
//! use agent_recovery_policy::scenario::{self, Outcome, PlanStep};
//! let plan = scenario::parse(r#"{"run_id":"r","now_ms":0,"steps":[{"id":"a","tool":"t","outcomes":["ok"]}]}"#).unwrap();
//! let PlanStep::Step(step) = &plan.steps[0] else { unreachable!() };
//! assert_eq!(step.outcomes, [Outcome::Ok]);
//! assert_eq!(plan.config, "{}");
//! let err = scenario::parse(r#"{"run_id":"r","now_ms":0,"steps":[]}"#).unwrap_err();
//! assert_eq!(err, "scenario: `steps` is empty; give at least one step");
//! ```

mod check;

pub use check::parse;

/// What one call of an operation answers with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `"ok"`: success, value null.
    Ok,
    /// An observation object, its JSON text as written.
    Observation(String),
}

/// A fallback target and the outcomes of its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The target's name.
    pub target: String,
    /// Each call of the target takes the next outcome.
    pub outcomes: Vec<Outcome>,
}

/// A plain step or a fan-out branch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// The step's id, unique in the scenario.
    pub id: String,
    /// The tool, never empty.
    pub tool: String,
    /// The call kind, `None` for the default.
    pub call: Option<String>,
    /// The first target, `None` for the tool's name.
    pub target: Option<String>,
    /// The arguments (JSON text as written), `None` when absent or null.
    pub args: Option<String>,
    /// The step has a side effect.
    pub side_effect: bool,
    /// Retrying is safe; `None` for the loop's default.
    pub idempotent: Option<bool>,
    /// What restoring the checkpoint answers; `None` for no checkpoint hook.
    pub checkpoint: Option<bool>,
    /// Each call of the first target takes the next outcome.
    pub outcomes: Vec<Outcome>,
    /// The fallback chain, in order.
    pub fallbacks: Vec<Fallback>,
    /// The compensation's outcomes; `None` for no compensation.
    pub compensation: Option<Vec<Outcome>>,
    /// The dead-letter record replayed (JSON object text as written).
    pub replay_of: Option<String>,
}

/// A fan-out step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fanout {
    /// The fan-out's id, unique in the scenario.
    pub id: String,
    /// How many branches must succeed.
    pub min_results: u32,
    /// The branches, none of them a fan-out.
    pub branches: Vec<Step>,
}

/// One step of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanStep {
    /// A plain step.
    Step(Step),
    /// A fan-out.
    Fanout(Fanout),
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The run's id; empty only when `recover`.
    pub run_id: String,
    /// The jitter seed.
    pub seed: Option<u64>,
    /// The virtual clock's start, Unix ms.
    pub now_ms: u64,
    /// The run configuration (JSON text as written), `{}` when absent or null.
    pub config: String,
    /// Cancel the run this many ms after `now_ms`.
    pub cancel_at_ms: Option<u64>,
    /// Kill the worker at this call (from 1).
    pub kill_after_calls: Option<u64>,
    /// Recover the store's interrupted runs; the steps are the operations.
    pub recover: bool,
    /// The steps, in order; empty only when `recover`.
    pub steps: Vec<PlanStep>,
}

#[cfg(test)]
mod tests;
