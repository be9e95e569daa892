//! Recovery of a run killed during a fan-out (docs/durability.md §2).
//!
//! The parent's journal holds its `joining` state; each branch journaled its
//! own state under [`branch_key`] before every call and when it ended. On
//! `recover` the loop reads every branch's entry and settles each branch:
//!
//! - no entry: the branch never reached a call, so it applied nothing
//!   (`not_started`);
//! - an ended branch: its outcome stands; when it ended `ok` its compensable
//!   step joins the run's compensations;
//! - a branch in a call when the worker died, with a compensation (or in a
//!   compensation): resumed like a plain step in flight, on this lane (the
//!   same key and attempt number, answered from the cache when it finished),
//!   up to its end;
//! - a branch in a call without a compensation: not called again, since
//!   nothing could undo it and the fan-out cannot finish (`interrupted`):
//!   whatever it applied is kept.
//!
//! The fan-out cannot be finished (the run's next steps died with the
//! worker), so the run's completed compensable steps, the branches' after
//! them in branch order, are compensated in reverse order and the run is
//! dead-lettered as `interrupted`, the record listing the branches.

use serde_json::{Map, Value};

use super::fanout::{branch_entry, branch_key};
use super::input::Input;
use super::machine::{Machine, bad, internal};
use super::state::{FanRecovery, Phase, ResumedBranch, State};
use crate::error::PolicyError;

impl Machine {
    /// `recover` on a `joining` state: read every branch's journal entry.
    pub(super) fn recover_fanout(&mut self) -> Result<(), PolicyError> {
        self.s.recovering = true;
        let e = self.event("recover");
        self.emit(e);
        let fan = self
            .s
            .fanout
            .as_ref()
            .ok_or_else(|| internal("recovering a fan-out without one; please report this"))?;
        let mut keys = Vec::with_capacity(fan.branches.len());
        for i in 0..fan.branches.len() {
            let i = u32::try_from(i).map_err(|_| internal("too many branches"))?;
            keys.push(branch_key(&self.s.run_id, &fan.id, i)?);
        }
        self.s.phase = Phase::Reading;
        self.fx.push(super::effect::Effect::Read {
            keys,
            go_on_if_absent: false,
        });
        Ok(())
    }

    /// The branches' journal entries: settle each one.
    pub(super) fn fanout_recover_read(
        &mut self,
        values: &Map<String, Value>,
    ) -> Result<(), PolicyError> {
        let fan = self
            .s
            .fanout
            .take()
            .ok_or_else(|| internal("recovering a fan-out without one; please report this"))?;
        let mut rec = FanRecovery {
            outcomes: Vec::with_capacity(fan.branches.len()),
            done: vec![Vec::new(); fan.branches.len()],
            pending: Vec::new(),
            current: None,
        };
        for (i, id) in fan.branches.iter().enumerate() {
            let n = u32::try_from(i).map_err(|_| internal("too many branches"))?;
            let key = branch_key(&self.s.run_id, &fan.id, n)?;
            let Some(state) = values
                .get(&key)
                .and_then(|entry| entry.get("state"))
                .filter(|s| !s.is_null())
            else {
                rec.outcomes.push(branch_entry(id, None, "not_started"));
                continue;
            };
            let b: State = crate::from_value(state).map_err(|e| {
                bad(format!(
                    "the journal entry {key} of branch {id:?} holds no branch state ({e}); delete it to recover the run without it"
                ))
            })?;
            if b.branch.as_deref() != Some(fan.id.as_str()) || b.run_id != self.s.run_id {
                // An entry of another fan-out: this branch has not journaled yet.
                rec.outcomes.push(branch_entry(id, None, "not_started"));
                continue;
            }
            if let Some(last) = &b.last {
                let outcome = last.get("outcome").and_then(Value::as_str).unwrap_or("");
                let step_key = last.get("key").and_then(Value::as_str);
                rec.outcomes.push(branch_entry(id, step_key, outcome));
                if let Some(done) = rec.done.get_mut(i) {
                    done.clone_from(&b.done);
                }
                continue;
            }
            let step_key = b.step.as_ref().map(|st| st.key.clone());
            let compensating = b.comp.as_ref().is_some_and(|c| c.current.is_some());
            let compensable = b
                .step
                .as_ref()
                .is_some_and(|st| st.spec.side_effect && st.spec.compensation);
            if b.phase == Phase::Calling && (compensable || compensating) {
                rec.outcomes
                    .push(branch_entry(id, step_key.as_deref(), "in_flight"));
                rec.pending.push(ResumedBranch {
                    index: i,
                    state: Box::new(b),
                });
            } else {
                rec.outcomes
                    .push(branch_entry(id, step_key.as_deref(), "interrupted"));
            }
        }
        self.s.fan_recovery = Some(rec);
        self.resume_next()
    }

    /// Resume the next branch left, or, when none is, roll the run back.
    fn resume_next(&mut self) -> Result<(), PolicyError> {
        loop {
            let rec = self.recovery()?;
            if rec.pending.is_empty() {
                return self.fanout_recovered();
            }
            let next = rec.pending.remove(0);
            let mut inner = Machine {
                s: next.state,
                fx: Vec::new(),
            };
            inner.s.now_ms = inner.s.now_ms.max(self.s.now_ms);
            inner.resume()?;
            if !self.absorb(next.index, inner)? {
                return Ok(());
            }
        }
    }

    /// An input while a branch is resumed: the branch takes it.
    pub(super) fn resume_input(&mut self, input: Input) -> Result<(), PolicyError> {
        let current = self
            .recovery()?
            .current
            .take()
            .ok_or_else(|| internal("no branch resumed; please report this"))?;
        let mut inner = Machine {
            s: current.state,
            fx: Vec::new(),
        };
        inner.s.now_ms = inner.s.now_ms.max(self.s.now_ms);
        inner.input(input)?;
        if self.absorb(current.index, inner)? {
            self.resume_next()
        } else {
            Ok(())
        }
    }

    /// Take over the resumed branch's effects (its own `finish` aside, its
    /// journal entries filled with its state); returns true when it ended.
    fn absorb(&mut self, index: usize, inner: Machine) -> Result<bool, PolicyError> {
        let Machine { s, mut fx } = inner;
        let text = crate::api::to_json(&s)?;
        super::fill_journals(&mut fx, &text)?;
        self.fx.extend(
            fx.into_iter()
                .filter(|f| !matches!(f, super::effect::Effect::Finish { .. })),
        );
        let rec = self.recovery()?;
        let Some(last) = &s.last else {
            let phase = s.phase;
            rec.current = Some(ResumedBranch { index, state: s });
            self.s.phase = phase;
            return Ok(false);
        };
        let outcome = last.get("outcome").and_then(Value::as_str).unwrap_or("");
        if let Some(entry) = rec.outcomes.get_mut(index).and_then(Value::as_object_mut) {
            entry.insert("outcome".into(), Value::String(outcome.to_owned()));
        }
        if let Some(done) = rec.done.get_mut(index) {
            done.clone_from(&s.done);
        }
        Ok(true)
    }

    /// Every branch settled: compensate what completed, then dead-letter.
    fn fanout_recovered(&mut self) -> Result<(), PolicyError> {
        let rec = self
            .s
            .fan_recovery
            .take()
            .ok_or_else(|| internal("no fan-out recovery; please report this"))?;
        for done in rec.done {
            self.s.done.extend(done);
        }
        self.s.fan_branches = Some(rec.outcomes);
        self.begin_comp("interrupted")
    }

    fn recovery(&mut self) -> Result<&mut FanRecovery, PolicyError> {
        self.s
            .fan_recovery
            .as_mut()
            .ok_or_else(|| internal("no fan-out recovery; please report this"))
    }
}
