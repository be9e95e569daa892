//! Hostile fixture: allocates (and touches) memory until none is left.

use agent_recovery_policy::PolicyError;
use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct MemBomb;

fn bomb() -> Result<String, PolicyError> {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![0xA5; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}

impl RecoveryPolicy for MemBomb {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-membomb".into(),
            version: "0.0.0".into(),
            description: "allocates until OOM".into(),
        }
    }
    fn classify_json(_: &str) -> Result<String, PolicyError> {
        bomb()
    }
    fn decide_json(_: &str, _: &str) -> Result<String, PolicyError> {
        bomb()
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(MemBomb, "../../../wit/agent-recovery@0.1.0");
