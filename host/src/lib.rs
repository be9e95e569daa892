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
//! # The sandbox
//!
//! A component gets no files, no environment, no arguments, no stdio and no
//! network; see [`Limits`] for the memory, fuel and input-size limits of each
//! call. A trap, a runaway loop or a memory blow-up comes back as an
//! [`Error`], never as a panic, and the instance that failed is discarded.
//!
//! [Wasmtime]: https://wasmtime.dev

#![deny(missing_docs)]

mod cache;
mod calls;
mod error;
mod gen_;
mod limits;
mod policy;
mod pool;
mod sandbox;
pub mod types;
mod verify;

pub use error::{Error, ErrorKind, PolicyErrorKind, Result, utf8};
pub use limits::Limits;
pub use policy::{Loader, Policy, WORLD};
pub use verify::Verified;
