//! The CLI's boundary and documentation commands: `render`, `schema`,
//! `errors-block`, `registry --output`. Their output is the component's own
//! text, and the generated documents are the committed ones.

mod common;

use std::path::Path;

use agent_recovery::types::RenderFormat;
use serde_json::Value;

use common::cli::{OBS_429, fails, ok, path_str, run, scratch};
use common::policy;

const FORMATS: [(&str, RenderFormat); 7] = [
    ("jsonrpc-error", RenderFormat::JsonrpcError),
    ("mcp-tool-result", RenderFormat::McpToolResult),
    ("a2a-task-status", RenderFormat::A2aTaskStatus),
    ("problem-json", RenderFormat::ProblemJson),
    ("model-tool-result", RenderFormat::ModelToolResult),
    ("coordinator-text", RenderFormat::CoordinatorText),
    ("downstream-wrap", RenderFormat::DownstreamWrap),
];

fn repo_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn render_takes_an_observation_an_envelope_or_a_decision_alike() {
    let envelope = policy().classify_json(OBS_429).unwrap();
    let decision = ok(&run(&["decide", "--seed", "1"], OBS_429.as_bytes()));
    for (name, format) in FORMATS {
        let options = match format {
            RenderFormat::DownstreamWrap => r#"{"downstream_agent":"billing"}"#,
            _ => "{}",
        };
        let expected = policy().render_json(&envelope, format, options).unwrap();
        for (what, input) in [
            ("observation", OBS_429),
            ("envelope", envelope.as_str()),
            ("decision", decision.as_str()),
        ] {
            let args = ["render", "--as", name, "--options", options];
            let got = ok(&run(&args, input.as_bytes()));
            assert_eq!(got, expected, "{name} from {what}");
        }
        if name == "coordinator-text" {
            assert!(expected.starts_with("[FAILED]"), "{expected}");
        } else {
            serde_json::from_str::<Value>(&expected).expect("JSON formats are JSON");
        }
    }
}

#[test]
fn render_reads_a_file_and_passes_options() {
    let file = scratch("render-obs.json", OBS_429.as_bytes());
    let out = ok(&run(
        &[
            "render",
            "--as",
            "jsonrpc-error",
            path_str(&file),
            "--options",
            r#"{"id":7}"#,
        ],
        b"",
    ));
    let rpc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rpc["id"], 7);
    assert_eq!(rpc["jsonrpc"], "2.0");
    assert_eq!(rpc["error"]["data"]["code"], "tool.http.429_rate_limited");

    // The line `serve` prints renders too: its decision's envelope.
    let line = common::cli::stdout(&run(&["serve"], format!("{OBS_429}\n").as_bytes()));
    let from_line = ok(&run(
        &["render", "--as", "model-tool-result"],
        line.as_bytes(),
    ));
    let envelope = policy().classify_json(OBS_429).unwrap();
    let expected = policy()
        .render_json(&envelope, RenderFormat::ModelToolResult, "")
        .unwrap();
    assert_eq!(from_line, expected);
}

#[test]
fn render_refuses_bad_formats_options_and_input() {
    let err = fails(&run(&["render", "--as", "xml"], OBS_429.as_bytes()), 2);
    assert!(
        err.contains("invalid --as 'xml'") && err.contains("coordinator-text"),
        "{err}"
    );
    let err = fails(&run(&["render"], OBS_429.as_bytes()), 2);
    assert!(
        err.contains("required arguments were not provided: --as <FORMAT>"),
        "{err}"
    );
    let err = fails(&run(&["render", "--as", "jsonrpc-error"], b"not json"), 2);
    assert!(err.contains("not valid JSON"), "{err}");
    let out = run(
        &["render", "--as", "jsonrpc-error", "--options", "nope"],
        OBS_429.as_bytes(),
    );
    let err = fails(&out, 2);
    assert!(
        err.contains("--options") && err.contains("not valid JSON"),
        "{err}"
    );
    let out = run(&["render", "--as", "downstream-wrap"], OBS_429.as_bytes());
    let err = fails(&out, 2);
    assert!(err.contains("downstream_agent"), "{err}");
}

#[test]
fn schema_prints_the_committed_schemas() {
    for name in ["envelope", "decision", "code-info"] {
        let out = run(&["schema", name], b"");
        assert_eq!(
            common::cli::stdout(&out),
            repo_file(&format!("docs/schema/{name}.schema.json")),
            "{name}"
        );
        ok(&out);
    }
    let err = fails(&run(&["schema", "observation"], b""), 2);
    assert!(
        err.contains("expected envelope, decision or code-info"),
        "{err}"
    );
    fails(&run(&["schema"], b""), 2);
}

#[test]
fn errors_block_is_the_committed_mcp_block_and_filters_by_prefix() {
    let out = run(&["errors-block", "tool."], b"");
    assert_eq!(
        common::cli::stdout(&out),
        repo_file("docs/mcp-errors-block.md")
    );
    let block = ok(&run(&["errors-block", "tool.http.4", "llm.quota."], b""));
    assert!(block.starts_with("## Errors"), "{block}");
    let json = block
        .split("```json")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a fenced JSON array");
    let codes: Vec<Value> = serde_json::from_str(json).unwrap();
    assert!(!codes.is_empty());
    for code in &codes {
        let code = code["code"].as_str().unwrap();
        assert!(
            code.starts_with("tool.http.4") || code.starts_with("llm.quota."),
            "{code}"
        );
    }
    let all = ok(&run(&["errors-block"], b""));
    assert!(all.len() > block.len());
}

#[test]
fn registry_output_writes_the_committed_errors_md() {
    let path =
        std::env::temp_dir().join(format!("agent-recovery-errors-{}.md", std::process::id()));
    let out = run(
        &[
            "registry",
            "--format",
            "markdown",
            "--output",
            path_str(&path),
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let written = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(written, repo_file("docs/errors.md"));
    let stdout = common::cli::stdout(&run(&["registry", "--format", "markdown"], b""));
    assert_eq!(stdout, written, "--output writes what stdout would show");

    let err = fails(
        &run(&["registry", "--output", "/no/such/dir/errors.md"], b""),
        2,
    );
    assert!(err.contains("cannot write /no/such/dir/errors.md"), "{err}");
}

/// `agent-recovery --policy payments_policy.wasm registry` prints that policy's registry.
#[test]
fn the_cli_prints_the_registry_of_the_policy_it_is_given() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
        .arg("--policy")
        .arg(common::fixtures::payments_wasm())
        .arg("registry")
        .env("AGENT_RECOVERY_CACHE_DIR", "")
        .output()
        .expect("runs the CLI");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let conflict = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["code"] == "tool.http.409_conflict"))
        .expect("listed");
    assert_eq!(conflict["class"], "permanent");
}
