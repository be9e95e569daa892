//! The reference recovery policy of agent-recovery.
//!
//! Pure functions over data: normalize a failed call (HTTP response, JSON-RPC /
//! MCP / A2A message, network error, exception, timeout) into an agent-readable
//! [`Envelope`], classify it, and [`decide`] the next step. No sleeping, no clock
//! reads it was not handed (but one documented fallback), no global state. The
//! same crate builds natively (tests, benches) and as a `wasm32-wasip2`
//! component, whose thin wit-bindgen glue lives in one private module.
//!
//! ```
//! let decision = agent_recovery_policy::decide_json(
//!     r#"{"source":"http","status":429,"headers":{"retry-after":"2"}}"#,
//!     r#"{"call":"tool","attempt":1,"seed":7}"#,
//! ).unwrap();
//! assert!(decision.starts_with(r#"{"action":"retry","delay_ms":2000"#));
//! ```
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod api;
pub mod backoff;
mod clock;
pub mod config;
pub mod decide;
pub mod docs;
mod error;
#[doc(hidden)]
pub mod export_macro;

/// Dependencies the exported macros use.
#[doc(hidden)]
pub mod __private {
    pub use serde_json;
}
pub mod headers;
pub mod hints;
pub mod idempotency;
pub mod meta;
pub mod model;
pub mod normalize;
pub mod observation;
pub mod registry;
pub mod render;
pub mod runtime;
pub mod sdk;

#[cfg(all(target_arch = "wasm32", feature = "export"))]
mod bindings;

pub use api::{
    MAX_INPUT, backoff_delay, classify, classify_json, decide, decide_json, idempotency_key,
};
pub use config::{Config, ConfigOverrides};
pub use decide::Context;
pub use error::{ErrorKind, PolicyError};
pub use model::{Action, CallKind, Category, Decision, Envelope, ErrorClass, Severity, Upstream};
pub use observation::Observation;
pub use render::{Format as RenderFormat, render_json};

/// The JSON type name of a value, for error messages.
pub(crate) fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
