//! The human summary of `classify`, `decide` and `walkthrough`.
//!
//! Tests run with stdout on a pipe, where the CLI prints JSON unless
//! `--human` forces the summary; colour is forced with `--color always`.
//! Expected facts come from the observation files themselves (the provider's
//! status, code and `retry-after-ms` header), not from running the CLI.

mod common;

use std::process::Command;

use serde_json::Value;

use common::cli::{OBS_429, ok, run};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/observations");

fn example(name: &str) -> String {
    format!("{EXAMPLES}/{name}")
}

#[test]
fn a_pipe_gets_the_exact_json_and_json_wins_on_request() {
    let piped = ok(&run(&["decide", "--seed", "3"], OBS_429.as_bytes()));
    let json = ok(&run(
        &["decide", "--seed", "3", "--json"],
        OBS_429.as_bytes(),
    ));
    assert_eq!(piped, json);
    let decision = common::policy()
        .decide_json(OBS_429, r#"{"seed":3}"#)
        .expect("decides");
    assert_eq!(piped, decision);
    // --color alone does not turn JSON into a summary.
    let coloured = ok(&run(
        &["decide", "--seed", "3", "--color", "always"],
        OBS_429.as_bytes(),
    ));
    assert_eq!(coloured, decision);
}

#[test]
fn decide_summary_shows_code_class_action_delay_hint_and_upstream() {
    let file = example("openai-429-rate-limit.json");
    let args = ["decide", &file, "--attempt", "1", "--seed", "42", "--human"];
    let text = ok(&run(&args, b""));
    let lines: Vec<&str> = text.lines().collect();
    // The file: HTTP 429 from OpenAI, code rate_limit_exceeded, type tokens,
    // retry-after-ms 1800, x-request-id req_6f1c2a9d; an LLM call (3 attempts).
    assert!(
        lines[0].starts_with("llm.http.429_rate_limited  transient"),
        "{text}"
    );
    assert!(lines[0].contains("rate_limit"), "{text}");
    let field = |label: &str| -> &str {
        lines
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(label))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {label} line in {text}"))
    };
    assert!(field("action").starts_with("retry in 1800 ms"), "{text}");
    assert!(field("action").contains("attempt 1 of 3"), "{text}");
    assert_eq!(field("reason"), "transient");
    assert!(field("hint").contains("1800 ms"), "{text}");
    assert_eq!(
        field("upstream"),
        "http · openai · status 429 · code rate_limit_exceeded · type tokens"
    );
    assert_eq!(field("request"), "req_6f1c2a9d");
    assert!(!text.contains('\u{1b}'), "no colour in a pipe: {text:?}");
    assert!(!text.contains('{'), "not JSON: {text}");
}

#[test]
fn classify_summary_names_the_field_and_says_not_retryable() {
    let text = ok(&run(
        &["classify", &example("stripe-card-declined.json"), "--human"],
        b"",
    ));
    let obs: Value = serde_json::from_str(
        &std::fs::read_to_string(example("stripe-card-declined.json")).unwrap(),
    )
    .unwrap();
    let error = &obs["body"]["error"];
    assert!(text.contains("permanent"), "{text}");
    assert!(text.contains("retryable no"), "{text}");
    assert!(
        text.contains(&format!("field     {}", error["param"].as_str().unwrap())),
        "{text}"
    );
    // Stripe's most specific code is the decline code (card_declined is its family).
    assert!(
        text.contains(&format!(
            "code {} · type {}",
            error["decline_code"].as_str().unwrap(),
            error["type"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(text.contains("stripe"), "{text}");
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let file = example("node-econnreset.json");
    let always = ok(&run(
        &[
            "decide", &file, "--seed", "1", "--human", "--color", "always",
        ],
        b"",
    ));
    // SGR 33 (yellow) for the transient class, then a reset.
    assert!(
        always.contains("\u{1b}[33mtransient\u{1b}[0m"),
        "{always:?}"
    );
    let never = ok(&run(
        &[
            "decide", &file, "--seed", "1", "--human", "--color", "never",
        ],
        b"",
    ));
    assert!(!never.contains('\u{1b}'), "{never:?}");
    // NO_COLOR only affects `auto`; an explicit `always` wins.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
        .args([
            "decide", &file, "--seed", "1", "--human", "--color", "always",
        ])
        .env("NO_COLOR", "1")
        .env("AGENT_RECOVERY_CACHE_DIR", "")
        .output()
        .unwrap();
    assert_eq!(ok(&out), always);
    let auto = Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
        .args(["decide", &file, "--seed", "1", "--human"])
        .env("NO_COLOR", "1")
        .env("AGENT_RECOVERY_CACHE_DIR", "")
        .output()
        .unwrap();
    assert_eq!(ok(&auto), never);
}

#[test]
fn walkthrough_prints_each_summary_then_one_table() {
    let mut files: Vec<String> = std::fs::read_dir(EXAMPLES)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let text = ok(&run(
        &[
            "walkthrough",
            EXAMPLES,
            "--attempt",
            "1",
            "--seed",
            "42",
            "--human",
        ],
        b"",
    ));
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("observation"))
        .collect();
    assert_eq!(table.len(), files.len() + 1, "{text}");
    for (row, name) in table[1..].iter().zip(&files) {
        assert!(row.starts_with(name.as_str()), "{row} / {name}");
    }
    let row = |name: &str| -> Vec<&str> {
        table
            .iter()
            .find(|r| r.starts_with(name))
            .unwrap()
            .split_whitespace()
            .collect()
    };
    assert_eq!(
        row("stripe-card-declined.json")[1..],
        ["tool.payment.declined", "permanent", "fail", "-"]
    );
    assert_eq!(
        row("openai-429-rate-limit.json")[1..],
        [
            "llm.http.429_rate_limited",
            "transient",
            "retry",
            "1800",
            "ms"
        ]
    );
    assert_eq!(row("a2a-input-required.json")[3], "await_input");
    assert_eq!(text.matches("\n== ").count() + 1, files.len(), "{text}");
}

#[test]
fn walkthrough_json_is_one_line_per_file_with_the_decide_output() {
    let out = ok(&run(
        &["walkthrough", EXAMPLES, "--attempt", "1", "--seed", "42"],
        b"",
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 10, "{out}");
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        let file = example(v["file"].as_str().unwrap());
        let decide = ok(&run(
            &["decide", &file, "--attempt", "1", "--seed", "42"],
            b"",
        ));
        assert_eq!(
            line,
            format!("{{\"file\":{},\"decision\":{decide}}}", v["file"]),
            "the decision is decide's output byte for byte"
        );
    }
    let missing = run(&["walkthrough", "/no/such/dir"], b"");
    let err = common::cli::fails(&missing, 2);
    assert!(err.contains("cannot read directory /no/such/dir"), "{err}");
}

/// Runs the binary on a pseudo-terminal (util-linux `script`, essential in
/// Debian), so stdout is a terminal as in an interactive shell.
fn on_a_terminal(args: &str, no_color: bool) -> String {
    let bin = env!("CARGO_BIN_EXE_agent-recovery");
    let out = Command::new("script")
        .args(["-qec", &format!("{bin} {args}"), "/dev/null"])
        .env("TERM", "xterm")
        .env("AGENT_RECOVERY_CACHE_DIR", "")
        .env_remove("NO_COLOR")
        .envs(no_color.then_some(("NO_COLOR", "1")))
        .output()
        .expect("util-linux script runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n")
}

#[test]
fn a_terminal_gets_the_summary_in_colour_unless_no_color_or_json() {
    let file = example("openai-429-rate-limit.json");
    let args = format!("decide {file} --attempt 1 --seed 42");
    let tty = on_a_terminal(&args, false);
    assert!(tty.contains("\u{1b}[33mtransient\u{1b}[0m"), "{tty:?}");
    assert!(tty.contains("retry\u{1b}[0m in 1800 ms"), "{tty:?}");
    let plain = on_a_terminal(&args, true);
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    assert!(plain.contains("  action    retry in 1800 ms"), "{plain:?}");
    let json = on_a_terminal(&format!("{args} --json"), false);
    let piped = ok(&run(
        &["decide", &file, "--attempt", "1", "--seed", "42"],
        b"",
    ));
    assert_eq!(json.trim_end(), piped);
}
