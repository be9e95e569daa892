//! The loop's typed face (`agent:recovery/runtime@0.3.0`): the same
//! [`advance`](super::advance), with inputs and effects as Rust values
//! instead of JSON text.
//!
//! These types mirror `wit/agent-recovery@0.3.0/runtime.wit` one for one
//! (the component's export converts field by field). Only the shapes
//! change: an input is turned into the loop's own input and checked by the
//! same rules as its JSON twin, and each effect of the batch is the JSON
//! effect's members, with its JSON values (a write's value, an event, a
//! dead-letter record, a step's result) written by the same writer, so a
//! host stores and reports the same bytes either way. What stays JSON text
//! is open-ended: the state (opaque), a step's args, call results and
//! observations, decisions, store values, events, records, log lines and
//! the run configuration (docs/runtime.md).

use serde_json::Value;

use super::effect::{self as fx, Event};
pub use super::input::ReplayOf;
use super::input::{self as inp, CallResult as InnerResult};
use super::json_write;
use crate::error::{ErrorKind, PolicyError};
use crate::model::CallKind;

/// One step of a run (the JSON `step` input's `step`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepSpec {
    /// Step id, unique in the run.
    pub id: String,
    /// Tool name.
    pub tool: String,
    /// Selects the backoff; none: from each observation.
    pub call: Option<CallKind>,
    /// The arguments, JSON text (`null` when none).
    pub args: String,
    /// The circuit key; none: the tool name.
    pub target: Option<String>,
    /// Other targets to fall back to, in order.
    pub fallbacks: Vec<String>,
    /// The step changes external state.
    pub side_effect: bool,
    /// The step has a compensation.
    pub compensation: bool,
    /// The step has a checkpoint hook.
    pub checkpoint: bool,
    /// Passed to decisions as `idempotent` when given.
    pub idempotent: Option<bool>,
    /// The step replays a dead-letter record.
    pub replay_of: Option<ReplayOf>,
}

/// A fan-out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FanoutSpec {
    /// The fan-out's id.
    pub id: String,
    /// How many branches must end `ok`.
    pub min_results: u32,
    /// The branches.
    pub branches: Vec<StepSpec>,
}

/// Start a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunStart {
    /// Run id.
    pub run_id: String,
    /// Jitter seed.
    pub seed: Option<u64>,
    /// The run configuration, JSON text; none: the defaults.
    pub config: Option<String>,
    /// The run's first step, in the same call.
    pub first: Option<FirstStep>,
    /// When the run started, if before the input's `now_ms` (the `run`
    /// input sent later, with the first step); none: `now_ms`.
    pub started_ms: Option<u64>,
}

/// A run's first step, started by the `run` input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstStep {
    /// The step.
    pub step: StepSpec,
    /// End the run when the step finishes.
    pub end: bool,
}

/// One key of a `read` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredValue {
    /// The key.
    pub key: String,
    /// Its value, JSON text; none: absent.
    pub value: Option<String>,
    /// Its store version, when known.
    pub version: Option<u64>,
}

/// The answer to `swap`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swapped {
    /// Written.
    pub ok: bool,
    /// On a conflict, the value found, JSON text; none: absent.
    pub current: Option<String>,
    /// The version written or found; none: absent.
    pub version: Option<u64>,
}

/// The answer to `claim`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    /// Created.
    pub ok: bool,
    /// The value found instead, JSON text.
    pub current: Option<String>,
}

/// What a call returned; each a JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallResult {
    /// Its value (`null` when none).
    Ok(String),
    /// An observation.
    Failed(String),
    /// A raw outcome for the component to check.
    Response(String),
    /// The runtime stopped waiting for it at its timeout.
    TimedOut,
    /// The runtime has no operation for the call's tool.
    UnknownTool,
    /// The runtime has no compensation for the step of a compensation call.
    NoCompensation,
}

/// A call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEnded {
    /// What it returned.
    pub result: CallResult,
    /// How long it took, ms.
    pub took_ms: Option<u64>,
}

/// Who decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyIdentity {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Digest.
    pub digest: String,
}

/// The policy's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// As `decide-json` printed it.
    pub decision: String,
    /// Who decided, when known.
    pub policy: Option<PolicyIdentity>,
}

/// What happened (the JSON inputs' kinds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// `run`.
    Run(RunStart),
    /// `step`.
    Step(StepSpec),
    /// `fanout`.
    Fanout(FanoutSpec),
    /// `joined`: the branches' final states.
    Joined(Vec<String>),
    /// `read`.
    Read(Vec<StoredValue>),
    /// `swapped`.
    Swapped(Swapped),
    /// `claimed`.
    Claimed(Claimed),
    /// `attempt`.
    Attempt(CallEnded),
    /// `decision`.
    Decision(Decision),
    /// `slept`.
    Slept,
    /// `restored`: whether the hook restored.
    Restored(bool),
    /// `cancel`.
    Cancel,
    /// `end`.
    End,
    /// `recover`.
    Recover,
}

/// One input of [`advance`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The host clock, Unix ms.
    pub now_ms: u64,
    /// What happened.
    pub kind: InputKind,
}

/// A write or a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Key.
    pub key: String,
    /// Value, JSON text.
    pub value: String,
    /// Expiry, ms from now.
    pub ttl_ms: Option<u64>,
}

/// A compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swap {
    /// Key.
    pub key: String,
    /// The version the value must still have; none: absent.
    pub expected: Option<u64>,
    /// Value, JSON text.
    pub value: String,
    /// Expiry, ms from now.
    pub ttl_ms: Option<u64>,
}

/// Which call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallRole {
    /// The operation.
    Operation,
    /// A fallback target.
    Fallback,
    /// A compensation.
    Compensation,
}

/// A call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Which call.
    pub role: CallRole,
    /// Step id.
    pub step: String,
    /// Target.
    pub target: String,
    /// Idempotency key.
    pub key: String,
    /// Call number of the key, from 1.
    pub attempt: u32,
    /// Give up after this long.
    pub timeout_ms: Option<u64>,
    /// The step's tool.
    pub tool: String,
}

/// Ask the active policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decide {
    /// Observation, JSON text.
    pub observation: String,
    /// Context, JSON text.
    pub context: String,
}

/// A sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sleep {
    /// How long.
    pub ms: u64,
    /// False between compensation attempts.
    pub cancellable: bool,
}

/// One branch of a fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Branch {
    /// Its initial state.
    pub state: String,
    /// Its step.
    pub step: StepSpec,
}

/// A fork.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fork {
    /// The fan-out's id.
    pub fanout: String,
    /// The branches.
    pub branches: Vec<Branch>,
}

/// An append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// Stream.
    pub stream: String,
    /// Record, JSON text.
    pub record: String,
    /// The depth threshold.
    pub depth_threshold: Option<u64>,
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// `ok`.
    Ok,
    /// `failed`.
    Failed,
    /// `escalated`.
    Escalated,
    /// `replan`.
    Replan,
    /// `awaiting_input`.
    AwaitingInput,
    /// `dead_lettered`.
    DeadLettered,
    /// `cancelled`.
    Cancelled,
    /// `in_flight`.
    InFlight,
    /// `interrupted`.
    Interrupted,
    /// `completed`.
    Completed,
}

impl StepOutcome {
    /// The outcome's name in events and reports (`awaiting_input`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
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

    fn parse(s: &str) -> Option<Self> {
        [
            StepOutcome::Ok,
            StepOutcome::Failed,
            StepOutcome::Escalated,
            StepOutcome::Replan,
            StepOutcome::AwaitingInput,
            StepOutcome::DeadLettered,
            StepOutcome::Cancelled,
            StepOutcome::InFlight,
            StepOutcome::Interrupted,
            StepOutcome::Completed,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

/// The step is over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finish {
    /// Step id.
    pub step: String,
    /// How it ended.
    pub outcome: StepOutcome,
    /// The run is over.
    pub run_finished: bool,
    /// For `ok`: the value, JSON text (none: none or null).
    pub result: Option<String>,
    /// The last failure's envelope, JSON text.
    pub envelope: Option<String>,
    /// For `replan`: the rendered envelope, JSON text.
    pub rendered: Option<String>,
    /// For `awaiting_input`: the token.
    pub token: Option<String>,
}

/// What the host must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Read these keys.
    Read(Vec<String>),
    /// Read these keys; go on only when every one is absent.
    ReadOrStop(Vec<String>),
    /// Write (the journal entry too).
    Write(Write),
    /// Create if absent.
    Claim(Write),
    /// Compare-and-set.
    Swap(Swap),
    /// Delete a key.
    Delete(String),
    /// Make a call.
    Call(Call),
    /// Ask the policy.
    Decide(Decide),
    /// Sleep.
    Sleep(Sleep),
    /// Run this step's checkpoint hook.
    Restore(String),
    /// Run a fan-out's branches.
    Fork(Fork),
    /// A timeline event, JSON text.
    Emit(String),
    /// Append a record.
    Append(Append),
    /// A decision-log line.
    Log(String),
    /// The step is over.
    Finish(Finish),
}

/// The new state and the effects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advanced {
    /// The new state, JSON text: pass it to the next call unchanged.
    pub state: String,
    /// The effects, in order.
    pub effects: Vec<Effect>,
}

/// Feed one typed input to the loop: [`advance`](super::advance) with the
/// input and effects as values. `state` is empty for a new run.
pub fn advance(state: &str, input: Input) -> Result<Advanced, PolicyError> {
    let now = input.now_ms;
    let input = input_in(input.kind)?;
    let (state, effects) = super::advance_parsed(state, input, now, effects_out)?;
    Ok(Advanced { state, effects })
}

fn bad(msg: impl Into<String>) -> PolicyError {
    PolicyError::new(ErrorKind::InvalidArgument, msg)
}

/// A JSON text member, read as its JSON twin reads it.
fn json(what: &str, text: &str) -> Result<Value, PolicyError> {
    crate::api::check_size(what, text)?;
    serde_json::from_str(text).map_err(|e| PolicyError::json(what, &e))
}

/// An observation or raw outcome a call returned: text that is not JSON is
/// an `exception` observation the policy decides on, not an error.
fn observed(what: &str, text: &str) -> Result<Value, PolicyError> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => {
            crate::api::check_size(what, text)?;
            return Ok(v);
        }
        // JSON that `Value` does not take (nested too deep) stays an error.
        Err(_) if serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok() => {
            return json(what, text);
        }
        Err(_) => {}
    }
    let head: String = text.chars().take(200).collect();
    Ok(serde_json::json!({
        "source": "exception",
        "type": super::outcome::INVALID_OBSERVATION,
        "message": format!("the operation returned an observation that is not JSON: {head}"),
    }))
}

fn json_or_null(what: &str, text: Option<&str>) -> Result<Value, PolicyError> {
    text.map_or(Ok(Value::Null), |t| json(what, t))
}

fn step_in(s: StepSpec, what: &str) -> Result<inp::StepSpec, PolicyError> {
    Ok(inp::StepSpec {
        args: json(&format!("{what}.args"), &s.args)?,
        id: s.id,
        tool: s.tool,
        call: s.call.map(|c| c.as_str().to_owned()),
        target: s.target,
        fallbacks: s.fallbacks,
        side_effect: s.side_effect,
        compensation: s.compensation,
        checkpoint: s.checkpoint,
        idempotent: s.idempotent,
        replay_of: s.replay_of,
        read_stops_batch: false,
    })
}

/// The loop's own input for a typed one, checked by the JSON input's rules.
fn input_in(kind: InputKind) -> Result<inp::Input, PolicyError> {
    Ok(match kind {
        InputKind::Run(r) => {
            if r.run_id.is_empty() {
                return Err(bad(
                    "input `run` needs a non-empty string `run_id`; name the run",
                ));
            }
            inp::check_id("run_id", &r.run_id)?;
            let config = match r.config.as_deref() {
                None => None,
                Some(text) => Some(json("config", text)?),
            };
            let config = inp::run_config(config)?;
            let first = match r.first {
                None => None,
                Some(f) => {
                    let mut spec = step_in(f.step, "step")?;
                    inp::check_step(&spec, "step")?;
                    // 0.3 hosts stop a batch at a `read-or-stop` that found a value.
                    spec.read_stops_batch = true;
                    Some(Box::new((spec, f.end)))
                }
            };
            inp::Input::Run {
                run_id: r.run_id,
                seed: r.seed,
                config,
                first,
                started_ms: r.started_ms,
            }
        }
        InputKind::Step(s) => {
            let mut spec = step_in(s, "step")?;
            inp::check_step(&spec, "step")?;
            spec.read_stops_batch = true;
            inp::Input::Step(spec)
        }
        InputKind::Fanout(f) => {
            let spec = inp::FanoutSpec {
                id: f.id,
                min_results: f.min_results,
                branches: f
                    .branches
                    .into_iter()
                    .map(|b| step_in(b, "fanout.branches[]"))
                    .collect::<Result<_, _>>()?,
            };
            inp::check_fanout(&spec)?;
            inp::Input::Fanout(spec)
        }
        InputKind::Joined(states) => inp::Input::Joined(states),
        InputKind::Read(read) => {
            let mut values = serde_json::Map::new();
            let mut versions = std::collections::BTreeMap::new();
            for v in read {
                if let Some(n) = v.version {
                    versions.insert(v.key.clone(), n);
                }
                values.insert(v.key, json_or_null("read value", v.value.as_deref())?);
            }
            // 0.3 hosts stop a batch at a `claim` that fails (the contract says so).
            inp::Input::Read {
                values,
                versions,
                claim_stops_batch: true,
            }
        }
        InputKind::Swapped(s) => inp::Input::Swapped {
            ok: s.ok,
            current: json_or_null("swapped.current", s.current.as_deref())?,
            version: s.version,
        },
        InputKind::Claimed(c) => inp::Input::Claimed {
            ok: c.ok,
            current: json_or_null("claimed.current", c.current.as_deref())?,
        },
        InputKind::Attempt(a) => inp::Input::Attempt(
            match a.result {
                CallResult::Ok(v) => InnerResult::Ok(json("attempt.ok", &v)?),
                CallResult::Failed(o) => InnerResult::Failed(observed("attempt.failed", &o)?),
                CallResult::Response(o) => InnerResult::Response(observed("attempt.response", &o)?),
                CallResult::TimedOut => InnerResult::TimedOut,
                CallResult::UnknownTool => InnerResult::UnknownTool,
                CallResult::NoCompensation => InnerResult::NoCompensation,
            },
            a.took_ms,
        ),
        InputKind::Decision(d) => inp::Input::Decision {
            decision: json("decision", &d.decision)?,
            policy: d.policy.map(
                |p| serde_json::json!({"name": p.name, "version": p.version, "digest": p.digest}),
            ),
        },
        InputKind::Slept => inp::Input::Slept,
        InputKind::Restored(ok) => inp::Input::Restored(ok),
        InputKind::Cancel => inp::Input::Cancel,
        InputKind::End => inp::Input::End,
        InputKind::Recover => inp::Input::Recover,
    })
}

fn internal(e: &dyn std::fmt::Display) -> PolicyError {
    PolicyError::new(
        ErrorKind::Internal,
        format!("could not serialize output ({e}); please report this"),
    )
}

/// A value's JSON text, the bytes the JSON effects hold.
fn text<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, PolicyError> {
    json_write::to_string(value, 64).map_err(|e| internal(&e))
}

/// A finish's optional value: none for none and for null, as a host reading
/// the JSON effect sees both.
fn present(value: &Option<Value>) -> Result<Option<String>, PolicyError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => text(v).map(Some),
    }
}

fn step_out(s: &inp::StepSpec) -> Result<StepSpec, PolicyError> {
    Ok(StepSpec {
        id: s.id.clone(),
        tool: s.tool.clone(),
        call: s.call.as_deref().and_then(CallKind::parse),
        args: text(&s.args)?,
        target: s.target.clone(),
        fallbacks: s.fallbacks.clone(),
        side_effect: s.side_effect,
        compensation: s.compensation,
        checkpoint: s.checkpoint,
        idempotent: s.idempotent,
        replay_of: s.replay_of.clone(),
    })
}

fn event_text(e: &Event) -> Result<String, PolicyError> {
    text(e)
}

/// The batch as typed effects; a journal entry without a state holds
/// `state`, the text `advance` returns.
fn effects_out(effects: &[fx::Effect], state: &str) -> Result<Vec<Effect>, PolicyError> {
    effects
        .iter()
        .map(|e| {
            Ok(match e {
                fx::Effect::Read {
                    keys,
                    go_on_if_absent: false,
                } => Effect::Read(keys.clone()),
                fx::Effect::Read {
                    keys,
                    go_on_if_absent: true,
                } => Effect::ReadOrStop(keys.clone()),
                fx::Effect::Write { key, value, ttl_ms } => Effect::Write(Write {
                    key: key.clone(),
                    value: value.0.clone(),
                    ttl_ms: *ttl_ms,
                }),
                fx::Effect::Journal { key, value, ttl_ms } => Effect::Write(Write {
                    key: key.clone(),
                    value: if value.state.is_none() {
                        let mut out = Vec::with_capacity(96 + state.len());
                        super::journal_value(&mut out, value, state);
                        String::from_utf8(out).map_err(|e| internal(&e))?
                    } else {
                        text(value)?
                    },
                    ttl_ms: *ttl_ms,
                }),
                fx::Effect::Claim { key, value, ttl_ms } => Effect::Claim(Write {
                    key: key.clone(),
                    value: value.0.clone(),
                    ttl_ms: *ttl_ms,
                }),
                fx::Effect::Swap {
                    key,
                    expected,
                    value,
                    ttl_ms,
                } => Effect::Swap(Swap {
                    key: key.clone(),
                    expected: *expected,
                    value: text(value)?,
                    ttl_ms: *ttl_ms,
                }),
                fx::Effect::Delete { key } => Effect::Delete(key.clone()),
                fx::Effect::Call {
                    call,
                    step,
                    target,
                    key,
                    attempt,
                    timeout_ms,
                    tool,
                } => Effect::Call(Call {
                    role: match *call {
                        "operation" => CallRole::Operation,
                        "fallback" => CallRole::Fallback,
                        "compensation" => CallRole::Compensation,
                        other => return Err(internal(&format!("a call of kind {other:?}"))),
                    },
                    step: step.clone(),
                    target: target.clone(),
                    key: key.clone(),
                    attempt: *attempt,
                    timeout_ms: *timeout_ms,
                    tool: tool.clone(),
                }),
                fx::Effect::Decide {
                    observation,
                    context,
                } => Effect::Decide(Decide {
                    observation: observation.clone(),
                    context: context.clone(),
                }),
                fx::Effect::Sleep { ms, cancellable } => Effect::Sleep(Sleep {
                    ms: *ms,
                    cancellable: *cancellable,
                }),
                fx::Effect::Restore { step } => Effect::Restore(step.clone()),
                fx::Effect::Fork { fanout, branches } => Effect::Fork(Fork {
                    fanout: fanout.clone(),
                    branches: branches
                        .iter()
                        .map(|b| {
                            Ok(Branch {
                                state: b.state.clone(),
                                step: step_out(&b.step)?,
                            })
                        })
                        .collect::<Result<_, PolicyError>>()?,
                }),
                fx::Effect::Emit { event } => Effect::Emit(event_text(event)?),
                fx::Effect::Append {
                    stream,
                    record,
                    depth_threshold,
                } => Effect::Append(Append {
                    stream: (*stream).to_owned(),
                    record: text(record)?,
                    depth_threshold: *depth_threshold,
                }),
                fx::Effect::Log { line } => Effect::Log(line.clone()),
                fx::Effect::Finish {
                    step,
                    outcome,
                    run_finished,
                    result,
                    envelope,
                    rendered,
                    token,
                } => Effect::Finish(Finish {
                    step: step.clone(),
                    outcome: StepOutcome::parse(outcome)
                        .ok_or_else(|| internal(&format!("a step outcome {outcome:?}")))?,
                    run_finished: *run_finished,
                    result: present(result)?,
                    envelope: present(envelope)?,
                    rendered: present(rendered)?,
                    token: token.clone(),
                }),
            })
        })
        .collect()
}
