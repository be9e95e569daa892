//! Policy documents: validation names the bad path, the digest is canonical,
//! overrides act on envelopes, decisions and the registry, and packing
//! writes the slot.

use agent_recovery_policy::document::{self, Document};
use agent_recovery_policy::{Context, Observation};
use serde_json::{Value, json};

fn base() -> Value {
    json!({
        "format": 1,
        "name": "t",
        "version": "1.0.0",
        "smoke_tests": [{"observation": {"source": "http", "status": 503}, "expect": {"action": "retry"}}]
    })
}

fn with(path: &str, v: Value) -> Value {
    let mut doc = base();
    let mut at = &mut doc;
    let parts: Vec<&str> = path.split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            at[*p] = v.clone();
        } else {
            if at.get(*p).is_none() {
                at[*p] = json!({});
            }
            at = &mut at[*p];
        }
    }
    doc
}

fn error(doc: &Value) -> String {
    Document::parse(&doc.to_string()).unwrap_err().message
}

fn decide(doc: &Document, obs: Value, ctx: Value) -> Value {
    let d = doc
        .decide(
            Observation::from_json(obs).unwrap(),
            Context::from_json(ctx).unwrap(),
        )
        .unwrap();
    serde_json::to_value(&d).unwrap()
}

#[test]
fn errors_name_the_bad_path() {
    let cases = [
        (
            with(
                "overrides/codes",
                json!({"llm.http.409_conflict": {"action": "retyr"}}),
            ),
            r#"overrides.codes["llm.http.409_conflict"].action: unknown action "retyr"; expected one of retry, fail, "#,
        ),
        (
            with(
                "overrides/codes",
                json!({"llm.http.409": {"class": "permanent"}}),
            ),
            r#"overrides.codes["llm.http.409"]: unknown code "llm.http.409"; list the codes"#,
        ),
        (
            with(
                "overrides/providers",
                json!({"openai": {"llm.http.429_rate_limited": {"severity": "loud"}}}),
            ),
            r#"overrides.providers["openai"]["llm.http.429_rate_limited"].severity: unknown severity "loud"; expected one of info, warning, error, fatal"#,
        ),
        (
            with("overrides/codes", json!({"tool.http.409_conflict": {}})),
            r#"overrides.codes["tool.http.409_conflict"]: changes nothing"#,
        ),
        (
            with("calls/llm", json!({"max_attempt": 2})),
            "calls.llm: unknown field `max_attempt`",
        ),
        (
            with("calls/llm", json!({"max_attempts": 0})),
            "llm.max_attempts",
        ),
        (
            with("version", json!("one")),
            r#"version: "one" is not a semver version"#,
        ),
        (with("format", json!(2)), "format: unsupported format 2"),
        (
            with("retries", json!(2)),
            r#"document: unknown member "retries""#,
        ),
        (
            with("caller_config", json!("loose")),
            r#"caller_config: unknown mode "loose""#,
        ),
        (with("smoke_tests", json!([])), "smoke_tests: is empty"),
        (
            with("fallbacks", json!({"llm.openai": []})),
            r#"fallbacks["llm.openai"]: is empty"#,
        ),
        (
            with("fallbacks", json!({"llm.openai": "llm.anthropic"})),
            r#"fallbacks["llm.openai"]: expected an array of targets, got a string"#,
        ),
        (
            with(
                "fallbacks",
                json!({"llm.openai": ["llm.anthropic", "llm.openai"]}),
            ),
            r#"fallbacks["llm.openai"][1]: "llm.openai" is already in the chain"#,
        ),
        (
            with("fallbacks", json!({"llm.openai": ["llm.anthropic", 7]})),
            r#"fallbacks["llm.openai"][1]: expected a string"#,
        ),
        (
            with("dead_letters", json!({"payments*": {"owner": "x"}})),
            r#"dead_letters["payments*"]: "payments*" is not a tool pattern"#,
        ),
        (
            with("dead_letters", json!({"payments.*": {"team": "x"}})),
            r#"dead_letters["payments.*"]: unknown member "team"; expected one of owner, runbook, depth_threshold"#,
        ),
        (
            with(
                "dead_letters",
                json!({"payments.*": {"depth_threshold": 0}}),
            ),
            r#"dead_letters["payments.*"].depth_threshold: expected an integer from 1, got 0"#,
        ),
        (
            with("dead_letters", json!({"payments.*": {}})),
            r#"dead_letters["payments.*"]: changes nothing"#,
        ),
    ];
    for (doc, want) in cases {
        let got = error(&doc);
        assert!(
            got.starts_with(want) || got.contains(want),
            "want {want}\n got {got}"
        );
    }
}

#[test]
fn one_document_has_one_digest_whatever_the_key_order() {
    let a = Document::parse(&with("retry_budget_ms", json!(1000)).to_string()).unwrap();
    let reordered = r#"{"smoke_tests":[{"expect":{"action":"retry"},"observation":{"status":503,"source":"http"}}],
        "retry_budget_ms":1000,"version":"1.0.0","name":"t","format":1}"#;
    let b = Document::parse(reordered).unwrap();
    assert_eq!(a.digest(), b.digest());
    let c = Document::parse(&with("retry_budget_ms", json!(1001)).to_string()).unwrap();
    assert_ne!(a.digest(), c.digest());
    // sha256 of the canonical text, computed independently by Python's hashlib:
    // hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert_eq!(
        b.digest(),
        "sha256:4b5e077fe68cc6138a4f2a0547bd8dd875c981f76fde3f1b374bce462de3fabb"
    );
    assert_eq!(
        document::canonical(&serde_json::from_str(reordered).unwrap()),
        r#"{"format":1,"name":"t","retry_budget_ms":1000,"smoke_tests":[{"expect":{"action":"retry"},"observation":{"source":"http","status":503}}],"version":"1.0.0"}"#
    );
}

#[test]
fn an_action_override_replaces_the_class_action_but_not_a_guard() {
    let doc = Document::parse(
        &with(
            "overrides",
            json!({"codes": {"tool.http.503_unavailable": {"action": "fallback", "hint": "use the mirror"}}}),
        )
        .to_string(),
    )
    .unwrap();
    let d = decide(
        &doc,
        json!({"source":"http","status":503}),
        json!({"attempt":1,"seed":1}),
    );
    assert_eq!(d["action"], "fallback");
    assert_eq!(d["reason"], "override");
    assert_eq!(d["delay_ms"], Value::Null);
    assert_eq!(d["envelope"]["hint"], "use the mirror");
    // Attempts spent: the guard's dead letter stands.
    let d = decide(
        &doc,
        json!({"source":"http","status":503}),
        json!({"attempt":5,"seed":1}),
    );
    assert_eq!(d["action"], "dead_letter");
    assert_eq!(d["reason_code"], "runtime.budget.attempts_exhausted");
}

#[test]
fn a_provider_override_wins_over_the_code_override() {
    let doc = Document::parse(
        &with(
            "overrides",
            json!({
                "codes": {"llm.http.429_rate_limited": {"severity": "warning"}},
                "providers": {"openai": {"llm.http.429_rate_limited": {"severity": "fatal"}}}
            }),
        )
        .to_string(),
    )
    .unwrap();
    let openai: Value = serde_json::from_str(include_str!(
        "../../examples/observations/openai-429-rate-limit.json"
    ))
    .unwrap();
    let d = decide(&doc, openai, json!({"attempt":1,"seed":1}));
    assert_eq!(d["envelope"]["upstream"]["provider"], "openai");
    assert_eq!(d["envelope"]["code"], "llm.http.429_rate_limited");
    assert_eq!(d["envelope"]["severity"], "fatal");
    assert_eq!(d["action"], "escalate");
    let other = json!({"source":"http","status":429,"call":"llm"});
    let d = decide(&doc, other, json!({"attempt":1,"seed":1}));
    assert_eq!(d["envelope"]["severity"], "warning");
    assert_eq!(d["action"], "retry");
    // The registry has the code's row, not the provider's.
    let row = doc
        .registry()
        .lookup("llm.http.429_rate_limited")
        .unwrap()
        .clone();
    assert_eq!(row.severity.as_str(), "warning");
}

#[test]
fn override_mode_lets_the_caller_loosen_and_clamp_does_not() {
    let budget = |mode: &str| {
        let doc = Document::parse(
            &with("caller_config", json!(mode))
                .as_object()
                .map(|m| {
                    let mut m = m.clone();
                    m.insert("retry_budget_ms".into(), json!(1000));
                    Value::Object(m)
                })
                .unwrap()
                .to_string(),
        )
        .unwrap();
        decide(
            &doc,
            json!({"source":"http","status":503}),
            json!({"attempt":1,"seed":1,"config":{"retry_budget_ms":5000}}),
        )["budget_remaining_ms"]
            .as_u64()
            .unwrap()
            + decide(
                &doc,
                json!({"source":"http","status":503}),
                json!({"attempt":1,"seed":1,"config":{"retry_budget_ms":5000}}),
            )["delay_ms"]
                .as_u64()
                .unwrap()
    };
    assert_eq!(budget("override"), 5000);
    assert_eq!(budget("clamp"), 1000);
}

#[test]
fn pack_writes_the_document_into_the_slot_once() {
    let mut component = b"head".to_vec();
    component.extend_from_slice(document::SLOT_MARKER);
    component.extend(std::iter::repeat_n(0u8, document::SLOT_BYTES - 32));
    component.extend_from_slice(b"tail");
    let text = base().to_string();
    let (packed, doc) = document::pack(&component, &text).unwrap();
    assert_eq!(packed.len(), component.len());
    let canonical = document::canonical(&base());
    let at = 4 + 32;
    let len = u32::from_le_bytes(packed[at..at + 4].try_into().unwrap()) as usize;
    assert_eq!(&packed[at + 4..at + 4 + len], canonical.as_bytes());
    assert_eq!(doc.name, "t");
    // A packed component is not packed twice, and a bad document is not packed.
    let e = document::pack(&packed, &text).unwrap_err();
    assert!(
        e.message.contains("already holds a policy document"),
        "{}",
        e.message
    );
    let e = document::pack(&component, &with("format", json!(9)).to_string()).unwrap_err();
    assert!(e.message.starts_with("format:"), "{}", e.message);
}

/// A document's fallback chains and dead-letter table ride on every decision
/// (for the recovery loop); a document without them decides as before.
#[test]
fn fallbacks_and_dead_letters_ride_on_the_decision() {
    let mut v = base();
    v["fallbacks"] = json!({"llm.openai": ["llm.anthropic", "llm.local"]});
    v["dead_letters"] = json!({"payments.*": {"owner": "payments-oncall", "depth_threshold": 5}});
    let doc = Document::from_value(&v).unwrap();
    let d = decide(
        &doc,
        json!({"source": "http", "status": 503}),
        json!({"attempt": 1, "seed": 1}),
    );
    assert_eq!(d["fallbacks"], v["fallbacks"]);
    assert_eq!(
        d["dead_letters"],
        json!({"payments.*": {"owner": "payments-oncall", "runbook": null, "depth_threshold": 5}})
    );
    let plain = decide(
        &Document::from_value(&base()).unwrap(),
        json!({"source": "http", "status": 503}),
        json!({"attempt": 1, "seed": 1}),
    );
    assert!(plain.get("fallbacks").is_none() && plain.get("dead_letters").is_none());
}

/// A tool's dead-letter entry: its own name, else the longest `prefix.*`,
/// else `*`.
#[test]
fn a_tool_takes_its_own_entry_then_the_longest_prefix_then_the_star() {
    let table: std::collections::BTreeMap<String, u32> = [
        ("*".to_owned(), 1),
        ("payments.*".to_owned(), 2),
        ("payments.card.*".to_owned(), 3),
        ("payments.card.refund".to_owned(), 4),
    ]
    .into_iter()
    .collect();
    let at = |tool: &str| document::dead_letter_for(&table, tool).copied();
    assert_eq!(at("payments.card.refund"), Some(4));
    assert_eq!(at("payments.card.charge"), Some(3));
    assert_eq!(at("payments.transfer"), Some(2));
    assert_eq!(at("payments"), Some(1));
    assert_eq!(at("paymentsx.charge"), Some(1));
    assert_eq!(at("search"), Some(1));
    let narrow: std::collections::BTreeMap<String, u32> =
        [("payments.*".to_owned(), 2)].into_iter().collect();
    assert_eq!(document::dead_letter_for(&narrow, "search"), None);
}
