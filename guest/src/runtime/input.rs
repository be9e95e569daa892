//! What the host feeds the loop.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
}

impl CallResult {
    fn from_json(v: Value) -> Result<Self, PolicyError> {
        if v.as_str() == Some("ok") {
            return Ok(CallResult::Ok(Value::Null));
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
            "`result` must be \"ok\", {\"ok\": value}, {\"failed\": observation} or {\"response\": outcome}; see docs/runtime.md",
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
    },
    /// A step starts.
    Step(StepSpec),
    /// Store values asked for by `read` (null: absent).
    Read(serde_json::Map<String, Value>),
    /// The answer to `claim`: whether the key was created, else what is there.
    Claimed {
        /// Created.
        ok: bool,
        /// The value found instead (null: none).
        current: Value,
    },
    /// A call ended.
    Attempt(CallResult),
    /// The active policy's decision (object or JSON text).
    Decision(Value),
    /// A sleep ended.
    Slept,
    /// The checkpoint hook ran.
    Restored(bool),
    /// The caller cancels the run.
    Cancel,
}

fn bad(msg: impl Into<String>) -> PolicyError {
    PolicyError::new(ErrorKind::InvalidArgument, msg)
}

/// Parse an input: `{"input": kind, "now_ms": ms, ...}`. Returns it with `now_ms`.
pub fn parse(text: &str) -> Result<(Input, u64), PolicyError> {
    crate::api::check_size("input", text)?;
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
            let seed = match take("seed") {
                None | Some(Value::Null) => None,
                Some(s) => Some(s.as_u64().ok_or_else(|| {
                    bad("`seed` must be a non-negative integer below 2^64; pass a whole number")
                })?),
            };
            let config = match take("config") {
                None | Some(Value::Null) => RunConfig::default(),
                Some(c) => serde_json::from_value(c).map_err(|e| {
                    PolicyError::new(
                        ErrorKind::InvalidConfig,
                        format!("run `config`: {e}; see docs/runtime.md for its members"),
                    )
                })?,
            };
            Input::Run {
                run_id,
                seed,
                config,
            }
        }
        "step" => {
            let spec = take("step").ok_or_else(|| bad("input `step` needs a `step` object"))?;
            let spec: StepSpec = serde_json::from_value(spec)
                .map_err(|e| bad(format!("`step`: {e}; see docs/runtime.md for its members")))?;
            if spec.id.is_empty() || spec.tool.is_empty() {
                return Err(bad("`step` needs a non-empty `id` and `tool`"));
            }
            if let Some(c) = &spec.call
                && crate::model::CallKind::parse(c).is_none()
            {
                return Err(bad(format!("`step.call` is {c:?}; use tool, llm or agent")));
            }
            Input::Step(spec)
        }
        "read" => match take("values") {
            Some(Value::Object(values)) => Input::Read(values),
            _ => {
                return Err(bad(
                    "input `read` needs a `values` object: key -> stored value or null",
                ));
            }
        },
        "claimed" => Input::Claimed {
            ok: take("ok")
                .and_then(|b| b.as_bool())
                .ok_or_else(|| bad("input `claimed` needs a boolean `ok`"))?,
            current: take("current").unwrap_or(Value::Null),
        },
        "attempt" => Input::Attempt(CallResult::from_json(
            take("result").ok_or_else(|| bad("input `attempt` needs a `result`"))?,
        )?),
        "decision" => match take("decision") {
            Some(Value::String(s)) => Input::Decision(
                serde_json::from_str(&s).map_err(|e| PolicyError::json("decision", &e))?,
            ),
            Some(d @ Value::Object(_)) => Input::Decision(d),
            _ => {
                return Err(bad(
                    "input `decision` needs the policy's decision (object or JSON text)",
                ));
            }
        },
        "slept" => Input::Slept,
        "restored" => Input::Restored(take("ok").and_then(|b| b.as_bool()).unwrap_or(true)),
        "cancel" => Input::Cancel,
        other => {
            return Err(bad(format!(
                "unknown input {other:?}; use run, step, read, claimed, attempt, decision, slept, restored or cancel"
            )));
        }
    };
    Ok((input, now))
}
