//! Hostile fixture: returns text that is not the promised JSON.

use agent_recovery_policy::PolicyError;
use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct Garbage;

impl RecoveryPolicy for Garbage {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-garbage".into(),
            version: "0.0.0".into(),
            description: "returns garbage".into(),
        }
    }
    fn classify_json(_: &str) -> Result<String, PolicyError> {
        Ok("{\"code\": 42, \"retryable\": \"maybe\"".to_owned())
    }
    fn decide_json(_: &str, _: &str) -> Result<String, PolicyError> {
        Ok("<html>not json</html>".to_owned())
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(Garbage, "../../../wit/agent-recovery@0.1.0");
