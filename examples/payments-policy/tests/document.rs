//! policy.yaml, the payments policy written as a policy document, decides
//! exactly what the compiled policy decides: every envelope and decision,
//! byte for byte, over every shared vector and a grid of contexts (including
//! every input the compiled policy's own tests use), and the same registry,
//! breaker and smoke set. The grid is tests/equivalence/payments.json, which
//! the Rust host, Node and Python suites run through the real components.

use agent_recovery_policy::__private::json_out;
use agent_recovery_policy::RecoveryPolicy;
use agent_recovery_policy::document::Document;
use payments_policy::Payments;
use serde_json::Value;

fn document() -> Document {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policy.yaml");
    let yaml: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Document::from_value(&yaml).unwrap()
}

fn doc_decide(doc: &Document, obs: &str, ctx: &str) -> Result<String, String> {
    let obs = agent_recovery_policy::Observation::from_json_str(obs).map_err(|e| e.message)?;
    let ctx = agent_recovery_policy::Context::from_json_str(ctx).map_err(|e| e.message)?;
    let d = doc.decide(obs, ctx).map_err(|e| e.message)?;
    json_out::decision(&d).map_err(|e| e.message)
}

/// The grid both policies decide on: tests/equivalence/payments.json (its
/// observations and contexts), which the Node and Python suites read too.
fn grid() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/equivalence/payments.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every shared vector's and every example's observation, read from their
/// folders (in name order, as tests/equivalence/generate.py reads them).
fn vector_observations() -> Vec<Value> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in ["tests/vectors", "examples/observations"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            match v {
                Value::Array(cases) => out.extend(cases.iter().map(|c| c["observation"].clone())),
                obs => out.push(obs),
            }
        }
    }
    out
}

/// The grid holds every observation of the vectors as they are now.
#[test]
fn the_equivalence_grid_is_current() {
    let grid = grid();
    let have = grid["observations"].as_array().unwrap();
    let missing: Vec<String> = vector_observations()
        .iter()
        .filter(|o| !have.contains(o))
        .map(Value::to_string)
        .collect();
    assert!(
        missing.is_empty(),
        "tests/equivalence/payments.json lacks {} observations of the vectors; write it again with `python3 tests/equivalence/generate.py`:\n{}",
        missing.len(),
        missing.join("\n")
    );
    assert_eq!(grid["document"], yaml_value());
}

#[test]
fn the_document_decides_what_the_compiled_policy_decides() {
    let doc = document();
    let grid = grid();
    let contexts: Vec<String> = grid["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let mut compared = 0;
    let mut differ = Vec::new();
    for obs in grid["observations"].as_array().unwrap() {
        let obs = obs.to_string();
        let want = Payments::classify_json(&obs).map_err(|e| e.message);
        let got = agent_recovery_policy::Observation::from_json_str(&obs)
            .and_then(|o| doc.classify(&o))
            .and_then(|e| json_out::envelope(&e))
            .map_err(|e| e.message);
        if want != got {
            differ.push(format!(
                "classify {obs}\n  compiled: {want:?}\n  document: {got:?}"
            ));
        }
        for ctx in &contexts {
            let want = Payments::decide_json(&obs, ctx).map_err(|e| e.message);
            let got = doc_decide(&doc, &obs, ctx);
            if want != got {
                differ.push(format!(
                    "decide {obs} {ctx}\n  compiled: {want:?}\n  document: {got:?}"
                ));
            }
            compared += 1;
        }
    }
    assert!(compared > 1000, "only {compared} decisions compared");
    assert!(
        differ.is_empty(),
        "{} of {compared} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn the_document_has_the_compiled_policys_registry_breaker_and_smoke_set() {
    let doc = document();
    assert_eq!(doc.registry().to_json(), Payments::registry().to_json());
    assert!(doc.registry().unknown_codes().is_empty());
    assert_eq!(doc.breaker(), Payments::breaker());
    let a: Value = serde_json::from_str(&doc.smoke_tests).unwrap();
    let b: Value = serde_json::from_str(&Payments::smoke_tests()).unwrap();
    assert_eq!(a, b);
    assert_eq!(doc.name, Payments::info().name);
}

/// The YAML file and its JSON form pin to one digest.
#[test]
fn yaml_and_json_forms_have_one_digest() {
    let doc = document();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policy.yaml");
    let yaml: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let json = serde_json::to_string_pretty(&yaml).unwrap();
    let again = Document::parse(&json).unwrap();
    assert_eq!(again.digest(), doc.digest());
    assert!(doc.digest().starts_with("sha256:") && doc.digest().len() == 71);
}

fn yaml_value() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policy.yaml");
    serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The shared vectors (tests/vectors/documents/payments.json, run by the
/// Rust, Node and Python suites) carry this very document.
#[test]
fn the_shared_vectors_carry_policy_yaml() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vectors/documents/payments.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(v["document"], yaml_value());
}

/// policy.yaml conforms to the published schema, and the schema refuses
/// what the component refuses (an unknown action).
#[test]
fn policy_yaml_conforms_to_the_published_schema() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schema/policy.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let doc = yaml_value();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut bad = doc.clone();
    bad["overrides"]["codes"]["tool.http.409_conflict"]["action"] = Value::from("retyr");
    assert!(!validator.is_valid(&bad));
    assert!(Document::from_value(&bad).is_err());
}
