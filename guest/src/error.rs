//! The policy's own errors: bad input, never the observed failure.

use serde::Serialize;
use std::fmt;

/// What kind of policy error occurred. Mirrors `error-kind` in the WIT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input is not valid JSON.
    InvalidJson,
    /// Valid JSON, but not an observation the policy can read.
    InvalidObservation,
    /// The decision context is invalid.
    InvalidContext,
    /// The policy parameters are invalid.
    InvalidConfig,
    /// An argument is invalid.
    InvalidArgument,
    /// The input is larger than the policy accepts.
    TooLarge,
    /// A bug in the policy.
    Internal,
}

impl ErrorKind {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidObservation => "invalid_observation",
            Self::InvalidContext => "invalid_context",
            Self::InvalidConfig => "invalid_config",
            Self::InvalidArgument => "invalid_argument",
            Self::TooLarge => "too_large",
            Self::Internal => "internal",
        }
    }
}

/// A policy error: a kind and a message that names the bad value and ends with a hint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyError {
    /// What kind of error.
    pub kind: ErrorKind,
    /// Lowercase message naming the bad value, ending with a hint.
    pub message: String,
}

impl PolicyError {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn observation(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidObservation, message)
    }

    /// An `invalid_json` error for `what`.
    pub fn json(what: &str, err: &serde_json::Error) -> Self {
        Self::new(
            ErrorKind::InvalidJson,
            format!("{what} is not valid JSON ({err}); send one JSON object"),
        )
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for PolicyError {}
