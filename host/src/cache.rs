//! An optional on-disk cache of compiled components.
//!
//! Compiling a policy with Cranelift takes about a second for the reference
//! policy, which dominates a one-shot CLI call. With a cache directory set
//! (`Loader::cache_dir`) the compiled artifact is
//! stored under the sha256 of the component bytes plus a hash of the engine's
//! compilation settings, and later loads deserialize it instead.
//!
//! The cache is best effort: a missing, unreadable, stale or corrupt entry is
//! recompiled and rewritten, and a cache that cannot be written is skipped.
//! Entries are written to a temporary file and renamed into place, and the
//! directory is created readable by its owner only.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// The cached artifact for `sha256` (hex) under `dir`, if it loads.
pub(crate) fn load(engine: &Engine, dir: &Path, sha256: &str) -> Option<Component> {
    let bytes = std::fs::read(entry(engine, dir, sha256)).ok()?;
    // SAFETY: `Component::deserialize` requires bytes produced by
    // `Component::serialize` for a compatible engine. Entries are written only
    // by `store` below (keyed by the engine's compatibility hash, and wasmtime
    // rejects a header from another version or configuration) into a directory
    // only the owner can write; whoever can write there can already run code
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
