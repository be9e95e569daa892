//! The CLI refuses a compiled-component cache directory anyone but its owner
//! could write to (`AGENT_RECOVERY_CACHE_DIR`); the library's rules are tested
//! in `host/tests/hosts_cache.rs`.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

fn with_mode(name: &str, mode: u32) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creates the directory");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
    dir
}

#[test]
fn the_cli_refuses_a_world_writable_agent_recovery_cache_dir() {
    let dir = with_mode("cache-safety-cli", 0o777);
    let obs = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/observations/openai-429-rate-limit.json");
    let out = Command::new(env!("CARGO_BIN_EXE_agent-recovery"))
        .arg("classify")
        .arg(&obs)
        .env("AGENT_RECOVERY_CACHE_DIR", &dir)
        .output()
        .expect("runs the CLI");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the CLI accepted it: {stderr}");
    assert!(
        stderr.contains("refusing the compiled-component cache") && stderr.contains("777"),
        "{stderr}"
    );
}
