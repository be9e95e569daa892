//! Network errors, client exceptions and caller-measured timeouts. Classified
//! by error code and exception type name; messages are kept, never matched.

use super::http::status_base;
use super::{Finding, frameworks, providers};
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
///
/// SDK families are read before the generic names: Anthropic's per-code classes
/// (`anthropic.EnforcedSpendLimitReachedError` is `error_code`
/// `enforced_spend_limit_reached`), botocore's classes made at run time from the
/// AWS error code (`botocore.errorfactory.ThrottlingException`,
/// `BedrockRuntime.Client.exceptions.ValidationException`), and google-api-core
/// / google-genai classes by the HTTP or gRPC status each one documents.
pub(super) fn exception(type_name: &str, message: Option<&str>) -> Finding {
    let last = type_name.rsplit(['.', ':']).next().unwrap_or(type_name);
    let root = type_name.split(['.', ':']).next().unwrap_or("");
    let sdk = sdk_exception(type_name, root, last).or_else(|| {
        frameworks::class(type_name, root, last).map(|c| SdkException {
            base: c.base,
            code: None,
            surface: c.surface,
            provider: c.provider,
        })
    });
    let base = sdk
        .as_ref()
        .map_or_else(|| exception_base(type_name, last), |s| s.base);
    let mut f = Finding::new(base);
    f.message = message.map(str::to_owned);
    f.upstream.source = Some(SourceKind::Exception);
    f.upstream.provider = Some(exception_family(type_name).into());
    f.upstream.error_type = Some(type_name.to_owned());
    if let Some(s) = sdk {
        f.upstream.code = s.code;
        f.surface = s.surface;
        if let Some(p) = s.provider {
            f.upstream.provider = Some(p.into());
        }
    }
    if f.surface.is_none()
        && matches!(
            root,
            "openai" | "anthropic" | "cohere" | "mistralai" | "google" | "litellm"
        )
        && !is_google_cloud(type_name)
    {
        f.surface = Some(Surface::Llm);
    }
    f
}

/// google-api-core serves every Google Cloud API, not only models: its
/// exceptions say nothing about the kind of call.
fn is_google_cloud(type_name: &str) -> bool {
    type_name.starts_with("google.api_core.") || type_name.starts_with("google.cloud.")
}

/// What an SDK's exception class says beyond its name.
struct SdkException {
    base: &'static str,
    code: Option<String>,
    surface: Option<Surface>,
    provider: Option<&'static str>,
}

fn sdk_exception(full: &str, root: &str, last: &str) -> Option<SdkException> {
    if root == "anthropic" {
        // One class per `error.details.error_code` (anthropic/_error_classes.py).
        let code = snake_code(last.strip_suffix("Error").unwrap_or(last));
        let base = providers::anthropic_code_base(&code)?;
        return Some(SdkException {
            base,
            code: Some(code),
            surface: Some(Surface::Llm),
            provider: None,
        });
    }
    if let Some(name) = aws_runtime_code(full) {
        // The class is named after the error shape, which is the code, or the
        // code plus `Exception` (STS `IDPCommunicationErrorException` is code
        // `IDPCommunicationError`, per botocore/data/sts/*/service-2.json).
        let (code, base) = match providers::aws_code_base(name) {
            Some(b) => (name, b),
            None => match name
                .strip_suffix("Exception")
                .and_then(|c| Some((c, providers::aws_code_base(c)?)))
            {
                Some((c, b)) => (c, b),
                None => (name, "exception.unhandled"),
            },
        };
        let bedrock = full.starts_with("BedrockRuntime.") || BEDROCK_ONLY.contains(&code);
        return Some(SdkException {
            base,
            code: Some(code.to_owned()),
            surface: bedrock.then_some(Surface::Llm),
            provider: Some(if bedrock { "bedrock" } else { "aws" }),
        });
    }
    if let Some(class) = full.strip_prefix("google.api_core.exceptions.") {
        return google_api_core(class).map(|base| SdkException {
            base,
            code: None,
            surface: None,
            provider: Some("google"),
        });
    }
    if let Some(class) = full.strip_prefix("google.genai.errors.") {
        let base = match class {
            "ClientError" => "http.4xx_client_error",
            "ServerError" => "http.5xx_server_error",
            "UnknownApiResponseError" => "response.malformed",
            _ => return None,
        };
        return Some(SdkException {
            base,
            code: None,
            surface: Some(Surface::Llm),
            provider: Some("google"),
        });
    }
    None
}

/// Codes only Bedrock's runtime sends: the call was an LLM call.
const BEDROCK_ONLY: &[&str] = &[
    "ModelNotReadyException",
    "ModelTimeoutException",
    "ModelErrorException",
    "ModelStreamErrorException",
];

/// The AWS error code in the name of a class botocore made at run time:
/// `botocore.errorfactory.<Code>` (its `__module__` and `__name__`) or the
/// documented `<Service>.Client.exceptions.<Code>`.
fn aws_runtime_code(full: &str) -> Option<&str> {
    let code = full
        .strip_prefix("botocore.errorfactory.")
        .or_else(|| full.split_once(".Client.exceptions.").map(|(_, c)| c))?;
    (!code.is_empty() && code.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(code)
}

/// A google-api-core exception class, by the HTTP status (`code`) or gRPC status
/// (`grpc_status_code`) it documents in `google/api_core/exceptions.py`.
fn google_api_core(class: &str) -> Option<&'static str> {
    let grpc = |name| providers::google_status_base(name);
    Some(match class {
        "InvalidArgument" => grpc("INVALID_ARGUMENT")?,
        "FailedPrecondition" => grpc("FAILED_PRECONDITION")?,
        "OutOfRange" => grpc("OUT_OF_RANGE")?,
        "Unauthenticated" => grpc("UNAUTHENTICATED")?,
        "PermissionDenied" => grpc("PERMISSION_DENIED")?,
        "NotFound" => grpc("NOT_FOUND")?,
        "AlreadyExists" => grpc("ALREADY_EXISTS")?,
        "Aborted" => grpc("ABORTED")?,
        "ResourceExhausted" => grpc("RESOURCE_EXHAUSTED")?,
        "Cancelled" => grpc("CANCELLED")?,
        "InternalServerError" => grpc("INTERNAL")?,
        "Unknown" => grpc("UNKNOWN")?,
        "DataLoss" => grpc("DATA_LOSS")?,
        "MethodNotImplemented" => grpc("UNIMPLEMENTED")?,
        "ServiceUnavailable" => grpc("UNAVAILABLE")?,
        "DeadlineExceeded" => grpc("DEADLINE_EXCEEDED")?,
        "BadRequest" => status_base(400),
        "Unauthorized" => status_base(401),
        "Forbidden" => status_base(403),
        "MethodNotAllowed" => status_base(405),
        "Conflict" => status_base(409),
        "LengthRequired" => status_base(411),
        "PreconditionFailed" => status_base(412),
        "RequestRangeNotSatisfiable" => status_base(416),
        "TooManyRequests" => status_base(429),
        "BadGateway" => status_base(502),
        "GatewayTimeout" => status_base(504),
        "ClientError" => "http.4xx_client_error",
        "ServerError" => "http.5xx_server_error",
        "MovedPermanently" | "NotModified" | "TemporaryRedirect" | "ResumeIncomplete"
        | "Redirection" => "http.unexpected_status",
        _ => return None,
    })
}

/// `EnforcedSpendLimitReached` -> `enforced_spend_limit_reached`,
/// `CMEKKeyUnreachable` -> `cmek_key_unreachable` (an acronym ends before the
/// capital that starts the next word).
fn snake_code(camel: &str) -> String {
    let chars: Vec<char> = camel.chars().collect();
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars.get(i - 1).copied().unwrap_or('_');
            let next = chars.get(i + 1).copied();
            let boundary = prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()));
            if boundary {
                out.push('_');
            }
        }
        out.push(c.to_ascii_lowercase());
    }
    out
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
            "TimeoutError"
            | "TimeoutException"
            | "Timeout"
            | "timeout"
            | "APITimeoutError"
            | "APIConnectionTimeoutError"
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
            | "ClientPayloadError"
            | "ConnectionClosedError"
            | "ResponseStreamingError",
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
            | "ClientConnectionError"
            | "EndpointConnectionError"
            | "ProxyConnectionError"
            | "HTTPClientError",
        ) => "network.error",
        // botocore: no credentials to sign with; an operator must provide them.
        (
            "botocore.exceptions.NoCredentialsError"
            | "botocore.exceptions.PartialCredentialsError"
            | "botocore.exceptions.NoAuthTokenError"
            | "botocore.exceptions.CredentialRetrievalError"
            | "botocore.exceptions.TokenRetrievalError",
            _,
        ) => "http.401_unauthorized",
        (_, "ParamValidationError") => "exception.validation_error",
        (_, "ModelRetry") => "exception.model_retry",
        (_, "ValidationError" | "ZodError") => "exception.validation_error",
        (
            _,
            "CancelledError" | "AbortError" | "KeyboardInterrupt" | "CanceledError"
            | "APIUserAbortError",
        ) => "exception.cancelled",
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
        (_, "PaymentRequiredError") => "http.402_payment_required",
        (_, "RequestTimeoutError") => "http.408_request_timeout",
        (_, "PreconditionFailedError") => "http.412_precondition_failed",
        (_, "ContentTooLargeError" | "RequestTooLargeError") => "http.413_payload_too_large",
        (_, "HTTPNotImplementedError") => "http.501_not_implemented",
        (_, "GatewayTimeoutError" | "DeadlineExceededError") => "http.504_gateway_timeout",
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

#[cfg(test)]
mod tests {
    use super::{aws_runtime_code, snake_code};

    #[test]
    fn class_names_become_error_codes() {
        for (camel, code) in [
            ("EnforcedSpendLimitReached", "enforced_spend_limit_reached"),
            ("CMEKKeyUnreachable", "cmek_key_unreachable"),
            ("RBACRoleNotFound", "rbac_role_not_found"),
            ("ThreadNotFound", "thread_not_found"),
            ("", ""),
        ] {
            assert_eq!(snake_code(camel), code);
        }
    }

    #[test]
    fn botocore_runtime_class_names() {
        assert_eq!(
            aws_runtime_code("botocore.errorfactory.ThrottlingException"),
            Some("ThrottlingException")
        );
        assert_eq!(
            aws_runtime_code("S3.Client.exceptions.NoSuchKey"),
            Some("NoSuchKey")
        );
        assert_eq!(aws_runtime_code("botocore.errorfactory."), None);
        assert_eq!(aws_runtime_code("botocore.errorfactory.a.b"), None);
        assert_eq!(aws_runtime_code("botocore.exceptions.ClientError"), None);
    }
}
