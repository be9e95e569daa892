//! The published contract `agent:recovery@0.1.0` is frozen.
//!
//! `wit/*.wit` is what the host and every policy (the reference, payments-policy,
//! custom policies) build against; `tests/wit-frozen/agent-recovery@0.1.0/` is the
//! snapshot taken when 0.1.0 was published. They must stay byte-identical: a
//! change to a published version is a new version (like `wit/runtime/`, which is
//! `agent:recovery@0.2.0`), never an edit. See docs/wit.md.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn wit_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wit"))
        .collect()
}

#[test]
fn published_0_1_0_is_unchanged() {
    let live = root().join("wit");
    let frozen = root().join("tests/wit-frozen/agent-recovery@0.1.0");
    let (live_files, frozen_files) = (wit_files(&live), wit_files(&frozen));
    assert_eq!(
        live_files, frozen_files,
        "the files of the published package agent:recovery@0.1.0 changed (wit/*.wit vs tests/wit-frozen/agent-recovery@0.1.0/); \
         a published WIT version is never edited: put new interfaces in a new version (wit/runtime/ is 0.2.0)"
    );
    for name in &frozen_files {
        let a = std::fs::read_to_string(live.join(name)).unwrap_or_default();
        let b = std::fs::read_to_string(frozen.join(name)).unwrap_or_default();
        if a != b {
            let line = a
                .lines()
                .zip(b.lines())
                .position(|(x, y)| x != y)
                .unwrap_or_else(|| a.lines().count().min(b.lines().count()))
                + 1;
            panic!(
                "wit/{name} differs from the frozen snapshot of the published agent:recovery@0.1.0 at line {line}; \
                 a published WIT version is never edited: revert the change and put it in a new version \
                 (wit/runtime/, agent:recovery@0.2.0, or a later one)"
            );
        }
    }
    let policy = std::fs::read_to_string(live.join("policy.wit")).unwrap_or_default();
    assert!(
        policy.starts_with("package agent:recovery@0.1.0;"),
        "wit/policy.wit must declare package agent:recovery@0.1.0"
    );
}

#[test]
fn runtime_is_a_new_version() {
    let text = std::fs::read_to_string(root().join("wit/runtime/runtime.wit")).unwrap_or_default();
    assert!(
        text.starts_with("package agent:recovery@0.2.0;"),
        "wit/runtime/runtime.wit must declare package agent:recovery@0.2.0 (0.1.0 is frozen)"
    );
    assert!(
        text.contains("include agent:recovery/recovery-policy@0.1.0;"),
        "the 0.2 world must include the 0.1 world unchanged, so 0.1 hosts keep working with the reference"
    );
}
