//! Hostile fixture: the reference's behaviour with an empty smoke set, which
//! every host must refuse (a policy must ship at least one smoke case).

use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct EmptySmoke;

impl RecoveryPolicy for EmptySmoke {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-empty-smoke".into(),
            version: "0.0.0".into(),
            description: "ships an empty smoke set".into(),
        }
    }
    fn smoke_tests() -> String {
        "[]".to_owned()
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(EmptySmoke, "../../../wit/agent-recovery@0.1.0");
