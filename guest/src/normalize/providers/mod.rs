//! Provider-specific HTTP bodies: OpenAI, Anthropic, Google, AWS, Stripe and
//! RFC 9457 problem+json. Each module recognises its own shape (with or without
//! a `provider` hint) and returns a [`Finding`]; the caller then applies headers.

use super::Finding;
use crate::headers::Headers;
use crate::observation::Body;

/// Whether `name` is an LLM provider (its failures are `llm.` codes).
pub(crate) fn is_llm_provider(name: &str) -> bool {
    matches!(
        name,
        "openai"
            | "anthropic"
            | "google"
            | "gemini"
            | "vertex"
            | "bedrock"
            | "azure-openai"
            | "azure_openai"
    )
}

/// Recognise a provider body. `hint` is the caller's lowercase `provider`, if any.
pub(crate) fn parse(
    _status: u16,
    _headers: &Headers,
    _body: &Body,
    _hint: Option<&str>,
) -> Option<Finding> {
    None
}
