//! [`Policy`]: a compiled, linked policy component, and [`Loader`] to make one.
//!
//! Loading does all the slow work once: compile (Cranelift), check the
//! imports against what the sandbox provides, link WASI, and resolve the
//! exports of the world (`InstancePre`). A call then only needs an instance,
//! which the instance pool hands out.
//!
//! A `Policy` is immutable once built, so hot swapping is a matter of
//! replacing an `Arc<Policy>` after the new one has passed [`Policy::verify`]:
//! [`PolicyHandle`](crate::PolicyHandle) does exactly that.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use crate::Limits;
use crate::component::gen_::RecoveryPolicyPre;
use crate::component::pool::Pool;
use crate::component::sandbox::Sandbox;
use crate::component::{cache, precompiled};
use crate::error::{Error, ErrorKind, Result};

/// The reference policy built from `guest/`, embedded at build time.
pub(crate) static REFERENCE: &[u8] = include_bytes!(env!("AGENT_RECOVERY_REFERENCE_WASM"));

/// The WIT world every policy component must implement.
pub const WORLD: &str = "agent:recovery/recovery-policy@0.1.0";

/// WASI packages a component may import: what Rust's standard library on
/// `wasm32-wasip2` needs for a pure computation (stdio for panics, clocks and
/// random for the documented fallbacks). A policy has no use for files or the
/// network, so `wasi:filesystem`, `wasi:sockets` and `wasi:http` are refused at
/// load, not merely linked to nothing.
const ALLOWED_IMPORTS: &[&str] = &["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/"];

/// A compiled recovery policy component, ready to call.
///
/// `Policy` is `Send + Sync`; share it in an `Arc`. Each call takes an idle
/// instance from a small pool (or instantiates a new one), runs with the
/// [`Limits`] set at load time, and returns the instance to the pool unless
/// it trapped or ran out of fuel or memory.
///
/// ```
/// let policy = agent_recovery::Policy::reference()?;
/// let info = policy.info()?;
/// assert_eq!(info.contract, "0.1.0");
/// # Ok::<(), agent_recovery::Error>(())
/// ```
pub struct Policy {
    pub(crate) pre: RecoveryPolicyPre<Sandbox>,
    pub(crate) pool: Pool,
    pub(crate) limits: Limits,
    sha256: [u8; 32],
}

/// Options for loading a [`Policy`].
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`limits`](Self::limits) | [`Limits::default()`] |
/// | [`pool_size`](Self::pool_size) | the number of CPUs (at least 2) |
/// | [`cache_dir`](Self::cache_dir) | none: compile on every load |
/// | [`precompiled_dir`](Self::precompiled_dir) | none: compile the reference |
#[derive(Clone, Debug)]
pub struct Loader {
    limits: Limits,
    pool_size: usize,
    cache_dir: Option<PathBuf>,
    precompiled: Vec<PathBuf>,
}

impl Default for Loader {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        Loader {
            limits: Limits::default(),
            pool_size: cpus.max(2),
            cache_dir: None,
            precompiled: Vec::new(),
        }
    }
}

impl Loader {
    /// Limits applied to every call.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The most idle instances kept for reuse (0 instantiates on every call).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Keep compiled components in `dir` and reuse them on later loads.
    ///
    /// Worth it for short-lived processes such as a CLI (compiling the
    /// reference policy takes about a second); a long-running host compiles
    /// once anyway. Entries are keyed by the sha256 of the component and the
    /// engine's settings; a stale or corrupt entry is recompiled, and a cache
    /// that cannot be created or written is skipped. Its entries are loaded as
    /// trusted machine code, so a missing directory is created with mode
    /// `0700`, and loading **fails** ([`ErrorKind::InvalidArgument`], saying
    /// why) when the directory is not owned by the process's user or is
    /// writable by its group or others.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Look for the embedded reference precompiled into `dir`
    /// (`<dir>/<sha256 of the reference>.cwasm`, written by
    /// [`precompile_reference`](crate::precompile_reference)) before compiling
    /// it; repeat to look in several directories, in order.
    ///
    /// Only for the reference: other components are compiled (or taken from
    /// the [`cache_dir`](Self::cache_dir)) as without it. A missing artifact,
    /// or one wasmtime refuses (another wasmtime version, engine
    /// configuration or CPU), is skipped: the reference is then compiled and
    /// cached as usual. The artifact is loaded as trusted machine code, so
    /// `dir` must be as trusted as the program itself, such as its
    /// installation directory; never a directory other users can write to.
    pub fn precompiled_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.precompiled.push(dir.into());
        self
    }

    /// Loads the embedded reference policy. It is compiled (or loaded from
    /// a [`precompiled_dir`](Self::precompiled_dir)) once per process; later
    /// loads only link it.
    pub fn reference(self) -> Result<Policy> {
        let component = self.reference_component()?;
        self.link(&component, REFERENCE)
    }

    /// The compiled reference component (compiled once per process); the
    /// recovery runtime instantiates its `runtime@0.2.0` export from it.
    pub(crate) fn reference_component(&self) -> Result<Component> {
        static COMPILED: OnceLock<Component> = OnceLock::new();
        Ok(match COMPILED.get() {
            Some(component) => component.clone(),
            None => {
                let precompiled = precompiled::load(engine()?, &self.precompiled);
                let component = match precompiled {
                    Some(component) => component,
                    None => self.compile(REFERENCE)?,
                };
                COMPILED.get_or_init(|| component).clone()
            }
        })
    }

    /// Loads a component from a `.wasm` file.
    pub fn file(self, path: impl AsRef<Path>) -> Result<Policy> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "cannot read policy component {}: {e}; check the path and its permissions",
                    path.display()
                ),
            )
        })?;
        self.bytes(&bytes)
    }

    /// Loads a component from its bytes (binary format only).
    pub fn bytes(self, bytes: &[u8]) -> Result<Policy> {
        let component = self.compile(bytes)?;
        self.link(&component, bytes)
    }

    /// Compiles `bytes`, or loads them from the cache directory.
    fn compile(&self, bytes: &[u8]) -> Result<Component> {
        check_header(bytes)?;
        let engine = engine()?;
        let Some(dir) = &self.cache_dir else {
            return compile(engine, bytes);
        };
        if !cache::usable(dir)? {
            return compile(engine, bytes);
        }
        let sha256 = hex(&Sha256::digest(bytes).into());
        if let Some(component) = cache::load(engine, dir, &sha256) {
            return Ok(component);
        }
        let component = compile(engine, bytes)?;
        cache::store(engine, dir, &sha256, &component);
        Ok(component)
    }

    /// Checks the imports, links WASI and resolves the world's exports.
    fn link(self, component: &Component, bytes: &[u8]) -> Result<Policy> {
        let engine = engine()?;
        check_imports(engine, component)?;

        let mut linker = Linker::<Sandbox>::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| {
            Error::new(
                ErrorKind::Load,
                format!("cannot link WASI: {e:#}; this is a host bug, please report it"),
            )
        })?;
        let instance_pre = linker.instantiate_pre(component).map_err(|e| {
            Error::new(
                ErrorKind::Incompatible,
                format!("the policy's imports cannot be satisfied: {e:#}; a policy may import only WASI 0.2 interfaces"),
            )
        })?;
        let pre = RecoveryPolicyPre::new(instance_pre).map_err(|e| {
            Error::new(
                ErrorKind::Incompatible,
                format!("the component does not implement {WORLD}: {e:#}; build it against wit/ of agent:recovery@0.1.0"),
            )
        })?;
        Ok(Policy {
            pre,
            pool: Pool::new(self.pool_size),
            limits: self.limits,
            sha256: Sha256::digest(bytes).into(),
        })
    }
}

impl Policy {
    /// Options for loading a policy with non-default limits or pool size.
    ///
    /// ```
    /// use agent_recovery::{Limits, Policy};
    /// let limits = Limits::default().with_memory_bytes(64 << 20);
    /// let policy = Policy::loader().limits(limits).pool_size(1).reference()?;
    /// assert_eq!(policy.limits().memory_bytes(), 64 << 20);
    /// # Ok::<(), agent_recovery::Error>(())
    /// ```
    pub fn loader() -> Loader {
        Loader::default()
    }

    /// The reference policy embedded in this crate, with default limits.
    pub fn reference() -> Result<Policy> {
        Loader::default().reference()
    }

    /// A policy component from a `.wasm` file, with default limits.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Policy> {
        Loader::default().file(path)
    }

    /// A policy component from its bytes, with default limits.
    pub fn from_bytes(bytes: &[u8]) -> Result<Policy> {
        Loader::default().bytes(bytes)
    }

    /// The bytes of the embedded reference component.
    pub fn reference_bytes() -> &'static [u8] {
        REFERENCE
    }

    /// The limits applied to each call.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How many idle instances the pool holds now (for metrics and tests).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle()
    }

    /// The sha256 of the component bytes, as lowercase hex.
    pub fn sha256(&self) -> String {
        hex(&self.sha256)
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("sha256", &self.sha256())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

pub(crate) fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The process-wide engine: Cranelift, component model, fuel metering on.
pub(crate) fn engine() -> Result<&'static Engine> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let mut config = Config::new();
            config.consume_fuel(true);
            Engine::new(&config).map_err(|e| format!("{e:#}"))
        })
        .as_ref()
        .map_err(|e| {
            Error::new(
                ErrorKind::Load,
                format!(
                    "cannot create the wasmtime engine: {e}; this host platform may be unsupported"
                ),
            )
        })
}

/// Compiles component bytes.
fn compile(engine: &Engine, bytes: &[u8]) -> Result<Component> {
    Component::from_binary(engine, bytes).map_err(|e| {
        Error::new(
            ErrorKind::Load,
            format!(
                "cannot compile the policy component ({} bytes): {e:#}; rebuild it for wasm32-wasip2 and check it with `wasm-tools validate`",
                bytes.len()
            ),
        )
    })
}

/// Rejects bytes that are not a component binary, before compiling.
fn check_header(bytes: &[u8]) -> Result<()> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_MODULE: &[u8] = &[1, 0, 0, 0];
    let len = bytes.len();
    match (bytes.get(..4), bytes.get(4..8)) {
        (Some(MAGIC), Some(CORE_MODULE)) => Err(Error::new(
            ErrorKind::Load,
            "the policy is a core WebAssembly module, not a component; build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)",
        )),
        (Some(MAGIC), Some(_)) => Ok(()),
        _ => Err(Error::new(
            ErrorKind::Load,
            format!(
                "the policy ({len} bytes) is not a WebAssembly binary (no \\0asm header); pass the .wasm component built for wasm32-wasip2"
            ),
        )),
    }
}

/// Rejects a component that imports anything outside [`ALLOWED_IMPORTS`],
/// naming every such import.
fn check_imports(engine: &Engine, component: &Component) -> Result<()> {
    let ty = component.component_type();
    let denied: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| !ALLOWED_IMPORTS.iter().any(|p| name.starts_with(p)))
        .map(|name| format!("`{name}`"))
        .collect();
    if denied.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Incompatible,
        format!(
            "the component imports {}, which a policy is not granted; a policy may import only wasi:cli, wasi:io, wasi:clocks and wasi:random (no filesystem, no network): remove the code that uses them (e.g. std::fs, std::net) and rebuild",
            denied.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn policy_is_send_and_sync() {
        assert_send_sync::<super::Policy>();
    }
}
