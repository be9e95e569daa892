//! Every renderer's output, fed back to classify, gives back the same class,
//! code, retryable and retry_after_ms — for every vector observation.

use agent_recovery_policy::{RenderFormat, classify_json, render_json};
use serde_json::{Value, json};
use std::path::Path;

/// Every observation in tests/vectors/*.json.
fn vector_observations() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let cases: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        for c in cases.as_array().unwrap() {
            out.push((
                c["name"].as_str().unwrap_or("?").to_owned(),
                c["observation"].clone(),
            ));
        }
    }
    out
}

/// The observation a client would build from a rendered output.
pub fn observation_of(format: RenderFormat, rendered: &str) -> Value {
    let r: Value = serde_json::from_str(rendered).unwrap();
    match format {
        RenderFormat::JsonrpcError | RenderFormat::DownstreamWrap => {
            json!({"source": "jsonrpc", "message": r})
        }
        RenderFormat::McpToolResult => {
            json!({"source": "mcp", "message": {"jsonrpc": "2.0", "id": 1, "result": r}})
        }
        RenderFormat::A2aTaskStatus => {
            json!({"source": "a2a", "message": {"jsonrpc": "2.0", "id": 1, "result": r}})
        }
        RenderFormat::ProblemJson => {
            json!({"source": "http", "status": r["status"], "headers": r["headers"], "body": r["body"]})
        }
        RenderFormat::ModelToolResult => r,
        RenderFormat::AgUiRunError => json!({"error": r["metadata"]["error"]}),
        RenderFormat::CoordinatorText => unreachable!("text is not an observation"),
    }
}

#[test]
fn renderers_round_trip_through_classify() {
    let keys = ["code", "class", "retryable", "retry_after_ms"];
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, obs) in vector_observations() {
        let Ok(env_text) = classify_json(&obs.to_string()) else {
            continue;
        };
        let env: Value = serde_json::from_str(&env_text).unwrap();
        for &format in RenderFormat::ALL {
            if format == RenderFormat::CoordinatorText {
                continue;
            }
            let opts = r#"{"id":7,"task_id":"t-1","current_agent":"coordinator","downstream_agent":"http://sub:8002"}"#;
            let rendered = render_json(&env_text, format, opts).unwrap();
            let back_text = classify_json(&observation_of(format, &rendered).to_string())
                .unwrap_or_else(|e| panic!("{name} via {}: {e}\n{rendered}", format.as_str()));
            let back: Value = serde_json::from_str(&back_text).unwrap();
            for k in keys {
                if env[k] != back[k] {
                    failures.push(format!(
                        "{name} via {}: {k} expected {} got {}",
                        format.as_str(),
                        env[k],
                        back[k]
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no vectors found");
    assert!(
        failures.is_empty(),
        "{} round-trip failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn coordinator_text_carries_code_and_task() {
    let env = classify_json(r#"{"source":"a2a","message":{"jsonrpc":"2.0","id":1,"result":{"id":"t9","status":{"state":"input-required","message":{"parts":[{"kind":"text","text":"Which account?"}]}}}}}"#).unwrap();
    let text = render_json(&env, RenderFormat::CoordinatorText, r#"{"task_id":"t9"}"#).unwrap();
    assert!(
        text.starts_with("[INPUT_REQUIRED:task_id=t9] Which account?"),
        "{text}"
    );
    assert!(text.contains("code=agent.task.input_required"), "{text}");
}

#[test]
fn options_must_be_an_object() {
    let env = classify_json(r#"{"source":"http","status":503}"#).unwrap();
    for bad in ["[1]", "7", "\"x\"", "{\"idd\":1}"] {
        let err = render_json(&env, RenderFormat::JsonrpcError, bad).unwrap_err();
        assert_eq!(
            err.kind,
            agent_recovery_policy::ErrorKind::InvalidArgument,
            "{bad}"
        );
    }
    assert!(render_json(&env, RenderFormat::JsonrpcError, "").is_ok());
}
