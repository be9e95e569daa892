//! Hostile fixture: the reference policy exported against a copy of the WIT
//! whose package is `agent:recovery@9.0.0` (`wit/` here), so every interface
//! is `agent:recovery/<name>@9.0.0`. Hosts that speak 0.1.x must refuse it.

use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The fixture.
pub struct WrongContract;

impl RecoveryPolicy for WrongContract {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "hostile-wrong-contract".into(),
            version: "0.0.0".into(),
            description: "exports agent:recovery@9.0.0".into(),
        }
    }
}

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(WrongContract, "wit");
