//! Policy documents: the reference policy with declarative overrides.
//!
//! A policy document is JSON text (the command line and the hosts turn YAML
//! into it) that changes what the reference decides without any Rust: per-code
//! or per-provider class, action, hint and severity; attempts, base and cap
//! per call kind; the run's retry budget; the circuit-breaker thresholds;
//! whether a caller's `config` may loosen them; fallback chains by target; and
//! the dead-letter owner, runbook and depth threshold by tool. Its schema is
//! `docs/schema/policy.schema.json`; its rules are in `docs/policy-documents.md`.
//!
//! [`Document::parse`] validates the whole document before anything uses it;
//! every error names the bad path, e.g.
//! `overrides.codes["llm.http.409_conflict"].action: unknown action "retyr"; expected one of ...`.
//! [`Document::digest`] is the sha256 of its canonical form (keys sorted, no
//! whitespace), so one document written as YAML or JSON, in any key order,
//! pins to one digest.

mod apply;
mod embedded;
mod parse;

pub use embedded::{Embedded, SLOT_BYTES, SLOT_MARKER, embedded};
pub use parse::{MAX_DOCUMENT, canonical};

use crate::config::ConfigOverrides;
use crate::error::{ErrorKind, PolicyError};
use crate::model::{Action, ErrorClass, Severity};
use crate::runtime::config::DeadLetterConfig;
use std::collections::BTreeMap;

/// The document format this crate reads (the `format` member).
pub const FORMAT: u32 = 1;

/// How a caller's decide-context `config` combines with the document's parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CallerConfig {
    /// The caller's members win over the document's (the reference's rule).
    #[default]
    Override,
    /// The document's parameters are limits: a caller may tighten them
    /// (fewer attempts, smaller delays and budget, a breaker that opens
    /// sooner and stays open longer), never loosen them.
    Clamp,
}

/// What a document changes about one code.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodeOverride {
    /// The recovery class (its `retryable` follows: only transient retries).
    pub class: Option<ErrorClass>,
    /// The action, when it differs from the class's own.
    pub action: Option<Action>,
    /// The hint an agent reads, in envelopes and in the registry.
    pub hint: Option<&'static str>,
    /// The severity (`fatal` escalates).
    pub severity: Option<Severity>,
    /// What the registry says causes the code.
    pub cause: Option<&'static str>,
}

/// A parsed, validated policy document.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The policy's name.
    pub name: String,
    /// The document's version (semver), reported as the policy's version.
    pub version: String,
    /// One line on what the policy is for.
    pub description: String,
    /// The parameters it sets (attempts/base/cap per call kind, retry budget, breaker).
    pub limits: ConfigOverrides,
    /// How a caller's `config` combines with [`limits`](Self::limits).
    pub caller_config: CallerConfig,
    /// The idempotency assumed when neither the context nor the observation says.
    pub assume_idempotent: Option<bool>,
    /// Per-code overrides, by full code.
    pub codes: BTreeMap<String, CodeOverride>,
    /// Per-provider overrides (the envelope's `upstream.provider`), by
    /// provider then full code; they win over [`codes`](Self::codes).
    pub providers: BTreeMap<String, BTreeMap<String, CodeOverride>>,
    /// Fallback chains by target: the targets a step tries, in order, after
    /// that one fails with a `fallback` decision, when the step names none.
    pub fallbacks: BTreeMap<String, Vec<String>>,
    /// The dead-letter owner, runbook and depth threshold by tool: a full
    /// tool name, a prefix `payments.*`, or `*`; see [`dead_letter_for`].
    pub dead_letters: BTreeMap<String, DeadLetterConfig>,
    /// The smoke set a host runs before activating the policy (JSON array).
    pub smoke_tests: String,
    digest: String,
}

impl Document {
    /// `sha256:` and the hex sha256 of the canonical document.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// The entry of a `dead_letters` table (a document's, as a decision carries
/// it) for `tool`: the tool's own name, else the longest prefix pattern
/// `prefix.*` whose prefix and dot begin the tool's name, else `*`.
pub fn dead_letter_for<'t, T>(table: &'t BTreeMap<String, T>, tool: &str) -> Option<&'t T> {
    table.get(tool).or_else(|| {
        table
            .iter()
            .filter_map(|(k, v)| {
                let prefix = k.strip_suffix('*')?;
                (prefix.is_empty() || (prefix.ends_with('.') && tool.starts_with(prefix)))
                    .then_some((prefix.len(), v))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, v)| v)
    })
}

/// A copy of `component` (a reference component with an empty document
/// slot) with `document` (JSON text) validated and packed into its slot as
/// canonical JSON. Returns the new component's bytes and the document.
pub fn pack(component: &[u8], document: &str) -> Result<(Vec<u8>, Document), PolicyError> {
    let value: serde_json::Value =
        serde_json::from_str(document).map_err(|e| PolicyError::json("policy document", &e))?;
    let doc = Document::from_value(&value)?;
    let text = parse::canonical(&value);
    let room = SLOT_BYTES - SLOT_MARKER.len() - 4;
    if text.len() > room {
        return Err(PolicyError::new(
            ErrorKind::TooLarge,
            format!(
                "the policy document is {} bytes as canonical JSON, more than the {room} its slot holds; shorten its hints and causes",
                text.len()
            ),
        ));
    }
    let found: Vec<usize> = component
        .windows(SLOT_MARKER.len())
        .enumerate()
        .filter(|(_, w)| *w == SLOT_MARKER)
        .map(|(i, _)| i)
        .collect();
    let at = match found.as_slice() {
        [at] => *at + SLOT_MARKER.len(),
        _ => {
            return Err(PolicyError::new(
                ErrorKind::InvalidArgument,
                format!(
                    "the component has {} policy document slots, not one; pack into the reference component (agent-recovery's own)",
                    found.len()
                ),
            ));
        }
    };
    let mut out = component.to_vec();
    let len = u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes();
    let Some(slot) = out.get_mut(at..at + 4 + room) else {
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            "the component's policy document slot is cut short; pack into the reference component (agent-recovery's own)",
        ));
    };
    if slot.iter().any(|b| *b != 0) {
        return Err(PolicyError::new(
            ErrorKind::InvalidArgument,
            "the component already holds a policy document; pack into the reference component (agent-recovery's own)",
        ));
    }
    let (head, rest) = slot.split_at_mut(4);
    head.copy_from_slice(&len);
    if let Some(dst) = rest.get_mut(..text.len()) {
        dst.copy_from_slice(text.as_bytes());
    }
    Ok((out, doc))
}
