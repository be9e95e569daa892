//! JSON-RPC 2.0, MCP and A2A messages: error responses, MCP `isError` tool
//! results, MCP `input_required` results (2026-07-28), MCP cancellations, A2A
//! task states (v0.3 and v1.0) and errors wrapped across agent chains.
//!
//! What SDKs hand to the caller is accepted without the JSON-RPC envelope too:
//! a bare result (an MCP `CallToolResult`, an A2A `Task` or status-update
//! event) and a bare error object `{code, message, data?}` (the MCP SDKs'
//! `McpError` / `ErrorData`, e.g. the client-side -32001 request timeout, which
//! never travels on the wire).

pub(crate) mod a2a;
mod mcp_task;

use super::{Finding, envelope_body, one_line, str_at};
use crate::error::PolicyError;
use crate::hints;
use crate::json_view::View;
use crate::model::{CallKind, SourceKind};
use crate::observation::Protocol;
use crate::observation_view::ObservationView;
use crate::registry::Surface;

/// How deep wrapped downstream errors are followed.
const MAX_WRAP_DEPTH: usize = 16;

pub(super) fn classify(
    protocol: Protocol,
    msg: &View<'_>,
    obs: &ObservationView<'_>,
) -> Result<Finding, PolicyError> {
    let mut f = message(protocol, msg, obs.call, 0)?;
    if f.request_id.is_none() {
        f.request_id = msg.get("id").and_then(|id| match id {
            View::String(s) => Some(s.as_ref().to_owned()),
            View::Number(n) => Some(n.to_string()),
            _ => None,
        });
    }
    Ok(f)
}

fn source_of(p: Protocol) -> SourceKind {
    match p {
        Protocol::JsonRpc => SourceKind::Jsonrpc,
        Protocol::Mcp => SourceKind::Mcp,
        Protocol::A2a => SourceKind::A2a,
    }
}

fn message(
    protocol: Protocol,
    msg: &View<'_>,
    call: Option<CallKind>,
    depth: usize,
) -> Result<Finding, PolicyError> {
    if !msg.is_object() {
        return Err(PolicyError::observation(
            "the JSON-RPC message must be an object (batches are not supported); send one response",
        ));
    }
    if str_at(msg, "method") == Some("notifications/cancelled") {
        let mut f = Finding::new("mcp.cancelled");
        let params = msg.get("params");
        f.message = params.and_then(|p| str_at(p, "reason")).map(str::to_owned);
        f.request_id = params.and_then(|p| p.get("requestId")).map(|v| match v {
            View::String(s) => s.as_ref().to_owned(),
            other => other.to_value().to_string(),
        });
        f.upstream.source = Some(SourceKind::Mcp);
        f.upstream.provider = Some("mcp".into());
        f.upstream.error_type = Some("notifications/cancelled".into());
        return Ok(f);
    }
    if str_at(msg, "method") == Some("notifications/tasks")
        && let Some(task) = msg.get("params").filter(|p| mcp_task::is_task(p))
    {
        return mcp_task::classify(task, call);
    }
    if let Some(err) = msg.get("error") {
        return error(protocol, err, call, depth);
    }
    if let Some(result) = msg.get("result") {
        return result_failure(protocol, result, call);
    }
    // No JSON-RPC envelope: an SDK's error object or a bare result.
    if msg.get("code").is_some_and(View::is_i64) && msg.get("message").is_some() {
        return error(protocol, msg, call, depth);
    }
    if is_bare_result(msg) {
        return result_failure(protocol, msg, call);
    }
    Err(PolicyError::observation(
        "the JSON-RPC message has no error, no failed result and is not a cancellation; classify only failures",
    ))
}

/// Whether `v` is a result handed over without its JSON-RPC envelope: an MCP
/// `CallToolResult` or `input_required` result, or an A2A Task / status-update
/// event (also in a `{"task": ..}` or `{"statusUpdate": ..}` wrapper).
pub(crate) fn is_bare_result(v: &View<'_>) -> bool {
    v.get("isError").is_some_and(View::is_boolean)
        || v.get("resultType").is_some_and(View::is_string)
        || mcp_task::is_task(v)
        || a2a_task(v).is_some()
}

/// A JSON-RPC `error` object.
pub(super) fn error(
    protocol: Protocol,
    err: &View<'_>,
    call: Option<CallKind>,
    depth: usize,
) -> Result<Finding, PolicyError> {
    let Some(code) = err.get("code").and_then(View::as_i64) else {
        if let Some(e) = envelope_body::find(err) {
            return Ok(bare_envelope(e));
        }
        return Err(PolicyError::observation(
            "the JSON-RPC error has no integer \"code\"; a JSON-RPC 2.0 error needs code and message",
        ));
    };
    let data = err.get("data").filter(|d| d.is_object());
    // A wrapped downstream error keeps the origin's class and retryable.
    if let Some(inner) = data
        .and_then(|d| d.get("downstreamError"))
        .filter(|d| d.get("code").is_some())
        && depth < MAX_WRAP_DEPTH
    {
        let mut f = error(protocol, inner, call, depth + 1)?;
        if let Some(agent) = data.and_then(|d| str_at(d, "downstreamAgent"))
            && f.message.is_none()
        {
            f.message = Some(format!("Downstream agent {agent} failed"));
        }
        return Ok(f);
    }
    let base = match code_base(protocol, code) {
        // Invalid params of a tool call: arguments a model chose, which it can fix.
        "jsonrpc.invalid_params" if tool_call(protocol, call) => "jsonrpc.invalid_arguments",
        b => b,
    };
    let mut f = Finding::new(base);
    f.message = str_at(err, "message").map(str::to_owned);
    f.upstream.source = Some(source_of(protocol));
    f.upstream.provider = Some(
        match protocol {
            Protocol::JsonRpc => "jsonrpc",
            Protocol::Mcp => "mcp",
            Protocol::A2a => "a2a",
        }
        .into(),
    );
    f.upstream.code = Some(code.to_string());
    if protocol == Protocol::A2a {
        f.surface = Some(Surface::Agent);
    }
    if let Some(d) = data {
        if let Some(e) = envelope_body::find(d) {
            envelope_body::apply(e, &mut f);
        }
        if let Some(b) = d.get("retryable").and_then(View::as_bool) {
            f.retryable = Some(b);
        }
        // Exact milliseconds win over whole seconds.
        if let Some(ms) = d
            .get("retry_after_ms")
            .or_else(|| d.get("retryAfterMs"))
            .and_then(hints::ms_value)
        {
            f.retry_after_ms = Some(ms);
        } else if let Some(ms) = d.get("retryAfter").and_then(hints::seconds_value_to_ms) {
            f.retry_after_ms = Some(ms);
        }
        if let Some(detail) = str_at(d, "detail")
            && f.message.is_none()
        {
            f.message = Some(detail.to_owned());
        }
        if let Some(field) = str_at(d, "field") {
            f.field.get_or_insert_with(|| field.to_owned());
        }
        // A2A v1.0 and MCP may carry google.rpc-style details in data.
        if let Some(url) = str_at(d, "url").filter(|_| base == "mcp.url_elicitation_required") {
            f.suggested_value = Some(serde_json::Value::String(url.to_owned()));
        }
        // MCP 2026-07-28: the versions to choose from, the capabilities to declare.
        match base {
            "mcp.unsupported_protocol_version" => {
                f.allowed_values = d.get("supported").map(View::to_value);
            }
            "mcp.missing_client_capability" => {
                f.suggested_value = d.get("requiredCapabilities").map(View::to_value);
            }
            _ => {}
        }
    }
    if protocol == Protocol::A2a {
        a2a::apply_details(err.get("data"), &mut f);
    }
    Ok(f)
}

/// A bare agent envelope (`{"error": {"code": "...", "retryable": ..}}`), e.g. a
/// rendered `model-tool-result`: a registry code is adopted, any other code is
/// placed by its category.
fn bare_envelope(e: &View<'_>) -> Finding {
    let category = str_at(e, "category").and_then(crate::model::Category::parse);
    let retryable = e.get("retryable").and_then(View::as_bool).unwrap_or(false);
    let mut f = Finding::new(envelope_body::base_for(category, retryable));
    envelope_body::apply(e, &mut f);
    f.upstream.source = Some(SourceKind::Jsonrpc);
    f
}

/// Whether a JSON-RPC error answers a tool call: an MCP request (MCP's surface
/// is the tool call) unless the caller says otherwise, or any JSON-RPC call the
/// caller marked `call: "tool"`.
fn tool_call(protocol: Protocol, call: Option<CallKind>) -> bool {
    match protocol {
        Protocol::Mcp => matches!(call, None | Some(CallKind::Tool)),
        Protocol::JsonRpc => call == Some(CallKind::Tool),
        Protocol::A2a => false,
    }
}

fn code_base(protocol: Protocol, code: i64) -> &'static str {
    match (protocol, code) {
        (_, -32700) => "jsonrpc.parse_error",
        (_, -32600) => "jsonrpc.invalid_request",
        (_, -32601) => "jsonrpc.method_not_found",
        (_, -32602) => "jsonrpc.invalid_params",
        (_, -32603) => "jsonrpc.internal_error",
        (Protocol::Mcp, -32000) => "mcp.connection_closed",
        (Protocol::Mcp, -32001) => "mcp.request_timeout",
        (Protocol::Mcp, -32002) => "mcp.resource_not_found",
        (Protocol::Mcp, -32042) => "mcp.url_elicitation_required",
        // Reserved by MCP 2026-07-28 (schema/2026-07-28/schema.ts).
        (Protocol::Mcp, -32020) => "mcp.header_mismatch",
        (Protocol::Mcp, -32021) => "mcp.missing_client_capability",
        (Protocol::Mcp, -32022) => "mcp.unsupported_protocol_version",
        (Protocol::A2a, -32001) => "a2a.task_not_found",
        (Protocol::A2a, -32002) => "a2a.task_not_cancelable",
        (Protocol::A2a, -32003) => "a2a.push_not_supported",
        (Protocol::A2a, -32004) => "a2a.unsupported_operation",
        (Protocol::A2a, -32005) => "a2a.content_type_not_supported",
        (Protocol::A2a, -32006) => "a2a.invalid_agent_response",
        (Protocol::A2a, -32007) => "a2a.extended_card_not_configured",
        (Protocol::A2a, -32008) => "a2a.extension_support_required",
        (Protocol::A2a, -32009) => "a2a.version_not_supported",
        (_, -32099..=-32000) => "jsonrpc.server_error",
        _ => "jsonrpc.application_error",
    }
}

/// A successful JSON-RPC response whose result reports a failure.
fn result_failure(
    protocol: Protocol,
    result: &View<'_>,
    call: Option<CallKind>,
) -> Result<Finding, PolicyError> {
    if mcp_task::is_task(result) {
        return mcp_task::classify(result, call);
    }
    if result.get("isError").and_then(View::as_bool) == Some(true) {
        return Ok(mcp_tool_error(result));
    }
    if str_at(result, "resultType") == Some("input_required") {
        return Ok(mcp_input_required(result));
    }
    if let Some((task, state)) = a2a_task(result) {
        return a2a_state(task, state);
    }
    let _ = protocol;
    Err(PolicyError::observation(
        "the JSON-RPC result reports no failure (no isError: true, no failed A2A task state); classify only failures",
    ))
}

pub(super) fn mcp_tool_error(result: &View<'_>) -> Finding {
    let mut f = Finding::new("mcp.tool_error");
    f.message = first_text(result.get("content"));
    if let Some(sc) = result.get("structuredContent")
        && let Some(e) = envelope_body::find(sc)
    {
        envelope_body::apply(e, &mut f);
    }
    f.upstream.source = Some(SourceKind::Mcp);
    f.upstream.provider = Some("mcp".into());
    f.upstream.error_type = Some("isError".into());
    f.surface = Some(Surface::Tool);
    f
}

/// MCP 2026-07-28 multi round-trip requests: the server needs input first. The
/// input requests are the values the client must supply (`allowed_values`).
fn mcp_input_required(result: &View<'_>) -> Finding {
    let mut f = Finding::new("mcp.input_required");
    if let Some(reqs) = result.get("inputRequests").filter(|r| !r.is_null()) {
        f.allowed_values = Some(reqs.to_value());
    }
    f.upstream.source = Some(SourceKind::Mcp);
    f.upstream.provider = Some("mcp".into());
    f.upstream.error_type = Some("input_required".into());
    f.surface = Some(Surface::Tool);
    f
}

/// The task object and its normalized state (`failed`, `input-required`, ...).
/// Accepts a Task, a v1.0 `{"task": Task}` wrapper, and status-update events.
fn a2a_task<'v>(result: &'v View<'v>) -> Option<(&'v View<'v>, &'v str)> {
    let candidates = [
        Some(result),
        result.get("task"),
        result.get("statusUpdate"),
        result.get("status_update"),
    ];
    for c in candidates.into_iter().flatten() {
        if let Some(state) = c.get("status").and_then(|s| str_at(s, "state")) {
            return Some((c, state));
        }
    }
    None
}

/// `TASK_STATE_INPUT_REQUIRED` (v1.0) and `input-required` (v0.3) -> `input-required`.
fn normalize_state(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let trimmed = lower.strip_prefix("task_state_").unwrap_or(&lower);
    trimmed.replace('_', "-")
}

fn a2a_state(task: &View<'_>, raw_state: &str) -> Result<Finding, PolicyError> {
    let state = normalize_state(raw_state);
    let base = match state.as_str() {
        "failed" => "task.failed",
        "rejected" => "task.rejected",
        "canceled" | "cancelled" => "task.canceled",
        "input-required" => "task.input_required",
        "auth-required" => "task.auth_required",
        other => {
            return Err(PolicyError::observation(format!(
                "A2A task state {other:?} is not a failure (failed, rejected, canceled, input-required, auth-required); classify only failures"
            )));
        }
    };
    let mut f = Finding::new(base);
    let status_msg = task.get("status").and_then(|s| s.get("message"));
    let parts = status_msg.and_then(|m| m.get("parts"));
    f.message = first_text(parts);
    if let Some(View::Array(ps)) = parts {
        for p in ps {
            let data = p
                .get("data")
                .or_else(|| p.get("data_part"))
                .filter(|d| d.is_object());
            if let Some(e) = data.and_then(envelope_body::find) {
                envelope_body::apply(e, &mut f);
            }
        }
    }
    f.upstream.source = Some(SourceKind::A2a);
    f.upstream.provider = Some("a2a".into());
    f.upstream.error_type = Some(raw_state.to_owned());
    f.surface = Some(Surface::Agent);
    Ok(f)
}

/// The first text part of MCP content or A2A parts (`{"type"|"kind":"text","text":..}`
/// or a v1.0 `{"text": ..}` part).
pub(super) fn first_text(content: Option<&View<'_>>) -> Option<String> {
    let items = content?.as_array()?;
    items
        .iter()
        .filter_map(|p| str_at(p, "text"))
        .map(one_line)
        .find(|t| !t.is_empty())
}
