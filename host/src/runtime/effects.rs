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

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::driver::{Ctx, Lane};
use super::run::{RuntimeError, StepReport};
use super::step::{Call, Outcome};
use crate::Error;
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

/// One effect of the loop (docs/runtime.md, "Effects"); its strings are
/// borrowed from the batch's text where they have no escapes.
#[derive(Deserialize)]
pub(super) struct Fx<'a> {
    #[serde(borrow)]
    effect: Cow<'a, str>,
    #[serde(borrow, default)]
    keys: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    value: Option<&'a RawValue>,
    ttl_ms: Option<u64>,
    expected: Option<u64>,
    #[serde(borrow)]
    call: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool: Option<Cow<'a, str>>,
    #[serde(borrow)]
    step: Option<Cow<'a, str>>,
    #[serde(borrow)]
    target: Option<Cow<'a, str>>,
    attempt: Option<u32>,
    timeout_ms: Option<u64>,
    #[serde(borrow)]
    observation: Option<Cow<'a, str>>,
    #[serde(borrow)]
    context: Option<Cow<'a, str>>,
    ms: Option<u64>,
    cancellable: Option<bool>,
    cost: Option<u64>,
    amount: Option<u64>,
    capacity: Option<u64>,
    #[serde(borrow)]
    event: Option<&'a RawValue>,
    #[serde(borrow)]
    stream: Option<Cow<'a, str>>,
    #[serde(borrow)]
    record: Option<&'a RawValue>,
    depth_threshold: Option<u64>,
    #[serde(borrow)]
    outcome: Option<Cow<'a, str>>,
    run_finished: Option<bool>,
    result: Option<Value>,
    envelope: Option<Value>,
    rendered: Option<Value>,
    #[serde(borrow)]
    token: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    branches: Vec<Fork<'a>>,
    line: Option<String>,
}

/// One branch of a `fork` effect.
#[derive(Deserialize)]
pub(super) struct Fork<'a> {
    pub(super) state: String,
    #[serde(borrow)]
    pub(super) step: &'a RawValue,
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

/// A batch of effects, read in one pass; a batch that does not read as
/// effects is read again one effect at a time, to name the malformed one.
pub(super) fn parse(effects: &str) -> Result<Vec<Fx<'_>>, RuntimeError> {
    serde_json::from_str(effects).map_err(|_| malformed(effects))
}

fn malformed(effects: &str) -> RuntimeError {
    let Ok(raw) = serde_json::from_str::<Vec<&RawValue>>(effects) else {
        return bad_effect("not an array");
    };
    raw.iter()
        .find(|r| serde_json::from_str::<Fx>(r.get()).is_err())
        .map_or_else(|| bad_effect("not an array"), |r| bad_effect(r.get()))
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
    Fork(&'f [Fork<'f>]),
}

/// Carries out an effect that needs no I/O, or says what it needs;
/// `lent` decides in place of the runtime's decider ([`Lent`](super::driver::Lent)).
pub(super) fn plan<'f>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    lent: Option<&dyn Decide>,
    fx: &'f Fx<'f>,
    next: &mut Option<String>,
) -> Result<Need<'f>, RuntimeError> {
    let rt = ctx.rt;
    let key = |what: &str| {
        fx.key
            .as_deref()
            .map(str::to_owned)
            .ok_or_else(|| bad_effect(what))
    };
    let value = |what: &str| {
        fx.value
            .map(|v| v.get().to_owned())
            .ok_or_else(|| bad_effect(what))
    };
    let need = match &*fx.effect {
        "emit" => {
            let event = fx.event.ok_or_else(|| bad_effect("emit without event"))?;
            if let Some(f) = &rt.on_event {
                f(event.get());
            }
            lane.tel.event(event.get(), rt.clock.now_ms());
            lane.events.push(event.get().to_owned());
            Need::Done
        }
        "read" => Need::Store(StoreOp::Read {
            keys: fx.keys.iter().map(|k| k.as_ref().to_owned()).collect(),
            now: rt.clock.now_ms(),
        }),
        "write" => Need::Store(StoreOp::Write {
            key: key("write without key")?,
            value: value("write without value")?,
            ttl_ms: fx.ttl_ms,
            now: rt.clock.now_ms(),
        }),
        "claim" => Need::Store(StoreOp::Swap {
            key: key("claim without key")?,
            expected: None,
            value: value("claim without value")?,
            ttl_ms: fx.ttl_ms,
            now: rt.clock.now_ms(),
            claim: true,
        }),
        "swap" => Need::Store(StoreOp::Swap {
            key: key("swap without key")?,
            expected: fx.expected,
            value: value("swap without value")?,
            ttl_ms: fx.ttl_ms,
            now: rt.clock.now_ms(),
            claim: false,
        }),
        "take" | "refund" => {
            let key = key("take or refund without key")?;
            let capacity = fx
                .capacity
                .ok_or_else(|| bad_effect("take or refund without capacity"))?;
            let now = rt.clock.now_ms();
            Need::Store(if fx.effect == "take" {
                StoreOp::Take {
                    key,
                    capacity,
                    cost: fx.cost.ok_or_else(|| bad_effect("take without cost"))?,
                    now,
                }
            } else {
                StoreOp::Refund {
                    key,
                    capacity,
                    amount: fx
                        .amount
                        .ok_or_else(|| bad_effect("refund without amount"))?,
                    now,
                }
            })
        }
        "delete" => Need::Store(StoreOp::Delete {
            key: key("delete without key")?,
        }),
        "append" => {
            let stream = fx
                .stream
                .as_deref()
                .ok_or_else(|| bad_effect("append without stream"))?;
            let record = fx
                .record
                .ok_or_else(|| bad_effect("append without record"))?;
            let dead_letter = stream == super::scenario::DEAD_LETTER_STREAM;
            let threshold = fx.depth_threshold.or(rt.depth_threshold);
            Need::Store(StoreOp::Append {
                stream: stream.to_owned(),
                record: record.get().to_owned(),
                now: rt.clock.now_ms(),
                dead_letter,
                count_depth: dead_letter && (threshold.is_some() || rt.telemetry.is_on()),
                threshold,
            })
        }
        "decide" => {
            let obs = fx
                .observation
                .as_deref()
                .ok_or_else(|| bad_effect("decide without observation"))?;
            let context = fx
                .context
                .as_deref()
                .ok_or_else(|| bad_effect("decide without context"))?;
            let decision = match lent {
                Some(lent) => lent.decide_json(obs, context)?,
                None => rt.decider.decide_json(obs, context)?,
            };
            lane.tel.decided(&decision);
            // The decision log's `policy`: who decided, when the runtime knows.
            let policy = rt
                .decision_log
                .as_ref()
                .and_then(|(_, p)| p.json())
                .map(|p| format!(r#","policy":{p}"#))
                .unwrap_or_default();
            *next = Some(format!(
                r#"{{"input":"decision","now_ms":{},"decision":{decision}{policy}}}"#,
                rt.clock.now_ms()
            ));
            lane.decision = Some(decision);
            Need::Done
        }
        "log" => {
            let line = fx
                .line
                .as_deref()
                .ok_or_else(|| bad_effect("log without line"))?;
            match &rt.decision_log {
                Some((log, _)) if log.is_file() => Need::Log(line.to_owned()),
                Some((log, _)) => {
                    log.write(line);
                    Need::Done
                }
                None => Need::Done,
            }
        }
        "sleep" => {
            let ms = fx.ms.unwrap_or(0);
            let cancellable = fx.cancellable.unwrap_or(true);
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
        "restore" => Need::Restore {
            step: fx.step.as_deref().unwrap_or_default(),
        },
        "call" => {
            let call = Call {
                kind: fx.call.as_deref().unwrap_or_default().to_owned(),
                step: fx.step.as_deref().unwrap_or_default().to_owned(),
                target: fx.target.as_deref().unwrap_or_default().to_owned(),
                key: fx.key.as_deref().unwrap_or_default().to_owned(),
                attempt: fx.attempt.unwrap_or(1),
                timeout_ms: fx.timeout_ms,
            };
            if call.kind != "compensation" && ctx.cancelled() {
                *next = Some(ctx.cancel_input());
                return Ok(Need::Done);
            }
            let started = rt.clock.now_ms();
            lane.tel.call_start(&call, started);
            Need::Call {
                call,
                tool: fx.tool.as_deref().unwrap_or_default(),
                started,
            }
        }
        "fork" => Need::Fork(&fx.branches),
        "finish" => {
            lane.tel.finish(
                fx.outcome.as_deref().unwrap_or_default(),
                fx.envelope.as_ref(),
                rt.clock.now_ms(),
            );
            Need::Finish(StepReport {
                outcome: fx.outcome.as_deref().unwrap_or_default().to_owned(),
                run_finished: fx.run_finished.unwrap_or(true),
                result: fx.result.clone(),
                envelope: fx.envelope.clone(),
                rendered: fx.rendered.clone(),
                token: fx.token.as_deref().map(str::to_owned),
            })
        }
        other => return Err(bad_effect(other)),
    };
    Ok(need)
}

/// The store work of one effect, owned, so that a driver can run it on
/// another thread (`spawn_blocking`).
pub(super) enum StoreOp {
    Read {
        keys: Vec<String>,
        now: u64,
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
    Take {
        key: String,
        capacity: u64,
        cost: u64,
        now: u64,
    },
    Refund {
        key: String,
        capacity: u64,
        amount: u64,
        now: u64,
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
    Answer(Option<String>),
    /// A record was appended as `seq`.
    Appended {
        stream: String,
        record: String,
        seq: u64,
        dead_letter: bool,
        threshold: Option<u64>,
        depth: Option<Result<u64, StoreError>>,
    },
}

impl StoreOp {
    /// Does the work against `store` (blocking, when the store blocks).
    pub(super) fn run(self, store: &dyn Store) -> Result<Stored, StoreError> {
        let answer = match self {
            StoreOp::Read { keys, now } => {
                let mut values = String::from("{");
                let mut versions = String::from("{");
                for (i, key) in keys.iter().enumerate() {
                    if i > 0 {
                        values.push(',');
                    }
                    values.push_str(&json_str(key));
                    values.push(':');
                    match store.get(key, now)? {
                        Some(v) => {
                            values.push_str(&v.value);
                            if versions.len() > 1 {
                                versions.push(',');
                            }
                            versions.push_str(&format!("{}:{}", json_str(key), v.version));
                        }
                        None => values.push_str("null"),
                    }
                }
                values.push('}');
                versions.push('}');
                Some(format!(
                    r#"{{"input":"read","now_ms":{now},"values":{values},"versions":{versions}}}"#
                ))
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
            } => Some(
                match store.compare_and_set(&key, expected, &value, ttl_ms, now)? {
                    Cas::Written { .. } => {
                        format!(r#"{{"input":"claimed","now_ms":{now},"ok":true}}"#)
                    }
                    Cas::Conflict { current } => format!(
                        r#"{{"input":"claimed","now_ms":{now},"ok":false,"current":{}}}"#,
                        current.map_or_else(|| "null".to_owned(), |v| v.value)
                    ),
                },
            ),
            StoreOp::Swap {
                key,
                expected,
                value,
                ttl_ms,
                now,
                claim: false,
            } => Some(
                match store.compare_and_set(&key, expected, &value, ttl_ms, now)? {
                    Cas::Written { version } => format!(
                        r#"{{"input":"swapped","now_ms":{now},"ok":true,"version":{version}}}"#
                    ),
                    Cas::Conflict { current: Some(v) } => format!(
                        r#"{{"input":"swapped","now_ms":{now},"ok":false,"current":{},"version":{}}}"#,
                        v.value, v.version
                    ),
                    Cas::Conflict { current: None } => format!(
                        r#"{{"input":"swapped","now_ms":{now},"ok":false,"current":null,"version":null}}"#
                    ),
                },
            ),
            StoreOp::Take {
                key,
                capacity,
                cost,
                now,
            } => {
                let (ok, tokens) = quota(store, &key, capacity, now, |t| t.checked_sub(cost))?;
                Some(format!(
                    r#"{{"input":"taken","now_ms":{now},"ok":{ok},"tokens":{tokens}}}"#
                ))
            }
            StoreOp::Refund {
                key,
                capacity,
                amount,
                now,
            } => {
                quota(store, &key, capacity, now, |t| {
                    Some(t.saturating_add(amount))
                })?;
                None
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
                let depth = count_depth.then(|| super::deadletters::depth_of(store, now));
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
/// dead-letter queue's depth and its `dead_letter_depth` event).
pub(super) fn stored(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    done: Stored,
    next: &mut Option<String>,
) -> Result<(), RuntimeError> {
    let rt = ctx.rt;
    match done {
        Stored::Answer(answer) => {
            if answer.is_some() {
                *next = answer;
            }
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
                return Ok(());
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
            // Telemetry never fails the operation it observes.
            if let Some(Ok(depth)) = &depth
                && rt.telemetry.is_on()
            {
                rt.telemetry.dead_letter_depth(*depth);
            }
            let (Some(threshold), Some(depth)) = (threshold, depth) else {
                return Ok(());
            };
            if let Some(event) =
                super::deadletters::depth_event(threshold, depth?, t_ms, seq, &record)
            {
                if let Some(f) = &rt.on_event {
                    f(&event);
                }
                lane.tel.event(&event, rt.clock.now_ms());
                lane.events.push(event);
            }
        }
    }
    Ok(())
}

/// The input after a sleep: `slept`, or the cancellation when the sleep was
/// cut at the run's cancel time.
pub(super) fn slept(ctx: Ctx<'_>, cut: bool) -> String {
    if cut {
        ctx.cancel_input()
    } else {
        format!(r#"{{"input":"slept","now_ms":{}}}"#, ctx.rt.clock.now_ms())
    }
}

/// The input after a restore: whether the hook restored.
pub(super) fn restored(ctx: Ctx<'_>, ok: bool) -> String {
    format!(
        r#"{{"input":"restored","now_ms":{},"ok":{ok}}}"#,
        ctx.rt.clock.now_ms()
    )
}

/// Answers a call: its span ends, a scenario's kill counts it, a call
/// slower than its timeout is a timeout observation, and `next` is the
/// attempt's result. `Some` when a scenario killed the run here.
pub(super) fn called(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, '_>,
    call: &Call,
    started: u64,
    outcome: Outcome,
    next: &mut Option<String>,
) -> Option<StepReport> {
    let rt = ctx.rt;
    lane.tel.call_end(rt.clock.now_ms());
    if let Some((calls, n)) = ctx.kill
        && calls.fetch_add(1, Ordering::SeqCst).saturating_add(1) == n
    {
        return Some(killed());
    }
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
    None
}

/// The answer to a compensation call for a step without one.
pub(super) fn missing_compensation(step: &str) -> Outcome {
    Outcome::Failed(format!(
        r#"{{"source":"exception","type":"agent_recovery.MissingCompensation","message":{}}}"#,
        json_str(&format!("no compensation registered for step {step}"))
    ))
}

/// A compensation call, answered by the lane's undo of its step.
pub(super) fn compensate(lane: &mut Lane<'_, '_>, call: &Call) -> Outcome {
    match lane.undo.as_deref_mut().and_then(|u| u.get_mut(&call.step)) {
        Some(undo) => undo(call),
        None => missing_compensation(&call.step),
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

/// A retry quota's bounded add (`take`, `refund`): a compare-and-set loop on
/// `{"tokens":N}` (absent or unreadable: `capacity`; no TTL), the result
/// clamped to `0..=capacity`. `change` returns the new count, or `None` when
/// the bucket holds too few tokens (nothing is written). Returns whether it
/// wrote and the tokens left.
fn quota(
    store: &dyn Store,
    key: &str,
    capacity: u64,
    now: u64,
    change: impl Fn(u64) -> Option<u64>,
) -> Result<(bool, u64), StoreError> {
    for _ in 0..16 {
        let current = store.get(key, now)?;
        let tokens = current
            .as_ref()
            .and_then(|v| serde_json::from_str::<Value>(&v.value).ok())
            .and_then(|v| v.get("tokens").and_then(Value::as_u64))
            .map_or(capacity, |t| t.min(capacity));
        let Some(new) = change(tokens) else {
            return Ok((false, tokens));
        };
        let new = new.min(capacity);
        let value = format!(r#"{{"tokens":{new}}}"#);
        let version = current.map(|v| v.version);
        if let Cas::Written { .. } = store.compare_and_set(key, version, &value, None, now)? {
            return Ok((true, new));
        }
    }
    Err(StoreError::new(
        StoreErrorKind::Unavailable,
        format!(
            "could not update the retry quota {key}: 16 compare-and-set conflicts in a row; the store is contended, retry the run"
        ),
    ))
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
