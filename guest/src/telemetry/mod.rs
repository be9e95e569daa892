//! The mapping of a run to OpenTelemetry spans, span events, attributes,
//! metrics and log records (docs/telemetry.md, "The mapping"), sans I/O.
//!
//! A host feeds the [`Observation`]s of one lane (its start, each call's
//! start and end, each `decide` answer, each timeline event, each `append`,
//! the `finish`) to [`map_lane`] and carries out the [`Instruction`]s it gets
//! back with its OpenTelemetry API, keeping a map from [`SpanKey`] to live
//! spans (the rules of that interpreter are in
//! `wit/agent-recovery@0.3.0/telemetry.wit`). The JSON forms of both are
//! those of `tests/telemetry-map/` and of the `map-lane-json` export.

mod lane;
mod types;

pub use lane::{map_lane, map_lane_json};
pub use types::{
    AttrValue, Attribute, Instruction, LaneKind, LaneStart, Mapped, Observation, ObservationKind,
    PolicyId, SpanKey,
};
