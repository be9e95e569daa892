//! The input contract: what each `source` needs, the shape inference when
//! `source` is omitted, and every error text, read from a [`View`].

use super::{BodyView, FailureView, ObservationView};
use crate::error::PolicyError;
use crate::headers::HeaderList;
use crate::json_view::{Obj, View};
use crate::model::{CallKind, TimeoutPhase};
use crate::observation::Protocol;
use std::borrow::Cow;

mod exception;

impl<'a> ObservationView<'a> {
    /// Read an observation from a JSON value (the input contract).
    pub fn from_view(v: View<'a>) -> Result<Self, PolicyError> {
        Self::from_view_at(v, 0)
    }

    /// Read an observation nested `depth` levels inside exception members
    /// (`cause`, `exceptions`); at [`MAX_EXCEPTION_DEPTH`](crate::observation::MAX_EXCEPTION_DEPTH)
    /// its own members are no longer read.
    pub(crate) fn from_view_at(v: View<'a>, depth: usize) -> Result<Self, PolicyError> {
        let View::Object(mut m) = v else {
            return Err(PolicyError::observation(format!(
                "observation must be a JSON object, got {}; send {{\"source\":\"http\",\"status\":503}} or similar",
                v.kind()
            )));
        };
        let call = match m.get("call") {
            None | Some(View::Null) => None,
            Some(View::String(s)) => Some(CallKind::parse(s).ok_or_else(|| {
                PolicyError::observation(format!(
                    "call {s:?} is not one of tool, llm, agent; omit it or use one of those"
                ))
            })?),
            Some(other) => return Err(type_err("call", "a string", other)),
        };
        let provider = opt_string(&m, "provider")?.map(lowercase);
        let request_id = opt_string(&m, "request_id")?;
        let now_ms = match m.get("now_ms") {
            None | Some(View::Null) => None,
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
            Some("exception") => exception::exception(&mut m, depth)?,
            Some("timeout") => timeout(&m)?,
            Some(other) => {
                return Err(PolicyError::observation(format!(
                    "source {other:?} is not one of http, jsonrpc, mcp, a2a, network, exception, timeout; fix it or omit it"
                )));
            }
            None => infer(&mut m, depth)?,
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

fn lowercase(s: Cow<'_, str>) -> Cow<'_, str> {
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(s.to_ascii_lowercase())
    } else {
        s
    }
}

fn infer<'a>(m: &mut Obj<'a>, depth: usize) -> Result<FailureView<'a>, PolicyError> {
    if is_bare_result(m) {
        // A bare MCP result or A2A task / event: the protocol is refined from its shape.
        let protocol = if m.get("isError").is_some()
            || m.get("resultType").is_some()
            || m.get("taskId").is_some()
        {
            Protocol::Mcp
        } else {
            Protocol::A2a
        };
        Ok(FailureView::Rpc {
            protocol,
            message: View::Object(std::mem::take(m)),
        })
    } else if m.contains_key("status") {
        http(m)
    } else if m.contains_key("message") && m.get("message").is_some_and(View::is_object) {
        rpc(m, Protocol::JsonRpc)
    } else if m.contains_key("jsonrpc") || m.contains_key("error") || m.contains_key("result") {
        // The observation is itself a JSON-RPC message.
        Ok(FailureView::Rpc {
            protocol: Protocol::JsonRpc,
            message: View::Object(std::mem::take(m)),
        })
    } else if m.contains_key("phase") {
        timeout(m)
    } else if m.contains_key("type") {
        exception::exception(m, depth)
    } else if m.contains_key("code") {
        network(m)
    } else {
        Err(PolicyError::observation(
            "cannot tell the observation's source from its shape; add \"source\": \"http\" (with status), \"mcp\", \"a2a\", \"jsonrpc\" (with message), \"network\" (with code), \"exception\" (with type) or \"timeout\" (with phase)",
        ))
    }
}

fn http<'a>(m: &mut Obj<'a>) -> Result<FailureView<'a>, PolicyError> {
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
    let headers = headers(m)?;
    let body = body(m);
    Ok(FailureView::Http {
        status,
        headers: Cow::Owned(headers),
        body,
    })
}

/// The `headers` member: an object or `[name, value]` pairs.
fn headers<'a>(m: &Obj<'a>) -> Result<HeaderList<'a>, PolicyError> {
    HeaderList::from_view(m.get("headers").unwrap_or(&View::Null)).map_err(PolicyError::observation)
}

/// The `body` member: JSON, or text that is parsed as JSON when it is JSON.
fn body<'a>(m: &mut Obj<'a>) -> BodyView<'a> {
    match m.remove("body") {
        None | Some(View::Null) => BodyView::Empty,
        Some(View::String(s)) => BodyView::from_text(s),
        Some(v) => BodyView::Json(v),
    }
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
fn is_bare_result(m: &Obj<'_>) -> bool {
    m.get("isError").is_some_and(View::is_boolean)
        || m.get("resultType").is_some_and(View::is_string)
        || ["task", "statusUpdate", "status_update"]
            .iter()
            .any(|k| m.get(k).is_some_and(View::is_object))
        || m.get("status").is_some_and(|s| s.get("state").is_some())
        || is_mcp_task(m)
}

/// An MCP task (tasks extension): a string `taskId` and a string `status`.
fn is_mcp_task(m: &Obj<'_>) -> bool {
    m.get("taskId").is_some_and(View::is_string) && m.get("status").is_some_and(View::is_string)
}

fn rpc<'a>(m: &mut Obj<'a>, protocol: Protocol) -> Result<FailureView<'a>, PolicyError> {
    // An SDK's error object (`McpError`: `{code, message, data?}`) with no envelope.
    if m.get("code").is_some_and(View::is_i64) {
        let mut msg = std::mem::take(m);
        msg.remove("source");
        return Ok(FailureView::Rpc {
            protocol,
            message: View::Object(msg),
        });
    }
    let message = match m.remove("message") {
        Some(View::String(Cow::Borrowed(s))) => {
            View::parse(s).map_err(|e| PolicyError::json("message", &e))?
        }
        Some(View::String(Cow::Owned(s))) => View::parse(&s)
            .map(View::into_owned)
            .map_err(|e| PolicyError::json("message", &e))?,
        Some(v @ View::Object(_)) => v,
        Some(other) => return Err(type_err("message", "a JSON-RPC message object", &other)),
        None if MESSAGE_MEMBERS.iter().any(|k| m.contains_key(k)) || is_bare_result(m) => {
            let mut msg = std::mem::take(m);
            msg.remove("source");
            View::Object(msg)
        }
        None => {
            return Err(PolicyError::observation(
                "a jsonrpc/mcp/a2a observation needs \"message\"; add the JSON-RPC response or notification as \"message\"",
            ));
        }
    };
    Ok(FailureView::Rpc { protocol, message })
}

/// A string trimmed, borrowed when it can be.
pub(super) fn trimmed<'a>(s: &Cow<'a, str>) -> Cow<'a, str> {
    match s {
        Cow::Borrowed(b) => Cow::Borrowed(b.trim()),
        Cow::Owned(o) => Cow::Owned(o.trim().to_owned()),
    }
}

fn network<'a>(m: &Obj<'a>) -> Result<FailureView<'a>, PolicyError> {
    let code = match m.get("code") {
        Some(View::String(s)) if !s.trim().is_empty() => trimmed(s),
        Some(View::Number(n)) => Cow::Owned(n.to_string()),
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
    Ok(FailureView::Network {
        code,
        message: opt_string(m, "message")?,
    })
}

fn timeout<'a>(m: &Obj<'a>) -> Result<FailureView<'a>, PolicyError> {
    let phase = match m.get("phase") {
        None | Some(View::Null) => TimeoutPhase::Total,
        Some(View::String(s)) => TimeoutPhase::parse(s).ok_or_else(|| {
            PolicyError::observation(format!(
                "phase {s:?} is not one of connect, read, write, pool, total; use one of those"
            ))
        })?,
        Some(other) => return Err(type_err("phase", "a string", other)),
    };
    let after_ms = match m.get("after_ms") {
        None | Some(View::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| type_err("after_ms", "a non-negative integer", v))?,
        ),
    };
    Ok(FailureView::Timeout { phase, after_ms })
}

pub(super) fn opt_string<'a>(m: &Obj<'a>, key: &str) -> Result<Option<Cow<'a, str>>, PolicyError> {
    match m.get(key) {
        None | Some(View::Null) => Ok(None),
        Some(View::String(s)) => Ok(Some(s.clone())),
        Some(View::Number(n)) if key == "request_id" => Ok(Some(Cow::Owned(n.to_string()))),
        Some(other) => Err(type_err(key, "a string", other)),
    }
}

pub(super) fn type_err(key: &str, want: &str, got: &View<'_>) -> PolicyError {
    PolicyError::observation(format!(
        "{key} must be {want}, got {}; fix the observation's {key}",
        got.kind()
    ))
}
