//! The committed documentation is exactly what the policy generates.
//! Regenerate with `UPDATE_DOCS=1 cargo test -p agent-recovery-policy --test docs`
//! (or `agent-recovery registry --format markdown > docs/errors.md`).

use agent_recovery_policy::docs;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn check(rel: &str, generated: &str) {
    let path = root().join(rel);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{rel} differs from the generated text; run `UPDATE_DOCS=1 cargo test -p agent-recovery-policy --test docs` and commit it"
    );
}

#[test]
fn errors_md_is_generated() {
    check("docs/errors.md", &docs::markdown());
}

#[test]
fn mcp_errors_block_is_generated() {
    check(
        "docs/mcp-errors-block.md",
        &docs::errors_block(&["tool.".to_owned()]),
    );
}

#[test]
fn schemas_are_generated() {
    for name in ["envelope", "decision", "code-info"] {
        check(
            &format!("docs/schema/{name}.schema.json"),
            &(docs::json_schema(name).unwrap() + "\n"),
        );
    }
    assert!(docs::json_schema("nope").is_none());
}
