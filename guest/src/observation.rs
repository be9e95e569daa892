//! Observations: the input contract, parsed from JSON (or built from WIT types).
//!
//! ```text
//! {"source":"http", "status":429, "headers":{...}, "body": <JSON value or raw string>}
//! {"source":"mcp"|"a2a"|"jsonrpc", "message": <a JSON-RPC response or notification>}
//! {"source":"mcp"|"a2a"|"jsonrpc", "message": <a bare result: CallToolResult, Task, event>}
//! {"source":"mcp", "code":-32001, "message":"Request timed out"}   (an SDK error object)
//! {"source":"network", "code":"ECONNRESET", "message":"..."}
//! {"source":"exception", "type":"httpx.ReadTimeout", "message":"..."}
//! {"source":"timeout", "phase":"connect"|"read"|"write"|"pool"|"total", "after_ms":5000}
//! ```
//! `source` may be omitted when the shape says it. Optional everywhere: `call`,
//! `provider`, `request_id`, `now_ms`, and (for decisions) `context`.

use crate::error::PolicyError;
use crate::headers::Headers;
use crate::json_kind;
use crate::model::{CallKind, TimeoutPhase};
use serde_json::{Map, Value};

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
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// No body.
    Empty,
    /// A JSON body (given as JSON, or text that parsed as JSON).
    Json(Value),
    /// Any other text (HTML, XML, plain text).
    Text(String),
}

impl Body {
    /// From text: JSON when it parses as JSON, else text.
    pub fn from_text(s: String) -> Self {
        let t = s.trim_start();
        if s.len() <= MAX_PARSED_BODY
            && (t.starts_with('{') || t.starts_with('['))
            && let Ok(v) = serde_json::from_str::<Value>(&s)
        {
            return Body::Json(v);
        }
        if s.trim().is_empty() {
            Body::Empty
        } else {
            Body::Text(s)
        }
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
    },
    /// A caller-measured timeout.
    Timeout {
        /// Phase.
        phase: TimeoutPhase,
        /// Waited for, in ms.
        after_ms: Option<u64>,
    },
}

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
        let v: Value =
            serde_json::from_str(text).map_err(|e| PolicyError::json("observation", &e))?;
        Self::from_json(v)
    }

    /// Parse an observation from a JSON value.
    pub fn from_json(v: Value) -> Result<Self, PolicyError> {
        let Value::Object(mut m) = v else {
            return Err(PolicyError::observation(format!(
                "observation must be a JSON object, got {}; send {{\"source\":\"http\",\"status\":503}} or similar",
                json_kind(&v)
            )));
        };
        let call = match m.get("call") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(CallKind::parse(s).ok_or_else(|| {
                PolicyError::observation(format!(
                    "call {s:?} is not one of tool, llm, agent; omit it or use one of those"
                ))
            })?),
            Some(other) => return Err(type_err("call", "a string", other)),
        };
        let provider = opt_string(&m, "provider")?.map(|p| p.to_ascii_lowercase());
        let request_id = opt_string(&m, "request_id")?;
        let now_ms = match m.get("now_ms") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| type_err("now_ms", "a non-negative integer", v))?,
            ),
        };
        let context = m.remove("context").filter(|c| !c.is_null());
        let source = opt_string(&m, "source")?;
        let failure = match source.as_deref() {
            Some("http") => http(&mut m)?,
            Some("jsonrpc") => rpc(&mut m, Protocol::JsonRpc)?,
            Some("mcp") => rpc(&mut m, Protocol::Mcp)?,
            Some("a2a") => rpc(&mut m, Protocol::A2a)?,
            Some("network") => network(&m)?,
            Some("exception") => exception(&m)?,
            Some("timeout") => timeout(&m)?,
            Some(other) => {
                return Err(PolicyError::observation(format!(
                    "source {other:?} is not one of http, jsonrpc, mcp, a2a, network, exception, timeout; fix it or omit it"
                )));
            }
            None => infer(&mut m)?,
        };
        Ok(Self {
            failure,
            call,
            provider,
            request_id,
            now_ms,
            context,
        })
    }
}

fn infer(m: &mut Map<String, Value>) -> Result<Failure, PolicyError> {
    if is_bare_result(m) {
        // A bare MCP result or A2A task / event: the protocol is refined from its shape.
        let protocol = if m.get("isError").is_some() || m.get("resultType").is_some() {
            Protocol::Mcp
        } else {
            Protocol::A2a
        };
        Ok(Failure::Rpc {
            protocol,
            message: Value::Object(std::mem::take(m)),
        })
    } else if m.contains_key("status") {
        http(m)
    } else if m.contains_key("message") && m.get("message").is_some_and(Value::is_object) {
        rpc(m, Protocol::JsonRpc)
    } else if m.contains_key("jsonrpc") || m.contains_key("error") || m.contains_key("result") {
        // The observation is itself a JSON-RPC message.
        Ok(Failure::Rpc {
            protocol: Protocol::JsonRpc,
            message: Value::Object(std::mem::take(m)),
        })
    } else if m.contains_key("phase") {
        timeout(m)
    } else if m.contains_key("type") {
        exception(m)
    } else if m.contains_key("code") {
        network(m)
    } else {
        Err(PolicyError::observation(
            "cannot tell the observation's source from its shape; add \"source\": \"http\" (with status), \"mcp\", \"a2a\", \"jsonrpc\" (with message), \"network\" (with code), \"exception\" (with type) or \"timeout\" (with phase)",
        ))
    }
}

fn http(m: &mut Map<String, Value>) -> Result<Failure, PolicyError> {
    let status = match m.get("status") {
        Some(v) => v
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .filter(|s| (100..=999).contains(s))
            .ok_or_else(|| type_err("status", "an HTTP status between 100 and 999", v))?,
        None => {
            return Err(PolicyError::observation(
                "an http observation needs \"status\"; add the response's status code",
            ));
        }
    };
    let headers = Headers::from_json(m.get("headers").unwrap_or(&Value::Null))
        .map_err(PolicyError::observation)?;
    let body = match m.remove("body") {
        None | Some(Value::Null) => Body::Empty,
        Some(Value::String(s)) => Body::from_text(s),
        Some(v) => Body::Json(v),
    };
    Ok(Failure::Http {
        status,
        headers,
        body,
    })
}

/// Members that make the observation itself a JSON-RPC message or a bare
/// protocol result (an MCP `CallToolResult`, an A2A Task or status update).
const MESSAGE_MEMBERS: &[&str] = &[
    "error",
    "result",
    "method",
    "isError",
    "resultType",
    "task",
    "statusUpdate",
    "status_update",
];

/// Whether the members are a bare protocol result or event (no JSON-RPC envelope).
fn is_bare_result(m: &Map<String, Value>) -> bool {
    m.get("isError").is_some_and(Value::is_boolean)
        || m.get("resultType").is_some_and(Value::is_string)
        || ["task", "statusUpdate", "status_update"]
            .iter()
            .any(|k| m.get(*k).is_some_and(Value::is_object))
        || m.get("status").is_some_and(|s| s.get("state").is_some())
}

fn rpc(m: &mut Map<String, Value>, protocol: Protocol) -> Result<Failure, PolicyError> {
    // An SDK's error object (`McpError`: `{code, message, data?}`) with no envelope.
    if m.get("code").is_some_and(Value::is_i64) {
        let mut msg = std::mem::take(m);
        msg.remove("source");
        return Ok(Failure::Rpc {
            protocol,
            message: Value::Object(msg),
        });
    }
    let message = match m.remove("message") {
        Some(Value::String(s)) => {
            serde_json::from_str(&s).map_err(|e| PolicyError::json("message", &e))?
        }
        Some(v @ Value::Object(_)) => v,
        Some(other) => return Err(type_err("message", "a JSON-RPC message object", &other)),
        None if MESSAGE_MEMBERS.iter().any(|k| m.contains_key(*k)) || is_bare_result(m) => {
            let mut msg = std::mem::take(m);
            msg.remove("source");
            Value::Object(msg)
        }
        None => {
            return Err(PolicyError::observation(
                "a jsonrpc/mcp/a2a observation needs \"message\"; add the JSON-RPC response or notification as \"message\"",
            ));
        }
    };
    Ok(Failure::Rpc { protocol, message })
}

fn network(m: &Map<String, Value>) -> Result<Failure, PolicyError> {
    let code = match m.get("code") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(type_err(
                "code",
                "a non-empty string such as \"ECONNRESET\"",
                other,
            ));
        }
        None => {
            return Err(PolicyError::observation(
                "a network observation needs \"code\"; add the error code, e.g. \"code\": \"ECONNRESET\"",
            ));
        }
    };
    Ok(Failure::Network {
        code,
        message: opt_string(m, "message")?,
    })
}

fn exception(m: &Map<String, Value>) -> Result<Failure, PolicyError> {
    let type_name = match m.get("type") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        Some(other) => {
            return Err(type_err(
                "type",
                "a non-empty string such as \"httpx.ReadTimeout\"",
                other,
            ));
        }
        None => {
            return Err(PolicyError::observation(
                "an exception observation needs \"type\"; add the exception type, e.g. \"type\": \"httpx.ReadTimeout\"",
            ));
        }
    };
    Ok(Failure::Exception {
        type_name,
        message: opt_string(m, "message")?,
    })
}

fn timeout(m: &Map<String, Value>) -> Result<Failure, PolicyError> {
    let phase = match m.get("phase") {
        None | Some(Value::Null) => TimeoutPhase::Total,
        Some(Value::String(s)) => TimeoutPhase::parse(s).ok_or_else(|| {
            PolicyError::observation(format!(
                "phase {s:?} is not one of connect, read, write, pool, total; use one of those"
            ))
        })?,
        Some(other) => return Err(type_err("phase", "a string", other)),
    };
    let after_ms = match m.get("after_ms") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| type_err("after_ms", "a non-negative integer", v))?,
        ),
    };
    Ok(Failure::Timeout { phase, after_ms })
}

fn opt_string(m: &Map<String, Value>, key: &str) -> Result<Option<String>, PolicyError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) if key == "request_id" => Ok(Some(n.to_string())),
        Some(other) => Err(type_err(key, "a string", other)),
    }
}

fn type_err(key: &str, want: &str, got: &Value) -> PolicyError {
    PolicyError::observation(format!(
        "{key} must be {want}, got {}; fix the observation's {key}",
        json_kind(got)
    ))
}
