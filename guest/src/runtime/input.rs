//! What the host feeds the loop.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::config::RunConfig;
use crate::error::{ErrorKind, PolicyError};

/// One step of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    /// Step id, unique in the run.
    pub id: String,
    /// Tool name.
    pub tool: String,
    /// `tool`, `llm` or `agent` (selects the backoff); none: from the observation.
    #[serde(default)]
    pub call: Option<String>,
    /// Arguments (part of the idempotency key).
    #[serde(default)]
    pub args: Value,
    /// The circuit key (a host, a model); default: the tool name.
    #[serde(default)]
    pub target: Option<String>,
    /// Other targets to fall back to, in order.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// The step changes external state.
    #[serde(default)]
    pub side_effect: bool,
    /// The step has a compensation (its undo).
    #[serde(default)]
    pub compensation: bool,
    /// The step has a checkpoint hook (`restore` is possible).
    #[serde(default)]
    pub checkpoint: bool,
    /// Passed to decisions as `idempotent` when given.
    #[serde(default)]
    pub idempotent: Option<bool>,
    /// The step replays a dead-letter record: its key derives from the original one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<ReplayOf>,
    /// The input that started the step said `read_stops_batch`: its host
    /// stops a batch at a `read` marked `go_on_if_absent` that found a value.
    /// Not part of the step: never read from it, never in the state.
    #[serde(skip)]
    pub read_stops_batch: bool,
}

/// A step's `replay_of`: the `n`-th replay of dead-letter record `id`, whose
/// step had the idempotency key `key` (docs/durability.md §3, Replay).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayOf {
    /// The original step's idempotency key (64 lowercase hex digits).
    pub key: String,
    /// Which replay of the record this is, from 1.
    pub n: u64,
    /// The record's id (its sequence number in the dead-letter stream).
    pub id: String,
}

/// A fan-out: steps run concurrently that succeed when at least
/// `min_results` of them do (graceful degradation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FanoutSpec {
    /// The fan-out's id, unique in the run (the id of its `finish`).
    pub id: String,
    /// How many branches must end `ok` for the fan-out to succeed.
    pub min_results: u32,
    /// The branches: ordinary steps, each with its own id and breaker target.
    pub branches: Vec<StepSpec>,
}

/// What a call returned.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    /// It succeeded, with this value (null when none).
    Ok(Value),
    /// It failed: an observation.
    Failed(Value),
    /// Its raw outcome, for the component to check (`check-outcome`).
    Response(Value),
    /// The runtime stopped waiting for it at the call's `timeout_ms`.
    TimedOut,
    /// The runtime has no operation for the call's tool (`recover`, a
    /// replay): the loop makes the `runtime.recover.unknown_tool` failure.
    UnknownTool,
    /// The runtime has no compensation for the step of a compensation call:
    /// the loop makes the `agent_recovery.MissingCompensation` failure.
    NoCompensation,
}

impl CallResult {
    fn from_json(v: Value) -> Result<Self, PolicyError> {
        if v.as_str() == Some("ok") {
            return Ok(CallResult::Ok(Value::Null));
        }
        match v.as_str() {
            Some("timed_out") => return Ok(CallResult::TimedOut),
            Some("unknown_tool") => return Ok(CallResult::UnknownTool),
            Some("no_compensation") => return Ok(CallResult::NoCompensation),
            _ => {}
        }
        if let Value::Object(mut m) = v
            && m.len() == 1
        {
            if let Some(x) = m.remove("ok") {
                return Ok(CallResult::Ok(x));
            }
            if let Some(x) = m.remove("failed") {
                return Ok(CallResult::Failed(x));
            }
            if let Some(x) = m.remove("response") {
                return Ok(CallResult::Response(x));
            }
        }
        Err(bad(
            "`result` must be \"ok\", {\"ok\": value}, {\"failed\": observation}, {\"response\": outcome}, \"timed_out\", \"unknown_tool\" or \"no_compensation\"; see docs/runtime.md",
        ))
    }
}

/// An input of `advance`.
#[derive(Clone, Debug)]
pub enum Input {
    /// Start a run.
    Run {
        /// Run id.
        run_id: String,
        /// Jitter seed.
        seed: Option<u64>,
        /// Configuration.
        config: RunConfig,
        /// The run's first step, started in the same call, and whether the
        /// run ends when it finishes (the `run` input's `step` and `end`):
        /// exactly `run` then that `step` input at the same `now_ms`.
        first: Option<Box<(StepSpec, bool)>>,
        /// When the run started, if before `now_ms` (a host that sends the
        /// `run` input with the run's first step, later): exactly `run` at
        /// `started_ms`, then the rest at `now_ms`.
        started_ms: Option<u64>,
    },
    /// A step starts.
    Step(StepSpec),
    /// A step starts, and the run ends when it finishes (`"end": true` on
    /// the `step` input): the `end` input's effects follow the step's
    /// `finish` in the same batch.
    StepThenEnd(StepSpec),
    /// A fan-out starts.
    Fanout(FanoutSpec),
    /// The branches of the fan-out ended: their final states, in branch order.
    Joined(Vec<String>),
    /// Store values asked for by `read` (null: absent), and the versions
    /// of those present when the host gives them (`versions`, optional).
    Read {
        /// Key -> value or null.
        values: serde_json::Map<String, Value>,
        /// Key -> store version.
        versions: std::collections::BTreeMap<String, u64>,
        /// The host stops a batch at a `claim` that fails (answering
        /// `claimed`), so the idempotency claim may go in the call's batch.
        claim_stops_batch: bool,
    },
    /// The answer to `swap`: whether it wrote; the value the key holds now
    /// (null: absent) and its version.
    Swapped {
        /// Written.
        ok: bool,
        /// On a conflict, the value found (null: absent).
        current: Value,
        /// The version written (`ok`) or found; null: none (absent).
        version: Option<u64>,
    },
    /// The answer to `claim`: whether the key was created, else what is there.
    Claimed {
        /// Created.
        ok: bool,
        /// The value found instead (null: none).
        current: Value,
    },
    /// A call ended, after `took_ms` on the runtime's clock when it says.
    Attempt(CallResult, Option<u64>),
    /// The active policy's decision (object or JSON text), and the
    /// identity of the policy that made it when the host knows it.
    Decision {
        /// The decision.
        decision: Value,
        /// `{"name","version","digest"}`, for the decision log.
        policy: Option<Value>,
    },
    /// A sleep ended.
    Slept,
    /// The checkpoint hook ran.
    Restored(bool),
    /// The caller cancels the run.
    Cancel,
    /// The caller says the run is complete (between steps).
    End,
    /// Finish the interrupted run whose journaled state this is.
    Recover,
}

/// The largest integer every language's JSON reads exactly (2^53 - 1).
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

fn bad(msg: impl Into<String>) -> PolicyError {
    PolicyError::new(ErrorKind::InvalidArgument, msg)
}

/// The members of the inputs of a run and its successful steps, read in
/// one pass into their types (the kind and the run id borrowed from the text).
#[derive(Deserialize)]
struct Common<'a> {
    input: &'a str,
    now_ms: u64,
    #[serde(default)]
    step: Option<StepSpec>,
    #[serde(default)]
    values: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    versions: Option<std::collections::BTreeMap<String, u64>>,
    #[serde(default)]
    ok: Option<bool>,
    #[serde(default)]
    current: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    took_ms: Option<u64>,
    #[serde(borrow, default)]
    run_id: Option<&'a str>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(borrow, default)]
    config: Option<&'a RawValue>,
    #[serde(default)]
    end: Option<bool>,
    #[serde(default)]
    started_ms: Option<u64>,
    #[serde(default)]
    claim_stops_batch: Option<bool>,
    #[serde(default)]
    read_stops_batch: Option<bool>,
}

/// The inputs of a run and of a successful step (`run`, `step`, `read`,
/// `claimed`, `attempt`, `slept`, `end`), read straight into their types
/// without building a `Value` of the whole input first. `None` for
/// anything else or anything odd (another kind, a bad member, a member
/// given twice, a configuration out of range): [`parse`] then reads it the
/// general way, which gives the same input or the error.
fn parse_common(text: &str) -> Option<(Input, u64)> {
    let c: Common = serde_json::from_str(text).ok()?;
    let input = match c.input {
        "run" => {
            let run_id = c.run_id.filter(|id| !id.is_empty())?;
            check_id("run_id", run_id).ok()?;
            let config = match c.config.map(RawValue::get) {
                None | Some("null") => RunConfig::default(),
                Some(text) => serde_json::from_str(text).ok()?,
            };
            if config.in_flight_wait_ms > crate::config::MAX_MS {
                return None;
            }
            let first = match c.step {
                Some(mut spec) => {
                    check_step(&spec, "step").ok()?;
                    spec.read_stops_batch = c.read_stops_batch.unwrap_or(false);
                    Some(Box::new((spec, c.end.unwrap_or(false))))
                }
                None if c.end.is_some() => return None,
                None => None,
            };
            Input::Run {
                run_id: run_id.to_owned(),
                seed: c.seed,
                config,
                first,
                started_ms: c.started_ms,
            }
        }
        "step" => {
            let mut spec = c.step?;
            check_step(&spec, "step").ok()?;
            spec.read_stops_batch = c.read_stops_batch.unwrap_or(false);
            step_input(spec, c.end.unwrap_or(false))
        }
        "read" => Input::Read {
            values: c.values?,
            versions: c.versions.unwrap_or_default(),
            claim_stops_batch: c.claim_stops_batch.unwrap_or(false),
        },
        "claimed" => Input::Claimed {
            ok: c.ok?,
            current: c.current.unwrap_or(Value::Null),
        },
        "attempt" => Input::Attempt(CallResult::from_json(c.result?).ok()?, c.took_ms),
        "slept" => Input::Slept,
        "end" => Input::End,
        _ => return None,
    };
    Some((input, c.now_ms))
}

/// Parse an input: `{"input": kind, "now_ms": ms, ...}`. Returns it with `now_ms`.
pub fn parse(text: &str) -> Result<(Input, u64), PolicyError> {
    crate::api::check_size("input", text)?;
    if let Some(parsed) = parse_common(text) {
        return Ok(parsed);
    }
    let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::json("input", &e))?;
    let Value::Object(mut m) = v else {
        return Err(bad(format!(
            "input is {}, expected an object with `input` and `now_ms`; see docs/runtime.md",
            crate::json_kind(&v)
        )));
    };
    let kind = match m.remove("input") {
        Some(Value::String(s)) => s,
        _ => {
            return Err(bad(
                "input has no string `input` member; name the input kind, e.g. {\"input\":\"step\",...}",
            ));
        }
    };
    let now = m.remove("now_ms").and_then(|n| n.as_u64()).ok_or_else(|| {
        bad(format!(
            "input `{kind}` has no integer `now_ms`; pass the host clock in Unix ms"
        ))
    })?;
    let mut take = |k: &str| m.remove(k);
    let input = match kind.as_str() {
        "run" => {
            let run_id = match take("run_id") {
                Some(Value::String(s)) if !s.is_empty() => s,
                _ => {
                    return Err(bad(
                        "input `run` needs a non-empty string `run_id`; name the run",
                    ));
                }
            };
            check_id("run_id", &run_id)?;
            let seed = match take("seed") {
                None | Some(Value::Null) => None,
                Some(s) => Some(s.as_u64().ok_or_else(|| {
                    bad("`seed` must be a non-negative integer below 2^64; pass a whole number")
                })?),
            };
            let config = run_config(take("config"))?;
            let first = match take("step") {
                None | Some(Value::Null) => {
                    if !matches!(take("end"), None | Some(Value::Null)) {
                        return Err(bad(
                            "input `run`: `end` goes with a `step` (the run's first step); omit it, or give the step",
                        ));
                    }
                    None
                }
                Some(spec) => {
                    let (mut spec, end) = first_step("run", spec, take("end"))?;
                    spec.read_stops_batch = read_stops_batch(take("read_stops_batch"))?;
                    Some(Box::new((spec, end)))
                }
            };
            let started_ms = match take("started_ms") {
                None | Some(Value::Null) => None,
                Some(s) => Some(s.as_u64().ok_or_else(|| {
                    bad("input `run`: `started_ms` must be a non-negative integer of Unix ms")
                })?),
            };
            Input::Run {
                run_id,
                seed,
                config,
                first,
                started_ms,
            }
        }
        "step" => {
            let spec = take("step").ok_or_else(|| bad("input `step` needs a `step` object"))?;
            let (mut spec, end) = first_step("step", spec, take("end"))?;
            spec.read_stops_batch = read_stops_batch(take("read_stops_batch"))?;
            step_input(spec, end)
        }
        "fanout" => {
            let spec = take("fanout").ok_or_else(|| bad("input `fanout` needs a `fanout` object"))?;
            let spec: FanoutSpec = crate::from_value(&spec).map_err(|e| {
                bad(format!(
                    "`fanout`: {e}; it is {{\"id\", \"min_results\", \"branches\": [step, ..]}}"
                ))
            })?;
            check_fanout(&spec)?;
            Input::Fanout(spec)
        }
        "joined" => match take("states") {
            Some(Value::Array(states)) => Input::Joined(
                states
                    .into_iter()
                    .map(|s| match s {
                        Value::String(s) => Ok(s),
                        _ => Err(bad(
                            "input `joined`: every member of `states` is a branch's state, JSON text",
                        )),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            _ => {
                return Err(bad(
                    "input `joined` needs `states`: each branch's final state (JSON text), in branch order",
                ));
            }
        },
        "read" => match take("values") {
            Some(Value::Object(values)) => {
                let versions = match take("versions") {
                    None | Some(Value::Null) => Default::default(),
                    Some(v) => crate::from_value(&v).map_err(|e| {
                        bad(format!(
                            "input `read`: `versions` is key -> store version, a positive integer ({e}); omit it if the store has none"
                        ))
                    })?,
                };
                let claim_stops_batch = match take("claim_stops_batch") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => b,
                    Some(_) => {
                        return Err(bad(
                            "input `read`: `claim_stops_batch` must be a boolean; send true only if the host stops a batch at a `claim` that fails",
                        ));
                    }
                };
                Input::Read {
                    values,
                    versions,
                    claim_stops_batch,
                }
            }
            _ => {
                return Err(bad(
                    "input `read` needs a `values` object: key -> stored value or null",
                ));
            }
        },
        "swapped" => Input::Swapped {
            ok: take("ok")
                .and_then(|b| b.as_bool())
                .ok_or_else(|| bad("input `swapped` needs a boolean `ok`"))?,
            current: take("current").unwrap_or(Value::Null),
            version: match take("version") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().ok_or_else(|| {
                    bad("input `swapped`: `version` is the store version, a positive integer or null")
                })?),
            },
        },
        "claimed" => Input::Claimed {
            ok: take("ok")
                .and_then(|b| b.as_bool())
                .ok_or_else(|| bad("input `claimed` needs a boolean `ok`"))?,
            current: take("current").unwrap_or(Value::Null),
        },
        "attempt" => {
            let took = match take("took_ms") {
                None | Some(Value::Null) => None,
                Some(t) => Some(t.as_u64().ok_or_else(|| {
                    bad("input `attempt`: `took_ms` is how long the call took in ms, a non-negative integer")
                })?),
            };
            let result = take("result").ok_or_else(|| bad("input `attempt` needs a `result`"))?;
            Input::Attempt(CallResult::from_json(result)?, took)
        }
        "decision" => {
            let decision = match take("decision") {
                Some(Value::String(s)) => {
                    serde_json::from_str(&s).map_err(|e| PolicyError::json("decision", &e))?
                }
                Some(d @ Value::Object(_)) => d,
                _ => {
                    return Err(bad(
                        "input `decision` needs the policy's decision (object or JSON text)",
                    ));
                }
            };
            let policy = match take("policy") {
                None | Some(Value::Null) => None,
                Some(p) => {
                    super::decision_log::check_policy(&p)?;
                    Some(p)
                }
            };
            Input::Decision { decision, policy }
        }
        "slept" => Input::Slept,
        "restored" => Input::Restored(take("ok").and_then(|b| b.as_bool()).unwrap_or(true)),
        "cancel" => Input::Cancel,
        "end" => Input::End,
        "recover" => Input::Recover,
        other => {
            return Err(bad(format!(
                "unknown input {other:?}; use run, step, fanout, read, claimed, swapped, attempt, decision, slept, restored, joined, cancel, end or recover"
            )));
        }
    };
    Ok((input, now))
}

/// A run's `config` member (absent or null: the defaults), checked.
pub(super) fn run_config(config: Option<Value>) -> Result<RunConfig, PolicyError> {
    let config: RunConfig = match config {
        None | Some(Value::Null) => RunConfig::default(),
        Some(c) => crate::from_value(&c).map_err(|e| {
            PolicyError::new(
                ErrorKind::InvalidConfig,
                format!("run `config`: {e}; see docs/runtime.md for its members"),
            )
        })?,
    };
    if config.in_flight_wait_ms > crate::config::MAX_MS {
        return Err(PolicyError::new(
            ErrorKind::InvalidConfig,
            format!(
                "run `config`: in_flight_wait_ms is {}; give 0..{} ms (e.g. 5000), 0 to end a step whose key is in flight at once",
                config.in_flight_wait_ms,
                crate::config::MAX_MS
            ),
        ));
    }
    Ok(config)
}

/// The `step` and `end` members of a `step` input (or of a `run` input
/// that starts its first step), checked.
fn first_step(
    kind: &str,
    spec: Value,
    end: Option<Value>,
) -> Result<(StepSpec, bool), PolicyError> {
    let spec: StepSpec = crate::from_value(&spec)
        .map_err(|e| bad(format!("`step`: {e}; see docs/runtime.md for its members")))?;
    check_step(&spec, "step")?;
    let end = match end {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => {
            return Err(bad(format!(
                "input `{kind}`: `end` is a boolean (true: end the run when the step finishes); omit it to keep the run open"
            )));
        }
    };
    Ok((spec, end))
}

/// A step input's `read_stops_batch`: a boolean, or none (false).
fn read_stops_batch(v: Option<Value>) -> Result<bool, PolicyError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(bad(
            "`read_stops_batch` must be a boolean; send true only if the host stops a batch at a `read` marked `go_on_if_absent` that found a value",
        )),
    }
}

/// A `step` input, fused with the run's `end` when `end` is true.
pub(super) fn step_input(spec: StepSpec, end: bool) -> Input {
    if end {
        Input::StepThenEnd(spec)
    } else {
        Input::Step(spec)
    }
}

/// The longest name the loop takes, in UTF-8 bytes: a run id, a step or
/// fan-out id, a tool, a target or fallback, a replayed record's id. A name
/// is part of store keys, events and every state; a payload belongs in `args`.
pub const MAX_ID_BYTES: usize = 512;

/// Refuse a name over [`MAX_ID_BYTES`].
pub fn check_id(what: &str, name: &str) -> Result<(), PolicyError> {
    if name.len() > MAX_ID_BYTES {
        return Err(PolicyError::new(
            ErrorKind::TooLarge,
            format!(
                "`{what}` is {} bytes, over the {MAX_ID_BYTES}-byte limit of a name; use a shorter name (a hash of a long one) and put data in `args`",
                name.len()
            ),
        ));
    }
    Ok(())
}

/// [`check_id`] of member `member` of `what`, its name written only to
/// refuse it.
fn check_member(what: &str, member: &str, name: &str) -> Result<(), PolicyError> {
    if name.len() > MAX_ID_BYTES {
        return check_id(&format!("{what}.{member}"), name);
    }
    Ok(())
}

/// A step's members the types do not check.
pub(super) fn check_step(spec: &StepSpec, what: &str) -> Result<(), PolicyError> {
    if spec.id.is_empty() || spec.tool.is_empty() {
        return Err(bad(format!("`{what}` needs a non-empty `id` and `tool`")));
    }
    check_member(what, "id", &spec.id)?;
    check_member(what, "tool", &spec.tool)?;
    if let Some(t) = &spec.target {
        check_member(what, "target", t)?;
    }
    for f in &spec.fallbacks {
        check_member(what, "fallbacks[]", f)?;
    }
    if let Some(c) = &spec.call
        && crate::model::CallKind::parse(c).is_none()
    {
        return Err(bad(format!(
            "`{what}.call` is {c:?}; use tool, llm or agent"
        )));
    }
    if let Some(r) = &spec.replay_of {
        let hex = r.key.len() == 64
            && r.key
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(bad(format!(
                "`{what}.replay_of.key` is {:?}; pass the dead-letter record's `key` unchanged (64 lowercase hex digits)",
                r.key
            )));
        }
        if r.n == 0 || r.n > MAX_SAFE_INTEGER {
            return Err(bad(format!(
                "`{what}.replay_of.n` is {}; replays count from 1 (at most 2^53 - 1)",
                r.n
            )));
        }
        if r.id.is_empty() {
            return Err(bad(format!(
                "`{what}.replay_of.id` is empty; pass the dead-letter record's id"
            )));
        }
        check_member(what, "replay_of.id", &r.id)?;
    }
    Ok(())
}

/// A fan-out needs an id, branches with distinct ids, and 1 <= min_results <= branches.
pub(super) fn check_fanout(spec: &FanoutSpec) -> Result<(), PolicyError> {
    if spec.id.is_empty() {
        return Err(bad("`fanout` needs a non-empty `id`"));
    }
    check_id("fanout.id", &spec.id)?;
    if spec.branches.is_empty() {
        return Err(bad("`fanout.branches` is empty; give at least one step"));
    }
    let n = spec.branches.len();
    if spec.min_results == 0 || usize::try_from(spec.min_results).map_or(true, |k| k > n) {
        return Err(bad(format!(
            "`fanout.min_results` is {}; it must be between 1 and the number of branches ({n})",
            spec.min_results
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(spec.id.as_str());
    for b in &spec.branches {
        check_step(b, "fanout.branches[]")?;
        if b.replay_of.is_some() {
            return Err(bad(format!(
                "fan-out {:?}: branch {:?} has `replay_of`; replay a record as a step of its own",
                spec.id, b.id
            )));
        }
        if !seen.insert(b.id.as_str()) {
            return Err(bad(format!(
                "fan-out {:?}: the id {:?} is used twice; give every branch its own id, distinct from the fan-out's",
                spec.id, b.id
            )));
        }
    }
    Ok(())
}
