//! Paths of the test fixtures `build.rs` builds (absolute, for `std::fs::read`).
//! The host's build script exports the same paths as `AGENT_RECOVERY_*_WASM`.

#![deny(missing_docs)]

/// The `.wasm` of `payments-policy`.
pub const PAYMENTS: &str = env!("AGENT_RECOVERY_PAYMENTS_WASM");

/// The `.wasm` of `hostile-spin`.
pub const HOSTILE_SPIN: &str = env!("AGENT_RECOVERY_HOSTILE_SPIN_WASM");

/// The `.wasm` of `hostile-membomb`.
pub const HOSTILE_MEMBOMB: &str = env!("AGENT_RECOVERY_HOSTILE_MEMBOMB_WASM");

/// The `.wasm` of `hostile-panic`.
pub const HOSTILE_PANIC: &str = env!("AGENT_RECOVERY_HOSTILE_PANIC_WASM");

/// The `.wasm` of `hostile-sneaky`.
pub const HOSTILE_SNEAKY: &str = env!("AGENT_RECOVERY_HOSTILE_SNEAKY_WASM");

/// The `.wasm` of `hostile-garbage`.
pub const HOSTILE_GARBAGE: &str = env!("AGENT_RECOVERY_HOSTILE_GARBAGE_WASM");

/// The `.wasm` of `hostile-wrong-world`.
pub const HOSTILE_WRONG_WORLD: &str = env!("AGENT_RECOVERY_HOSTILE_WRONG_WORLD_WASM");

/// The `.wasm` of `hostile-empty-smoke`.
pub const HOSTILE_EMPTY_SMOKE: &str = env!("AGENT_RECOVERY_HOSTILE_EMPTY_SMOKE_WASM");

/// The `.wasm` of `hostile-failing-smoke`.
pub const HOSTILE_FAILING_SMOKE: &str = env!("AGENT_RECOVERY_HOSTILE_FAILING_SMOKE_WASM");

/// The `.wasm` of `hostile-wrong-contract`.
pub const HOSTILE_WRONG_CONTRACT: &str = env!("AGENT_RECOVERY_HOSTILE_WRONG_CONTRACT_WASM");
