//! Builds the test fixtures of the workspace for `wasm32-wasip2`: the example
//! policy (payments-policy) and the hostile components (`tests/hostile/`), into
//! `<target>/wasm-policies/`, and writes `<target>/wasm-policies/artifacts.json`
//! (package name -> absolute path of its `.wasm`, the reference included) for
//! the Node and Python tests.
//!
//! A dev-only crate, as wasmtime's `crates/test-programs/artifacts`: the host
//! crate depends on it only as a dev-dependency, so building the host for use
//! builds only the reference policy. The shared build code (the guest list,
//! the nested cargo invocation and why its environment is scrubbed) is in
//! `guests.rs`, also included by `host/build.rs`.

include!("guests.rs");

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
        .ancestors()
        .nth(2)
        .ok_or("tests/artifacts/ must live two levels below the workspace root")?
        .to_path_buf();
    for dir in [
        "guest",
        "wit",
        "Cargo.lock",
        "examples/payments-policy",
        "tests/hostile",
        "tests/artifacts/guests.rs",
    ] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=AGENT_RECOVERY_GUEST_TARGET_DIR");

    check_target_installed()?;

    let (reference_dir, policies_dir) = guest_target_dirs(&workspace)?;
    let mut deps = BTreeSet::new();
    let mut artifacts = Vec::new();
    // The reference is built by host/build.rs into its own directory; listed here for Node and Python.
    for guest in REFERENCE {
        artifacts.push((guest.package, artifact_path(&reference_dir, guest)));
    }
    for (guest, wasm) in build(&workspace, POLICIES, &policies_dir)? {
        read_deps_of(&wasm, &mut deps);
        println!("cargo:rustc-env={}={}", guest.env, wasm.display());
        artifacts.push((guest.package, wasm));
    }
    write_manifest(&policies_dir, &artifacts)?;
    // Written again if someone deletes it.
    println!(
        "cargo:rerun-if-changed={}",
        policies_dir.join("artifacts.json").display()
    );
    for dep in deps {
        println!("cargo:rerun-if-changed={dep}");
    }
    Ok(())
}
