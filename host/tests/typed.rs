//! The typed exports agree with their JSON twins.

mod common;

use agent_recovery::types::{
    Action, CallKind, Category, Context, ErrorClass, Failure, HttpResponse, Observation,
    RenderFormat, SourceKind,
};
use serde_json::Value;

use common::policy;

fn observation_429() -> Observation {
    Observation {
        failure: Failure::Http(HttpResponse {
            status: 429,
            headers: vec![("Retry-After".into(), "2".into())],
            body: None,
        }),
        call: Some(CallKind::Tool),
        provider: None,
        request_id: Some("req-1".into()),
    }
}

fn context(attempt: u32) -> Context {
    Context {
        call: None,
        attempt,
        elapsed_ms: 0,
        seed: Some(7),
        now_ms: None,
        idempotent: None,
        checkpoint_available: None,
        fallback_available: None,
        compensations_pending: None,
        config: None,
    }
}

#[test]
fn typed_classify_matches_classify_json() {
    let envelope = policy().classify(&observation_429()).expect("classifies");
    assert_eq!(envelope.code, "tool.http.429_rate_limited");
    assert_eq!(envelope.class, ErrorClass::Transient);
    assert_eq!(envelope.category, Category::RateLimit);
    assert!(envelope.retryable);
    assert_eq!(envelope.retry_after_ms, Some(2000));
    assert_eq!(envelope.request_id.as_deref(), Some("req-1"));
    assert_eq!(envelope.upstream.source, SourceKind::Http);

    let obs = r#"{"source":"http","status":429,"headers":{"Retry-After":"2"},"call":"tool","request_id":"req-1"}"#;
    let json: Value = serde_json::from_str(&policy().classify_json(obs).unwrap()).unwrap();
    assert_eq!(json["code"], envelope.code.as_str());
    assert_eq!(json["message"], envelope.message.as_str());
    assert_eq!(json["hint"], envelope.hint.as_str());
}

#[test]
fn typed_decide_matches_decide_json() {
    let decision = policy()
        .decide(&observation_429(), context(1))
        .expect("decides");
    assert_eq!(decision.action, Action::Retry);
    assert_eq!(decision.delay_ms, Some(2000));
    assert_eq!(decision.envelope.retry_after_ms, Some(2000));

    let exhausted = policy()
        .decide(&observation_429(), context(5))
        .expect("decides");
    assert_ne!(exhausted.action, Action::Retry);
    assert_eq!(exhausted.delay_ms, None);

    let obs = r#"{"source":"http","status":429,"headers":{"Retry-After":"2"},"call":"tool"}"#;
    let json: Value = serde_json::from_str(
        &policy()
            .decide_json(obs, r#"{"attempt":1,"seed":7}"#)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["budget_remaining_ms"], decision.budget_remaining_ms);
    assert_eq!(json["max_attempts"], decision.max_attempts);
    assert_eq!(json["reason"], decision.reason.as_str());
}

#[test]
fn render_schema_and_errors_block() {
    let p = policy();
    let envelope = p
        .classify_json(r#"{"source":"http","status":429}"#)
        .unwrap();
    for format in [
        RenderFormat::JsonrpcError,
        RenderFormat::McpToolResult,
        RenderFormat::A2aTaskStatus,
        RenderFormat::ProblemJson,
        RenderFormat::ModelToolResult,
        RenderFormat::CoordinatorText,
        RenderFormat::DownstreamWrap,
    ] {
        let options = r#"{"id":1,"task_id":"t-1","current_agent":"a","downstream_agent":"b"}"#;
        let out = p.render_json(&envelope, format, options).expect("renders");
        assert!(!out.is_empty(), "{format:?}");
    }
    let schema = p
        .json_schema("envelope")
        .unwrap()
        .expect("an envelope schema");
    let schema: Value = serde_json::from_str(&schema).unwrap();
    assert!(
        schema.get("$schema").is_some() || schema.get("type").is_some(),
        "{schema}"
    );
    assert_eq!(p.json_schema("no-such-output").unwrap(), None);
    let block = p.errors_block(&["tool.http.".to_string()]).unwrap();
    assert!(block.contains("tool.http.429_rate_limited"), "{block}");
}
