//! MCP tasks extension (`io.modelcontextprotocol/tasks`, protocol 2026-07-28):
//! a `tasks/get` result or a `notifications/tasks` notification carries a
//! task whose status may be a failure.
//!
//! | status | becomes |
//! | --- | --- |
//! | `failed` | its `error`, classified as that JSON-RPC error |
//! | `cancelled` | `mcp.cancelled` |
//! | `input_required` | `mcp.task_input_required`: `allowed_values` are the `inputRequests`, `suggested_value` the `taskId` to answer with `tasks/update` |
//! | `completed` with a result that has `isError: true` | `mcp.tool_error` (a tool's own error) |
//! | `working`, or `completed` without `isError` | no failure (an error) |

use super::{error, first_text, mcp_tool_error};
use crate::error::PolicyError;
use crate::json_view::View;
use crate::model::{CallKind, SourceKind};
use crate::normalize::{Finding, str_at};
use crate::observation::Protocol;
use crate::registry::Surface;

/// The statuses a task can be in.
const STATUSES: [&str; 5] = [
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];

/// Whether `v` is an MCP task: a string `taskId` and one of the task statuses.
pub(crate) fn is_task(v: &View<'_>) -> bool {
    v.get("taskId").is_some_and(View::is_string)
        && str_at(v, "status").is_some_and(|s| STATUSES.contains(&s))
}

pub(crate) fn classify(task: &View<'_>, call: Option<CallKind>) -> Result<Finding, PolicyError> {
    let status = str_at(task, "status").unwrap_or("");
    let status_message = str_at(task, "statusMessage").map(str::to_owned);
    let mut f = match status {
        "failed" => match task.get("error").filter(|e| e.is_object()) {
            Some(err) => error(Protocol::Mcp, err, call, 0)?,
            None => Finding::new("jsonrpc.application_error"),
        },
        "cancelled" => Finding::new("mcp.cancelled"),
        "input_required" => {
            let mut f = Finding::new("mcp.task_input_required");
            f.allowed_values = task
                .get("inputRequests")
                .filter(|r| !r.is_null())
                .map(View::to_value);
            f.suggested_value = task
                .get("taskId")
                .map(|id| serde_json::json!({ "taskId": id.to_value() }));
            f
        }
        "completed" => match task.get("result") {
            Some(r) if r.get("isError").and_then(View::as_bool) == Some(true) => {
                let mut f = mcp_tool_error(r);
                if f.message.is_none() {
                    f.message = first_text(r.get("content"));
                }
                f
            }
            _ => {
                return Err(PolicyError::observation(
                    "the MCP task completed and its result has no isError: true; classify only failures",
                ));
            }
        },
        other => {
            return Err(PolicyError::observation(format!(
                "MCP task status {other:?} is not a failure (failed, cancelled, input_required, or completed with isError: true); classify only failures"
            )));
        }
    };
    if f.message.is_none() {
        f.message = status_message;
    }
    f.upstream.source = Some(SourceKind::Mcp);
    f.upstream.provider = Some("mcp".into());
    if f.upstream.error_type.is_none() {
        f.upstream.error_type = Some(status.to_owned());
    }
    if f.surface.is_none() {
        f.surface = Some(Surface::Tool);
    }
    Ok(f)
}
