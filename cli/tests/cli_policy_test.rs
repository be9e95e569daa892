//! `agent-recovery test` and policy documents on the command line: the
//! repository's own policy tests pass; the payments tests pass for the
//! compiled payments policy and for its document alike; a broken
//! expectation exits 1 with a readable diff; `policy pack` writes a
//! component `check` accepts.

mod common;

use std::path::Path;

use serde_json::Value;

use common::cli::{fails, ok, path_str, run, scratch};
use common::fixtures::payments_wasm;

fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
        .display()
        .to_string()
}

#[test]
fn the_repositorys_policy_tests_pass_on_the_reference() {
    let out = ok(&run(&["test", &repo("tests/policy")], b""));
    assert!(out.contains("pass a 400 is permanent"), "{out}");
    assert!(
        out.ends_with("6 passed, 0 failed, 6 cases in 1 files"),
        "{out}"
    );
    assert!(out.contains("coverage: 5 of "), "{out}");
}

#[test]
fn the_payments_tests_pass_for_the_document_and_the_compiled_policy() {
    let dir = repo("examples/payments-policy/tests/policy");
    let doc = repo("examples/payments-policy/policy.yaml");
    let out = ok(&run(&["test", &dir, "--policy", &doc], b""));
    assert!(out.starts_with("policy payments-strict 1.0.0"), "{out}");
    assert!(
        out.contains("coverage: 3 of 3 overridden codes tested"),
        "{out}"
    );
    assert!(
        out.ends_with("8 passed, 0 failed, 8 cases in 1 files"),
        "{out}"
    );
    let wasm = payments_wasm();
    let out = ok(&run(&["test", &dir, "--policy", path_str(&wasm)], b""));
    assert!(
        out.ends_with("8 passed, 0 failed, 8 cases in 1 files"),
        "{out}"
    );
    // The reference is not the payments policy: the same tests fail on it.
    let out = run(&["test", &dir], b"");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_broken_expectation_exits_1_with_a_diff() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-broken-policy-tests");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("broken.yaml"),
        "- name: a 503 is permanent (it is not)\n  observation: { source: http, status: 503 }\n  context: { attempt: 1, seed: 7 }\n  expect: { action: fail, class: permanent, decision: { max_attempts: 5 } }\n- name: a 400 fails\n  observation: { source: http, status: 400 }\n  expect: { action: fail }\n",
    )
    .unwrap();
    let out = run(&["test", path_str(&dir)], b"");
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let want = "FAIL a 503 is permanent (it is not)\n    action: expected \"fail\", got \"retry\"\n    class: expected \"permanent\", got \"transient\"\n";
    assert!(stdout.contains(want), "{stdout}");
    assert!(
        !stdout.contains("max_attempts"),
        "the matching member is not listed: {stdout}"
    );
    assert!(stdout.contains("pass a 400 fails"), "{stdout}");
    assert!(
        stdout.ends_with("1 passed, 1 failed, 2 cases in 1 files\n"),
        "{stdout}"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        "agent-recovery: 1 of 2 policy tests failed; see the report above\n"
    );
}

#[test]
fn a_bad_test_file_is_a_usage_error() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-bad-policy-tests");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.json"),
        r#"{"observation":{"source":"http","status":503},"expect":{"actoin":"retry"}}"#,
    )
    .unwrap();
    let err = fails(&run(&["test", path_str(&dir)], b""), 2);
    assert!(err.contains(r#"unknown expect member "actoin""#), "{err}");
}

#[test]
fn policy_pack_writes_a_component_check_accepts() {
    let out_wasm = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-payments-doc.wasm");
    let doc = repo("examples/payments-policy/policy.yaml");
    let packed: Value = serde_json::from_str(&ok(&run(
        &["policy", "pack", &doc, "-o", path_str(&out_wasm)],
        b"",
    )))
    .unwrap();
    assert_eq!(packed["name"], "payments-strict");
    assert!(packed["document"].as_str().unwrap().starts_with("sha256:"));
    let checked: Value =
        serde_json::from_str(&ok(&run(&["check", path_str(&out_wasm)], b""))).unwrap();
    assert_eq!(checked["sha256"], packed["sha256"]);
    assert_eq!(checked["smoke_tests"], 4);
    // A document with a typo is refused with its path named (exit 2).
    let bad = scratch(
        "typo.json",
        br#"{"format":1,"name":"x","version":"1.0.0","overrides":{"codes":{"llm.http.409_conflict":{"action":"retyr"}}},"smoke_tests":[{"observation":{"source":"http","status":503},"expect":{"action":"retry"}}]}"#,
    );
    let err = fails(&run(&["--policy", path_str(&bad), "registry"], b""), 2);
    assert!(
        err.contains(r#"overrides.codes["llm.http.409_conflict"].action: unknown action "retyr"; expected one of retry"#),
        "{err}"
    );
    // The registry a document publishes carries its overrides.
    let reg: Vec<Value> =
        serde_json::from_str(&ok(&run(&["--policy", &doc, "registry"], b""))).unwrap();
    let row = reg
        .iter()
        .find(|r| r["code"] == "llm.http.409_conflict")
        .unwrap();
    assert_eq!(row["class"], "permanent");
}
