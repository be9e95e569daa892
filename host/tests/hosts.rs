//! The host conformance vectors (`tests/hosts/conformance.json`), run by the
//! Rust host. Node (`node/test/hosts.test.mjs`) and Python
//! (`python/tests/test_hosts.py`) run the same file; docs/hosts.md documents
//! the rules and the error vocabulary (`ErrorKind::as_str`).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use agent_recovery::{Loader, PolicyHandle, SwapOptions};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

const HOST: &str = "rust";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `artifacts.json` next to the policies host/build.rs built.
fn artifacts() -> Map<String, Value> {
    let payments = Path::new(env!("AGENT_RECOVERY_PAYMENTS_WASM"));
    let manifest = payments
        .ancestors()
        .nth(3)
        .expect("<policies>/wasm32-wasip2/release/x.wasm")
        .join("artifacts.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest.display()));
    match serde_json::from_str(&text).expect("artifacts.json is JSON") {
        Value::Object(map) => map,
        other => panic!("artifacts.json is not an object: {other}"),
    }
}

fn vectors() -> Value {
    let path = repo().join("tests/hosts/conformance.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("conformance.json is JSON")
}

/// The case as this host runs it: `hosts.rust` overrides its members.
fn for_this_host(case: &Value) -> Map<String, Value> {
    let mut out = case.as_object().cloned().expect("a case is an object");
    if let Some(Value::Object(over)) = case.pointer(&format!("/hosts/{HOST}")) {
        for (k, v) in over {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

fn component_bytes(case: &Map<String, Value>, artifacts: &Map<String, Value>) -> Vec<u8> {
    let name = case["component"].as_str().expect("component is a string");
    let path = artifacts
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{name} is not in artifacts.json; build the host"));
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    match case.get("bytes").and_then(Value::as_str) {
        None => bytes,
        Some("truncate-half") => bytes[..bytes.len() / 2].to_vec(),
        Some("not-wasm") => b"<html>".to_vec(),
        Some(other) => panic!("unknown bytes transform {other:?}"),
    }
}

fn pin(template: &str, bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    template
        .replace("{sha256}", &hex)
        .replace("{SHA256}", &hex.to_uppercase())
}

fn loader() -> Loader {
    Loader::default().cache_dir(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hosts-cache"))
}

/// One handle for every load case (a refused candidate leaves it unchanged),
/// with a compiled-component cache: most cases load the same bytes.
fn handle() -> &'static PolicyHandle {
    static HANDLE: LazyLock<PolicyHandle> = LazyLock::new(|| {
        PolicyHandle::builder()
            .loader(loader())
            .reference()
            .expect("the reference loads")
    });
    &HANDLE
}

/// `{"ok": true}` or `{"error": "<code>"}` for validating the candidate.
fn load_outcome(case: &Map<String, Value>, artifacts: &Map<String, Value>) -> Value {
    let bytes = component_bytes(case, artifacts);
    let mut options = SwapOptions::default();
    if let Some(template) = case.get("pin").and_then(Value::as_str) {
        match options.sha256(&pin(template, &bytes)) {
            Ok(pinned) => options = pinned,
            Err(e) => return serde_json::json!({ "error": e.kind().as_str() }),
        }
    }
    match handle().swap_bytes(&bytes, &options) {
        Ok(_) => serde_json::json!({ "ok": true }),
        Err(e) => serde_json::json!({ "error": e.kind().as_str() }),
    }
}

fn observation(case: &Map<String, Value>) -> String {
    if let Some(size) = case.get("observation_bytes").and_then(Value::as_u64) {
        let head = r#"{"source":"http","status":400,"body":""#;
        let pad = usize::try_from(size).expect("size fits") - head.len() - 2;
        return format!("{head}{}\"}}", "x".repeat(pad));
    }
    case["observation"]
        .as_str()
        .expect("observation is JSON text")
        .to_owned()
}

/// `{"error": "<code>"}`, or `{"action", "code"}` of the decision.
fn call_outcome(case: &Map<String, Value>, artifacts: &Map<String, Value>) -> Value {
    let bytes = component_bytes(case, artifacts);
    let policy = loader()
        .bytes(&bytes)
        .expect("the component loads unchecked");
    assert_eq!(case["op"], "decide", "unknown op");
    match policy.decide_json(&observation(case), "{}") {
        Ok(text) => {
            let decision: Value = serde_json::from_str(&text).expect("checked output is JSON");
            serde_json::json!({ "action": decision["action"], "code": decision["envelope"]["code"] })
        }
        Err(e) => serde_json::json!({ "error": e.kind().as_str() }),
    }
}

/// Compares every expectation kind the case names; an unknown one fails.
fn check(kinds: &[&str], expect: &Value, got: &Value, name: &str, failures: &mut Vec<String>) {
    let expect = expect.as_object().expect("expect is an object");
    for (kind, want) in expect {
        assert!(
            kinds.contains(&kind.as_str()),
            "{name}: unknown expectation kind {kind:?} (this runner checks {kinds:?})"
        );
        if got.get(kind) != Some(want) {
            failures.push(format!("{name}: expected {kind} {want}, got {got}"));
        }
    }
}

#[test]
fn host_conformance_vectors() {
    let artifacts = artifacts();
    let vectors = vectors();
    let mut failures = Vec::new();
    let mut ran = 0;
    for case in vectors["load"].as_array().expect("load cases") {
        let case = for_this_host(case);
        let name = format!("load: {}", case["name"]);
        let got = load_outcome(&case, &artifacts);
        check(
            &["ok", "error"],
            &case["expect"],
            &got,
            &name,
            &mut failures,
        );
        ran += 1;
    }
    for case in vectors["call"].as_array().expect("call cases") {
        let case = for_this_host(case);
        let name = format!("call: {}", case["name"]);
        let got = call_outcome(&case, &artifacts);
        check(
            &["error", "action", "code"],
            &case["expect"],
            &got,
            &name,
            &mut failures,
        );
        ran += 1;
    }
    assert!(ran >= 25, "only {ran} cases ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
