//! Observations: the input contract, parsed from JSON (or built from WIT types).
//!
//! ```text
//! {"source":"http", "status":429, "headers":{...}, "body": <JSON value or raw string>}
//! {"source":"mcp"|"a2a"|"jsonrpc", "message": <a JSON-RPC response or notification>}
//! {"source":"mcp"|"a2a"|"jsonrpc", "message": <a bare result: CallToolResult, Task, event>}
//! {"source":"mcp", "code":-32001, "message":"Request timed out"}   (an SDK error object)
//! {"source":"network", "code":"ECONNRESET", "message":"..."}
//! {"source":"exception", "type":"httpx.ReadTimeout", "message":"..."}
//! {"source":"exception", "type":"openai.RateLimitError", "status":429, "headers":{...},
//!  "body":{...}, "retryable":true, "cause":{<observation>}, "exceptions":[<observation>...]}
//! {"source":"timeout", "phase":"connect"|"read"|"write"|"pool"|"total", "after_ms":5000}
//! ```
//! `source` may be omitted when the shape says it. Optional everywhere: `call`,
//! `provider`, `request_id`, `now_ms`, and (for decisions) `context`.

use crate::error::PolicyError;
use crate::headers::Headers;
use crate::model::{CallKind, TimeoutPhase};
use crate::observation_view::{BodyView, ObservationView};
use serde_json::Value;
use std::borrow::Cow;

/// Text bodies longer than this are kept as text and not parsed as JSON or XML.
pub const MAX_PARSED_BODY: usize = 4 * 1024 * 1024;

/// The JSON-RPC dialect of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Plain JSON-RPC 2.0.
    JsonRpc,
    /// Model Context Protocol.
    Mcp,
    /// Agent2Agent.
    A2a,
}

/// An HTTP body.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Body {
    /// No body.
    #[default]
    Empty,
    /// A JSON body (given as JSON, or text that parsed as JSON).
    Json(Value),
    /// Any other text (HTML, XML, plain text).
    Text(String),
}

impl Body {
    /// From text: JSON when it parses as JSON, else text.
    pub fn from_text(s: String) -> Self {
        let json = match BodyView::from_text(Cow::Borrowed(&s)) {
            BodyView::Empty => return Body::Empty,
            BodyView::Json(v) => Some(v.to_value()),
            BodyView::Text(_) => None,
        };
        json.map_or(Body::Text(s), Body::Json)
    }
}

/// What failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// An HTTP response.
    Http {
        /// Status code.
        status: u16,
        /// Headers.
        headers: Headers,
        /// Body.
        body: Body,
    },
    /// A JSON-RPC message.
    Rpc {
        /// Dialect (from `source`; refined from the message's shape).
        protocol: Protocol,
        /// The message.
        message: Value,
    },
    /// A network error.
    Network {
        /// Error code, e.g. `ECONNRESET`.
        code: String,
        /// Message, kept but never used to classify.
        message: Option<String>,
    },
    /// A client exception.
    Exception {
        /// Qualified type name.
        type_name: String,
        /// Message, kept but never used to classify.
        message: Option<String>,
        /// What else the exception carries (a response, a cause, members), if anything.
        detail: Option<Box<ExceptionDetail>>,
    },
    /// A caller-measured timeout.
    Timeout {
        /// Phase.
        phase: TimeoutPhase,
        /// Waited for, in ms.
        after_ms: Option<u64>,
    },
}

/// What an exception carries besides its type and message: the HTTP response
/// it wraps, the framework's own retry verdict, the exception it was raised
/// from (`__cause__`, JavaScript `cause`, the AI SDK's `lastError`) and the
/// members of an exception group (`ExceptionGroup`, `AggregateError`,
/// `AI_RetryError.errors`). Members nest at most
/// [`MAX_EXCEPTION_DEPTH`] levels; deeper ones are not read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExceptionDetail {
    /// The HTTP status the exception carries.
    pub status: Option<u16>,
    /// The response headers it carries.
    pub headers: Headers,
    /// The response body it carries.
    pub body: Body,
    /// The framework's own verdict (e.g. the AI SDK's `isRetryable`): a hint,
    /// used only when nothing else is recognised.
    pub retryable: Option<bool>,
    /// The exception this one was raised from.
    pub cause: Option<Box<Observation>>,
    /// The members of an exception group.
    pub exceptions: Vec<Observation>,
}

/// How deep `cause` and `exceptions` members are read; deeper ones are ignored.
pub const MAX_EXCEPTION_DEPTH: usize = 8;

/// A failed call as observed.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// What failed.
    pub failure: Failure,
    /// Kind of call, if known.
    pub call: Option<CallKind>,
    /// Provider hint, lowercase.
    pub provider: Option<String>,
    /// Caller's request id.
    pub request_id: Option<String>,
    /// Caller's clock (Unix ms).
    pub now_ms: Option<u64>,
    /// An embedded decision context (JSON), if any.
    pub context: Option<Value>,
}

impl Observation {
    /// An observation of `failure` with nothing else known.
    pub fn new(failure: Failure) -> Self {
        Self {
            failure,
            call: None,
            provider: None,
            request_id: None,
            now_ms: None,
            context: None,
        }
    }

    /// Parse the JSON text of an observation.
    pub fn from_json_str(text: &str) -> Result<Self, PolicyError> {
        ObservationView::parse(text).map(ObservationView::into_observation)
    }

    /// Parse an observation from a JSON value.
    pub fn from_json(v: Value) -> Result<Self, PolicyError> {
        ObservationView::from_value(&v).map(ObservationView::into_observation)
    }
}
