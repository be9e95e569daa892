//! JSON Schemas (draft 2020-12) of the outputs, built from the same enums the
//! policy serializes, so they cannot drift. Fields may be added to the outputs,
//! never renamed or removed: the schemas allow additional properties.

use crate::config::{MAX_ATTEMPTS, MAX_MS};
use crate::model::{Action, Category, ErrorClass, Severity, SourceKind, Stability};
use serde_json::{Value, json};

fn names<T: Copy>(all: &[T], f: impl Fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|x| f(*x)).collect()
}

fn nullable(t: &str) -> Value {
    json!({"type": [t, "null"]})
}

fn envelope() -> Value {
    json!({
        "type": "object",
        "description": "The agent-readable error envelope.",
        "required": ["code", "message", "class", "retryable", "severity", "category", "retry_after_ms", "field",
                     "allowed_values", "suggested_value", "hint", "request_id", "related_codes", "docs_url", "upstream"],
        "additionalProperties": true,
        "properties": {
            "code": {"type": "string", "pattern": "^(tool|llm|agent|runtime)\\.[a-z0-9_]+\\.[a-z0-9_]+$"},
            "message": {"type": "string"},
            "class": {"enum": names(ErrorClass::ALL, ErrorClass::as_str)},
            "retryable": {"type": "boolean"},
            "severity": {"enum": names(Severity::ALL, Severity::as_str)},
            "category": {"enum": names(Category::ALL, Category::as_str)},
            "retry_after_ms": {"type": ["integer", "null"], "minimum": 0},
            "field": nullable("string"),
            "allowed_values": {},
            "suggested_value": {},
            "hint": {"type": "string"},
            "request_id": nullable("string"),
            "related_codes": {"type": "array", "items": {"type": "string"}},
            "docs_url": nullable("string"),
            "upstream": {
                "type": "object",
                "required": ["source", "provider", "status", "code", "type"],
                "additionalProperties": true,
                "properties": {
                    "source": {"enum": names(SourceKind::ALL, SourceKind::as_str).into_iter().map(Value::from).chain([Value::Null]).collect::<Vec<_>>()},
                    "provider": nullable("string"),
                    "status": {"type": ["integer", "null"], "minimum": 100, "maximum": 999},
                    "code": nullable("string"),
                    "type": nullable("string")
                }
            }
        }
    })
}

fn decision() -> Value {
    json!({
        "type": "object",
        "description": "The recovery decision.",
        "required": ["action", "delay_ms", "attempt", "max_attempts", "budget_remaining_ms", "reason", "reason_code", "envelope"],
        "additionalProperties": true,
        "properties": {
            "action": {"enum": names(Action::ALL, Action::as_str)},
            "delay_ms": {"type": ["integer", "null"], "minimum": 0},
            "attempt": {"type": "integer", "minimum": 1},
            "max_attempts": {"type": "integer", "minimum": 1},
            "budget_remaining_ms": {"type": "integer", "minimum": 0},
            "reason": {"type": "string"},
            "reason_code": nullable("string"),
            "envelope": {"$ref": "#/$defs/envelope"},
            "replay_safe": {
                "type": "boolean",
                "description": "Whether a retry may send the call again without repeating an effect or output already had (optional; present only when the observation says replay or response_started)."
            },
            "fallbacks": {
                "type": "object",
                "description": "A policy document's fallback chains by target (optional; present only when the document sets them): the recovery loop falls back along the chain of a step's target when the step names no fallbacks.",
                "additionalProperties": {"type": "array", "items": {"type": "string"}}
            },
            "dead_letters": {
                "type": "object",
                "description": "A policy document's dead-letter owner, runbook and depth threshold by tool pattern (optional; present only when the document sets them): the recovery loop uses the entry of a step's tool for what the run configuration's dead_letter leaves unset.",
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": true,
                    "properties": {
                        "owner": nullable("string"),
                        "runbook": nullable("string"),
                        "depth_threshold": {"type": ["integer", "null"], "minimum": 1}
                    }
                }
            },
            "breaker": {
                "type": "object",
                "description": "The policy's circuit-breaker thresholds, applied by the recovery loop (optional; absent: 3 / 30000).",
                "required": ["failure_threshold", "open_ms"],
                "additionalProperties": true,
                "properties": {
                    "failure_threshold": {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPTS},
                    "open_ms": {"type": "integer", "minimum": 1, "maximum": MAX_MS}
                }
            }
        },
        "$defs": {"envelope": envelope()}
    })
}

fn code_info() -> Value {
    json!({
        "type": "object",
        "description": "One row of the error-code registry.",
        "required": ["code", "class", "severity", "category", "retryable", "cause", "recovery", "stability", "replaced_by", "related_codes"],
        "additionalProperties": true,
        "properties": {
            "code": {"type": "string"},
            "class": {"enum": names(ErrorClass::ALL, ErrorClass::as_str)},
            "severity": {"enum": names(Severity::ALL, Severity::as_str)},
            "category": {"enum": names(Category::ALL, Category::as_str)},
            "retryable": {"type": "boolean"},
            "cause": {"type": "string"},
            "recovery": {"type": "string"},
            "stability": {"enum": names(Stability::ALL, Stability::as_str)},
            "replaced_by": nullable("string"),
            "related_codes": {"type": "array", "items": {"type": "string"}}
        }
    })
}

/// The schema named `name` (`envelope`, `decision`, `code-info`), pretty-printed.
pub fn json_schema(name: &str) -> Option<String> {
    let (title, mut body) = match name {
        "envelope" => ("agent-recovery envelope", envelope()),
        "decision" => ("agent-recovery decision", decision()),
        "code-info" | "code_info" => ("agent-recovery registry code", code_info()),
        _ => return None,
    };
    if let Value::Object(m) = &mut body {
        m.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        m.insert(
            "$id".into(),
            json!(format!("urn:agent-recovery:schema:{name}:0.1.0")),
        );
        m.insert("title".into(), json!(title));
    }
    serde_json::to_string_pretty(&body).ok()
}
