//! Builds the reference policy this crate embeds, and names the paths of the
//! components its tests, examples and benches load.
//!
//! Only the reference is built here: the example policy and the hostile
//! fixtures are built by the dev-only crate `tests/artifacts` (a
//! dev-dependency, as wasmtime builds its `crates/test-programs/artifacts`),
//! so building the host for use builds no test fixture. This script still
//! exports their paths (`AGENT_RECOVERY_PAYMENTS_WASM`, ...) for `env!` in
//! tests; the files exist once `tests/artifacts` is built, which cargo does
//! before any test, example or bench of this crate.
//!
//! Every guest is a workspace package with `crate-type = ["cdylib"]` built for
//! `wasm32-wasip2` in release, by nested `cargo build`s whose target directories
//! are separate from the outer build's (sharing it would deadlock on Cargo's
//! lock). Each artifact's path is exported to the crate as
//! `cargo:rustc-env=<env>=<path>`; `src/policy.rs` embeds the reference policy
//! with `include_bytes!(env!("AGENT_RECOVERY_REFERENCE_WASM"))`, the tests load
//! the others.
//!
//! # Two invocations, two target directories
//!
//! The reference ([`REFERENCE`]) exports itself through its default `export`
//! feature. The custom policies and hostile fixtures ([`POLICIES`]) depend on
//! it with `default-features = false` and export their own implementation.
//! Cargo unifies features within one invocation and also writes the cdylib of
//! a dependency, so building them together (or into the same directory) would
//! overwrite the reference's `.wasm` with an export-less one. They are built
//! in a second invocation into `<target>/wasm-policies`.
//!
//! # Finding the artifacts from other languages
//!
//! `<target>/wasm-policies/artifacts.json` maps each package name (and
//! `agent-recovery-policy` for the reference) to the absolute path of its
//! `.wasm`; `tests/artifacts/build.rs` writes it and the Node and Python
//! tests read it.
//!
//! The nested cargo must not inherit what the outer cargo set for *this* build
//! (flags, target, profile, wrappers such as clippy-driver), so that environment
//! is scrubbed before it runs.

include!("../tests/artifacts/guests.rs");

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
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("tests/artifacts/guests.rs").display()
    );
    println!("cargo:rerun-if-env-changed=AGENT_RECOVERY_GUEST_TARGET_DIR");

    check_target_installed()?;

    let (reference_dir, policies_dir) = guest_target_dirs(&workspace)?;
    let mut deps = BTreeSet::new();
    for (guest, wasm) in build(&workspace, REFERENCE, &reference_dir)? {
        read_deps_of(&wasm, &mut deps);
        println!("cargo:rustc-env={}={}", guest.env, wasm.display());
    }
    // Built by tests/artifacts (a dev-dependency): only their paths here.
    for guest in POLICIES {
        let wasm = artifact_path(&policies_dir, guest);
        println!("cargo:rustc-env={}={}", guest.env, wasm.display());
    }
    for dep in deps {
        println!("cargo:rerun-if-changed={dep}");
    }
    Ok(())
}
