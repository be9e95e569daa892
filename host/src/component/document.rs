//! Policy documents: the reference component with a declarative document
//! written into its document slot (`docs/policy-documents.md`).
//!
//! The component owns every rule of a document: it validates it (at its
//! first call) and applies it. The host only writes the document's JSON text
//! into the slot of a copy of the reference component, as the Node and
//! Python hosts do, then asks the component who it is: a document that does
//! not validate comes back as the component's own error, naming the bad path.

use crate::component::policy::{Loader, Policy};
use crate::error::{Error, ErrorKind, Result};

/// The 32 bytes that open the reference component's document slot.
pub(crate) const SLOT_MARKER: &[u8; 32] = b"agent-recovery/policy-document/1";
/// The slot's size in bytes: marker, little-endian `u32` length, document text.
pub(crate) const SLOT_BYTES: usize = 16 * 1024;
/// The name `info` reports for a slot whose document does not validate.
const INVALID: &str = "invalid-policy-document";

/// A policy document packed into a copy of the reference component.
#[derive(Clone, Debug)]
pub struct PackedDocument {
    /// The component's bytes: load, pin and hot-swap them like any component.
    pub bytes: Vec<u8>,
    /// The document's `name`.
    pub name: String,
    /// The document's `version`.
    pub version: String,
    /// `sha256:` and the hex sha256 of the canonical document (as the component reports it).
    pub digest: String,
}

fn bad(message: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}

/// A copy of `component` with `json` written into its empty document slot.
fn write_slot(component: &[u8], json: &str) -> Result<Vec<u8>> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| {
        bad(format!(
            "the policy document is not JSON ({e}); see docs/schema/policy.schema.json"
        ))
    })?;
    let text = value.to_string();
    let room = SLOT_BYTES - SLOT_MARKER.len() - 4;
    if text.len() > room {
        return Err(bad(format!(
            "the policy document is {} bytes as JSON, more than the {room} its slot holds; shorten its hints and causes",
            text.len()
        )));
    }
    let mut found = component
        .windows(SLOT_MARKER.len())
        .enumerate()
        .filter(|(_, w)| w == SLOT_MARKER)
        .map(|(i, _)| i);
    let (Some(at), None) = (found.next(), found.next()) else {
        return Err(bad(
            "the component does not have exactly one policy document slot; pack into the reference component".to_owned(),
        ));
    };
    let start = at + SLOT_MARKER.len();
    let mut out = component.to_vec();
    let Some(slot) = out.get_mut(start..start + 4 + room) else {
        return Err(bad(
            "the component's policy document slot is cut short; pack into the reference component"
                .to_owned(),
        ));
    };
    if slot.iter().any(|b| *b != 0) {
        return Err(bad(
            "the component already holds a policy document; pack into the reference component"
                .to_owned(),
        ));
    }
    let len = u32::try_from(text.len()).unwrap_or(u32::MAX).to_le_bytes();
    let (head, rest) = slot.split_at_mut(4);
    head.copy_from_slice(&len);
    if let Some(dst) = rest.get_mut(..text.len()) {
        dst.copy_from_slice(text.as_bytes());
    }
    Ok(out)
}

/// The name, version and digest the packed component reports, or the
/// component's validation error.
fn identity(policy: &Policy) -> Result<(String, String, String)> {
    let info = policy.info()?;
    if info.name == INVALID {
        return Err(bad(format!(
            "invalid policy document: {}",
            info.description
        )));
    }
    let digest = info
        .description
        .rsplit_once("(policy document ")
        .and_then(|(_, d)| d.strip_suffix(')'))
        .unwrap_or_default()
        .to_owned();
    Ok((info.name, info.version, digest))
}

/// Packs a policy document (JSON text) into a copy of the embedded
/// reference component and asks it to validate the document. The error
/// names the bad path of the document and ends with a hint.
///
/// ```
/// let doc = r#"{"format":1,"name":"strict","version":"1.0.0",
///   "overrides":{"codes":{"tool.http.409_conflict":{"class":"permanent"}}},
///   "smoke_tests":[{"observation":{"source":"http","status":409},
///     "context":{"attempt":1},"expect":{"action":"fail","code":"tool.http.409_conflict"}}]}"#;
/// let packed = agent_recovery::pack_document(doc)?;
/// let policy = agent_recovery::Policy::from_bytes(&packed.bytes)?;
/// assert_eq!(policy.info()?.name, "strict");
/// # Ok::<(), agent_recovery::Error>(())
/// ```
pub fn pack_document(json: &str) -> Result<PackedDocument> {
    let bytes = write_slot(Policy::reference_bytes(), json)?;
    let (name, version, digest) = identity(&Policy::from_bytes(&bytes)?)?;
    Ok(PackedDocument {
        bytes,
        name,
        version,
        digest,
    })
}

impl Loader {
    /// Loads the reference component with `json`, a policy document, packed
    /// into it (see [`pack_document`]); a document that does not validate is
    /// refused with the component's error.
    pub fn document(self, json: &str) -> Result<Policy> {
        let bytes = write_slot(Policy::reference_bytes(), json)?;
        let policy = self.bytes(&bytes)?;
        identity(&policy)?;
        Ok(policy)
    }
}
