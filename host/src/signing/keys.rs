//! [`SigningKey`] (a private key, PKCS#8 PEM) and [`TrustedKey`] (a public
//! key, SubjectPublicKeyInfo PEM), with their key id.

use std::fmt;
use std::path::Path;

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signer, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::component::policy::hex;
use crate::error::{Error, ErrorKind, Result};

/// The key id of a public key: `sha256:` and the hex sha256 of its
/// SubjectPublicKeyInfo DER.
fn key_id(key: &VerifyingKey) -> String {
    let der = key
        .to_public_key_der()
        .expect("an Ed25519 public key always encodes as SubjectPublicKeyInfo");
    format!("sha256:{}", hex(&Sha256::digest(der.as_bytes()).into()))
}

fn read_text(path: &Path, what: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!(
                "cannot read {what} {}: {e}; check the path and its permissions",
                path.display()
            ),
        )
    })
}

/// A public key a signed policy may be signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct TrustedKey {
    key: VerifyingKey,
    id: String,
}

impl TrustedKey {
    /// Reads an Ed25519 public key in PEM (`-----BEGIN PUBLIC KEY-----`, as
    /// `agent-recovery policy keygen` and `openssl pkey -pubout` write it).
    pub fn from_pem(pem: &str) -> Result<Self> {
        let key = VerifyingKey::from_public_key_pem(pem.trim()).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "not an Ed25519 public key in PEM ({e}); pass the .pub file written by `agent-recovery policy keygen`"
                ),
            )
        })?;
        Ok(Self::new(key))
    }

    /// Reads the PEM file at `path`; see [`from_pem`](Self::from_pem).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = read_text(path, "trusted key")?;
        Self::from_pem(&text).map_err(|e| e.prefixed(&format!("{}: ", path.display())))
    }

    fn new(key: VerifyingKey) -> Self {
        let id = key_id(&key);
        TrustedKey { key, id }
    }

    /// The key id: `sha256:` and the hex sha256 of the SubjectPublicKeyInfo DER.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn verifying_key(&self) -> &VerifyingKey {
        &self.key
    }
}

impl fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TrustedKey").field(&self.id).finish()
    }
}

/// A private key that signs policies. Its [`Debug`](fmt::Debug) shows the key
/// id only.
#[derive(Clone)]
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
}

impl SigningKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<Self> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot read the system's random source ({e}); try again"),
            )
        })?;
        Ok(Self::from_seed(seed))
    }

    /// The key whose 32-byte RFC 8032 secret is `seed` (for tests and vectors;
    /// use [`generate`](Self::generate) for a real key).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        SigningKey {
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        }
    }

    /// Reads an Ed25519 private key in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`,
    /// as `agent-recovery policy keygen` and `openssl genpkey -algorithm ed25519` write it).
    pub fn from_pem(pem: &str) -> Result<Self> {
        let key = ed25519_dalek::SigningKey::from_pkcs8_pem(pem.trim()).map_err(|e| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "not an Ed25519 private key in PKCS#8 PEM ({e}); pass the key file written by `agent-recovery policy keygen`"
                ),
            )
        })?;
        Ok(SigningKey { key })
    }

    /// Reads the PEM file at `path`; see [`from_pem`](Self::from_pem).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = read_text(path, "signing key")?;
        Self::from_pem(&text).map_err(|e| e.prefixed(&format!("{}: ", path.display())))
    }

    /// The private key as PKCS#8 PEM; keep it secret.
    pub fn to_pem(&self) -> String {
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .expect("an Ed25519 private key always encodes as PKCS#8")
            .to_string()
    }

    /// The public key as SubjectPublicKeyInfo PEM: what hosts trust.
    pub fn public_pem(&self) -> String {
        self.key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("an Ed25519 public key always encodes as SubjectPublicKeyInfo")
    }

    /// The public key, as a [`TrustedKey`].
    pub fn trusted(&self) -> TrustedKey {
        TrustedKey::new(self.key.verifying_key())
    }

    /// The key id of the public key.
    pub fn id(&self) -> String {
        key_id(&self.key.verifying_key())
    }

    pub(crate) fn sign_bytes(&self, bytes: &[u8]) -> [u8; 64] {
        self.key.sign(bytes).to_bytes()
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SigningKey").field(&self.id()).finish()
    }
}
