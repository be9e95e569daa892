//! What a policy document changes: the envelope of an overridden code, the
//! parameters a decision uses, the decision's action, and the registry.

use super::{CallerConfig, CodeOverride, Document};
use crate::config::{
    BackoffOverrides, BreakerOverrides, BreakerThresholds, Config, ConfigOverrides,
};
use crate::decide::Context;
use crate::error::PolicyError;
use crate::model::{Action, CallKind, Decision, Envelope, ErrorClass};
use crate::observation::Observation;
use crate::registry::Registry;

fn min<T: Ord>(x: Option<T>, y: Option<T>) -> Option<T> {
    match (x, y) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn tighter(
    limit: Option<BackoffOverrides>,
    asked: Option<BackoffOverrides>,
) -> Option<BackoffOverrides> {
    let Some(l) = limit else {
        return asked;
    };
    let a = asked.unwrap_or_default();
    Some(BackoffOverrides {
        base_ms: min(l.base_ms, a.base_ms),
        cap_ms: min(l.cap_ms, a.cap_ms),
        max_attempts: min(l.max_attempts, a.max_attempts),
    })
}

impl Document {
    /// The override for `code` on an envelope from `provider`: the provider's
    /// entry wins over the code's.
    pub fn override_for(&self, code: &str, provider: Option<&str>) -> Option<&CodeOverride> {
        provider
            .and_then(|p| self.providers.get(p))
            .and_then(|t| t.get(code))
            .or_else(|| self.codes.get(code))
    }

    /// The envelope with this document's class, severity and hint for its code.
    pub fn adjust(&self, env: &mut Envelope) {
        let Some(o) = self.override_for(&env.code, env.upstream.provider.as_deref()) else {
            return;
        };
        let class = o.class.or(match o.action {
            Some(Action::Retry) => Some(ErrorClass::Transient),
            _ => None,
        });
        if let Some(class) = class {
            env.class = class;
            env.retryable = class == ErrorClass::Transient;
        }
        if let Some(s) = o.severity {
            env.severity = s;
        }
        if let Some(h) = o.hint {
            env.hint = h.to_owned();
            env.hint_from_server = false;
        }
    }

    /// This document's breaker thresholds (the reference's where it sets none).
    pub fn breaker(&self) -> BreakerThresholds {
        let o = self.limits.breaker.unwrap_or_default();
        BreakerThresholds::default().with(&o).unwrap_or_default()
    }

    /// The parameters a decision starts from before the caller's `config`.
    pub fn defaults(&self) -> Config {
        // Validated by `Document::from_value`.
        Config::default().with(&self.limits).unwrap_or_default()
    }

    /// The caller's `config` as this document lets it act: unchanged under
    /// `override`; under `clamp`, tightened to the document's limits.
    pub fn caller(&self, asked: Option<ConfigOverrides>) -> Option<ConfigOverrides> {
        if self.caller_config == CallerConfig::Override {
            return asked;
        }
        let a = asked.unwrap_or_default();
        let l = &self.limits;
        let lb = l.breaker.unwrap_or_default();
        let ab = a.breaker.unwrap_or_default();
        Some(ConfigOverrides {
            tool: tighter(l.tool, a.tool),
            llm: tighter(l.llm, a.llm),
            agent: tighter(l.agent, a.agent),
            retry_budget_ms: min(l.retry_budget_ms, a.retry_budget_ms),
            breaker: Some(BreakerOverrides {
                failure_threshold: min(lb.failure_threshold, ab.failure_threshold),
                open_ms: match (lb.open_ms, ab.open_ms) {
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => x.or(y),
                },
                // A failure-rate mode could open later than the limit.
                rate: lb.rate,
            }),
        })
    }

    /// Classify with this document's overrides.
    pub fn classify(&self, obs: &Observation) -> Result<Envelope, PolicyError> {
        let mut env = crate::api::classify(obs)?;
        self.adjust(&mut env);
        Ok(env)
    }

    /// Decide with this document's overrides: its parameters, its assumed
    /// idempotency, its per-code class, severity and hint before the flow,
    /// and its per-code action after it (unless a guard of the flow ended the
    /// step: attempts or budget spent, a call that is not idempotent). The
    /// decision carries the document's `fallbacks` and `dead_letters` tables
    /// when it sets them.
    pub fn decide(&self, obs: Observation, ctx: Context) -> Result<Decision, PolicyError> {
        self.decide_flow(obs, ctx).map(|d| self.with_tables(d))
    }

    fn decide_flow(&self, obs: Observation, mut ctx: Context) -> Result<Decision, PolicyError> {
        ctx.config = self.caller(ctx.config);
        if ctx.idempotent.is_none() {
            ctx.idempotent = self.assume_idempotent;
        }
        let adjust = |env: &mut Envelope| self.adjust(env);
        let mut d = crate::decide::decide_adjusted(obs, ctx, self.defaults(), &adjust)?;
        let Some(o) = self.override_for(&d.envelope.code, d.envelope.upstream.provider.as_deref())
        else {
            return Ok(d);
        };
        if d.reason_code.is_none() {
            if let Some(action) = o.action.filter(|a| *a != d.action && *a != Action::Retry) {
                d.action = action;
                d.delay_ms = None;
                d.reason = "override";
            }
            if let (Some(h), true) = (o.hint, d.action != Action::Retry) {
                d.envelope.hint = h.to_owned();
            }
        }
        Ok(d)
    }

    /// The decision with this document's fallback chains and dead-letter
    /// table, which the recovery loop reads (absent when it sets none, so a
    /// document without them decides byte for byte as before).
    fn with_tables(&self, mut d: Decision) -> Decision {
        if !self.fallbacks.is_empty() {
            d.fallbacks = Some(self.fallbacks.clone());
        }
        if !self.dead_letters.is_empty() {
            d.dead_letters = Some(self.dead_letters.clone());
        }
        d
    }

    /// The full-jitter delay, from this document's parameters.
    pub fn backoff_delay(
        &self,
        call: CallKind,
        attempt: u32,
        seed: Option<u64>,
        config: Option<&ConfigOverrides>,
    ) -> Result<u64, PolicyError> {
        let cfg = self
            .defaults()
            .with(&self.caller(config.copied()).unwrap_or_default())?;
        crate::backoff::delay(&cfg.for_call(call), attempt, seed)
    }

    /// The reference registry with this document's per-code class, severity,
    /// hint (`recovery`) and cause. Provider overrides are not in it: a code
    /// means one thing in the registry, whatever the provider.
    pub fn registry(&self) -> Registry {
        self.codes
            .iter()
            .fold(Registry::reference(), |r, (code, o)| {
                let class = o.class.or(match o.action {
                    Some(Action::Retry) => Some(ErrorClass::Transient),
                    _ => None,
                });
                let r = match class {
                    Some(c) => r.set_class(code, c),
                    None => r,
                };
                let r = match o.severity {
                    Some(s) => r.set_severity(code, s),
                    None => r,
                };
                let r = match o.hint {
                    Some(h) => r.set_recovery(code, h),
                    None => r,
                };
                match o.cause {
                    Some(c) => r.set_cause(code, c),
                    None => r,
                }
            })
    }
}
