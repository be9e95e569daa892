//! The decision log (docs/decision-logs.md): one JSON line per decision,
//! made here once and handed to the host in a `log` effect, which only
//! appends the bytes. Off unless the run configuration sets `decision_log`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, PolicyError};

/// The smallest `max_record_bytes`.
pub const MIN_RECORD_BYTES: u64 = 16_384;
/// The default `max_record_bytes`.
pub const DEFAULT_RECORD_BYTES: u64 = 65_536;
/// The format version of a line (`v`).
pub const LINE_VERSION: u32 = 1;

/// What a line keeps of the observation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationMode {
    /// The observation itself (replayable; it may hold personal data).
    #[default]
    Full,
    /// Only its sha256 (not replayable).
    Digest,
}

/// The run configuration's `decision_log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DecisionLogFields")]
pub struct DecisionLogConfig {
    /// `full` (default) or `digest`.
    pub observation: ObservationMode,
    /// The largest line, in bytes (at least 16 384; default 65 536): a
    /// longer one drops its observation, then its context, then its decision.
    pub max_record_bytes: u64,
}

/// `decision_log` as written, before its checks.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct DecisionLogFields {
    observation: ObservationMode,
    max_record_bytes: u64,
}

impl Default for DecisionLogFields {
    fn default() -> Self {
        DecisionLogFields {
            observation: ObservationMode::Full,
            max_record_bytes: DEFAULT_RECORD_BYTES,
        }
    }
}

impl TryFrom<DecisionLogFields> for DecisionLogConfig {
    type Error = String;
    fn try_from(f: DecisionLogFields) -> Result<Self, String> {
        if f.max_record_bytes < MIN_RECORD_BYTES || f.max_record_bytes > u64::from(u32::MAX) {
            return Err(format!(
                "decision_log.max_record_bytes is {}; give {MIN_RECORD_BYTES}..{} bytes (e.g. {DEFAULT_RECORD_BYTES})",
                f.max_record_bytes,
                u32::MAX
            ));
        }
        Ok(DecisionLogConfig {
            observation: f.observation,
            max_record_bytes: f.max_record_bytes,
        })
    }
}

/// A decision asked for and not answered yet: what its line needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingLog {
    /// Step id (a compensation: the compensated step's).
    pub step: String,
    /// The target called.
    pub target: String,
    /// `operation` or `compensation`.
    pub call: String,
    /// The call number of the key (from 1).
    pub attempt: u32,
    /// `sha256:<hex>` of the observation text.
    pub observation_sha256: String,
    /// The observation, JSON text (none in `digest` mode, or over the bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<String>,
    /// Why the observation is not kept: `digest` or `size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation_omitted: Option<String>,
    /// The context, JSON text.
    pub context: String,
}

impl PendingLog {
    /// What to keep of a `decide` effect under `config`.
    pub fn new(
        config: DecisionLogConfig,
        where_: (String, String, &str, u32),
        observation: &str,
        context: &str,
    ) -> Self {
        let (step, target, call, attempt) = where_;
        let mut digest = String::from("sha256:");
        for b in Sha256::digest(observation.as_bytes()) {
            digest.push_str(&format!("{b:02x}"));
        }
        PendingLog {
            step,
            target,
            call: call.to_owned(),
            attempt,
            observation_sha256: digest,
            // An observation over the bound could not be in the line: it is
            // not kept in the state either.
            observation: (config.observation == ObservationMode::Full
                && observation.len() as u64 <= config.max_record_bytes)
                .then(|| observation.to_owned()),
            observation_omitted: match config.observation {
                ObservationMode::Digest => Some("digest".to_owned()),
                ObservationMode::Full if observation.len() as u64 > config.max_record_bytes => {
                    Some("size".to_owned())
                }
                ObservationMode::Full => None,
            },
            context: context.to_owned(),
        }
    }
}

/// The policy identity a `decision` input may carry:
/// `{"name","version","digest"}`, each a string.
pub fn check_policy(v: &Value) -> Result<(), PolicyError> {
    let ok = v.as_object().is_some_and(|m| {
        m.len() == 3
            && ["name", "version", "digest"]
                .iter()
                .all(|k| m.get(*k).is_some_and(Value::is_string))
    });
    if ok {
        Ok(())
    } else {
        Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            "input `decision`: `policy` is the deciding policy's {\"name\",\"version\",\"digest\"} (strings) or null; omit it when unknown",
        ))
    }
}

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// The line of one decision (no newline), at most `max_record_bytes` long
/// unless even its fixed members are longer.
#[allow(clippy::too_many_arguments)]
pub fn line(
    config: DecisionLogConfig,
    run_id: &str,
    started_ms: u64,
    now_ms: u64,
    pending: &PendingLog,
    decision: &Value,
    policy: Option<&Value>,
) -> String {
    let action = decision.get("action").and_then(Value::as_str).unwrap_or("");
    let code = decision
        .pointer("/envelope/code")
        .and_then(Value::as_str)
        .map_or_else(|| "null".to_owned(), q);
    let policy = policy.map_or_else(|| "null".to_owned(), Value::to_string);
    let decision = decision.to_string();
    let head = format!(
        r#"{{"v":{LINE_VERSION},"time_ms":{now_ms},"t_ms":{},"run_id":{},"step":{},"target":{},"call":{},"attempt":{},"policy":{policy},"action":{},"code":{code},"observation_sha256":{}"#,
        now_ms.saturating_sub(started_ms),
        q(run_id),
        q(&pending.step),
        q(&pending.target),
        q(&pending.call),
        pending.attempt,
        q(action),
        q(&pending.observation_sha256),
    );
    let max = usize::try_from(config.max_record_bytes).unwrap_or(usize::MAX);
    let mut omitted: Vec<(&str, &str)> = Vec::new();
    if let Some(why) = &pending.observation_omitted {
        omitted.push(("observation", why.as_str()));
    }
    let mut observation = pending.observation.as_deref();
    let mut context = Some(pending.context.as_str());
    let mut decision = Some(decision.as_str());
    loop {
        let text = assemble(&head, observation, context, decision, &omitted);
        if text.len() <= max {
            return text;
        }
        if observation.take().is_some() {
            omitted.push(("observation", "size"));
        } else if context.take().is_some() {
            omitted.push(("context", "size"));
        } else if decision.take().is_some() {
            omitted.push(("decision", "size"));
        } else {
            return text;
        }
    }
}

fn assemble(
    head: &str,
    observation: Option<&str>,
    context: Option<&str>,
    decision: Option<&str>,
    omitted: &[(&str, &str)],
) -> String {
    let mut out = String::with_capacity(
        head.len()
            + observation.map_or(4, str::len)
            + context.map_or(4, str::len)
            + decision.map_or(4, str::len)
            + 96,
    );
    out.push_str(head);
    for (name, part) in [
        ("observation", observation),
        ("context", context),
        ("decision", decision),
    ] {
        out.push_str(",\"");
        out.push_str(name);
        out.push_str("\":");
        out.push_str(part.unwrap_or("null"));
    }
    if !omitted.is_empty() {
        out.push_str(",\"omitted\":{");
        for (i, (name, why)) in omitted.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("\"{name}\":\"{why}\""));
        }
        out.push('}');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<DecisionLogConfig, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn defaults_and_checks() {
        let c = config("{}").unwrap();
        assert_eq!(c.observation, ObservationMode::Full);
        assert_eq!(c.max_record_bytes, 65_536);
        let c = config(r#"{"observation":"digest","max_record_bytes":16384}"#).unwrap();
        assert_eq!(c.observation, ObservationMode::Digest);
        for (text, needle) in [
            (r#"{"max_record_bytes":16383}"#, "e.g. 65536"),
            (r#"{"observation":"hash"}"#, "unknown variant `hash`"),
            (r#"{"path":"/tmp/x"}"#, "unknown field `path`"),
            (r#"{"max_record_bytes":-1}"#, "invalid value"),
        ] {
            let e = config(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn an_observation_over_the_bound_is_replaced_by_its_digest() {
        let c = config(r#"{"max_record_bytes":16384}"#).unwrap();
        let big = format!(
            r#"{{"source":"http","status":503,"body":"{}"}}"#,
            "x".repeat(20_000)
        );
        let p = PendingLog::new(c, ("s".into(), "t".into(), "operation", 1), &big, "{}");
        let d = serde_json::json!({"action":"retry","envelope":{"code":"http.unavailable"}});
        let text = line(c, "r", 0, 5, &p, &d, None);
        assert!(text.len() <= 16_384);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["observation"], Value::Null);
        assert_eq!(v["omitted"]["observation"], "size");
        assert_eq!(v["code"], "http.unavailable");
        assert!(
            v["observation_sha256"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        let small = PendingLog::new(c, ("s".into(), "t".into(), "operation", 1), "{}", "{}");
        let v: Value = serde_json::from_str(&line(c, "r", 0, 5, &small, &d, None)).unwrap();
        assert_eq!(v["observation"], serde_json::json!({}));
        assert!(v.get("omitted").is_none());
    }
}
