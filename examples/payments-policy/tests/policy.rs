//! The payments policy, tested natively through the same trait the component
//! exports: its own rules, and every reference vector that still applies.

use agent_recovery_policy::RecoveryPolicy;
use payments_policy::Payments;
use serde_json::Value;

fn decide(obs: &str, ctx: &str) -> Value {
    serde_json::from_str(&Payments::decide_json(obs, ctx).unwrap()).unwrap()
}

#[test]
fn llm_calls_get_one_retry() {
    let first = decide(
        r#"{"source":"http","status":503}"#,
        r#"{"call":"llm","attempt":1,"seed":3,"idempotent":true}"#,
    );
    assert_eq!(first["action"], "retry");
    assert_eq!(first["max_attempts"], 2);
    let second = decide(
        r#"{"source":"http","status":503}"#,
        r#"{"call":"llm","attempt":2,"seed":3,"idempotent":true}"#,
    );
    assert_eq!(second["action"], "dead_letter");
}

#[test]
fn conflict_is_permanent() {
    let d = decide(r#"{"source":"http","status":409}"#, r#"{"attempt":1}"#);
    assert_eq!(d["action"], "fail");
    assert_eq!(d["envelope"]["class"], "permanent");
    let e: Value = serde_json::from_str(
        &Payments::classify_json(r#"{"source":"http","status":409}"#).unwrap(),
    )
    .unwrap();
    assert_eq!(e["class"], "permanent");
    assert_eq!(e["retryable"], false);
}

#[test]
fn budget_is_twenty_seconds_and_callers_cannot_loosen_it() {
    let d = decide(
        r#"{"source":"http","status":429,"headers":{"retry-after":"25"}}"#,
        r#"{"attempt":1,"seed":1,"idempotent":true,"config":{"retry_budget_ms":600000,"tool":{"max_attempts":50}}}"#,
    );
    assert_eq!(d["action"], "dead_letter");
    assert_eq!(d["reason"], "hint_exceeds_budget");
    assert_eq!(d["max_attempts"], 3);
}

#[test]
fn ambiguous_failures_are_not_retried_without_an_idempotency_guarantee() {
    let d = decide(r#"{"source":"timeout","phase":"read"}"#, r#"{"attempt":1}"#);
    assert_eq!(d["action"], "fail");
    assert_eq!(d["reason"], "not_idempotent");
    let d = decide(
        r#"{"source":"timeout","phase":"read"}"#,
        r#"{"attempt":1,"idempotent":true,"seed":1}"#,
    );
    assert_eq!(d["action"], "retry");
}

#[test]
fn smoke_tests_pass() {
    let cases: Value = serde_json::from_str(&Payments::smoke_tests()).unwrap();
    for c in cases.as_array().unwrap() {
        let d = decide(&c["observation"].to_string(), &c["context"].to_string());
        assert_eq!(d["action"], c["expect"]["action"], "{c}");
        assert_eq!(d["envelope"]["code"], c["expect"]["code"], "{c}");
    }
}

fn subset(exp: &Value, got: &Value) -> bool {
    match (exp, got) {
        (Value::Object(e), Value::Object(g)) => e
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        _ => exp == got,
    }
}

/// Classification is unchanged except for 409; decisions other than the retry
/// flow (whose parameters this policy changes) are unchanged except for 409 and
/// idempotency (this policy defaults to not idempotent, so such vectors are run
/// with `idempotent: true` added when they did not say).
#[test]
fn reference_vectors_that_still_apply() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors");
    let mut checked = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let cases: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for c in cases.as_array().unwrap() {
            let obs = c["observation"].to_string();
            if c["observation"]["status"] == 409 {
                continue;
            }
            if let Some(exp) = c["expect"].get("envelope") {
                let got: Value =
                    serde_json::from_str(&Payments::classify_json(&obs).unwrap()).unwrap();
                if !subset(exp, &got) {
                    failures.push(format!("{}: expected {exp} got {got}", c["name"]));
                }
                checked += 1;
            }
            let (Some(ctx), Some(exp)) = (c.get("context"), c["expect"].get("decision")) else {
                continue;
            };
            let retry_flow = ["retry", "dead_letter", "compensate"]
                .contains(&exp["action"].as_str().unwrap_or("retry"))
                || exp.get("action").is_none()
                || exp.get("max_attempts").is_some();
            if retry_flow {
                continue;
            }
            let mut ctx = ctx.clone();
            if ctx.get("idempotent").is_none() {
                ctx["idempotent"] = Value::Bool(true);
            }
            let got = decide(&obs, &ctx.to_string());
            if !subset(exp, &got) {
                failures.push(format!("{}: expected {exp} got {got}", c["name"]));
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} vectors applied");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The policy's registry documents the 409 rule it applies, and names only
/// codes the reference has.
#[test]
fn its_registry_documents_its_409_rule() {
    let registry = Payments::registry();
    assert!(
        registry.unknown_codes().is_empty(),
        "{:?}",
        registry.unknown_codes()
    );
    for code in payments_policy::CONFLICT_CODES {
        let row = registry.lookup(code).expect("the 409 code is listed");
        assert_eq!(row.class.as_str(), "permanent", "{code}");
        assert!(!row.retryable, "{code}");
        assert_eq!(row.recovery, payments_policy::CONFLICT_HINT);
    }
    // Everything else is the reference's.
    let reference = agent_recovery_policy::Registry::reference();
    assert_eq!(registry.codes().len(), reference.codes().len());
    let row = registry
        .lookup("tool.http.503_unavailable")
        .expect("listed");
    assert_eq!(Some(row), reference.lookup("tool.http.503_unavailable"));
    // The envelope's hint is the registry's.
    let e: Value = serde_json::from_str(
        &Payments::classify_json(r#"{"source":"http","status":409}"#).unwrap(),
    )
    .unwrap();
    assert_eq!(e["hint"], payments_policy::CONFLICT_HINT);
}
