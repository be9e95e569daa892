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
