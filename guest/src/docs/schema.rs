//! JSON Schemas (draft 2020-12) of the outputs, built from the same enums the
//! policy serializes, so they cannot drift. Fields may be added to the outputs,
//! never renamed or removed: the schemas allow additional properties.

use crate::config::{MAX_ATTEMPTS, MAX_MS};
use crate::model::{Action, Category, ErrorClass, Severity, SourceKind, Stability};
use serde_json::Value;

fn names<T: Copy>(all: &[T], f: impl Fn(T) -> &'static str) -> Value {
    all.iter().map(|x| Value::from(f(*x))).collect()
}

/// A schema from its JSON text and the members the code fills in (enum
/// names, limits) at their JSON pointers, `null` in the text. Text rather than
/// `json!`: a `json!` literal compiles to code that builds it, tens of KB in
/// the component for these cold schemas; text is data.
fn schema(text: &str, fill: Vec<(&str, Value)>) -> Value {
    let mut v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    for (pointer, value) in fill {
        if let Some(slot) = v.pointer_mut(pointer) {
            *slot = value;
        }
    }
    v
}

fn envelope() -> Value {
    let mut source = names(SourceKind::ALL, SourceKind::as_str);
    if let Value::Array(a) = &mut source {
        a.push(Value::Null);
    }
    schema(
        r##"{
        "type": "object",
        "description": "The agent-readable error envelope.",
        "required": ["code", "message", "class", "retryable", "severity", "category", "retry_after_ms", "field",
                     "allowed_values", "suggested_value", "hint", "request_id", "related_codes", "docs_url", "upstream"],
        "additionalProperties": true,
        "properties": {
            "code": {"type": "string", "pattern": "^(tool|llm|agent|runtime)\\.[a-z0-9_]+\\.[a-z0-9_]+$"},
            "message": {"type": "string"},
            "class": {"enum": null},
            "retryable": {"type": "boolean"},
            "severity": {"enum": null},
            "category": {"enum": null},
            "retry_after_ms": {"type": ["integer", "null"], "minimum": 0},
            "field": {"type": ["string", "null"]},
            "allowed_values": {},
            "suggested_value": {},
            "hint": {"type": "string"},
            "request_id": {"type": ["string", "null"]},
            "related_codes": {"type": "array", "items": {"type": "string"}},
            "docs_url": {"type": ["string", "null"]},
            "upstream": {
                "type": "object",
                "required": ["source", "provider", "status", "code", "type"],
                "additionalProperties": true,
                "properties": {
                    "source": {"enum": null},
                    "provider": {"type": ["string", "null"]},
                    "status": {"type": ["integer", "null"], "minimum": 100, "maximum": 999},
                    "code": {"type": ["string", "null"]},
                    "type": {"type": ["string", "null"]}
                }
            }
        }
    }"##,
        vec![
            (
                "/properties/class/enum",
                names(ErrorClass::ALL, ErrorClass::as_str),
            ),
            (
                "/properties/severity/enum",
                names(Severity::ALL, Severity::as_str),
            ),
            (
                "/properties/category/enum",
                names(Category::ALL, Category::as_str),
            ),
            ("/properties/upstream/properties/source/enum", source),
        ],
    )
}

fn decision() -> Value {
    schema(
        r##"{
        "type": "object",
        "description": "The recovery decision.",
        "required": ["action", "delay_ms", "attempt", "max_attempts", "budget_remaining_ms", "reason", "reason_code", "envelope"],
        "additionalProperties": true,
        "properties": {
            "action": {"enum": null},
            "delay_ms": {"type": ["integer", "null"], "minimum": 0},
            "attempt": {"type": "integer", "minimum": 1},
            "max_attempts": {"type": "integer", "minimum": 1},
            "budget_remaining_ms": {"type": "integer", "minimum": 0},
            "reason": {"type": "string"},
            "reason_code": {"type": ["string", "null"]},
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
                        "owner": {"type": ["string", "null"]},
                        "runbook": {"type": ["string", "null"]},
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
                    "failure_threshold": {"type": "integer", "minimum": 1, "maximum": null},
                    "open_ms": {"type": "integer", "minimum": 1, "maximum": null}
                }
            }
        },
        "$defs": {"envelope": null}
    }"##,
        vec![
            (
                "/properties/action/enum",
                names(Action::ALL, Action::as_str),
            ),
            (
                "/properties/breaker/properties/failure_threshold/maximum",
                Value::from(MAX_ATTEMPTS),
            ),
            (
                "/properties/breaker/properties/open_ms/maximum",
                Value::from(MAX_MS),
            ),
            ("/$defs/envelope", envelope()),
        ],
    )
}

fn code_info() -> Value {
    schema(
        r##"{
        "type": "object",
        "description": "One row of the error-code registry.",
        "required": ["code", "class", "severity", "category", "retryable", "cause", "recovery", "stability", "replaced_by", "related_codes"],
        "additionalProperties": true,
        "properties": {
            "code": {"type": "string"},
            "class": {"enum": null},
            "severity": {"enum": null},
            "category": {"enum": null},
            "retryable": {"type": "boolean"},
            "cause": {"type": "string"},
            "recovery": {"type": "string"},
            "stability": {"enum": null},
            "replaced_by": {"type": ["string", "null"]},
            "related_codes": {"type": "array", "items": {"type": "string"}}
        }
    }"##,
        vec![
            (
                "/properties/class/enum",
                names(ErrorClass::ALL, ErrorClass::as_str),
            ),
            (
                "/properties/severity/enum",
                names(Severity::ALL, Severity::as_str),
            ),
            (
                "/properties/category/enum",
                names(Category::ALL, Category::as_str),
            ),
            (
                "/properties/stability/enum",
                names(Stability::ALL, Stability::as_str),
            ),
        ],
    )
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
            "https://json-schema.org/draft/2020-12/schema".into(),
        );
        m.insert(
            "$id".into(),
            format!("urn:agent-recovery:schema:{name}:0.1.0").into(),
        );
        m.insert("title".into(), title.into());
    }
    serde_json::to_string_pretty(&body).ok()
}
