//! The compiled-component cache refuses a directory anyone but its owner could
//! write to (its entries are loaded as native code), and creates a missing one
//! owner-only. The rules are in `host/src/component/cache.rs` and docs/hosts.md.

#![cfg(unix)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::process::Command;

use agent_recovery::{ErrorKind, Policy};

fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn with_mode(name: &str, mode: u32) -> PathBuf {
    let dir = fresh_dir(name);
    std::fs::create_dir_all(&dir).expect("creates the directory");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).expect("chmod");
    dir
}

#[test]
fn a_missing_cache_directory_is_created_owner_only() {
    let dir = fresh_dir("cache-safety-new").join("nested");
    Policy::loader()
        .cache_dir(&dir)
        .bytes(Policy::reference_bytes())
        .expect("compiles and caches");
    let meta = std::fs::metadata(&dir).expect("the cache directory exists");
    assert_eq!(meta.mode() & 0o777, 0o700);
    assert_eq!(std::fs::read_dir(&dir).expect("readable").count(), 1);
}

#[test]
fn a_world_or_group_writable_cache_directory_is_refused() {
    for (name, mode) in [("cache-safety-777", 0o777), ("cache-safety-770", 0o770)] {
        let dir = with_mode(name, mode);
        let err = Policy::loader()
            .cache_dir(&dir)
            .bytes(Policy::reference_bytes())
            .expect_err("an unsafe cache directory is refused");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(
            err.message().contains("writable by its group or by others")
                && err.message().contains(&format!("{mode:03o}"))
                && err.message().contains("chmod 700"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_dir(&dir).expect("readable").count(),
            0,
            "nothing written"
        );
    }
    // 0755 is fine: others may read, not write.
    let dir = with_mode("cache-safety-755", 0o755);
    Policy::loader()
        .cache_dir(&dir)
        .bytes(Policy::reference_bytes())
        .expect("a 0755 directory is usable");
}

#[test]
fn a_cache_directory_of_another_user_is_refused() {
    // As root, make a directory owned by `nobody`; otherwise `/` is already
    // owned by another user (root).
    let me = std::fs::metadata(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp")
        .uid();
    let dir = if me == 0 {
        let dir = with_mode("cache-safety-other-owner", 0o700);
        let status = Command::new("chown")
            .arg("65534")
            .arg(&dir)
            .status()
            .expect("runs chown");
        assert!(status.success(), "chown 65534 failed");
        dir
    } else {
        PathBuf::from("/")
    };
    let err = Policy::loader()
        .cache_dir(&dir)
        .bytes(Policy::reference_bytes())
        .expect_err("a directory of another user is refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("not by this user"), "{err}");
}
