//! The `agent-recovery` binary: each command's output and exit status.
//!
//! Exit 0 ok, 2 bad input or usage, 1 the policy failed. Every error is one
//! line on stderr, prefixed `agent-recovery: `, without "panicked".

mod common;

use std::process::Command;

use serde_json::Value;

use common::cli::{OBS_429, fails, ok, path_str, run, scratch, stdout};
use common::policy;

#[test]
fn classify_prints_the_component_output_unchanged() {
    let expected = policy().classify_json(OBS_429).expect("classifies");
    assert_eq!(ok(&run(&["classify"], OBS_429.as_bytes())), expected);
    assert_eq!(ok(&run(&["classify", "-"], OBS_429.as_bytes())), expected);
    let file = scratch("obs429.json", OBS_429.as_bytes());
    assert_eq!(ok(&run(&["classify", path_str(&file)], b"")), expected);
}

#[test]
fn decide_builds_the_context_from_flags_and_flags_win() {
    let ctx = r#"{"call":"tool","attempt":1,"seed":7,"elapsed_ms":0}"#;
    let expected = policy().decide_json(OBS_429, ctx).expect("decides");
    let out = run(
        &[
            "decide",
            "--call",
            "tool",
            "--attempt",
            "1",
            "--seed",
            "7",
            "--elapsed-ms",
            "0",
        ],
        OBS_429.as_bytes(),
    );
    assert_eq!(ok(&out), expected);

    // The observation's own context says attempt 5 (exhausted for llm); the flag says 1.
    let obs = r#"{"source":"http","status":503,"context":{"call":"llm","attempt":5}}"#;
    let from_obs: Value = serde_json::from_str(&ok(&run(&["decide"], obs.as_bytes()))).unwrap();
    assert_eq!(from_obs["attempt"], 5);
    assert_ne!(from_obs["action"], "retry");
    let flagged: Value = serde_json::from_str(&ok(&run(
        &["decide", "--attempt=1", "--seed=3"],
        obs.as_bytes(),
    )))
    .unwrap();
    assert_eq!(flagged["attempt"], 1);
    assert_eq!(flagged["action"], "retry");
    assert_eq!(flagged["envelope"]["code"], "llm.http.503_unavailable");
}

#[test]
fn config_file_is_merged_into_the_decision_context() {
    let obs = r#"{"source":"http","status":503}"#;
    let args = ["decide", "--call", "tool", "--attempt", "2", "--seed", "1"];
    let default: Value = serde_json::from_str(&ok(&run(&args, obs.as_bytes()))).unwrap();
    assert_eq!(
        default["action"], "retry",
        "tool allows 5 attempts by default"
    );

    let config = scratch("config-2.json", br#"{"tool":{"max_attempts":2}}"#);
    let mut with_config = vec!["--config", path_str(&config)];
    with_config.extend(args);
    let limited: Value = serde_json::from_str(&ok(&run(&with_config, obs.as_bytes()))).unwrap();
    assert_eq!(limited["max_attempts"], 2);
    assert_ne!(limited["action"], "retry");

    let bad = scratch(
        "config-bad.json",
        br#"{"tool":{"max_attempts":2},"nope":1}"#,
    );
    let mut bad_args = vec!["--config", path_str(&bad)];
    bad_args.extend(args);
    fails(&run(&bad_args, obs.as_bytes()), 2);
    let not_json = scratch("config-not-json.json", b"max_attempts = 2");
    let err = fails(
        &run(&["decide", "--config", path_str(&not_json)], obs.as_bytes()),
        2,
    );
    assert!(err.contains("config-not-json.json"), "{err}");
}

#[test]
fn backoff_prints_the_delay_as_json() {
    let out: Value = serde_json::from_str(&ok(&run(
        &["backoff", "--call", "llm", "--attempt", "3", "--seed", "9"],
        b"",
    )))
    .unwrap();
    let expected = policy()
        .backoff(agent_recovery::types::CallKind::Llm, 3, Some(9), None)
        .expect("delay");
    assert_eq!(out, serde_json::json!({ "delay_ms": expected }));
    assert!(
        expected <= 4_000,
        "llm base 1000 ms, attempt 3: at most 4000 ms"
    );

    let config = scratch(
        "backoff-config.json",
        br#"{"tool":{"base_ms":10,"cap_ms":15}}"#,
    );
    for seed in 0..20 {
        let seed = seed.to_string();
        let args = [
            "--config",
            path_str(&config),
            "backoff",
            "--call",
            "tool",
            "--attempt",
            "5",
            "--seed",
            &seed,
        ];
        let out: Value = serde_json::from_str(&ok(&run(&args, b""))).unwrap();
        assert!(
            out["delay_ms"].as_u64().unwrap() <= 15,
            "capped at 15: {out}"
        );
    }
}

#[test]
fn key_is_stable_and_ignores_key_order() {
    let a = ok(&run(
        &[
            "key",
            "--run-id",
            "r1",
            "--step-id",
            "s1",
            "--tool",
            "search",
            "--args",
            r#"{"q":"x","n":1}"#,
        ],
        b"",
    ));
    let b = ok(&run(
        &[
            "key",
            "--run-id",
            "r1",
            "--step-id",
            "s1",
            "--tool",
            "search",
            "--args",
            r#"{"n":1, "q":"x"}"#,
        ],
        b"",
    ));
    assert_eq!(a, b);
    let key: Value = serde_json::from_str(&a).unwrap();
    let expected = policy()
        .key("r1", "s1", "search", r#"{"q":"x","n":1}"#)
        .unwrap();
    assert_eq!(key["key"], expected.as_str());
    let c = ok(&run(
        &[
            "key",
            "--run-id",
            "r2",
            "--step-id",
            "s1",
            "--tool",
            "search",
            "--args",
            r#"{"q":"x","n":1}"#,
        ],
        b"",
    ));
    assert_ne!(a, c, "the run id is part of the key");
    fails(
        &run(
            &[
                "key",
                "--run-id",
                "r",
                "--step-id",
                "s",
                "--tool",
                "t",
                "--args",
                "{oops",
            ],
            b"",
        ),
        2,
    );
    let err = fails(&run(&["key", "--run-id", "r"], b""), 2);
    assert!(err.contains("--step-id"), "{err}");
}

#[test]
fn registry_in_both_formats() {
    assert_eq!(
        ok(&run(&["registry"], b"")),
        policy().registry_json().unwrap()
    );
    assert_eq!(
        ok(&run(&["registry", "--format", "json"], b"")),
        policy().registry_json().unwrap()
    );
    // Markdown is printed unchanged: it is docs/errors.md byte for byte.
    let out = run(&["registry", "--format", "markdown"], b"");
    assert_eq!(out.status.code(), Some(0));
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md")).unwrap();
    assert!(
        stdout(&out) == committed,
        "registry --format markdown differs from docs/errors.md"
    );
    let err = fails(&run(&["registry", "--format", "xml"], b""), 2);
    assert!(err.contains("'xml'"), "{err}");
}

#[test]
fn check_validates_a_component() {
    let reference = scratch("reference.wasm", agent_recovery::Policy::reference_bytes());
    let out: Value =
        serde_json::from_str(&ok(&run(&["check", path_str(&reference)], b""))).unwrap();
    assert_eq!(out["name"], "agent-recovery-reference");
    assert_eq!(out["contract"], "0.1.0");
    assert_eq!(out["world"], agent_recovery::WORLD);
    assert_eq!(out["sha256"], policy().sha256().as_str());
    assert!(out["smoke_tests"].as_u64().unwrap() > 0);

    // Not a component at all, or a core module: bad input (2).
    let junk = scratch("junk.wasm", b"hello");
    let err = fails(&run(&["check", path_str(&junk)], b""), 2);
    assert!(
        err.contains("junk.wasm") && err.contains("not a WebAssembly binary"),
        "{err}"
    );
    let core = scratch("core.wasm", b"\0asm\x01\0\0\0");
    fails(&run(&["check", path_str(&core)], b""), 2);
    fails(&run(&["check", "/no/such.wasm"], b""), 2);
    fails(&run(&["check"], b""), 2);

    // A valid component that does not implement the world: the policy fails (1).
    let empty = scratch("empty-component.wasm", b"\0asm\x0d\0\x01\0");
    let err = fails(&run(&["check", path_str(&empty)], b""), 1);
    assert!(err.contains("does not implement"), "{err}");
    fails(
        &run(
            &["--policy", path_str(&empty), "classify"],
            OBS_429.as_bytes(),
        ),
        1,
    );
}

#[test]
fn policy_flag_loads_another_component() {
    let copy = scratch(
        "policy-copy.wasm",
        agent_recovery::Policy::reference_bytes(),
    );
    let expected = policy().classify_json(OBS_429).unwrap();
    assert_eq!(
        ok(&run(
            &["--policy", path_str(&copy), "classify"],
            OBS_429.as_bytes()
        )),
        expected
    );
    let err = fails(
        &run(
            &["classify", "--policy", "/no/such.wasm"],
            OBS_429.as_bytes(),
        ),
        2,
    );
    assert!(err.contains("/no/such.wasm"), "{err}");
}

#[test]
fn help_and_version() {
    // `--help`, `-h`, `--version` and `-V` work for the program and for
    // every subcommand, on stdout, exit 0.
    let version = concat!("agent-recovery ", env!("CARGO_PKG_VERSION"));
    for args in [&["help"][..], &["--help"], &["-h"], &[]] {
        let text = ok(&run(args, b""));
        assert!(text.contains("usage: agent-recovery"), "{args:?}: {text}");
        assert!(text.contains("commands:"), "{args:?}: {text}");
        assert!(
            text.contains("classify") && text.contains("serve"),
            "{args:?}"
        );
    }
    for args in [&["version"][..], &["--version"], &["-V"]] {
        assert_eq!(ok(&run(args, b"")), version, "{args:?}");
    }
    for sub in [
        "classify",
        "decide",
        "walkthrough",
        "backoff",
        "key",
        "registry",
        "errors-block",
        "schema",
        "render",
        "check",
        "serve",
    ] {
        let usage = format!("usage: agent-recovery {sub}");
        for args in [vec![sub, "--help"], vec![sub, "-h"], vec!["help", sub]] {
            let text = ok(&run(&args, b""));
            assert!(text.contains(&usage), "{args:?}: {text}");
        }
        for args in [vec![sub, "--version"], vec![sub, "-V"]] {
            assert_eq!(ok(&run(&args, b"")), version, "{args:?}");
        }
    }
    assert!(ok(&run(&["decide", "--help"], b"")).contains("--attempt <N>"));
}

#[test]
fn the_compile_cache_can_be_disabled() {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
        .args(["backoff", "--call", "tool", "--attempt", "1", "--seed", "1"])
        .env("AGENT_RECOVERY_CACHE_DIR", "")
        .output()
        .expect("runs");
    let cached = run(
        &["backoff", "--call", "tool", "--attempt", "1", "--seed", "1"],
        b"",
    );
    assert_eq!(ok(&out), ok(&cached));
}
