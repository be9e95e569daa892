//! Every test file of this folder in one test binary (one link of wasmtime
//! instead of one per file). Each file is a module here and keeps its own
//! name as the test path prefix: `cargo test --release -p agent-recovery
//! --test suite retry::` runs `retry.rs`. A file that needs a process of its
//! own is a `[[test]]` of Cargo.toml instead; `suite_registry.rs` fails when a
//! file is neither.

#![allow(
    clippy::duplicate_mod,
    reason = "each file declares the helper modules it uses (common, ...), as when it was a binary of its own"
)]

#[path = "bad_input.rs"]
mod bad_input;
#[path = "breaker_policy.rs"]
mod breaker_policy;
#[path = "breaker_rate_threads.rs"]
mod breaker_rate_threads;
#[path = "cache.rs"]
mod cache;
#[path = "deadletters.rs"]
mod deadletters;
#[path = "decision_log.rs"]
mod decision_log;
#[path = "documents.rs"]
mod documents;
#[cfg(feature = "door")]
#[path = "door.rs"]
mod door;
#[cfg(all(feature = "door", feature = "sqlite"))]
#[path = "door_async.rs"]
mod door_async;
#[cfg(feature = "tower")]
#[path = "door_tower.rs"]
mod door_tower;
#[cfg(feature = "sqlite")]
#[path = "durability.rs"]
mod durability;
#[cfg(feature = "sqlite")]
#[path = "durability_readme.rs"]
mod durability_readme;
#[path = "fanout.rs"]
mod fanout;
#[cfg(feature = "sqlite")]
#[path = "fleet.rs"]
mod fleet;
#[cfg(all(feature = "sqlite", feature = "redis"))]
#[path = "fleet_runtime.rs"]
mod fleet_runtime;
#[path = "hostile.rs"]
mod hostile;
#[path = "hosts.rs"]
mod hosts;
#[path = "hosts_cache.rs"]
mod hosts_cache;
#[path = "interrupt.rs"]
mod interrupt;
#[path = "loops.rs"]
mod loops;
#[path = "names.rs"]
mod names;
#[path = "properties.rs"]
mod properties;
#[path = "readme_rust_runtime.rs"]
mod readme_rust_runtime;
#[path = "registry.rs"]
mod registry;
#[path = "retry.rs"]
mod retry;
#[path = "runtime_agent.rs"]
mod runtime_agent;
#[path = "sandbox.rs"]
mod sandbox;
#[cfg(feature = "sqlite")]
#[path = "scenarios.rs"]
mod scenarios;
#[path = "signing.rs"]
mod signing;
#[cfg(feature = "sqlite")]
#[path = "store_properties.rs"]
mod store_properties;
#[cfg(all(feature = "sqlite", feature = "redis"))]
#[path = "store_redis_cluster.rs"]
mod store_redis_cluster;
#[cfg(feature = "sqlite")]
#[path = "store_sqlite.rs"]
mod store_sqlite;
#[path = "store_vectors.rs"]
mod store_vectors;
#[path = "suite_registry.rs"]
mod suite_registry;
#[path = "swap.rs"]
mod swap;
#[path = "swap_load.rs"]
mod swap_load;
#[path = "telemetry.rs"]
mod telemetry;
#[path = "telemetry_map.rs"]
mod telemetry_map;
#[path = "telemetry_swaps.rs"]
mod telemetry_swaps;
#[path = "typed.rs"]
mod typed;
#[path = "vectors.rs"]
mod vectors;
#[path = "watch.rs"]
mod watch;
