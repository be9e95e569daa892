//! Rendering an envelope for the boundary it must cross. Every format is
//! written by the component, so every runtime renders the same bytes.
//!
//! All formats but `coordinator-text` produce JSON; `coordinator-text` produces
//! the one-line text convention of agent coordinators. Outgoing `message` and `hint` are
//! masked (see [`mask`]). The input is an envelope as printed by `classify`, or a
//! decision (its `envelope` is used).

mod formats;
mod mask;

pub use mask::mask;

use crate::error::{ErrorKind, PolicyError};
use crate::registry;
use serde::Deserialize;
use serde_json::Value;

/// The wire formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON-RPC 2.0 error response (A2A and MCP servers).
    JsonrpcError,
    /// MCP `CallToolResult` with `isError: true`.
    McpToolResult,
    /// A2A task with its status (`failed`, `input-required`, `auth-required`, ...).
    A2aTaskStatus,
    /// HTTP problem+json (RFC 9457): `{"status", "headers", "body"}`.
    ProblemJson,
    /// Compact tool result for a model, hint first.
    ModelToolResult,
    /// Coordinator text convention (`[FAILED] ...`).
    CoordinatorText,
    /// JSON-RPC error wrapping a downstream agent's error.
    DownstreamWrap,
    /// An AG-UI `RUN_ERROR` event (`{"type":"RUN_ERROR","message","code","metadata"}`).
    /// Not in the 0.1 `render-format` enum: reached by name (`render-named`).
    AgUiRunError,
}

impl Format {
    /// Every format.
    pub const ALL: &'static [Format] = &[
        Format::JsonrpcError,
        Format::McpToolResult,
        Format::A2aTaskStatus,
        Format::ProblemJson,
        Format::ModelToolResult,
        Format::CoordinatorText,
        Format::DownstreamWrap,
        Format::AgUiRunError,
    ];

    /// The kebab-case name (as in the WIT and the CLI).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::JsonrpcError => "jsonrpc-error",
            Format::McpToolResult => "mcp-tool-result",
            Format::A2aTaskStatus => "a2a-task-status",
            Format::ProblemJson => "problem-json",
            Format::ModelToolResult => "model-tool-result",
            Format::CoordinatorText => "coordinator-text",
            Format::DownstreamWrap => "downstream-wrap",
            Format::AgUiRunError => "ag-ui-run-error",
        }
    }

    /// Parse a kebab-case or snake_case name.
    pub fn parse(s: &str) -> Option<Self> {
        let k = s.replace('_', "-");
        Self::ALL.iter().copied().find(|f| f.as_str() == k)
    }
}

/// The envelope members a renderer reads. Unknown members are ignored.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct EnvelopeIn {
    pub code: String,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub class: Option<String>,
    #[serde(default)]
    pub retryable: Option<bool>,
    #[serde(default)]
    pub severity: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub allowed_values: Option<Value>,
    #[serde(default)]
    pub suggested_value: Option<Value>,
    #[serde(default)]
    pub hint: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub related_codes: Vec<String>,
    #[serde(default)]
    pub docs_url: Option<String>,
    #[serde(default)]
    pub upstream: Option<Value>,
}

impl EnvelopeIn {
    /// The registry default for a member the envelope lacks.
    fn info(&self) -> Option<&'static registry::CodeInfo> {
        registry::lookup(&self.code)
    }
    pub(crate) fn class(&self) -> String {
        self.class
            .clone()
            .or_else(|| self.info().map(|i| i.class.as_str().to_owned()))
            .unwrap_or_else(|| "permanent".into())
    }
    pub(crate) fn retryable(&self) -> bool {
        self.retryable
            .or_else(|| self.info().map(|i| i.retryable))
            .unwrap_or(false)
    }
    pub(crate) fn severity(&self) -> String {
        self.severity
            .clone()
            .or_else(|| self.info().map(|i| i.severity.as_str().to_owned()))
            .unwrap_or_else(|| "error".into())
    }
    pub(crate) fn category(&self) -> String {
        self.category
            .clone()
            .or_else(|| self.info().map(|i| i.category.as_str().to_owned()))
            .unwrap_or_else(|| "internal".into())
    }
    pub(crate) fn message(&self) -> String {
        let m = self
            .message
            .clone()
            .or_else(|| self.info().map(|i| i.message.to_owned()))
            .unwrap_or_default();
        mask(&m)
    }
    pub(crate) fn hint(&self) -> String {
        let h = self
            .hint
            .clone()
            .or_else(|| self.info().map(|i| i.recovery.to_owned()))
            .unwrap_or_default();
        mask(&h)
    }
    /// The registry default message: a short, stable title for the code.
    pub(crate) fn title(&self) -> String {
        self.info()
            .map(|i| i.message.to_owned())
            .unwrap_or_else(|| self.message())
    }
    /// The upstream status, if the envelope came from HTTP.
    pub(crate) fn upstream_status(&self) -> Option<u16> {
        self.upstream
            .as_ref()?
            .get("status")?
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
    }
    /// The upstream code, if it is an integer (a JSON-RPC code).
    pub(crate) fn upstream_rpc_code(&self) -> Option<i64> {
        let up = self.upstream.as_ref()?;
        let src = up.get("source")?.as_str()?;
        if !matches!(src, "jsonrpc" | "mcp" | "a2a") {
            return None;
        }
        up.get("code")?.as_str()?.parse().ok()
    }
}

/// Rendering options (JSON object; every member optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Options {
    /// JSON-RPC id to answer.
    #[serde(default)]
    pub id: Option<Value>,
    /// A2A task id.
    #[serde(default)]
    pub task_id: Option<String>,
    /// A2A context id.
    #[serde(default)]
    pub context_id: Option<String>,
    /// This agent's name or URL (downstream wrapping).
    #[serde(default)]
    pub current_agent: Option<String>,
    /// The failing sub-agent's name or URL (downstream wrapping).
    #[serde(default)]
    pub downstream_agent: Option<String>,
}

fn parse_envelope(text: &str) -> Result<EnvelopeIn, PolicyError> {
    let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::json("envelope", &e))?;
    let env = match v.get("envelope") {
        Some(inner) if inner.is_object() => inner.clone(),
        _ => match v.get("error") {
            Some(inner) if inner.get("code").is_some_and(Value::is_string) => inner.clone(),
            _ => v,
        },
    };
    let parsed: EnvelopeIn = crate::from_value(&env).map_err(|e| {
        PolicyError::new(
            ErrorKind::InvalidArgument,
            format!("envelope is invalid ({e}); pass the JSON printed by classify or decide"),
        )
    })?;
    if parsed.code.trim().is_empty() {
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            "envelope code is empty; pass the JSON printed by classify",
        ));
    }
    Ok(parsed)
}

fn parse_options(text: &str) -> Result<Options, PolicyError> {
    if text.trim().is_empty() {
        return Ok(Options::default());
    }
    let v: Value = serde_json::from_str(text).map_err(|e| PolicyError::json("options", &e))?;
    if !v.is_object() {
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            format!(
                "options must be a JSON object, got {}; pass e.g. {{\"id\": 1, \"task_id\": \"t-1\"}}",
                crate::json_kind(&v)
            ),
        ));
    }
    crate::from_value(&v).map_err(|e| {
        PolicyError::new(
            ErrorKind::InvalidArgument,
            format!("options are invalid ({e}); allowed: id, task_id, context_id, current_agent, downstream_agent"),
        )
    })
}

/// Render an envelope (JSON text) as the format named `format` (kebab-case or
/// snake_case, e.g. `ag-ui-run-error`).
pub fn render_named(envelope: &str, format: &str, options: &str) -> Result<String, PolicyError> {
    let Some(f) = Format::parse(format) else {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            format!(
                "unknown render format {format:?}; use one of {}",
                names.join(", ")
            ),
        ));
    };
    render_json(envelope, f, options)
}

/// Render an envelope (JSON text) as `format`.
pub fn render_json(envelope: &str, format: Format, options: &str) -> Result<String, PolicyError> {
    let env = parse_envelope(envelope)?;
    let opts = parse_options(options)?;
    formats::render(&env, format, &opts)
}
