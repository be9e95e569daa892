//! Fan-out: steps run concurrently, joined when they all ended; the fan-out
//! succeeds when at least `min_results` branches did (graceful
//! degradation).
//!
//! The loop stays one state machine per run: `fanout` answers with a `fork`
//! effect carrying one fresh *branch state* per branch. The host drives each
//! branch as an ordinary step on its own state (concurrently where it can),
//! then hands the branches' final states back with `joined`; the parent reads
//! their outcomes, results, completed compensable steps and retry spend from
//! them. A branch is a full step: its own key, breaker target, fallbacks,
//! attempt budget, decisions and dead-letter record.
//!
//! Each branch journals its own state under [`branch_key`] before every call
//! and when it ends, so a worker killed during a fan-out is recovered branch by
//! branch (`fanout_recover`).

use serde_json::{Value, json};

use super::effect::{BRANCH_PREFIX, Branch, Effect};
use super::input::{FanoutSpec, StepSpec};
use super::machine::{Machine, bad, envelope_for, internal};
use super::state::{FanoutState, Phase, State, StepState};
use crate::error::PolicyError;

/// The `tool` of a fan-out's own step (its events, key and dead-letter record).
pub const FANOUT_TOOL: &str = "fanout";

/// The store key of branch `index` of fan-out `fanout` of run `run_id`:
/// `agent-recovery/branch/<run_id>/<hex>`, where `<hex>` is
/// `hex(sha256(canonical_json([run_id, fanout, "fanout.branch", index])))`.
pub fn branch_key(run_id: &str, fanout: &str, index: u32) -> Result<String, PolicyError> {
    let hex = crate::idempotency::key(run_id, fanout, "fanout.branch", &index.to_string())?;
    Ok(format!("{BRANCH_PREFIX}{run_id}/{hex}"))
}

/// A branch's entry in the record's `branches`.
pub(super) fn branch_entry(id: &str, key: Option<&str>, outcome: &str) -> Value {
    json!({"id": id, "key": key, "outcome": outcome})
}

impl Machine {
    /// A fan-out starts: one branch state per branch, then `fork`.
    pub(super) fn start_fanout(&mut self, spec: FanoutSpec) -> Result<(), PolicyError> {
        if self.s.branch.is_some() {
            return Err(bad(
                "a fan-out inside a fan-out branch; run the inner fan-out as its own step after the join",
            ));
        }
        let ids: Vec<String> = spec.branches.iter().map(|b| b.id.clone()).collect();
        self.claim_ids(std::iter::once(spec.id.as_str()).chain(ids.iter().map(String::as_str)))?;
        let args = json!({"branches": ids, "min_results": spec.min_results});
        let key =
            crate::idempotency::key(&self.s.run_id, &spec.id, FANOUT_TOOL, &args.to_string())?;
        let spec_of_fanout = StepSpec {
            id: spec.id.clone(),
            tool: FANOUT_TOOL.to_owned(),
            call: None,
            args,
            target: None,
            fallbacks: Vec::new(),
            side_effect: false,
            compensation: false,
            checkpoint: false,
            idempotent: None,
            replay_of: None,
            read_stops_batch: false,
        };
        self.s.step = Some(StepState::new(
            spec_of_fanout,
            key,
            Vec::new(),
            self.s.now_ms,
        ));
        if self.s.cancelled {
            return self.begin_comp("cancelled");
        }
        let e = self.event("fanout");
        self.emit(e);
        let mut branches = Vec::with_capacity(spec.branches.len());
        for (i, step) in (0u32..).zip(spec.branches) {
            let mut state = self.s.branch_of(&spec.id);
            state.branch_index = Some(i);
            if self.s.config.journal {
                let key = branch_key(&self.s.run_id, &spec.id, i)?;
                if !self.s.branch_keys.contains(&key) {
                    self.s.branch_keys.push(key);
                }
            }
            branches.push(Branch {
                state: crate::api::to_json(&state)?,
                step,
            });
        }
        self.s.fanout = Some(FanoutState {
            id: spec.id.clone(),
            min_results: spec.min_results,
            branches: ids,
        });
        self.journal();
        self.s.phase = Phase::Joining;
        self.fx.push(Effect::Fork {
            fanout: spec.id,
            branches,
        });
        Ok(())
    }

    /// The branches ended: count the successes, keep their compensations.
    pub(super) fn joined(&mut self, states: &[String]) -> Result<(), PolicyError> {
        let fan = self
            .s
            .fanout
            .clone()
            .ok_or_else(|| internal("joining without a fan-out; please report this"))?;
        if states.len() != fan.branches.len() {
            return Err(bad(format!(
                "`joined` has {} states for the {} branches of fan-out {:?}; pass every branch's final state, in order",
                states.len(),
                fan.branches.len(),
                fan.id
            )));
        }
        let mut results = Vec::with_capacity(states.len());
        let mut ok = 0u32;
        let mut spent = self.s.retry_spent_ms;
        let mut done = Vec::new();
        let mut cancelled = false;
        let mut entries = Vec::with_capacity(states.len());
        for (i, (text, id)) in states.iter().zip(&fan.branches).enumerate() {
            crate::api::check_size("branch state", text)?;
            let b: State = serde_json::from_str(text).map_err(|e| {
                bad(format!(
                    "branch {i} of fan-out {:?}: not a state returned by advance ({e}); pass its final state unchanged",
                    fan.id
                ))
            })?;
            if b.branch.as_deref() != Some(fan.id.as_str()) || b.run_id != self.s.run_id {
                return Err(bad(format!(
                    "branch {i} is not a branch of fan-out {:?} of this run; pass the states of its `fork`, in order",
                    fan.id
                )));
            }
            let Some(last) = &b.last else {
                return Err(bad(format!(
                    "branch {i} ({id}) of fan-out {:?} has not finished; drive it to its `finish` first",
                    fan.id
                )));
            };
            let outcome = last.get("outcome").and_then(Value::as_str).unwrap_or("");
            entries.push(branch_entry(
                id,
                last.get("key").and_then(Value::as_str),
                outcome,
            ));
            let succeeded = outcome == "ok";
            if succeeded {
                ok = ok.saturating_add(1);
                results.push(last.get("result").cloned().unwrap_or(Value::Null));
            } else {
                results.push(Value::Null);
            }
            // The branches ran side by side: the run spent the longest of their waits.
            spent = spent.max(b.retry_spent_ms);
            cancelled |= b.cancelled;
            done.extend(b.done);
        }
        self.s.retry_spent_ms = spent;
        self.s.done.extend(done);
        self.s.fanout = None;
        self.s.fan_branches = Some(entries);
        if cancelled {
            self.s.cancelled = true;
            return self.begin_comp("cancelled");
        }
        if ok >= fan.min_results {
            self.s.fan_branches = None;
            return self.finish("ok", Some(Value::Array(results)), None);
        }
        let env = envelope_for(
            "runtime.fanout.insufficient",
            &format!(
                "{ok} of {} branches of fan-out {} succeeded; it needs {}",
                fan.branches.len(),
                fan.id,
                fan.min_results
            ),
            None,
        )?;
        let compensate = !self.s.done.is_empty();
        let mut e = self.event("decision");
        e.action = Some(if compensate { "compensate" } else { "fail" }.into());
        e.code = env.get("code").and_then(Value::as_str).map(str::to_owned);
        self.emit(e);
        self.step_mut()?.trail.push(env.clone());
        if compensate {
            self.begin_comp("dead_lettered")
        } else {
            self.finish("failed", None, Some(env))
        }
    }
}
