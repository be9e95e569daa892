//! The blocking driver: feeds the loop, carries out its effects on this
//! thread, answers the last one.
//!
//! One function drives a *lane*: the run's own steps, or one branch of a
//! fan-out (its own state and events, run on its own thread when the clock
//! is real). Nothing here decides anything: every choice is in the effects,
//! and what each effect means is in `effects.rs`, shared with the async
//! driver (`driver_async.rs`); this file only performs the store work,
//! sleeps, calls, restores and forks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::Runtime;
use super::effects::{
    KILLED, Need, bad_effect, called, compensate, input, killed, plan, restored, slept, stored,
};
pub(super) use super::effects::{call_result, json_str};
use super::run::{RuntimeError, StepReport};
use super::step::{Call, Outcome, Step};
use super::telemetry::LaneTel;
use crate::component::gen_::runtime::typed::{Branch, CallResult, Effect, Input, InputKind};
use crate::retry::Decide;

/// The undo of a completed step, by step id.
pub(super) type Undo<'a> = Box<dyn FnMut(&Call) -> Outcome + Send + 'a>;

/// What every lane of a run shares.
#[derive(Clone, Copy)]
pub(super) struct Ctx<'r> {
    pub(super) rt: &'r Runtime,
    pub(super) cancel: &'r AtomicBool,
    pub(super) cancel_at_ms: Option<u64>,
    /// When the run started (Unix ms): `t_ms` of the runtime's own events.
    pub(super) started_ms: u64,
    /// A scenario's `kill_after_calls`: the calls so far and N.
    pub(super) kill: Option<(&'r AtomicU64, u64)>,
}

impl Ctx<'_> {
    pub(super) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
            || self
                .cancel_at_ms
                .is_some_and(|t| self.rt.clock.now_ms() >= t)
    }

    pub(super) fn cancel_input(&self) -> Input {
        input(self.rt.clock.now_ms(), InputKind::Cancel)
    }
}

/// One lane's own state: the loop's state text, its events, and (the run's
/// lane only) the undos of completed steps.
pub(super) struct Lane<'l, 'a> {
    pub(super) state: &'l mut String,
    pub(super) events: &'l mut Vec<String>,
    pub(super) undo: Option<&'l mut BTreeMap<String, Undo<'a>>>,
    /// The lane's spans (telemetry observes; it never decides).
    pub(super) tel: &'l mut LaneTel,
    /// The sequence number of the last dead-letter record this lane appended.
    pub(super) dead_letter: Option<u64>,
    /// The last decision of the policy in this lane (JSON text).
    pub(super) decision: Option<String>,
}

/// The tools of a recovered run (`recover`): a call is answered by the tool
/// the `call` effect names, a `restore` by that tool's checkpoint hook.
pub(crate) trait ToolSet: Sync {
    /// Carries out `call` (an operation or a compensation) of `tool`: what
    /// it returned, or that there is nothing to call (`unknown-tool`,
    /// `no-compensation`: the loop makes the failure).
    fn call(&self, tool: &str, call: &Call) -> CallResult;
    /// Runs `tool`'s checkpoint hook: false when it has none or it failed.
    fn checkpoint(&self, tool: &str) -> bool;
}

/// A recovered run's tools, and the tool each step's calls named so far (a
/// `restore` effect names only the step).
pub(super) struct ToolCall<'s> {
    set: &'s dyn ToolSet,
    by_step: BTreeMap<String, String>,
}

impl<'s> ToolCall<'s> {
    pub(super) fn new(set: &'s dyn ToolSet) -> Self {
        ToolCall {
            set,
            by_step: BTreeMap::new(),
        }
    }
}

/// The parts of one step lent for one drive and called on the driving
/// thread, so none of them needs to be `Send` or `'static`.
pub(crate) struct Lent<'s> {
    /// Makes the step's operation calls (not its compensations).
    pub(crate) call: &'s mut dyn FnMut(&Call) -> Outcome,
    /// Sleeps in place of the runtime's clock; `None`: the clock sleeps.
    pub(crate) sleep: Option<&'s mut dyn FnMut(u64)>,
    /// Decides in place of the runtime's decider; `None`: the runtime's.
    pub(crate) decide: Option<&'s dyn Decide>,
}

/// What the lane runs: one step, one step with lent parts, the branches of
/// a fan-out, or a recovered run's calls (by tool).
pub(super) enum Work<'s, 'a> {
    Step(&'s mut Step<'a>),
    Lent(Lent<'s>),
    Branches(&'s mut [Step<'a>]),
    Tools(ToolCall<'s>),
}

/// Feeds `input`, carries out the effects, answers the last one, until `finish`.
pub(super) fn drive<'a>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, 'a>,
    input: Input,
    work: Work<'_, 'a>,
) -> Result<StepReport, RuntimeError> {
    let out = drive_lane(ctx, lane, input, work);
    // A lane that ended without its `finish` (an error, a scenario's kill)
    // still ends its open spans, on the runtime's clock.
    if !matches!(&out, Ok(report) if report.outcome != KILLED) {
        lane.tel.abandon(ctx.rt.clock.now_ms());
    }
    out
}

/// The blocking driver: every need is performed on this thread.
fn drive_lane<'a>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, 'a>,
    mut input: Input,
    mut work: Work<'_, 'a>,
) -> Result<StepReport, RuntimeError> {
    let rt = ctx.rt;
    let lent_decider = match &work {
        Work::Lent(lent) => lent.decide,
        _ => None,
    };
    loop {
        let adv = rt.looper.advance(lane.state, &input)?;
        *lane.state = adv.state;
        let mut next = None;
        // A step sent with `end`: its finish, then the run's end in the same
        // batch (the journal delete, a finish of the run): the step's report.
        let mut step_done: Option<StepReport> = None;
        let last = adv.effects.len().saturating_sub(1);
        for (i, fx) in adv.effects.iter().enumerate() {
            if step_done.is_some() && matches!(fx, Effect::Finish(_)) {
                break;
            }
            match plan(ctx, lane, lent_decider, fx, &mut next)? {
                Need::Done => {}
                Need::Finish(report) if i < last => step_done = Some(report),
                Need::Finish(report) => return Ok(report),
                Need::Store(op) => {
                    if stored(ctx, lane, op.run(&*rt.store)?, &mut next)? {
                        break;
                    }
                }
                Need::Log(line) => {
                    if let Some((log, _)) = &rt.decision_log {
                        log.write(&line);
                    }
                }
                Need::Sleep { ms, cut } => {
                    match &mut work {
                        Work::Lent(Lent {
                            sleep: Some(sleep), ..
                        }) => sleep(ms),
                        _ => rt.clock.sleep_ms(ms),
                    }
                    next = Some(slept(ctx, cut));
                }
                Need::Restore { step } => {
                    let ok = restore(&mut work, step);
                    next = Some(restored(ctx, ok));
                }
                Need::Call {
                    call,
                    tool,
                    started,
                } => {
                    let outcome = match (call.kind == "compensation", &mut work) {
                        (_, Work::Tools(tools)) => {
                            tools.by_step.insert(call.step.clone(), tool.to_owned());
                            tools.set.call(tool, &call)
                        }
                        (true, _) => compensate(lane, &call),
                        (false, Work::Step(step)) if step.unknown_tool => CallResult::UnknownTool,
                        (false, Work::Step(step)) => call_result((step.operation)(&call)),
                        (false, Work::Lent(lent)) => call_result((lent.call)(&call)),
                        (false, Work::Branches(_)) => {
                            return Err(bad_effect("an operation call in a fan-out's own lane"));
                        }
                    };
                    if let Some(report) = called(ctx, lane, started, outcome, &mut next) {
                        return Ok(report);
                    }
                }
                Need::Fork(forks) => {
                    let Work::Branches(branches) = &mut work else {
                        return Err(bad_effect("fork outside a fan-out"));
                    };
                    if let Some(report) = fork(ctx, lane, forks, branches, &mut next)? {
                        return Ok(report);
                    }
                }
            }
        }
        if let Some(report) = step_done {
            return Ok(report);
        }
        input = next.ok_or_else(|| bad_effect("a batch without an effect to answer"))?;
    }
}

/// Runs the checkpoint hook of `step` (a restore): false when it has none or
/// it failed.
fn restore(work: &mut Work<'_, '_>, step: &str) -> bool {
    match work {
        Work::Step(step) => step.checkpoint.as_mut().is_some_and(|hook| hook()),
        Work::Lent(_) => false,
        Work::Tools(tools) => tools
            .by_step
            .get(step)
            .is_some_and(|tool| tools.set.checkpoint(tool)),
        Work::Branches(branches) => branches
            .iter_mut()
            .find(|b| b.id == step)
            .and_then(|b| b.checkpoint.as_mut())
            .is_some_and(|hook| hook()),
    }
}

/// Drives a fork's branches and joins them; `Some` when a scenario killed
/// the run in one of them.
fn fork<'a>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, 'a>,
    forks: &[Branch],
    branches: &mut [Step<'a>],
    next: &mut Option<Input>,
) -> Result<Option<StepReport>, RuntimeError> {
    if forks.len() != branches.len() {
        return Err(bad_effect("fork with a different number of branches"));
    }
    // The fan-out's span exists before its branches' spans start under it.
    lane.tel.flush();
    let lanes = run_branches(ctx, forks, branches, lane.tel)?;
    if lanes.iter().any(|l| l.2.outcome == KILLED) {
        for (_, events, _) in lanes {
            lane.events.extend(events);
        }
        return Ok(Some(killed()));
    }
    let mut states = Vec::with_capacity(lanes.len());
    for ((state, events, report), step) in lanes.into_iter().zip(branches.iter_mut()) {
        lane.events.extend(events);
        if report.outcome == "ok"
            && let (Some(u), Some(undo)) = (step.compensate.take(), lane.undo.as_deref_mut())
        {
            undo.insert(step.id.clone(), u);
        }
        states.push(state);
    }
    *next = Some(input(ctx.rt.clock.now_ms(), InputKind::Joined(states)));
    Ok(None)
}

/// A branch's final state, its events and its report.
type BranchEnd = (String, Vec<String>, StepReport);

/// Drives every branch of a fork to its `finish`: on threads with a real
/// clock; one after another with a virtual clock, each from the fork's
/// time, the clock then set to the latest end (so simulations reproduce).
fn run_branches<'a>(
    ctx: Ctx<'_>,
    forks: &[Branch],
    branches: &mut [Step<'a>],
    tel: &LaneTel,
) -> Result<Vec<BranchEnd>, RuntimeError> {
    let clock = &*ctx.rt.clock;
    if clock.is_virtual() {
        let t0 = clock.now_ms();
        let mut end = t0;
        let mut out = Vec::with_capacity(forks.len());
        for (fork, step) in forks.iter().zip(branches.iter_mut()) {
            clock.set_ms(t0);
            let lane = branch(ctx, fork, step, tel)?;
            let killed = lane.2.outcome == KILLED;
            out.push(lane);
            end = end.max(clock.now_ms());
            if killed {
                break;
            }
        }
        clock.set_ms(end);
        return Ok(out);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = forks
            .iter()
            .zip(branches.iter_mut())
            .map(|(fork, step)| scope.spawn(move || branch(ctx, fork, step, tel)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

fn branch<'a>(
    ctx: Ctx<'_>,
    fork: &Branch,
    step: &mut Step<'a>,
    tel: &LaneTel,
) -> Result<BranchEnd, RuntimeError> {
    let spec = &fork.step;
    let now = ctx.rt.clock.now_ms();
    let mut tel = tel.branch(&spec.id, &spec.tool, spec.target.as_deref(), now);
    let mut state = fork.state.clone();
    let mut events = Vec::new();
    let input = input(now, InputKind::Step(spec.clone()));
    let mut lane = Lane {
        state: &mut state,
        events: &mut events,
        undo: None,
        tel: &mut tel,
        dead_letter: None,
        decision: None,
    };
    let report = drive(ctx, &mut lane, input, Work::Step(step))?;
    Ok((state, events, report))
}
