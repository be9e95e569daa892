//! The one place where a message is read: documented, fixed message prefixes.
//!
//! The policy classifies from structure, never from free text: everywhere else it
//! reads only codes, types, statuses and headers. Two providers give no code at
//! all for an overflowing context window: Anthropic answers `400
//! invalid_request_error` with `prompt is too long: N tokens > M maximum`, and
//! Bedrock answers `ValidationException` with `Input is too long for requested
//! model`. Without reading the message the agent is told to fix a malformed
//! request (`permanent`, `fail`) when shrinking the prompt would work
//! (`context.overflow`, `semantic`, `replan`).
//!
//! The rule, so that this stays a contract and not a guess:
//!
//! - a row names one provider family, one error type or code, and one status;
//!   it applies only when all three match what the structure already said;
//! - the prefix is a fixed text that the provider emits (each row cites where
//!   it is documented or where a maintained SDK matches it), matched at the
//!   start of the message (after leading whitespace), ASCII case-insensitively;
//!   text in the middle of a message is never matched;
//! - a row may only refine an error the structure already classified as a bad
//!   request (`http.400_bad_request`); it never turns a success into a failure
//!   or changes the class of anything else.

use crate::normalize::Finding;

/// One documented message prefix.
#[derive(Debug)]
pub struct PrefixRule {
    /// Provider family whose parser applies the row (`anthropic`, `aws`).
    pub family: &'static str,
    /// The error type or code the structure must already show.
    pub error: &'static str,
    /// The HTTP status the response must have.
    pub status: u16,
    /// The fixed prefix, matched ASCII case-insensitively at the start.
    pub prefix: &'static str,
    /// The registry base the row refines the error to.
    pub base: &'static str,
    /// Where the prefix is documented or matched by a maintained SDK.
    pub source: &'static str,
}

/// The table. Keep it small: a row needs a source and a reason that no code exists.
pub const RULES: &[PrefixRule] = &[
    PrefixRule {
        family: "anthropic",
        error: "invalid_request_error",
        status: 400,
        prefix: "prompt is too long:",
        base: "context.overflow",
        source: "strands-agents/sdk-python src/strands/models/anthropic.py (AnthropicModel.OVERFLOW_MESSAGES); Anthropic API example in anthropics/claude-code#12186",
    },
    PrefixRule {
        family: "aws",
        error: "ValidationException",
        status: 400,
        prefix: "Input is too long for requested model",
        base: "context.overflow",
        source: "strands-agents/sdk-python src/strands/models/bedrock.py (BEDROCK_CONTEXT_WINDOW_OVERFLOW_MESSAGES)",
    },
    PrefixRule {
        family: "aws",
        error: "ValidationException",
        status: 400,
        prefix: "input length and `max_tokens` exceed context limit",
        base: "context.overflow",
        source: "strands-agents/sdk-python src/strands/models/bedrock.py (BEDROCK_CONTEXT_WINDOW_OVERFLOW_MESSAGES)",
    },
    PrefixRule {
        family: "aws",
        error: "ValidationException",
        status: 400,
        prefix: "prompt is too long",
        base: "context.overflow",
        source: "strands-agents/sdk-python src/strands/models/bedrock.py (BEDROCK_CONTEXT_WINDOW_OVERFLOW_MESSAGES, Claude on Bedrock, sdk-python#1663)",
    },
];

/// Whether `message` starts with `prefix` (after leading whitespace), ASCII case-insensitively.
fn starts_with_prefix(message: &str, prefix: &str) -> bool {
    let m = message.trim_start().as_bytes();
    let p = prefix.as_bytes();
    m.len() >= p.len() && m.iter().zip(p).all(|(a, b)| a.eq_ignore_ascii_case(b))
}

/// The base a documented prefix gives, for `family`'s error `error` at `status`.
pub(crate) fn base_for(
    family: &str,
    error: &str,
    status: u16,
    message: &str,
) -> Option<&'static str> {
    RULES
        .iter()
        .find(|r| {
            r.family == family
                && r.error == error
                && r.status == status
                && starts_with_prefix(message, r.prefix)
        })
        .map(|r| r.base)
}

/// Refine a finding the structure classified as a bad request.
pub(crate) fn refine(f: &mut Finding, family: &str, error: Option<&str>, status: u16) {
    if f.base != "http.400_bad_request" {
        return;
    }
    let (Some(error), Some(message)) = (error, f.message.as_deref()) else {
        return;
    };
    if let Some(base) = base_for(family, error, status, message) {
        f.base = base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_provider_type_and_status_match() {
        let m = "prompt is too long: 208310 tokens > 200000 maximum";
        assert_eq!(
            base_for("anthropic", "invalid_request_error", 400, m),
            Some("context.overflow")
        );
        assert_eq!(base_for("anthropic", "invalid_request_error", 413, m), None);
        assert_eq!(base_for("anthropic", "api_error", 400, m), None);
        assert_eq!(base_for("openai", "invalid_request_error", 400, m), None);
        // A prefix, not a substring.
        let wrapped = "error: prompt is too long: 1 tokens > 0 maximum";
        assert_eq!(
            base_for("anthropic", "invalid_request_error", 400, wrapped),
            None
        );
        assert_eq!(
            base_for(
                "aws",
                "ValidationException",
                400,
                "  input is too long for requested model."
            ),
            Some("context.overflow")
        );
        assert_eq!(base_for("aws", "ValidationException", 400, ""), None);
    }

    #[test]
    fn every_rule_has_a_source_and_refines_to_a_known_base() {
        for r in RULES {
            assert!(!r.source.is_empty() && !r.prefix.is_empty());
            assert!(crate::registry::def(r.base).is_some(), "{}", r.base);
        }
    }
}
