//! Stability rules for the registry: codes are never removed or renamed; a
//! retired code stays, deprecated, with a replacement that exists.
//!
//! `tests/registry/published.txt` is the list of published codes. A new code
//! must be appended to it (the second test fails until it is); a published code
//! may never disappear from the registry (the first test fails).

use agent_recovery_policy::Stability;
use agent_recovery_policy::{codes, lookup};
use std::collections::BTreeSet;

fn published() -> Vec<String> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/registry/published.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn published_codes_are_never_removed_or_renamed() {
    let missing: Vec<String> = published()
        .into_iter()
        .filter(|c| lookup(c).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "published codes missing from the registry (deprecate them instead): {missing:?}"
    );
}

#[test]
fn every_code_is_published() {
    let published: BTreeSet<String> = published().into_iter().collect();
    let new: Vec<&str> = codes()
        .iter()
        .map(|c| c.code.as_str())
        .filter(|c| !published.contains(*c))
        .collect();
    assert!(
        new.is_empty(),
        "append these new codes to tests/registry/published.txt: {new:#?}"
    );
}

#[test]
fn deprecated_codes_name_an_existing_replacement() {
    for c in codes() {
        if c.stability == Stability::Deprecated {
            let r = c
                .replaced_by
                .as_deref()
                .unwrap_or_else(|| panic!("{} is deprecated without a replacement", c.code));
            assert!(lookup(r).is_some(), "{} is replaced by unknown {r}", c.code);
        } else {
            assert!(
                c.replaced_by.is_none(),
                "{} has a replacement but is not deprecated",
                c.code
            );
        }
    }
}

#[test]
fn registry_is_consistent() {
    let all = codes();
    let unique: BTreeSet<&str> = all.iter().map(|c| c.code.as_str()).collect();
    assert_eq!(unique.len(), all.len(), "duplicate codes");
    for c in all {
        assert!(
            !c.cause.is_empty() && !c.recovery.is_empty(),
            "{} lacks cause or recovery",
            c.code
        );
        assert!(
            c.recovery.ends_with('.'),
            "{}: recovery must be a sentence",
            c.code
        );
        assert!(
            !c.recovery.contains('\n'),
            "{}: the hint must be one line",
            c.code
        );
        for r in &c.related_codes {
            assert!(lookup(r).is_some(), "{} relates to unknown {r}", c.code);
        }
        assert_eq!(
            c.code.split('.').count(),
            3,
            "{} is not <surface>.<kind>.<detail>",
            c.code
        );
        // Retryable codes are transient; transient codes never fatal.
        if c.retryable {
            assert_eq!(c.class.as_str(), "transient", "{}", c.code);
            assert_ne!(c.severity.as_str(), "fatal", "{}", c.code);
        }
    }
}
