//! Scripted scenarios: a run whose operations answer from a script, on a
//! virtual clock. `agent-recovery simulate` and the loop vectors
//! (`tests/loops/`) run them; the format is specified in `docs/runtime.md`
//! ("Scenarios"). The component parses and checks a scenario
//! (`scenario@0.3.0`); this module runs its plan.
//!
//! Each call of a step's operation (or of a fallback target, or of its
//! compensation) consumes the next entry of its `outcomes`: `"ok"`, or an
//! observation that the component checks (`check-outcome`: a 200 carrying a
//! refusal is a failure, a 304 is not).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::component::LoopComponent;
use super::{Call, Operations, Outcome, RecoverOptions, Runtime, RuntimeError, Step, VirtualClock};
use crate::retry::Decide;
use crate::store::Store;
use crate::{Limits, Loader};
use plan::PlanStep;

/// A validated scenario, as the component's `scenario@0.3.0` `parse` returns
/// it (`wit/agent-recovery@0.3.0/scenario.wit`); see [`parse`].
pub mod plan {
    pub use crate::component::gen_::runtime::plan::{
        Fallback, Fanout, Outcome, Plan, PlanStep, Step,
    };
}

/// The dead-letter stream (`docs/runtime.md`, "Store keys").
pub const DEAD_LETTER_STREAM: &str = "agent-recovery/dead-letter";

/// What went wrong running a scenario.
#[derive(Debug)]
pub enum ScenarioError {
    /// The scenario is not valid (bad JSON, a missing member, an outcome
    /// missing for a call); the message names it and ends with a hint.
    Invalid(String),
    /// The runtime failed.
    Runtime(RuntimeError),
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScenarioError::Invalid(m) => f.write_str(m),
            ScenarioError::Runtime(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ScenarioError {}

impl From<RuntimeError> for ScenarioError {
    fn from(e: RuntimeError) -> Self {
        ScenarioError::Runtime(e)
    }
}

impl From<crate::store::StoreError> for ScenarioError {
    fn from(e: crate::store::StoreError) -> Self {
        ScenarioError::Runtime(RuntimeError::Store(e))
    }
}

/// How a scenario ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioOutput {
    /// `completed`, or the outcome of the step that ended the run.
    pub outcome: String,
    /// Every event, the component's JSON text.
    pub events: Vec<String>,
    /// The dead-letter records this run appended (JSON text).
    pub dead_letters: Vec<String>,
}

impl ScenarioOutput {
    /// `{"outcome":..,"events":[..],"dead_letters":[..]}`: the events and
    /// records are the component's bytes, so every host prints the same text.
    pub fn to_json(&self) -> String {
        format!(
            r#"{{"outcome":{},"events":[{}],"dead_letters":[{}]}}"#,
            serde_json::to_string(&self.outcome).unwrap_or_default(),
            self.events.join(","),
            self.dead_letters.join(",")
        )
    }
}

/// Outcomes left per (step, target) and per compensated step, and the first
/// call that found none.
#[derive(Default)]
struct Script {
    queues: BTreeMap<(String, String), Vec<plan::Outcome>>,
    missing: Option<String>,
}

impl Script {
    fn next(&mut self, step: &str, target: &str, what: &str) -> Outcome {
        let queue = self
            .queues
            .entry((step.to_owned(), target.to_owned()))
            .or_default();
        if queue.is_empty() {
            if self.missing.is_none() {
                self.missing = Some(format!(
                    "scenario step {step:?}: a call of {what} {target:?} found no outcome left; add one to its `outcomes`"
                ));
            }
            return Outcome::Failed(
                r#"{"source":"exception","type":"agent_recovery.simulate.NoOutcomeLeft"}"#.into(),
            );
        }
        match queue.remove(0) {
            plan::Outcome::Ok => Outcome::Ok(Value::Null),
            plan::Outcome::Observation(text) => Outcome::Response(text),
        }
    }
}

/// Runs `scenario` (JSON text) against `store`, deciding with `policy` (the
/// reference when none), loading components with `loader`.
pub fn run(
    scenario: &str,
    store: Arc<dyn Store>,
    policy: Option<Arc<dyn Decide + Send + Sync>>,
    loader: Loader,
) -> Result<ScenarioOutput, ScenarioError> {
    run_scenario(scenario, store, policy, loader, false)
}

/// [`run`], the run's first step sent in its `run` input (one `advance`
/// for both, as a door's run of one step does; docs/runtime.md, "Inputs"):
/// the output is the same.
pub fn run_with_first_step(
    scenario: &str,
    store: Arc<dyn Store>,
    policy: Option<Arc<dyn Decide + Send + Sync>>,
    loader: Loader,
) -> Result<ScenarioOutput, ScenarioError> {
    run_scenario(scenario, store, policy, loader, true)
}

fn run_scenario(
    scenario: &str,
    store: Arc<dyn Store>,
    policy: Option<Arc<dyn Decide + Send + Sync>>,
    loader: Loader,
    with_first_step: bool,
) -> Result<ScenarioOutput, ScenarioError> {
    let scenario = parse(scenario, &loader)?;
    let clock = Arc::new(VirtualClock::new(scenario.now_ms));
    let mut builder = Runtime::builder()
        .loader(loader)
        .store(Arc::clone(&store))
        .clock(clock.clone())
        .config_json(json_value(&scenario.config)?);
    if let Some(seed) = scenario.seed {
        builder = builder.seed(seed);
    }
    if let Some(policy) = policy {
        builder = builder.decider(policy);
    }
    let runtime = builder.build()?;
    let dead_before = store
        .read(DEAD_LETTER_STREAM, 0, usize::MAX)?
        .last()
        .map_or(0, |(seq, _)| *seq);

    let script = Arc::new(Mutex::new(Script::default()));
    {
        let mut s = script.lock().unwrap_or_else(PoisonError::into_inner);
        for step in scenario.steps.iter().flat_map(plain) {
            let first = step.target.clone().unwrap_or_else(|| step.tool.clone());
            s.queues
                .insert((step.id.clone(), first), step.outcomes.clone());
            for fb in &step.fallbacks {
                s.queues
                    .insert((step.id.clone(), fb.target.clone()), fb.outcomes.clone());
            }
            if let Some(c) = &step.compensation {
                s.queues
                    .insert((step.id.clone(), "\u{0}compensation".into()), c.clone());
            }
        }
    }

    if scenario.recover {
        let mut ops = Operations::new();
        for step in scenario.steps.iter().flat_map(plain) {
            ops.insert(scripted(step, &script, true)?);
        }
        let reports = runtime.recover(&ops, RecoverOptions::older_than_ms(0))?;
        if let Some(missing) = script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .missing
            .take()
        {
            return Err(ScenarioError::Invalid(missing));
        }
        return Ok(ScenarioOutput {
            outcome: reports
                .last()
                .map_or_else(|| "none".to_owned(), |r| r.outcome.clone()),
            events: reports.iter().flat_map(|r| r.events.clone()).collect(),
            dead_letters: store
                .read(DEAD_LETTER_STREAM, dead_before, usize::MAX)?
                .into_iter()
                .map(|(_, r)| r)
                .collect(),
        });
    }

    let mut run = if with_first_step {
        runtime.run_of_one_step(&scenario.run_id)?
    } else {
        runtime.run(&scenario.run_id)?
    };
    if let Some(n) = scenario.kill_after_calls {
        run.kill_after_calls(n);
    }
    if let Some(at) = scenario.cancel_at_ms {
        run.cancel_at(scenario.now_ms.saturating_add(at));
    }
    let mut outcome = "completed".to_owned();
    for step in &scenario.steps {
        let report = match step {
            PlanStep::Fanout(f) => run.fanout(
                &f.id,
                f.min_results,
                f.branches
                    .iter()
                    .map(|b| scripted(b, &script, false))
                    .collect::<Result<_, _>>()?,
            )?,
            PlanStep::Step(step) => run.step(scripted(step, &script, false)?)?,
        };
        if let Some(missing) = script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .missing
            .take()
        {
            return Err(ScenarioError::Invalid(missing));
        }
        if report.outcome != "ok" {
            outcome = report.outcome;
            break;
        }
    }
    let events = run.events().to_vec();
    if outcome == "completed" {
        run.end()?;
    }
    let dead: Vec<String> = store
        .read(DEAD_LETTER_STREAM, dead_before, usize::MAX)?
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    Ok(ScenarioOutput {
        outcome,
        events,
        dead_letters: dead,
    })
}

/// A step whose operation and compensation answer from the script (by the
/// scenario step's id when `own_id`, as in a recovery, where the call names
/// the journaled step; else by the call's step id).
fn scripted<'a>(
    step: &plan::Step,
    script: &Arc<Mutex<Script>>,
    own_id: bool,
) -> Result<Step<'a>, ScenarioError> {
    let op_script = Arc::clone(script);
    let id = own_id.then(|| step.id.clone());
    let comp_id = id.clone();
    let mut s = Step::new(&step.id, &step.tool, move |call: &Call| {
        let what = if call.kind == "fallback" {
            "fallback target"
        } else {
            "target"
        };
        op_script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next(id.as_deref().unwrap_or(&call.step), &call.target, what)
    })
    .args(step.args.as_deref().map_or(Ok(Value::Null), json_value)?)
    .side_effect(step.side_effect)
    .fallbacks(
        &step
            .fallbacks
            .iter()
            .map(|f| f.target.as_str())
            .collect::<Vec<_>>(),
    );
    if let Some(kind) = &step.call {
        s = s.call(kind);
    }
    if let Some(t) = &step.target {
        s = s.target(t);
    }
    if let Some(i) = step.idempotent {
        s = s.idempotent(i);
    }
    if let Some(ok) = step.checkpoint {
        s = s.checkpoint(move || ok);
    }
    s.replay_of = step.replay_of.as_deref().map(json_value).transpose()?;
    if step.compensation.is_some() {
        let comp_script = Arc::clone(script);
        s = s.compensate(move |call: &Call| {
            comp_script
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .next(
                    comp_id.as_deref().unwrap_or(&call.step),
                    "\u{0}compensation",
                    "the compensation of",
                )
        });
    }
    Ok(s)
}

/// A plan step's plain steps: itself, or a fan-out's branches.
fn plain(step: &PlanStep) -> &[plan::Step] {
    match step {
        PlanStep::Step(s) => std::slice::from_ref(s),
        PlanStep::Fanout(f) => &f.branches,
    }
}

/// Parse and check `scenario` (JSON text) with the component loaded by
/// `loader` (`scenario@0.3.0`): its plan, or [`ScenarioError::Invalid`] with
/// the message that names the bad member or rule.
pub fn parse(text: &str, loader: &Loader) -> Result<plan::Plan, ScenarioError> {
    let looper = LoopComponent::reference(loader, Limits::default()).map_err(RuntimeError::from)?;
    looper
        .parse_scenario(text)
        .map_err(RuntimeError::from)?
        .map_err(ScenarioError::Invalid)
}

/// A JSON text of the plan (valid JSON: the component checked it) as a value.
fn json_value(text: &str) -> Result<Value, ScenarioError> {
    serde_json::from_str(text).map_err(|e| {
        ScenarioError::Runtime(RuntimeError::Policy(crate::Error::new(
            crate::ErrorKind::InvalidOutput,
            format!("the scenario plan holds text that is not JSON ({e}); rebuild the host"),
        )))
    })
}
