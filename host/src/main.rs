//! `agent-recovery`: the command line of the agent-recovery policy host.
//!
//! See `agent-recovery --help`. Errors print one lowercase line on stderr that
//! names the bad input and ends with a hint; exit status 2 means bad input or
//! usage, 1 means the policy itself failed.

mod cli;

use std::process::ExitCode;

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
    let result = std::panic::catch_unwind(|| cli::run(args));
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("agent-recovery: {}", cli::one_line(&error));
            cli::exit_code(&error)
        }
        Err(_) => ExitCode::from(1),
    }
}
