//! The reference policy compiled ahead of time and installed with the program.
//!
//! `precompile` writes `<sha256 of the reference>.cwasm` into
//! `<prefix>/lib/agent-recovery` (for a program in `<prefix>/bin`);
//! `scripts/package-cli.sh` runs it when it installs the program. Every
//! command that loads the embedded reference looks there first, then in the
//! program's own directory, and compiles (and caches) only when neither has
//! an artifact wasmtime accepts. `AGENT_RECOVERY_PRECOMPILED=0` skips the
//! lookup. Both directories are found from the program's own path, so they
//! are as trusted as the program (the library's `precompiled_dir`).

use std::path::PathBuf;

use serde_json::json;

use crate::Usage;
use crate::args::Precompile;
use crate::commands::print;

/// The directories to look in, in order; none when
/// `AGENT_RECOVERY_PRECOMPILED` is `0`, `false`, `no` or `off`.
pub fn dirs() -> Vec<PathBuf> {
    let off = std::env::var("AGENT_RECOVERY_PRECOMPILED").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        )
    });
    match (off, exe_dir()) {
        (false, Some(dir)) => vec![installed(&dir), dir],
        _ => Vec::new(),
    }
}

/// `precompile [--out DIR]`: writes the artifact, prints where.
pub fn run(a: Precompile) -> anyhow::Result<()> {
    let dir = match a.out {
        Some(dir) => PathBuf::from(dir),
        None => installed(&exe_dir().ok_or_else(|| {
            Usage(
                "cannot find the directory of this program; pass --out DIR (the directory to install the artifact into)"
                    .into(),
            )
        })?),
    };
    let path = agent_recovery::precompile_reference(&dir)?;
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    print(&json!({ "path": path, "bytes": bytes }).to_string())
}

/// `<exe dir>/../lib/agent-recovery`.
fn installed(exe_dir: &std::path::Path) -> PathBuf {
    let prefix = exe_dir.parent().unwrap_or(exe_dir);
    prefix.join("lib").join("agent-recovery")
}

/// The directory of the running program, symbolic links resolved (so a
/// link in `~/bin` finds the artifact of the installation it points to).
fn exe_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    exe.parent().map(PathBuf::from)
}
