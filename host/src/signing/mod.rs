//! Signed policies: a detached Ed25519 signature beside a policy file, checked
//! against the public keys the operator trusts before the policy is loaded.
//!
//! A policy file `FILE` (a component or a policy document) is signed by
//! `FILE.sig`, a JSON object:
//!
//! ```json
//! {"alg":"ed25519","key":"sha256:<hex>","sig":"<base64>"}
//! ```
//!
//! - `alg`: `ed25519` (RFC 8032), the only one accepted;
//! - `key`: the signer's key id, `sha256:` and the hex sha256 of the public
//!   key's SubjectPublicKeyInfo DER (what `openssl pkey -pubin -outform DER` prints);
//! - `sig`: the base64 (standard alphabet, padded) of the 64-byte signature
//!   over the exact bytes of `FILE`.
//!
//! The Rust, Node and Python hosts check it the same way, in this order, and
//! refuse with [`ErrorKind::Signature`](crate::ErrorKind::Signature) and a
//! [`SignatureProblem`] at the first failure: no `.sig` (`missing`), not that
//! JSON shape (`malformed`), another `alg` (`unsupported-alg`), a key id that
//! is not trusted (`unknown-key`), a signature that does not verify with that
//! key over these bytes (`bad-signature`). The shared vectors in
//! `tests/vectors/signing/` pin every case.
//!
//! ```
//! use agent_recovery::signing::{self, SigningKey, TrustedKey};
//!
//! let key = SigningKey::from_seed([7; 32]);
//! let trusted = TrustedKey::from_pem(&key.public_pem())?;
//! let policy = b"format: 1\nname: checkout\n";
//! let sig = signing::sign(policy, &key);
//! assert_eq!(signing::verify(policy, Some(sig.as_bytes()), &[trusted.clone()], "policy.yaml")?, key.id());
//! let err = signing::verify(b"format: 2\nname: checkout\n", Some(sig.as_bytes()), &[trusted], "policy.yaml")
//!     .unwrap_err();
//! assert_eq!(err.problem(), signing::SignatureProblem::BadSignature);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod keys;
mod verify;

pub use keys::{SigningKey, TrustedKey};
pub(crate) use verify::read_signature;
pub use verify::{SignatureError, SignatureProblem, read_signed, sign, signature_path, verify};
