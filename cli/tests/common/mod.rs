//! Shared helpers of the CLI tests: running the binary, the reference policy,
//! and the fixtures `tests/artifacts` built.

#![allow(dead_code, reason = "each test binary uses a different part")]

pub mod cli;
pub mod fixtures;

use std::sync::LazyLock;

use agent_recovery::Policy;

/// The embedded reference policy, compiled once per test binary.
pub fn policy() -> &'static Policy {
    static POLICY: LazyLock<Policy> =
        LazyLock::new(|| Policy::reference().expect("the reference policy loads"));
    &POLICY
}
