//! Breaker updates as compare-and-set swaps (`swap` effect, `swapped` input).
//!
//! The loop applies an outcome to the breaker it last saw and swaps the
//! result in on the version it read. On a conflict the store's answer is the
//! value another worker wrote; the loop applies the same outcome to that
//! value ([`Breaker::apply`]) and swaps again, at most
//! [`MAX_SWAP_ROUNDS`] times. Then the step goes on where it paused.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::breaker::{Breaker, BreakerState, MAX_SWAP_ROUNDS, Report};
use super::effect::{BREAKER_PREFIX, Effect};
use super::machine::{Machine, bad, internal};
use super::state::{LeaseScan, Phase};
use crate::error::PolicyError;

/// What the step does once its breaker update is through.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    /// Call the target as its probe; if the breaker moved meanwhile, scan
    /// the chain again from this target (the paused scan).
    Probe(LeaseScan),
    /// Act on this decision (the policy's answer, unchanged).
    Decision(Value),
    /// Finish the successful call with this value.
    Success(Value),
}

/// A breaker update waiting for `swapped`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingSwap {
    /// The target.
    pub target: String,
    /// The outcome being recorded.
    pub report: Report,
    /// The epoch the call passed the gate at.
    pub gate_epoch: u64,
    /// This is the `round`-th swap of the outcome (from 1).
    pub round: u32,
    /// The value swapped in.
    pub proposed: Breaker,
    /// The state it moves the breaker to, if it does.
    pub became: Option<BreakerState>,
    /// What comes next.
    pub then: Then,
}

impl Machine {
    /// Records `report` for `target` (the call passed its gate at
    /// `gate_epoch`): a `swap` when the breaker changes, and `None`. Returns
    /// `then` back when nothing is to be written (the step goes on at once).
    pub(super) fn report_breaker(
        &mut self,
        target: String,
        report: Report,
        gate_epoch: u64,
        then: Then,
    ) -> Result<Option<Then>, PolicyError> {
        let now = self.s.now_ms;
        let current = self
            .step()?
            .breakers
            .get(&target)
            .cloned()
            .unwrap_or_default();
        let applied = current.apply(&report, gate_epoch, now);
        let Some(proposed) = applied.next else {
            return Ok(Some(then));
        };
        self.push_swap(PendingSwap {
            target,
            report,
            gate_epoch,
            round: 1,
            proposed,
            became: applied.became,
            then,
        })?;
        Ok(None)
    }

    fn push_swap(&mut self, p: PendingSwap) -> Result<(), PolicyError> {
        let value = serde_json::to_value(&p.proposed).map_err(|e| internal(e.to_string()))?;
        let st = self.step_mut()?;
        let expected = st.versions.get(&p.target).copied();
        let key = format!("{BREAKER_PREFIX}{}", p.target);
        st.swap = Some(p);
        self.s.phase = Phase::Swapping;
        self.fx.push(Effect::Swap {
            key,
            expected,
            value,
            ttl_ms: None,
        });
        Ok(())
    }

    /// The answer to a breaker `swap`.
    pub(super) fn swapped(
        &mut self,
        ok: bool,
        current: Value,
        version: Option<u64>,
    ) -> Result<(), PolicyError> {
        let now = self.s.now_ms;
        let st = self.step_mut()?;
        let p = st
            .swap
            .take()
            .ok_or_else(|| internal("no breaker swap pending; please report this"))?;
        let target = p.target.clone();
        let seen = if ok {
            p.proposed.clone()
        } else if current.is_null() {
            Breaker::default()
        } else {
            serde_json::from_value(current).map_err(|e| {
                bad(format!(
                    "the stored breaker of target {target:?} is not a breaker ({e}); delete the key {BREAKER_PREFIX}{target}"
                ))
            })?
        };
        st.breakers.insert(target.clone(), seen.clone());
        match version {
            Some(v) => st.versions.insert(target.clone(), v),
            None => st.versions.remove(&target),
        };
        if ok {
            if let Some(state) = p.became {
                let mut e = self.event("breaker");
                e.target = Some(target);
                e.state = Some(
                    match state {
                        BreakerState::Closed => "closed",
                        BreakerState::Open => "open",
                        BreakerState::HalfOpen => "half_open",
                    }
                    .into(),
                );
                self.emit(e);
            }
            return self.then(p.then, true);
        }
        if p.round >= MAX_SWAP_ROUNDS {
            // Given up: the outcome is not recorded.
            return self.then(p.then, false);
        }
        let applied = seen.apply(&p.report, p.gate_epoch, now);
        match applied.next {
            None => self.then(p.then, false),
            Some(proposed) => self.push_swap(PendingSwap {
                round: p.round + 1,
                proposed,
                became: applied.became,
                ..p
            }),
        }
    }

    /// Goes on after a breaker update (`recorded`: it was swapped in).
    fn then(&mut self, then: Then, recorded: bool) -> Result<(), PolicyError> {
        match then {
            Then::Probe(_) if recorded => {
                let st = self.step_mut()?;
                let target = st.targets.get(st.index).cloned().unwrap_or_default();
                st.gate_epoch = st.breakers.get(&target).map_or(0, |b| b.epoch);
                self.call_now(true)
            }
            // The breaker moved since it was read: look at it again.
            Then::Probe(scan) => {
                let i = self.step()?.index;
                self.scan(i, scan.start, scan.wait)
            }
            Then::Decision(d) => self.act(&d),
            Then::Success(v) => self.succeeded(v),
        }
    }
}
