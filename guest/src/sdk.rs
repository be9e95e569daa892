//! Writing your own policy: implement [`RecoveryPolicy`] (every method but
//! [`RecoveryPolicy::info`] defaults to the reference policy) and export it with
//! [`export_policy!`](crate::export_policy). The trait works natively too, so a
//! custom policy is unit-tested with `cargo test` before it is built as a component.

use crate::api;
use crate::config::{BreakerThresholds, Config, ConfigOverrides};
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

    /// Decide the next step. The default is the reference's decision flow
    /// with this policy's [`breaker`](Self::breaker) thresholds; an override
    /// that calls [`decide`](crate::decide) instead gets the reference's
    /// thresholds unless it calls [`decide_from`](crate::decide_from) or sets
    /// [`Decision::breaker`] itself.
    fn decide(obs: Observation, ctx: Context) -> Result<Decision, PolicyError> {
        let defaults = Config {
            breaker: Self::breaker(),
            ..Config::default()
        };
        api::decide_from(obs, ctx, defaults)
    }

    /// This policy's circuit-breaker thresholds: how many consecutive
    /// transient failures open a target's breaker and how long it stays open
    /// (default 3 failures / 30 000 ms). Decisions carry them as
    /// `breaker` (a decide context's `config.breaker` overrides them member by
    /// member), and the recovery loop applies them, so a hot swap to this
    /// policy changes them at its next decision. A run configuration's own
    /// `breaker` still wins (`docs/runtime.md`).
    fn breaker() -> BreakerThresholds {
        BreakerThresholds::default()
    }

    /// `classify-json`.
    fn classify_json(observation: &str) -> Result<String, PolicyError> {
        crate::json_out::envelope(&Self::classify(&api::parse_observation(observation)?)?)
    }

    /// `decide-json`.
    fn decide_json(observation: &str, context: &str) -> Result<String, PolicyError> {
        crate::json_out::decision(&Self::decide(
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

    // The reference overrides neither `classify` nor `decide`, so its JSON
    // entry points read the observation as a borrowed view, never building the
    // owned `Observation` (same output: the defaults route to the same code).
    fn classify_json(observation: &str) -> Result<String, PolicyError> {
        api::classify_json(observation)
    }

    fn decide_json(observation: &str, context: &str) -> Result<String, PolicyError> {
        api::decide_json(observation, context)
    }
}
