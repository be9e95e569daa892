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

/// `serde_json::from_value`, read through the value's JSON text: every type is
/// then deserialized by the one text reader in the component, not also by
/// `Value`'s deserializer (each reader instantiates every derive of a type
/// tree again: about 140 KB of code for the runtime's state and inputs). Only
/// for values read off the hot paths (the text is written and read again): the
/// stored breaker, read on every step of a target that failed, keeps
/// `serde_json::from_value`.
/// Same result and same error text as `from_value`: the text lists an object's
/// members in the order `from_value` visits them, and the error leaves out the
/// position (`at line 1 column N`) that only the text reader has.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    v: &serde_json::Value,
) -> Result<T, String> {
    serde_json::from_str(&v.to_string()).map_err(|e| {
        let text = e.to_string();
        let at = format!(" at line {} column {}", e.line(), e.column());
        match text.strip_suffix(at.as_str()) {
            Some(message) if e.line() != 0 => message.to_owned(),
            _ => text,
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Shape {
        a: u64,
        #[serde(default)]
        b: Option<String>,
        c: Vec<f64>,
        #[serde(default)]
        d: Option<Value>,
    }

    /// `crate::from_value` gives what `serde_json::from_value` gives: the same
    /// value, or the same error text.
    #[test]
    fn from_value_reads_and_fails_as_serde_json_does() {
        let cases = [
            json!({"a": 1, "c": [1.5, 0.1, 1e300, -0.0]}),
            json!({"a": u64::MAX, "b": "é\"\n\u{1}", "c": [9007199254740993.0], "d": {"z": [1, {"y": null}]}}),
            json!({"a": -1, "c": []}),
            json!({"a": 1.5, "c": []}),
            json!({"a": "7", "c": []}),
            json!({"a": 1}),
            json!({"a": 1, "c": [], "zz": 0}),
            json!({"zz": 0, "b": 2, "a": 1}),
            json!({"a": 1, "c": [true]}),
            json!([1, "x", [2.5]]),
            json!(null),
            json!("text"),
        ];
        for v in cases {
            let ours = crate::from_value::<Shape>(&v);
            let theirs = serde_json::from_value::<Shape>(v.clone()).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{v}");
        }
    }
}
