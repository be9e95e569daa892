//! Every `tests/*.rs` file of this package runs: it is a module of the
//! `suite` binary (`#[path = "<file>.rs"] mod <file>;` in `tests/suite.rs`) or
//! a `[[test]]` of its own in Cargo.toml. With `autotests = false` cargo
//! builds only what Cargo.toml names, so a new file that is neither would
//! never run; this test names it instead.

use std::path::Path;

/// The `tests/*.rs` files named by a `[[test]]` section of `manifest`
/// (`path = "..."`, or `tests/<name>.rs` when the section gives no path).
fn registered_targets(manifest: &str) -> Vec<String> {
    let mut files = Vec::new();
    for section in manifest.split("\n[").skip(1) {
        let Some(body) = section.strip_prefix("[test]]") else {
            continue;
        };
        let value = |key: &str| {
            body.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        match (value("path"), value("name")) {
            (Some(path), _) => files.push(path),
            (None, Some(name)) => files.push(format!("tests/{name}.rs")),
            (None, None) => {}
        }
    }
    files
}

#[test]
fn every_test_file_is_a_suite_module_or_a_test_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    assert!(
        manifest.contains("autotests = false"),
        "Cargo.toml of {} no longer sets `autotests = false`; update tests/suite_registry.rs",
        root.display()
    );
    let targets = registered_targets(&manifest);
    assert!(
        targets.iter().any(|t| t == "tests/suite.rs"),
        "no [[test]] for tests/suite.rs in {}: {targets:?}",
        root.display()
    );
    let suite = std::fs::read_to_string(root.join("tests/suite.rs")).expect("read tests/suite.rs");
    let mut missing = Vec::new();
    let mut twice = Vec::new();
    for entry in std::fs::read_dir(root.join("tests")).expect("list tests/") {
        let name = entry.expect("a tests/ entry").file_name();
        let name = name.to_string_lossy();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem == "suite" {
            continue;
        }
        let as_module = suite.contains(&format!("#[path = \"{stem}.rs\"]\nmod {stem};"));
        let as_target = targets.contains(&format!("tests/{name}"));
        match (as_module, as_target) {
            (false, false) => missing.push(name.into_owned()),
            (true, true) => twice.push(name.into_owned()),
            _ => {}
        }
    }
    assert!(
        missing.is_empty(),
        "{missing:?} in {}/tests would never run; add `#[path = \"<file>.rs\"] mod <file>;` to \
         tests/suite.rs, or a [[test]] to Cargo.toml when the file needs a process of its own",
        root.display()
    );
    assert!(
        twice.is_empty(),
        "{twice:?} in {}/tests is both a module of tests/suite.rs and a [[test]]; keep one",
        root.display()
    );
}

#[test]
fn a_test_section_without_a_path_names_tests_slash_name() {
    let manifest = "[package]\nname = \"x\"\n\n[[test]]\nname = \"a\"\n\n[[test]]\nname = \"b\"\npath = \"tests/b/main.rs\"\n\n[[bench]]\nname = \"c\"\n";
    assert_eq!(
        registered_targets(manifest),
        ["tests/a.rs", "tests/b/main.rs"]
    );
}
