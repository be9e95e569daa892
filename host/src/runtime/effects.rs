//! The loop's effects, read and answered the same way by every driver.
//!
//! A driver feeds the loop and hands each effect of a batch to [`plan`]. The
//! effects that need no I/O (`emit`, `decide`, `log`, `finish`, a cancelled
//! `sleep` or `call`) are carried out there; the others come back as a
//! [`Need`]: store work ([`StoreOp`]), a decision log's file write, a sleep,
//! a call, a restore or a fork.
//! The blocking driver performs a need on its thread, the async one awaits
//! it; both answer it with [`stored`], [`slept`], [`called`] or
//! [`restored`], so the meaning of every effect is written once, here.

use std::sync::atomic::Ordering;

use serde_json::Value;

use super::driver::{Ctx, Lane};
use super::run::{RuntimeError, StepReport};
use super::step::{Call, Outcome};
use crate::Error;
use crate::component::gen_::runtime::typed::{
    Branch, CallEnded, CallResult, CallRole, Claimed, Effect, Input, InputKind, StepOutcome,
    StoredValue, Swapped,
};
use crate::retry::Decide;
use crate::store::{Cas, Store, StoreError, StoreErrorKind};

/// The report of a run a scenario killed (`kill_after_calls`).
pub(super) const KILLED: &str = "killed";

pub(super) fn killed() -> StepReport {
    StepReport {
        outcome: KILLED.to_owned(),
        run_finished: true,
        result: None,
        envelope: None,
        rendered: None,
        token: None,
    }
}

/// An input at `now_ms`.
pub(super) fn input(now_ms: u64, kind: InputKind) -> Input {
    Input { now_ms, kind }
}

pub(super) fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

pub(super) fn bad_effect(what: &str) -> RuntimeError {
    RuntimeError::Policy(Error::new(
        crate::ErrorKind::InvalidOutput,
        format!(
            "the recovery loop emitted a malformed effect ({what}); this is a bug, please report it"
        ),
    ))
}

/// What an effect needs of its driver after [`plan`].
pub(super) enum Need<'f> {
    /// Nothing more: the effect was carried out (and `next` set if it answers).
    Done,
    /// The lane ended (`finish`).
    Finish(StepReport),
    /// Store work: run it against the runtime's store, answer with [`stored`].
    Store(StoreOp),
    /// Write this line to the decision log's file (nothing answers it).
    Log(String),
    /// Sleep `ms` on the runtime's clock, answer with [`slept`]; `cut` when
    /// the sleep ends at the run's cancel time.
    Sleep { ms: u64, cut: bool },
    /// Make this call (an operation, a fallback or a compensation) of
    /// `tool`, answer with [`called`]; `started` is the clock's time.
    Call {
        call: Call,
        tool: &'f str,
        started: u64,
    },
    /// Run the checkpoint hook of `step`, answer with [`restored`].
    Restore { step: &'f str },
    /// Drive these branches to their `finish` (the blocking driver only).
    Fork(&'f [Branch]),
}

/// A JSON text member of an effect as a value (an envelope, a result).
fn value_of(text: &Option<String>) -> Result<Option<Value>, RuntimeError> {
    text.as_deref()
        .map(|t| serde_json::from_str(t).map_err(|_| bad_effect(t)))
        .transpose()
}

/// An outcome's name in reports and spans (`awaiting_input`, ...).
pub(super) fn outcome_name(outcome: StepOutcome) -> &'static str {
    match outcome {
        StepOutcome::Ok => "ok",
        StepOutcome::Failed => "failed",
        StepOutcome::Escalated => "escalated",
        StepOutcome::Replan => "replan",
        StepOutcome::AwaitingInput => "awaiting_input",
        StepOutcome::DeadLettered => "dead_lettered",
        StepOutcome::Cancelled => "cancelled",
        StepOutcome::InFlight => "in_flight",
        StepOutcome::Interrupted => "interrupted",
        StepOutcome::Completed => "completed",
    }
}

/// Carries out an effect that needs no I/O, or says what it needs;
/// `lent` decides in place of the runtime's decider ([`Lent`](super::driver::Lent)).
pub(super) fn plan<'f>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    lent: Option<&dyn Decide>,
    fx: &'f Effect,
    next: &mut Option<Input>,
) -> Result<Need<'f>, RuntimeError> {
    let rt = ctx.rt;
    let need = match fx {
        Effect::Emit(event) => {
            if let Some(f) = &rt.on_event {
                f(event);
            }
            lane.tel.event(event, rt.clock.now_ms());
            lane.events.push(event.clone());
            Need::Done
        }
        Effect::Read(keys) => Need::Store(StoreOp::Read {
            keys: keys.clone(),
            now: rt.clock.now_ms(),
            or_stop: false,
        }),
        Effect::ReadOrStop(keys) => Need::Store(StoreOp::Read {
            keys: keys.clone(),
            now: rt.clock.now_ms(),
            or_stop: true,
        }),
        Effect::Write(w) => Need::Store(StoreOp::Write {
            key: w.key.clone(),
            value: w.value.clone(),
            ttl_ms: w.ttl_ms,
            now: rt.clock.now_ms(),
        }),
        Effect::Claim(w) => Need::Store(StoreOp::Swap {
            key: w.key.clone(),
            expected: None,
            value: w.value.clone(),
            ttl_ms: w.ttl_ms,
            now: rt.clock.now_ms(),
            claim: true,
        }),
        Effect::Swap(w) => Need::Store(StoreOp::Swap {
            key: w.key.clone(),
            expected: w.expected,
            value: w.value.clone(),
            ttl_ms: w.ttl_ms,
            now: rt.clock.now_ms(),
            claim: false,
        }),
        Effect::Delete(key) => Need::Store(StoreOp::Delete { key: key.clone() }),
        Effect::Append(a) => {
            let dead_letter = a.stream == super::scenario::DEAD_LETTER_STREAM;
            let threshold = a.depth_threshold.or(rt.depth_threshold);
            Need::Store(StoreOp::Append {
                stream: a.stream.clone(),
                record: a.record.clone(),
                now: rt.clock.now_ms(),
                dead_letter,
                count_depth: dead_letter && (threshold.is_some() || rt.telemetry.is_on()),
                threshold,
            })
        }
        Effect::Decide(d) => {
            let decision = match lent {
                Some(lent) => lent.decide_json(&d.observation, &d.context)?,
                None => rt.decider.decide_json(&d.observation, &d.context)?,
            };
            lane.tel.decided(&decision);
            // The decision log's `policy`: who decided, when the runtime knows.
            let policy = rt.decision_log.as_ref().and_then(|(_, p)| p.identity());
            *next = Some(input(
                rt.clock.now_ms(),
                InputKind::Decision(crate::component::gen_::runtime::typed::Decision {
                    decision: decision.clone(),
                    policy,
                }),
            ));
            lane.decision = Some(decision);
            Need::Done
        }
        Effect::Log(line) => match &rt.decision_log {
            Some((log, _)) if log.is_file() => Need::Log(line.clone()),
            Some((log, _)) => {
                log.write(line);
                Need::Done
            }
            None => Need::Done,
        },
        Effect::Sleep(sleep) => {
            let (ms, cancellable) = (sleep.ms, sleep.cancellable);
            if cancellable && ctx.cancelled() {
                *next = Some(ctx.cancel_input());
                Need::Done
            } else if let Some(at) = ctx
                .cancel_at_ms
                .filter(|at| cancellable && rt.clock.now_ms().saturating_add(ms) > *at)
            {
                Need::Sleep {
                    ms: at.saturating_sub(rt.clock.now_ms()),
                    cut: true,
                }
            } else {
                Need::Sleep { ms, cut: false }
            }
        }
        Effect::Restore(step) => Need::Restore { step },
        Effect::Call(c) => {
            let call = Call {
                kind: match c.role {
                    CallRole::Operation => "operation",
                    CallRole::Fallback => "fallback",
                    CallRole::Compensation => "compensation",
                }
                .to_owned(),
                step: c.step.clone(),
                target: c.target.clone(),
                key: c.key.clone(),
                attempt: c.attempt,
                timeout_ms: c.timeout_ms,
            };
            if c.role != CallRole::Compensation && ctx.cancelled() {
                *next = Some(ctx.cancel_input());
                return Ok(Need::Done);
            }
            let started = rt.clock.now_ms();
            lane.tel.call_start(&call, started);
            Need::Call {
                call,
                tool: &c.tool,
                started,
            }
        }
        Effect::Fork(f) => Need::Fork(&f.branches),
        Effect::Finish(f) => {
            let outcome = outcome_name(f.outcome);
            let envelope = value_of(&f.envelope)?;
            lane.tel
                .finish(f.outcome, f.envelope.as_deref(), rt.clock.now_ms());
            Need::Finish(StepReport {
                outcome: outcome.to_owned(),
                run_finished: f.run_finished,
                result: value_of(&f.result)?,
                envelope,
                rendered: value_of(&f.rendered)?,
                token: f.token.clone(),
            })
        }
    };
    Ok(need)
}

/// The store work of one effect, owned, so that a driver can run it on
/// another thread (`spawn_blocking`).
pub(super) enum StoreOp {
    /// `read`, or `read-or-stop` (`or_stop`: nothing answers it when every
    /// key is absent; otherwise its answer ends the batch).
    Read {
        keys: Vec<String>,
        now: u64,
        or_stop: bool,
    },
    Write {
        key: String,
        value: String,
        ttl_ms: Option<u64>,
        now: u64,
    },
    /// `claim` (`expected` none) or `swap`.
    Swap {
        key: String,
        expected: Option<u64>,
        value: String,
        ttl_ms: Option<u64>,
        now: u64,
        claim: bool,
    },
    Delete {
        key: String,
    },
    /// An append; to the dead-letter stream, the queue's depth is read after
    /// it when `count_depth` (a threshold to check, or telemetry's gauge).
    Append {
        stream: String,
        record: String,
        now: u64,
        dead_letter: bool,
        count_depth: bool,
        threshold: Option<u64>,
    },
}

/// What store work gave back.
pub(super) enum Stored {
    /// The input that answers the effect, if it is answered.
    Answer(Option<Input>),
    /// The input that answers the effect and ends its batch.
    Stop(Input),
    /// A record was appended as `seq`.
    Appended {
        stream: String,
        record: String,
        seq: u64,
        dead_letter: bool,
        threshold: Option<u64>,
        /// The reads the depth is computed from (records, `closed`).
        depth: Option<Result<(u64, Option<String>), StoreError>>,
    },
}

impl StoreOp {
    /// Does the work against `store` (blocking, when the store blocks).
    pub(super) fn run(self, store: &dyn Store) -> Result<Stored, StoreError> {
        let answer = match self {
            StoreOp::Read { keys, now, or_stop } => {
                let mut values = Vec::with_capacity(keys.len());
                for key in keys {
                    let found = store.get(&key, now)?;
                    values.push(StoredValue {
                        key,
                        version: found.as_ref().map(|v| v.version),
                        value: found.map(|v| v.value),
                    });
                }
                let absent = values.iter().all(|v| v.value.is_none());
                match (or_stop, absent) {
                    (true, true) => None,
                    (true, false) => return Ok(Stored::Stop(input(now, InputKind::Read(values)))),
                    (false, _) => Some(input(now, InputKind::Read(values))),
                }
            }
            StoreOp::Write {
                key,
                value,
                ttl_ms,
                now,
            } => {
                put(store, &key, &value, ttl_ms, now)?;
                None
            }
            StoreOp::Swap {
                key,
                expected,
                value,
                ttl_ms,
                now,
                claim: true,
            } => {
                let claimed = match store.compare_and_set(&key, expected, &value, ttl_ms, now)? {
                    Cas::Written { .. } => Claimed {
                        ok: true,
                        current: None,
                    },
                    Cas::Conflict { current } => Claimed {
                        ok: false,
                        current: current.map(|v| v.value),
                    },
                };
                Some(input(now, InputKind::Claimed(claimed)))
            }
            StoreOp::Swap {
                key,
                expected,
                value,
                ttl_ms,
                now,
                claim: false,
            } => {
                let swapped = match store.compare_and_set(&key, expected, &value, ttl_ms, now)? {
                    Cas::Written { version } => Swapped {
                        ok: true,
                        current: None,
                        version: Some(version),
                    },
                    Cas::Conflict { current } => Swapped {
                        ok: false,
                        version: current.as_ref().map(|v| v.version),
                        current: current.map(|v| v.value),
                    },
                };
                Some(input(now, InputKind::Swapped(swapped)))
            }
            StoreOp::Delete { key } => {
                store.delete(&key)?;
                None
            }
            StoreOp::Append {
                stream,
                record,
                now,
                dead_letter,
                count_depth,
                threshold,
            } => {
                let seq = store.append(&stream, &record, now)?;
                let depth = count_depth.then(|| super::deadletters::depth_reads(store, now));
                return Ok(Stored::Appended {
                    stream,
                    record,
                    seq,
                    dead_letter,
                    threshold,
                    depth,
                });
            }
        };
        Ok(Stored::Answer(answer))
    }
}

/// Answers store work: sets `next`, or records an append (telemetry, the
/// dead-letter queue's depth and its `dead_letter_depth` event). True when
/// the answer ends the batch: a claim that failed, a `read-or-stop` that
/// found a value.
pub(super) fn stored(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    done: Stored,
    next: &mut Option<Input>,
) -> Result<bool, RuntimeError> {
    let rt = ctx.rt;
    match done {
        Stored::Answer(answer) => {
            // A claim that failed ends its batch: none of the effects after
            // it is carried out (runtime@0.3.0; the loop may put a step's
            // call in its claim's batch).
            let stop = matches!(
                &answer,
                Some(Input {
                    kind: InputKind::Claimed(Claimed { ok: false, .. }),
                    ..
                })
            );
            if answer.is_some() {
                *next = answer;
            }
            return Ok(stop);
        }
        Stored::Stop(answer) => {
            *next = Some(answer);
            return Ok(true);
        }
        Stored::Appended {
            stream,
            record,
            seq,
            dead_letter,
            threshold,
            depth,
        } => {
            lane.tel.appended(&stream, &record, rt.clock.now_ms());
            if !dead_letter {
                return Ok(false);
            }
            lane.dead_letter = Some(seq);
            // `t_ms`: the loop's, from the `dead_letter` event it emitted
            // with this append (the runtime never reads the state).
            let t_ms = lane
                .events
                .iter()
                .rev()
                .filter_map(|e| serde_json::from_str::<Value>(e).ok())
                .find(|e| e.get("event").and_then(Value::as_str) == Some("dead_letter"))
                .and_then(|e| e.get("t_ms").and_then(Value::as_u64))
                .unwrap_or_else(|| rt.clock.now_ms().saturating_sub(ctx.started_ms));
            let depth = match depth {
                Some(Ok((records, closed))) => Some(Ok(super::deadletters::depth_of(
                    rt,
                    records,
                    closed.as_deref(),
                )?)),
                Some(Err(e)) => Some(Err(e)),
                None => None,
            };
            // Telemetry never fails the operation it observes.
            if let Some(Ok(depth)) = &depth
                && rt.telemetry.is_on()
            {
                rt.telemetry.dead_letter_depth(*depth);
            }
            let (Some(threshold), Some(depth)) = (threshold, depth) else {
                return Ok(false);
            };
            if let Some(event) =
                super::deadletters::depth_event(rt, threshold, depth?, t_ms, seq, &record)?
            {
                if let Some(f) = &rt.on_event {
                    f(&event);
                }
                lane.tel.event(&event, rt.clock.now_ms());
                lane.events.push(event);
            }
        }
    }
    Ok(false)
}

/// The input after a sleep: `slept`, or the cancellation when the sleep was
/// cut at the run's cancel time.
pub(super) fn slept(ctx: Ctx<'_>, cut: bool) -> Input {
    if cut {
        ctx.cancel_input()
    } else {
        input(ctx.rt.clock.now_ms(), InputKind::Slept)
    }
}

/// The input after a restore: whether the hook restored.
pub(super) fn restored(ctx: Ctx<'_>, ok: bool) -> Input {
    input(ctx.rt.clock.now_ms(), InputKind::Restored(ok))
}

/// Answers a call: its span ends, a scenario's kill counts it, and `next`
/// is the attempt's result with how long it took (the loop judges the
/// timeout). `Some` when a scenario killed the run here.
pub(super) fn called(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    started: u64,
    result: CallResult,
    next: &mut Option<Input>,
) -> Option<StepReport> {
    let rt = ctx.rt;
    lane.tel.call_end(rt.clock.now_ms());
    if let Some((calls, n)) = ctx.kill
        && calls.fetch_add(1, Ordering::SeqCst).saturating_add(1) == n
    {
        return Some(killed());
    }
    // How long it took: the loop judges it against the call's timeout.
    let took_ms = Some(rt.clock.now_ms().saturating_sub(started));
    *next = Some(input(
        rt.clock.now_ms(),
        InputKind::Attempt(CallEnded { result, took_ms }),
    ));
    None
}

/// What a call returned, as the `attempt` input carries it.
pub(super) fn call_result(outcome: Outcome) -> CallResult {
    match outcome {
        Outcome::Ok(v) => CallResult::Ok(v.to_string()),
        Outcome::Failed(obs) => CallResult::Failed(obs),
        Outcome::Response(obs) => CallResult::Response(obs),
    }
}

/// A compensation call, answered by the lane's undo of its step; none
/// there is `no-compensation` (the loop makes the failure).
pub(super) fn compensate(lane: &mut Lane<'_, '_>, call: &Call) -> CallResult {
    match lane.undo.as_deref_mut().and_then(|u| u.get_mut(&call.step)) {
        Some(undo) => call_result(undo(call)),
        None => CallResult::NoCompensation,
    }
}

/// Last-writer-wins put on top of compare-and-set.
fn put(
    store: &dyn Store,
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
