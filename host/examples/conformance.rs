//! The Rust side of the cross-runtime conformance check.
//!
//! Reads JSON Lines on stdin, one operation each, and writes one line per
//! operation: the component's output text unchanged, or
//! `ERROR <kind> <message>` with the policy error's snake_case kind. The Node
//! (`node/scripts/conformance.mjs`) and Python (`python -m
//! agent_recovery.conformance`) drivers speak the same protocol, and
//! `tests/conformance/run.py` compares the three byte for byte.
//!
//! `--component PATH` runs another policy component instead of the embedded
//! reference (`tests/policy-python/` compares a custom policy with the
//! reference this way); the exit status is 2 when the component cannot be
//! loaded, as in the Python driver.
//!
//! ```text
//! {"op":"classify","observation":"<json text>"}
//! {"op":"decide","observation":"<json text>","context":"<json text>"}
//! {"op":"key","run_id":"..","step_id":"..","tool":"..","args":"<json text>"}
//! {"op":"backoff","call":"tool|llm|agent","attempt":N,"seed":S}
//! {"op":"render","envelope":"<json text>","format":"jsonrpc-error","options":"<json text>"}
//! ```

use agent_recovery::types::{CallKind, RenderFormat};
use agent_recovery::{Error, ErrorKind, Policy};
use serde_json::Value;
use std::io::{BufRead, Write};

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn format_of(s: &str) -> Option<RenderFormat> {
    Some(match s {
        "jsonrpc-error" => RenderFormat::JsonrpcError,
        "mcp-tool-result" => RenderFormat::McpToolResult,
        "a2a-task-status" => RenderFormat::A2aTaskStatus,
        "problem-json" => RenderFormat::ProblemJson,
        "model-tool-result" => RenderFormat::ModelToolResult,
        "coordinator-text" => RenderFormat::CoordinatorText,
        "downstream-wrap" => RenderFormat::DownstreamWrap,
        _ => return None,
    })
}

fn call_of(s: &str) -> Option<CallKind> {
    Some(match s {
        "tool" => CallKind::Tool,
        "llm" => CallKind::Llm,
        "agent" => CallKind::Agent,
        _ => return None,
    })
}

fn line(policy: &Policy, op: &Value) -> Result<String, Error> {
    match text(op, "op") {
        "classify" => policy.classify_json(text(op, "observation")),
        "decide" => policy.decide_json(text(op, "observation"), text(op, "context")),
        "key" => policy.key(
            text(op, "run_id"),
            text(op, "step_id"),
            text(op, "tool"),
            text(op, "args"),
        ),
        "backoff" => {
            let call = call_of(text(op, "call")).unwrap_or(CallKind::Tool);
            let attempt = op
                .get("attempt")
                .and_then(Value::as_u64)
                .and_then(|a| u32::try_from(a).ok())
                .unwrap_or(0);
            let seed = op.get("seed").and_then(|s| {
                s.as_u64()
                    .or_else(|| s.as_str().and_then(|t| t.parse().ok()))
            });
            policy
                .backoff(call, attempt, seed, None)
                .map(|d| d.to_string())
        }
        "render" => match format_of(text(op, "format")) {
            Some(f) => policy.render_json(text(op, "envelope"), f, text(op, "options")),
            None => Ok(format!(
                "ERROR invalid_argument unknown format {}",
                text(op, "format")
            )),
        },
        other => Ok(format!("ERROR invalid_argument unknown op {other}")),
    }
}

/// The policy to run: the embedded reference, or `--component PATH`
/// (compiled once into `$AGENT_RECOVERY_CACHE_DIR` when it is set, as the CLI
/// does).
fn policy() -> Result<Policy, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Policy::reference().map_err(|e| e.to_string()),
        [flag, path] if flag == "--component" => {
            let loader = match std::env::var_os("AGENT_RECOVERY_CACHE_DIR") {
                Some(dir) if !dir.is_empty() => Policy::loader().cache_dir(dir),
                _ => Policy::loader(),
            };
            loader.file(path).map_err(|e| format!("{path}: {e}"))
        }
        _ => Err(format!(
            "unexpected arguments {args:?}; usage: conformance [--component PATH]"
        )),
    }
}

fn main() -> std::process::ExitCode {
    let policy = match policy() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("conformance: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for input in stdin.lock().lines() {
        let Ok(input) = input else { break };
        if input.trim().is_empty() {
            continue;
        }
        let result = match serde_json::from_str::<Value>(&input) {
            Ok(op) => line(&policy, &op),
            Err(e) => Ok(format!("ERROR invalid_json {e}")),
        };
        let rendered = match result {
            Ok(s) => s,
            Err(e) => match e.kind() {
                ErrorKind::Policy(kind) => {
                    format!("ERROR {} {}", kind.as_str().replace('-', "_"), e.message())
                }
                other => format!(
                    "ERROR runtime_{} {}",
                    other.as_str().replace('-', "_"),
                    e.message()
                ),
            },
        };
        let _ = writeln!(out, "{rendered}");
    }
    std::process::ExitCode::SUCCESS
}
