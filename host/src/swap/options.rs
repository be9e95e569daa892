//! [`SwapOptions`]: what a candidate policy must pass before it is activated.

use crate::error::{Error, ErrorKind, Result};
use crate::signing::TrustedKey;

/// What a candidate policy must pass before a [`PolicyHandle`](crate::PolicyHandle)
/// activates it. The checks run in this order, and the first failure refuses
/// the candidate (the active policy stays):
///
/// 1. **digest**: with [`sha256`](Self::sha256) set, the bytes must hash to
///    it; checked before anything is compiled.
/// 2. **signature**: with [`require_signature`](Self::require_signature) set,
///    the bytes must carry a valid signature by one of the trusted keys (the
///    file's `.sig`, see [`signing`](crate::signing)); checked before anything
///    is compiled.
/// 3. **load**: it compiles, implements the world `agent:recovery/recovery-policy@0.1.0`,
///    and imports nothing outside `wasi:cli`, `wasi:io`, `wasi:clocks`, `wasi:random`.
/// 4. **verify** ([`Policy::verify`](crate::Policy::verify)): it speaks contract
///    0.1.x and passes its own smoke set, under the same limits as real calls
///    (so a runaway policy is refused here: it runs out of fuel).
/// 5. optionally, the **reference smoke set** as well.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`sha256`](Self::sha256) | none: any digest |
/// | [`require_signature`](Self::require_signature) | none: no signature needed |
/// | [`verify`](Self::verify) | `true` |
/// | [`reference_smoke_set`](Self::reference_smoke_set) | `false` |
///
/// ```
/// use agent_recovery::SwapOptions;
/// let pinned = SwapOptions::default().sha256(&"ab".repeat(32))?;
/// assert!(SwapOptions::default().sha256("not hex").is_err());
/// # let _ = pinned;
/// # Ok::<(), agent_recovery::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapOptions {
    sha256: Option<String>,
    signature: Option<Vec<TrustedKey>>,
    verify: bool,
    reference_smoke_set: bool,
}

impl Default for SwapOptions {
    fn default() -> Self {
        SwapOptions {
            sha256: None,
            signature: None,
            verify: true,
            reference_smoke_set: false,
        }
    }
}

impl SwapOptions {
    /// Pins the candidate to a sha256 digest: 64 hex digits, any case, with
    /// or without a `sha256:` prefix. Bytes with another digest are refused
    /// with [`ErrorKind::DigestMismatch`] before they are compiled.
    pub fn sha256(mut self, hex: &str) -> Result<Self> {
        let digits = hex.strip_prefix("sha256:").unwrap_or(hex);
        if digits.len() != 64 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            let shown: String = hex.chars().take(80).collect();
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "invalid sha256 {shown:?}: expected 64 hex digits; compute it with `sha256sum policy.wasm`"
                ),
            ));
        }
        self.sha256 = Some(digits.to_ascii_lowercase());
        Ok(self)
    }

    /// Requires a valid signature by one of `trusted` (Ed25519, the file's
    /// `.sig`; see [`signing`](crate::signing)). A candidate without one, or
    /// with one that is malformed, by another key, or over other bytes, is
    /// refused with [`ErrorKind::Signature`] before it is compiled.
    ///
    /// [`PolicyHandle::swap_file`](crate::PolicyHandle::swap_file) and
    /// [`HandleBuilder::file`](crate::HandleBuilder::file) read `FILE.sig`;
    /// bytes need [`PolicyHandle::swap_signed_bytes`](crate::PolicyHandle::swap_signed_bytes).
    /// An empty `trusted` refuses every candidate (`unknown-key`).
    pub fn require_signature(mut self, trusted: impl IntoIterator<Item = TrustedKey>) -> Self {
        self.signature = Some(trusted.into_iter().collect());
        self
    }

    /// The trusted keys, when a signature is required.
    pub fn trusted_keys(&self) -> Option<&[TrustedKey]> {
        self.signature.as_deref()
    }

    /// Whether to run [`Policy::verify`](crate::Policy::verify) (contract and
    /// smoke set). `false` activates a policy unchecked: only for tests, or to
    /// force a policy in by hand.
    pub fn verify(mut self, verify: bool) -> Self {
        self.verify = verify;
        self
    }

    /// Whether the candidate must also pass the reference policy's smoke set,
    /// for policies meant to decide like the reference on its basic cases.
    pub fn reference_smoke_set(mut self, required: bool) -> Self {
        self.reference_smoke_set = required;
        self
    }

    /// The pinned digest (lowercase hex), if any.
    pub fn pinned_sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }

    /// Whether [`Policy::verify`](crate::Policy::verify) runs.
    pub fn verifies(&self) -> bool {
        self.verify
    }

    /// Whether the reference smoke set runs too.
    pub fn requires_reference_smoke_set(&self) -> bool {
        self.reference_smoke_set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_accepts_hex_in_any_case_with_or_without_prefix() {
        let lower = "0123456789abcdef".repeat(4);
        for given in [
            lower.clone(),
            lower.to_uppercase(),
            format!("sha256:{lower}"),
        ] {
            let options = SwapOptions::default().sha256(&given).expect(&given);
            assert_eq!(options.pinned_sha256(), Some(lower.as_str()));
        }
    }

    #[test]
    fn sha256_refuses_what_is_not_a_digest() {
        for bad in [
            "",
            "abc",
            &"g".repeat(64),
            &"a".repeat(63),
            &"a".repeat(65),
            "sha256:",
        ] {
            let err = SwapOptions::default().sha256(bad).expect_err(bad);
            assert_eq!(err.kind(), ErrorKind::InvalidArgument);
            assert!(err.message().contains("64 hex digits"), "{err}");
        }
    }
}
