//! The CLI installed by `scripts/package-cli.sh` loads the reference policy
//! precompiled into `<prefix>/lib/agent-recovery` instead of compiling it,
//! and decides exactly as the compiling program does; an artifact wasmtime
//! refuses is skipped.
//!
//! Which path a start took is read from the compile cache: a start that
//! compiles the reference writes its entry into the (empty) cache directory,
//! a start that loaded the precompiled artifact compiles nothing and so
//! leaves the directory uncreated.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;

use agent_recovery::Policy;
use sha2::{Digest, Sha256};

const ARGS: &[&str] = &["decide", "--attempt", "1", "--seed", "7", "--json"];

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn observation() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/observations/openai-429-rate-limit.json")
}

/// `<sha256 of the embedded reference>.cwasm`, computed here.
fn artifact_name() -> String {
    let digest = Sha256::digest(Policy::reference_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.cwasm")
}

/// A prefix packaged once by `scripts/package-cli.sh` from the binary under
/// test; the tests that change it copy it first.
static PACKAGED: LazyLock<PathBuf> = LazyLock::new(|| {
    let prefix = tmp("precompiled-prefix");
    // An artifact of another build, which packaging must remove, and a file
    // that is not an artifact, which it must leave.
    let lib = prefix.join("lib/agent-recovery");
    std::fs::create_dir_all(&lib).expect("creates lib/agent-recovery");
    let stale = lib.join(format!("{}.cwasm", "ab".repeat(32)));
    std::fs::write(&stale, b"an artifact of an earlier build").expect("writes");
    std::fs::write(lib.join("NOTES"), b"kept").expect("writes");

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/package-cli.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(&prefix)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_agent-recovery"))
        .output()
        .expect("runs scripts/package-cli.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "package-cli.sh failed: {stderr}");
    let artifact = lib.join(artifact_name());
    let printed: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("precompile prints one JSON line");
    let bytes = printed["bytes"].clone();
    let printed = PathBuf::from(printed["path"].as_str().expect("the path"));
    assert_eq!(
        printed.canonicalize().expect("the printed path exists"),
        artifact
            .canonicalize()
            .expect("PREFIX/lib/agent-recovery/<sha256>.cwasm exists")
    );
    assert_eq!(
        bytes,
        std::fs::metadata(&artifact).expect("the artifact").len()
    );
    assert!(!stale.exists(), "the earlier build's artifact is removed");
    assert!(lib.join("NOTES").exists(), "other files are kept");
    prefix
});

/// Runs `decide` with `exe`, an empty cache directory `cache` and `env`;
/// returns the output and whether the start compiled (wrote a cache entry).
fn decide(exe: &Path, cache: &Path, env: &[(&str, &str)]) -> (Output, bool) {
    let out = Command::new(exe)
        .args(ARGS)
        .arg(observation())
        .env("AGENT_RECOVERY_CACHE_DIR", cache)
        .env_remove("AGENT_RECOVERY_PRECOMPILED")
        .envs(env.iter().copied())
        .output()
        .expect("runs agent-recovery");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
    let entries = std::fs::read_dir(cache).map_or(0, |d| d.count());
    (out, entries > 0)
}

/// The decision of the program that compiles the reference: the binary
/// cargo built, with the lookup off (computed once).
fn compiled_decision() -> &'static [u8] {
    static DECISION: LazyLock<Vec<u8>> = LazyLock::new(|| {
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_agent-recovery"));
        let cache = tmp("precompiled-cache-baseline");
        let (out, compiled) = decide(&exe, &cache, &[("AGENT_RECOVERY_PRECOMPILED", "0")]);
        assert!(
            compiled,
            "the unpackaged program compiled and cached the reference"
        );
        out.stdout
    });
    &DECISION
}

#[test]
fn a_packaged_cli_decides_from_the_precompiled_reference_byte_for_byte() {
    let exe = PACKAGED.join("bin/agent-recovery");
    let cache = tmp("precompiled-cache-packaged");
    let (packaged, compiled) = decide(&exe, &cache, &[]);
    assert!(
        !compiled && !cache.exists(),
        "the packaged program compiled the reference instead of loading its artifact"
    );
    let expected = compiled_decision();
    assert_eq!(
        String::from_utf8_lossy(&packaged.stdout),
        String::from_utf8_lossy(expected)
    );
    assert!(packaged.stdout.starts_with(br#"{"action":"retry""#));

    // AGENT_RECOVERY_PRECOMPILED=0 (as for Python) skips the artifact.
    let (off, compiled) = decide(
        &exe,
        &tmp("precompiled-cache-off"),
        &[("AGENT_RECOVERY_PRECOMPILED", "off")],
    );
    assert!(
        compiled,
        "AGENT_RECOVERY_PRECOMPILED=off still loaded the artifact"
    );
    assert_eq!(off.stdout, expected);
}

#[test]
fn a_corrupt_or_foreign_artifact_is_refused_and_the_reference_compiled() {
    let packaged = std::fs::read(PACKAGED.join("lib/agent-recovery").join(artifact_name()))
        .expect("reads the packaged artifact");
    // From another wasmtime: the same artifact with the version at the start
    // of its engine section (a length byte, then the major version) changed.
    let major = wasmtime_major();
    let mut header = vec![u8::try_from(major.len()).expect("a short version")];
    header.extend_from_slice(major.as_bytes());
    let at = find(&packaged, &header).expect("the header names the wasmtime version") + 1;
    assert!(at < 256, "the version is in the engine section, the first");
    let mut foreign = packaged.clone();
    foreign[at] = if foreign[at] == b'9' {
        b'1'
    } else {
        foreign[at] + 1
    };
    let mut truncated = packaged.clone();
    truncated.truncate(packaged.len() / 2);
    let garbage = b"\x7fELF not an artifact".to_vec();

    let expected = compiled_decision();
    for (case, bytes) in [
        ("foreign", foreign),
        ("truncated", truncated),
        ("garbage", garbage),
    ] {
        let prefix = tmp(&format!("precompiled-prefix-{case}"));
        std::fs::create_dir_all(prefix.join("bin")).expect("creates bin");
        std::fs::create_dir_all(prefix.join("lib/agent-recovery")).expect("creates lib");
        let exe = prefix.join("bin/agent-recovery");
        std::fs::copy(PACKAGED.join("bin/agent-recovery"), &exe).expect("copies the program");
        std::fs::write(
            prefix.join("lib/agent-recovery").join(artifact_name()),
            bytes,
        )
        .expect("writes the artifact");
        let (out, compiled) = decide(&exe, &tmp(&format!("precompiled-cache-{case}")), &[]);
        assert!(compiled, "{case}: the artifact was not refused");
        assert_eq!(out.stdout, expected, "{case}");
    }
}

#[test]
fn an_artifact_beside_the_program_is_loaded_too() {
    // A flat layout: the program and its artifact in one directory.
    let dir = tmp("precompiled-flat");
    std::fs::create_dir_all(&dir).expect("creates the directory");
    let exe = dir.join("agent-recovery");
    std::fs::copy(PACKAGED.join("bin/agent-recovery"), &exe).expect("copies the program");
    std::fs::copy(
        PACKAGED.join("lib/agent-recovery").join(artifact_name()),
        dir.join(artifact_name()),
    )
    .expect("copies the artifact");
    let cache = tmp("precompiled-cache-flat");
    let (out, compiled) = decide(&exe, &cache, &[]);
    assert!(!compiled, "the artifact beside the program was not loaded");
    assert_eq!(out.stdout, compiled_decision());
}

/// The major version of the wasmtime the host links, from Cargo.lock.
fn wasmtime_major() -> String {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
        .expect("reads Cargo.lock");
    let at = lock
        .find("name = \"wasmtime\"\nversion = \"")
        .expect("Cargo.lock has wasmtime");
    let rest = &lock[at + "name = \"wasmtime\"\nversion = \"".len()..];
    rest.split('.').next().expect("a version").to_string()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
