//! tests/vectors/documents/*.json through the real component: each file's
//! policy document packed into the reference component, loaded, verified
//! (its smoke set) and run on every case. The Node and Python suites run the
//! same files.

mod common;

use agent_recovery::{ErrorKind, Policy, SwapOptions, SwapStage, pack_document};
use common::handle::{CTX_409, OBS_409, reference_handle};
use serde_json::{Value, json};

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

/// The document of tests/vectors/documents/routing.json: a fallback chain
/// for `llm.openai` and dead-letter owners for `payments.*` and `*`.
fn routing() -> Value {
    let (_, v) = files()
        .into_iter()
        .find(|(f, _)| f.ends_with("routing.json"))
        .unwrap();
    v["document"].clone()
}

const QUOTA: &str = r#"{"source":"http","status":429,"body":{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}}"#;

/// One run through the real runtime under `policy`: an LLM step whose
/// `llm.openai` target is out of quota (the step names no fallbacks), then a
/// payment step whose 503s exhaust its attempts. Returns the targets called,
/// the two outcomes, the dead-letter records and the events.
fn routed_run(policy: Policy, config: Value) -> (Vec<String>, Vec<String>, Vec<Value>, Vec<Value>) {
    use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
    use agent_recovery::store::{MemoryStore, Store};
    use std::sync::{Arc, Mutex};

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let rt = Runtime::builder()
        .policy(Arc::new(policy))
        .store(Arc::clone(&store))
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .seed(7)
        .config_json(config)
        .on_event(move |e| seen.lock().unwrap().push(serde_json::from_str(e).unwrap()))
        .build()
        .unwrap();
    let targets = Arc::new(Mutex::new(Vec::new()));
    let mut run = rt.run("routed").unwrap();
    let called = Arc::clone(&targets);
    let ask = Step::new("ask", "llm.chat", move |call: &Call| {
        called.lock().unwrap().push(call.target.clone());
        match call.target.as_str() {
            "llm.openai" => Outcome::Failed(QUOTA.to_owned()),
            _ => Outcome::Ok(json!({"text": "hello"})),
        }
    })
    .call("llm")
    .target("llm.openai");
    let mut outcomes = vec![run.step(ask).unwrap().outcome];
    if outcomes[0] == "ok" {
        let pay = Step::new("pay", "payments.charge", |_: &Call| {
            Outcome::Failed(r#"{"source":"http","status":503}"#.to_owned())
        })
        .call("tool");
        outcomes.push(run.step(pay).unwrap().outcome);
    }
    let records = store
        .read("agent-recovery/dead-letter", 0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(_, r)| serde_json::from_str(&r).unwrap())
        .collect();
    let targets = targets.lock().unwrap().clone();
    let events = events.lock().unwrap().clone();
    (targets, outcomes, records, events)
}

/// A document's fallback chain makes the loop fall back from a step that
/// names none, and its dead-letter entry for the step's tool lands in the
/// record (owner, runbook) and sets the depth threshold; the reference, on
/// the same run, escalates at the first step.
#[test]
fn a_document_chain_makes_the_loop_fall_back_and_its_owner_lands_in_the_dead_letter_record() {
    let config = json!({"policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 2}}});
    let packed = pack_document(&routing().to_string()).unwrap();
    let (targets, outcomes, records, events) =
        routed_run(Policy::from_bytes(&packed.bytes).unwrap(), config.clone());
    assert_eq!(targets, ["llm.openai", "llm.anthropic"]);
    assert_eq!(outcomes, ["ok", "dead_lettered"]);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["tool"], "payments.charge");
    assert_eq!(records[0]["owner"], "payments-oncall");
    assert_eq!(
        records[0]["runbook"],
        "https://runbooks.example/payments-dlq"
    );
    let fallback = events
        .iter()
        .find(|e| e["event"] == "fallback")
        .expect("a fallback event");
    assert_eq!(fallback["target"], "llm.anthropic");
    // The document's depth threshold (10) is not crossed by one record.
    assert!(events.iter().all(|e| e["event"] != "dead_letter_depth"));

    // The reference policy: no chain, so the quota error escalates.
    let (targets, outcomes, records, _) = routed_run(Policy::reference().unwrap(), config.clone());
    assert_eq!(targets, ["llm.openai"]);
    assert_eq!(outcomes, ["escalated"]);
    assert!(records.is_empty());
}

/// The run configuration's `dead_letter` members win over the document's,
/// member by member; the document's depth threshold applies when the run
/// sets none.
#[test]
fn the_run_configurations_dead_letter_members_win_over_the_documents() {
    let mut doc = routing();
    doc["dead_letters"]["payments.*"]["depth_threshold"] = json!(1);
    let packed = pack_document(&doc.to_string()).unwrap();
    let config = json!({"policy": {"tool": {"base_ms": 1, "cap_ms": 4, "max_attempts": 2}},
                        "dead_letter": {"owner": "run-owner"}});
    let (_, outcomes, records, events) =
        routed_run(Policy::from_bytes(&packed.bytes).unwrap(), config);
    assert_eq!(outcomes, ["ok", "dead_lettered"]);
    assert_eq!(records[0]["owner"], "run-owner");
    assert_eq!(
        records[0]["runbook"],
        "https://runbooks.example/payments-dlq"
    );
    let depth = events
        .iter()
        .find(|e| e["event"] == "dead_letter_depth")
        .expect("the document's threshold 1 is crossed by the first record");
    assert_eq!(depth["threshold"], 1);
    assert_eq!(depth["depth"], 1);
}
