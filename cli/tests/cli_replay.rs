//! `agent-recovery policy replay LOG`: a decision log written by the real
//! runtime, replayed against the policy that wrote it (nothing changes, exit
//! 0), against a document that changes one code (exactly that decision
//! changes, exit 1), against the payments policy document, with lines
//! logged as digests (skipped), and against a broken log (exit 2, the line named).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_recovery::runtime::{Call, DecisionLog, Outcome, Runtime, Step, VirtualClock};
use serde_json::{Value, json};

use common::cli::{fails, ok, path_str, run, scratch};

fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
        .display()
        .to_string()
}

/// The steps of the logged run: (id, tool, failures before success or the end).
const STEPS: &[(&str, &str, &[&str])] = &[
    (
        "pay",
        "payments.charge",
        &[r#"{"source":"http","status":503}"#],
    ),
    (
        "capture",
        "payments.capture",
        &[r#"{"source":"http","status":409}"#],
    ),
    (
        "lookup",
        "crm.lookup",
        &[r#"{"source":"http","status":400}"#],
    ),
];

/// Writes the decision log of one run of [`STEPS`] on the reference
/// policy (seed 7, a virtual clock) to `name`; `digest`: only the
/// observations' digests.
fn logged(name: &str, digest: bool) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-{name}.jsonl"));
    let _ = std::fs::remove_file(&path);
    let log = DecisionLog::file(&path);
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .seed(7)
        .decision_log(if digest { log.digest_only() } else { log })
        .build()
        .expect("the runtime builds");
    let mut run = runtime.run(&format!("run-{name}")).unwrap();
    for (id, tool, failures) in STEPS {
        let failures: Vec<String> = failures.iter().map(|f| (*f).to_owned()).collect();
        let report = run
            .step(
                Step::new(id, tool, move |call: &Call| {
                    match failures.get(call.attempt as usize - 1) {
                        Some(obs) => Outcome::Failed(obs.clone()),
                        None => Outcome::Ok(Value::Null),
                    }
                })
                .call("tool"),
            )
            .unwrap();
        if report.run_finished {
            break;
        }
    }
    path
}

#[test]
fn the_policy_that_wrote_the_log_changes_nothing() {
    let log = logged("same", false);
    let lines = std::fs::read_to_string(&log).unwrap();
    let n = lines.lines().count();
    // One line per decision: the 503 on `pay` (retried, then ok) and the 409
    // on `capture`, which the reference escalates (no checkpoint), ending the
    // run before `lookup`.
    let steps: Vec<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["step"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(steps, ["pay", "capture"], "one line per decision: {lines}");
    let out = ok(&run(&["policy", "replay", path_str(&log)], b""));
    assert!(
        out.starts_with(&format!(
            "replay of {} against agent-recovery-reference ",
            path_str(&log)
        )),
        "{out}"
    );
    assert!(
        out.ends_with(&format!(
            "{n} decisions: 0 changed, {n} unchanged, 0 skipped"
        )),
        "{out}"
    );
}

/// A document that changes one code's decision: the reference's defaults,
/// and a 409 on a tool call made permanent.
fn changed_document() -> PathBuf {
    let doc = json!({
        "format": 1,
        "name": "reference-409-permanent",
        "version": "1.0.0",
        "overrides": {"codes": {"tool.http.409_conflict": {"class": "permanent", "action": "fail"}}},
        "smoke_tests": [{
            "observation": {"source": "http", "status": 409},
            "context": {"call": "tool", "attempt": 1},
            "expect": {"action": "fail", "code": "tool.http.409_conflict"}
        }]
    });
    scratch("replay-409.json", doc.to_string().as_bytes())
}

#[test]
fn a_changed_document_changes_exactly_its_decisions() {
    let log = logged("changed", false);
    let text = std::fs::read_to_string(&log).unwrap();
    // The one logged decision on the 409, from the log itself.
    let conflicts: Vec<(usize, Value)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, serde_json::from_str::<Value>(l).unwrap()))
        .filter(|(_, l)| l["code"] == "tool.http.409_conflict")
        .collect();
    assert_eq!(conflicts.len(), 1, "{text}");
    let (number, line) = &conflicts[0];
    assert_ne!(
        line["action"], "fail",
        "the reference does not fail a 409: {line}"
    );
    let doc = changed_document();
    let out = run(
        &[
            "policy",
            "replay",
            path_str(&log),
            "--policy",
            path_str(&doc),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("1 of "), "{stderr}");
    let changed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("changed "))
        .collect();
    assert_eq!(
        changed,
        [format!("changed line {number}: run run-changed step capture attempt 1").as_str()],
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("    action: {} -> \"fail\"", line["action"])),
        "{stdout}"
    );
    assert!(
        stdout.contains("    envelope.class: \"state\" -> \"permanent\"")
            || stdout.contains("envelope.class:"),
        "{stdout}"
    );
    let n = text.lines().count();
    assert!(
        stdout.ends_with(&format!(
            "{n} decisions: 1 changed, {} unchanged, 0 skipped\n",
            n - 1
        )),
        "{stdout}"
    );
    // --json: one object per changed decision, then the summary.
    let out = run(
        &[
            "policy",
            "replay",
            path_str(&log),
            "--policy",
            path_str(&doc),
            "--json",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let objects: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 2, "{stdout}");
    assert_eq!(objects[0]["line"], *number);
    assert_eq!(objects[0]["step"], "capture");
    let action = objects[0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"] == "action")
        .expect("the action changed");
    assert_eq!(
        (&action["old"], &action["new"]),
        (&line["action"], &json!("fail"))
    );
    assert_eq!(
        objects[1],
        json!({"summary": {"decisions": n, "changed": 1, "unchanged": n - 1, "skipped": 0}})
    );
}

#[test]
fn the_payments_document_as_the_candidate() {
    let log = logged("payments", false);
    let n = std::fs::read_to_string(&log).unwrap().lines().count();
    let doc = repo("examples/payments-policy/policy.yaml");
    let out = run(&["policy", "replay", path_str(&log), "--policy", &doc], b"");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with(&format!(
            "replay of {} against payments-strict 1.0.0",
            path_str(&log)
        )),
        "{stdout}"
    );
    // payments-strict makes the 409 permanent: its decision fails.
    let capture = stdout
        .split("changed line ")
        .find(|block| block.contains("step capture"))
        .unwrap_or_else(|| panic!("the 409 decision changed: {stdout}"));
    assert!(
        capture.contains("    action: \"") && capture.contains(" -> \"fail\""),
        "{capture}"
    );
    let changed = stdout.lines().filter(|l| l.starts_with("changed ")).count();
    assert!(
        stdout.contains(&format!(
            "{n} decisions: {changed} changed, {} unchanged, 0 skipped",
            n - changed
        )),
        "{stdout}"
    );
}

#[test]
fn lines_logged_as_digests_are_skipped_not_replayed() {
    let log = logged("digest", false);
    let n = std::fs::read_to_string(&log).unwrap().lines().count();
    let log = logged("digest", true);
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), n);
    let doc = changed_document();
    let out = ok(&run(
        &[
            "policy",
            "replay",
            path_str(&log),
            "--policy",
            path_str(&doc),
        ],
        b"",
    ));
    let skipped = out
        .lines()
        .filter(|l| {
            l.starts_with("skipped line ")
                && l.ends_with(": logged with observation: digest (only its sha256)")
        })
        .count();
    assert_eq!(skipped, n, "{out}");
    assert!(
        out.ends_with(&format!(
            "{n} decisions: 0 changed, 0 unchanged, {n} skipped"
        )),
        "{out}"
    );
}

#[test]
fn a_bad_line_is_named() {
    let good = std::fs::read_to_string(logged("bad", false)).unwrap();
    let first = good.lines().next().unwrap();
    let log = scratch(
        "replay-bad.jsonl",
        format!("{first}\n{{\"v\":1,\"run_id\":7}}\n").as_bytes(),
    );
    let err = fails(&run(&["policy", "replay", path_str(&log)], b""), 2);
    assert!(
        err.contains("line 2: `run_id` is missing or not a string"),
        "{err}"
    );
    let log = scratch("replay-notjson.jsonl", b"{\"v\":1,\n");
    let err = fails(&run(&["policy", "replay", path_str(&log)], b""), 2);
    assert!(err.contains("line 1: not JSON"), "{err}");
    let err = fails(
        &run(&["policy", "replay", "/nonexistent/decisions.jsonl"], b""),
        2,
    );
    assert!(
        err.contains("cannot read /nonexistent/decisions.jsonl"),
        "{err}"
    );
}
