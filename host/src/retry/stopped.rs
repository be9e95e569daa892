//! How a `Retry` ends: the operation's value, or the decision that stopped it.

use serde_json::{Value, json};

use super::RecoveryError;
use crate::runtime::StepReport;
use crate::{Error, ErrorKind};

/// The step is over: its value, or the decision that stopped it.
pub(super) fn finish<T>(
    report: StepReport,
    events: &[String],
    decisions: &[String],
    value: Option<T>,
) -> std::result::Result<T, RecoveryError> {
    if report.outcome == "ok" {
        return value.ok_or_else(|| {
            RecoveryError::Policy(Error::new(
                ErrorKind::InvalidOutput,
                "the step succeeded without calling the operation; this is a bug, please report it",
            ))
        });
    }
    let decided: Vec<Value> = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter(|e| e["event"] == "decision")
        .collect();
    // Each policy decision has its `decision` event; one more means the loop
    // stopped on its own (deadline, attempt budget) after the last of them.
    let decision_json = match (decisions.last(), decided.len() > decisions.len()) {
        (Some(json), false) => json.clone(),
        (_, _) => {
            let last = decided.last().cloned().unwrap_or(Value::Null);
            json!({
                "action": last.get("action").cloned().unwrap_or_else(|| json!(report.outcome)),
                "attempt": last.get("attempt").cloned().unwrap_or(Value::Null),
                "delay_ms": null,
                "reason_code": last.get("code").cloned().unwrap_or(Value::Null),
                "envelope": report.envelope.clone().unwrap_or(Value::Null),
            })
            .to_string()
        }
    };
    let decision: Value = serde_json::from_str(&decision_json).unwrap_or(Value::Null);
    let action = decision["action"].as_str().unwrap_or("").to_owned();
    Err(RecoveryError::Stopped {
        action,
        decision_json,
        decision,
    })
}
