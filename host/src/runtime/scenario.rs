//! Scripted scenarios: a run whose operations answer from a script, on a
//! virtual clock. `agent-recovery simulate` and the loop vectors
//! (`tests/loops/`) run them; the format is specified in `docs/runtime.md`
//! ("Scenarios").
//!
//! Each call of a step's operation (or of a fallback target, or of its
//! compensation) consumes the next entry of its `outcomes`: `"ok"`, or an
//! observation that the component checks (`check-outcome`: a 200 carrying a
//! refusal is a failure, a 304 is not).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::Value;

use super::{Call, Operations, Outcome, RecoverOptions, Runtime, RuntimeError, Step, VirtualClock};
use crate::Loader;
use crate::retry::Decide;
use crate::store::Store;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    run_id: String,
    #[serde(default)]
    seed: Option<u64>,
    now_ms: u64,
    #[serde(default)]
    config: Option<Value>,
    #[serde(default)]
    cancel_at_ms: Option<u64>,
    #[serde(default)]
    kill_after_calls: Option<u64>,
    #[serde(default)]
    recover: bool,
    steps: Vec<ScenarioStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioStep {
    id: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    call: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    args: Value,
    #[serde(default)]
    side_effect: bool,
    #[serde(default)]
    idempotent: Option<bool>,
    #[serde(default)]
    checkpoint: Option<bool>,
    #[serde(default)]
    outcomes: Vec<Value>,
    #[serde(default)]
    fallbacks: Vec<ScenarioTarget>,
    #[serde(default)]
    compensation: Option<ScenarioOutcomes>,
    #[serde(default)]
    fanout: Option<ScenarioFanout>,
    #[serde(default)]
    replay_of: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFanout {
    min_results: u32,
    branches: Vec<ScenarioStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioTarget {
    target: String,
    #[serde(default)]
    outcomes: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioOutcomes {
    #[serde(default)]
    outcomes: Vec<Value>,
}

/// Outcomes left per (step, target) and per compensated step, and the first
/// call that found none.
#[derive(Default)]
struct Script {
    queues: BTreeMap<(String, String), Vec<Value>>,
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
        let v = queue.remove(0);
        if v.as_str() == Some("ok") {
            Outcome::Ok(Value::Null)
        } else {
            Outcome::Response(v.to_string())
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
    let scenario: Scenario = serde_json::from_str(scenario).map_err(|e| {
        ScenarioError::Invalid(format!(
            "scenario: {e}; see docs/runtime.md, \"Scenarios\", for the format"
        ))
    })?;
    validate(&scenario)?;
    let clock = Arc::new(VirtualClock::new(scenario.now_ms));
    let mut builder = Runtime::builder()
        .loader(loader)
        .store(Arc::clone(&store))
        .clock(clock.clone())
        .config_json(
            scenario
                .config
                .clone()
                .unwrap_or_else(|| Value::Object(Default::default())),
        );
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
        for step in scenario.steps.iter().flat_map(with_branches) {
            let first = step.target.clone().unwrap_or_else(|| step.tool.clone());
            s.queues
                .insert((step.id.clone(), first), step.outcomes.clone());
            for fb in &step.fallbacks {
                s.queues
                    .insert((step.id.clone(), fb.target.clone()), fb.outcomes.clone());
            }
            if let Some(c) = &step.compensation {
                s.queues.insert(
                    (step.id.clone(), "\u{0}compensation".into()),
                    c.outcomes.clone(),
                );
            }
        }
    }

    if scenario.recover {
        let mut ops = Operations::new();
        for step in scenario.steps.iter().flat_map(with_branches) {
            ops.insert(scripted(step, &script, true));
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

    let mut run = runtime.run(&scenario.run_id)?;
    if let Some(n) = scenario.kill_after_calls {
        run.kill_after_calls(n);
    }
    if let Some(at) = scenario.cancel_at_ms {
        run.cancel_at(scenario.now_ms.saturating_add(at));
    }
    let mut outcome = "completed".to_owned();
    for step in &scenario.steps {
        let report = match &step.fanout {
            Some(f) => run.fanout(
                &step.id,
                f.min_results,
                f.branches
                    .iter()
                    .map(|b| scripted(b, &script, false))
                    .collect(),
            )?,
            None => run.step(scripted(step, &script, false))?,
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
fn scripted<'a>(step: &ScenarioStep, script: &Arc<Mutex<Script>>, own_id: bool) -> Step<'a> {
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
    .args(step.args.clone())
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
    s.replay_of = step.replay_of.clone();
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
    s
}

/// A scenario step and, for a fan-out, its branches.
fn with_branches(step: &ScenarioStep) -> Vec<&ScenarioStep> {
    let mut all = vec![step];
    if let Some(f) = &step.fanout {
        all.extend(f.branches.iter());
    }
    all
}

fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    if s.kill_after_calls == Some(0) {
        return Err(ScenarioError::Invalid(
            "scenario: `kill_after_calls` is 0; give the call number to kill at, from 1".into(),
        ));
    }
    if s.run_id.is_empty() && !s.recover {
        return Err(ScenarioError::Invalid(
            "scenario: `run_id` is empty; name the run".into(),
        ));
    }
    if s.steps.is_empty() && !s.recover {
        return Err(ScenarioError::Invalid(
            "scenario: `steps` is empty; give at least one step".into(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for step in &s.steps {
        if let Some(f) = &step.fanout {
            if !(step.tool.is_empty()
                && step.call.is_none()
                && step.target.is_none()
                && step.args.is_null()
                && !step.side_effect
                && step.idempotent.is_none()
                && step.checkpoint.is_none()
                && step.outcomes.is_empty()
                && step.fallbacks.is_empty()
                && step.compensation.is_none())
            {
                return Err(ScenarioError::Invalid(format!(
                    "scenario step {:?}: a fan-out step has only `id` and `fanout`; put tools and outcomes in its branches",
                    step.id
                )));
            }
            if f.branches.iter().any(|b| b.fanout.is_some()) {
                return Err(ScenarioError::Invalid(format!(
                    "scenario step {:?}: a branch is itself a fan-out; fan-outs do not nest",
                    step.id
                )));
            }
        } else if step.tool.is_empty() {
            return Err(ScenarioError::Invalid(format!(
                "scenario step {:?}: `tool` is missing or empty; name the tool (or give a `fanout`)",
                step.id
            )));
        }
        for step in with_branches(step) {
            if !seen.insert(step.id.as_str()) {
                return Err(ScenarioError::Invalid(format!(
                    "scenario: step id {:?} is used twice; step ids are unique in a run",
                    step.id
                )));
            }
            for o in step
                .outcomes
                .iter()
                .chain(step.fallbacks.iter().flat_map(|f| &f.outcomes))
                .chain(step.compensation.iter().flat_map(|c| &c.outcomes))
            {
                if !(o.as_str() == Some("ok") || o.is_object()) {
                    return Err(ScenarioError::Invalid(format!(
                        "scenario step {:?}: an outcome is {o}; use \"ok\" or an observation object",
                        step.id
                    )));
                }
            }
        }
    }
    Ok(())
}
