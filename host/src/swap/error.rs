//! [`SwapError`]: why a candidate policy was refused.

use std::fmt;

use crate::error::{Error, ErrorKind};

/// The check a refused candidate failed; see [`SwapOptions`](crate::SwapOptions)
/// for the order.
///
/// New stages may be added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SwapStage {
    /// The file could not be read, or is larger than a component may be.
    Read,
    /// The bytes do not hash to the pinned sha256; nothing was compiled.
    Digest,
    /// A signature was required and is missing, malformed, by a key that is
    /// not trusted, or does not match the bytes; nothing was compiled.
    Signature,
    /// Compiling or linking failed: not a component, truncated, the wrong
    /// world, or imports outside the allow-list.
    Load,
    /// The component loaded but failed [`Policy::verify`](crate::Policy::verify)
    /// (contract, smoke set) or the reference smoke set: wrong answers, or a
    /// trap, fuel or memory overrun, or invalid output while answering.
    Verify,
}

impl SwapStage {
    /// A short stable name: `read`, `digest`, `signature`, `load`, `verify`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Digest => "digest",
            Self::Signature => "signature",
            Self::Load => "load",
            Self::Verify => "verify",
        }
    }
}

/// A candidate policy was refused; the active policy is unchanged.
///
/// [`kind`](Self::kind) says what went wrong (e.g. [`ErrorKind::OutOfFuel`]
/// for a runaway smoke case, [`ErrorKind::Incompatible`] for a forbidden
/// import), [`stage`](Self::stage) at which check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwapError {
    stage: SwapStage,
    error: Error,
    sha256: Option<String>,
}

impl SwapError {
    pub(crate) fn new(stage: SwapStage, error: Error, sha256: Option<String>) -> Self {
        SwapError {
            stage,
            error,
            sha256,
        }
    }

    /// The check that failed.
    pub fn stage(&self) -> SwapStage {
        self.stage
    }

    /// The kind of the underlying error.
    pub fn kind(&self) -> ErrorKind {
        self.error.kind()
    }

    /// The underlying error.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The one-line message of the underlying error (names the problem, ends with a hint).
    pub fn message(&self) -> &str {
        self.error.message()
    }

    /// The sha256 (lowercase hex) of the refused bytes, when they were read.
    pub fn candidate_sha256(&self) -> Option<&str> {
        self.sha256.as_deref()
    }
}

impl fmt::Display for SwapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused at {}: {}", self.stage.as_str(), self.error)
    }
}

/// The message already contains the underlying error, so it is not also a `source`.
impl std::error::Error for SwapError {}
