//! `render`: an envelope for the boundary it must cross.
//!
//! The input may be an envelope (as `classify` prints it), a decision (as
//! `decide` prints it: its `envelope` is rendered), a `serve` output line (its
//! `decision.envelope`), or an observation, which is classified first. What
//! is rendered is the envelope's own text, never a re-serialization.

use agent_recovery::Policy;
use agent_recovery::types::RenderFormat;
use anyhow::Context as _;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::{Usage, input};

/// The `--as` names, in the WIT's order.
const FORMATS: &[(&str, RenderFormat)] = &[
    ("jsonrpc-error", RenderFormat::JsonrpcError),
    ("mcp-tool-result", RenderFormat::McpToolResult),
    ("a2a-task-status", RenderFormat::A2aTaskStatus),
    ("problem-json", RenderFormat::ProblemJson),
    ("model-tool-result", RenderFormat::ModelToolResult),
    ("coordinator-text", RenderFormat::CoordinatorText),
    ("downstream-wrap", RenderFormat::DownstreamWrap),
];

/// Parses `--as`.
pub fn format(name: &str) -> Result<RenderFormat, Usage> {
    FORMATS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .ok_or_else(|| {
            let names: Vec<&str> = FORMATS.iter().map(|(n, _)| *n).collect();
            Usage(format!(
                "invalid --as '{name}': expected one of {}",
                names.join(", ")
            ))
        })
}

/// The members that tell an envelope, a decision and a `serve` line apart.
#[derive(Deserialize)]
struct Probe<'a> {
    code: Option<IgnoredAny>,
    class: Option<IgnoredAny>,
    retryable: Option<IgnoredAny>,
    action: Option<IgnoredAny>,
    #[serde(borrow)]
    envelope: Option<&'a RawValue>,
    #[serde(borrow)]
    decision: Option<&'a RawValue>,
}

/// Where the envelope is in `text`.
enum Found<'a> {
    /// `text` is an envelope, or this member of it is.
    Envelope(&'a str),
    /// `text` is none of those: an observation to classify.
    Observation,
}

fn find(text: &str) -> Found<'_> {
    let Ok(probe) = serde_json::from_str::<Probe<'_>>(text) else {
        return Found::Observation;
    };
    if let (Some(_), Some(envelope)) = (&probe.action, probe.envelope) {
        return Found::Envelope(envelope.get());
    }
    if let Some(decision) = probe.decision
        && let Found::Envelope(envelope) = find(decision.get())
    {
        return Found::Envelope(envelope);
    }
    if probe.code.is_some() && probe.class.is_some() && probe.retryable.is_some() {
        return Found::Envelope(text);
    }
    Found::Observation
}

/// `render --as FORMAT [FILE|-] [--options JSON]`.
pub fn render(
    format: RenderFormat,
    options: &str,
    policy: &Policy,
    input: &input::Input,
) -> anyhow::Result<String> {
    let classified;
    let envelope = match find(&input.text) {
        Found::Envelope(envelope) => envelope,
        Found::Observation => {
            classified = policy
                .classify_json(&input.text)
                .context(input.name.clone())?;
            classified.as_str()
        }
    };
    let rendered = policy
        .render_json(envelope, format, options)
        .with_context(|| format!("{} (--options {options:?})", input.name))?;
    Ok(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_name_parses_and_others_are_listed() {
        for (name, f) in FORMATS {
            assert_eq!(format(name).unwrap(), *f);
        }
        let err = format("xml").unwrap_err();
        assert!(err.0.contains("jsonrpc-error") && err.0.contains("downstream-wrap"));
    }

    #[test]
    fn the_envelope_is_found_by_shape() {
        let env = r#"{"code":"c","class":"transient","retryable":true}"#;
        assert!(matches!(find(env), Found::Envelope(e) if e == env));
        let decision = format!(r#"{{"action":"retry","envelope":{env}}}"#);
        assert!(matches!(find(&decision), Found::Envelope(e) if e == env));
        let line = format!(r#"{{"policy":{{}},"decision":{decision}}}"#);
        assert!(matches!(find(&line), Found::Envelope(e) if e == env));
        for obs in [
            r#"{"source":"http","status":429}"#,
            r#"{"error":{"code":"x"}}"#,
            "not json",
            "[]",
        ] {
            assert!(matches!(find(obs), Found::Observation), "{obs}");
        }
    }
}
