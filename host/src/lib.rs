//! placeholder
pub const REFERENCE: &[u8] = include_bytes!(env!("AGENT_RECOVERY_REFERENCE_WASM"));
