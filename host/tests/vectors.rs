//! The shared vectors (`tests/vectors/*.json`) through the real component.
//!
//! A case is `{"name", "observation", "context"?, "expect": {"envelope"?,
//! "decision"?, "error"?}}`. `envelope` is matched against `classify_json`,
//! `decision` against `decide_json` (context `{}` when absent), `error`
//! against the policy error of `decide_json` (with a context) or
//! `classify_json`. Expectations are subsets (objects member by member,
//! arrays and scalars exactly). All cases run; every failure is reported
//! with its name and expected and got side by side.

mod common;

use serde_json::Value;

use common::{Case, cases, mismatches, outcome, policy, side_by_side};

fn check(case: &Case, failures: &mut Vec<String>) {
    let policy = policy();
    let obs = case.observation();
    let ctx = case.context();
    let mut run = |what: &str, want: &Value, got: Value| {
        let mut diffs = Vec::new();
        mismatches(want, &got, what, &mut diffs);
        if !diffs.is_empty() {
            failures.push(format!(
                "case {:?}: mismatch at {}\n{}",
                case.name(),
                diffs.join(", "),
                side_by_side(want, &got)
            ));
        }
    };
    let mut checked = false;
    if let Some(want) = case.expect("envelope") {
        run("envelope", want, outcome(policy.classify_json(&obs)));
        checked = true;
    }
    if let Some(want) = case.expect("decision") {
        let ctx = ctx.as_deref().unwrap_or("{}");
        run("decision", want, outcome(policy.decide_json(&obs, ctx)));
        checked = true;
    }
    if let Some(want) = case.expect("error") {
        let got = match &ctx {
            Some(ctx) => outcome(policy.decide_json(&obs, ctx)),
            None => outcome(policy.classify_json(&obs)),
        };
        run("", &serde_json::json!({ "error": want }), got);
        checked = true;
    }
    if !checked {
        failures.push(format!(
            "case {:?}: expect has none of envelope, decision, error",
            case.name()
        ));
    }
}

#[test]
fn shared_vectors_through_wasmtime() {
    let cases = cases();
    assert!(
        cases.len() >= 3,
        "expected vectors in tests/vectors, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        check(case, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} of {} vector cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn host_smoke_vectors_are_present() {
    let names: Vec<String> = cases()
        .iter()
        .filter(|c| c.file == "host_smoke.json")
        .map(Case::name)
        .collect();
    assert_eq!(names.len(), 3, "host_smoke.json cases: {names:?}");
}

#[test]
fn case_names_are_unique() {
    let mut seen = std::collections::BTreeSet::new();
    let dups: Vec<String> = cases()
        .iter()
        .map(Case::name)
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    assert!(dups.is_empty(), "duplicate case names: {dups:?}");
}
