//! Hostile fixture: panics on every call (a panic in a component is a trap).

use agent_recovery_policy::PolicyError;
use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct Panicky;

impl RecoveryPolicy for Panicky {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-panic".into(),
            version: "0.0.0".into(),
            description: "panics".into(),
        }
    }
    fn classify_json(_: &str) -> Result<String, PolicyError> {
        panic!("hostile fixture: panic in classify")
    }
    fn decide_json(_: &str, _: &str) -> Result<String, PolicyError> {
        panic!("hostile fixture: panic in decide")
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(Panicky, "../../../wit/agent-recovery@0.1.0");
