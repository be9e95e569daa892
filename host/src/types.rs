//! The typed values of the contract, generated from `wit/` by `bindgen!`.
//!
//! They mirror the WIT records and enums one to one (WIT docs included); use
//! them with [`Policy::classify`](crate::Policy::classify),
//! [`Policy::decide`](crate::Policy::decide) and friends. Their JSON twins
//! (snake_case) are what the `*_json` methods take and return.

pub use crate::component::gen_::exports::agent::recovery::observation::{
    Exception, Failure, HttpResponse, NetworkError, Observation, RpcMessage, RpcProtocol, Timeout,
};
pub use crate::component::gen_::exports::agent::recovery::render::RenderFormat;
pub use crate::component::gen_::exports::agent::recovery::types::{
    Action, BackoffConfig, CallKind, Category, CodeInfo, Context, Decision, Envelope, ErrorClass,
    PolicyConfig, PolicyInfo, Severity, SourceKind, Stability, TimeoutPhase, Upstream,
};
