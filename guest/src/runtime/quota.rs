//! The fleet retry quota as compare-and-set swaps (`swap` effect, `swapped`
//! input), like the breaker updates ([`super::swap`]).
//!
//! The bucket is the store entry `agent-recovery/quota/<name>`,
//! `{"tokens":N}`: absent, or a value that is not `{"tokens":<integer>}`,
//! counts as full; every count read is clamped to `0..=capacity` (workers
//! with different capacities clamp to their own). A take or a refund is a
//! bounded add swapped in on the version the loop last saw; on a conflict
//! the store's answer is the bucket another worker wrote, and the loop adds
//! to that, at most [`MAX_SWAP_ROUNDS`] swaps in all. A take given up is
//! not granted (the bucket stayed contended); a refund given up is dropped
//! (the bucket then holds fewer tokens, the safe side).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::breaker::MAX_SWAP_ROUNDS;
use super::effect::Effect;
use super::machine::{Machine, internal};
use super::state::Phase;
use crate::error::PolicyError;

/// The bucket as the run last saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaSeen {
    /// Its tokens (clamped to the run's capacity).
    pub tokens: u64,
    /// Its store version; absent: the entry was absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

/// What the step does once its quota update is through.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaThen {
    /// A retry's take: sleep this long and retry if granted.
    Take {
        /// The retry's delay, ms.
        delay_ms: u64,
    },
    /// A success's refund: finish the step with this value.
    Refund {
        /// The call's result.
        value: Value,
    },
}

/// A quota update waiting for `swapped`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingQuota {
    /// Tokens added (a take: minus its cost).
    pub delta: i64,
    /// The fewest tokens the bucket must hold for the update (a take: its cost).
    pub need: u64,
    /// This is the `round`-th swap (from 1).
    pub round: u32,
    /// The tokens swapped in.
    pub proposed: u64,
    /// The bucket was seen short of `need`: the swap writes it unchanged,
    /// to check the count against the store.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub short: bool,
    /// What comes next.
    pub then: QuotaThen,
}

/// The tokens of a stored bucket (`null`: absent), clamped to `capacity`.
pub fn tokens_of(value: &Value, capacity: u64) -> u64 {
    value
        .get("tokens")
        .and_then(Value::as_u64)
        .map_or(capacity, |t| t.min(capacity))
}

impl Machine {
    /// Adds `delta` tokens to the run's quota if it holds at least `need`,
    /// then goes on with `then`.
    pub(super) fn quota_add(
        &mut self,
        delta: i64,
        need: u64,
        then: QuotaThen,
    ) -> Result<(), PolicyError> {
        let capacity = self.quota_capacity()?;
        if need > capacity {
            // No bucket of this capacity ever holds that many.
            return self.quota_then(then, false);
        }
        let seen = self.s.quota.unwrap_or(QuotaSeen {
            tokens: capacity,
            version: None,
        });
        self.quota_swap(seen, delta, need, 1, then)
    }

    /// What a step's `read` says of the bucket (when the run has a quota).
    pub(super) fn quota_read(
        &mut self,
        values: &serde_json::Map<String, Value>,
        versions: &std::collections::BTreeMap<String, u64>,
    ) {
        let Some(q) = &self.s.config.retry_quota else {
            return;
        };
        let key = q.key();
        self.s.quota = Some(QuotaSeen {
            tokens: tokens_of(values.get(&key).unwrap_or(&Value::Null), q.capacity),
            version: versions.get(&key).copied(),
        });
    }

    fn quota_capacity(&self) -> Result<u64, PolicyError> {
        self.s
            .config
            .retry_quota
            .as_ref()
            .map(|q| q.capacity)
            .ok_or_else(|| internal("a quota update without a retry quota; please report this"))
    }

    /// Swaps `seen` plus `delta` in (round `round`). A bucket seen with fewer
    /// than `need` tokens is swapped in unchanged when its version is known,
    /// so a stale count is checked against the store before a take is refused.
    fn quota_swap(
        &mut self,
        seen: QuotaSeen,
        delta: i64,
        need: u64,
        round: u32,
        then: QuotaThen,
    ) -> Result<(), PolicyError> {
        let capacity = self.quota_capacity()?;
        let tokens = seen.tokens.min(capacity);
        let short = tokens < need;
        let proposed = if short {
            tokens
        } else {
            tokens.saturating_add_signed(delta).min(capacity)
        };
        let key = self
            .s
            .config
            .retry_quota
            .as_ref()
            .map(|q| q.key())
            .unwrap_or_default();
        self.step_mut()?.quota_op = Some(PendingQuota {
            delta,
            need,
            round,
            proposed,
            short,
            then,
        });
        self.s.phase = Phase::Taking;
        let mut value = serde_json::Map::new();
        value.insert("tokens".into(), Value::from(proposed));
        self.fx.push(Effect::Swap {
            key,
            expected: seen.version,
            value: Value::Object(value),
            ttl_ms: None,
        });
        Ok(())
    }

    /// The answer to a quota `swap`.
    pub(super) fn quota_swapped(
        &mut self,
        ok: bool,
        current: &Value,
        version: Option<u64>,
    ) -> Result<(), PolicyError> {
        let capacity = self.quota_capacity()?;
        let p = self
            .step_mut()?
            .quota_op
            .take()
            .ok_or_else(|| internal("no quota swap pending; please report this"))?;
        let seen = QuotaSeen {
            tokens: if ok {
                p.proposed
            } else {
                tokens_of(current, capacity)
            },
            version,
        };
        self.s.quota = Some(seen);
        if ok {
            // Swapped in: done, unless the count was only confirmed short.
            return self.quota_then(p.then, !p.short);
        }
        if seen.tokens < p.need {
            // The store's count is short: nothing to write.
            return self.quota_then(p.then, false);
        }
        if p.round >= MAX_SWAP_ROUNDS {
            // Given up: a take is not granted, a refund is dropped.
            return self.quota_then(p.then, false);
        }
        self.quota_swap(seen, p.delta, p.need, p.round + 1, p.then)
    }

    fn quota_then(&mut self, then: QuotaThen, granted: bool) -> Result<(), PolicyError> {
        match then {
            QuotaThen::Take { delay_ms } => self.taken(granted, delay_ms),
            QuotaThen::Refund { value } => self.refunded(value),
        }
    }
}
