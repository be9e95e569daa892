//! The host's error type: what went wrong, as data with a stable kind.
//!
//! Every message names the bad value and ends with a hint, on one line, so the
//! CLI can print it unchanged. A trap, a fuel or memory overrun, or a bad
//! return value from the component all come back here; the host never panics.

use std::fmt;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of the host or of the policy component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// What kind of [`Error`] happened.
///
/// New kinds may be added; a retired kind stays, marked DEPRECATED.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A component file could not be read.
    Io,
    /// The bytes are not a WebAssembly component Wasmtime can compile.
    Load,
    /// The component does not implement the world `agent:recovery/recovery-policy@0.1.0`:
    /// a missing or mistyped export, an import the host does not provide, or an
    /// unsupported contract version.
    Incompatible,
    /// The component trapped (a panic inside the guest is a trap).
    Trap,
    /// The call used up its fuel (CPU budget); see [`Limits`](crate::Limits).
    OutOfFuel,
    /// The component tried to grow its memory beyond the limit; see [`Limits`](crate::Limits).
    MemoryLimit,
    /// The input is larger than [`Limits::max_input_bytes`](crate::Limits::max_input_bytes).
    InputTooLarge,
    /// The input is not valid UTF-8.
    InvalidUtf8,
    /// The component rejected the input with its own `policy-error`.
    Policy(PolicyErrorKind),
    /// The component returned something the host cannot use (e.g. text that is not JSON).
    InvalidOutput,
    /// The component's own smoke tests failed (see [`Policy::run_smoke_tests`](crate::Policy::run_smoke_tests)).
    SmokeTest,
    /// The component's sha256 is not the one it was pinned to (see
    /// [`SwapOptions::sha256`](crate::SwapOptions::sha256)); it was not compiled.
    DigestMismatch,
    /// An argument given to the host is invalid (e.g. a sha256 that is not 64 hex digits).
    InvalidArgument,
    /// A signature was required and the policy has none, or one that is
    /// malformed, by a key that is not trusted, or that does not match its
    /// bytes (see [`signing`](crate::signing)); it was not compiled.
    Signature,
}

/// The kinds of `policy-error` a component returns (WIT `error-kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyErrorKind {
    /// The input is not valid JSON.
    InvalidJson,
    /// The JSON is valid but is not an observation the policy can read.
    InvalidObservation,
    /// The decision context is invalid (e.g. attempt 0).
    InvalidContext,
    /// The policy parameters are invalid (e.g. cap below base).
    InvalidConfig,
    /// An argument is invalid (e.g. an unknown render format).
    InvalidArgument,
    /// The input is larger than the policy accepts.
    TooLarge,
    /// A bug in the policy.
    Internal,
}

impl PolicyErrorKind {
    /// The WIT name of the kind, e.g. `invalid-json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid-json",
            Self::InvalidObservation => "invalid-observation",
            Self::InvalidContext => "invalid-context",
            Self::InvalidConfig => "invalid-config",
            Self::InvalidArgument => "invalid-argument",
            Self::TooLarge => "too-large",
            Self::Internal => "internal",
        }
    }
}

impl ErrorKind {
    /// True when the caller's input (not the component) is at fault: a too
    /// large or non-UTF-8 input, or a `policy-error` other than `internal`.
    pub fn is_bad_input(self) -> bool {
        match self {
            Self::InputTooLarge | Self::InvalidUtf8 => true,
            Self::Policy(kind) => kind != PolicyErrorKind::Internal,
            _ => false,
        }
    }

    /// True when the policy component itself misbehaved during a call: it
    /// trapped, ran out of fuel or memory, returned output that breaks the
    /// contract, or reported an `internal` policy-error. This is what a
    /// [`FailurePolicy`](crate::FailurePolicy) acts on; bad input is not.
    pub fn is_policy_failure(self) -> bool {
        matches!(
            self,
            Self::Trap
                | Self::OutOfFuel
                | Self::MemoryLimit
                | Self::InvalidOutput
                | Self::Policy(PolicyErrorKind::Internal)
        )
    }

    /// A short stable name, e.g. `out-of-fuel` or `policy/invalid-json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Io => "io",
            Self::Load => "load",
            Self::Incompatible => "incompatible",
            Self::Trap => "trap",
            Self::OutOfFuel => "out-of-fuel",
            Self::MemoryLimit => "memory-limit",
            Self::InputTooLarge => "input-too-large",
            Self::InvalidUtf8 => "invalid-utf8",
            Self::Policy(kind) => match kind {
                PolicyErrorKind::InvalidJson => "policy/invalid-json",
                PolicyErrorKind::InvalidObservation => "policy/invalid-observation",
                PolicyErrorKind::InvalidContext => "policy/invalid-context",
                PolicyErrorKind::InvalidConfig => "policy/invalid-config",
                PolicyErrorKind::InvalidArgument => "policy/invalid-argument",
                PolicyErrorKind::TooLarge => "policy/too-large",
                PolicyErrorKind::Internal => "policy/internal",
            },
            Self::InvalidOutput => "invalid-output",
            Self::SmokeTest => "smoke-test",
            Self::DigestMismatch => "digest-mismatch",
            Self::InvalidArgument => "invalid-argument",
            Self::Signature => "signature",
        }
    }
}

impl Error {
    /// An error of `kind` with a one-line `message` (line breaks become spaces).
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = if message.contains('\n') {
            message
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            message
        };
        Error { kind, message }
    }

    /// The same error with `prefix` put before its message.
    pub(crate) fn prefixed(self, prefix: &str) -> Self {
        Error {
            kind: self.kind,
            message: format!("{prefix}{}", self.message),
        }
    }

    /// What kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message: one line that names the bad value and ends with a hint.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Checks that `bytes` are UTF-8 and returns them as text.
///
/// The error names the byte offset of the first bad sequence, so the CLI and
/// other byte-oriented callers report it the same way.
pub fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|e| {
        Error::new(
            ErrorKind::InvalidUtf8,
            format!(
                "input is not valid UTF-8 at byte {}; send JSON text encoded as UTF-8",
                e.valid_up_to()
            ),
        )
    })
}
