//! Codes for network errors, timeouts and client exceptions.

use super::{ALL_CALLS, CodeDef, code_def};

pub(super) const DEFS: &[CodeDef] = &[
    code_def!(
        "network.connection_reset",
        ALL_CALLS,
        Transient,
        Error,
        Network,
        true,
        "The connection was reset.",
        "The peer closed or reset the connection (ECONNRESET, EPIPE, UND_ERR_SOCKET, ConnectionResetError, RemoteProtocolError).",
        "Retry after the backoff delay with the same idempotency key."
    ),
    code_def!(
        "network.connection_refused",
        ALL_CALLS,
        Transient,
        Error,
        Network,
        true,
        "The connection was refused.",
        "Nothing accepted the connection (ECONNREFUSED, ConnectionRefusedError, ConnectError).",
        "Retry after the backoff delay; check the endpoint if it persists."
    ),
    code_def!(
        "network.dns_temporary",
        ALL_CALLS,
        Transient,
        Error,
        Network,
        true,
        "The host name could not be resolved right now.",
        "A temporary DNS failure (EAI_AGAIN).",
        "Retry after the backoff delay."
    ),
    code_def!(
        "network.dns_not_found",
        ALL_CALLS,
        Permanent,
        Error,
        Network,
        false,
        "The host name does not exist.",
        "DNS says the host does not exist (ENOTFOUND, socket.gaierror).",
        "Do not retry; check the endpoint's host name."
    ),
    code_def!(
        "network.unreachable",
        ALL_CALLS,
        Transient,
        Error,
        Network,
        true,
        "The network or host is unreachable.",
        "No route to the host (EHOSTUNREACH, ENETUNREACH, ENETDOWN).",
        "Retry after the backoff delay."
    ),
    code_def!(
        "network.tls_error",
        ALL_CALLS,
        Permanent,
        Error,
        Network,
        false,
        "The TLS handshake failed.",
        "The certificate could not be verified or the TLS handshake failed (CERT_HAS_EXPIRED, SSLCertVerificationError).",
        "Do not retry; ask an operator to fix the certificate or the trust store."
    ),
    code_def!(
        "network.error",
        ALL_CALLS,
        Transient,
        Error,
        Network,
        true,
        "The connection failed.",
        "A network error without a more specific code (e.g. APIConnectionError).",
        "Retry after the backoff delay."
    ),
    code_def!(
        "timeout.connect",
        ALL_CALLS,
        Transient,
        Error,
        Timeout,
        true,
        "Connecting timed out.",
        "The connect phase exceeded its deadline (ETIMEDOUT, ConnectTimeout, UND_ERR_CONNECT_TIMEOUT).",
        "Retry after the backoff delay; the endpoint may be down."
    ),
    code_def!(
        "timeout.read",
        ALL_CALLS,
        Transient,
        Error,
        Timeout,
        true,
        "Waiting for the response timed out.",
        "The read phase exceeded its deadline (ReadTimeout, UND_ERR_HEADERS_TIMEOUT). The request may have been processed.",
        "Retry with the same idempotency key after the backoff delay."
    ),
    code_def!(
        "timeout.write",
        ALL_CALLS,
        Transient,
        Error,
        Timeout,
        true,
        "Sending the request timed out.",
        "The write phase exceeded its deadline (WriteTimeout).",
        "Retry after the backoff delay."
    ),
    code_def!(
        "timeout.pool",
        ALL_CALLS,
        Transient,
        Warning,
        Timeout,
        true,
        "No pooled connection became free in time.",
        "The client's connection pool was exhausted (PoolTimeout).",
        "Retry after the backoff delay; reduce concurrency if it persists."
    ),
    code_def!(
        "timeout.total",
        ALL_CALLS,
        Transient,
        Error,
        Timeout,
        true,
        "The call exceeded its overall deadline.",
        "The total deadline passed (asyncio.TimeoutError, APITimeoutError). The request may have been processed.",
        "Retry with the same idempotency key after the backoff delay."
    ),
    code_def!(
        "exception.model_retry",
        ALL_CALLS,
        Semantic,
        Error,
        Validation,
        false,
        "The tool asked the model to try again with different arguments.",
        "A PydanticAI `ModelRetry`: the model made a fixable mistake.",
        "Read the message, fix the arguments, then call again."
    ),
    code_def!(
        "exception.validation_error",
        ALL_CALLS,
        Permanent,
        Error,
        Validation,
        false,
        "Input or output failed validation.",
        "A validation exception (pydantic.ValidationError, jsonschema.ValidationError, zod's ZodError).",
        "Fix the data so it matches the schema, then call again."
    ),
    code_def!(
        "exception.cancelled",
        ALL_CALLS,
        Permanent,
        Warning,
        Cancelled,
        false,
        "The operation was cancelled.",
        "A cancellation (asyncio.CancelledError, AbortError, KeyboardInterrupt).",
        "Do not retry unless the user asks again."
    ),
    code_def!(
        "exception.unhandled",
        ALL_CALLS,
        Permanent,
        Error,
        Internal,
        false,
        "The call raised an unexpected exception.",
        "An exception type the policy does not recognise; it is treated as a bug, not retried.",
        "Do not retry unchanged; report the exception type to an operator."
    ),
    code_def!(
        "response.malformed",
        ALL_CALLS,
        Transient,
        Error,
        Dependency,
        true,
        "The response could not be parsed.",
        "A success status with a body that is not what the protocol requires (json.JSONDecodeError on a response).",
        "Retry after the backoff delay; fall back if it persists."
    ),
    code_def!(
        "exception.guardrail_tripped",
        ALL_CALLS,
        Policy,
        Error,
        Safety,
        false,
        "A guardrail stopped the run.",
        "A guardrail of the application tripped on the input or the output (OpenAI Agents `InputGuardrailTripwireTriggered`, `OutputGuardrailTripwireTriggered` and the tool guardrails).",
        "Do not resend the same input; take the fallback path or hand the case to a human."
    ),
    code_def!(
        "exception.usage_limit_exceeded",
        ALL_CALLS,
        Policy,
        Warning,
        Quota,
        false,
        "The run reached a usage limit the application set.",
        "The framework stopped the run at a limit set in code: tokens, requests or tool calls (PydanticAI `UsageLimitExceeded`), turns (OpenAI Agents `MaxTurnsExceeded`). Running it again unchanged stops at the same limit.",
        "Do not retry unchanged; take the fallback path (a smaller plan), or raise the limit deliberately."
    ),
    code_def!(
        "exception.configuration_error",
        ALL_CALLS,
        Permanent,
        Fatal,
        Internal,
        false,
        "The application used the framework wrongly or lacks a setting.",
        "The framework rejected how it was called or configured (PydanticAI and OpenAI Agents `UserError`, AI SDK `AI_LoadAPIKeyError`, `AI_LoadSettingError`).",
        "Escalate to a developer: fix the code or the configuration; retrying cannot help."
    ),
];
