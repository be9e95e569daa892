//! Validating a candidate policy: the checks of [`SwapOptions`], in order,
//! each failure tagged with its [`SwapStage`].

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::component::policy::hex;
use crate::error::{Error, ErrorKind, Result};
use crate::signing;
use crate::swap::active::ActivePolicy;
use crate::swap::error::{SwapError, SwapStage};
use crate::{Loader, Policy, PolicyId, SwapOptions};

/// The largest component file a handle reads (the reference is under 1 MB).
pub(crate) const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// Reads a candidate file, refusing one over [`MAX_COMPONENT_BYTES`].
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, SwapError> {
    let fail = |e: std::io::Error| {
        let error = Error::new(
            ErrorKind::Io,
            format!(
                "cannot read policy component {}: {e}; check the path and its permissions",
                path.display()
            ),
        );
        SwapError::new(SwapStage::Read, error, None)
    };
    let file = std::fs::File::open(path).map_err(fail)?;
    let mut bytes = Vec::new();
    file.take(MAX_COMPONENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        let error = Error::new(
            ErrorKind::Load,
            format!(
                "policy component {} is larger than {MAX_COMPONENT_BYTES} bytes; a policy component is a few MB at most, check the file",
                path.display()
            ),
        );
        return Err(SwapError::new(SwapStage::Read, error, None));
    }
    Ok(bytes)
}

/// The signature that comes with candidate bytes.
pub(crate) struct Signed<'a> {
    /// The `.sig` text; `None`: there is none.
    pub(crate) sig: Option<&'a [u8]>,
    /// The candidate's name in messages (its path).
    pub(crate) label: &'a str,
}

/// Reads the `.sig` of `path` when `options` require a signature.
pub(crate) fn read_signature(
    path: &Path,
    options: &SwapOptions,
) -> Result<Option<Vec<u8>>, SwapError> {
    if options.trusted_keys().is_none() {
        return Ok(None);
    }
    signing::read_signature(path).map_err(|e| SwapError::new(SwapStage::Read, e, None))
}

/// Checks the digest and the signature, loads `bytes` with `loader`, then runs [`checked`].
pub(crate) fn from_bytes(
    loader: &Loader,
    bytes: &[u8],
    signed: &Signed<'_>,
    options: &SwapOptions,
    reference_smoke_set: &dyn Fn() -> Result<String>,
) -> Result<ActivePolicy, SwapError> {
    let sha256 = hex(&Sha256::digest(bytes).into());
    check_digest(&sha256, options)?;
    if let Some(trusted) = options.trusted_keys() {
        signing::verify(bytes, signed.sig, trusted, signed.label)
            .map_err(|e| SwapError::new(SwapStage::Signature, e.into(), Some(sha256.clone())))?;
    }
    let policy = loader
        .clone()
        .bytes(bytes)
        .map_err(|e| SwapError::new(SwapStage::Load, e, Some(sha256.clone())))?;
    checked(Arc::new(policy), options, reference_smoke_set)
}

/// Checks the digest of an already loaded policy, then verifies it as `options`
/// say (a signature, checked on bytes, is [`from_bytes`]' concern).
pub(crate) fn checked(
    policy: Arc<Policy>,
    options: &SwapOptions,
    reference_smoke_set: &dyn Fn() -> Result<String>,
) -> Result<ActivePolicy, SwapError> {
    let sha256 = policy.sha256();
    check_digest(&sha256, options)?;
    let verify = |e: Error| SwapError::new(SwapStage::Verify, e, Some(sha256.clone()));
    let id = if options.verifies() {
        let info = policy.verify().map_err(verify)?.info;
        PolicyId {
            name: info.name,
            version: info.version,
            sha256: sha256.clone(),
        }
    } else {
        PolicyId::of(&policy).map_err(verify)?
    };
    if options.requires_reference_smoke_set() {
        let set = reference_smoke_set().map_err(verify)?;
        policy
            .run_smoke_set(&set)
            .map_err(|e| verify(e.prefixed("the reference smoke set: ")))?;
    }
    Ok(ActivePolicy::new(policy, id))
}

fn check_digest(sha256: &str, options: &SwapOptions) -> Result<(), SwapError> {
    match options.pinned_sha256() {
        Some(pinned) if pinned != sha256 => {
            let error = Error::new(
                ErrorKind::DigestMismatch,
                format!(
                    "the component's sha256 is {sha256}, not the pinned {pinned}; deploy the pinned file or pin the digest of the new one"
                ),
            );
            Err(SwapError::new(
                SwapStage::Digest,
                error,
                Some(sha256.to_string()),
            ))
        }
        _ => Ok(()),
    }
}
