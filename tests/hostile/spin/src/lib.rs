//! Hostile fixture: never returns from `classify-json` or `decide-json`.

use agent_recovery_policy::PolicyError;
use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct Spin;

fn forever() -> ! {
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

impl RecoveryPolicy for Spin {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-spin".into(),
            version: "0.0.0".into(),
            description: "loops forever".into(),
        }
    }
    fn classify_json(_: &str) -> Result<String, PolicyError> {
        forever()
    }
    fn decide_json(_: &str, _: &str) -> Result<String, PolicyError> {
        forever()
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(Spin, "../../../wit/agent-recovery@0.1.0");
