//! [`FailurePolicy`]: what a handle does when the active policy itself fails.

/// What a [`PolicyHandle`](crate::PolicyHandle) does when the active policy
/// fails a call: it traps (a panic in the guest), runs out of fuel or memory,
/// returns output that is not the promised JSON, or reports an `internal`
/// policy-error (see [`ErrorKind::is_policy_failure`](crate::ErrorKind::is_policy_failure)).
/// Bad input (invalid JSON, an unknown context member, a too large input) is
/// the caller's error and is returned as is under both policies.
///
/// Named after Envoy's wasm `failure_policy` (fail closed / fail open); here
/// "open" means a known-good policy answers, not that the call is let through.
///
/// # Default
///
/// [`FailClosed`](Self::FailClosed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// The caller gets the typed error (and an [`Event::Failed`](crate::Event::Failed)
    /// is reported). The agent then does what it does without a decision,
    /// typically fail the step.
    #[default]
    FailClosed,
    /// The embedded reference policy answers instead; the [`Answer`](crate::Answer)
    /// says so (its `policy` is the reference, its `fallback` the error) and an
    /// [`Event::FellBack`](crate::Event::FellBack) is reported. When the
    /// failing policy *is* the reference, or the reference fails too, the
    /// caller gets the error.
    FallbackToReference,
}
