//! [`ActivePolicy`] (a policy with its identity) and [`Answer`] (its output,
//! signed with that identity).

use std::sync::Arc;

use crate::error::Error;
use crate::{Policy, PolicyId};

/// A policy as a [`PolicyHandle`](crate::PolicyHandle) holds it: the loaded
/// component and who it is. Immutable; a swap replaces the whole value, so a
/// call that holds one finishes on it even if a swap happens meanwhile.
#[derive(Debug)]
pub struct ActivePolicy {
    policy: Arc<Policy>,
    id: Arc<PolicyId>,
}

impl ActivePolicy {
    pub(crate) fn new(policy: Arc<Policy>, id: PolicyId) -> Self {
        ActivePolicy {
            policy,
            id: Arc::new(id),
        }
    }

    /// The loaded component: every export of the world is a method on it.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Name, version and sha256.
    pub fn id(&self) -> &Arc<PolicyId> {
        &self.id
    }
}

/// The output of a call through a [`PolicyHandle`](crate::PolicyHandle), with
/// the policy that produced it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Answer {
    /// The component's JSON text, byte for byte (checked to be the promised
    /// shape, never rewritten).
    pub json: String,
    /// The policy that answered.
    pub policy: Arc<PolicyId>,
    /// Set when the active policy failed this call and the reference answered
    /// instead ([`FailurePolicy::FallbackToReference`](crate::FailurePolicy::FallbackToReference)):
    /// the active policy's error.
    pub fallback: Option<Error>,
}
