//! An optional on-disk cache of compiled components.
//!
//! Compiling a policy with Cranelift takes about a second for the reference
//! policy, which dominates a one-shot CLI call. With a cache directory set
//! (`Loader::cache_dir`) the compiled artifact is
//! stored under the sha256 of the component bytes plus a hash of the engine's
//! compilation settings, and later loads deserialize it instead.
//!
//! # Trust model
//!
//! An entry is native machine code: `Component::deserialize` is `unsafe`
//! because whatever the file says is run as code of this process, with none of
//! the sandbox's checks. So the cache is only as trustworthy as the directory:
//! whoever can write to it can run code as the user of the process. The host
//! therefore **refuses** (an [`ErrorKind::InvalidArgument`] error that says
//! why, and loads nothing) a cache directory that
//!
//! - is not a directory,
//! - is not owned by the effective user of the process, or
//! - is writable by its group or by others (mode `& 0o022`),
//!
//! and creates a missing one with mode `0700`. An entry that is not a regular
//! file owned by the same user is ignored (recompiled). The rules apply to any
//! directory given to `Loader::cache_dir`, so to the CLI's
//! `AGENT_RECOVERY_CACHE_DIR` as well. On non-Unix targets the directory's
//! permissions are not checked.
//!
//! Otherwise the cache is best effort: a missing, unreadable, stale or corrupt
//! entry is recompiled and rewritten, and a directory that cannot be created
//! or written is skipped. Entries are written to a temporary file and renamed
//! into place.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::{Error, ErrorKind, Result};

/// Creates `dir` (mode `0700`) when it is missing, then checks that it is safe
/// to load native code from. `Ok(false)`: it could not be created, skip the
/// cache; an error: it exists but anyone else could have written to it.
pub(crate) fn usable(dir: &Path) -> Result<bool> {
    if !dir.exists() && create_private_dir(dir).is_err() {
        return Ok(false);
    }
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(_) => return Ok(false),
    };
    if !meta.is_dir() {
        return Err(refuse(dir, "it is not a directory"));
    }
    check_owner_and_mode(dir, &meta)?;
    Ok(true)
}

#[cfg(unix)]
fn check_owner_and_mode(dir: &Path, meta: &std::fs::Metadata) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(
            dir,
            &format!(
                "it is owned by uid {}, not by this user (uid {me})",
                meta.uid()
            ),
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(refuse(
            dir,
            &format!("it is writable by its group or by others (mode {mode:03o})"),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_owner_and_mode(_: &Path, _: &std::fs::Metadata) -> Result<()> {
    Ok(())
}

/// Whether an entry is a regular file owned by this user (Unix).
fn owned_file(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.is_file() && meta.uid() == rustix::process::geteuid().as_raw()
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

fn refuse(dir: &Path, why: &str) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "refusing the compiled-component cache {}: {why}; its entries are loaded as native code, so only its owner may write there: `chmod 700` it, or choose another directory (AGENT_RECOVERY_CACHE_DIR for the CLI)",
            dir.display()
        ),
    )
}

/// The cached artifact for `sha256` (hex) under `dir`, if it loads.
pub(crate) fn load(engine: &Engine, dir: &Path, sha256: &str) -> Option<Component> {
    let path = entry(engine, dir, sha256);
    if !owned_file(&std::fs::symlink_metadata(&path).ok()?) {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    // SAFETY: `Component::deserialize` requires bytes produced by
    // `Component::serialize` for a compatible engine. Entries are written only
    // by `store` below (keyed by the engine's compatibility hash, and wasmtime
    // rejects a header from another version or configuration) into a directory
    // that `usable` checked only the owner can write, and the entry is a
    // regular file of the owner; whoever can write there can already run code
    // as the owner. Reading into memory (not mapping the file) means a later
    // change to the file cannot change the loaded code.
    unsafe { Component::deserialize(engine, &bytes) }.ok()
}

/// Stores `component` for `sha256` (hex) under `dir`; errors are ignored.
pub(crate) fn store(engine: &Engine, dir: &Path, sha256: &str, component: &Component) {
    let Ok(bytes) = component.serialize() else {
        return;
    };
    if create_private_dir(dir).is_err() {
        return;
    }
    let path = entry(engine, dir, sha256);
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// `<dir>/<sha256>-<engine hash>.cwasm`.
fn entry(engine: &Engine, dir: &Path, sha256: &str) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    dir.join(format!("{sha256}-{:016x}.cwasm", hasher.finish()))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}
