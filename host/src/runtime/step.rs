//! A step: what to call, where, and how to undo it.

use serde_json::Value;

use crate::component::gen_::runtime::typed::{CallKind, ReplayOf, StepSpec};
use crate::error::{Error, ErrorKind};

/// One call the runtime makes: the operation on a target, a fallback target,
/// or a compensation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// `operation`, `fallback` or `compensation`.
    pub kind: String,
    /// The step id.
    pub step: String,
    /// The target to call (the step's target, a fallback, or for a
    /// compensation the target that succeeded).
    pub target: String,
    /// The idempotency key: the same on every attempt of a step, on every target.
    pub key: String,
    /// Call number of this key, from 1.
    pub attempt: u32,
    /// Give up after this long and report a timeout observation; none: no limit.
    pub timeout_ms: Option<u64>,
}

/// What a call returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It succeeded, with this value.
    Ok(Value),
    /// It failed: an observation (JSON text, docs/observation.md).
    Failed(String),
    /// A raw response (observation-shaped JSON text) for the component to
    /// check: a 200 carrying a refusal is a failure, a 304 is not.
    Response(String),
}

type Operation<'a> = Box<dyn FnMut(&Call) -> Outcome + Send + 'a>;
type Hook<'a> = Box<dyn FnMut() -> bool + Send + 'a>;

/// A step of a run.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`call`](Self::call) | none: the kind is read from each observation |
/// | [`args`](Self::args) | `null` |
/// | [`target`](Self::target) | the tool name |
/// | [`fallbacks`](Self::fallbacks) | none |
/// | [`side_effect`](Self::side_effect) | false |
/// | [`compensate`](Self::compensate) | none |
/// | [`checkpoint`](Self::checkpoint) | none (`restore` decisions escalate) |
/// | [`idempotent`](Self::idempotent) | unknown |
pub struct Step<'a> {
    pub(crate) id: String,
    pub(crate) tool: String,
    pub(crate) call: Option<String>,
    pub(crate) args: Value,
    pub(crate) target: Option<String>,
    pub(crate) fallbacks: Vec<String>,
    pub(crate) side_effect: bool,
    pub(crate) idempotent: Option<bool>,
    pub(crate) operation: Operation<'a>,
    pub(crate) compensate: Option<Operation<'a>>,
    pub(crate) checkpoint: Option<Hook<'a>>,
    /// `{"key","n","id"}` for a replay of a dead-letter record.
    pub(crate) replay_of: Option<Value>,
    /// No operation is registered for the tool (`recover`, a replay): its
    /// calls are answered `unknown-tool`, not made.
    pub(crate) unknown_tool: bool,
    /// The step has a compensation (the loop's `compensation`) even
    /// without an undo here: a replayed record's, whose operations lack it
    /// (its calls are answered `no-compensation`).
    pub(crate) compensation_declared: bool,
}

impl<'a> Step<'a> {
    /// Refuse a name over [`MAX_ID_BYTES`](super::MAX_ID_BYTES) before the loop sees it.
    pub(crate) fn check_names(&self, what: &str) -> Result<(), crate::error::Error> {
        use super::names::check;
        check(&format!("{what}.id"), &self.id)?;
        check(&format!("{what}.tool"), &self.tool)?;
        if let Some(t) = &self.target {
            check(&format!("{what}.target"), t)?;
        }
        self.fallbacks
            .iter()
            .try_for_each(|f| check(&format!("{what}.fallbacks[]"), f))
    }

    /// A step `id` calling `tool` through `operation` (called with each [`Call`]).
    pub fn new(id: &str, tool: &str, operation: impl FnMut(&Call) -> Outcome + Send + 'a) -> Self {
        Step {
            id: id.to_owned(),
            tool: tool.to_owned(),
            call: None,
            args: Value::Null,
            target: None,
            fallbacks: Vec::new(),
            side_effect: false,
            idempotent: None,
            operation: Box::new(operation),
            compensate: None,
            checkpoint: None,
            replay_of: None,
            unknown_tool: false,
            compensation_declared: false,
        }
    }
    /// `tool`, `llm` or `agent`: selects the backoff parameters.
    pub fn call(mut self, kind: &str) -> Self {
        self.call = Some(kind.to_owned());
        self
    }
    /// The arguments (part of the idempotency key and the dead-letter record).
    pub fn args(mut self, args: Value) -> Self {
        self.args = args;
        self
    }
    /// The circuit key of the first target (a host, a model name).
    pub fn target(mut self, target: &str) -> Self {
        self.target = Some(target.to_owned());
        self
    }
    /// Targets to fall back to, in order (a quota refusal on one moves to the next).
    pub fn fallbacks<S: AsRef<str>>(mut self, targets: &[S]) -> Self {
        self.fallbacks = targets.iter().map(|t| t.as_ref().to_owned()).collect();
        self
    }
    /// The step changes external state.
    pub fn side_effect(mut self, yes: bool) -> Self {
        self.side_effect = yes;
        self
    }
    /// Whether repeating the call is safe; `false` makes ambiguous failures fail.
    pub fn idempotent(mut self, yes: bool) -> Self {
        self.idempotent = Some(yes);
        self
    }
    /// The undo of this step's side effect, run (in reverse order of the steps)
    /// when a later step is exhausted or the run is cancelled.
    pub fn compensate(mut self, undo: impl FnMut(&Call) -> Outcome + Send + 'a) -> Self {
        self.compensate = Some(Box::new(undo));
        self
    }
    /// The checkpoint hook for `restore` decisions: restore, then return true.
    pub fn checkpoint(mut self, restore: impl FnMut() -> bool + Send + 'a) -> Self {
        self.checkpoint = Some(Box::new(restore));
        self
    }

    /// The loop's step spec (the `step` input); `what` names the step in
    /// an error (`step`, `fanout.branches[]`).
    pub(crate) fn spec(&self, what: &str) -> Result<StepSpec, Error> {
        let call = match self.call.as_deref() {
            None => None,
            Some("tool") => Some(CallKind::Tool),
            Some("llm") => Some(CallKind::Llm),
            Some("agent") => Some(CallKind::Agent),
            Some(other) => {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("`{what}.call` is {other:?}; use tool, llm or agent"),
                ));
            }
        };
        let replay_of = match &self.replay_of {
            None => None,
            Some(r) => Some(replay_of(r).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "`{what}.replay_of` is {r}; pass the dead-letter record's {{\"key\", \"n\", \"id\"}} (strings and a whole number)"
                    ),
                )
            })?),
        };
        Ok(StepSpec {
            id: self.id.clone(),
            tool: self.tool.clone(),
            call,
            args: self.args.to_string(),
            target: self.target.clone(),
            fallbacks: self.fallbacks.clone(),
            side_effect: self.side_effect,
            compensation: self.compensate.is_some() || self.compensation_declared,
            checkpoint: self.checkpoint.is_some(),
            idempotent: self.idempotent,
            replay_of,
        })
    }
}

/// A `{"key","n","id"}` replay mark, typed.
fn replay_of(r: &Value) -> Option<ReplayOf> {
    Some(ReplayOf {
        key: r.get("key")?.as_str()?.to_owned(),
        n: r.get("n")?.as_u64()?,
        id: r.get("id")?.as_str()?.to_owned(),
    })
}
