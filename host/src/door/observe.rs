//! The default observation of an operation's error (`docs/observation.md`):
//! an I/O error is the network failure it names, anything else an exception
//! of the error's type.

use std::any::Any;
use std::error::Error;
use std::io::{self, ErrorKind};
use std::sync::Arc;

use serde_json::json;

/// The observation of `e` when the call sets no `observe`: the first I/O
/// error with a network kind along its source chain (the error itself, or
/// one a boxed error wraps) as `{"source":"network","code":...}` with the
/// libc name of its kind; otherwise an exception of the error's type name
/// with its message.
pub(super) fn default_observation<E: std::fmt::Display + 'static>(e: &E) -> String {
    match network(e) {
        Some(observation) => observation,
        None => exception(e),
    }
}

/// The observation of an error as an exception of its type, with its message.
pub(super) fn exception<E: std::fmt::Display>(e: &E) -> String {
    json!({
        "source": "exception",
        "type": std::any::type_name::<E>(),
        "message": e.to_string(),
    })
    .to_string()
}

/// `e` as a network observation, when it is or wraps an I/O error of a
/// network kind. A generic error's source chain can be read only through
/// `dyn Error`: the error types read are `io::Error` and the boxed and
/// shared `dyn Error`s (what `?` and `.into()` make of any error).
fn network<E: 'static>(e: &E) -> Option<String> {
    let any = e as &dyn Any;
    let first: &(dyn Error + 'static) = if let Some(io) = any.downcast_ref::<io::Error>() {
        io
    } else if let Some(b) = any.downcast_ref::<Box<dyn Error + Send + Sync>>() {
        &**b
    } else if let Some(b) = any.downcast_ref::<Box<dyn Error + Send>>() {
        &**b
    } else if let Some(b) = any.downcast_ref::<Box<dyn Error>>() {
        &**b
    } else if let Some(a) = any.downcast_ref::<Arc<dyn Error + Send + Sync>>() {
        &**a
    } else {
        return None;
    };
    let mut link = Some(first);
    while let Some(err) = link {
        if let Some(io) = err.downcast_ref::<io::Error>()
            && let Some(code) = code(io.kind())
        {
            return Some(
                json!({"source": "network", "code": code, "message": io.to_string()}).to_string(),
            );
        }
        link = err.source();
    }
    None
}

/// The libc name of a network failure's kind, as the component reads
/// network codes; `None` for the kinds that are not network failures.
fn code(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::ConnectionRefused => "ECONNREFUSED",
        ErrorKind::ConnectionReset => "ECONNRESET",
        ErrorKind::ConnectionAborted => "ECONNABORTED",
        ErrorKind::BrokenPipe => "EPIPE",
        ErrorKind::UnexpectedEof => "EOF",
        ErrorKind::TimedOut => "ETIMEDOUT",
        ErrorKind::WouldBlock => "EAGAIN",
        ErrorKind::NotConnected => "ENOTCONN",
        ErrorKind::HostUnreachable => "EHOSTUNREACH",
        ErrorKind::NetworkUnreachable => "ENETUNREACH",
        ErrorKind::NetworkDown => "ENETDOWN",
        ErrorKind::AddrNotAvailable => "EADDRNOTAVAIL",
        ErrorKind::AddrInUse => "EADDRINUSE",
        ErrorKind::Interrupted => "EINTR",
        _ => return None,
    })
}
