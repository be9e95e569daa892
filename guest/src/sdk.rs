//! Writing your own policy: implement [`RecoveryPolicy`] (every method but
//! [`RecoveryPolicy::info`] defaults to the reference policy) and export it with
//! [`export_policy!`](crate::export_policy). The trait works natively too, so a
//! custom policy is unit-tested with `cargo test` before it is built as a component.

use crate::api;
use crate::config::ConfigOverrides;
use crate::decide::Context;
use crate::error::PolicyError;
use crate::model::{CallKind, Decision, Envelope};
use crate::observation::Observation;
use crate::registry::Registry;

/// Who a policy is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyInfo {
    /// Policy name.
    pub name: String,
    /// Policy version (semver).
    pub version: String,
    /// One line on what it is for.
    pub description: String,
}

/// A recovery policy. Override what differs from the reference; the JSON entry
/// points route through [`classify`](Self::classify) and [`decide`](Self::decide)
/// unless you override them too.
pub trait RecoveryPolicy {
    /// Name, version and description.
    fn info() -> PolicyInfo;

    /// Normalize an observation into an envelope.
    fn classify(obs: &Observation) -> Result<Envelope, PolicyError> {
        api::classify(obs)
    }

    /// Decide the next step.
    fn decide(obs: Observation, ctx: Context) -> Result<Decision, PolicyError> {
        api::decide(obs, ctx)
    }

    /// `classify-json`.
    fn classify_json(observation: &str) -> Result<String, PolicyError> {
        api::to_json(&Self::classify(&api::parse_observation(observation)?)?)
    }

    /// `decide-json`.
    fn decide_json(observation: &str, context: &str) -> Result<String, PolicyError> {
        api::to_json(&Self::decide(
            api::parse_observation(observation)?,
            api::parse_context(context)?,
        )?)
    }

    /// The full-jitter delay.
    fn backoff_delay(
        call: CallKind,
        attempt: u32,
        seed: Option<u64>,
        config: Option<&ConfigOverrides>,
    ) -> Result<u64, PolicyError> {
        api::backoff_delay(call, attempt, seed, config)
    }

    /// The smoke set a host runs before activating the policy (JSON array of
    /// `{"observation", "context", "expect": {"action", "code"}}`).
    fn smoke_tests() -> String {
        crate::meta::SMOKE_TESTS.to_owned()
    }

    /// The policy's registry: every code it can emit, with the class, hint
    /// and stability *it* gives them. The exported component serves it from
    /// the `registry` interface (`codes`, `lookup`, `codes-json`, the
    /// markdown documentation and the MCP `## Errors` block), built once per
    /// instance. Default: the reference's. Override it when the policy adds
    /// codes or changes what one means (see [`Registry`]), so that its
    /// documentation says what it decides.
    fn registry() -> Registry {
        Registry::reference()
    }
}

/// The reference policy itself.
pub struct Reference;

impl RecoveryPolicy for Reference {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: crate::meta::NAME.to_owned(),
            version: crate::meta::VERSION.to_owned(),
            description: crate::meta::DESCRIPTION.to_owned(),
        }
    }
}
