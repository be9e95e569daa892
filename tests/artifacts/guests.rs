// Shared by host/build.rs (the reference policy) and tests/artifacts/build.rs
// (the example policy and the hostile fixtures): the guest list and the nested
// cargo build. Each build script `include!`s this file; items one of them does
// not use are allowed to be dead there.

use std::collections::BTreeSet;
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[allow(dead_code)]
const TARGET: &str = "wasm32-wasip2";

/// A guest package built by this script.
#[allow(dead_code)]
struct Guest {
    /// The Cargo package name (`-p`).
    package: &'static str,
    /// The library name Cargo gives the artifact (`<lib>.wasm`).
    lib: &'static str,
    /// The environment variable that carries the artifact path into the crate.
    env: &'static str,
}

/// The reference policy, built alone (its `export` feature must stay on).
#[allow(dead_code)]
const REFERENCE: &[Guest] = &[Guest {
    package: "agent-recovery-policy",
    lib: "agent_recovery_policy",
    env: "AGENT_RECOVERY_REFERENCE_WASM",
}];

/// Custom policies and hostile fixtures: they depend on the reference with
/// `default-features = false`, so they are built in a second invocation with
/// their own target directory, by the dev-only crate `tests/artifacts` (the
/// host's build only names their paths). Add example policies and fixtures here.
#[allow(dead_code)]
const POLICIES: &[Guest] = &[
    Guest {
        package: "payments-policy",
        lib: "payments_policy",
        env: "AGENT_RECOVERY_PAYMENTS_WASM",
    },
    Guest {
        package: "hostile-spin",
        lib: "hostile_spin",
        env: "AGENT_RECOVERY_HOSTILE_SPIN_WASM",
    },
    Guest {
        package: "hostile-membomb",
        lib: "hostile_membomb",
        env: "AGENT_RECOVERY_HOSTILE_MEMBOMB_WASM",
    },
    Guest {
        package: "hostile-panic",
        lib: "hostile_panic",
        env: "AGENT_RECOVERY_HOSTILE_PANIC_WASM",
    },
    Guest {
        package: "hostile-sneaky",
        lib: "hostile_sneaky",
        env: "AGENT_RECOVERY_HOSTILE_SNEAKY_WASM",
    },
    Guest {
        package: "hostile-garbage",
        lib: "hostile_garbage",
        env: "AGENT_RECOVERY_HOSTILE_GARBAGE_WASM",
    },
    Guest {
        package: "hostile-wrong-world",
        lib: "hostile_wrong_world",
        env: "AGENT_RECOVERY_HOSTILE_WRONG_WORLD_WASM",
    },
    Guest {
        package: "hostile-empty-smoke",
        lib: "hostile_empty_smoke",
        env: "AGENT_RECOVERY_HOSTILE_EMPTY_SMOKE_WASM",
    },
    Guest {
        package: "hostile-failing-smoke",
        lib: "hostile_failing_smoke",
        env: "AGENT_RECOVERY_HOSTILE_FAILING_SMOKE_WASM",
    },
    Guest {
        package: "hostile-wrong-contract",
        lib: "hostile_wrong_contract",
        env: "AGENT_RECOVERY_HOSTILE_WRONG_CONTRACT_WASM",
    },
];

/// Environment variables the outer cargo sets for this build that would change
/// the nested build if inherited.
#[allow(dead_code)]
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
#[allow(dead_code)]
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

/// Where cargo puts `guest`'s `.wasm` in the nested build into `target_dir`.
#[allow(dead_code)]
fn artifact_path(target_dir: &Path, guest: &Guest) -> PathBuf {
    target_dir
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", guest.lib))
}

/// Builds `guests` in one nested cargo invocation into `target_dir`, and
/// returns each guest with the path of its `.wasm`.
#[allow(dead_code)]
fn build<'g>(
    workspace: &Path,
    guests: &'g [Guest],
    target_dir: &Path,
) -> Result<Vec<(&'g Guest, PathBuf)>, String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--config")
        .arg(workspace.join("guest").join("release.toml"))
        .arg("--target")
        .arg(TARGET)
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    for guest in guests {
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
        let names: Vec<&str> = guests.iter().map(|g| g.package).collect();
        return Err(format!(
            "building {} for {TARGET} failed ({status}); see the cargo output above",
            names.join(", ")
        ));
    }
    let out = target_dir.join(TARGET).join("release");
    guests
        .iter()
        .map(|guest| {
            let wasm = out.join(format!("{}.wasm", guest.lib));
            if wasm.is_file() {
                Ok((guest, wasm))
            } else {
                Err(format!(
                    "guest `{}` built but {} is missing; is its crate-type cdylib?",
                    guest.package,
                    wasm.display()
                ))
            }
        })
        .collect()
}

/// Writes `<dir>/artifacts.json`: `{"<package>": "<absolute path of its .wasm>", ...}`,
/// for the Node and Python tests. Rewritten only when it changes.
#[allow(dead_code)]
fn write_manifest(dir: &Path, artifacts: &[(&str, PathBuf)]) -> Result<(), String> {
    let mut json = String::from("{\n");
    for (i, (package, wasm)) in artifacts.iter().enumerate() {
        let path = wasm.to_str().ok_or_else(|| {
            format!(
                "the artifact path {} is not UTF-8; use a UTF-8 target directory",
                wasm.display()
            )
        })?;
        let comma = if i + 1 < artifacts.len() { "," } else { "" };
        json.push_str(&format!("  {}: {}{comma}\n", quote(package), quote(path)));
    }
    json.push_str("}\n");
    let path = dir.join("artifacts.json");
    if std::fs::read_to_string(&path).ok().as_deref() == Some(json.as_str()) {
        return Ok(());
    }
    let tmp = dir.join(format!("artifacts.json.{}.tmp", std::process::id()));
    std::fs::write(&tmp, &json)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            format!(
                "cannot write {}: {e}; check the target directory",
                path.display()
            )
        })
}

/// A JSON string literal (the paths and names here need only `\\` and `"` escaped).
#[allow(dead_code)]
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[allow(dead_code)]
fn var(name: &str) -> Result<String, String> {
    env::var(name).map_err(|_| format!("{name} is not set; run this build through cargo"))
}

/// Fails with a one-line message when the wasm target's standard library is missing.
#[allow(dead_code)]
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

/// The target directories of the reference and of the other policies:
/// `<outer target dir>/wasm-guests` and `<outer target dir>/wasm-policies`, so
/// every profile and tool (build, test, clippy) shares one guest build.
/// `AGENT_RECOVERY_GUEST_TARGET_DIR=D` overrides them with `D` and `D/policies`.
#[allow(dead_code)]
fn guest_target_dirs(workspace: &Path) -> Result<(PathBuf, PathBuf), String> {
    if let Some(dir) = env::var_os("AGENT_RECOVERY_GUEST_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        let policies = dir.join("policies");
        return Ok((dir, policies));
    }
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out (or with a <triple>
    // level when cross-compiling the host); find the directory holding CACHEDIR.TAG.
    let out_dir = PathBuf::from(var("OUT_DIR")?);
    let outer = out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| workspace.join("target"));
    Ok((outer.join("wasm-guests"), outer.join("wasm-policies")))
}

/// Emits `rerun-if-changed` for every source file the artifact was built from,
/// from Cargo's dep-info (`<artifact>.d`) file.
#[allow(dead_code)]
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
