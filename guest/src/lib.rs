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

// The public surface is what a policy author needs: the functions of the
// reference policy, its data types, the registry to start from, the SDK trait
// and the documentation generators. Everything else is private; the exported
// macros reach what they expand to through `__private` (not a stable API).
mod api;
mod backoff;
mod clock;
mod config;
pub mod deadletters;
mod decide;
pub mod docs;
pub mod document;
mod error;
mod export_macro;
mod headers;
mod hints;
mod idempotency;
mod json_out;
mod json_view;
mod meta;
mod model;
mod normalize;
mod observation;
mod observation_view;
mod registry;
mod render;
mod replay;
mod runtime;
pub mod scenario;
mod sdk;
pub mod telemetry;

#[cfg(all(target_arch = "wasm32", feature = "export"))]
mod bindings;

pub use api::{
    MAX_INPUT, backoff_delay, classify, classify_json, decide, decide_from, decide_json,
    idempotency_key,
};
pub use config::{
    BackoffOverrides, BreakerOverrides, BreakerRate, BreakerThresholds, Config, ConfigOverrides,
};
pub use decide::{Context, Seed};
pub use error::{ErrorKind, PolicyError};
pub use model::{
    Action, CallKind, Category, Decision, Envelope, ErrorClass, Severity, Stability, Upstream,
};
pub use normalize::{MESSAGE_PREFIX_RULES, PrefixRule};
pub use observation::Observation;
pub use registry::{CodeInfo, Registry, codes, lookup};
pub use render::{Format as RenderFormat, render_json, render_named};
pub use runtime::input::MAX_ID_BYTES;
pub use runtime::typed;
pub use runtime::{Advanced, advance, check_outcome};
pub use sdk::{PolicyInfo, RecoveryPolicy};

/// What the exported macros expand to. Not a stable API: use the items above.
#[doc(hidden)]
pub mod __private {
    pub use crate::runtime::keep_state;
    pub use serde_json;
    pub mod config {
        pub use crate::config::*;
    }
    pub mod decide {
        pub use crate::decide::*;
    }
    pub mod docs {
        pub use crate::docs::*;
    }
    pub mod headers {
        pub use crate::headers::*;
    }
    /// The output writer alone (the floor measurement of `examples/pieces.rs`).
    pub mod json_out {
        pub use crate::json_out::{decision, envelope};
    }
    pub mod meta {
        pub use crate::meta::*;
    }
    pub mod model {
        pub use crate::model::*;
    }
    pub mod observation {
        pub use crate::observation::*;
    }
    pub mod registry {
        pub use crate::registry::*;
    }
    pub mod replay {
        pub use crate::replay::*;
    }
    pub mod render {
        pub use crate::render::*;
    }
    pub mod runtime {
        pub use crate::runtime::*;
    }
    pub mod sdk {
        pub use crate::sdk::*;
    }
}

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
