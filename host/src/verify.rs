//! Checks a host runs before it trusts a policy: identity, contract, smoke set.
//!
//! A component can implement the world's types exactly and still be wrong.
//! Its own smoke set (`meta.smoke-tests`) says what it must decide for a few
//! observations; running it right after loading catches a broken build or a
//! mismatched contract before the policy sees real traffic, which is what a
//! hot swap needs.

use serde_json::Value;

use crate::Policy;
use crate::error::{Error, ErrorKind, Result};
use crate::types::PolicyInfo;

/// What [`Policy::verify`] found.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Verified {
    /// Name, version and contract of the policy.
    pub info: PolicyInfo,
    /// How many smoke cases passed (all of them).
    pub smoke_cases: usize,
}

/// The contract versions this host speaks (semver-compatible with `0.1.0`).
const CONTRACT_PREFIX: &str = "0.1.";

impl Policy {
    /// Checks identity and contract, then runs the smoke set.
    ///
    /// ```
    /// let policy = agent_recovery::Policy::reference()?;
    /// let verified = policy.verify()?;
    /// assert!(!verified.info.name.is_empty());
    /// assert!(verified.smoke_cases > 0);
    /// # Ok::<(), agent_recovery::Error>(())
    /// ```
    pub fn verify(&self) -> Result<Verified> {
        let info = self.info()?;
        if !info.contract.starts_with(CONTRACT_PREFIX) {
            return Err(Error::new(
                ErrorKind::Incompatible,
                format!(
                    "policy `{}` implements contract {:?}, this host speaks 0.1.x; build the policy against agent:recovery@0.1.0",
                    info.name, info.contract
                ),
            ));
        }
        let smoke_cases = self.run_smoke_tests()?;
        Ok(Verified { info, smoke_cases })
    }

    /// Runs the policy's own smoke set through `decide-json` and returns how
    /// many cases passed. Every case's `expect.action` and `expect.code` (each
    /// optional) must match the decision's `action` and `envelope.code`.
    pub fn run_smoke_tests(&self) -> Result<usize> {
        let text = self.smoke_tests()?;
        let cases: Vec<Value> = serde_json::from_str(&text)
            .map_err(|e| smoke_error(format!("the smoke set is not a JSON array of cases: {e}")))?;
        let mut failures = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            if let Err(why) = self.run_case(case) {
                failures.push(format!("case {i}: {why}"));
            }
        }
        if failures.is_empty() {
            Ok(cases.len())
        } else {
            Err(smoke_error(format!(
                "{} of {} smoke cases failed ({})",
                failures.len(),
                cases.len(),
                failures.join("; ")
            )))
        }
    }

    fn run_case(&self, case: &Value) -> std::result::Result<(), String> {
        let observation = case
            .get("observation")
            .ok_or("no `observation` member")?
            .to_string();
        let context = case
            .get("context")
            .map_or_else(|| "{}".to_string(), Value::to_string);
        let decision = self
            .decide_json(&observation, &context)
            .map_err(|e| format!("decide-json failed: {e}"))?;
        let decision: Value =
            serde_json::from_str(&decision).map_err(|e| format!("decision is not JSON: {e}"))?;
        let expect = case.get("expect").ok_or("no `expect` member")?;
        let got_action = decision.get("action");
        let got_code = decision.pointer("/envelope/code");
        for (field, got) in [("action", got_action), ("code", got_code)] {
            if let Some(want) = expect.get(field)
                && Some(want) != got
            {
                let got = got.map_or_else(|| "nothing".to_string(), Value::to_string);
                return Err(format!("expected {field} {want}, got {got}"));
            }
        }
        Ok(())
    }
}

fn smoke_error(message: String) -> Error {
    Error::new(
        ErrorKind::SmokeTest,
        format!("{message}; the policy does not pass its own smoke tests, do not activate it"),
    )
}
