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

use common::{
    Case, EXPECT_KINDS, cases, mismatches, outcome, policy, schema_violations, side_by_side,
};

fn check(case: &Case, failures: &mut Vec<String>) {
    let policy = policy();
    let obs = case.observation();
    let ctx = case.context();
    for kind in case.value["expect"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if !EXPECT_KINDS.contains(&kind.as_str()) {
            failures.push(format!(
                "case {:?}: unknown expectation kind {kind:?} (this runner checks {EXPECT_KINDS:?})",
                case.name()
            ));
        }
    }
    let mut run = |what: &str, want: &Value, got: Value| {
        let mut diffs = Vec::new();
        // Every envelope and decision the policy produces must match the
        // published schema, whatever the case expects of it.
        if got.get("error").is_none() {
            let schema = if what == "decision" {
                "decision"
            } else {
                "envelope"
            };
            diffs.extend(schema_violations(schema, &got));
        }
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

/// `tests/vectors/keys/keys.json`, written by an independent implementation
/// of the documented canonical form (`tests/vectors/tools/keys.py`).
#[test]
fn idempotency_keys_match_the_independent_implementation() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/keys/keys.json");
    let text = std::fs::read_to_string(&path).expect("keys.json is readable");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("keys.json is JSON");
    assert!(cases.len() >= 10, "only {} key vectors", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let part = |k: &str| {
            case[k]
                .as_str()
                .unwrap_or_else(|| panic!("{k} is a string"))
        };
        match policy().key(
            part("run_id"),
            part("step_id"),
            part("tool"),
            part("args_json"),
        ) {
            Ok(key) if key == part("key") => {}
            got => failures.push(format!(
                "{}: expected {} (canonical {}), got {got:?}",
                part("name"),
                part("key"),
                part("canonical")
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A schema violation is reported (the validation can fail).
#[test]
fn a_schema_violation_is_caught() {
    let mut decision: Value = serde_json::from_str(
        &policy()
            .decide_json(r#"{"source":"http","status":503}"#, "{}")
            .expect("decides"),
    )
    .expect("JSON");
    assert!(schema_violations("decision", &decision).is_empty());
    decision["action"] = Value::String("retry_later".into());
    decision["envelope"]["class"] = Value::Bool(true);
    let errors = schema_violations("decision", &decision);
    assert!(errors.len() >= 2, "{errors:?}");
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

/// `tests/vectors/render/*.json`: `{"name", "envelope", "format", "options"?,
/// "expect": {"output"? (subset), "error"? (a policy-error kind)}}`, rendered
/// by name through the runtime's `render_named` (the reference component's
/// `render-named`). Node and Python read the same files.
#[test]
fn render_vectors_through_render_named() {
    use agent_recovery::ErrorKind;
    use agent_recovery::runtime::{Runtime, RuntimeError};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/render");
    let runtime = Runtime::builder().build().expect("the runtime builds");
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/vectors/render is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).expect("a render vector file is readable");
            let file: Vec<Value> =
                serde_json::from_str(&text).expect("a render vector file is JSON");
            cases.extend(file);
        }
    }
    assert!(cases.len() >= 3, "only {} render vectors", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let options = case
            .get("options")
            .map(Value::to_string)
            .unwrap_or_default();
        let format = case["format"].as_str().expect("format is a string");
        let got = runtime.render_named(&case["envelope"].to_string(), format, &options);
        match (&case["expect"]["output"], &case["expect"]["error"], got) {
            (want, Value::Null, Ok(text)) if !want.is_null() => {
                let got: Value = serde_json::from_str(&text).expect("the output is JSON");
                let mut diff = Vec::new();
                mismatches(want, &got, "$", &mut diff);
                if !diff.is_empty() {
                    failures.push(format!("{name}:\n{}", side_by_side(want, &got)));
                }
            }
            (Value::Null, Value::String(kind), Err(RuntimeError::Policy(e)))
                if kind == "invalid_argument" && e.kind() == ErrorKind::InvalidArgument => {}
            (want, err, got) => failures.push(format!(
                "{name}: expected output {want} / error {err}, got {got:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
