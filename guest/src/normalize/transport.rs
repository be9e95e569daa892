//! Network errors, client exceptions and caller-measured timeouts. Classified
//! by error code and exception type name; messages are kept, never matched.

use super::Finding;
use crate::model::{SourceKind, TimeoutPhase};
use crate::registry::Surface;

/// A network error code (Node, undici, libc names).
pub(super) fn network(code: &str, message: Option<&str>) -> Finding {
    let upper = code.to_ascii_uppercase();
    let base = network_base(&upper);
    let mut f = Finding::new(base);
    f.message = message.map(str::to_owned);
    f.upstream.source = Some(SourceKind::Network);
    f.upstream.provider = Some("node".into());
    f.upstream.code = Some(code.to_owned());
    f
}

fn network_base(code: &str) -> &'static str {
    match code {
        "ECONNRESET"
        | "EPIPE"
        | "ECONNABORTED"
        | "UND_ERR_SOCKET"
        | "UND_ERR_CLOSED"
        | "ERR_STREAM_PREMATURE_CLOSE"
        | "ERR_HTTP2_STREAM_ERROR"
        | "ERR_HTTP2_SESSION_ERROR"
        | "HPE_INVALID_CONSTANT"
        | "EOF" => "network.connection_reset",
        "ECONNREFUSED" => "network.connection_refused",
        "EAI_AGAIN" => "network.dns_temporary",
        "ENOTFOUND" | "EAI_NONAME" | "EAI_NODATA" => "network.dns_not_found",
        "EHOSTUNREACH" | "ENETUNREACH" | "ENETDOWN" | "EHOSTDOWN" => "network.unreachable",
        "ETIMEDOUT" | "UND_ERR_CONNECT_TIMEOUT" | "ERR_SOCKET_CONNECTION_TIMEOUT" => {
            "timeout.connect"
        }
        "UND_ERR_HEADERS_TIMEOUT" | "UND_ERR_BODY_TIMEOUT" | "ESOCKETTIMEDOUT" => "timeout.read",
        "ABORT_ERR" | "ERR_CANCELED" | "UND_ERR_ABORTED" => "exception.cancelled",
        "CERT_HAS_EXPIRED"
        | "DEPTH_ZERO_SELF_SIGNED_CERT"
        | "SELF_SIGNED_CERT_IN_CHAIN"
        | "UNABLE_TO_VERIFY_LEAF_SIGNATURE"
        | "UNABLE_TO_GET_ISSUER_CERT_LOCALLY"
        | "ERR_TLS_CERT_ALTNAME_INVALID"
        | "CERT_NOT_YET_VALID"
        | "EPROTO" => "network.tls_error",
        c if c.starts_with("ERR_SSL_") || c.starts_with("ERR_TLS_") => "network.tls_error",
        _ => "network.error",
    }
}

/// A client exception, by type name (the last segment of a dotted or `::` path).
pub(super) fn exception(type_name: &str, message: Option<&str>) -> Finding {
    let last = type_name.rsplit(['.', ':']).next().unwrap_or(type_name);
    let base = exception_base(type_name, last);
    let mut f = Finding::new(base);
    f.message = message.map(str::to_owned);
    f.upstream.source = Some(SourceKind::Exception);
    f.upstream.provider = Some(exception_family(type_name).into());
    f.upstream.error_type = Some(type_name.to_owned());
    let root = type_name.split(['.', ':']).next().unwrap_or("");
    if matches!(
        root,
        "openai" | "anthropic" | "google" | "cohere" | "mistralai"
    ) {
        f.surface = Some(Surface::Llm);
    }
    f
}

fn exception_family(type_name: &str) -> &'static str {
    if type_name.starts_with("java.") || type_name.starts_with("javax.") {
        "java"
    } else if type_name.starts_with("context.") || type_name.starts_with("net.") {
        "go"
    } else {
        "python"
    }
}

fn exception_base(full: &str, last: &str) -> &'static str {
    match (full, last) {
        ("context.DeadlineExceeded", _) => "timeout.total",
        ("context.Canceled", _) => "exception.cancelled",
        (
            _,
            "ConnectTimeout"
            | "ConnectTimeoutError"
            | "ConnectTimeoutException"
            | "ConnectionTimeoutError",
        ) => "timeout.connect",
        (
            _,
            "ReadTimeout" | "ReadTimeoutError" | "SocketTimeoutException" | "ServerTimeoutError",
        ) => "timeout.read",
        (_, "WriteTimeout") => "timeout.write",
        (_, "PoolTimeout" | "PoolTimeoutError") => "timeout.pool",
        (
            _,
            "TimeoutError" | "TimeoutException" | "Timeout" | "timeout" | "APITimeoutError"
            | "DeadlineExceeded",
        ) => "timeout.total",
        (
            _,
            "ConnectionResetError"
            | "BrokenPipeError"
            | "ConnectionAbortedError"
            | "RemoteProtocolError"
            | "ServerDisconnectedError"
            | "ChunkedEncodingError"
            | "ProtocolError"
            | "IncompleteRead"
            | "ClientPayloadError",
        ) => "network.connection_reset",
        (_, "ConnectionRefusedError" | "ConnectException") => "network.connection_refused",
        (_, "UnknownHostException") => "network.dns_not_found",
        (
            _,
            "SSLError"
            | "SSLCertVerificationError"
            | "CertificateError"
            | "ClientSSLError"
            | "ClientConnectorCertificateError"
            | "SSLHandshakeException",
        ) => "network.tls_error",
        (
            _,
            "ConnectError"
            | "ClientConnectorError"
            | "ConnectionError"
            | "NewConnectionError"
            | "APIConnectionError"
            | "NetworkError"
            | "gaierror"
            | "ClientConnectionError",
        ) => "network.error",
        (_, "ModelRetry") => "exception.model_retry",
        (_, "ValidationError" | "ZodError") => "exception.validation_error",
        (_, "CancelledError" | "AbortError" | "KeyboardInterrupt" | "CanceledError") => {
            "exception.cancelled"
        }
        (
            _,
            "JSONDecodeError" | "ContentTypeError" | "UnexpectedModelBehavior" | "DecodingError",
        ) => "response.malformed",
        // Provider SDK exceptions name the HTTP condition they wrap.
        (_, "RateLimitError") => "http.429_rate_limited",
        (_, "InternalServerError" | "APIError") => "http.500_internal_error",
        (_, "ServiceUnavailableError") => "http.503_unavailable",
        (_, "OverloadedError") => "http.529_overloaded",
        (_, "AuthenticationError") => "http.401_unauthorized",
        (_, "PermissionDeniedError") => "http.403_forbidden",
        (_, "NotFoundError") => "http.404_not_found",
        (_, "BadRequestError") => "http.400_bad_request",
        (_, "UnprocessableEntityError") => "http.422_unprocessable",
        (_, "ConflictError") => "http.409_conflict",
        (_, "ContentFilterFinishReasonError") => "policy.refusal",
        (_, "LengthFinishReasonError") => "output.truncated",
        _ => "exception.unhandled",
    }
}

/// A caller-measured timeout.
pub(super) fn timeout(phase: TimeoutPhase, after_ms: Option<u64>) -> Finding {
    let (base, doing) = match phase {
        TimeoutPhase::Connect => ("timeout.connect", "connecting"),
        TimeoutPhase::Read => ("timeout.read", "waiting for the response"),
        TimeoutPhase::Write => ("timeout.write", "sending the request"),
        TimeoutPhase::Pool => ("timeout.pool", "waiting for a pooled connection"),
        TimeoutPhase::Total => ("timeout.total", "waiting for the call to finish"),
    };
    let mut f = Finding::new(base);
    f.message = after_ms.map(|ms| format!("Timed out after {ms} ms while {doing}."));
    f.upstream.source = Some(SourceKind::Timeout);
    f.upstream.error_type = Some(phase.as_str().to_owned());
    f
}
