//! The wire formats themselves.

use super::{EnvelopeIn, Format, Options};
use crate::error::{ErrorKind, PolicyError};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub(super) fn render(
    env: &EnvelopeIn,
    format: Format,
    opts: &Options,
) -> Result<String, PolicyError> {
    let v = match format {
        Format::JsonrpcError => jsonrpc_response(opts, rpc_error(env)),
        Format::McpToolResult => mcp_tool_result(env),
        Format::A2aTaskStatus => a2a_task(env, opts),
        Format::ProblemJson => problem(env),
        Format::ModelToolResult => return to_string(&model_result(env)),
        Format::CoordinatorText => return Ok(coordinator_text(env, opts)),
        Format::DownstreamWrap => downstream_wrap(env, opts)?,
        Format::AgUiRunError => ag_ui_run_error(env),
    };
    to_string(&v)
}

fn to_string<T: Serialize>(v: &T) -> Result<String, PolicyError> {
    serde_json::to_string(v).map_err(|e| {
        PolicyError::new(
            ErrorKind::Internal,
            format!("could not serialize ({e}); please report this"),
        )
    })
}

/// Whole seconds, rounded up: a client honouring them never retries sooner.
fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        m.insert(k.to_owned(), v);
    }
}

/// The envelope as it leaves: masked message and hint, no upstream details.
fn outgoing(env: &EnvelopeIn) -> Value {
    let mut m = Map::new();
    m.insert("code".into(), json!(env.code));
    m.insert("message".into(), json!(env.message()));
    m.insert("class".into(), json!(env.class()));
    m.insert("retryable".into(), json!(env.retryable()));
    m.insert("severity".into(), json!(env.severity()));
    m.insert("category".into(), json!(env.category()));
    m.insert("hint".into(), json!(env.hint()));
    put(
        &mut m,
        "retry_after_ms",
        env.retry_after_ms.map(Value::from),
    );
    put(&mut m, "field", env.field.clone().map(Value::from));
    put(&mut m, "allowed_values", env.allowed_values.clone());
    put(&mut m, "suggested_value", env.suggested_value.clone());
    put(
        &mut m,
        "request_id",
        env.request_id.clone().map(Value::from),
    );
    if !env.related_codes.is_empty() {
        m.insert("related_codes".into(), json!(env.related_codes));
    }
    put(&mut m, "docs_url", env.docs_url.clone().map(Value::from));
    Value::Object(m)
}

/// An AG-UI `RUN_ERROR` event: `message` for a person, `code` for a machine,
/// and the outgoing envelope (hint, retryable, retry_after_ms) in `metadata.error`.
/// Fields as in `@ag-ui/core` `RunErrorEventSchema` and `ag_ui.core.RunErrorEvent`.
fn ag_ui_run_error(env: &EnvelopeIn) -> Value {
    json!({
        "type": "RUN_ERROR",
        "message": env.message(),
        "code": env.code,
        "metadata": {"error": outgoing(env)},
    })
}

fn base(code: &str) -> &str {
    code.split_once('.').map_or(code, |(_, b)| b)
}

/// The JSON-RPC code for an envelope: its own JSON-RPC code when it came from
/// one, the protocol code of a protocol registry code, else -32602 for
/// validation and -32603 for everything else.
fn rpc_code(env: &EnvelopeIn) -> i64 {
    if let Some(c) = env.upstream_rpc_code() {
        return c;
    }
    match base(&env.code) {
        "jsonrpc.parse_error" => -32700,
        "jsonrpc.invalid_request" => -32600,
        "jsonrpc.method_not_found" => -32601,
        "jsonrpc.invalid_params" => -32602,
        "mcp.connection_closed" => -32000,
        "mcp.request_timeout" => -32001,
        "mcp.resource_not_found" => -32002,
        "mcp.url_elicitation_required" => -32042,
        "a2a.task_not_found" => -32001,
        "a2a.task_not_cancelable" => -32002,
        "a2a.push_not_supported" => -32003,
        "a2a.unsupported_operation" => -32004,
        "a2a.content_type_not_supported" => -32005,
        "a2a.invalid_agent_response" => -32006,
        "a2a.extended_card_not_configured" => -32007,
        "a2a.extension_support_required" => -32008,
        "a2a.version_not_supported" => -32009,
        _ if env.category() == "validation" => -32602,
        _ => -32603,
    }
}

/// A JSON-RPC `error` object carrying the envelope in `data`.
fn rpc_error(env: &EnvelopeIn) -> Value {
    let mut data = match outgoing(env) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    data.remove("message");
    if let Some(ms) = env.retry_after_ms {
        data.insert("retryAfter".into(), json!(ceil_secs(ms)));
    }
    json!({"code": rpc_code(env), "message": env.message(), "data": Value::Object(data)})
}

fn jsonrpc_response(opts: &Options, error: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": opts.id.clone().unwrap_or(Value::Null), "error": error})
}

fn model_text(env: &EnvelopeIn) -> String {
    let mut t = format!("{} [{}] {}", env.hint(), env.code, env.message());
    if env.retryable() {
        if let Some(ms) = env.retry_after_ms {
            t.push_str(&format!(" (retryable after {ms} ms)"));
        } else {
            t.push_str(" (retryable)");
        }
    }
    t
}

fn mcp_tool_result(env: &EnvelopeIn) -> Value {
    json!({
        "content": [{"type": "text", "text": model_text(env)}],
        "structuredContent": {"error": outgoing(env)},
        "isError": true,
    })
}

/// The A2A state that tells the truth about the envelope.
fn a2a_state(env: &EnvelopeIn) -> &'static str {
    match (base(&env.code), env.category().as_str()) {
        ("task.auth_required", _) => "auth-required",
        ("task.rejected", _) => "rejected",
        (_, "input_required") => "input-required",
        (_, "cancelled") => "canceled",
        _ => "failed",
    }
}

fn short_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn a2a_task(env: &EnvelopeIn, opts: &Options) -> Value {
    let task_id = opts
        .task_id
        .clone()
        .unwrap_or_else(|| format!("task-{}", short_hash(&[&env.code, &env.message()])));
    let mut message = Map::new();
    message.insert("kind".into(), json!("message"));
    message.insert("role".into(), json!("agent"));
    message.insert(
        "messageId".into(),
        json!(format!("msg-{}", short_hash(&[&task_id, &env.code]))),
    );
    message.insert("taskId".into(), json!(task_id));
    put(
        &mut message,
        "contextId",
        opts.context_id.clone().map(Value::from),
    );
    message.insert(
        "parts".into(),
        json!([
            {"kind": "text", "text": format!("{} {}", env.message(), env.hint())},
            {"kind": "data", "data": {"error": outgoing(env)}},
        ]),
    );
    let mut task = Map::new();
    task.insert("kind".into(), json!("task"));
    task.insert("id".into(), json!(task_id));
    put(
        &mut task,
        "contextId",
        opts.context_id.clone().map(Value::from),
    );
    task.insert(
        "status".into(),
        json!({"state": a2a_state(env), "message": Value::Object(message)}),
    );
    Value::Object(task)
}

/// The HTTP status for an envelope: its own when it came from HTTP, else by category.
fn http_status(env: &EnvelopeIn) -> u16 {
    if let Some(s) = env.upstream_status().filter(|s| (400..600).contains(s)) {
        return s;
    }
    match env.category().as_str() {
        "validation" => 400,
        "auth" if env.code.ends_with("403_forbidden") => 403,
        "auth" => 401,
        "rate_limit" => 429,
        "quota" => 402,
        "timeout" => 504,
        "network" => 502,
        "dependency" if env.retryable() => 503,
        "not_found" => 404,
        "conflict" | "state" | "cancelled" => 409,
        "safety" => 422,
        "input_required" => 428,
        _ => 500,
    }
}

fn problem(env: &EnvelopeIn) -> Value {
    let status = http_status(env);
    let mut body = match outgoing(env) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    body.remove("message");
    body.insert(
        "type".into(),
        json!(format!("urn:agent-recovery:error:{}", env.code)),
    );
    body.insert("title".into(), json!(env.title()));
    body.insert("status".into(), json!(status));
    body.insert("detail".into(), json!(env.message()));
    let mut headers = Map::new();
    headers.insert("content-type".into(), json!("application/problem+json"));
    if let Some(ms) = env.retry_after_ms.filter(|_| env.retryable()) {
        headers.insert("retry-after".into(), json!(ceil_secs(ms).to_string()));
        headers.insert("retry-after-ms".into(), json!(ms.to_string()));
    }
    json!({"status": status, "headers": Value::Object(headers), "body": Value::Object(body)})
}

/// The compact result a model reads: the hint first, nulls left out.
#[derive(Serialize)]
struct ModelResult {
    error: ModelError,
}

#[derive(Serialize)]
struct ModelError {
    hint: String,
    code: String,
    message: String,
    retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allowed_values: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suggested_value: Option<Value>,
}

fn model_result(env: &EnvelopeIn) -> ModelResult {
    ModelResult {
        error: ModelError {
            hint: env.hint(),
            code: env.code.clone(),
            message: env.message(),
            retryable: env.retryable(),
            retry_after_ms: env.retry_after_ms,
            field: env.field.clone(),
            allowed_values: env.allowed_values.clone().filter(|v| !v.is_null()),
            suggested_value: env.suggested_value.clone().filter(|v| !v.is_null()),
        },
    }
}

/// The coordinator text convention, with the code and retry facts in brackets.
fn coordinator_text(env: &EnvelopeIn, opts: &Options) -> String {
    let task = opts
        .task_id
        .as_deref()
        .map(|t| format!(":task_id={t}"))
        .unwrap_or_default();
    let tag = match (a2a_state(env), env.category().as_str()) {
        ("input-required", _) => format!("INPUT_REQUIRED{task}"),
        ("auth-required", _) => format!("AUTH_REQUIRED{task}"),
        ("canceled", _) => "CANCELLED".to_owned(),
        ("rejected", _) => "REJECTED".to_owned(),
        (_, "timeout") => "TIMEOUT".to_owned(),
        _ => "FAILED".to_owned(),
    };
    let mut facts = format!("code={} retryable={}", env.code, env.retryable());
    if let Some(ms) = env.retry_after_ms {
        facts.push_str(&format!(" retry_after_ms={ms}"));
    }
    format!("[{tag}] {} ({facts}) Hint: {}", env.message(), env.hint())
}

fn downstream_wrap(env: &EnvelopeIn, opts: &Options) -> Result<Value, PolicyError> {
    let Some(downstream) = opts.downstream_agent.clone() else {
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            "downstream-wrap needs options.downstream_agent; pass {\"downstream_agent\": \"<name or url>\"}",
        ));
    };
    let mut data = Map::new();
    put(
        &mut data,
        "currentAgent",
        opts.current_agent.clone().map(Value::from),
    );
    data.insert("downstreamAgent".into(), json!(downstream));
    data.insert("downstreamError".into(), rpc_error(env));
    data.insert("retryable".into(), json!(env.retryable()));
    let error = json!({
        "code": -32603,
        "message": format!("Downstream agent '{downstream}' failed"),
        "data": Value::Object(data),
    });
    Ok(jsonrpc_response(opts, error))
}
