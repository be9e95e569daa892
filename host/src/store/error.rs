//! [`StoreError`]: what went wrong in a store, as data with a stable kind.

use std::fmt;

/// An error of a [`Store`](super::Store).
///
/// The message is one line, names the bad input (key, path, value) and ends
/// with a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
}

/// What kind of [`StoreError`] happened.
///
/// New kinds may be added; a retired kind stays, marked DEPRECATED.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// An argument is invalid: an empty or too long key, a value that is not
    /// JSON, a time or TTL out of range, version 0. Nothing was changed.
    InvalidArgument,
    /// The store could not be reached in time (e.g. another process held the
    /// SQLite write lock past the busy timeout). Retrying later may succeed.
    Unavailable,
    /// The store's data is damaged or is not a store at all (e.g. a file that
    /// is not an SQLite database, or a row that breaks the schema).
    Corrupt,
    /// The file was written by a newer (or unknown) schema version; this
    /// build refuses it rather than guess.
    Incompatible,
    /// Reading or writing the underlying storage failed (permissions, a
    /// read-only or full disk, a missing directory).
    Io,
}

impl StoreErrorKind {
    /// A short stable name: `invalid-argument`, `unavailable`, `corrupt`,
    /// `incompatible`, `io`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid-argument",
            Self::Unavailable => "unavailable",
            Self::Corrupt => "corrupt",
            Self::Incompatible => "incompatible",
            Self::Io => "io",
        }
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StoreError {
    /// An error of `kind` with a one-line `message` ending with a hint.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::InvalidArgument, message)
    }

    /// What kind of error this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// The one-line message (names the bad input, ends with a hint).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}
