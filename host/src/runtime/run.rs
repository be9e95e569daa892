//! A run: drives the loop component, carries out its effects, nothing more.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Runtime;
use super::step::{Call, Outcome, Step};
use crate::Error;
use crate::store::{Cas, StoreError, StoreErrorKind};

/// Why a run could not go on.
#[derive(Debug)]
pub enum RuntimeError {
    /// The loop component or the active policy failed (trap, fuel, a policy
    /// error on an operation's observation, a refused input).
    Policy(Error),
    /// The store failed.
    Store(StoreError),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Policy(e) => write!(f, "{e}"),
            RuntimeError::Store(e) => write!(f, "store: {e}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<Error> for RuntimeError {
    fn from(e: Error) -> Self {
        RuntimeError::Policy(e)
    }
}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> Self {
        RuntimeError::Store(e)
    }
}

/// How a step ended, as the loop reported it (`finish` effect).
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// `ok`, `failed`, `escalated`, `replan`, `awaiting_input`,
    /// `dead_lettered`, `cancelled`, `in_flight`.
    pub outcome: String,
    /// Every outcome but `ok` ends the run.
    pub run_finished: bool,
    /// For `ok`: the operation's value (or the idempotency cache's).
    pub result: Option<Value>,
    /// The last failure's envelope.
    pub envelope: Option<Value>,
    /// For `replan`: the envelope rendered `model-tool-result`, for the model.
    pub rendered: Option<Value>,
    /// For `awaiting_input`: run the step again with the answer (same key).
    pub token: Option<String>,
}

impl StepReport {
    /// The report of a call made after the run ended with `outcome`.
    fn after_the_end(outcome: &str) -> StepReport {
        StepReport {
            outcome: outcome.to_owned(),
            run_finished: true,
            result: None,
            envelope: None,
            rendered: None,
            token: None,
        }
    }
}

/// One effect of the loop (docs/runtime.md, "Effects").
#[derive(Deserialize)]
struct Fx<'a> {
    effect: String,
    #[serde(default)]
    keys: Vec<String>,
    key: Option<String>,
    #[serde(borrow)]
    value: Option<&'a RawValue>,
    ttl_ms: Option<u64>,
    call: Option<String>,
    step: Option<String>,
    target: Option<String>,
    attempt: Option<u32>,
    timeout_ms: Option<u64>,
    observation: Option<String>,
    context: Option<String>,
    ms: Option<u64>,
    cancellable: Option<bool>,
    #[serde(borrow)]
    event: Option<&'a RawValue>,
    stream: Option<String>,
    #[serde(borrow)]
    record: Option<&'a RawValue>,
    outcome: Option<String>,
    run_finished: Option<bool>,
    result: Option<Value>,
    envelope: Option<Value>,
    rendered: Option<Value>,
    token: Option<String>,
}

type Undo<'a> = Box<dyn FnMut(&Call) -> Outcome + Send + 'a>;

/// A run of steps under one run id. Steps run one after the other with
/// [`Run::step`]; the run's retry budget, breakers and compensations span them.
pub struct Run<'r, 'a> {
    rt: &'r Runtime,
    state: String,
    undo: BTreeMap<String, Undo<'a>>,
    events: Vec<String>,
    cancel: Arc<AtomicBool>,
    cancel_at_ms: Option<u64>,
    finished: Option<String>,
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn bad_effect(what: &str) -> RuntimeError {
    RuntimeError::Policy(Error::new(
        crate::ErrorKind::InvalidOutput,
        format!(
            "the recovery loop emitted a malformed effect ({what}); this is a bug, please report it"
        ),
    ))
}

impl<'r, 'a> Run<'r, 'a> {
    pub(crate) fn start(rt: &'r Runtime, run_id: &str) -> Result<Self, RuntimeError> {
        let seed = rt.seed.map_or_else(|| "null".to_owned(), |s| s.to_string());
        let input = format!(
            r#"{{"input":"run","now_ms":{},"run_id":{},"seed":{},"config":{}}}"#,
            rt.clock.now_ms(),
            json_str(run_id),
            seed,
            rt.config
        );
        let adv = rt.looper.advance("", &input)?;
        Ok(Run {
            rt,
            state: adv.state,
            undo: BTreeMap::new(),
            events: Vec::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            cancel_at_ms: None,
            finished: None,
        })
    }

    /// Every event so far, as the component's JSON text (docs/runtime.md, "Events").
    pub fn events(&self) -> &[String] {
        &self.events
    }

    /// The run's state as the loop returned it (JSON text).
    pub fn state(&self) -> &str {
        &self.state
    }

    /// A flag that cancels the run when set from any thread: no new attempts,
    /// compensations of completed steps still run, the outcome is `cancelled`.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Cancel when the clock reaches `now_ms` (Unix ms); a sleep crossing it
    /// is cut short there.
    pub fn cancel_at(&mut self, now_ms: u64) {
        self.cancel_at_ms = Some(now_ms);
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
            || self
                .cancel_at_ms
                .is_some_and(|t| self.rt.clock.now_ms() >= t)
    }

    /// Runs a step to its end and reports how it ended. `Err` only when the
    /// loop, the policy or the store failed.
    pub fn step(&mut self, mut step: Step<'a>) -> Result<StepReport, RuntimeError> {
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        let input = format!(
            r#"{{"input":"step","now_ms":{},"step":{}}}"#,
            self.rt.clock.now_ms(),
            step.spec()
        );
        let report = self.drive(input, &mut step)?;
        if report.outcome == "ok"
            && let Some(undo) = step.compensate.take()
        {
            self.undo.insert(step.id.clone(), undo);
        }
        Ok(report)
    }

    /// Feeds `input`, carries out the effects, answers the last one, until `finish`.
    fn drive(
        &mut self,
        mut input: String,
        step: &mut Step<'a>,
    ) -> Result<StepReport, RuntimeError> {
        loop {
            let adv = self.rt.looper.advance(&self.state, &input)?;
            self.state = adv.state;
            let effects: Vec<&RawValue> =
                serde_json::from_str(&adv.effects).map_err(|_| bad_effect("not an array"))?;
            let mut next = None;
            for raw in effects {
                let fx: Fx = serde_json::from_str(raw.get()).map_err(|_| bad_effect(raw.get()))?;
                if let Some(report) = self.effect(&fx, step, &mut next)? {
                    if report.run_finished {
                        self.finished = Some(report.outcome.clone());
                    }
                    return Ok(report);
                }
            }
            input = next.ok_or_else(|| bad_effect("a batch without an effect to answer"))?;
        }
    }

    /// Carries out one effect; sets `next` to the input that answers it.
    fn effect(
        &mut self,
        fx: &Fx,
        step: &mut Step<'a>,
        next: &mut Option<String>,
    ) -> Result<Option<StepReport>, RuntimeError> {
        let rt = self.rt;
        let store = &*rt.store;
        match fx.effect.as_str() {
            "emit" => {
                let event = fx.event.ok_or_else(|| bad_effect("emit without event"))?;
                if let Some(f) = &rt.on_event {
                    f(event.get());
                }
                self.events.push(event.get().to_owned());
            }
            "read" => {
                let now = rt.clock.now_ms();
                let mut values = String::from("{");
                for (i, key) in fx.keys.iter().enumerate() {
                    if i > 0 {
                        values.push(',');
                    }
                    values.push_str(&json_str(key));
                    values.push(':');
                    match store.get(key, now)? {
                        Some(v) => values.push_str(&v.value),
                        None => values.push_str("null"),
                    }
                }
                values.push('}');
                *next = Some(format!(
                    r#"{{"input":"read","now_ms":{now},"values":{values}}}"#
                ));
            }
            "write" => {
                let key = fx
                    .key
                    .as_deref()
                    .ok_or_else(|| bad_effect("write without key"))?;
                let value = fx.value.ok_or_else(|| bad_effect("write without value"))?;
                put(store, key, value.get(), fx.ttl_ms, rt.clock.now_ms())?;
            }
            "claim" => {
                let key = fx
                    .key
                    .as_deref()
                    .ok_or_else(|| bad_effect("claim without key"))?;
                let value = fx.value.ok_or_else(|| bad_effect("claim without value"))?;
                let now = rt.clock.now_ms();
                *next = Some(
                    match store.compare_and_set(key, None, value.get(), fx.ttl_ms, now)? {
                        Cas::Written { .. } => {
                            format!(r#"{{"input":"claimed","now_ms":{now},"ok":true}}"#)
                        }
                        Cas::Conflict { current } => format!(
                            r#"{{"input":"claimed","now_ms":{now},"ok":false,"current":{}}}"#,
                            current.map_or_else(|| "null".to_owned(), |v| v.value)
                        ),
                    },
                );
            }
            "delete" => {
                let key = fx
                    .key
                    .as_deref()
                    .ok_or_else(|| bad_effect("delete without key"))?;
                store.delete(key)?;
            }
            "append" => {
                let stream = fx
                    .stream
                    .as_deref()
                    .ok_or_else(|| bad_effect("append without stream"))?;
                let record = fx
                    .record
                    .ok_or_else(|| bad_effect("append without record"))?;
                store.append(stream, record.get(), rt.clock.now_ms())?;
            }
            "decide" => {
                let obs = fx
                    .observation
                    .as_deref()
                    .ok_or_else(|| bad_effect("decide without observation"))?;
                let ctx = fx
                    .context
                    .as_deref()
                    .ok_or_else(|| bad_effect("decide without context"))?;
                let decision = rt.decider.decide_json(obs, ctx)?;
                *next = Some(format!(
                    r#"{{"input":"decision","now_ms":{},"decision":{decision}}}"#,
                    rt.clock.now_ms()
                ));
            }
            "sleep" => {
                let ms = fx.ms.unwrap_or(0);
                let cancellable = fx.cancellable.unwrap_or(true);
                if cancellable && self.cancelled() {
                    *next = Some(self.cancel_input());
                } else if let Some(at) = self
                    .cancel_at_ms
                    .filter(|at| cancellable && rt.clock.now_ms().saturating_add(ms) > *at)
                {
                    rt.clock.sleep_ms(at.saturating_sub(rt.clock.now_ms()));
                    *next = Some(self.cancel_input());
                } else {
                    rt.clock.sleep_ms(ms);
                    *next = Some(format!(
                        r#"{{"input":"slept","now_ms":{}}}"#,
                        rt.clock.now_ms()
                    ));
                }
            }
            "restore" => {
                let ok = step.checkpoint.as_mut().is_some_and(|hook| hook());
                *next = Some(format!(
                    r#"{{"input":"restored","now_ms":{},"ok":{ok}}}"#,
                    rt.clock.now_ms()
                ));
            }
            "call" => {
                let call = Call {
                    kind: fx.call.clone().unwrap_or_default(),
                    step: fx.step.clone().unwrap_or_default(),
                    target: fx.target.clone().unwrap_or_default(),
                    key: fx.key.clone().unwrap_or_default(),
                    attempt: fx.attempt.unwrap_or(1),
                    timeout_ms: fx.timeout_ms,
                };
                let compensation = call.kind == "compensation";
                if !compensation && self.cancelled() {
                    *next = Some(self.cancel_input());
                    return Ok(None);
                }
                let started = rt.clock.now_ms();
                let outcome = if compensation {
                    match self.undo.get_mut(&call.step) {
                        Some(undo) => undo(&call),
                        None => Outcome::Failed(format!(
                            r#"{{"source":"exception","type":"agent_recovery.MissingCompensation","message":{}}}"#,
                            json_str(&format!(
                                "no compensation registered for step {}",
                                call.step
                            ))
                        )),
                    }
                } else {
                    (step.operation)(&call)
                };
                let took = rt.clock.now_ms().saturating_sub(started);
                let outcome = match call.timeout_ms {
                    Some(limit) if took > limit => Outcome::Failed(format!(
                        r#"{{"source":"timeout","phase":"total","after_ms":{took}}}"#
                    )),
                    _ => outcome,
                };
                let result = match outcome {
                    Outcome::Ok(v) => format!(r#"{{"ok":{v}}}"#),
                    Outcome::Failed(obs) => format!(r#"{{"failed":{}}}"#, as_json(&obs)),
                    Outcome::Response(obs) => format!(r#"{{"response":{}}}"#, as_json(&obs)),
                };
                *next = Some(format!(
                    r#"{{"input":"attempt","now_ms":{},"result":{result}}}"#,
                    rt.clock.now_ms()
                ));
            }
            "finish" => {
                return Ok(Some(StepReport {
                    outcome: fx.outcome.clone().unwrap_or_default(),
                    run_finished: fx.run_finished.unwrap_or(true),
                    result: fx.result.clone(),
                    envelope: fx.envelope.clone(),
                    rendered: fx.rendered.clone(),
                    token: fx.token.clone(),
                }));
            }
            other => return Err(bad_effect(other)),
        }
        Ok(None)
    }

    fn cancel_input(&self) -> String {
        format!(
            r#"{{"input":"cancel","now_ms":{}}}"#,
            self.rt.clock.now_ms()
        )
    }

    /// Cancel between steps: runs the compensations of the completed steps
    /// now (in reverse order) and reports `cancelled`.
    pub fn cancel(&mut self) -> Result<StepReport, RuntimeError> {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        let mut noop = Step::new("", "", |_: &Call| Outcome::Ok(Value::Null));
        let input = self.cancel_input();
        self.drive(input, &mut noop)
    }
}

/// An observation that is not JSON text is reported as an exception rather
/// than breaking the run.
fn as_json(text: &str) -> String {
    if serde_json::from_str::<&RawValue>(text).is_ok() {
        text.to_owned()
    } else {
        format!(
            r#"{{"source":"exception","type":"agent_recovery.InvalidObservation","message":{}}}"#,
            json_str(&format!(
                "the operation returned an observation that is not JSON: {}",
                text.chars().take(200).collect::<String>()
            ))
        )
    }
}

/// Last-writer-wins put on top of compare-and-set.
fn put(
    store: &dyn crate::store::Store,
    key: &str,
    value: &str,
    ttl_ms: Option<u64>,
    now: u64,
) -> Result<(), StoreError> {
    for _ in 0..16 {
        let current = store.get(key, now)?.map(|v| v.version);
        if let Cas::Written { .. } = store.compare_and_set(key, current, value, ttl_ms, now)? {
            return Ok(());
        }
    }
    Err(StoreError::new(
        StoreErrorKind::Unavailable,
        format!(
            "could not write {key}: 16 compare-and-set conflicts in a row; the store is contended, retry the run"
        ),
    ))
}
