//! Signing and checking the detached `.sig` of a policy file.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Verifier as _};

use super::keys::{SigningKey, TrustedKey};
use crate::error::{Error, ErrorKind};

/// The only signature algorithm accepted.
const ALG: &str = "ed25519";

/// The largest `.sig` file read (a real one is about 150 bytes).
const MAX_SIG_BYTES: u64 = 64 << 10;

/// Why a signature was refused; the first failing check, in this order.
///
/// New problems may be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SignatureProblem {
    /// There is no `.sig` (or, for bytes, none was given).
    Missing,
    /// The `.sig` is not `{"alg","key","sig"}` with a `sha256:` key id and a
    /// base64 64-byte signature.
    Malformed,
    /// `alg` is not `ed25519`.
    UnsupportedAlg,
    /// The key id is not one of the trusted keys.
    UnknownKey,
    /// The signature does not verify with that key over these bytes: the file
    /// (or its `.sig`) changed after signing.
    BadSignature,
}

impl SignatureProblem {
    /// A short stable name, the same in every host: `missing`, `malformed`,
    /// `unsupported-alg`, `unknown-key`, `bad-signature`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::UnsupportedAlg => "unsupported-alg",
            Self::UnknownKey => "unknown-key",
            Self::BadSignature => "bad-signature",
        }
    }
}

/// A refused signature: its [`problem`](Self::problem), and an [`Error`] of
/// kind [`ErrorKind::Signature`] whose message names the file and ends with a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureError {
    problem: SignatureProblem,
    error: Error,
}

impl SignatureError {
    fn new(problem: SignatureProblem, message: String) -> Self {
        SignatureError {
            problem,
            error: Error::new(ErrorKind::Signature, message),
        }
    }

    /// Why it was refused.
    pub fn problem(&self) -> SignatureProblem {
        self.problem
    }

    /// The message (names the file, ends with a hint).
    pub fn message(&self) -> &str {
        self.error.message()
    }
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for SignatureError {}

impl From<SignatureError> for Error {
    fn from(e: SignatureError) -> Self {
        e.error
    }
}

/// Where the signature of `path` is: `path` with `.sig` appended (`policy.wasm.sig`).
pub fn signature_path(path: impl AsRef<Path>) -> PathBuf {
    let mut name = path.as_ref().as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// Signs `bytes` with `key`; returns the `.sig` JSON text (one line, no newline).
pub fn sign(bytes: &[u8], key: &SigningKey) -> String {
    serde_json::json!({
        "alg": ALG,
        "key": key.id(),
        "sig": STANDARD.encode(key.sign_bytes(bytes)),
    })
    .to_string()
}

/// Checks `signature` (the `.sig` text, `None` when there is none) over
/// `bytes` against `trusted`; returns the id of the key that signed.
/// `label` names the file in messages.
pub fn verify(
    bytes: &[u8],
    signature: Option<&[u8]>,
    trusted: &[TrustedKey],
    label: &str,
) -> Result<String, SignatureError> {
    use SignatureProblem::*;
    let Some(text) = signature else {
        return Err(SignatureError::new(
            Missing,
            format!(
                "{label}: no signature ({label}.sig); sign it with `agent-recovery policy sign {label} --key KEY`, or load it without --require-signature"
            ),
        ));
    };
    let malformed = |what: &str| {
        SignatureError::new(
            Malformed,
            format!(
                "{label}.sig is malformed: {what}; expected {{\"alg\":\"ed25519\",\"key\":\"sha256:<hex>\",\"sig\":\"<base64>\"}} as written by `agent-recovery policy sign`"
            ),
        )
    };
    let value: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| malformed(&format!("not JSON ({e})")))?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| malformed(&format!("no string member \"{name}\"")))
    };
    let (alg, key, sig) = (field("alg")?, field("key")?, field("sig")?);
    if alg != ALG {
        let shown: String = alg.chars().take(40).collect();
        return Err(SignatureError::new(
            UnsupportedAlg,
            format!(
                "{label}.sig: unsupported alg {shown:?}; only \"ed25519\" is accepted, re-sign with `agent-recovery policy sign`"
            ),
        ));
    }
    let digits = key.strip_prefix("sha256:").unwrap_or("");
    if digits.len() != 64
        || !digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(malformed(
            "\"key\" is not sha256: and 64 lowercase hex digits",
        ));
    }
    let raw = STANDARD
        .decode(sig)
        .ok()
        .filter(|raw| raw.len() == 64 && STANDARD.encode(raw) == sig)
        .ok_or_else(|| malformed("\"sig\" is not the base64 of 64 bytes"))?;
    let Some(trusted_key) = trusted.iter().find(|t| t.id() == key) else {
        return Err(SignatureError::new(
            UnknownKey,
            format!(
                "{label}: signed by key {key}, which is not trusted; trust its public key (--trusted-key), or re-sign the file with a trusted key"
            ),
        ));
    };
    let signature =
        Signature::from_slice(&raw).map_err(|_| malformed("\"sig\" is not 64 bytes"))?;
    trusted_key
        .verifying_key()
        .verify(bytes, &signature)
        .map_err(|_| {
            SignatureError::new(
                BadSignature,
                format!(
                    "{label}: bad signature: the signature by {key} does not match its content; the file or its .sig changed after signing, restore the signed file or sign it again"
                ),
            )
        })?;
    Ok(key.to_string())
}

/// Reads `path` and its `.sig` and checks the signature; returns the verified
/// bytes (what to load: reading the file again could read other bytes).
///
/// Errors: [`ErrorKind::Io`] when `path` cannot be read, [`ErrorKind::Signature`]
/// otherwise.
pub fn read_signed(path: impl AsRef<Path>, trusted: &[TrustedKey]) -> Result<Vec<u8>, Error> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!(
                "cannot read policy {}: {e}; check the path and its permissions",
                path.display()
            ),
        )
    })?;
    let signature = read_signature(path)?;
    verify(
        &bytes,
        signature.as_deref(),
        trusted,
        &path.display().to_string(),
    )?;
    Ok(bytes)
}

/// The `.sig` of `path`, or `None` when there is none.
pub(crate) fn read_signature(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let sig_path = signature_path(path);
    let file = match std::fs::File::open(&sig_path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::new(
                ErrorKind::Io,
                format!(
                    "cannot read signature {}: {e}; check its permissions",
                    sig_path.display()
                ),
            ));
        }
    };
    let mut text = Vec::new();
    file.take(MAX_SIG_BYTES)
        .read_to_end(&mut text)
        .map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "cannot read signature {}: {e}; check the file",
                    sig_path.display()
                ),
            )
        })?;
    Ok(Some(text))
}
