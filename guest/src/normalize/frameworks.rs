//! Exceptions of agent frameworks, by class name: LangChain (`langchain_core`
//! model errors and the provider packages' subclasses), PydanticAI
//! (`pydantic_ai.exceptions`), the OpenAI Agents SDK (`agents.exceptions`),
//! LiteLLM (`litellm.exceptions`), the Vercel AI SDK (error `name`s such as
//! `AI_APICallError`) and anyio's stream errors (what an MCP client's task
//! group holds when its connection drops).
//!
//! A *wrapper* is a class that says little by itself and carries what failed
//! underneath: an exception group, the AI SDK's `AI_RetryError`, PydanticAI's
//! `ModelHTTPError`. Its recognised `cause` or group member decides.

use crate::registry::Surface;

/// What a framework's exception class says.
pub(super) struct FrameworkClass {
    /// Registry base.
    pub base: &'static str,
    /// The call it implies, if any.
    pub surface: Option<Surface>,
    /// The family to report as `upstream.provider`, when the default is wrong.
    pub provider: Option<&'static str>,
}

/// The class of `full` (root module `root`, class name `last`), if a framework defines it.
pub(super) fn class(full: &str, root: &str, last: &str) -> Option<FrameworkClass> {
    let llm = |base| FrameworkClass {
        base,
        surface: Some(Surface::Llm),
        provider: None,
    };
    let any = |base| FrameworkClass {
        base,
        surface: None,
        provider: None,
    };
    if let Some(name) = last.strip_prefix("AI_").filter(|_| full == last) {
        return ai_sdk(name).map(|base| FrameworkClass {
            base,
            surface: Some(Surface::Llm),
            provider: Some("ai-sdk"),
        });
    }
    if root.starts_with("langchain") {
        return langchain(last).map(llm);
    }
    match root {
        "pydantic_ai" => {
            pydantic_ai(last).map(|(base, is_llm)| if is_llm { llm(base) } else { any(base) })
        }
        "agents" => {
            openai_agents(last).map(|(base, is_llm)| if is_llm { llm(base) } else { any(base) })
        }
        "litellm" => litellm(last).map(llm),
        "anyio" => match last {
            // The other side of a memory stream went away mid-request.
            "ClosedResourceError" | "BrokenResourceError" | "EndOfStream" => {
                Some(any("network.connection_reset"))
            }
            _ => None,
        },
        _ => None,
    }
}

/// `langchain_core.exceptions` model errors and provider subclasses such as
/// `langchain_openai.chat_models.base.OpenAIContextOverflowError`.
fn langchain(last: &str) -> Option<&'static str> {
    Some(match last {
        "ModelNotFoundError" => "model.not_found",
        "ModelTimeoutError" => "timeout.total",
        "ModelConnectionError" => "network.error",
        "OutputParserException" => "response.malformed",
        n if n.ends_with("ContextOverflowError") => "context.overflow",
        n if n.ends_with("RefusalError") => "policy.refusal",
        n if n.ends_with("RateLimitError") => "http.429_rate_limited",
        n if n.ends_with("AuthenticationError") => "http.401_unauthorized",
        n if n.ends_with("PermissionDeniedError") => "http.403_forbidden",
        n if n.ends_with("ServerError") => "http.5xx_server_error",
        _ => return None,
    })
}

/// `pydantic_ai.exceptions`: the base, and whether it is a model call's.
fn pydantic_ai(last: &str) -> Option<(&'static str, bool)> {
    Some(match last {
        "ModelRetry" | "ToolRetryError" => ("exception.model_retry", false),
        "ContentFilterError" => ("policy.refusal", true),
        "IncompleteToolCall" => ("output.truncated", true),
        "UnexpectedModelBehavior" => ("response.malformed", false),
        "ModelAPIError" => ("network.error", true),
        // Always carries a status; what the response says decides.
        "ModelHTTPError" => ("exception.unhandled", true),
        "UsageLimitExceeded" => ("exception.usage_limit_exceeded", false),
        "ConcurrencyLimitExceeded" => ("http.429_rate_limited", false),
        "UserError" | "UndrainedPendingMessagesError" => ("exception.configuration_error", false),
        "RunCancelled" => ("exception.cancelled", false),
        "SuspendedResponseExpired" => ("conversation.state_lost", true),
        _ => return None,
    })
}

/// `agents.exceptions` of the OpenAI Agents SDK.
fn openai_agents(last: &str) -> Option<(&'static str, bool)> {
    Some(match last {
        n if n.ends_with("GuardrailTripwireTriggered") => ("exception.guardrail_tripped", false),
        "MaxTurnsExceeded" => ("exception.usage_limit_exceeded", false),
        "ModelBehaviorError" => ("output.malformed_tool_call", true),
        "UserError" => ("exception.configuration_error", false),
        _ => return None,
    })
}

/// `litellm.exceptions` (the others are OpenAI's names, read generically).
fn litellm(last: &str) -> Option<&'static str> {
    Some(match last {
        "ContextWindowExceededError" => "context.overflow",
        "ContentPolicyViolationError" => "policy.input_blocked",
        "BudgetExceededError" => "quota.exhausted",
        "Timeout" => "timeout.total",
        "BadGatewayError" => "http.502_bad_gateway",
        "APIResponseValidationError" => "response.malformed",
        _ => return None,
    })
}

/// The Vercel AI SDK's error names (`AI_` + class), without the prefix.
fn ai_sdk(name: &str) -> Option<&'static str> {
    Some(match name {
        "APICallError" | "DownloadError" => "network.error",
        "NoSuchToolError"
        | "InvalidToolInputError"
        | "InvalidToolArgumentsError"
        | "ToolCallRepairError" => "output.malformed_tool_call",
        "NoObjectGeneratedError"
        | "TypeValidationError"
        | "JSONParseError"
        | "NoContentGeneratedError"
        | "NoOutputGeneratedError"
        | "EmptyResponseBodyError"
        | "InvalidResponseDataError" => "response.malformed",
        "LoadAPIKeyError" | "LoadSettingError" => "exception.configuration_error",
        "NoSuchModelError" => "model.not_found",
        "InvalidPromptError"
        | "InvalidArgumentError"
        | "UnsupportedFunctionalityError"
        | "InvalidMessageRoleError"
        | "InvalidDataContentError"
        | "TooManyEmbeddingValuesForCallError" => "exception.validation_error",
        _ => return None,
    })
}

/// Whether the class is a wrapper: what it carries (a cause, group members)
/// says more than its name.
pub(super) fn is_wrapper(full: &str, root: &str, last: &str) -> bool {
    matches!(
        last,
        "ExceptionGroup" | "BaseExceptionGroup" | "AggregateError" | "AI_RetryError"
    ) || (full == last && matches!(last, "AI_APICallError" | "AI_DownloadError"))
        || (root == "pydantic_ai"
            && matches!(
                last,
                "ModelHTTPError" | "ModelAPIError" | "FallbackExceptionGroup" | "AgentRunError"
            ))
        || (root.starts_with("langchain")
            && matches!(
                last,
                "ModelError" | "ModelConnectionError" | "LangChainException"
            ))
        || (root == "agents" && last == "AgentsException")
        || (matches!(root, "openai" | "anthropic" | "litellm")
            && matches!(last, "APIError" | "APIStatusError" | "APIConnectionError"))
}

/// Whether the class's base is only what it means when no response came
/// (the AI SDK's `AI_APICallError` without a `statusCode` is a failed fetch):
/// with a status, the response decides alone.
pub(super) fn means_no_response(full: &str, last: &str) -> bool {
    full == last && matches!(last, "AI_APICallError" | "AI_DownloadError")
}

/// The LLM provider an exception's HTTP response comes from, by its module.
pub(super) fn provider_hint(root: &str) -> Option<&'static str> {
    Some(match root {
        "openai" | "langchain_openai" => "openai",
        "anthropic" | "langchain_anthropic" => "anthropic",
        "google" | "langchain_google_genai" | "langchain_google_vertexai" => "google",
        "botocore" | "boto3" | "langchain_aws" => "aws",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::{class, is_wrapper};

    fn base(full: &str) -> Option<&'static str> {
        let last = full.rsplit(['.', ':']).next().unwrap_or(full);
        let root = full.split(['.', ':']).next().unwrap_or("");
        class(full, root, last).map(|c| c.base)
    }

    #[test]
    fn framework_classes() {
        for (full, want) in [
            (
                "langchain_openai.chat_models.base.OpenAIContextOverflowError",
                Some("context.overflow"),
            ),
            (
                "langchain_core.exceptions.ModelTimeoutError",
                Some("timeout.total"),
            ),
            ("langchain_core.exceptions.ModelError", None),
            (
                "pydantic_ai.exceptions.UsageLimitExceeded",
                Some("exception.usage_limit_exceeded"),
            ),
            (
                "agents.exceptions.OutputGuardrailTripwireTriggered",
                Some("exception.guardrail_tripped"),
            ),
            (
                "litellm.exceptions.ContextWindowExceededError",
                Some("context.overflow"),
            ),
            ("litellm.Timeout", Some("timeout.total")),
            ("AI_NoSuchToolError", Some("output.malformed_tool_call")),
            ("AI_RetryError", None),
            // A module path named like the AI SDK is not the AI SDK.
            ("myapp.AI_NoSuchToolError", None),
            (
                "anyio.ClosedResourceError",
                Some("network.connection_reset"),
            ),
            ("myagents.exceptions.MaxTurnsExceeded", None),
        ] {
            assert_eq!(base(full), want, "{full}");
        }
    }

    #[test]
    fn wrappers() {
        assert!(is_wrapper(
            "builtins.ExceptionGroup",
            "builtins",
            "ExceptionGroup"
        ));
        assert!(is_wrapper(
            "AI_RetryError",
            "AI_RetryError",
            "AI_RetryError"
        ));
        assert!(is_wrapper(
            "pydantic_ai.exceptions.ModelHTTPError",
            "pydantic_ai",
            "ModelHTTPError"
        ));
        assert!(!is_wrapper("httpx.ConnectError", "httpx", "ConnectError"));
        assert!(!is_wrapper(
            "openai.RateLimitError",
            "openai",
            "RateLimitError"
        ));
    }
}
