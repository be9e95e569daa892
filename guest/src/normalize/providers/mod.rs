//! Provider-specific HTTP bodies: OpenAI, Anthropic, Google, AWS, Stripe and
//! RFC 9457 problem+json. Each module recognises its own shape (with or without
//! a `provider` hint) and returns a [`Finding`]; the caller then applies headers.
//!
//! Why structure only? Provider messages are prose for humans: they change
//! wording, get localised and get wrapped by proxies. Codes, types, status names,
//! `@type` detail records, finish reasons and headers are the contract, so they
//! are the only thing classification reads. Messages are carried through.
//!
//! With a hint (`openai`, `anthropic`, `google`/`gemini`/`vertex`, `aws`/`bedrock`,
//! `stripe`, `problem`), that provider's parser runs first and accepts looser
//! shapes. Without one, or when the hinted parser does not recognise the body
//! (e.g. Claude on Bedrock answers in Anthropic's shape), the shapes are tried
//! from the most to the least distinctive.

mod anthropic;
mod aws;
mod google;
pub mod message_prefix;
mod openai;
mod problem;
mod stripe;

pub(crate) use anthropic::detail_base as anthropic_code_base;
pub(crate) use aws::code_base as aws_code_base;
pub(crate) use google::status_name_base as google_status_base;

use super::Finding;
use crate::headers::HeaderList;
use crate::json_view::View;
use crate::observation_view::BodyView;

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

/// One HTTP response, as the provider parsers see it.
pub(super) struct Response<'a> {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: &'a HeaderList<'a>,
    /// Body.
    pub body: &'a BodyView<'a>,
    /// The caller's lowercase provider hint, if any.
    pub hint: Option<&'a str>,
}

/// A provider family, each with its own parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    OpenAi,
    Anthropic,
    Google,
    Aws,
    Stripe,
    Problem,
}

/// Shape detection order without a hint: the most distinctive shapes first, so
/// that a Stripe body (OpenAI-like `error.type`) is not taken for OpenAI and a
/// problem document (`type`, `title`) is tried last.
const DETECTION_ORDER: [Family; 6] = [
    Family::Anthropic,
    Family::Google,
    Family::Aws,
    Family::Stripe,
    Family::OpenAi,
    Family::Problem,
];

impl Family {
    fn from_hint(hint: &str) -> Option<Self> {
        match hint {
            "openai" | "azure-openai" | "azure_openai" | "azure" => Some(Self::OpenAi),
            "anthropic" | "claude" => Some(Self::Anthropic),
            "google" | "gemini" | "vertex" | "vertexai" | "vertex-ai" => Some(Self::Google),
            "aws" | "bedrock" | "amazon" => Some(Self::Aws),
            "stripe" => Some(Self::Stripe),
            "problem" | "problem+json" | "rfc9457" | "rfc7807" => Some(Self::Problem),
            _ => None,
        }
    }

    fn parse(self, r: &Response<'_>, hinted: bool) -> Option<Finding> {
        match self {
            Self::OpenAi => openai::parse(r, hinted),
            Self::Anthropic => anthropic::parse(r, hinted),
            Self::Google => google::parse(r, hinted),
            Self::Aws => aws::parse(r, hinted),
            Self::Stripe => stripe::parse(r, hinted),
            Self::Problem => problem::parse(r, hinted),
        }
    }
}

/// Recognise a provider body. `hint` is the caller's lowercase `provider`, if any.
pub(crate) fn parse(
    status: u16,
    headers: &HeaderList<'_>,
    body: &BodyView<'_>,
    hint: Option<&str>,
) -> Option<Finding> {
    let r = Response {
        status,
        headers,
        body,
        hint,
    };
    let hinted = hint.and_then(Family::from_hint);
    if let Some(f) = hinted.and_then(|fam| fam.parse(&r, true)) {
        return Some(f);
    }
    DETECTION_ORDER
        .iter()
        .filter(|fam| Some(**fam) != hinted)
        .find_map(|fam| fam.parse(&r, false))
}

/// A string member of a JSON object, owned.
fn string(v: &View<'_>, key: &str) -> Option<String> {
    super::str_at(v, key).map(str::to_owned)
}

/// A member that is a string or a number (codes come as both), as text.
fn code_text(v: Option<&View<'_>>) -> Option<String> {
    match v? {
        View::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        View::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The items of an array member, or nothing.
fn items<'v>(v: &'v View<'v>, key: &str) -> impl Iterator<Item = &'v View<'v>> {
    v.get(key)
        .and_then(View::as_array)
        .map(|a| a.iter())
        .into_iter()
        .flatten()
}

/// Distinct non-empty names joined with `,` (the envelope's one-string form of
/// several offending fields), or `None`.
fn join_fields<'a>(names: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for n in names.map(str::trim).filter(|n| !n.is_empty()) {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    (!out.is_empty()).then(|| out.join(","))
}

/// Whether the status is a success (a failure must then be in the body).
fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

#[cfg(test)]
pub(super) mod test_support {
    //! Helpers for the providers' unit tests.

    use super::*;

    /// Parse `body` (JSON text, or raw text when it is not JSON) with `hint`.
    pub fn run(status: u16, headers: &[(&str, &str)], body: &str, hint: Option<&str>) -> Finding {
        try_run(status, headers, body, hint).expect("a provider finding")
    }

    /// Like [`run`], but `None` when nothing was recognised.
    pub fn try_run(
        status: u16,
        headers: &[(&str, &str)],
        body: &str,
        hint: Option<&str>,
    ) -> Option<Finding> {
        let h =
            crate::headers::Headers::from_pairs(headers.iter().map(|(k, v)| (*k, v.to_string())));
        let b = BodyView::from_text(std::borrow::Cow::Borrowed(body));
        parse(status, h.list(), &b, hint)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::try_run;

    #[test]
    fn unknown_bodies_are_not_recognised() {
        assert!(try_run(500, &[], "oops", None).is_none());
        assert!(try_run(500, &[], "", None).is_none());
        assert!(try_run(404, &[], r#"{"detail":"nope"}"#, None).is_none());
        assert!(try_run(400, &[], "[1,2,3]", None).is_none());
        assert!(try_run(400, &[], r#"{"error":"rate_limit"}"#, None).is_none());
    }

    #[test]
    fn a_hint_that_does_not_fit_falls_back_to_the_shape() {
        // Claude on Bedrock answers in Anthropic's shape.
        let f = try_run(
            200,
            &[],
            r#"{"type":"message","stop_reason":"refusal","content":[]}"#,
            Some("bedrock"),
        )
        .expect("finding");
        assert_eq!(f.base, "policy.refusal");
        assert_eq!(f.upstream.provider.as_deref(), Some("anthropic"));
    }
}
