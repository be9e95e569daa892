//! The registry through the component: complete, sorted, and covering every
//! code the policy emits over the shared vectors.

mod common;

use std::collections::BTreeSet;

use serde_json::Value;

use common::{cases, outcome, policy};

#[test]
fn every_code_emitted_over_the_vectors_is_in_the_registry() {
    let policy = policy();
    let registry: BTreeSet<String> = policy
        .codes()
        .expect("codes()")
        .into_iter()
        .map(|c| c.code)
        .collect();
    let mut emitted = BTreeSet::new();
    for case in cases() {
        let obs = case.observation();
        let ctx = case.context().unwrap_or_else(|| "{}".into());
        for got in [
            outcome(policy.classify_json(&obs)),
            outcome(policy.decide_json(&obs, &ctx)),
        ] {
            for pointer in ["/code", "/envelope/code", "/reason_code"] {
                if let Some(Value::String(code)) = got.pointer(pointer) {
                    emitted.insert((code.clone(), case.name()));
                }
            }
            for pointer in ["/related_codes", "/envelope/related_codes"] {
                if let Some(Value::Array(codes)) = got.pointer(pointer) {
                    for code in codes.iter().filter_map(Value::as_str) {
                        emitted.insert((code.to_string(), case.name()));
                    }
                }
            }
        }
    }
    assert!(emitted.len() > 10, "too few codes emitted: {emitted:?}");
    let missing: Vec<String> = emitted
        .iter()
        .filter(|(code, _)| !registry.contains(code))
        .map(|(code, case)| format!("{code} (from {case:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "codes emitted but not in the registry:\n{}",
        missing.join("\n")
    );
}

#[test]
fn codes_are_sorted_unique_and_match_the_json_and_lookup() {
    let policy = policy();
    let codes = policy.codes().expect("codes()");
    let names: Vec<&str> = codes.iter().map(|c| c.code.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted, "codes() must be sorted and unique");

    let json: Value = serde_json::from_str(&policy.registry_json().expect("registry_json()"))
        .expect("registry JSON parses");
    let json_codes: Vec<&str> = json
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|c| c["code"].as_str())
        .collect();
    assert_eq!(
        names, json_codes,
        "codes() and codes-json list the same codes"
    );

    let first = &codes[0];
    let found = policy
        .lookup(&first.code)
        .expect("lookup()")
        .expect("found");
    assert_eq!(&found, first);
    assert_eq!(policy.lookup("no.such.code").expect("lookup()"), None);
}

#[test]
fn registry_markdown_is_the_committed_docs() {
    let markdown = policy().registry_markdown().expect("registry_markdown()");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md");
    let committed = std::fs::read_to_string(path).expect("docs/errors.md");
    assert!(
        markdown == committed,
        "the component's codes-markdown differs from docs/errors.md"
    );
}

/// Every row of the registry, of the reference and of payments-policy, matches
/// `docs/schema/code-info.schema.json`.
#[test]
fn every_registry_row_matches_the_code_info_schema() {
    let payments = agent_recovery::Policy::from_file(env!("AGENT_RECOVERY_PAYMENTS_WASM"))
        .expect("payments-policy loads");
    for (who, policy) in [("reference", policy()), ("payments", &payments)] {
        let rows: Value = serde_json::from_str(&policy.registry_json().expect("registry_json()"))
            .expect("registry JSON parses");
        let rows = rows.as_array().expect("the registry is an array");
        assert!(rows.len() > 50, "{who}: {} rows", rows.len());
        let errors: Vec<String> = rows
            .iter()
            .flat_map(|row| common::schema_violations("code-info", row))
            .collect();
        assert!(errors.is_empty(), "{who}: {}", errors.join("\n"));
    }
}

/// A custom policy serves its own registry: payments-policy makes 409
/// permanent, and its registry, typed lookup, markdown docs and MCP errors
/// block all say so, while the reference's still say `state`.
#[test]
fn a_custom_policy_serves_its_own_registry() {
    let payments = agent_recovery::Policy::from_file(env!("AGENT_RECOVERY_PAYMENTS_WASM"))
        .expect("payments-policy loads");
    let rows: Value =
        serde_json::from_str(&payments.registry_json().expect("registry_json")).expect("JSON");
    let row = |rows: &Value, code: &str| {
        rows.as_array()
            .and_then(|r| r.iter().find(|r| r["code"] == code))
            .cloned()
            .unwrap_or_else(|| panic!("{code} is listed"))
    };
    let conflict = row(&rows, "tool.http.409_conflict");
    assert_eq!(conflict["class"], "permanent");
    assert_eq!(conflict["retryable"], false);
    assert!(
        conflict["recovery"]
            .as_str()
            .unwrap_or("")
            .starts_with("Do not retry")
    );
    let reference: Value =
        serde_json::from_str(&policy().registry_json().expect("registry_json")).expect("JSON");
    assert_eq!(row(&reference, "tool.http.409_conflict")["class"], "state");

    let typed = payments
        .lookup("llm.http.409_conflict")
        .expect("lookup")
        .expect("listed");
    assert_eq!(typed.class, agent_recovery::types::ErrorClass::Permanent);

    let markdown = payments.registry_markdown().expect("markdown");
    assert!(markdown.contains("Every code the policy `payments-strict` can emit"));
    assert!(
        markdown.contains("| [`tool.http.409_conflict`](#toolhttp409_conflict) | permanent |"),
        "{}",
        &markdown[..2000.min(markdown.len())]
    );
    let block = payments
        .errors_block(&["tool.http.409".to_owned()])
        .expect("errors block");
    assert!(block.contains("Do not retry: check the payment"), "{block}");
}
