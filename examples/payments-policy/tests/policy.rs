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

/// The breaker: 2 failures / 60 000 ms (the crate documentation says why),
/// on every decision; a caller may only open it sooner or keep it open longer.
#[test]
fn breaker_opens_after_two_failures_for_sixty_seconds() {
    let want = serde_json::json!({"failure_threshold": 2, "open_ms": 60000});
    assert_eq!(Payments::breaker(), payments_policy::BREAKER);
    for (obs, ctx) in [
        (
            r#"{"source":"http","status":503}"#,
            r#"{"call":"tool","attempt":1,"seed":7}"#,
        ),
        (
            r#"{"source":"http","status":400}"#,
            r#"{"call":"tool","attempt":1}"#,
        ),
        (r#"{"source":"http","status":409}"#, r#"{"attempt":1}"#),
    ] {
        assert_eq!(decide(obs, ctx)["breaker"], want, "{obs}");
    }
    let asked = |b: &str| {
        decide(
            r#"{"source":"http","status":503}"#,
            &format!(r#"{{"attempt":1,"seed":7,"config":{{"breaker":{b}}}}}"#),
        )["breaker"]
            .clone()
    };
    // Looser asks are clamped to the policy's.
    assert_eq!(asked(r#"{"failure_threshold":5,"open_ms":1000}"#), want);
    // Tighter asks are kept.
    assert_eq!(
        asked(r#"{"failure_threshold":1,"open_ms":120000}"#),
        serde_json::json!({"failure_threshold": 1, "open_ms": 120000})
    );
    // A bad value is still refused (invalid-config), not clamped into range.
    let e = Payments::decide_json(
        r#"{"source":"http","status":503}"#,
        r#"{"attempt":1,"config":{"breaker":{"failure_threshold":0}}}"#,
    )
    .unwrap_err();
    assert_eq!(e.kind, agent_recovery_policy::ErrorKind::InvalidConfig);
    assert!(e.message.contains("failure_threshold"), "{e:?}");
}

/// A custom policy that only overrides `breaker` gets its thresholds on every
/// decision through the trait's default `decide`.
#[test]
fn the_sdk_default_decide_carries_the_policys_breaker() {
    struct Cautious;
    impl RecoveryPolicy for Cautious {
        fn info() -> agent_recovery_policy::PolicyInfo {
            agent_recovery_policy::PolicyInfo {
                name: "cautious".into(),
                version: "0.0.1".into(),
                description: "test".into(),
            }
        }
        fn breaker() -> agent_recovery_policy::BreakerThresholds {
            agent_recovery_policy::BreakerThresholds {
                failure_threshold: 1,
                open_ms: 5_000,
                rate: None,
            }
        }
    }
    let d: Value = serde_json::from_str(
        &Cautious::decide_json(
            r#"{"source":"http","status":503}"#,
            r#"{"attempt":1,"seed":1}"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        d["breaker"],
        serde_json::json!({"failure_threshold": 1, "open_ms": 5000})
    );
    // Everything else is the reference's: seed 1 attempt 1 draws 96 ms (jitter.py).
    assert_eq!(d["delay_ms"], 96);
    // The context's config.breaker overrides it member by member.
    let d: Value = serde_json::from_str(
        &Cautious::decide_json(
            r#"{"source":"http","status":503}"#,
            r#"{"attempt":1,"config":{"breaker":{"open_ms":9000}}}"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        d["breaker"],
        serde_json::json!({"failure_threshold": 1, "open_ms": 9000})
    );
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
            // The breaker thresholds are parameters this policy changes too.
            let retry_flow = ["retry", "dead_letter", "compensate"]
                .contains(&exp["action"].as_str().unwrap_or("retry"))
                || exp.get("action").is_none()
                || exp.get("max_attempts").is_some()
                || exp.get("breaker").is_some();
            if retry_flow {
                continue;
            }
            let mut ctx = ctx.clone();
            // An observation's `replay` stands in for `idempotent` when the
            // context does not say it; only fill the context in otherwise.
            if ctx.get("idempotent").is_none() && c["observation"].get("replay").is_none() {
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
