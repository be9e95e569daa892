//! [`PolicyId`]: which policy answered.

use std::fmt;

use serde::Serialize;

use crate::Policy;
use crate::error::Result;

/// Who a policy is: its name and version (from `meta.info`) and the sha256 of
/// its component bytes. Every [`Answer`](crate::Answer) of a
/// [`PolicyHandle`](crate::PolicyHandle) carries the one that answered.
///
/// Serializes as `{"name":..,"version":..,"sha256":..}` (the `serve`
/// command's `policy` member). `Display` is `name version sha256:<hex>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct PolicyId {
    /// The policy's name, e.g. `agent-recovery-reference`.
    pub name: String,
    /// The policy's version, e.g. `0.1.0`.
    pub version: String,
    /// The sha256 of the component bytes, lowercase hex.
    pub sha256: String,
}

impl PolicyId {
    /// Reads the identity of `policy` (one call to `meta.info`).
    pub fn of(policy: &Policy) -> Result<PolicyId> {
        let info = policy.info()?;
        Ok(PolicyId {
            name: info.name,
            version: info.version,
            sha256: policy.sha256(),
        })
    }
}

impl fmt::Display for PolicyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} sha256:{}", self.name, self.version, self.sha256)
    }
}
