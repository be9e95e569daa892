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
    ///
    /// A case on which the component itself fails (trap, fuel, memory,
    /// invalid output) stops the run with that error's kind, so a runaway
    /// policy is reported as [`ErrorKind::OutOfFuel`], not as a wrong answer.
    pub fn run_smoke_tests(&self) -> Result<usize> {
        let text = self.smoke_tests()?;
        self.run_smoke_set(&text)
    }

    /// Runs a smoke set given as JSON text (an array of `{"observation",
    /// "context"?, "expect": {"action"?, "code"?}}`, the format of
    /// `meta.smoke-tests`) against this policy; see [`Policy::run_smoke_tests`].
    ///
    /// An empty set is refused ([`ErrorKind::SmokeTest`]): a policy must ship
    /// at least one case, as the Node and Python hosts require too
    /// (`tests/hosts/conformance.json`).
    ///
    /// ```
    /// let policy = agent_recovery::Policy::reference()?;
    /// let set = r#"[{"observation":{"source":"http","status":400},"expect":{"action":"fail"}}]"#;
    /// assert_eq!(policy.run_smoke_set(set)?, 1);
    /// # Ok::<(), agent_recovery::Error>(())
    /// ```
    pub fn run_smoke_set(&self, cases: &str) -> Result<usize> {
        let cases: Vec<Value> = serde_json::from_str(cases)
            .map_err(|e| smoke_error(format!("the smoke set is not a JSON array of cases: {e}")))?;
        if cases.is_empty() {
            return Err(smoke_error(
                "the smoke set is empty; a policy must ship at least one smoke case".to_string(),
            ));
        }
        let mut failures = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            match self.run_case(case) {
                Ok(()) => {}
                Err(Case::Wrong(why)) => failures.push(format!("case {i}: {why}")),
                Err(Case::Failed(error)) => {
                    return Err(error.prefixed(&format!("smoke case {i}: ")));
                }
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

    fn run_case(&self, case: &Value) -> std::result::Result<(), Case> {
        let observation = case
            .get("observation")
            .ok_or_else(|| Case::wrong("no `observation` member"))?
            .to_string();
        let context = case
            .get("context")
            .map_or_else(|| "{}".to_string(), Value::to_string);
        let decision = match self.decide_json(&observation, &context) {
            Ok(decision) => decision,
            Err(e) if e.kind().is_policy_failure() => return Err(Case::Failed(e)),
            Err(e) => return Err(Case::Wrong(format!("decide-json failed: {e}"))),
        };
        let decision: Value = serde_json::from_str(&decision)
            .map_err(|e| Case::Wrong(format!("decision is not JSON: {e}")))?;
        let expect = case
            .get("expect")
            .ok_or_else(|| Case::wrong("no `expect` member"))?;
        let got_action = decision.get("action");
        let got_code = decision.pointer("/envelope/code");
        for (field, got) in [("action", got_action), ("code", got_code)] {
            if let Some(want) = expect.get(field)
                && Some(want) != got
            {
                let got = got.map_or_else(|| "nothing".to_string(), Value::to_string);
                return Err(Case::Wrong(format!("expected {field} {want}, got {got}")));
            }
        }
        Ok(())
    }
}

/// Why a smoke case did not pass.
enum Case {
    /// The policy answered, but not as the case expects.
    Wrong(String),
    /// The component failed (trap, fuel, memory, invalid output).
    Failed(Error),
}

impl Case {
    fn wrong(why: &str) -> Self {
        Case::Wrong(why.to_string())
    }
}

fn smoke_error(message: String) -> Error {
    Error::new(
        ErrorKind::SmokeTest,
        format!("{message}; the policy does not pass its own smoke tests, do not activate it"),
    )
}
