//! Hostile fixture: the reference's behaviour with a smoke set it fails (it
//! claims HTTP 400 is retried), which every host must refuse.

use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct FailingSmoke;

impl RecoveryPolicy for FailingSmoke {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-failing-smoke".into(),
            version: "0.0.0".into(),
            description: "ships a smoke set it fails".into(),
        }
    }
    fn smoke_tests() -> String {
        r#"[{"observation":{"source":"http","status":400},"context":{"call":"tool","attempt":1},"expect":{"action":"retry"}}]"#
            .to_owned()
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(FailingSmoke, "../../../wit/agent-recovery@0.1.0");
