//! Codes for JSON-RPC, MCP and A2A.

use super::{AGENT, ALL_CALLS, CodeDef, TOOL, code_def};

pub(super) const DEFS: &[CodeDef] = &[
    code_def!(
        "jsonrpc.parse_error",
        ALL_CALLS,
        Permanent,
        Error,
        Validation,
        false,
        "The server could not parse the request.",
        "JSON-RPC error -32700: the request was not valid JSON.",
        "Send valid JSON; this is a bug in the caller, do not retry unchanged."
    ),
    code_def!(
        "jsonrpc.invalid_request",
        ALL_CALLS,
        Permanent,
        Error,
        Validation,
        false,
        "The request is not a valid JSON-RPC request.",
        "JSON-RPC error -32600: `jsonrpc`, `method` or `id` is missing or wrong.",
        "Send a valid JSON-RPC 2.0 request; do not retry unchanged."
    ),
    code_def!(
        "jsonrpc.method_not_found",
        ALL_CALLS,
        Permanent,
        Error,
        NotFound,
        false,
        "The method does not exist.",
        "JSON-RPC error -32601: the server does not support the method.",
        "Call a method the server supports; do not retry unchanged."
    ),
    code_def!(
        "jsonrpc.invalid_params",
        ALL_CALLS,
        Permanent,
        Error,
        Validation,
        false,
        "The parameters are invalid.",
        "JSON-RPC error -32602: wrong or missing parameters (for MCP, also an unknown tool).",
        "Fix the parameters (see field and allowed_values), then call again."
    ),
    code_def!(
        "jsonrpc.internal_error",
        ALL_CALLS,
        Transient,
        Error,
        Internal,
        true,
        "The server failed internally.",
        "JSON-RPC error -32603, unless its `data.retryable` says otherwise.",
        "Retry after the backoff delay with the same idempotency key."
    ),
    code_def!(
        "jsonrpc.server_error",
        ALL_CALLS,
        Transient,
        Error,
        Dependency,
        true,
        "The server reported an implementation-defined error.",
        "A JSON-RPC error in -32099..-32000 with no more specific meaning in this protocol.",
        "Retry after the backoff delay; stop if it keeps failing."
    ),
    code_def!(
        "jsonrpc.application_error",
        ALL_CALLS,
        Permanent,
        Error,
        Internal,
        false,
        "The server reported an application error.",
        "A JSON-RPC error outside the reserved ranges, unless its `data.retryable` says otherwise.",
        "Do not retry unchanged; read the message and adjust the request."
    ),
    code_def!(
        "mcp.tool_error",
        TOOL,
        Semantic,
        Error,
        Internal,
        false,
        "The tool ran and reported an error.",
        "An MCP `tools/call` result with `isError: true` and no structured envelope.",
        "Read the tool's message, change the arguments or pick another tool, then call again."
    ),
    code_def!(
        "mcp.connection_closed",
        TOOL,
        Transient,
        Error,
        Network,
        true,
        "The MCP connection closed.",
        "MCP error -32000 (ConnectionClosed): the transport closed before the response.",
        "Reconnect, then retry after the backoff delay."
    ),
    code_def!(
        "mcp.request_timeout",
        TOOL,
        Transient,
        Error,
        Timeout,
        true,
        "The MCP request timed out.",
        "MCP error -32001 (RequestTimeout).",
        "Retry after the backoff delay with the same idempotency key."
    ),
    code_def!(
        "mcp.resource_not_found",
        TOOL,
        Permanent,
        Error,
        NotFound,
        false,
        "The MCP resource was not found.",
        "MCP error -32002: the resource URI does not exist.",
        "List the server's resources and use one that exists."
    ),
    code_def!(
        "mcp.url_elicitation_required",
        TOOL,
        State,
        Warning,
        InputRequired,
        false,
        "The user must complete an interaction at a URL first.",
        "MCP error -32042 (URLElicitationRequired): the server needs the user to visit a URL.",
        "Show the user the URL from the error data, wait for them to finish, then call again."
    ),
    code_def!(
        "mcp.cancelled",
        TOOL,
        Permanent,
        Warning,
        Cancelled,
        false,
        "The request was cancelled.",
        "An MCP `notifications/cancelled` for the request.",
        "Do not retry unless the user asks again."
    ),
    code_def!(
        "a2a.task_not_found",
        AGENT,
        Permanent,
        Error,
        NotFound,
        false,
        "The task was not found.",
        "A2A error -32001 (TaskNotFoundError): the task id is unknown or expired.",
        "Start a new task instead of continuing this one."
    ),
    code_def!(
        "a2a.task_not_cancelable",
        AGENT,
        Permanent,
        Warning,
        State,
        false,
        "The task cannot be cancelled.",
        "A2A error -32002 (TaskNotCancelableError): the task is already in a terminal state.",
        "Treat the task as finished; read its final state instead of cancelling."
    ),
    code_def!(
        "a2a.push_not_supported",
        AGENT,
        Permanent,
        Error,
        Validation,
        false,
        "The agent does not support push notifications.",
        "A2A error -32003 (PushNotificationNotSupportedError).",
        "Poll or stream the task instead of configuring push notifications."
    ),
    code_def!(
        "a2a.unsupported_operation",
        AGENT,
        Permanent,
        Error,
        Validation,
        false,
        "The agent does not support this operation.",
        "A2A error -32004 (UnsupportedOperationError).",
        "Use an operation the agent card declares."
    ),
    code_def!(
        "a2a.content_type_not_supported",
        AGENT,
        Permanent,
        Error,
        Validation,
        false,
        "The agent does not accept this content type.",
        "A2A error -32005 (ContentTypeNotSupportedError).",
        "Send parts in a media type the agent card lists."
    ),
    code_def!(
        "a2a.invalid_agent_response",
        AGENT,
        Transient,
        Error,
        Dependency,
        true,
        "The agent returned an invalid response.",
        "A2A error -32006 (InvalidAgentResponseError).",
        "Retry after the backoff delay; fall back to another agent if it persists."
    ),
    code_def!(
        "a2a.extended_card_not_configured",
        AGENT,
        Permanent,
        Error,
        Validation,
        false,
        "The agent has no authenticated extended card.",
        "A2A error -32007 (AuthenticatedExtendedCardNotConfiguredError).",
        "Use the public agent card."
    ),
    code_def!(
        "a2a.extension_support_required",
        AGENT,
        Permanent,
        Error,
        Validation,
        false,
        "The agent requires an extension the client did not declare.",
        "A2A error -32008 (ExtensionSupportRequiredError).",
        "Declare support for the required extension, or use another agent."
    ),
    code_def!(
        "a2a.version_not_supported",
        AGENT,
        Permanent,
        Error,
        Validation,
        false,
        "The agent does not support this protocol version.",
        "A2A error -32009 (VersionNotSupportedError).",
        "Call the agent with a protocol version its card lists."
    ),
    code_def!(
        "task.failed",
        AGENT,
        Semantic,
        Error,
        Dependency,
        false,
        "The sub-agent's task failed.",
        "An A2A task reached the state `failed` (v1.0 `TASK_STATE_FAILED`).",
        "Reformulate the request or delegate to another agent; do not resend it unchanged."
    ),
    code_def!(
        "task.rejected",
        AGENT,
        Policy,
        Error,
        Dependency,
        false,
        "The sub-agent rejected the task.",
        "An A2A task reached the state `rejected`: the agent declined to do it.",
        "Take the fallback path: delegate to another agent or handle the step yourself."
    ),
    code_def!(
        "task.canceled",
        AGENT,
        Permanent,
        Warning,
        Cancelled,
        false,
        "The task was canceled.",
        "An A2A task reached the state `canceled`.",
        "Do not retry unless the user asks again."
    ),
    code_def!(
        "task.input_required",
        AGENT,
        State,
        Warning,
        InputRequired,
        false,
        "The sub-agent needs more input to continue.",
        "An A2A task is in the state `input-required` (interrupted, not terminal).",
        "Ask the user (or answer yourself) and send the answer on the same task id."
    ),
    code_def!(
        "task.auth_required",
        AGENT,
        State,
        Fatal,
        Auth,
        false,
        "The sub-agent needs authorization to continue.",
        "An A2A task is in the state `auth-required`.",
        "Ask a human to authorize the agent, then resume the same task id."
    ),
];
