//! `agent-recovery simulate SCENARIO`: a scripted run through the real
//! runtime on a virtual clock (nothing sleeps), printed as a timeline.
//!
//! The scenario format and the output are specified in `docs/runtime.md`
//! ("Scenarios"). Each call of the operation (or a fallback target, or a
//! compensation) consumes the next entry of its `outcomes`: `"ok"`, or an
//! observation that the component checks (`check-outcome`: a 200 carrying a
//! refusal is a failure, a 304 is not).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use agent_recovery::Loader;
use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
use agent_recovery::store::{MemoryStore, Store};
use anyhow::Context as _;
use serde::Deserialize;
use serde_json::Value;

use crate::cli::Usage;

/// What `simulate` runs.
#[derive(Clone, Debug)]
pub struct SimulateOptions {
    /// The scenario file, or `-` for stdin.
    pub scenario: String,
    /// Print `{"outcome","events","dead_letters"}` instead of a table.
    pub json: bool,
    /// Run against this SQLite store file instead of memory (breakers, attempt
    /// counts, the idempotency cache and dead letters persist across runs).
    pub store: Option<PathBuf>,
    /// Decide with this policy component instead of the reference (preview a
    /// policy before hot-swapping it).
    pub policy: Option<PathBuf>,
    /// How components are loaded (the CLI passes its cached loader).
    pub loader: Loader,
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
    steps: Vec<ScenarioStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioStep {
    id: String,
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

/// Runs the scenario; returns what to print (JSON with `--json`, else a table).
pub fn run(opts: SimulateOptions) -> anyhow::Result<String> {
    let text = read_scenario(&opts.scenario)?;
    let scenario: Scenario = serde_json::from_str(&text).map_err(|e| {
        Usage(format!(
            "scenario {}: {e}; see docs/runtime.md, \"Scenarios\", for the format",
            opts.scenario
        ))
    })?;
    validate(&scenario)?;
    let store: Arc<dyn Store> = match &opts.store {
        None => Arc::new(MemoryStore::new()),
        Some(path) => open_store(path)?,
    };
    let clock = Arc::new(VirtualClock::new(scenario.now_ms));
    let mut builder = Runtime::builder()
        .loader(opts.loader.clone())
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
    if let Some(path) = &opts.policy {
        let policy = opts
            .loader
            .clone()
            .file(path)
            .with_context(|| format!("--policy {}", path.display()))?;
        builder = builder.policy(Arc::new(policy));
    }
    let runtime = builder.build()?;
    let dead_before = store
        .read(DEAD_LETTER_STREAM, 0, usize::MAX)?
        .last()
        .map_or(0, |(seq, _)| *seq);

    let script = Arc::new(Mutex::new(Script::default()));
    {
        let mut s = script.lock().unwrap_or_else(PoisonError::into_inner);
        for step in &scenario.steps {
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

    let mut run = runtime.run(&scenario.run_id)?;
    if let Some(at) = scenario.cancel_at_ms {
        run.cancel_at(scenario.now_ms.saturating_add(at));
    }
    let mut outcome = "completed".to_owned();
    for step in &scenario.steps {
        let op_script = Arc::clone(&script);
        let mut s = Step::new(&step.id, &step.tool, move |call: &Call| {
            let what = if call.kind == "fallback" {
                "fallback target"
            } else {
                "target"
            };
            op_script
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .next(&call.step, &call.target, what)
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
        if step.compensation.is_some() {
            let comp_script = Arc::clone(&script);
            s = s.compensate(move |call: &Call| {
                comp_script
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .next(&call.step, "\u{0}compensation", "the compensation of")
            });
        }
        let report = run.step(s)?;
        if let Some(missing) = script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .missing
            .take()
        {
            return Err(Usage(missing).into());
        }
        if report.outcome != "ok" {
            outcome = report.outcome;
            break;
        }
    }
    let dead: Vec<String> = store
        .read(DEAD_LETTER_STREAM, dead_before, usize::MAX)?
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    if opts.json {
        Ok(format!(
            r#"{{"outcome":{},"events":[{}],"dead_letters":[{}]}}"#,
            serde_json::to_string(&outcome)?,
            run.events().join(","),
            dead.join(",")
        ))
    } else {
        Ok(table(&outcome, run.events(), dead.len()))
    }
}

const DEAD_LETTER_STREAM: &str = "agent-recovery/dead-letter";

fn validate(s: &Scenario) -> Result<(), Usage> {
    if s.run_id.is_empty() {
        return Err(Usage("scenario: `run_id` is empty; name the run".into()));
    }
    if s.steps.is_empty() {
        return Err(Usage(
            "scenario: `steps` is empty; give at least one step".into(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for step in &s.steps {
        if !seen.insert(step.id.as_str()) {
            return Err(Usage(format!(
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
                return Err(Usage(format!(
                    "scenario step {:?}: an outcome is {o}; use \"ok\" or an observation object",
                    step.id
                )));
            }
        }
    }
    Ok(())
}

fn read_scenario(path: &str) -> anyhow::Result<String> {
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .map_err(|e| Usage(format!("cannot read the scenario from stdin: {e}")))?;
        buf
    } else {
        std::fs::read(path)
            .map_err(|e| Usage(format!("cannot read scenario {path}: {e}; check the path")))?
    };
    String::from_utf8(bytes).map_err(|e| {
        Usage(format!(
            "scenario {path} is not valid UTF-8 at byte {}; save it as UTF-8 JSON",
            e.utf8_error().valid_up_to()
        ))
        .into()
    })
}

fn open_store(path: &std::path::Path) -> anyhow::Result<Arc<dyn Store>> {
    Err(Usage(format!(
        "--store {}: the SQLite store is not in this build yet; run without --store (memory)",
        path.display()
    ))
    .into())
}

/// The timeline as a table, one event per line.
fn table(outcome: &str, events: &[String], dead_letters: usize) -> String {
    let mut out = format!(
        "{:>8}  {:<13} {:<14} {:<16} {:>3}  {}\n",
        "t_ms", "event", "step", "target", "n", "detail"
    );
    for e in events {
        let v: Value = serde_json::from_str(e).unwrap_or(Value::Null);
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let mut detail = Vec::new();
        for k in ["call", "action", "code", "state"] {
            if let Some(x) = v.get(k).and_then(Value::as_str) {
                detail.push(format!("{k}={x}"));
            }
        }
        if let Some(d) = v.get("delay_ms").and_then(Value::as_u64) {
            detail.push(format!("delay_ms={d}"));
        }
        let n = v
            .get("attempt")
            .and_then(Value::as_u64)
            .map_or(String::new(), |n| n.to_string());
        out.push_str(&format!(
            "{:>8}  {:<13} {:<14} {:<16} {:>3}  {}\n",
            v.get("t_ms").and_then(Value::as_u64).unwrap_or(0),
            s("event"),
            s("step"),
            s("target"),
            n,
            detail.join(" ")
        ));
    }
    out.push_str(&format!(
        "outcome: {outcome}; dead letters written: {dead_letters}"
    ));
    out
}
