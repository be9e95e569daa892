//! A [Wasmtime] host for agent-recovery policy components.
//!
//! A policy is a WebAssembly component implementing the WIT world
//! `agent:recovery/recovery-policy@0.1.0`: it normalizes a failed call (an
//! HTTP response, a JSON-RPC/MCP/A2A message, a network error, an exception,
//! a timeout) into an error envelope and decides what to do next (retry with
//! a delay, fail, re-plan, fall back, ...). This crate loads such a component
//! into a sandbox and calls it; the reference policy is embedded.
//!
//! ```
//! use agent_recovery::Policy;
//!
//! let policy = Policy::reference()?;
//! let observation = r#"{"source":"http","status":429,"headers":{"retry-after":"2"}}"#;
//! let decision = policy.decide_json(observation, r#"{"call":"tool","attempt":1,"seed":7}"#)?;
//! let decision: serde_json::Value = serde_json::from_str(&decision).unwrap();
//! assert_eq!(decision["action"], "retry");
//! # Ok::<(), agent_recovery::Error>(())
//! ```
//!
//! # Hot swap
//!
//! A [`PolicyHandle`] holds the active policy for every caller and swaps in a
//! new one at runtime, atomically, only after it passed the checks of
//! [`SwapOptions`]; a refused candidate leaves the active policy answering.
//! Every [`Answer`] names the policy that produced it. [`FailurePolicy`] says
//! what happens when the active policy fails a call, and
//! [`PolicyHandle::watch`] swaps a file in when it changes.
//!
//! # Signed policies
//!
//! [`SwapOptions::require_signature`] refuses a candidate unless its detached
//! Ed25519 signature (`FILE.sig`) is valid for one of the operator's trusted
//! keys; [`signing`] signs, verifies and reads signed policy files.
//!
//! # The sandbox
//!
//! A component may import only `wasi:cli`, `wasi:io`, `wasi:clocks` and
//! `wasi:random` (anything else is refused at load), and gets no environment,
//! no arguments and no stdio; see [`Limits`] for the memory, fuel and input-size limits of each
//! call. A trap, a runaway loop or a memory blow-up comes back as an
//! [`Error`], never as a panic, and the instance that failed is discarded.
//!
//! [Wasmtime]: https://wasmtime.dev

#![deny(missing_docs)]

mod component;
#[cfg(feature = "door")]
pub mod door;
mod error;
pub mod retry;
pub mod runtime;
pub mod signing;
pub mod store;
mod swap;
pub mod types;

pub use component::{
    Limits, Loader, PackedDocument, Policy, PolicyId, Verified, WORLD, check_decision_json,
    check_decision_json_serde, check_envelope_json, pack_document, precompile_reference,
};
pub use error::{Error, ErrorKind, PolicyErrorKind, Result, utf8};
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{Cas, MemoryStore, Store, StoreError, StoreErrorKind, Versioned};
pub use swap::{
    ActivePolicy, Answer, Event, FailurePolicy, HandleBuilder, PolicyHandle, Stats, SwapError,
    SwapOptions, SwapStage, WatchOptions, Watcher,
};
