//! Rendering envelopes for the boundary they cross (JSON-RPC, MCP, A2A, HTTP,
//! the model, coordinators, downstream wrapping).

use crate::error::{ErrorKind, PolicyError};

/// The wire formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON-RPC 2.0 error response.
    JsonrpcError,
    /// MCP CallToolResult with isError.
    McpToolResult,
    /// A2A task status.
    A2aTaskStatus,
    /// HTTP problem+json.
    ProblemJson,
    /// Compact tool result for a model.
    ModelToolResult,
    /// Coordinator text convention.
    CoordinatorText,
    /// Downstream wrapping.
    DownstreamWrap,
}

/// Render an envelope (JSON text) as `format`.
pub fn render_json(envelope: &str, format: Format, options: &str) -> Result<String, PolicyError> {
    let _ = (envelope, format, options);
    Err(PolicyError::new(
        ErrorKind::InvalidArgument,
        "rendering is not implemented yet; use classify output directly",
    ))
}
