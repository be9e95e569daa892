//! `agent-recovery`: the command line of the agent-recovery policy host.
//!
//! See `agent-recovery --help`. Errors print one lowercase line on stderr that
//! names the bad input and ends with a hint.
//!
//! Exit status: 0 on success, 2 for bad input or usage (the message names the
//! input and ends with a hint; also a component file that cannot be read or
//! compiled, or a sha256 mismatch), 1 when the policy itself fails (trap,
//! fuel, memory, invalid output, incompatible component, failed smoke tests).
//!
//! A thin binary over the `agent-recovery` library: argument parsing (clap),
//! terminal output, and the OTLP JSON file of `simulate --trace-out` (the
//! OpenTelemetry SDK) live here, so the library depends on none of them.

mod args;
mod commands;
mod context;
mod dlq;
mod document;
mod human;
mod input;
mod policy_test;
mod precompiled;
mod render;
mod replay;
mod serve;
mod signing;
mod simulate;
mod style;
mod trace_out;

use std::fmt;
use std::process::ExitCode;

use agent_recovery::ErrorKind;

fn main() -> ExitCode {
    // A panic here is a bug; say so on one line instead of a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("agent-recovery: internal error{at}; please report it with the command you ran");
    }));
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let result = std::panic::catch_unwind(|| run(args));
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("agent-recovery: {}", one_line(&error));
            exit_code(&error)
        }
        Err(_) => ExitCode::from(1),
    }
}

/// A usage or input error of the CLI itself (exit status 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Tests that ran and failed (exit status 1); the report is already printed.
#[derive(Debug)]
pub struct Failed(pub String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

/// Runs the command line in `args` (without the program name).
pub fn run(args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    match args::parse(args)? {
        args::Parsed::Run(cli) => commands::dispatch(*cli),
        args::Parsed::Print(text) => commands::print(text.trim_end()),
    }
}

/// The exit status for an error of [`run`].
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    if error.downcast_ref::<Failed>().is_some() {
        return ExitCode::from(1);
    }
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
