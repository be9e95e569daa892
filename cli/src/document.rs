//! Policy documents on the command line: `--policy FILE.yaml|FILE.json` and
//! `policy pack`. YAML is read here (serde_norway) and handed to the
//! component as JSON, so the component carries no YAML parser.

use std::path::Path;

use agent_recovery::{Loader, Policy};
use anyhow::Context as _;
use serde_json::{Value, json};

use crate::Usage;
use crate::args::{Global, PolicyPack};

/// Whether `path` names a policy document (by its extension) rather than a component.
pub fn is_document(path: &str) -> bool {
    Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

/// Reads a YAML or JSON file as a JSON value.
pub fn read_value(path: &str) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Usage(format!("cannot read {path}: {e}; check the path")))?;
    parse_value(path, &text)
}

/// The YAML or JSON text of the file `path` (by its extension) as a JSON value.
pub fn parse_value(path: &str, text: &str) -> anyhow::Result<Value> {
    let yaml = Path::new(path)
        .extension()
        .is_some_and(|e| e == "yaml" || e == "yml");
    if yaml {
        serde_norway::from_str(text).map_err(|e| {
            Usage(format!(
                "{path} is not valid YAML: {e}; fix the line it names"
            ))
            .into()
        })
    } else {
        serde_json::from_str(text).map_err(|e| {
            Usage(format!(
                "{path} is not valid JSON: {e}; fix the line it names"
            ))
            .into()
        })
    }
}

/// A policy document file as JSON text; with --require-signature, only when
/// its signature holds.
pub fn read_document(g: &Global, path: &str) -> anyhow::Result<String> {
    let bytes = crate::signing::read_policy(g, path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| Usage(format!("{path} is not UTF-8 text ({e}); save it as UTF-8")))?;
    Ok(parse_value(path, text)?.to_string())
}

/// Loads the reference component with the document at `path` packed into it.
pub fn load(g: &Global, loader: Loader, path: &str) -> anyhow::Result<Policy> {
    let json = read_document(g, path)?;
    loader
        .document(&json)
        .with_context(|| format!("--policy {path}"))
}

/// `policy pack DOC -o OUT`: validate the document, pack it into a copy of
/// the reference component, write it, and print its identity.
pub fn pack(g: &Global, a: PolicyPack) -> anyhow::Result<()> {
    let json = read_document(g, &a.document)?;
    let packed = agent_recovery::pack_document(&json).context(a.document.clone())?;
    let policy = Policy::from_bytes(&packed.bytes).context(a.document.clone())?;
    let verified = policy.verify().context(a.document.clone())?;
    std::fs::write(&a.output, &packed.bytes).map_err(|e| {
        Usage(format!(
            "cannot write {}: {e}; check that the directory exists",
            a.output
        ))
    })?;
    crate::commands::print(
        &json!({
            "name": packed.name,
            "version": packed.version,
            "document": packed.digest,
            "sha256": policy.sha256(),
            "output": a.output,
            "smoke_tests": verified.smoke_cases,
        })
        .to_string(),
    )
}
