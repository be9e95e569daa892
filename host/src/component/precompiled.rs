//! The embedded reference compiled ahead of time: `<sha256>.cwasm`.
//!
//! Compiling the reference with Cranelift dominates a first start (a
//! one-shot CLI call on a machine that never ran it). A package can instead
//! ship the reference already compiled for the machine it is installed on,
//! next to the program: [`precompile_reference`] writes it, and
//! [`Loader::precompiled_dir`](crate::Loader::precompiled_dir) makes
//! [`Loader::reference`](crate::Loader::reference) load it instead of
//! compiling.
//!
//! # Trust model
//!
//! An artifact is native machine code of this process, loaded with none of
//! the sandbox's checks, so a precompiled directory must be as trusted as the
//! program itself: its installation directory, written by whoever installed
//! the program. Unlike the compile cache (a per-user directory written at run
//! time), nothing here is written while loading.
//!
//! - The file's name is the sha256 of the embedded reference's bytes, so an
//!   artifact of another build of the reference never matches; artifacts of
//!   user components are never looked up.
//! - wasmtime refuses an artifact built by another wasmtime version, with
//!   another engine configuration or for a CPU lacking a feature it uses;
//!   the artifact is written with [`engine`], the one engine the loader uses,
//!   so the configuration cannot drift. A refused, missing or unreadable
//!   artifact is skipped and the reference is compiled (and cached) as
//!   without one.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::component::policy::{REFERENCE, engine, hex};
use crate::error::{Error, ErrorKind, Result};

/// The file name of the precompiled reference: `<sha256 of the reference>.cwasm`.
pub(crate) fn file_name() -> String {
    format!("{}.cwasm", hex(&Sha256::digest(REFERENCE).into()))
}

/// Compiles the embedded reference policy for this machine, with the engine
/// every [`Loader`](crate::Loader) uses, and writes it to
/// `<dir>/<sha256 of the reference>.cwasm` (creating `dir`); returns that path.
///
/// Other `<sha256>.cwasm` files in `dir` (artifacts of other builds, which
/// would never be loaded again) are removed. The file is written to a
/// temporary name and renamed into place, so a concurrent start sees the old
/// state or the new, never half a file.
///
/// Install the result where [`Loader::precompiled_dir`](crate::Loader::precompiled_dir)
/// looks for it: only a directory as trusted as the program, since the
/// artifact is loaded as machine code with none of the sandbox's checks.
pub fn precompile_reference(dir: impl AsRef<Path>) -> Result<PathBuf> {
    let dir = dir.as_ref();
    let io = |what: &str, path: &Path, e: std::io::Error| {
        Error::new(
            ErrorKind::Io,
            format!(
                "cannot {what} {}: {e}; choose a directory this user may write to",
                path.display()
            ),
        )
    };
    let artifact = engine()?.precompile_component(REFERENCE).map_err(|e| {
        Error::new(
            ErrorKind::Load,
            format!(
                "cannot compile the reference policy: {e:#}; this is a host bug, please report it"
            ),
        )
    })?;
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let name = file_name();
    let path = dir.join(&name);
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, &artifact)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io("write", &path, e)
        })?;
    for stale in std::fs::read_dir(dir)
        .map_err(|e| io("read", dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| is_artifact_name(p) && p.file_name() != Some(std::ffi::OsStr::new(&name)))
    {
        let _ = std::fs::remove_file(stale);
    }
    Ok(path)
}

/// Whether `path` is named `<64 lowercase hex digits>.cwasm`.
fn is_artifact_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    name.strip_suffix(".cwasm").is_some_and(|stem| {
        stem.len() == 64 && stem.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The precompiled reference from the first of `dirs` that has one wasmtime
/// accepts, or `None` (then the caller compiles).
pub(crate) fn load(engine: &Engine, dirs: &[PathBuf]) -> Option<Component> {
    let name = file_name();
    dirs.iter().find_map(|dir| {
        let path = dir.join(&name);
        if !std::fs::metadata(&path).ok()?.is_file() {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        // SAFETY: `Component::deserialize` runs whatever the bytes say as code
        // of this process; it requires bytes produced by wasmtime's
        // `precompile_component`/`serialize` for a compatible engine. The
        // caller names only directories as trusted as the program itself (its
        // installation directory, see the module documentation): whoever can
        // write there can already replace the program. The name is the sha256
        // of the bytes being loaded, so the artifact is of this component, and
        // wasmtime checks its header (version, engine configuration, CPU
        // features) and refuses a mismatch, which falls back to compiling.
        // Reading into memory (not mapping the file) means a later change to
        // the file cannot change the loaded code.
        unsafe { Component::deserialize(engine, &bytes) }.ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sha256_names_are_artifacts() {
        let hex64 = "0123456789abcdef".repeat(4);
        assert!(is_artifact_name(Path::new(&format!("/x/{hex64}.cwasm"))));
        assert!(!is_artifact_name(Path::new(&format!(
            "/x/{hex64}-00ff.cwasm"
        ))));
        assert!(!is_artifact_name(Path::new(&format!(
            "/x/{}.cwasm",
            hex64.to_uppercase()
        ))));
        assert!(!is_artifact_name(Path::new(&format!("/x/{hex64}.wasm"))));
        assert!(!is_artifact_name(Path::new("/x/policy.cwasm")));
    }
}
