//! Policy documents: the reference component with a declarative document
//! packed into its slot (`docs/policy-documents.md`).

use crate::component::policy::{Loader, Policy};
use crate::error::{Error, ErrorKind, Result};

/// A policy document packed into a copy of the reference component.
#[derive(Clone, Debug)]
pub struct PackedDocument {
    /// The component's bytes: load, pin and hot-swap them like any component.
    pub bytes: Vec<u8>,
    /// The document's `name`.
    pub name: String,
    /// The document's `version`.
    pub version: String,
    /// `sha256:` and the hex sha256 of the canonical document.
    pub digest: String,
}

/// Validates a policy document (JSON text) and packs it into a copy of the
/// embedded reference component. The error names the bad path of the
/// document and ends with a hint.
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
    let (bytes, doc) = agent_recovery_policy::document::pack(Policy::reference_bytes(), json)
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("invalid policy document: {}", e.message),
            )
        })?;
    Ok(PackedDocument {
        bytes,
        digest: doc.digest().to_owned(),
        name: doc.name,
        version: doc.version,
    })
}

impl Loader {
    /// Loads the reference component with `json`, a policy document, packed
    /// into it (see [`pack_document`]).
    pub fn document(self, json: &str) -> Result<Policy> {
        let packed = pack_document(json)?;
        self.bytes(&packed.bytes)
    }
}
