//! Runs every case of `tests/vectors/*.json` (the shared vectors) natively.
//!
//! A file is a JSON array of cases:
//!
//! ```text
//! {"name": "...", "observation": {...}, "context": {...}?,
//!  "expect": {"envelope": {...}?, "decision": {...}?, "error": {...}?}}
//! ```
//!
//! `envelope` is checked against `classify_json`, `decision` against
//! `decide_json` (with `context`, default `{}`), `error` against the policy
//! error either of them returns; any other expectation kind fails the case.
//! Every envelope and decision produced is validated against
//! `docs/schema/` (the `jsonschema` crate, draft 2020-12). Expectations are subsets: objects are matched
//! recursively, member by member; arrays and scalars must be equal. Every
//! failure prints the case name, then expected and got side by side.

use agent_recovery_policy::{classify_json, decide_json};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// The expectation kinds a case may name; any other fails the run.
const EXPECT_KINDS: [&str; 3] = ["envelope", "decision", "error"];

/// `docs/schema/<name>.schema.json`, compiled once.
fn schema(name: &str) -> &'static jsonschema::Validator {
    static SCHEMAS: std::sync::LazyLock<Vec<(&'static str, jsonschema::Validator)>> =
        std::sync::LazyLock::new(|| {
            ["envelope", "decision"]
                .into_iter()
                .map(|name| {
                    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join(format!("../docs/schema/{name}.schema.json"));
                    let text = fs::read_to_string(&path)
                        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                    let schema: Value = serde_json::from_str(&text).expect("a schema is JSON");
                    let validator = jsonschema::validator_for(&schema)
                        .unwrap_or_else(|e| panic!("{} is not a schema: {e}", path.display()));
                    (name, validator)
                })
                .collect()
        });
    SCHEMAS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no schema {name:?}"))
}

/// Where `value` breaks `docs/schema/<name>.schema.json`.
fn schema_violations(name: &str, value: &Value) -> Vec<String> {
    schema(name)
        .iter_errors(value)
        .map(|e| format!("{name} schema: {e} at {}", e.instance_path()))
        .collect()
}

fn vector_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Where `got` differs from the subset `want`, as JSON paths.
fn mismatches(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => mismatches(wv, gv, &p, out),
                    None => out.push(format!("{p}: missing")),
                }
            }
        }
        _ if want == got => {}
        _ => out.push(path.to_owned()),
    }
}

/// One result to check: what the policy returned, as JSON (an error as `{"error": ...}`).
fn outcome(result: Result<String, agent_recovery_policy::PolicyError>) -> Value {
    match result {
        Ok(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        Err(e) => serde_json::json!({ "error": e }),
    }
}

/// `got` cut down to the members `want` names, so the two line up.
fn project(want: &Value, got: &Value) -> Value {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => Value::Object(
            w.iter()
                .map(|(k, wv)| {
                    let gv = g
                        .get(k)
                        .map_or(Value::String("<missing>".into()), |gv| project(wv, gv));
                    (k.clone(), gv)
                })
                .collect(),
        ),
        _ => got.clone(),
    }
}

fn side_by_side(want: &Value, got: &Value) -> String {
    let w = serde_json::to_string_pretty(want).unwrap_or_default();
    let g = serde_json::to_string_pretty(&project(want, got)).unwrap_or_default();
    let wl: Vec<&str> = w.lines().collect();
    let gl: Vec<&str> = g.lines().collect();
    let width = wl
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let mut s = format!("    {:width$} | got\n", "expected");
    for i in 0..wl.len().max(gl.len()) {
        let a = wl.get(i).copied().unwrap_or("");
        let b = gl.get(i).copied().unwrap_or("");
        let mark = if a == b { ' ' } else { '*' };
        s.push_str(&format!("  {mark} {a:width$} | {b}\n"));
    }
    s.push_str(&format!("    full result: {got}\n"));
    s
}

/// Check one case; returns failure reports.
fn check(case: &Value) -> Vec<String> {
    let name = case["name"].as_str().unwrap_or("<unnamed>");
    let obs = case["observation"].to_string();
    let ctx = case
        .get("context")
        .map_or("{}".to_owned(), Value::to_string);
    let expect = &case["expect"];
    let mut reports = Vec::new();
    for kind in expect.as_object().into_iter().flatten().map(|(k, _)| k) {
        if !EXPECT_KINDS.contains(&kind.as_str()) {
            reports.push(format!(
                "case {name:?}: unknown expectation kind {kind:?} (this runner checks {EXPECT_KINDS:?})"
            ));
        }
    }
    let mut run = |what: &str, want: &Value, got: Value| {
        let mut diffs = Vec::new();
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
            reports.push(format!(
                "case {name:?}: mismatch at {}\n{}",
                diffs.join(", "),
                side_by_side(want, &got)
            ));
        }
    };
    if let Some(want) = expect.get("envelope") {
        let got = outcome(classify_json(&obs));
        run("envelope", want, got);
    }
    if let Some(want) = expect.get("decision") {
        let got = outcome(decide_json(&obs, &ctx));
        run("decision", want, got);
    }
    if let Some(want) = expect.get("error") {
        let got = if case.get("context").is_some() {
            outcome(decide_json(&obs, &ctx))
        } else {
            outcome(classify_json(&obs))
        };
        let want = serde_json::json!({ "error": want });
        run("", &want, got);
    }
    if !["envelope", "decision", "error"]
        .iter()
        .any(|k| expect.get(k).is_some())
    {
        reports.push(format!(
            "case {name:?}: expect has none of envelope, decision, error"
        ));
    }
    reports
}

#[test]
fn shared_vectors() {
    let files = vector_files();
    assert!(!files.is_empty(), "no vector files in tests/vectors");
    let mut failures = Vec::new();
    let mut total = 0;
    let mut names = std::collections::BTreeSet::new();
    for file in &files {
        let text = fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let cases: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", file.display()));
        let cases = cases
            .as_array()
            .unwrap_or_else(|| panic!("{} must be a JSON array of cases", file.display()));
        for case in cases {
            total += 1;
            let name = case["name"].as_str().unwrap_or("<unnamed>");
            if !names.insert(format!("{}:{name}", file.display())) {
                failures.push(format!(
                    "case {name:?}: duplicate name in {}",
                    file.display()
                ));
            }
            failures.extend(check(case));
        }
    }
    for f in &failures {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {total} vector checks failed (see above)",
        failures.len()
    );
    eprintln!("{total} vector cases passed");
}

/// The checks can fail: an unknown expectation kind and a schema violation
/// are both reported.
#[test]
fn an_unknown_kind_and_a_schema_violation_are_reported() {
    let case = serde_json::json!({
        "name": "typo", "observation": {"source": "http", "status": 400},
        "expect": {"envelop": {"code": "tool.http.400_bad_request"}}
    });
    let reports = check(&case);
    assert!(
        reports
            .iter()
            .any(|r| r.contains("unknown expectation kind \"envelop\"")),
        "{reports:?}"
    );
    let mut envelope: Value = serde_json::from_str(
        &classify_json(r#"{"source":"http","status":400}"#).expect("classifies"),
    )
    .expect("JSON");
    assert!(schema_violations("envelope", &envelope).is_empty());
    envelope["severity"] = Value::String("catastrophic".into());
    assert_eq!(schema_violations("envelope", &envelope).len(), 1);
}

#[test]
fn subset_matching() {
    let got = serde_json::json!({"a": 1, "b": {"c": [1, 2], "d": null}});
    let mut out = Vec::new();
    mismatches(&serde_json::json!({"b": {"c": [1, 2]}}), &got, "", &mut out);
    assert!(out.is_empty());
    mismatches(&serde_json::json!({"b": {"c": [1]}}), &got, "", &mut out);
    mismatches(
        &serde_json::json!({"b": {"d": 0}, "e": 1}),
        &got,
        "",
        &mut out,
    );
    assert_eq!(out, vec![".b.c", ".b.d", ".e: missing"]);
}

/// Every prefix of every vector body (a cut-off response) gives an envelope or a
/// policy error, never a panic, with and without the case's provider hint.
#[test]
fn truncated_bodies_never_panic() {
    let mut runs = 0;
    for file in vector_files() {
        let text = fs::read_to_string(&file).unwrap_or_default();
        let cases: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        for case in cases.as_array().into_iter().flatten() {
            let obs = &case["observation"];
            let body = match obs.get("body") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => continue,
            };
            let cuts = body.char_indices().map(|(i, _)| i).chain([body.len()]);
            for cut in cuts.step_by(3) {
                for hint in [obs.get("provider").cloned(), None] {
                    let mut o = obs.clone();
                    o["body"] = Value::String(body.get(..cut).unwrap_or("").to_owned());
                    if let Some(h) = &hint {
                        o["provider"] = h.clone();
                    } else if let Some(m) = o.as_object_mut() {
                        m.remove("provider");
                    }
                    let _ = classify_json(&o.to_string());
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 0);
}
