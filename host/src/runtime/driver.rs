//! The driver: feeds the loop, carries out its effects, answers the last one.
//!
//! One function drives a *lane*: the run's own steps, or one branch of a
//! fan-out (its own state and events, run on its own thread when the clock
//! is real). Nothing here decides anything: every choice is in the effects.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Runtime;
use super::run::{RuntimeError, StepReport};
use super::step::{Call, Outcome, Step};
use super::telemetry::LaneTel;
use crate::Error;
use crate::store::{Cas, StoreError, StoreErrorKind};

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
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
            || self
                .cancel_at_ms
                .is_some_and(|t| self.rt.clock.now_ms() >= t)
    }

    pub(super) fn cancel_input(&self) -> String {
        format!(
            r#"{{"input":"cancel","now_ms":{}}}"#,
            self.rt.clock.now_ms()
        )
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
}

/// The tools of a recovered run (`recover`): a call is answered by the tool
/// the `call` effect names, a `restore` by that tool's checkpoint hook.
pub(crate) trait ToolSet: Sync {
    /// Carries out `call` (an operation or a compensation) of `tool`.
    fn call(&self, tool: &str, call: &Call) -> Outcome;
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

/// What the lane runs: one step, the branches of a fan-out, or a recovered
/// run's calls (by tool).
pub(super) enum Work<'s, 'a> {
    Step(&'s mut Step<'a>),
    Branches(&'s mut [Step<'a>]),
    Tools(ToolCall<'s>),
}

/// The report of a run a scenario killed (`kill_after_calls`).
pub(super) const KILLED: &str = "killed";

fn killed() -> StepReport {
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
struct Fx<'a> {
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
struct Fork<'a> {
    state: String,
    #[serde(borrow)]
    step: &'a RawValue,
}

pub(super) fn json_str(s: &str) -> String {
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

/// The error for a batch that is not an array of effects, naming the first
/// malformed one.
fn malformed(effects: &str) -> RuntimeError {
    let Ok(raw) = serde_json::from_str::<Vec<&RawValue>>(effects) else {
        return bad_effect("not an array");
    };
    raw.iter()
        .find(|r| serde_json::from_str::<Fx>(r.get()).is_err())
        .map_or_else(|| bad_effect("not an array"), |r| bad_effect(r.get()))
}

/// Feeds `input`, carries out the effects, answers the last one, until `finish`.
pub(super) fn drive<'a>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, 'a>,
    input: String,
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

fn drive_lane<'a>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, 'a>,
    mut input: String,
    mut work: Work<'_, 'a>,
) -> Result<StepReport, RuntimeError> {
    loop {
        let adv = ctx.rt.looper.advance(lane.state, &input)?;
        *lane.state = adv.state;
        // One pass over the batch; a batch that does not read as effects is
        // read again one effect at a time, to name the malformed one.
        let effects: Vec<Fx> = match serde_json::from_str(&adv.effects) {
            Ok(effects) => effects,
            Err(_) => return Err(malformed(&adv.effects)),
        };
        let mut next = None;
        for fx in &effects {
            if let Some(report) = effect(ctx, lane, fx, &mut work, &mut next)? {
                return Ok(report);
            }
        }
        input = next.ok_or_else(|| bad_effect("a batch without an effect to answer"))?;
    }
}

/// Carries out one effect; sets `next` to the input that answers it.
fn effect<'a>(
    ctx: Ctx<'_>,
    lane: &mut Lane<'_, 'a>,
    fx: &Fx,
    work: &mut Work<'_, 'a>,
    next: &mut Option<String>,
) -> Result<Option<StepReport>, RuntimeError> {
    let rt = ctx.rt;
    let store = &*rt.store;
    match &*fx.effect {
        "emit" => {
            let event = fx.event.ok_or_else(|| bad_effect("emit without event"))?;
            if let Some(f) = &rt.on_event {
                f(event.get());
            }
            lane.tel.event(event.get(), rt.clock.now_ms());
            lane.events.push(event.get().to_owned());
        }
        "read" => {
            let now = rt.clock.now_ms();
            let mut values = String::from("{");
            let mut versions = String::from("{");
            for (i, key) in fx.keys.iter().enumerate() {
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
            *next = Some(format!(
                r#"{{"input":"read","now_ms":{now},"values":{values},"versions":{versions}}}"#
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
        "swap" => {
            let key = fx
                .key
                .as_deref()
                .ok_or_else(|| bad_effect("swap without key"))?;
            let value = fx.value.ok_or_else(|| bad_effect("swap without value"))?;
            let now = rt.clock.now_ms();
            *next = Some(
                match store.compare_and_set(key, fx.expected, value.get(), fx.ttl_ms, now)? {
                    Cas::Written { version } => format!(
                        r#"{{"input":"swapped","now_ms":{now},"ok":true,"version":{version}}}"#
                    ),
                    Cas::Conflict { current } => match current {
                        Some(v) => format!(
                            r#"{{"input":"swapped","now_ms":{now},"ok":false,"current":{},"version":{}}}"#,
                            v.value, v.version
                        ),
                        None => format!(
                            r#"{{"input":"swapped","now_ms":{now},"ok":false,"current":null,"version":null}}"#
                        ),
                    },
                },
            );
        }
        "take" | "refund" => {
            let key = fx
                .key
                .as_deref()
                .ok_or_else(|| bad_effect("take or refund without key"))?;
            let capacity = fx
                .capacity
                .ok_or_else(|| bad_effect("take or refund without capacity"))?;
            let now = rt.clock.now_ms();
            if fx.effect == "take" {
                let cost = fx.cost.ok_or_else(|| bad_effect("take without cost"))?;
                let (ok, tokens) = quota(store, key, capacity, now, |t| t.checked_sub(cost))?;
                *next = Some(format!(
                    r#"{{"input":"taken","now_ms":{now},"ok":{ok},"tokens":{tokens}}}"#
                ));
            } else {
                let amount = fx
                    .amount
                    .ok_or_else(|| bad_effect("refund without amount"))?;
                quota(store, key, capacity, now, |t| {
                    Some(t.saturating_add(amount))
                })?;
            }
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
            let seq = store.append(stream, record.get(), rt.clock.now_ms())?;
            lane.tel.appended(stream, record.get(), rt.clock.now_ms());
            if stream == super::scenario::DEAD_LETTER_STREAM {
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
                super::deadletters::record_depth(rt, Some(seq));
                if let Some(event) = super::deadletters::depth_event(
                    rt,
                    fx.depth_threshold,
                    t_ms,
                    seq,
                    record.get(),
                )? {
                    if let Some(f) = &rt.on_event {
                        f(&event);
                    }
                    lane.tel.event(&event, rt.clock.now_ms());
                    lane.events.push(event);
                }
            }
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
            let decision = rt.decider.decide_json(obs, context)?;
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
        }
        "log" => {
            let line = fx
                .line
                .as_deref()
                .ok_or_else(|| bad_effect("log without line"))?;
            if let Some((log, _)) = &rt.decision_log {
                log.write(line);
            }
        }
        "sleep" => {
            let ms = fx.ms.unwrap_or(0);
            let cancellable = fx.cancellable.unwrap_or(true);
            if cancellable && ctx.cancelled() {
                *next = Some(ctx.cancel_input());
            } else if let Some(at) = ctx
                .cancel_at_ms
                .filter(|at| cancellable && rt.clock.now_ms().saturating_add(ms) > *at)
            {
                rt.clock.sleep_ms(at.saturating_sub(rt.clock.now_ms()));
                *next = Some(ctx.cancel_input());
            } else {
                rt.clock.sleep_ms(ms);
                *next = Some(format!(
                    r#"{{"input":"slept","now_ms":{}}}"#,
                    rt.clock.now_ms()
                ));
            }
        }
        "restore" => {
            let ok = match work {
                Work::Step(step) => step.checkpoint.as_mut().is_some_and(|hook| hook()),
                Work::Tools(tools) => {
                    let step = fx.step.as_deref().unwrap_or_default();
                    tools
                        .by_step
                        .get(step)
                        .is_some_and(|tool| tools.set.checkpoint(tool))
                }
                Work::Branches(branches) => {
                    let step = fx.step.as_deref().unwrap_or_default();
                    branches
                        .iter_mut()
                        .find(|b| b.id == step)
                        .and_then(|b| b.checkpoint.as_mut())
                        .is_some_and(|hook| hook())
                }
            };
            *next = Some(format!(
                r#"{{"input":"restored","now_ms":{},"ok":{ok}}}"#,
                rt.clock.now_ms()
            ));
        }
        "call" => {
            let call = Call {
                kind: fx.call.as_deref().unwrap_or_default().to_owned(),
                step: fx.step.as_deref().unwrap_or_default().to_owned(),
                target: fx.target.as_deref().unwrap_or_default().to_owned(),
                key: fx.key.as_deref().unwrap_or_default().to_owned(),
                attempt: fx.attempt.unwrap_or(1),
                timeout_ms: fx.timeout_ms,
            };
            let compensation = call.kind == "compensation";
            if !compensation && ctx.cancelled() {
                *next = Some(ctx.cancel_input());
                return Ok(None);
            }
            let started = rt.clock.now_ms();
            lane.tel.call_start(&call, started);
            let tool = fx.tool.as_deref().unwrap_or_default();
            let outcome = match (compensation, work) {
                (_, Work::Tools(tools)) => {
                    tools.by_step.insert(call.step.clone(), tool.to_owned());
                    tools.set.call(tool, &call)
                }
                (true, _) => match lane.undo.as_deref_mut().and_then(|u| u.get_mut(&call.step)) {
                    Some(undo) => undo(&call),
                    None => missing_compensation(&call.step),
                },
                (false, Work::Step(step)) => (step.operation)(&call),
                (false, Work::Branches(_)) => {
                    return Err(bad_effect("an operation call in a fan-out's own lane"));
                }
            };
            lane.tel.call_end(rt.clock.now_ms());
            if let Some((calls, n)) = ctx.kill
                && calls.fetch_add(1, Ordering::SeqCst).saturating_add(1) == n
            {
                return Ok(Some(killed()));
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
        }
        "fork" => {
            let Work::Branches(branches) = work else {
                return Err(bad_effect("fork outside a fan-out"));
            };
            if fx.branches.len() != branches.len() {
                return Err(bad_effect("fork with a different number of branches"));
            }
            let lanes = run_branches(ctx, &fx.branches, branches, lane.tel)?;
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
                    && let (Some(u), Some(undo)) =
                        (step.compensate.take(), lane.undo.as_deref_mut())
                {
                    undo.insert(step.id.clone(), u);
                }
                states.push(state);
            }
            *next = Some(format!(
                r#"{{"input":"joined","now_ms":{},"states":{}}}"#,
                rt.clock.now_ms(),
                serde_json::to_string(&states).map_err(|_| bad_effect("fork states"))?
            ));
        }
        "finish" => {
            lane.tel.finish(
                fx.outcome.as_deref().unwrap_or_default(),
                fx.envelope.as_ref(),
                rt.clock.now_ms(),
            );
            return Ok(Some(StepReport {
                outcome: fx.outcome.as_deref().unwrap_or_default().to_owned(),
                run_finished: fx.run_finished.unwrap_or(true),
                result: fx.result.clone(),
                envelope: fx.envelope.clone(),
                rendered: fx.rendered.clone(),
                token: fx.token.as_deref().map(str::to_owned),
            }));
        }
        other => return Err(bad_effect(other)),
    }
    Ok(None)
}

/// A branch's final state, its events and its report.
type BranchEnd = (String, Vec<String>, StepReport);

/// Drives every branch of a fork to its `finish`: on threads with a real
/// clock; one after another with a virtual clock, each from the fork's
/// time, the clock then set to the latest end (so simulations reproduce).
fn run_branches<'a>(
    ctx: Ctx<'_>,
    forks: &[Fork<'_>],
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
    fork: &Fork<'_>,
    step: &mut Step<'a>,
    tel: &LaneTel,
) -> Result<BranchEnd, RuntimeError> {
    let mut tel = tel.branch(fork.step.get(), ctx.rt.clock.now_ms());
    let mut state = fork.state.clone();
    let mut events = Vec::new();
    let input = format!(
        r#"{{"input":"step","now_ms":{},"step":{}}}"#,
        ctx.rt.clock.now_ms(),
        fork.step.get()
    );
    let mut lane = Lane {
        state: &mut state,
        events: &mut events,
        undo: None,
        tel: &mut tel,
        dead_letter: None,
    };
    let report = drive(ctx, &mut lane, input, Work::Step(step))?;
    Ok((state, events, report))
}

/// The answer to a compensation call for a step without one.
pub(super) fn missing_compensation(step: &str) -> Outcome {
    Outcome::Failed(format!(
        r#"{{"source":"exception","type":"agent_recovery.MissingCompensation","message":{}}}"#,
        json_str(&format!("no compensation registered for step {step}"))
    ))
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
/// A retry quota's bounded add (`take`, `refund`): a compare-and-set loop on
/// `{"tokens":N}` (absent or unreadable: `capacity`; no TTL), the result
/// clamped to `0..=capacity`. `change` returns the new count, or `None` when
/// the bucket holds too few tokens (nothing is written). Returns whether it
/// wrote and the tokens left.
fn quota(
    store: &dyn crate::store::Store,
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
