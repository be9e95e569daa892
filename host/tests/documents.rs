//! tests/vectors/documents/*.json through the real component: each file's
//! policy document packed into the reference component, loaded, verified
//! (its smoke set) and run on every case. The Node and Python suites run the
//! same files.

mod common;

use agent_recovery::{ErrorKind, Policy, SwapOptions, SwapStage, pack_document};
use common::handle::{CTX_409, OBS_409, reference_handle};
use serde_json::Value;

fn subset(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => subset(wv, gv, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}: expected {wv}, got nothing")),
                }
            }
        }
        (w, g) if w == g => {}
        (w, g) => out.push(format!("{path}: expected {w}, got {g}")),
    }
}

fn files() -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/documents");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.display().to_string(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_document_vector_holds_through_the_component() {
    let files = files();
    assert!(!files.is_empty(), "no tests/vectors/documents/*.json");
    let mut failures = Vec::new();
    for (file, v) in files {
        let packed = pack_document(&v["document"].to_string()).unwrap();
        let policy = Policy::from_bytes(&packed.bytes).unwrap();
        let info = policy.verify().unwrap().info;
        assert_eq!(info.name, v["document"]["name"], "{file}");
        assert!(
            info.description
                .ends_with(&format!("(policy document {})", packed.digest)),
            "{}",
            info.description
        );
        for c in v["cases"].as_array().unwrap() {
            let obs = c["observation"].to_string();
            let ctx = c
                .get("context")
                .map_or_else(|| "{}".to_owned(), Value::to_string);
            let mut diff = Vec::new();
            if let Some(want) = c["expect"].get("envelope") {
                let got: Value =
                    serde_json::from_str(&policy.classify_json(&obs).unwrap()).unwrap();
                subset(want, &got, "envelope", &mut diff);
            }
            match (c["expect"].get("error"), policy.decide_json(&obs, &ctx)) {
                (None, Ok(text)) => {
                    let got: Value = serde_json::from_str(&text).unwrap();
                    if let Some(want) = c["expect"].get("decision") {
                        subset(want, &got, "decision", &mut diff);
                    }
                }
                (Some(want), Err(e)) => {
                    let kind = match e.kind() {
                        ErrorKind::Policy(k) => k.as_str().replace('-', "_"),
                        other => format!("{other:?}"),
                    };
                    subset(&want["kind"], &Value::from(kind), "error.kind", &mut diff);
                }
                (Some(want), Ok(text)) => diff.push(format!("expected error {want}, got {text}")),
                (None, Err(e)) => diff.push(format!("unexpected error {e}")),
            }
            if !diff.is_empty() {
                failures.push(format!("{file}: {}\n  {}", c["name"], diff.join("\n  ")));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A document that does not validate is refused before it is packed, with
/// the bad path named.
#[test]
fn an_invalid_document_is_refused_with_its_path() {
    let e = pack_document(
        r#"{"format":1,"name":"x","version":"1.0.0","overrides":{"codes":{"llm.http.409_conflict":{"action":"retyr"}}},
            "smoke_tests":[{"observation":{"source":"http","status":503},"expect":{"action":"retry"}}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.message().contains(r#"overrides.codes["llm.http.409_conflict"].action: unknown action "retyr"; expected one of retry"#),
        "{}",
        e.message()
    );
}

/// The packed component's registry carries the document's overrides.
#[test]
fn the_registry_reflects_the_overrides() {
    let (_, v) = files()
        .into_iter()
        .find(|(f, _)| f.ends_with("payments.json"))
        .unwrap();
    let packed = pack_document(&v["document"].to_string()).unwrap();
    let policy = Policy::from_bytes(&packed.bytes).unwrap();
    let codes: Vec<Value> = serde_json::from_str(&policy.registry_json().unwrap()).unwrap();
    let row = codes
        .iter()
        .find(|c| c["code"] == "tool.http.409_conflict")
        .unwrap();
    assert_eq!(row["class"], "permanent");
    assert_eq!(row["retryable"], false);
    assert_eq!(
        row["recovery"],
        v["document"]["overrides"]["codes"]["tool.http.409_conflict"]["hint"]
    );
    let reference = Policy::reference().unwrap();
    let before: Vec<Value> = serde_json::from_str(&reference.registry_json().unwrap()).unwrap();
    let row = before
        .iter()
        .find(|c| c["code"] == "tool.http.409_conflict")
        .unwrap();
    assert_ne!(
        row["class"], "permanent",
        "the reference's 409 is not permanent"
    );
}

/// A packed document hot-swaps through the validated swap like any
/// component: verified by its smoke set, pinned by its sha256; a document
/// that does not validate is refused at the verify stage and the active
/// policy stays.
#[test]
fn a_packed_document_hot_swaps_and_a_bad_one_is_refused() {
    let (_, v) = files()
        .into_iter()
        .find(|(f, _)| f.ends_with("payments.json"))
        .unwrap();
    let (handle, _) = reference_handle();
    let before: serde_json::Value =
        serde_json::from_str(&handle.decide_json(OBS_409, CTX_409).unwrap().json).unwrap();
    assert_ne!(
        before["action"], "fail",
        "the reference does not fail a 409"
    );
    let packed = pack_document(&v["document"].to_string()).unwrap();
    let sha = {
        let policy = Policy::from_bytes(&packed.bytes).unwrap();
        policy.sha256()
    };
    let id = handle
        .swap_bytes(&packed.bytes, &SwapOptions::default().sha256(&sha).unwrap())
        .unwrap();
    assert_eq!(id.name, "payments-strict");
    let after: serde_json::Value =
        serde_json::from_str(&handle.decide_json(OBS_409, CTX_409).unwrap().json).unwrap();
    assert_eq!(after["action"], "fail");
    assert_eq!(after["envelope"]["class"], "permanent");

    // A slot holding a document that does not validate (written by hand,
    // bypassing pack_document's check) fails verification, path named.
    let bad = r#"{"format":1,"name":"x","version":"1.0.0","overrides":{"codes":{"llm.http.409_conflict":{"action":"retyr"}}},"smoke_tests":[{"observation":{"source":"http","status":503},"expect":{"action":"retry"}}]}"#;
    let mut bytes = Policy::reference_bytes().to_vec();
    let marker = agent_recovery_policy::document::SLOT_MARKER;
    let at = bytes.windows(32).position(|w| w == marker).unwrap() + 32;
    bytes[at..at + 4].copy_from_slice(&(bad.len() as u32).to_le_bytes());
    bytes[at + 4..at + 4 + bad.len()].copy_from_slice(bad.as_bytes());
    let e = handle
        .swap_bytes(&bytes, &SwapOptions::default())
        .unwrap_err();
    assert_eq!(e.stage(), SwapStage::Verify);
    assert!(
        e.to_string()
            .contains(r#"overrides.codes[\"llm.http.409_conflict\"].action: unknown action"#)
            || e.to_string()
                .contains(r#"overrides.codes["llm.http.409_conflict"].action: unknown action"#),
        "{e}"
    );
    assert_eq!(handle.active().id().name, "payments-strict");
}

/// The payments policy document, packed into the reference component and
/// loaded through the real loader, decides what the compiled payments
/// component decides, byte for byte, on every observation and context of
/// tests/equivalence/payments.json (the Node and Python suites run the same
/// grid). Both components are asked live: the grid holds no decisions.
#[test]
fn the_payments_document_decides_what_the_compiled_payments_component_decides() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/equivalence/payments.json");
    let grid: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let packed = pack_document(&grid["document"].to_string()).unwrap();
    let document = Policy::from_bytes(&packed.bytes).unwrap();
    assert_eq!(document.verify().unwrap().info.name, "payments-strict");
    let compiled = Policy::from_file(common::handle::payments_wasm()).unwrap();
    let answer = |r: agent_recovery::Result<String>| {
        r.map_err(|e| format!("{:?}: {}", e.kind(), e.message()))
    };
    let contexts: Vec<String> = grid["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let (mut decisions, mut differ) = (0, Vec::new());
    for obs in grid["observations"].as_array().unwrap() {
        let obs = obs.to_string();
        let (want, got) = (
            answer(compiled.classify_json(&obs)),
            answer(document.classify_json(&obs)),
        );
        if want != got {
            differ.push(format!(
                "classify {obs}\n  compiled: {want:?}\n  document: {got:?}"
            ));
        }
        for ctx in &contexts {
            let (want, got) = (
                answer(compiled.decide_json(&obs, ctx)),
                answer(document.decide_json(&obs, ctx)),
            );
            if want != got {
                differ.push(format!(
                    "decide {obs} {ctx}\n  compiled: {want:?}\n  document: {got:?}"
                ));
            }
            decisions += 1;
        }
    }
    assert!(decisions > 5000, "only {decisions} decisions compared");
    assert!(
        differ.is_empty(),
        "{} of {decisions} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
