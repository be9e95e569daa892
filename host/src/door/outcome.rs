//! One call through the door: a run of one step on the calling thread, and
//! what the caller gets back. Nothing here decides: the runtime's report and
//! the policy's last decision are passed on as they are.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Value, json};

use super::observe::default_observation;
use super::{Door, DoorError};
use crate::runtime::{Call, Lent, Outcome, RuntimeError, Step, StepReport};
use crate::types::RenderFormat;

/// How a step ended, with the policy's last decision (JSON text).
pub(super) struct Finished {
    pub(super) report: StepReport,
    pub(super) decision: Option<String>,
}

/// A new run id: `<tool>-<32 hex digits>`, unique per process call and
/// unpredictable across processes (std's randomly keyed SipHash).
fn new_run_id(tool: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let half = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u64(salt);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.finish()
    };
    format!("{tool}-{:016x}{:016x}", half(1), half(2))
}

/// What an attempt's result is for the runtime: `Ok` with no check is a
/// success (its value stays with the caller; the runtime records `null`),
/// `Ok` with a response observation is judged by the component, `Err` is the
/// observation `observe` makes of the error.
pub(super) fn outcome_of<T, E>(
    result: &Result<T, E>,
    check: &dyn Fn(&T) -> Option<String>,
    observe: &dyn Fn(&E) -> String,
) -> Outcome {
    match result {
        Ok(value) => check(value).map_or(Outcome::Ok(Value::Null), Outcome::Response),
        Err(e) => Outcome::Failed(observe(e)),
    }
}

/// The observation of a call the caller stopped waiting for (the future
/// was dropped): the run is cancelled, so nothing is retried.
pub(super) fn abandoned(cancel: &AtomicBool) -> Outcome {
    cancel.store(true, Ordering::SeqCst);
    Outcome::Failed(
        json!({"source": "exception", "type": "agent_recovery.Abandoned",
               "message": "the caller dropped the call's future"})
        .to_string(),
    )
}

impl Door {
    /// The run id of one call.
    fn run_id(&self) -> String {
        let o = &self.options;
        o.run_id.clone().unwrap_or_else(|| new_run_id(o.tool()))
    }

    /// The step of one call. Its own operation is never called: both
    /// drivers are lent the one that makes the attempts.
    fn step(&self, args: &Value) -> Step<'static> {
        let o = &self.options;
        let tool = o.tool();
        let unused = |_: &Call| Outcome::Ok(Value::Null);
        let mut step = Step::new(o.step_id.as_deref().unwrap_or(tool), tool, unused)
            .args(args.clone())
            .fallbacks(&o.fallbacks)
            .side_effect(o.side_effect);
        if let Some(kind) = &o.call {
            step = step.call(kind);
        }
        if let Some(target) = &o.target {
            step = step.target(target);
        }
        if let Some(yes) = o.idempotent {
            step = step.idempotent(yes);
        }
        step
    }

    /// Runs one call as a run of one step on this thread; `attempt` makes
    /// each attempt (it gets the run's cancel flag), lent to the step, so it
    /// needs to be neither `Send` nor `'static`.
    pub(super) fn run_step(
        &self,
        args: &Value,
        mut attempt: impl FnMut(&Call, &AtomicBool) -> Outcome,
    ) -> Result<Finished, RuntimeError> {
        let step = self.step(args);
        let mut run = self.runtime.run_of_one_step(&self.run_id())?;
        let cancel = run.cancel_flag();
        let mut call = |call: &Call| attempt(call, &cancel);
        let lent = Lent {
            call: &mut call,
            sleep: None,
            decide: None,
        };
        // The run, its step and (when the step ends ok) its end.
        let report = run.step_then_end(&step, lent)?;
        let decision = run.last_decision().map(str::to_owned);
        Ok(Finished { report, decision })
    }

    /// The same, awaited on the runtime's async driver (no thread of its
    /// own); `attempt` makes each attempt (it gets the run's cancel flag).
    #[cfg(feature = "tokio")]
    pub(super) async fn run_step_async<A, Fut>(
        self,
        args: Value,
        mut attempt: A,
    ) -> Result<Finished, RuntimeError>
    where
        A: FnMut(Call, Arc<AtomicBool>) -> Fut + Send,
        Fut: std::future::Future<Output = Outcome> + Send,
    {
        let step = self.step(&args);
        let mut run = self.runtime.run_of_one_step(&self.run_id())?;
        let cancel = run.cancel_flag();
        let mut op = move |call: Call| attempt(call, Arc::clone(&cancel));
        // The run, its step and (when the step ends ok) its end.
        let report = match run.step_then_end_async(step, &mut op).await {
            Ok(report) => report,
            Err(e) => {
                let _ = run.end_async().await;
                return Err(e);
            }
        };
        let decision = run.last_decision().map(str::to_owned);
        run.end_async().await?;
        Ok(Finished { report, decision })
    }

    /// What the caller gets: the value of the attempt that succeeded, or
    /// the step's failure (the decision, the envelope for the model, the
    /// last error).
    pub(super) fn finish<T, E>(
        &self,
        finished: Finished,
        last: Option<Result<T, E>>,
    ) -> Result<T, DoorError<E>> {
        let Finished { report, decision } = finished;
        if report.outcome == "ok" {
            return match last {
                Some(Ok(value)) => Ok(value),
                _ => Err(DoorError::AlreadyDone(report.result.unwrap_or(Value::Null))),
            };
        }
        let envelope = report
            .envelope
            .clone()
            .unwrap_or_else(|| json!({"code": format!("runtime.{}", report.outcome)}));
        let decision = decision
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .filter(|d| d["action"] != "retry" && d.get("envelope").is_some())
            .unwrap_or_else(|| {
                json!({"action": report.outcome, "attempt": 0, "reason": report.outcome,
                       "envelope": envelope})
            });
        let for_model = match report.rendered {
            Some(rendered) => rendered,
            None => self.render(&envelope)?,
        };
        Err(DoorError::Stopped {
            outcome: report.outcome,
            decision,
            for_model,
            cause: last.and_then(Result::err),
        })
    }

    /// The envelope rendered `model-tool-result` by the door's policy.
    fn render(&self, envelope: &Value) -> Result<Value, RuntimeError> {
        let text =
            self.policy
                .render_json(&envelope.to_string(), RenderFormat::ModelToolResult, "")?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// Hands a value to the component as a response observation, or not.
pub(super) type CheckFn<T> = Arc<dyn Fn(&T) -> Option<String> + Send + Sync>;
/// Makes an observation of an error.
pub(super) type ObserveFn<E> = Arc<dyn Fn(&E) -> String + Send + Sync>;

/// The shared options of one call: its arguments, and how its results are
/// read. `Arc`s so that the blocking and async paths share them.
pub(super) struct Reading<T, E> {
    pub(super) args: Value,
    pub(super) check: CheckFn<T>,
    pub(super) observe: ObserveFn<E>,
}

impl<T: 'static, E: std::fmt::Display + 'static> Default for Reading<T, E> {
    fn default() -> Self {
        Reading {
            args: Value::Null,
            check: Arc::new(|_| None),
            observe: Arc::new(default_observation::<E>),
        }
    }
}
