//! The transitions: one input in, the new state and the effects out.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::breaker::{Breaker, Gate, Report};
use super::config::{DeadLetterConfig, OnOpen};
use super::effect::{
    ATTEMPTS_PREFIX, BREAKER_PREFIX, DEAD_LETTER_STREAM, Effect, Event, IDEM_PREFIX,
    JOURNAL_PREFIX, JournalEntry, PROBE_PREFIX, RawJson,
};
use super::input::{CallResult, Input, StepSpec};
use super::state::{CompCurrent, CompState, DoneStep, LeaseScan, Phase, State, StepState};
use crate::config::BreakerThresholds;
use crate::error::{ErrorKind, PolicyError};

pub(super) fn bad(msg: impl Into<String>) -> PolicyError {
    PolicyError::new(ErrorKind::InvalidArgument, msg)
}

pub(super) fn internal(msg: impl Into<String>) -> PolicyError {
    PolicyError::new(ErrorKind::Internal, msg)
}

/// A store key: `prefix` then `name` (`format!` through `fmt` costs more).
pub(super) fn store_key(prefix: &str, name: &str) -> String {
    let mut key = String::with_capacity(prefix.len() + name.len());
    key.push_str(prefix);
    key.push_str(name);
    key
}

/// Feed one input to the loop.
/// `fx` is an empty buffer for the effects (a caller may reuse one).
pub fn advance(
    state: Option<Box<State>>,
    input: Input,
    now: u64,
    fx: Vec<Effect>,
) -> Result<(Box<State>, Vec<Effect>), PolicyError> {
    let mut m = match (state, input) {
        (
            None,
            Input::Run {
                run_id,
                seed,
                config,
                first,
                started_ms,
            },
        ) => {
            // A run started before its `run` input was sent: exactly `run`
            // at `started_ms`, then its first step at `now_ms`. A start after
            // `now_ms` (a wall clock that stepped back) is `now_ms`.
            let started = started_ms.map_or(now, |started| started.min(now));
            let mut s = Box::new(State::new(run_id, seed, config, started));
            let Some(first) = first else {
                return Ok((s, fx));
            };
            let (spec, end) = *first;
            // The run's first step in the same call: exactly `run`, then the
            // `step` input (`run` has no effects).
            s.now_ms = now;
            let mut m = Machine { s, fx };
            m.input(super::input::step_input(spec, end))?;
            m
        }
        (Some(_), Input::Run { .. }) => {
            return Err(bad(
                "input `run` with a state: the run already started; pass an empty state to start a new run",
            ));
        }
        (None, _) => {
            return Err(bad(
                "no state: the first input of a run must be `run`; pass the state returned by the previous call",
            ));
        }
        (Some(s), input) => {
            let mut m = Machine { s, fx };
            m.s.now_ms = now.max(m.s.now_ms);
            m.input(input)?;
            m
        }
    };
    Ok((m.s, std::mem::take(&mut m.fx)))
}

pub(super) struct Machine {
    /// Boxed: the state moves in and out of every call whole.
    pub(super) s: Box<State>,
    pub(super) fx: Vec<Effect>,
}

/// What a decision says, as the loop needs it.
struct Decided {
    action: String,
    delay_ms: Option<u64>,
    envelope: Value,
    /// The active policy's breaker thresholds (none from a policy built before decisions carried them).
    breaker: Option<BreakerThresholds>,
    /// The decision's own registry code (`runtime.policy.no_fallback`, ...).
    reason_code: Option<String>,
    /// A policy document's fallback chains by target.
    fallbacks: Option<BTreeMap<String, Vec<String>>>,
    /// A policy document's dead-letter entries by tool pattern.
    dead_letters: Option<BTreeMap<String, DeadLetterConfig>>,
}

impl Decided {
    fn parse(d: &Value) -> Result<Self, PolicyError> {
        let action = d
            .get("action")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                bad("the decision has no string `action`; pass decide-json's output unchanged")
            })?
            .to_owned();
        let breaker = match d.get("breaker") {
            None | Some(Value::Null) => None,
            Some(b) => Some(
                crate::from_value::<BreakerThresholds>(b)
                    .and_then(|t| t.validate("breaker").map(|()| t).map_err(|e| e.message))
                    .map_err(|e| {
                        bad(format!(
                            "the decision's `breaker` is invalid ({e}); the policy must answer {{\"failure_threshold\": 1..{}, \"open_ms\": 1..{}}} or omit it",
                            crate::config::MAX_ATTEMPTS,
                            crate::config::MAX_MS
                        ))
                    })?,
            ),
        };
        Ok(Decided {
            action,
            delay_ms: d.get("delay_ms").and_then(Value::as_u64),
            envelope: d.get("envelope").cloned().unwrap_or(Value::Null),
            breaker,
            reason_code: d
                .get("reason_code")
                .and_then(Value::as_str)
                .map(str::to_owned),
            fallbacks: table(d, "fallbacks", r#"{"<target>": ["<next target>", ...]}"#)?,
            dead_letters: table(
                d,
                "dead_letters",
                r#"{"<tool or prefix.*>": {"owner", "runbook", "depth_threshold"}}"#,
            )?,
        })
    }

    fn code(&self) -> Option<String> {
        self.envelope
            .get("code")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }
}

/// A decision's optional table member (absent or null: none).
fn table<T: serde::de::DeserializeOwned>(
    d: &Value,
    name: &str,
    shape: &str,
) -> Result<Option<T>, PolicyError> {
    match d.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => crate::from_value(v).map(Some).map_err(|e| {
            bad(format!(
                "the decision's `{name}` is invalid ({e}); the policy must answer {shape} or omit it"
            ))
        }),
    }
}

impl Machine {
    fn phase_is(&self, want: Phase, input: &str) -> Result<(), PolicyError> {
        if self.s.phase == want {
            return Ok(());
        }
        let phase = serde_json::to_string(&self.s.phase).unwrap_or_default();
        Err(bad(format!(
            "input `{input}` while the loop waits in phase {phase}; answer the last effect of the previous call"
        )))
    }

    pub(super) fn input(&mut self, input: Input) -> Result<(), PolicyError> {
        if self
            .s
            .fan_recovery
            .as_ref()
            .is_some_and(|r| r.current.is_some())
        {
            // A recovered fan-out's branch is being resumed: the input is its.
            return self.resume_input(input);
        }
        if matches!(input, Input::Recover) {
            return self.recover();
        }
        if self.s.phase == Phase::Finished {
            return Err(bad(format!(
                "the run is over (outcome {:?}); start a new run for more steps",
                self.s.outcome.as_deref().unwrap_or("")
            )));
        }
        match input {
            Input::Run { .. } => Err(bad("the run already started")),
            Input::Step(spec) => {
                self.phase_is(Phase::Idle, "step")?;
                self.start_step(spec)
            }
            Input::StepThenEnd(spec) => {
                self.phase_is(Phase::Idle, "step")?;
                if self.s.branch.is_some() {
                    return Err(bad(
                        "`step` with `end` on a fan-out branch's state; end the run itself after the join",
                    ));
                }
                self.s.end_after_step = true;
                self.start_step(spec)
            }
            Input::Fanout(spec) => {
                self.phase_is(Phase::Idle, "fanout")?;
                self.start_fanout(spec)
            }
            Input::Joined(states) => {
                self.phase_is(Phase::Joining, "joined")?;
                self.joined(&states)
            }
            Input::Read {
                values,
                versions,
                claim_stops_batch,
            } => {
                if self.s.phase == Phase::Calling {
                    self.read_found()?;
                }
                self.phase_is(Phase::Reading, "read")?;
                if self.s.step.as_ref().is_some_and(|st| st.refreshing) {
                    self.refreshed(&values, &versions)
                } else if self.s.recovering && self.s.fanout.is_some() {
                    self.fanout_recover_read(&values)
                } else if self.s.recovering {
                    self.recover_read(&values)
                } else {
                    self.read(values, &versions, claim_stops_batch)
                }
            }
            Input::Swapped {
                ok,
                current,
                version,
            } => {
                if self.s.phase == Phase::Taking {
                    return self.quota_swapped(ok, &current, version);
                }
                self.phase_is(Phase::Swapping, "swapped")?;
                self.swapped(ok, current, version)
            }
            Input::Claimed { ok, current } => {
                if self.s.phase == Phase::Leasing {
                    return self.lease_claimed(ok, &current);
                }
                if self.s.phase == Phase::Calling {
                    return self.claim_refused(ok, &current);
                }
                self.phase_is(Phase::Claiming, "claimed")?;
                self.claimed(ok, &current)
            }
            Input::Attempt(result, took) => {
                self.phase_is(Phase::Calling, "attempt")?;
                if let Some(c) = self.s.comp.as_ref().and_then(|c| c.current.as_ref()) {
                    let result = missing(result, &c.step.id, &c.step.tool, true)?;
                    let result = timed(result, took, self.s.config.attempt_timeout_ms)?;
                    self.comp_attempt(result)
                } else {
                    let st = self.step()?;
                    let result = missing(result, &st.spec.id, &st.spec.tool, false)?;
                    let result = timed(result, took, st.timeout_ms)?;
                    self.attempt(result)
                }
            }
            Input::Decision {
                decision: d,
                policy,
            } => {
                self.phase_is(Phase::Deciding, "decision")?;
                let parsed = Decided::parse(&d)?;
                self.log_decision(&d, policy.as_ref());
                if self.s.comp.as_ref().is_some_and(|c| c.current.is_some()) {
                    self.comp_decision(parsed)
                } else {
                    self.decision(parsed, d)
                }
            }
            Input::Slept => {
                self.phase_is(Phase::Sleeping, "slept")?;
                if self.s.comp.as_ref().is_some_and(|c| c.current.is_some()) {
                    self.comp_call()
                } else if self.s.step.as_ref().is_some_and(|st| st.polling) {
                    self.step_mut()?.polling = false;
                    self.read_step()
                } else {
                    self.refresh_breakers()
                }
            }
            Input::Restored(ok) => {
                self.phase_is(Phase::Restoring, "restored")?;
                if ok {
                    self.next_call()
                } else {
                    let env = envelope_for(
                        "runtime.state.checkpoint_missing",
                        "the checkpoint hook could not restore the step",
                        None,
                    )?;
                    self.finish("escalated", None, Some(env))
                }
            }
            Input::Cancel => self.cancel(),
            Input::End => {
                self.phase_is(Phase::Idle, "end")?;
                self.end()
            }
            Input::Recover => self.recover(),
        }
    }

    // ----- the journal, `end` and `recover` (docs/durability.md §1-2) -----

    /// Whether this run journals: the configuration says so and it is the main lane.
    fn journals(&self) -> bool {
        self.s.config.journal && self.s.branch.is_none()
    }

    fn journal_key(&self) -> String {
        store_key(JOURNAL_PREFIX, &self.s.run_id)
    }

    /// The journal entry, right before the batch's `call` or `fork` (and a
    /// branch's `finish`); `advance` fills in the state it returns. A fan-out
    /// branch journals under its own key.
    pub(super) fn journal(&mut self) {
        if !self.s.config.journal {
            return;
        }
        let key = match (&self.s.branch, self.s.branch_index) {
            (None, _) => Some(self.journal_key()),
            (Some(fanout), Some(i)) => super::fanout::branch_key(&self.s.run_id, fanout, i).ok(),
            (Some(_), None) => None,
        };
        if let Some(key) = key {
            self.fx.push(Effect::Journal {
                key,
                value: JournalEntry {
                    run_id: self.s.run_id.clone(),
                    state: None,
                    v: 1,
                    written_ms: self.s.now_ms,
                },
                ttl_ms: None,
            });
        }
    }

    /// The run ends: its journal entry goes, then its fan-outs' branch entries.
    fn unjournal(&mut self) {
        if self.journals() {
            let key = self.journal_key();
            self.fx.push(Effect::Delete { key });
            for key in std::mem::take(&mut self.s.branch_keys) {
                self.fx.push(Effect::Delete { key });
            }
        }
    }

    /// `end`: the caller says the run is complete.
    fn end(&mut self) -> Result<(), PolicyError> {
        if self.s.branch.is_some() {
            return Err(bad(
                "`end` on a fan-out branch's state; end the run itself after the join",
            ));
        }
        self.unjournal();
        self.fx.push(Effect::Finish {
            step: String::new(),
            outcome: "completed".to_owned(),
            run_finished: true,
            result: None,
            envelope: None,
            rendered: None,
            token: None,
        });
        self.s.phase = Phase::Finished;
        self.s.outcome = Some("completed".to_owned());
        Ok(())
    }

    /// `recover`: resume a run from its journaled state.
    fn recover(&mut self) -> Result<(), PolicyError> {
        let journaled = self.s.branch.is_none()
            && match self.s.phase {
                Phase::Calling => true,
                Phase::Joining => self.s.fanout.is_some(),
                _ => false,
            };
        if !journaled {
            let phase = serde_json::to_string(&self.s.phase).unwrap_or_default();
            let lane = if self.s.branch.is_some() {
                "a fan-out branch"
            } else {
                "the main lane"
            };
            return Err(bad(format!(
                "`recover` on a state that is not a journaled state (phase {phase} of {lane}); pass the `state` of an entry under {JOURNAL_PREFIX}"
            )));
        }
        if self.s.phase == Phase::Joining {
            // Read what each branch journaled, then settle them.
            return self.recover_fanout();
        }
        self.resume()
    }

    /// Resume the journaled call (the main lane's, or a recovered fan-out
    /// branch's): the same compensation again, or the step's key re-read.
    pub(super) fn resume(&mut self) -> Result<(), PolicyError> {
        self.s.recovering = true;
        let e = self.event("recover");
        self.emit(e);
        if self.s.comp.as_ref().is_some_and(|c| c.current.is_some()) {
            // The same compensation again: same key, same attempt number.
            return self.comp_call_effect(false);
        }
        let key = store_key(IDEM_PREFIX, &self.step()?.key);
        self.s.phase = Phase::Reading;
        self.fx.push(Effect::Read {
            keys: vec![key],
            go_on_if_absent: false,
        });
        Ok(())
    }

    /// The resumed step's idempotency entry: `done` answers from the cache;
    /// otherwise the same call again (same target, key and attempt number).
    fn recover_read(&mut self, values: &Map<String, Value>) -> Result<(), PolicyError> {
        let key = self.step()?.key.clone();
        let entry = values
            .get(&store_key(IDEM_PREFIX, &key))
            .cloned()
            .unwrap_or(Value::Null);
        if entry.get("status").and_then(Value::as_str) == Some("done") {
            self.cache_entry(&entry)?;
            return Ok(());
        }
        if self.deadline_left() == Some(0) {
            return self.deadline_exceeded();
        }
        let timeout_ms = self.call_timeout();
        self.step_mut()?.timeout_ms = timeout_ms;
        let st = self.step()?;
        let target = match &st.calling {
            Some(t) => t.clone(),
            None => st.targets.get(st.index).cloned().unwrap_or_default(),
        };
        let effect = Effect::Call {
            call: if st.index == 0 {
                "operation"
            } else {
                "fallback"
            },
            step: st.spec.id.clone(),
            target,
            key,
            attempt: st.attempts,
            timeout_ms,
            tool: st.spec.tool.clone(),
        };
        self.journal();
        self.s.phase = Phase::Calling;
        self.fx.push(effect);
        Ok(())
    }

    // ----- events -----

    pub(super) fn event(&self, name: &'static str) -> Event {
        let step = self.s.step.as_ref();
        Event {
            t_ms: self.s.now_ms.saturating_sub(self.s.started_ms),
            event: name,
            step: step.map(|s| s.spec.id.clone()),
            target: step.and_then(|s| s.targets.get(s.index).cloned()),
            ..Event::default()
        }
    }

    pub(super) fn emit(&mut self, e: Event) {
        self.fx.push(Effect::Emit { event: e });
    }

    pub(super) fn step(&self) -> Result<&StepState, PolicyError> {
        self.s
            .step
            .as_ref()
            .ok_or_else(|| internal("no step in progress; please report this"))
    }

    pub(super) fn step_mut(&mut self) -> Result<&mut StepState, PolicyError> {
        self.s
            .step
            .as_mut()
            .ok_or_else(|| internal("no step in progress; please report this"))
    }

    // ----- a step -----

    /// Record step ids, refusing one used by the run's latest
    /// [`RECENT_IDS`](super::state::RECENT_IDS) steps (kept as digests).
    pub(super) fn claim_ids<'i>(
        &mut self,
        ids: impl IntoIterator<Item = &'i str> + Clone,
    ) -> Result<(), PolicyError> {
        let digests: Vec<(&str, String)> = ids
            .into_iter()
            .map(|id| (id, super::state::id_digest(id)))
            .collect();
        if let Some((id, _)) = digests.iter().find(|(_, d)| self.s.ids.contains(d)) {
            return Err(bad(format!(
                "step id {id:?} was already used in this run; give every step its own id (it names the step in events, keys and dead-letter records)"
            )));
        }
        let ids = self.s.ids.get_mut();
        ids.extend(digests.into_iter().map(|(_, d)| d));
        let over = ids.len().saturating_sub(super::state::RECENT_IDS);
        ids.drain(..over);
        Ok(())
    }

    fn start_step(&mut self, spec: StepSpec) -> Result<(), PolicyError> {
        self.claim_ids([spec.id.as_str()])?;
        let read_stops_batch = spec.read_stops_batch;
        let key = match &spec.replay_of {
            Some(r) => crate::idempotency::replay_key(&r.key, r.n),
            None => crate::idempotency::key_of(&self.s.run_id, &spec.id, &spec.tool, &spec.args),
        };
        let mut targets = vec![spec.target.clone().unwrap_or_else(|| spec.tool.clone())];
        targets.extend(spec.fallbacks.iter().cloned());
        self.s.step = Some(StepState::new(spec, key, targets, self.s.now_ms));
        if self.s.cancelled {
            return self.begin_comp("cancelled");
        }
        // Nothing stored under the step's keys makes its call at once (the
        // read finds no breaker, no attempt, no idempotency entry) unless the
        // run's time or attempt budget is spent, or a retry quota is read.
        let at_once = self.deadline_left() != Some(0)
            && self.s.config.attempt_budget > 0
            && self.s.config.retry_quota.is_none();
        if read_stops_batch && at_once {
            return self.read_step_then_call();
        }
        self.read_step()
    }

    /// The keys a step reads before its first call: its targets' breakers,
    /// its attempt count, its idempotency entry.
    fn step_keys(&self) -> Result<Vec<String>, PolicyError> {
        let mut keys = self.chain_keys()?;
        let st = self.step()?;
        keys.push(store_key(ATTEMPTS_PREFIX, &st.key));
        keys.push(store_key(IDEM_PREFIX, &st.key));
        Ok(keys)
    }

    /// Read what the step needs.
    fn read_step(&mut self) -> Result<(), PolicyError> {
        let keys = self.step_keys()?;
        self.s.phase = Phase::Reading;
        self.fx.push(Effect::Read {
            keys,
            go_on_if_absent: false,
        });
        Ok(())
    }

    /// Read what the step needs, and in the same batch what `read` answers
    /// when every key is absent: the claim and the call. The host goes on
    /// past the read only when it found nothing; otherwise it answers `read`
    /// while the loop waits for `attempt` (`read_found`).
    fn read_step_then_call(&mut self) -> Result<(), PolicyError> {
        let keys = self.step_keys()?;
        let values: Map<String, Value> = keys.iter().map(|k| (k.clone(), Value::Null)).collect();
        self.s.phase = Phase::Reading;
        self.fx.push(Effect::Read {
            keys,
            go_on_if_absent: true,
        });
        self.read(values, &BTreeMap::new(), true)?;
        if self.s.phase != Phase::Calling {
            return Err(internal(
                "a first read without its call in the batch; please report this",
            ));
        }
        Ok(())
    }

    /// `read` while calling: the step's first read, sent with its call,
    /// found a value, so the host made none of the effects after it. The
    /// step is back where that read left it (nothing read, claimed or
    /// called); `read` then goes on as ever.
    fn read_found(&mut self) -> Result<(), PolicyError> {
        let compensating = self.s.comp.as_ref().is_some_and(|c| c.current.is_some());
        let st = self.step_mut()?;
        if compensating || st.calls != 1 || st.attempts != 1 || !st.claimed {
            return Err(bad(
                "input `read` while the loop waits for `attempt`: only the step's first read, sent with its call, is answered so (a read that found nothing goes on to the call)",
            ));
        }
        st.attempts = 0;
        st.calls = 0;
        st.claimed = false;
        st.calling = None;
        st.timeout_ms = None;
        st.probe = false;
        st.gate_epoch = 0;
        st.breakers.clear();
        st.versions.clear();
        self.s.phase = Phase::Reading;
        Ok(())
    }

    /// The key is in flight elsewhere: with `in_flight_wait_ms`, sleep (a
    /// cancellable poll of at most 250 ms) and read again; returns false
    /// when there is no wait (left).
    fn wait_in_flight(&mut self) -> Result<bool, PolicyError> {
        let wait = self.s.config.in_flight_wait_ms;
        if wait == 0 || self.s.recovering {
            return Ok(false);
        }
        let now = self.s.now_ms;
        let st = self.step_mut()?;
        let until = *st.in_flight_until.get_or_insert(now.saturating_add(wait));
        if now >= until {
            return Ok(false);
        }
        st.polling = true;
        self.sleep((until - now).min(250), true)?;
        Ok(true)
    }

    fn read(
        &mut self,
        values: Map<String, Value>,
        versions: &BTreeMap<String, u64>,
        claim_stops_batch: bool,
    ) -> Result<(), PolicyError> {
        let st = self.step()?;
        let key = st.key.clone();
        let targets = st.targets.clone();
        let entry = values
            .get(&store_key(IDEM_PREFIX, &key))
            .cloned()
            .unwrap_or(Value::Null);
        if self.cache_entry(&entry)? {
            return Ok(());
        }
        let attempts = values
            .get(&store_key(ATTEMPTS_PREFIX, &key))
            .and_then(|v| v.get("count"))
            .and_then(Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
        let (breakers, found) = stored_breakers(targets, &values, versions)?;
        self.quota_read(&values, versions);
        let st = self.step_mut()?;
        st.attempts = attempts;
        st.breakers = breakers;
        st.versions = found;
        let key = store_key(IDEM_PREFIX, &st.key);
        let now = self.s.now_ms;
        self.fx.push(Effect::Claim {
            key,
            value: in_flight_value(now),
            ttl_ms: Some(
                self.s
                    .config
                    .in_flight_ttl_ms
                    .min(self.s.config.idempotency_ttl_ms),
            ),
        });
        if claim_stops_batch && self.calls_at_once()? {
            // The call goes in the claim's batch: a host that stops the batch
            // at a failed claim makes the call only once the key is ours, so
            // a successful call costs one `advance` less. The effects and the
            // state are those of `claimed` (ok) after the claim.
            self.step_mut()?.claimed = true;
            self.next_call()?;
            if self.s.phase != Phase::Calling {
                return Err(internal(
                    "a claim in the call's batch without the call; please report this",
                ));
            }
            return Ok(());
        }
        self.s.phase = Phase::Claiming;
        Ok(())
    }

    /// Whether `next_call` would call the step's current target at once
    /// (nothing else first): not cancelled, time and attempts left, no call
    /// made yet in this run of the step, and the target's breaker lets it through.
    fn calls_at_once(&self) -> Result<bool, PolicyError> {
        if self.s.cancelled || self.deadline_left() == Some(0) {
            return Ok(false);
        }
        let st = self.step()?;
        if st.calls != 0 || st.attempts >= self.s.config.attempt_budget {
            return Ok(false);
        }
        let Some(target) = st.targets.get(st.index) else {
            return Ok(false);
        };
        let breaker = st.breakers.get(target).cloned().unwrap_or_default();
        let gate = breaker.gate(self.s.config.fallback_open_ms(), self.s.now_ms);
        Ok(matches!(gate, Gate::Pass))
    }

    /// `claimed` while calling: the claim that went in the call's batch
    /// failed, so the host made none of the effects after it. The step is
    /// back where `claimed` finds it (the call uncounted), and goes on as
    /// from a failed claim.
    fn claim_refused(&mut self, ok: bool, current: &Value) -> Result<(), PolicyError> {
        let compensating = self.s.comp.as_ref().is_some_and(|c| c.current.is_some());
        let st = self.step_mut()?;
        if ok || compensating || st.calls != 1 || !st.claimed {
            return Err(bad(
                "input `claimed` while the loop waits for `attempt`: only a claim that failed in the call's batch is answered so (a claim that succeeds goes on to the call)",
            ));
        }
        st.attempts = st.attempts.saturating_sub(1);
        st.calls = 0;
        st.claimed = false;
        st.calling = None;
        st.timeout_ms = None;
        st.probe = false;
        st.gate_epoch = 0;
        self.s.phase = Phase::Claiming;
        self.claimed(false, current)
    }

    /// After a retry sleep, read the chain's breakers again (another worker
    /// may have opened or closed one meanwhile); `read` goes on to the call.
    fn refresh_breakers(&mut self) -> Result<(), PolicyError> {
        self.step_mut()?.refreshing = true;
        let keys = self.chain_keys()?;
        self.s.phase = Phase::Reading;
        self.fx.push(Effect::Read {
            keys,
            go_on_if_absent: false,
        });
        Ok(())
    }

    /// The keys a step reads again and again: its chain's breakers (each
    /// target once) and, with a retry quota, the bucket.
    fn chain_keys(&self) -> Result<Vec<String>, PolicyError> {
        let mut keys: Vec<String> = Vec::new();
        for t in &self.step()?.targets {
            let k = store_key(BREAKER_PREFIX, t);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        if let Some(q) = &self.s.config.retry_quota {
            keys.push(q.key());
        }
        Ok(keys)
    }

    fn refreshed(
        &mut self,
        values: &Map<String, Value>,
        versions: &BTreeMap<String, u64>,
    ) -> Result<(), PolicyError> {
        let targets = self.step()?.targets.clone();
        let (breakers, found) = stored_breakers(targets, values, versions)?;
        self.quota_read(values, versions);
        let st = self.step_mut()?;
        st.refreshing = false;
        st.breakers = breakers;
        st.versions = found;
        self.next_call()
    }

    /// A recorded outcome (`done`) or another caller's mark (`in_flight`) ends
    /// the step without a call; returns true when it did.
    fn cache_entry(&mut self, entry: &Value) -> Result<bool, PolicyError> {
        let key = self.step()?.key.clone();
        match entry.get("status").and_then(Value::as_str) {
            Some("done") => {
                let mut e = self.event("cached");
                e.key = Some(key);
                e.target = entry
                    .get("target")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.emit(e);
                let result = entry.get("result").cloned().unwrap_or(Value::Null);
                let target = entry
                    .get("target")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                self.record_done(target)?;
                self.finish("ok", Some(result), None)?;
                Ok(true)
            }
            Some("in_flight") => {
                if self.wait_in_flight()? {
                    return Ok(true);
                }
                let mut e = self.event("in_flight");
                e.key = Some(key);
                self.emit(e);
                self.finish("in_flight", None, None)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn claimed(&mut self, ok: bool, current: &Value) -> Result<(), PolicyError> {
        if ok {
            self.step_mut()?.claimed = true;
            return self.next_call();
        }
        // Someone else created the key between our read and our claim.
        if self.cache_entry(current)? || self.wait_in_flight()? {
            return Ok(());
        }
        let mut e = self.event("in_flight");
        e.key = Some(self.step()?.key.clone());
        self.emit(e);
        self.finish("in_flight", None, None)
    }

    /// Choose the target and call it, or short-circuit, or stop.
    fn next_call(&mut self) -> Result<(), PolicyError> {
        if self.s.cancelled {
            return self.begin_comp("cancelled");
        }
        if self.deadline_left() == Some(0) {
            return self.deadline_exceeded();
        }
        let budget = self.s.config.attempt_budget;
        let st = self.step()?;
        if st.attempts >= budget {
            let env = envelope_for(
                "runtime.budget.attempts_exhausted",
                &format!("the input used its {budget} attempts"),
                None,
            )?;
            return self.exhausted(env);
        }
        let start = st.index;
        self.scan(start, start, None)
    }

    /// Walk the chain from `from`: call the first target whose breaker lets
    /// a call through, claim the probe lease of the first one due a probe,
    /// short-circuit the open ones; when every remaining target is open, ask
    /// the policy about the short-circuit (back at `start`). `wait`: the
    /// shortest wait of the open targets seen before `from`.
    pub(super) fn scan(
        &mut self,
        from: usize,
        start: usize,
        mut wait: Option<u64>,
    ) -> Result<(), PolicyError> {
        let now = self.s.now_ms;
        let fallback_open_ms = self.s.config.fallback_open_ms();
        let n = self.step()?.targets.len();
        for i in from..n {
            let st = self.step()?;
            let Some(target) = st.targets.get(i).cloned() else {
                break;
            };
            let breaker = st.breakers.get(&target).cloned().unwrap_or_default();
            if i != st.index {
                self.step_mut()?.index = i;
                let e = self.event("fallback");
                self.emit(e);
            }
            match breaker.gate(fallback_open_ms, now) {
                Gate::Pass => return self.call_target(None),
                Gate::Probe => {
                    // One probe across the fleet: whoever creates the lease probes.
                    let id = self.step()?.spec.id.clone();
                    let open_ms = breaker.open_ms.unwrap_or(fallback_open_ms);
                    self.step_mut()?.lease = Some(LeaseScan { start, wait });
                    self.s.phase = Phase::Leasing;
                    self.fx.push(Effect::Claim {
                        key: store_key(PROBE_PREFIX, &target),
                        value: RawJson::of(
                            &json!({"since_ms": now, "open_ms": open_ms, "step": id}),
                        ),
                        ttl_ms: Some(open_ms),
                    });
                    return Ok(());
                }
                Gate::Blocked(ms) => {
                    self.short_circuit(ms);
                    wait = Some(wait.map_or(ms, |w| w.min(ms)));
                }
            }
        }
        // Every remaining target is open: the policy decides on the short-circuit.
        self.step_mut()?.index = start;
        let wait = wait.unwrap_or(0);
        let st = self.step()?;
        let target = st.targets.get(start).cloned().unwrap_or_default();
        if self.s.config.on_open == OnOpen::Fail {
            return self.fail_open(&target, wait);
        }
        let obs = json!({"error": {
            "code": "runtime.circuit.open",
            "message": format!("circuit open for target {target}; the call was not made"),
            "retryable": true,
            "retry_after_ms": wait,
        }});
        self.step_mut()?.short_circuit = true;
        self.decide(obs)
    }

    /// `on_open: fail`: every target left is open, so the step ends `failed`
    /// now, with the `runtime.circuit.open` envelope whose `retry_after_ms`
    /// is the time to the first probe, for the caller to fall back on.
    fn fail_open(&mut self, target: &str, wait: u64) -> Result<(), PolicyError> {
        let env = envelope_for(
            "runtime.circuit.open",
            &format!("circuit open for target {target}; the call was not made"),
            Some(wait),
        )?;
        let mut e = self.event("decision");
        e.action = Some("fail".into());
        e.code = Some("runtime.circuit.open".into());
        e.attempt = Some(self.step()?.attempts);
        self.emit(e);
        self.step_mut()?.trail.push(env.clone());
        self.finish("failed", None, Some(env))
    }

    fn short_circuit(&mut self, ms: u64) {
        let mut e = self.event("short_circuit");
        e.code = Some("runtime.circuit.open".into());
        e.delay_ms = Some(ms);
        e.state = Some("open".into());
        self.emit(e);
    }

    /// The answer to a probe lease: the winner probes; the loser treats the
    /// target as open until the lease expires and goes on down the chain.
    fn lease_claimed(&mut self, ok: bool, current: &Value) -> Result<(), PolicyError> {
        let scan = self
            .step_mut()?
            .lease
            .take()
            .ok_or_else(|| internal("no probe lease pending; please report this"))?;
        if ok {
            return self.call_target(Some(scan));
        }
        let now = self.s.now_ms;
        let fallback_open_ms = self.s.config.fallback_open_ms();
        let st = self.step()?;
        let i = st.index;
        let target = st.targets.get(i).cloned().unwrap_or_default();
        let open_ms = st
            .breakers
            .get(&target)
            .and_then(|b| b.open_ms)
            .unwrap_or(fallback_open_ms);
        // The lease lives its own `open_ms` (the winner's breaker's) from its
        // `since_ms`; a value without them counts as a fresh one of ours.
        let lease_ms = current
            .get("open_ms")
            .and_then(Value::as_u64)
            .unwrap_or(open_ms);
        let left = current
            .get("since_ms")
            .and_then(Value::as_u64)
            .map_or(lease_ms, |since| {
                since.saturating_add(lease_ms).saturating_sub(now)
            })
            .max(1);
        self.short_circuit(left);
        let wait = Some(scan.wait.map_or(left, |w| w.min(left)));
        self.scan(i.saturating_add(1), scan.start, wait)
    }

    /// Call the chosen target; `probe`: as the breaker's half-open probe
    /// (the breaker moves to half-open first), with the scan it paused.
    fn call_target(&mut self, probe: Option<LeaseScan>) -> Result<(), PolicyError> {
        let st = self.step()?;
        let target = st.targets.get(st.index).cloned().unwrap_or_default();
        let gate_epoch = st.breakers.get(&target).map_or(0, |b| b.epoch);
        if let Some(scan) = probe {
            let then = super::swap::Then::Probe(scan);
            if self
                .report_breaker(target, Report::Probe, gate_epoch, then)?
                .is_none()
            {
                return Ok(());
            }
        }
        self.step_mut()?.gate_epoch = gate_epoch;
        self.call_now(probe.is_some())
    }

    /// Make the call: count the attempt, journal, `call`.
    pub(super) fn call_now(&mut self, probe: bool) -> Result<(), PolicyError> {
        let key = self.step()?.key.clone();
        let ttl = self.s.config.idempotency_ttl_ms;
        let st = self.step_mut()?;
        st.probe = probe;
        st.attempts = st.attempts.saturating_add(1);
        st.calls = st.calls.saturating_add(1);
        let target = st.targets.get(st.index).cloned().unwrap_or_default();
        st.calling = Some(target.clone());
        let (attempt, index, id) = (st.attempts, st.index, st.spec.id.clone());
        let tool = st.spec.tool.clone();
        self.fx.push(Effect::Write {
            key: store_key(ATTEMPTS_PREFIX, &key),
            value: count_value(attempt),
            ttl_ms: Some(ttl),
        });
        let timeout_ms = self.call_timeout();
        self.step_mut()?.timeout_ms = timeout_ms;
        self.journal();
        self.s.phase = Phase::Calling;
        self.fx.push(Effect::Call {
            call: if index == 0 { "operation" } else { "fallback" },
            step: id,
            target,
            key,
            attempt,
            timeout_ms,
            tool,
        });
        Ok(())
    }

    fn attempt_event(&mut self, call: &'static str) -> Result<(), PolicyError> {
        let st = self.step()?;
        let mut e = self.event("attempt");
        e.attempt = Some(st.attempts);
        e.call = Some(call);
        e.key = Some(st.key.clone());
        self.emit(e);
        Ok(())
    }

    fn attempt(&mut self, result: CallResult) -> Result<(), PolicyError> {
        let call = if self.step()?.index == 0 {
            "operation"
        } else {
            "fallback"
        };
        self.attempt_event(call)?;
        match result {
            CallResult::Ok(v) => self.success(v),
            CallResult::Failed(obs) => self.decide(super::outcome::failure(obs)),
            CallResult::TimedOut | CallResult::UnknownTool | CallResult::NoCompensation => {
                Err(internal("a call without a result was not made a failure"))
            }
            CallResult::Response(o) => match super::outcome::judge(&o) {
                None => self.success(o),
                Some(obs) => self.decide(obs),
            },
        }
    }

    fn success(&mut self, value: Value) -> Result<(), PolicyError> {
        let st = self.step()?;
        let mut e = self.event("ok");
        e.attempt = Some(st.attempts);
        self.emit(e);
        let then = super::swap::Then::Success(value);
        let Some(super::swap::Then::Success(value)) = self.breaker_answered(then)? else {
            return Ok(());
        };
        self.succeeded(value)
    }

    /// The call succeeded and its breaker is recorded: the cache, the quota, `finish`.
    pub(super) fn succeeded(&mut self, value: Value) -> Result<(), PolicyError> {
        let st = self.step()?;
        let target = st.targets.get(st.index).cloned().unwrap_or_default();
        let now = self.s.now_ms;
        self.fx.push(Effect::Write {
            key: store_key(IDEM_PREFIX, &st.key),
            value: done_value(now, &value, &target),
            ttl_ms: Some(self.s.config.idempotency_ttl_ms),
        });
        let retry_cost = self.step()?.retry_cost;
        if let Some(q) = &self.s.config.retry_quota {
            // The retry that led here gives its tokens back; a first-call success a few.
            let amount = retry_cost.unwrap_or(q.success_refund);
            // A bucket the step last saw full takes nothing back.
            let full = self.s.quota.is_some_and(|seen| seen.tokens >= q.capacity);
            if amount > 0 && !full {
                let delta = i64::try_from(amount).unwrap_or(i64::MAX);
                return self.quota_add(delta, 0, super::quota::QuotaThen::Refund { value });
            }
        }
        self.refunded(value)
    }

    /// The call succeeded, its quota refunded: record it and finish the step.
    pub(super) fn refunded(&mut self, value: Value) -> Result<(), PolicyError> {
        let st = self.step()?;
        let target = st.targets.get(st.index).cloned().unwrap_or_default();
        self.record_done(target)?;
        self.finish("ok", Some(value), None)
    }

    fn record_done(&mut self, target: String) -> Result<(), PolicyError> {
        let spec = &self.step()?.spec;
        if spec.side_effect && spec.compensation {
            let spec = StepSpec::clone(spec);
            self.s.done.push(DoneStep {
                id: spec.id,
                tool: spec.tool,
                call: spec.call,
                args: spec.args,
                target,
            });
        }
        Ok(())
    }

    /// The target answered (success or a non-transient failure): record it
    /// in its breaker (`swap`) and return `None`, or, when nothing is to be
    /// written, return `then` for the caller to go on at once.
    fn breaker_answered(
        &mut self,
        then: super::swap::Then,
    ) -> Result<Option<super::swap::Then>, PolicyError> {
        let rate = self.s.config.breaker_for(None).rate;
        self.record_outcome(Report::Success { rate }, then)
    }

    /// Records `report` for the call in flight (none: `then` back).
    fn record_outcome(
        &mut self,
        report: Report,
        then: super::swap::Then,
    ) -> Result<Option<super::swap::Then>, PolicyError> {
        let st = self.step()?;
        let Some(target) = st.calling.clone() else {
            return Ok(Some(then));
        };
        let gate_epoch = st.gate_epoch;
        self.report_breaker(target, report, gate_epoch, then)
    }

    fn decide(&mut self, observation: Value) -> Result<(), PolicyError> {
        let st = self.step()?;
        let mut ctx = Map::new();
        if let Some(c) = &st.spec.call {
            ctx.insert("call".into(), json!(c));
        }
        ctx.insert("attempt".into(), json!(st.attempts.max(1)));
        ctx.insert("elapsed_ms".into(), json!(self.s.retry_spent_ms));
        if let Some(seed) = self.s.seed {
            ctx.insert("seed".into(), json!(seed));
        }
        ctx.insert("now_ms".into(), json!(self.s.now_ms));
        if let Some(i) = st.spec.idempotent {
            ctx.insert("idempotent".into(), json!(i));
        }
        ctx.insert("checkpoint_available".into(), json!(st.spec.checkpoint));
        ctx.insert(
            "fallback_available".into(),
            json!(st.index + 1 < st.targets.len()),
        );
        ctx.insert("compensations_pending".into(), json!(self.s.done.len()));
        if let Some(p) = &self.s.config.policy {
            ctx.insert("config".into(), p.clone());
        }
        let target = st
            .calling
            .clone()
            .unwrap_or_else(|| st.targets.get(st.index).cloned().unwrap_or_default());
        let at = (st.spec.id.clone(), target, "operation", st.attempts.max(1));
        if st.spec.fallbacks.is_empty() && st.targets.len() == 1 {
            self.step_mut()?.asked = Some(observation.clone());
        }
        self.ask(at, observation.to_string(), Value::Object(ctx).to_string());
        Ok(())
    }

    /// Ask the active policy (the `decide` effect); keep what the decision
    /// log's line needs when it is on.
    fn ask(&mut self, at: (String, String, &str, u32), observation: String, context: String) {
        self.s.pending_log = self
            .s
            .config
            .decision_log
            .map(|c| super::decision_log::PendingLog::new(c, at, &observation, &context));
        self.s.phase = Phase::Deciding;
        self.fx.push(Effect::Decide {
            observation,
            context,
        });
    }

    /// The decision log's line of the decision that just came in (a `log`
    /// effect), when the log is on.
    fn log_decision(&mut self, decision: &Value, policy: Option<&Value>) {
        let (Some(config), Some(pending)) = (self.s.config.decision_log, self.s.pending_log.take())
        else {
            return;
        };
        let line = super::decision_log::line(
            config,
            &self.s.run_id,
            self.s.started_ms,
            self.s.now_ms,
            &pending,
            decision,
            policy,
        );
        self.fx.push(Effect::Log { line });
    }

    /// What a policy document says about this step, from its decision: the
    /// dead-letter entry of the step's tool; and, when the step names no
    /// fallbacks, the chain of its target, which becomes the step's. Returns
    /// true when it asked the policy again because the decision escalated
    /// for want of the fallback the chain now gives.
    fn adopt(&mut self, d: &Decided) -> Result<bool, PolicyError> {
        let st = self.step_mut()?;
        let asked = st.asked.take();
        st.dead_letter = d
            .dead_letters
            .as_ref()
            .and_then(|t| crate::document::dead_letter_for(t, &st.spec.tool))
            .cloned();
        if !st.spec.fallbacks.is_empty() || st.targets.len() != 1 {
            return Ok(false);
        }
        let chain = d
            .fallbacks
            .as_ref()
            .zip(st.targets.first())
            .and_then(|(f, target)| f.get(target));
        let Some(chain) = chain else {
            return Ok(false);
        };
        for next in chain {
            if !st.targets.contains(next) {
                st.targets.push(next.clone());
            }
        }
        match asked {
            Some(obs)
                if st.targets.len() > 1
                    && d.reason_code.as_deref() == Some("runtime.policy.no_fallback") =>
            {
                self.decide(obs)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn decision(&mut self, d: Decided, raw: Value) -> Result<(), PolicyError> {
        if self.adopt(&d)? {
            return Ok(());
        }
        let st = self.step_mut()?;
        st.trail.push(d.envelope.clone());
        let short = std::mem::take(&mut st.short_circuit);
        let attempts = st.attempts;
        let mut e = self.event("decision");
        e.attempt = Some(attempts);
        e.action = Some(d.action.clone());
        e.code = d.code();
        e.delay_ms = d.delay_ms;
        self.emit(e);
        if !short {
            // A transient failure counts under the thresholds the run
            // configuration sets, else the decision's (`RunConfig::breaker_for`).
            let transient = d.envelope.get("class").and_then(Value::as_str) == Some("transient");
            let then = super::swap::Then::Decision(raw);
            let pending = if transient {
                let cfg = self.s.config.breaker_for(d.breaker);
                self.record_outcome(Report::Failure(cfg), then)?
            } else if let Some(open_ms) = self.shed_for(&d) {
                self.record_outcome(Report::Shed { open_ms }, then)?
            } else {
                self.breaker_answered(then)?
            };
            if pending.is_none() {
                return Ok(());
            }
        }
        self.act_on(d)
    }

    /// How long a target that refused with a quota error (`<kind>.quota.*`)
    /// is shed when the step falls back from it: the breaker opens for the
    /// thresholds' `open_ms`, or the failure's `retry_after_ms` when longer,
    /// so the next steps start at the fallback instead of asking the
    /// exhausted target again. None for any other decision.
    fn shed_for(&self, d: &Decided) -> Option<u64> {
        if d.action != "fallback" {
            return None;
        }
        let code = d.envelope.get("code").and_then(Value::as_str)?;
        if code.split('.').nth(1) != Some("quota") {
            return None;
        }
        let open_ms = self.s.config.breaker_for(d.breaker).open_ms;
        let hint = d
            .envelope
            .get("retry_after_ms")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Some(open_ms.max(hint))
    }

    /// Act on a decision whose outcome the breaker has recorded (`raw`: the
    /// decision as the policy gave it).
    pub(super) fn act(&mut self, raw: &Value) -> Result<(), PolicyError> {
        let d = Decided::parse(raw)?;
        self.act_on(d)
    }

    fn act_on(&mut self, d: Decided) -> Result<(), PolicyError> {
        self.step_mut()?.calling = None;
        let env = Some(d.envelope.clone());
        match d.action.as_str() {
            "retry" => {
                let delay = d.delay_ms.unwrap_or(0);
                if self.deadline_left().is_some_and(|left| delay >= left) {
                    return self.deadline_exceeded();
                }
                if let Some(q) = &self.s.config.retry_quota {
                    let timeout = d
                        .envelope
                        .pointer("/upstream/source")
                        .and_then(Value::as_str)
                        == Some("timeout");
                    let cost = if timeout {
                        q.timeout_cost
                    } else {
                        q.retry_cost
                    };
                    self.step_mut()?.retry_cost = Some(cost);
                    let delta = i64::try_from(cost).map_or(i64::MIN, |c| -c);
                    return self.quota_add(
                        delta,
                        cost,
                        super::quota::QuotaThen::Take { delay_ms: delay },
                    );
                }
                self.retry_sleep(delay)
            }
            "fallback" => {
                let st = self.step_mut()?;
                if st.index + 1 >= st.targets.len() {
                    return self.finish("escalated", None, env);
                }
                st.index += 1;
                // The first target of a policy document's chain: its breaker
                // (and the next ones') was not read with the step's.
                let learned = st.spec.fallbacks.is_empty() && st.index == 1;
                let e = self.event("fallback");
                self.emit(e);
                if learned {
                    return self.refresh_breakers();
                }
                self.next_call()
            }
            "restore" => {
                let e = self.event("restore");
                self.emit(e);
                let step = self.step()?.spec.id.clone();
                self.s.phase = Phase::Restoring;
                self.fx.push(Effect::Restore { step });
                Ok(())
            }
            "replan" => self.finish("replan", None, env),
            "fail" => self.finish("failed", None, env),
            "escalate" => self.finish("escalated", None, env),
            "await_input" => self.finish("awaiting_input", None, env),
            "dead_letter" => self.dead_letter(Vec::new(), "dead_lettered"),
            "compensate" => self.begin_comp("dead_lettered"),
            other => Err(bad(format!(
                "the decision's action {other:?} is unknown to this runtime; the policy must answer a 0.1 action"
            ))),
        }
    }

    fn retry_sleep(&mut self, delay: u64) -> Result<(), PolicyError> {
        self.s.retry_spent_ms = self.s.retry_spent_ms.saturating_add(delay);
        self.sleep(delay, true)
    }

    /// The retry quota's answer: sleep and retry, or the step is exhausted.
    pub(super) fn taken(&mut self, granted: bool, delay: u64) -> Result<(), PolicyError> {
        if granted {
            return self.retry_sleep(delay);
        }
        let cost = self.step_mut()?.retry_cost.take().unwrap_or(0);
        let name = self
            .s
            .config
            .retry_quota
            .as_ref()
            .map(|q| q.name.clone())
            .unwrap_or_default();
        let env = envelope_for(
            "runtime.budget.retry_quota_exhausted",
            &format!("the retry quota {name:?} holds fewer than the {cost} tokens the retry costs"),
            None,
        )?;
        self.exhausted(env)
    }

    fn sleep(&mut self, ms: u64, cancellable: bool) -> Result<(), PolicyError> {
        let in_comp = !cancellable;
        if ms == 0 {
            return if in_comp {
                self.comp_call()
            } else {
                self.next_call()
            };
        }
        let mut e = self.event("sleep");
        e.delay_ms = Some(ms);
        if let Some(c) = self.s.comp.as_ref().and_then(|c| c.current.as_ref()) {
            e.step = Some(c.step.id.clone());
            e.target = Some(c.step.target.clone());
        }
        self.emit(e);
        self.s.phase = Phase::Sleeping;
        self.fx.push(Effect::Sleep { ms, cancellable });
        Ok(())
    }

    /// Ms left before the run's deadline (none without one).
    fn deadline_left(&self) -> Option<u64> {
        let deadline = self.s.config.deadline_ms?;
        let end = self.s.started_ms.saturating_add(deadline);
        Some(end.saturating_sub(self.s.now_ms))
    }

    /// The timeout of the next call: the attempt timeout, capped by the deadline.
    fn call_timeout(&self) -> Option<u64> {
        match (self.s.config.attempt_timeout_ms, self.deadline_left()) {
            (Some(a), Some(d)) => Some(a.min(d)),
            (a, d) => a.or(d),
        }
    }

    /// The run's deadline passed (or a retry would wait past it): the step
    /// ends as a total timeout, exhausted (compensate or dead-letter).
    fn deadline_exceeded(&mut self) -> Result<(), PolicyError> {
        let mut obs = json!({
            "source": "timeout",
            "phase": "total",
            "after_ms": self.s.now_ms.saturating_sub(self.s.started_ms),
        });
        if let (Some(call), Some(o)) = (self.step()?.spec.call.clone(), obs.as_object_mut()) {
            o.insert("call".into(), json!(call));
        }
        let obs = crate::observation_view::ObservationView::from_value(&obs)?;
        let env = crate::normalize::classify_view(&obs)?;
        let env = serde_json::to_value(env).map_err(|e| internal(e.to_string()))?;
        self.exhausted(env)
    }

    /// Out of attempts before a call: compensate when side effects are pending, else dead-letter.
    fn exhausted(&mut self, envelope: Value) -> Result<(), PolicyError> {
        let action = if self.s.done.is_empty() {
            "dead_letter"
        } else {
            "compensate"
        };
        let mut e = self.event("decision");
        e.action = Some(action.into());
        e.code = envelope
            .get("code")
            .and_then(Value::as_str)
            .map(str::to_owned);
        e.attempt = Some(self.step()?.attempts);
        self.emit(e);
        self.step_mut()?.trail.push(envelope);
        if self.s.done.is_empty() {
            self.dead_letter(Vec::new(), "dead_lettered")
        } else {
            self.begin_comp("dead_lettered")
        }
    }

    fn cancel(&mut self) -> Result<(), PolicyError> {
        if self.s.phase == Phase::Joining {
            return Err(bad(
                "cancel during a fan-out: cancel its branches, then answer `joined` with their states",
            ));
        }
        if self.s.comp.is_some() {
            return Err(bad(
                "cancel while compensations run: they always run to the end; answer the pending effect instead",
            ));
        }
        self.s.cancelled = true;
        let e = self.event("cancelled");
        self.emit(e);
        self.begin_comp("cancelled")
    }

    // ----- compensations -----

    pub(super) fn begin_comp(&mut self, then: &str) -> Result<(), PolicyError> {
        let mut queue = self.s.done.clone();
        queue.reverse();
        self.s.comp = Some(CompState {
            queue,
            current: None,
            results: Vec::new(),
            then: then.to_owned(),
        });
        self.comp_next()
    }

    fn comp_next(&mut self) -> Result<(), PolicyError> {
        let comp = self
            .s
            .comp
            .as_mut()
            .ok_or_else(|| internal("no compensation state"))?;
        if comp.queue.is_empty() {
            comp.current = None;
            return self.comp_done();
        }
        let step = comp.queue.remove(0);
        let key = crate::idempotency::key(
            &self.s.run_id,
            &step.id,
            &format!("compensate:{}", step.tool),
            &step.args.to_string(),
        )?;
        let mut e = self.event("compensate");
        e.step = Some(step.id.clone());
        e.target = Some(step.target.clone());
        e.key = Some(key.clone());
        self.emit(e);
        if let Some(comp) = self.s.comp.as_mut() {
            comp.current = Some(CompCurrent {
                step,
                key,
                attempts: 0,
                spent_ms: 0,
                trail: Vec::new(),
            });
        }
        self.comp_call()
    }

    fn current(&mut self) -> Result<&mut CompCurrent, PolicyError> {
        self.s
            .comp
            .as_mut()
            .and_then(|c| c.current.as_mut())
            .ok_or_else(|| internal("no compensation running"))
    }

    fn comp_call(&mut self) -> Result<(), PolicyError> {
        self.comp_call_effect(true)
    }

    /// Call the running compensation: the next attempt, or (`recover`) the
    /// journaled one again.
    pub(super) fn comp_call_effect(&mut self, next_attempt: bool) -> Result<(), PolicyError> {
        let timeout = self.s.config.attempt_timeout_ms;
        let c = self.current()?;
        if next_attempt {
            c.attempts = c.attempts.saturating_add(1);
        }
        let effect = Effect::Call {
            call: "compensation",
            step: c.step.id.clone(),
            target: c.step.target.clone(),
            key: c.key.clone(),
            attempt: c.attempts,
            timeout_ms: timeout,
            tool: c.step.tool.clone(),
        };
        self.journal();
        self.s.phase = Phase::Calling;
        self.fx.push(effect);
        Ok(())
    }

    fn comp_event(&mut self, name: &'static str) -> Result<Event, PolicyError> {
        let mut e = self.event(name);
        let c = self.current()?;
        e.step = Some(c.step.id.clone());
        e.target = Some(c.step.target.clone());
        e.attempt = Some(c.attempts);
        Ok(e)
    }

    fn comp_attempt(&mut self, result: CallResult) -> Result<(), PolicyError> {
        let mut e = self.comp_event("attempt")?;
        e.call = Some("compensation");
        e.key = Some(self.current()?.key.clone());
        self.emit(e);
        let failure = match result {
            CallResult::Ok(_) => None,
            CallResult::Failed(obs) => Some(super::outcome::failure(obs)),
            CallResult::TimedOut | CallResult::UnknownTool | CallResult::NoCompensation => {
                return Err(internal("a call without a result was not made a failure"));
            }
            CallResult::Response(o) => super::outcome::judge(&o),
        };
        let Some(obs) = failure else {
            let e = self.comp_event("ok")?;
            self.emit(e);
            let c = self.current()?;
            let result =
                json!({"step": c.step.id, "key": c.key, "attempts": c.attempts, "outcome": "ok"});
            self.comp_result(result)?;
            return self.comp_next();
        };
        let seed = self.s.seed;
        let now = self.s.now_ms;
        let policy = self.s.config.policy.clone();
        let c = self.current()?;
        let mut ctx = Map::new();
        if let Some(call) = &c.step.call {
            ctx.insert("call".into(), json!(call));
        }
        ctx.insert("attempt".into(), json!(c.attempts));
        ctx.insert("elapsed_ms".into(), json!(c.spent_ms));
        if let Some(seed) = seed {
            ctx.insert("seed".into(), json!(seed));
        }
        ctx.insert("now_ms".into(), json!(now));
        ctx.insert("checkpoint_available".into(), json!(false));
        ctx.insert("fallback_available".into(), json!(false));
        ctx.insert("compensations_pending".into(), json!(0));
        if let Some(p) = policy {
            ctx.insert("config".into(), p);
        }
        let at = (
            c.step.id.clone(),
            c.step.target.clone(),
            "compensation",
            c.attempts,
        );
        self.ask(at, obs.to_string(), Value::Object(ctx).to_string());
        Ok(())
    }

    fn comp_result(&mut self, result: Value) -> Result<(), PolicyError> {
        let comp = self
            .s
            .comp
            .as_mut()
            .ok_or_else(|| internal("no compensation state"))?;
        comp.results.push(result);
        comp.current = None;
        Ok(())
    }

    fn comp_decision(&mut self, d: Decided) -> Result<(), PolicyError> {
        let mut e = self.comp_event("decision")?;
        e.action = Some(d.action.clone());
        e.code = d.code();
        e.delay_ms = d.delay_ms;
        self.emit(e);
        self.current()?.trail.push(d.envelope.clone());
        if d.action == "retry" {
            let delay = d.delay_ms.unwrap_or(0);
            let c = self.current()?;
            c.spent_ms = c.spent_ms.saturating_add(delay);
            return self.sleep(delay, false);
        }
        let mut e = self.comp_event("compensate")?;
        e.state = Some("failed".into());
        e.code = d.code();
        self.emit(e);
        let c = self.current()?;
        let result = json!({
            "step": c.step.id, "key": c.key, "attempts": c.attempts, "outcome": "failed",
            "envelope": d.envelope, "trail": c.trail,
        });
        self.comp_result(result)?;
        self.comp_next()
    }

    fn comp_done(&mut self) -> Result<(), PolicyError> {
        let comp = self
            .s
            .comp
            .take()
            .ok_or_else(|| internal("no compensation state"))?;
        self.s.done.clear();
        let failed = comp
            .results
            .iter()
            .any(|r| r.get("outcome").and_then(Value::as_str) == Some("failed"));
        if comp.then == "interrupted" {
            return self.dead_letter(comp.results, "interrupted");
        }
        if comp.then == "cancelled" && self.s.recovering {
            // A recovered run never ends in silence.
            if self.s.step_outcome.is_none() {
                self.s.step_outcome = Some("cancelled".to_owned());
            }
            return self.dead_letter(comp.results, "interrupted");
        }
        if comp.then == "cancelled" {
            if failed {
                return self.dead_letter(comp.results, "cancelled");
            }
            return self.finish("cancelled", None, None);
        }
        self.dead_letter(comp.results, "dead_lettered")
    }

    fn dead_letter(&mut self, compensations: Vec<Value>, outcome: &str) -> Result<(), PolicyError> {
        let now = self.s.now_ms;
        let mut record = Map::new();
        record.insert("run_id".into(), json!(self.s.run_id));
        let st = self.s.step.as_ref();
        let trail = st.map(|st| st.trail.clone()).unwrap_or_default();
        record.insert("step_id".into(), json!(st.map(|st| &st.spec.id)));
        record.insert("tool".into(), json!(st.map(|st| &st.spec.tool)));
        record.insert(
            "args".into(),
            st.map_or(Value::Null, |st| st.spec.args.clone()),
        );
        record.insert("key".into(), json!(st.map(|st| &st.key)));
        record.insert(
            "target".into(),
            json!(st.and_then(|st| st.targets.get(st.index))),
        );
        record.insert("attempts".into(), json!(st.map_or(0, |st| st.attempts)));
        record.insert("trail".into(), Value::Array(trail.clone()));
        record.insert(
            "last_envelope".into(),
            trail.last().cloned().unwrap_or(Value::Null),
        );
        record.insert("outcome".into(), json!(outcome));
        record.insert("compensations".into(), Value::Array(compensations));
        record.insert(
            "started_ms".into(),
            json!(st.map_or(now, |st| st.started_ms)),
        );
        record.insert("dead_lettered_ms".into(), json!(now));
        // The durability fields (docs/durability.md §3): added, never removed.
        record.insert("v".into(), json!(1));
        let input = match st {
            Some(st) => {
                let mut input =
                    serde_json::to_value(&st.spec).map_err(|e| internal(e.to_string()))?;
                if let Some(o) = input.as_object_mut() {
                    o.remove("replay_of");
                }
                input
            }
            None => Value::Null,
        };
        record.insert("input".into(), input);
        // The run configuration's members win; the policy document's entry
        // for the step's tool fills what it leaves unset.
        let dl = self.s.config.dead_letter.as_ref();
        let doc = st.and_then(|st| st.dead_letter.as_ref());
        let pick = |f: fn(&DeadLetterConfig) -> Option<&String>| {
            dl.and_then(f).or_else(|| doc.and_then(f)).cloned()
        };
        record.insert("owner".into(), json!(pick(|d| d.owner.as_ref())));
        record.insert("runbook".into(), json!(pick(|d| d.runbook.as_ref())));
        let depth_threshold = dl
            .and_then(|d| d.depth_threshold)
            .or_else(|| doc.and_then(|d| d.depth_threshold));
        let step_outcome = if outcome == "interrupted" {
            self.s.step_outcome.clone()
        } else {
            None
        };
        record.insert("step_outcome".into(), json!(step_outcome));
        record.insert("recovered".into(), json!(self.s.recovering));
        let replay_of = st
            .and_then(|st| st.spec.replay_of.as_ref())
            .map(|r| json!({"id": r.id, "n": r.n}));
        record.insert("replay_of".into(), replay_of.unwrap_or(Value::Null));
        let branches = self.s.fan_branches.clone().map(Value::Array);
        record.insert("branches".into(), branches.unwrap_or(Value::Null));
        let env = trail.last().cloned();
        let mut e = self.event("dead_letter");
        e.code = env
            .as_ref()
            .and_then(|v| v.get("code"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.emit(e);
        self.fx.push(Effect::Append {
            stream: DEAD_LETTER_STREAM,
            record: Value::Object(record),
            depth_threshold,
        });
        self.finish(outcome, None, env)
    }

    /// End the step: every outcome but `ok` ends the run.
    pub(super) fn finish(
        &mut self,
        outcome: &str,
        result: Option<Value>,
        envelope: Option<Value>,
    ) -> Result<(), PolicyError> {
        let (id, claimed) = self.s.step.as_ref().map_or((String::new(), false), |st| {
            (st.spec.id.clone(), st.claimed)
        });
        // The step's key, copied only where an effect holds it (the step
        // is dropped at the end, its key unchanged until then).
        let key = |s: &State| {
            s.step
                .as_ref()
                .map_or_else(String::new, |st| st.key.clone())
        };
        let ok = outcome == "ok";
        if !ok && claimed {
            self.fx.push(Effect::Delete {
                key: store_key(IDEM_PREFIX, &key(&self.s)),
            });
        }
        if self.s.recovering
            && self.s.branch.is_none()
            && !matches!(outcome, "dead_lettered" | "interrupted")
        {
            // The resumed step ended, but the run cannot go on (its next steps
            // lived in the dead worker): roll back, then dead-letter.
            if let Some(st) = self.s.step.as_mut() {
                st.claimed = false;
            }
            self.s.step_outcome = Some(outcome.to_owned());
            return self.begin_comp("interrupted");
        }
        let rendered = match (outcome, &envelope) {
            ("replan", Some(env)) => {
                let text = crate::render::render_json(
                    &env.to_string(),
                    crate::render::Format::ModelToolResult,
                    "",
                )?;
                Some(
                    serde_json::from_str(&text)
                        .map_err(|e| PolicyError::json("rendered envelope", &e))?,
                )
            }
            _ => None,
        };
        let mut e = self.event("outcome");
        e.state = Some(outcome.to_owned());
        self.emit(e);
        if self.s.branch.is_some() {
            self.s.last = Some(
                json!({"outcome": outcome, "result": result, "envelope": envelope, "key": key(&self.s)}),
            );
            // The branch's end is durable too: recovery knows it ran.
            self.journal();
        }
        if !ok {
            self.unjournal();
        }
        self.fx.push(Effect::Finish {
            step: id,
            outcome: outcome.to_owned(),
            run_finished: !ok,
            result,
            envelope,
            rendered,
            token: (outcome == "awaiting_input").then(|| key(&self.s)),
        });
        self.s.step = None;
        self.s.comp = None;
        if ok {
            self.s.phase = Phase::Idle;
        } else {
            self.s.phase = Phase::Finished;
            self.s.outcome = Some(outcome.to_owned());
        }
        // A step sent with `end`: the run ends now, as if `end` followed
        // (a step that ended otherwise than `ok` already ended the run).
        if std::mem::take(&mut self.s.end_after_step) && ok {
            return self.end();
        }
        Ok(())
    }
}

/// Breakers by target, and the store versions of those present.
type Stored = (BTreeMap<String, Breaker>, BTreeMap<String, u64>);

/// The chain's breakers as `read` answered them (absent: closed), with the
/// store versions the host gave for them.
fn stored_breakers(
    targets: Vec<String>,
    values: &Map<String, Value>,
    versions: &BTreeMap<String, u64>,
) -> Result<Stored, PolicyError> {
    let mut breakers = BTreeMap::new();
    let mut found = BTreeMap::new();
    for t in targets {
        let key = store_key(BREAKER_PREFIX, &t);
        let stored = values.get(&key).cloned().unwrap_or(Value::Null);
        if let (false, Some(v)) = (stored.is_null(), versions.get(&key)) {
            found.insert(t.clone(), *v);
        }
        let b: Breaker = if stored.is_null() {
            Breaker::default()
        } else {
            serde_json::from_value(stored).map_err(|e| {
                bad(format!("the stored breaker of target {t:?} is not a breaker ({e}); delete the key {BREAKER_PREFIX}{t}"))
            })?
        };
        breakers.insert(t, b);
    }
    Ok((breakers, found))
}

/// The envelope of a registry code, built by `classify` itself.
pub(super) fn envelope_for(
    code: &str,
    message: &str,
    retry_after_ms: Option<u64>,
) -> Result<Value, PolicyError> {
    let mut e = json!({"code": code, "message": message, "retryable": retry_after_ms.is_some()});
    if let (Some(ms), Some(o)) = (retry_after_ms, e.as_object_mut()) {
        o.insert("retry_after_ms".into(), json!(ms));
    }
    let obs = json!({ "error": e });
    let env = crate::normalize::classify_view(
        &crate::observation_view::ObservationView::from_value(&obs)?,
    )?;
    serde_json::to_value(env).map_err(|e| internal(e.to_string()))
}

/// The idempotency key's in-flight mark, as `serde_json` writes
/// `{"status": "in_flight", "since_ms": now}` (members in key order).
fn in_flight_value(now: u64) -> RawJson {
    let mut out = Vec::with_capacity(48);
    out.extend_from_slice(br#"{"since_ms":"#);
    super::json_write::write_u64(&mut out, now);
    out.extend_from_slice(br#","status":"in_flight"}"#);
    RawJson(String::from_utf8(out).unwrap_or_default())
}

/// An attempt count, as `serde_json` writes `{"count": n}`.
fn count_value(n: u32) -> RawJson {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(br#"{"count":"#);
    super::json_write::write_u64(&mut out, u64::from(n));
    out.push(b'}');
    RawJson(String::from_utf8(out).unwrap_or_default())
}

/// The idempotency entry of a success, as `serde_json` writes
/// `{"status": "done", "result": result, "target": target, "at_ms": now}`
/// (members in key order).
fn done_value(now: u64, result: &Value, target: &str) -> RawJson {
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(br#"{"at_ms":"#);
    super::json_write::write_u64(&mut out, now);
    out.extend_from_slice(br#","result":"#);
    if super::json_write::write(&mut out, result).is_err() {
        return RawJson::of(&serde_json::json!({
            "status": "done", "result": result, "target": target, "at_ms": now
        }));
    }
    out.extend_from_slice(br#","status":"done","target":"#);
    super::json_write::write_str(&mut out, target);
    out.push(b'}');
    RawJson(String::from_utf8(out).unwrap_or_default())
}

/// A call the runtime had nothing to call for, as the failure it is: an
/// unknown tool (`recover`, a replay: no operations were given for it), a
/// compensation call of a step whose compensation was not given. Any other
/// result as it is.
fn missing(
    result: CallResult,
    step: &str,
    tool: &str,
    compensation: bool,
) -> Result<CallResult, PolicyError> {
    Ok(CallResult::Failed(match result {
        CallResult::UnknownTool => json!({"error": {
            "code": "runtime.recover.unknown_tool",
            "message": format!("no operation is registered for tool {tool}; pass it in the operations of recover or replay"),
            "retryable": false,
        }}),
        CallResult::NoCompensation if compensation => json!({
            "source": "exception",
            "type": "agent_recovery.MissingCompensation",
            "message": format!("no compensation registered for step {step}"),
        }),
        CallResult::NoCompensation => {
            return Err(bad(
                "input `attempt`: `no_compensation` answers a compensation call; answer an operation call with its result",
            ));
        }
        other => return Ok(other),
    }))
}

/// A call's result as the loop takes it: a call the runtime stopped waiting
/// for (`timed_out`), or one that took (`took_ms`, on the runtime's clock)
/// longer than its `timeout_ms`, failed with a total timeout, whatever it
/// returned.
fn timed(
    result: CallResult,
    took: Option<u64>,
    limit: Option<u64>,
) -> Result<CallResult, PolicyError> {
    let over = matches!(result, CallResult::TimedOut)
        || matches!((took, limit), (Some(t), Some(l)) if t > l);
    if !over {
        return Ok(result);
    }
    let after = took.or(limit).ok_or_else(|| {
        bad("input `attempt`: a `timed_out` result needs `took_ms` when the call had no `timeout_ms`")
    })?;
    Ok(CallResult::Failed(json!({
        "source": "timeout",
        "phase": "total",
        "after_ms": after,
    })))
}
