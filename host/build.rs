//! Builds the guest components this crate embeds or tests against.
//!
//! Every entry of [`GUESTS`] is a workspace package with `crate-type = ["cdylib"]`
//! built for `wasm32-wasip2` in release, in one nested `cargo build` whose target
//! directory is separate from the outer build's (sharing it would deadlock on
//! Cargo's lock). Each artifact's path is exported to the crate as
//! `cargo:rustc-env=<env>=<path>`; `src/policy.rs` embeds the reference policy
//! with `include_bytes!(env!("AGENT_RECOVERY_REFERENCE_WASM"))`.
//!
//! The nested cargo must not inherit what the outer cargo set for *this* build
//! (flags, target, profile, wrappers such as clippy-driver), so that environment
//! is scrubbed before it runs.

use std::collections::BTreeSet;
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const TARGET: &str = "wasm32-wasip2";

/// A guest package built by this script.
struct Guest {
    /// The Cargo package name (`-p`).
    package: &'static str,
    /// The library name Cargo gives the artifact (`<lib>.wasm`).
    lib: &'static str,
    /// The environment variable that carries the artifact path into the crate.
    env: &'static str,
}

/// Guests to build. Add hostile test fixtures and example policies here.
const GUESTS: &[Guest] = &[Guest {
    package: "agent-recovery-policy",
    lib: "agent_recovery_policy",
    env: "AGENT_RECOVERY_REFERENCE_WASM",
}];

/// Environment variables the outer cargo sets for this build that would change
/// the nested build if inherited.
const SCRUB_EXACT: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_INCREMENTAL",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "PROFILE",
    "OPT_LEVEL",
    "DEBUG",
    "NUM_JOBS",
    "RUSTC_LINKER",
];

/// Prefixes of variables scrubbed for the same reason.
const SCRUB_PREFIX: &[&str] = &[
    "CARGO_CFG_",
    "CARGO_FEATURE_",
    "CARGO_PKG_",
    "CARGO_MANIFEST_",
    "CARGO_CRATE_",
    "CARGO_BIN_",
    "CARGO_PROFILE_",
    "CARGO_TARGET_",
    "CARGO_BUILD_",
    "CARGO_LLVM_COV",
    "__CARGO",
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir
        .parent()
        .ok_or("host/ has no parent directory; the host crate must live in the workspace")?
        .to_path_buf();
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("guest").display()
    );
    println!("cargo:rerun-if-changed={}", workspace.join("wit").display());
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("Cargo.lock").display()
    );
    println!("cargo:rerun-if-env-changed=AGENT_RECOVERY_GUEST_TARGET_DIR");

    check_target_installed()?;

    let target_dir = guest_target_dir(&workspace)?;
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--target")
        .arg(TARGET)
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for guest in GUESTS {
        cmd.arg("-p").arg(guest.package);
    }
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if SCRUB_EXACT.contains(&key) || SCRUB_PREFIX.iter().any(|p| key.starts_with(p)) {
            cmd.env_remove(key);
        }
    }
    let status = cmd
        .status()
        .map_err(|e| format!("could not run cargo to build the guest components: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the guest components for {TARGET} failed ({status}); see the cargo output above"
        ));
    }

    let out = target_dir.join(TARGET).join("release");
    let mut deps = BTreeSet::new();
    for guest in GUESTS {
        let wasm = out.join(format!("{}.wasm", guest.lib));
        if !wasm.is_file() {
            return Err(format!(
                "guest `{}` built but {} is missing; is its crate-type cdylib?",
                guest.package,
                wasm.display()
            ));
        }
        read_deps_of(&wasm, &mut deps);
        println!("cargo:rustc-env={}={}", guest.env, wasm.display());
    }
    for dep in deps {
        println!("cargo:rerun-if-changed={dep}");
    }
    Ok(())
}

fn var(name: &str) -> Result<String, String> {
    env::var(name).map_err(|_| format!("{name} is not set; run this build through cargo"))
}

/// Fails with a one-line message when the wasm target's standard library is missing.
fn check_target_installed() -> Result<(), String> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("could not run rustc to find the sysroot: {e}"))?;
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .is_dir()
    {
        return Err(format!(
            "{TARGET} target missing; run `rustup target add {TARGET}`"
        ));
    }
    Ok(())
}

/// `<outer target dir>/wasm-guests`, so every profile and tool (build, test,
/// clippy) shares one guest build; `AGENT_RECOVERY_GUEST_TARGET_DIR` overrides it.
fn guest_target_dir(workspace: &Path) -> Result<PathBuf, String> {
    if let Some(dir) = env::var_os("AGENT_RECOVERY_GUEST_TARGET_DIR") {
        return Ok(PathBuf::from(dir));
    }
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out (or with a <triple>
    // level when cross-compiling the host); find the directory holding CACHEDIR.TAG.
    let out_dir = PathBuf::from(var("OUT_DIR")?);
    let outer = out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace.join("target"));
    Ok(outer.join("wasm-guests"))
}

/// Emits `rerun-if-changed` for every source file the artifact was built from,
/// from Cargo's dep-info (`<artifact>.d`) file.
fn read_deps_of(artifact: &Path, deps: &mut BTreeSet<String>) {
    let Ok(contents) = std::fs::read_to_string(artifact.with_extension("d")) else {
        return;
    };
    for line in contents.lines() {
        let Some(pos) = line.find(": ") else { continue };
        let mut parts = line[pos + 2..].split_whitespace();
        while let Some(part) = parts.next() {
            let mut file = part.to_string();
            while file.ends_with('\\') {
                file.pop();
                file.push(' ');
                match parts.next() {
                    Some(next) => file.push_str(next),
                    None => break,
                }
            }
            deps.insert(file);
        }
    }
}
