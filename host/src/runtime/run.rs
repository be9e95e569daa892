//! A run: drives the loop component, carries out its effects, nothing more.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::Value;

use super::Runtime;
use super::driver::{Ctx, Lane, Lent, ToolCall, ToolSet, Undo, Work, drive};
use super::effects::input;
use super::step::{Call, Outcome, Step};
use super::telemetry::{LaneSpan, RunTel};
use crate::Error;
use crate::component::gen_::runtime::typed::{FanoutSpec, FirstStep, Input, InputKind, RunStart};
use crate::store::StoreError;

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
    tel: RunTel,
    started_ms: u64,
    dead_letter: Option<u64>,
    /// The policy's last decision in the run's own lane (JSON text).
    decision: Option<String>,
    calls: AtomicU64,
    kill_after_calls: Option<u64>,
    /// The `run` input, not sent yet: a run of one step (a door's call, a
    /// retry) sends it with its step, in one `advance` ([`Run::start_with_step`]).
    start: Option<RunStart>,
}

impl<'r, 'a> Run<'r, 'a> {
    /// A new run. Its `run` input goes with its first step, carrying when
    /// the run started (docs/runtime.md, "Inputs"), except for the runtime's
    /// first run, sent at once so that a configuration the loop refuses
    /// fails here (and a run id it refuses, the empty one).
    pub(crate) fn start(rt: &'r Runtime, run_id: &str) -> Result<Self, RuntimeError> {
        if rt.config_checked.load(Ordering::Relaxed) && !run_id.is_empty() {
            return Run::start_later(rt, run_id, Some(rt.clock.now_ms()));
        }
        let mut run = Run::start_later(rt, run_id, None)?;
        if let Err(e) = run.started() {
            run.finished = Some("failed".to_owned()); // never started: nothing to end
            return Err(e);
        }
        rt.config_checked.store(true, Ordering::Relaxed);
        Ok(run)
    }

    /// A run whose `run` input is sent with its first step (the `run` input
    /// carrying it, docs/runtime.md, "Inputs"), or before any other input:
    /// [`Run::step_then_end`] starts the run, its one step and its end in
    /// the calls of the step alone.
    pub(crate) fn start_with_step(rt: &'r Runtime, run_id: &str) -> Result<Self, RuntimeError> {
        Run::start_later(rt, run_id, None)
    }

    /// A run whose `run` input is still to be sent, with `started_ms`.
    fn start_later(
        rt: &'r Runtime,
        run_id: &str,
        started_ms: Option<u64>,
    ) -> Result<Self, RuntimeError> {
        super::names::check("run_id", run_id)?;
        let mut run = Run::with_state(rt, run_id, String::new(), rt.clock.now_ms());
        run.start = Some(RunStart {
            run_id: run_id.to_owned(),
            seed: rt.seed,
            config: Some(rt.config.clone()),
            first: None,
            started_ms,
        });
        Ok(run)
    }

    /// Sends the `run` input alone when it is still to be sent.
    fn started(&mut self) -> Result<(), RuntimeError> {
        if let Some(start) = self.start.take() {
            let input = input(self.rt.clock.now_ms(), InputKind::Run(start));
            self.state = self.rt.looper.advance("", &input)?.state;
        }
        Ok(())
    }

    /// A run carried on from `state` (a journal entry's), started at `started_ms`.
    pub(crate) fn with_state(
        rt: &'r Runtime,
        run_id: &str,
        state: String,
        started_ms: u64,
    ) -> Self {
        Run {
            rt,
            state,
            undo: BTreeMap::new(),
            events: Vec::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            cancel_at_ms: None,
            finished: None,
            tel: RunTel::new(&rt.telemetry, run_id),
            started_ms,
            dead_letter: None,
            decision: None,
            calls: AtomicU64::new(0),
            kill_after_calls: None,
            start: None,
        }
    }

    /// A scenario's `kill_after_calls`: after its `n`-th call the run stops
    /// as if the process died (nothing fed back, never ended).
    pub(crate) fn kill_after_calls(&mut self, n: u64) {
        self.kill_after_calls = Some(n);
    }

    /// The sequence number of the last dead-letter record this run appended.
    pub(crate) fn dead_letter_seq(&self) -> Option<u64> {
        self.dead_letter
    }

    /// The policy's last decision in the run's own steps (JSON text, as the
    /// policy printed it).
    pub(crate) fn last_decision(&self) -> Option<&str> {
        self.decision.as_deref()
    }

    /// Feeds the `recover` input to a run carried on from a journal entry
    /// and drives it to its end; `step` answers the resumed operation's calls.
    pub(crate) fn recover(&mut self, tools: &dyn ToolSet) -> Result<StepReport, RuntimeError> {
        let input = input(self.rt.clock.now_ms(), InputKind::Recover);
        let tel = self.tel.lane(None, self.rt.clock.now_ms());
        self.drive(input, Work::Tools(ToolCall::new(tools)), tel)
    }

    /// Says the run is complete: the loop deletes its journal entry
    /// (`docs/durability.md`, "The `end` input"). A run that is never ended
    /// stays in the journal and `recover` rolls it back; dropping a `Run`
    /// ends it too (unless the thread is panicking). Ending a run that a step
    /// already finished (any outcome but `ok`) does nothing.
    pub fn end(mut self) -> Result<(), RuntimeError> {
        self.end_now()
    }

    fn end_now(&mut self) -> Result<(), RuntimeError> {
        if self.finished.is_none() {
            self.started()?;
        }
        let Some((input, tel)) = self.end_input() else {
            return Ok(());
        };
        let mut noop = Step::new("", "", |_: &Call| Outcome::Ok(Value::Null));
        self.drive(input, Work::Step(&mut noop), tel).map(|_| ())
    }

    /// The `end` input and its lane's spans, or `None` when the run already
    /// ended (then it is marked ended).
    fn end_input(&mut self) -> Option<(Input, super::telemetry::LaneTel)> {
        if self.finished.is_some() {
            return None;
        }
        self.finished = Some("completed".to_owned());
        let input = input(self.rt.clock.now_ms(), InputKind::End);
        Some((input, self.tel.lane(None, self.rt.clock.now_ms())))
    }

    /// The `step` input for `step` and its lane's spans; the `run` input
    /// carrying the step (with `end`) when the run is still to be started.
    fn step_input(
        &mut self,
        step: &Step<'a>,
        end: bool,
    ) -> Result<(Input, super::telemetry::LaneTel), RuntimeError> {
        step.check_names("step")?;
        let spec = step.spec("step")?;
        let kind = match self.start.take() {
            Some(start) => InputKind::Run(RunStart {
                first: Some(FirstStep { step: spec, end }),
                ..start
            }),
            None => InputKind::Step(spec),
        };
        let input = input(self.rt.clock.now_ms(), kind);
        let span = LaneSpan::Step(&step.id, &step.tool, step.target.as_deref());
        Ok((input, self.tel.lane(Some(span), self.rt.clock.now_ms())))
    }

    /// Every event so far, as the component's JSON text (docs/runtime.md, "Events").
    pub fn events(&self) -> &[String] {
        &self.events
    }

    /// The run's state as the loop last returned it (JSON text); empty
    /// before the run's first step when its `run` input goes with that step
    /// ([`Runtime::run`]).
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

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            rt: self.rt,
            cancel: &self.cancel,
            cancel_at_ms: self.cancel_at_ms,
            started_ms: self.started_ms,
            kill: self.kill_after_calls.map(|n| (&self.calls, n)),
        }
    }

    /// Runs a step to its end and reports how it ended. `Err` only when the
    /// loop, the policy or the store failed.
    pub fn step(&mut self, mut step: Step<'a>) -> Result<StepReport, RuntimeError> {
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        let (input, tel) = self.step_input(&step, false)?;
        let report = self.drive(input, Work::Step(&mut step), tel)?;
        if report.outcome == "ok"
            && let Some(undo) = step.compensate.take()
        {
            self.undo.insert(step.id.clone(), undo);
        }
        Ok(report)
    }

    /// Runs `step` to its end with lent parts, all called on this thread:
    /// `lent.call` makes its operation calls, `lent.sleep` and `lent.decide`
    /// (when given) sleep and decide in place of the runtime's clock and
    /// decider. The step's own operation is not called, and its checkpoint
    /// hook and compensation are not used (a `restore` escalates).
    pub(crate) fn step_lent<'l>(
        &mut self,
        step: &Step<'a>,
        lent: Lent<'l>,
    ) -> Result<StepReport, RuntimeError>
    where
        'a: 'l,
    {
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        let (input, tel) = self.step_input(step, false)?;
        self.drive(input, Work::Lent(lent), tel)
    }

    /// [`Run::step_lent`], then the run's end when the step ended `ok`
    /// (a run of one step). A run made by [`Run::start_with_step`] sends
    /// the `run` input carrying the step and `end`: the run, the step and
    /// its end in the calls of the step alone.
    pub(crate) fn step_then_end<'l>(
        &mut self,
        step: &Step<'a>,
        lent: Lent<'l>,
    ) -> Result<StepReport, RuntimeError>
    where
        'a: 'l,
    {
        if self.start.is_none() {
            let report = self.step_lent(step, lent)?;
            if report.outcome == "ok" {
                self.end_now()?;
            }
            return Ok(report);
        }
        let (input, tel) = self.step_input(step, true)?;
        let report = self.drive(input, Work::Lent(lent), tel)?;
        Ok(self.ended_with_step(report))
    }

    /// A step sent with `end` that ended `ok` ended the run too (`completed`).
    fn ended_with_step(&mut self, report: StepReport) -> StepReport {
        if report.outcome == "ok" {
            self.finished = Some("completed".to_owned());
        }
        report
    }

    /// Runs `branches` concurrently (each an ordinary step with its own
    /// target, fallbacks and compensation) and reports `ok` when at least
    /// `min_results` of them ended `ok`; `result` is then an array with each
    /// branch's result (null where it did not end `ok`). With fewer, the
    /// outcome is `failed` (`runtime.fanout.insufficient`), or the completed
    /// compensable steps are compensated and the fan-out dead-lettered.
    ///
    /// With a real clock each branch runs on its own thread; with a
    /// [virtual](super::Clock::is_virtual) one they run one after another,
    /// each from the fork's time, so a simulation reproduces exactly.
    pub fn fanout(
        &mut self,
        id: &str,
        min_results: u32,
        mut branches: Vec<Step<'a>>,
    ) -> Result<StepReport, RuntimeError> {
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        super::names::check("fanout.id", id)?;
        for b in &branches {
            b.check_names("fanout.branches[]")?;
        }
        self.started()?;
        let input = input(
            self.rt.clock.now_ms(),
            InputKind::Fanout(FanoutSpec {
                id: id.to_owned(),
                min_results,
                branches: branches
                    .iter()
                    .map(|b| b.spec("fanout.branches[]"))
                    .collect::<Result<_, _>>()?,
            }),
        );
        let span = LaneSpan::Fanout(id, min_results, branches.len());
        let tel = self.tel.lane(Some(span), self.rt.clock.now_ms());
        self.drive(input, Work::Branches(&mut branches), tel)
    }

    fn drive(
        &mut self,
        input: Input,
        work: Work<'_, 'a>,
        mut tel: super::telemetry::LaneTel,
    ) -> Result<StepReport, RuntimeError> {
        let (ctx, mut lane) = self.lane(&mut tel);
        let report = drive(ctx, &mut lane, input, work);
        let (dead_letter, decision) = (lane.dead_letter, lane.decision);
        self.lane_ended(dead_letter, decision, report)
    }

    /// The run's own lane, for a driver: what it reads (the runtime, the
    /// cancellation, the clock's origin) and what it writes (the state, the
    /// events, the compensations, the lane's spans).
    fn lane<'s>(&'s mut self, tel: &'s mut super::telemetry::LaneTel) -> (Ctx<'s>, Lane<'s, 'a>) {
        let ctx = Ctx {
            rt: self.rt,
            cancel: &self.cancel,
            cancel_at_ms: self.cancel_at_ms,
            started_ms: self.started_ms,
            kill: self.kill_after_calls.map(|n| (&self.calls, n)),
        };
        let lane = Lane {
            state: &mut self.state,
            events: &mut self.events,
            undo: Some(&mut self.undo),
            tel,
            dead_letter: None,
            decision: None,
        };
        (ctx, lane)
    }

    /// What a driven lane leaves the run: its last dead-letter record and
    /// decision, and whether the run finished.
    fn lane_ended(
        &mut self,
        dead_letter: Option<u64>,
        decision: Option<String>,
        report: Result<StepReport, RuntimeError>,
    ) -> Result<StepReport, RuntimeError> {
        if let Some(seq) = dead_letter {
            self.dead_letter = Some(seq);
        }
        if decision.is_some() {
            self.decision = decision;
        }
        let report = report?;
        if report.run_finished {
            self.finished = Some(report.outcome.clone());
        }
        Ok(report)
    }

    /// Cancel between steps: runs the compensations of the completed steps
    /// now (in reverse order) and reports `cancelled`.
    pub fn cancel(&mut self) -> Result<StepReport, RuntimeError> {
        self.cancel.store(true, Ordering::SeqCst);
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        self.started()?;
        let mut noop = Step::new("", "", |_: &Call| Outcome::Ok(Value::Null));
        let input = self.ctx().cancel_input();
        let tel = self.tel.lane(None, self.rt.clock.now_ms());
        self.drive(input, Work::Step(&mut noop), tel)
    }
}

/// The async twins of [`Run::step`] and [`Run::end`] (the async driver:
/// the operation is awaited, sleeps and blocking store work too).
#[cfg(feature = "tokio")]
impl<'a> Run<'_, 'a> {
    /// Runs `step` to its end with `op` making its operation calls (the
    /// step's own operation is not called; a step with a checkpoint hook or
    /// a compensation is for [`Run::step`]).
    pub(crate) async fn step_async<F, Fut>(
        &mut self,
        step: Step<'a>,
        op: &mut F,
    ) -> Result<StepReport, RuntimeError>
    where
        F: FnMut(Call) -> Fut + Send,
        Fut: std::future::Future<Output = Outcome> + Send,
    {
        if let Some(outcome) = &self.finished {
            return Ok(StepReport::after_the_end(outcome));
        }
        let (input, tel) = self.step_input(&step, false)?;
        self.drive_async(input, op, tel).await
    }

    /// [`Run::step_then_end`], awaited.
    pub(crate) async fn step_then_end_async<F, Fut>(
        &mut self,
        step: Step<'a>,
        op: &mut F,
    ) -> Result<StepReport, RuntimeError>
    where
        F: FnMut(Call) -> Fut + Send,
        Fut: std::future::Future<Output = Outcome> + Send,
    {
        if self.start.is_none() {
            let report = self.step_async(step, op).await?;
            if report.outcome == "ok" {
                self.end_async_now().await?;
            }
            return Ok(report);
        }
        let (input, tel) = self.step_input(&step, true)?;
        let report = self.drive_async(input, op, tel).await?;
        Ok(self.ended_with_step(report))
    }

    /// [`Run::end`], awaited.
    pub(crate) async fn end_async(mut self) -> Result<(), RuntimeError> {
        self.end_async_now().await
    }

    async fn end_async_now(&mut self) -> Result<(), RuntimeError> {
        if self.finished.is_none() {
            self.started()?;
        }
        let Some((input, tel)) = self.end_input() else {
            return Ok(());
        };
        let mut noop = |_: Call| std::future::ready(Outcome::Ok(Value::Null));
        self.drive_async(input, &mut noop, tel).await.map(|_| ())
    }

    async fn drive_async<F, Fut>(
        &mut self,
        input: Input,
        op: &mut F,
        mut tel: super::telemetry::LaneTel,
    ) -> Result<StepReport, RuntimeError>
    where
        F: FnMut(Call) -> Fut + Send,
        Fut: std::future::Future<Output = Outcome> + Send,
    {
        let (ctx, mut lane) = self.lane(&mut tel);
        let report = super::driver_async::drive(ctx, &mut lane, input, op).await;
        let (dead_letter, decision) = (lane.dead_letter, lane.decision);
        self.lane_ended(dead_letter, decision, report)
    }
}

impl Drop for Run<'_, '_> {
    /// Ends the run (see [`Run::end`]) unless the thread is panicking: a
    /// panic mid-run leaves it in the journal for `recover`. An error here
    /// is dropped with it (call [`Run::end`] to see it).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self.end_now();
        }
    }
}
