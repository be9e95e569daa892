//! The `agent-recovery` command line.
//!
//! Exit status: 0 on success, 2 for bad input or usage (the message names the
//! input and ends with a hint; also a component file that cannot be read or
//! compiled, or a sha256 mismatch), 1 when the policy itself fails (trap,
//! fuel, memory, invalid output, incompatible component, failed smoke tests).

mod args;
mod commands;
mod context;
mod input;
mod render;
mod serve;
mod simulate;

use std::fmt;
use std::process::ExitCode;

use agent_recovery::ErrorKind;

pub use args::Args;

/// A usage or input error of the CLI itself (exit status 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Runs the command line in `args` (without the program name).
pub fn run(args: Vec<String>) -> anyhow::Result<()> {
    commands::dispatch(&Args::parse(args)?)
}

/// The exit status for an error of [`run`].
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    let kind = match (
        error.downcast_ref::<agent_recovery::Error>(),
        error.downcast_ref::<agent_recovery::SwapError>(),
    ) {
        (Some(e), _) => e.kind(),
        (None, Some(e)) => e.kind(),
        (None, None) => return ExitCode::from(2),
    };
    match kind {
        ErrorKind::Io
        | ErrorKind::Load
        | ErrorKind::DigestMismatch
        | ErrorKind::InvalidArgument => ExitCode::from(2),
        kind if kind.is_bad_input() => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}

/// The error as one line: the context chain joined with `: `, newlines folded.
pub fn one_line(error: &anyhow::Error) -> String {
    let text = format!("{error:#}");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Usage text for `help`.
pub const HELP: &str = "\
agent-recovery: normalize agent failures into error envelopes and decide what to do next

usage: agent-recovery [--policy WASM] [--config FILE] <command> [args]

commands:
  classify [FILE]        normalize an observation (JSON; FILE or - for stdin) into an envelope
  decide [FILE]          decide the next step for an observation
      --call tool|llm|agent  --attempt N  --elapsed-ms MS  --seed S  --now-ms MS
  backoff                the full-jitter delay after a failed attempt: {\"delay_ms\":N}
      --call tool|llm|agent  --attempt N  [--seed S]
  key                    the idempotency key of a tool call: {\"key\":\"<hex sha256>\"}
      --run-id R  --step-id S  --tool T  --args JSON
  registry [--format json|markdown] [--output FILE]
                         every code the policy can emit (markdown is docs/errors.md)
  errors-block [PREFIX...]   the MCP `## Errors` block for a tool description (codes or
                         prefixes such as tool.http.; none means all)
  schema envelope|decision|code-info   the JSON Schema of an output
  render --as FORMAT [FILE] [--options JSON]
                         render an envelope, a decision's envelope or (classified first) an
                         observation as jsonrpc-error, mcp-tool-result, a2a-task-status,
                         problem-json, model-tool-result, coordinator-text or downstream-wrap;
                         --options: {\"id\",\"task_id\",\"context_id\",\"current_agent\",\"downstream_agent\"}
  check WASM             compile, link and smoke-test a policy component; prints its identity
  serve [--watch] [--sha256 HEX] [--on-failure closed|reference] [--poll-ms MS]
                         decide for each JSON line on stdin (an observation, or
                         {\"observation\":..,\"context\":..,\"id\":..}); one line out per line in:
                         {\"policy\":{..},\"decision\":..} or {\"error\":{\"kind\",\"message\"}};
                         --watch reloads --policy when the file changes (checked every
                         --poll-ms, default 500); swaps and refusals are logged on stderr
  simulate SCENARIO [--json] [--store PATH]
                         run a scripted scenario through the recovery runtime on a virtual
                         clock and print the timeline (a table; --json: {\"outcome\",\"events\",
                         \"dead_letters\"}); --store: a SQLite file shared by runs (breakers);
                         --policy decides with another component (preview before a swap)
  help                   this text
  version                the version of this program

global options:
  --policy WASM          use this policy component instead of the embedded reference policy
  --config FILE          policy parameters (JSON object), merged into the context's `config`

environment:
  AGENT_RECOVERY_CACHE_DIR   where compiled components are cached (empty: no cache);
                             default $XDG_CACHE_HOME/agent-recovery or ~/.cache/agent-recovery

exit status: 0 ok, 1 the policy failed (trap, fuel, memory, invalid output), 2 bad input or usage
";
