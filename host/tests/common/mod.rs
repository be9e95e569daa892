//! Shared helpers of the host tests: one reference policy per test binary,
//! the shared vectors, and the subset matching and side-by-side report of
//! `tests/vectors/`.

#![allow(dead_code, reason = "each test binary uses a different part")]

pub mod handle;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use agent_recovery::Policy;
use serde_json::Value;

/// The embedded reference policy, compiled once per test binary.
pub fn policy() -> &'static Policy {
    static POLICY: LazyLock<Policy> =
        LazyLock::new(|| Policy::reference().expect("the reference policy loads"));
    &POLICY
}

/// One case of a vector file, with the file it came from.
pub struct Case {
    pub file: String,
    pub value: Value,
}

impl Case {
    pub fn name(&self) -> String {
        let name = self.value["name"].as_str().unwrap_or("<unnamed>");
        format!("{}: {name}", self.file)
    }

    pub fn observation(&self) -> String {
        self.value["observation"].to_string()
    }

    pub fn context(&self) -> Option<String> {
        self.value.get("context").map(Value::to_string)
    }

    pub fn expect(&self, what: &str) -> Option<&Value> {
        self.value.get("expect").and_then(|e| e.get(what))
    }
}

/// `tests/vectors/*.json`, sorted.
pub fn vector_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// The expectation kinds a vector case may name; the runners check every one
/// and fail on any other (a typo must not pass unchecked).
pub const EXPECT_KINDS: [&str; 3] = ["envelope", "decision", "error"];

/// `docs/schema/<name>.schema.json` (`envelope`, `decision`, `code-info`),
/// compiled once per test binary by the `jsonschema` crate (draft 2020-12).
pub fn schema(name: &str) -> &'static jsonschema::Validator {
    static SCHEMAS: LazyLock<Vec<(&'static str, jsonschema::Validator)>> = LazyLock::new(|| {
        ["envelope", "decision", "code-info"]
            .into_iter()
            .map(|name| {
                let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join(format!("../docs/schema/{name}.schema.json"));
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let schema: Value = serde_json::from_str(&text).expect("a schema is JSON");
                let validator = jsonschema::validator_for(&schema)
                    .unwrap_or_else(|e| panic!("{} is not a valid schema: {e}", path.display()));
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

/// Where `value` breaks `docs/schema/<name>.schema.json`, one line per error.
pub fn schema_violations(name: &str, value: &Value) -> Vec<String> {
    schema(name)
        .iter_errors(value)
        .map(|e| format!("{name} schema: {} at {}", e, e.instance_path()))
        .collect()
}

/// Every case of every vector file.
pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for path in vector_files() {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        let Value::Array(items) = value else {
            panic!("{} is not a JSON array of cases", path.display());
        };
        let file = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        cases.extend(items.into_iter().map(|value| Case {
            file: file.clone(),
            value,
        }));
    }
    cases
}

/// Where `got` differs from the subset `want`, as paths: objects match member
/// by member, recursively; arrays and scalars must be equal.
pub fn mismatches(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => mismatches(wv, gv, &p, out),
                    None => out.push(format!("{p} (missing)")),
                }
            }
        }
        _ if want == got => {}
        _ => out.push(path.to_owned()),
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

/// Expected and got, side by side, differing lines marked with `*`.
pub fn side_by_side(want: &Value, got: &Value) -> String {
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

/// The result of a host call as JSON; a policy error becomes
/// `{"error": {"kind": "invalid_json", "message": ...}}` like the guest's.
pub fn outcome(result: agent_recovery::Result<String>) -> Value {
    match result {
        Ok(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        Err(e) => {
            let kind = match e.kind() {
                agent_recovery::ErrorKind::Policy(k) => k.as_str().replace('-', "_"),
                other => format!("host:{}", other.as_str()),
            };
            serde_json::json!({ "error": { "kind": kind, "message": e.message() } })
        }
    }
}
