//! The component host: load a policy component into the sandbox and call it.
//!
//! - `policy.rs`: [`Policy`] and its [`Loader`]: compile, check the imports,
//!   link WASI, resolve the exports of the world.
//! - `calls.rs`: the exports of the world as methods on [`Policy`], and
//!   `output.rs`, the cheap shape check of what they return (with
//!   `output_scan.rs`, its fast path).
//! - `sandbox.rs` and `limits.rs`: what a component sees, and the memory,
//!   fuel and input-size [`Limits`] of each call.
//! - `pool.rs`: the idle instances a call takes and gives back.
//! - `cache.rs`: the optional on-disk cache of compiled components.
//! - `precompiled.rs`: the reference compiled ahead of time, shipped next to
//!   a program ([`precompile_reference`]).
//! - `identity.rs` and `verify.rs`: which policy answered ([`PolicyId`]), and
//!   the checks a host runs before it trusts one ([`Verified`]).
//! - `document.rs`: a policy document packed into the reference component.
//! - `gen_.rs`: the bindings generated from `wit/` (private).

pub(crate) mod cache;
mod calls;
mod document;
pub(crate) mod gen_;
mod identity;
mod limits;
pub(crate) mod output;
mod output_scan;
pub(crate) mod policy;
pub(crate) mod pool;
mod precompiled;
pub(crate) mod sandbox;
mod verify;

pub use document::{PackedDocument, pack_document};
pub use identity::PolicyId;
pub use limits::Limits;
pub use output::{check_decision_json, check_decision_json_serde, check_envelope_json};
pub use policy::{Loader, Policy, WORLD};
pub use precompiled::precompile_reference;
pub use verify::Verified;
