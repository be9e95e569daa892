//! What crosses the telemetry mapping: observations in, instructions out.
//! Their serde forms are the JSON of `tests/telemetry-map/` and of
//! `map-lane-json`.

use serde::{Deserialize, Serialize};

/// An attribute's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrValue {
    /// A string.
    Text(String),
    /// An integer.
    Int(i64),
    /// A double.
    Float(f64),
    /// A boolean.
    Flag(bool),
}

/// One attribute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attribute {
    /// Its name.
    pub key: String,
    /// Its value.
    pub value: AttrValue,
}

impl Attribute {
    pub(crate) fn text(key: &str, v: impl Into<String>) -> Attribute {
        Attribute {
            key: key.to_owned(),
            value: AttrValue::Text(v.into()),
        }
    }

    pub(crate) fn int(key: &str, v: u64) -> Attribute {
        Attribute {
            key: key.to_owned(),
            value: AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX)),
        }
    }

    pub(crate) fn flag(key: &str, v: bool) -> Attribute {
        Attribute {
            key: key.to_owned(),
            value: AttrValue::Flag(v),
        }
    }
}

/// The live spans of one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKey {
    /// The lane's own span (`agent_recovery.step` or `agent_recovery.fanout`).
    Lane,
    /// The open compensation chain.
    Chain,
    /// The pending attempt.
    Attempt,
}

/// A policy's identity (the `agent_recovery.policy.*` attributes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyId {
    /// `meta.info` name.
    pub name: String,
    /// `meta.info` version.
    pub version: String,
    /// sha256 of the component bytes.
    pub sha256: String,
}

/// What a lane's own span stands for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaneKind {
    /// A step or a fan-out's branch.
    Step {
        /// Step id.
        id: String,
        /// Tool.
        tool: String,
        /// First target; none: the tool.
        #[serde(default)]
        target: Option<String>,
    },
    /// A fan-out.
    Fanout {
        /// Its id.
        id: String,
        /// Its `min_results`.
        min_results: u32,
        /// Its number of branches.
        branches: u32,
    },
    /// A cancellation between steps: no span of its own.
    Bare,
}

/// The lane starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneStart {
    /// The run id.
    pub run_id: String,
    /// What the lane's span stands for.
    pub kind: LaneKind,
    /// The policy that decides now.
    #[serde(default)]
    pub policy: Option<PolicyId>,
}

/// What the host observed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationKind {
    /// The lane starts.
    Lane(LaneStart),
    /// A `call` effect starts.
    CallStart {
        /// `operation`, `fallback` or `compensation`.
        role: String,
        /// Step id.
        step: String,
        /// Target.
        target: String,
        /// Idempotency key.
        key: String,
        /// Call number of the key.
        attempt: u32,
        /// Timeout, if any.
        #[serde(default)]
        timeout_ms: Option<u64>,
    },
    /// The call returned.
    CallEnd,
    /// The active policy answered a `decide` effect.
    Decided {
        /// The decision, JSON text.
        decision: String,
        /// The policy that answered.
        #[serde(default)]
        policy: Option<PolicyId>,
    },
    /// A timeline event, JSON text.
    Event(String),
    /// An `append` effect.
    Append {
        /// The stream.
        stream: String,
        /// The record, JSON text.
        record: String,
    },
    /// The `finish` effect.
    Finish {
        /// Its outcome (`ok`, `failed`, ...).
        outcome: String,
        /// Its envelope, JSON text.
        #[serde(default)]
        envelope: Option<String>,
    },
    /// The lane ended without a `finish`.
    Abandon,
}

/// One observation, on the runtime's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The runtime's clock, ms.
    pub now_ms: u64,
    /// What happened.
    pub kind: ObservationKind,
}

/// What the host's OpenTelemetry binding does next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Instruction {
    /// Start a span (kind `INTERNAL`).
    StartSpan {
        /// The key it is live under.
        key: SpanKey,
        /// Its parent; none: the lane's starting context.
        parent: Option<SpanKey>,
        /// The span name.
        name: String,
        /// Start time, ms.
        start_ms: u64,
        /// Attributes.
        attributes: Vec<Attribute>,
    },
    /// Add a span event.
    AddEvent {
        /// The span.
        key: SpanKey,
        /// The event name.
        name: String,
        /// Its time, ms.
        time_ms: u64,
        /// Attributes.
        attributes: Vec<Attribute>,
    },
    /// Link the span to the context kept for `step`.
    AddLink {
        /// The span.
        key: SpanKey,
        /// The step id.
        step: String,
        /// Attributes.
        attributes: Vec<Attribute>,
    },
    /// Set attributes.
    SetAttributes {
        /// The span.
        key: SpanKey,
        /// Attributes.
        attributes: Vec<Attribute>,
    },
    /// Set status `ERROR`.
    SetError {
        /// The span.
        key: SpanKey,
        /// Description.
        description: String,
    },
    /// End a span.
    EndSpan {
        /// The span.
        key: SpanKey,
        /// End time, ms.
        end_ms: u64,
    },
    /// Keep the span's context by step id, for the run.
    RememberStep {
        /// The span.
        key: SpanKey,
        /// Step id.
        step: String,
    },
    /// Record a metric.
    RecordMetric {
        /// Instrument name.
        instrument: String,
        /// Value.
        value: u64,
        /// Attributes.
        attributes: Vec<Attribute>,
    },
    /// Emit a log record (with a logger provider only).
    EmitLog {
        /// The span whose context it carries; none: the lane's starting context.
        key: Option<SpanKey>,
        /// Event name.
        event_name: String,
        /// Time, ms.
        time_ms: u64,
        /// Severity number.
        severity_number: u8,
        /// Severity text.
        severity_text: String,
        /// Body.
        body: String,
        /// Attributes.
        attributes: Vec<Attribute>,
    },
}

/// What [`map_lane`](super::map_lane) returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapped {
    /// The lane's new state, JSON text.
    pub state: String,
    /// The instructions, in order.
    pub instructions: Vec<Instruction>,
}
