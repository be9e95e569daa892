//! The async driver: the blocking driver's twin for tokio, with the same
//! loop and the same effects (`effects.rs`). Only how a need is performed
//! differs: the operation is awaited, a sleep is `tokio::time::sleep` (the
//! clock's own, instant, when it is virtual), the work of a store that may
//! block and a decision log's file writes run on tokio's blocking pool, and
//! the component's calls (the loop, the policy) run inline: they take
//! microseconds. No thread per call.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use super::driver::{Ctx, Lane};
use super::effects::{
    KILLED, Need, StoreOp, Stored, bad_effect, call_result, called, compensate, plan, restored,
    slept, stored,
};
use super::run::{RuntimeError, StepReport};
use super::step::{Call, Outcome};
use crate::component::gen_::runtime::typed::{Effect, Input};
use crate::store::{StoreError, StoreErrorKind};

/// Feeds `input`, carries out the effects, answers the last one, until
/// `finish`; `op` makes the operation's calls.
pub(super) async fn drive<F, Fut>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    input: Input,
    op: &mut F,
) -> Result<StepReport, RuntimeError>
where
    F: FnMut(Call) -> Fut + Send,
    Fut: Future<Output = Outcome> + Send,
{
    let out = drive_lane(ctx, lane, input, op).await;
    // A lane that ended without its `finish` still ends its open spans.
    if !matches!(&out, Ok(report) if report.outcome != KILLED) {
        lane.tel.abandon(ctx.rt.clock.now_ms());
    }
    out
}

async fn drive_lane<F, Fut>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    mut input: Input,
    op: &mut F,
) -> Result<StepReport, RuntimeError>
where
    F: FnMut(Call) -> Fut + Send,
    Fut: Future<Output = Outcome> + Send,
{
    let rt = ctx.rt;
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
            match plan(ctx, lane, None, fx, &mut next)? {
                Need::Done => {}
                Need::Finish(report) if i < last => step_done = Some(report),
                Need::Finish(report) => return Ok(report),
                Need::Store(work) => {
                    if stored(ctx, lane, store(rt, work).await?, &mut next)? {
                        break;
                    }
                }
                Need::Log(line) => log(rt, line).await,
                Need::Sleep { ms, cut } => {
                    sleep(rt, ms).await;
                    next = Some(slept(ctx, cut));
                }
                // An awaited step has no checkpoint hook.
                Need::Restore { .. } => next = Some(restored(ctx, false)),
                Need::Call { call, started, .. } => {
                    let outcome = if call.kind == "compensation" {
                        compensate(lane, &call)
                    } else {
                        call_result(op(call.clone()).await)
                    };
                    if let Some(report) = called(ctx, lane, started, outcome, &mut next) {
                        return Ok(report);
                    }
                }
                Need::Fork(_) => return Err(bad_effect("a fork in an awaited step")),
            }
        }
        if let Some(report) = step_done {
            return Ok(report);
        }
        input = next.ok_or_else(|| bad_effect("a batch without an effect to answer"))?;
    }
}

/// Store work: inline for a store that never blocks, else on tokio's
/// blocking pool.
async fn store(rt: &Runtime, work: StoreOp) -> Result<Stored, StoreError> {
    if !rt.store.may_block() {
        return work.run(&*rt.store);
    }
    let store = Arc::clone(&rt.store);
    match tokio::task::spawn_blocking(move || work.run(&*store)).await {
        Ok(done) => done,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(StoreError::new(
            StoreErrorKind::Unavailable,
            "the store call was cancelled: the tokio runtime is shutting down; retry the run",
        )),
    }
}

/// A decision log's line, written to its file on tokio's blocking pool.
async fn log(rt: &Runtime, line: String) {
    if let Some((log, _)) = &rt.decision_log {
        let log = log.clone();
        // A write that fails is counted by the log itself; a cancelled one
        // (the runtime shutting down) is lost with it.
        let _ = tokio::task::spawn_blocking(move || log.write(&line)).await;
    }
}

/// A retry sleep: on the clock when it is virtual (instant), else tokio's.
async fn sleep(rt: &Runtime, ms: u64) {
    if rt.clock.is_virtual() {
        rt.clock.sleep_ms(ms);
    } else {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
