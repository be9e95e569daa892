//! Every test file of this folder in one test binary (one link instead of one
//! per file). Each file is a module here and keeps its own name as the test
//! path prefix: `cargo test --release -p agent-recovery-cli --test suite
//! cli_dlq::` runs `cli_dlq.rs`. `suite_registry` (host/tests) fails when a file is
//! neither a module here nor a `[[test]]` of Cargo.toml.

#![allow(
    clippy::duplicate_mod,
    reason = "each file declares the helper modules it uses (common, ...), as when it was a binary of its own"
)]

#[path = "cli.rs"]
mod cli;
#[path = "cli_cache.rs"]
mod cli_cache;
#[path = "cli_dlq.rs"]
mod cli_dlq;
#[path = "cli_errors.rs"]
mod cli_errors;
#[path = "cli_fleet.rs"]
mod cli_fleet;
#[path = "cli_human.rs"]
mod cli_human;
#[path = "cli_policy_test.rs"]
mod cli_policy_test;
#[path = "cli_precompiled.rs"]
mod cli_precompiled;
#[path = "cli_render.rs"]
mod cli_render;
#[path = "cli_replay.rs"]
mod cli_replay;
#[path = "cli_serve.rs"]
mod cli_serve;
#[path = "cli_signing.rs"]
mod cli_signing;
#[path = "cli_simulate.rs"]
mod cli_simulate;
#[path = "../../host/tests/suite_registry.rs"]
mod suite_registry;
#[path = "telemetry_trace_out.rs"]
mod telemetry_trace_out;
