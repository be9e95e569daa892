//! The reference policy's component export: world
//! `agent:recovery/recovery-runtime@0.3.0`, i.e. the frozen 0.1 policy contract,
//! the frozen `runtime@0.2.0` interface (the recovery loop, JSON text) and the
//! typed `runtime@0.3.0` (the same loop, inputs and effects as WIT values;
//! the field-by-field conversion to [`crate::typed`] is in `typed_wit`).

crate::__export_policy_impl!(
    crate::document::Embedded,
    {
        world: "agent:recovery/recovery-runtime@0.3.0",
        path: [
            "../wit/agent-recovery@0.1.0",
            "../wit/agent-recovery@0.2.0",
            "../wit/agent-recovery@0.3.0",
        ],
    },
    recovery0_1_0,
    impl exports::agent::recovery0_2_0::runtime::Guest for Adapter {
        fn advance(
            state: String,
            input: String,
        ) -> Result<exports::agent::recovery0_2_0::runtime::AdvanceResult, t::PolicyError> {
            let out = crate::runtime::advance(&state, &input).map_err(err)?;
            Ok(exports::agent::recovery0_2_0::runtime::AdvanceResult {
                state: out.state,
                effects: out.effects,
            })
        }

        fn check_outcome(outcome: String) -> Result<Option<String>, t::PolicyError> {
            crate::runtime::check_outcome(&outcome).map_err(err)
        }

        fn render_named(
            envelope: String,
            format: String,
            options: String,
        ) -> Result<String, t::PolicyError> {
            crate::render::render_named(&envelope, &format, &options).map_err(err)
        }
    }

    impl exports::agent::recovery0_3_0::runtime::Guest for Adapter {
        fn advance(
            state: String,
            input: exports::agent::recovery0_3_0::runtime::Input,
        ) -> Result<exports::agent::recovery0_3_0::runtime::AdvanceResult, t::PolicyError> {
            use exports::agent::recovery0_3_0::runtime as w;
            let input = typed_wit::input_in(input);
            let out = crate::typed::advance(&state, input).map_err(err)?;
            Ok(w::AdvanceResult {
                state: out.state,
                effects: out.effects.into_iter().map(typed_wit::effect_out).collect(),
            })
        }
    }

    impl exports::agent::recovery0_3_0::dead_letters::Guest for Adapter {
        fn cas_rounds() -> u32 {
            crate::deadletters::CAS_ROUNDS
        }

        fn cas_exhausted(key: String) -> String {
            crate::deadletters::cas_exhausted(&key)
        }

        fn parse_id(id: String) -> Result<u64, dead_letters_wit::Error> {
            crate::deadletters::parse_id(&id).map_err(dead_letters_wit::error)
        }

        fn not_found(id: String) -> dead_letters_wit::Error {
            dead_letters_wit::error(crate::deadletters::not_found(&id))
        }

        fn replay_key(key: String, n: u64) -> String {
            crate::deadletters::replay_key(&key, n)
        }

        fn item(current: Option<String>) -> String {
            crate::deadletters::item(current.as_deref())
        }

        fn apply(
            action: dead_letters_wit::Action,
            id: u64,
            record: String,
            current: Option<String>,
            now_ms: u64,
        ) -> Result<dead_letters_wit::Change, dead_letters_wit::Error> {
            let action = dead_letters_wit::action(action);
            crate::deadletters::apply(action, id, &record, current.as_deref(), now_ms)
                .map(dead_letters_wit::change)
                .map_err(dead_letters_wit::error)
        }

        fn finish(
            current: Option<String>,
            n: u64,
            outcome: String,
            now_ms: u64,
        ) -> dead_letters_wit::Change {
            let c = crate::deadletters::finish(current.as_deref(), n, &outcome, now_ms);
            dead_letters_wit::change(c)
        }

        fn pending(current: Option<String>) -> Option<String> {
            crate::deadletters::pending(current.as_deref())
        }

        fn close_one(closed: Option<String>) -> String {
            crate::deadletters::close_one(closed.as_deref())
        }

        fn depth(records: u64, closed: Option<String>) -> u64 {
            crate::deadletters::depth(records, closed.as_deref())
        }

        fn depth_event(threshold: u64, depth: u64, t_ms: u64, seq: u64, record: String) -> Option<String> {
            crate::deadletters::depth_event(threshold, depth, t_ms, seq, &record)
        }

        fn replay_step(id: u64, record: String, n: u64) -> Result<String, dead_letters_wit::Error> {
            crate::deadletters::replay_step(id, &record, n).map_err(dead_letters_wit::error)
        }
    }

    /// The dead-letter values between WIT and [`crate::deadletters`].
    mod dead_letters_wit {
        use super::exports::agent::recovery0_3_0::dead_letters as w;
        use crate::deadletters as d;
        pub(super) use w::{Action, Change, DeadLetterError as Error};

        pub(super) fn error(e: d::Error) -> Error {
            Error {
                kind: match e.kind {
                    d::ErrorKind::InvalidArgument => w::ErrorKind::InvalidArgument,
                    d::ErrorKind::NotFound => w::ErrorKind::NotFound,
                    d::ErrorKind::Closed => w::ErrorKind::Closed,
                    d::ErrorKind::Conflict => w::ErrorKind::Conflict,
                    d::ErrorKind::InvalidRecord => w::ErrorKind::InvalidRecord,
                },
                id: e.id,
                detail: e.detail,
                message: e.message,
            }
        }

        pub(super) fn action(a: Action) -> d::Action {
            match a {
                Action::Purge => d::Action::Purge,
                Action::Request => d::Action::Request,
                Action::Take => d::Action::Take,
            }
        }

        pub(super) fn change(c: d::Change) -> Change {
            Change { item: c.item, closes: c.closes, entry: c.entry }
        }
    }

    /// Field-by-field conversions between the WIT values and [`crate::typed`].
    mod typed_wit {
        use super::exports::agent::recovery0_3_0::runtime as w;
        use super::t::CallKind as WitCall;
        use crate::typed as r;

        fn call_kind(c: WitCall) -> crate::CallKind {
            match c {
                WitCall::Tool => crate::CallKind::Tool,
                WitCall::Llm => crate::CallKind::Llm,
                WitCall::Agent => crate::CallKind::Agent,
            }
        }

        fn call_kind_out(c: crate::CallKind) -> WitCall {
            match c {
                crate::CallKind::Tool => WitCall::Tool,
                crate::CallKind::Llm => WitCall::Llm,
                crate::CallKind::Agent => WitCall::Agent,
            }
        }

        fn replay_in(r: w::ReplayOf) -> crate::typed::ReplayOf {
            crate::typed::ReplayOf { key: r.key, n: r.n, id: r.id }
        }

        fn replay_out(r: crate::typed::ReplayOf) -> w::ReplayOf {
            w::ReplayOf { key: r.key, n: r.n, id: r.id }
        }

        fn step_in(s: w::StepSpec) -> r::StepSpec {
            r::StepSpec {
                id: s.id,
                tool: s.tool,
                call: s.call.map(call_kind),
                args: s.args,
                target: s.target,
                fallbacks: s.fallbacks,
                side_effect: s.side_effect,
                compensation: s.compensation,
                checkpoint: s.checkpoint,
                idempotent: s.idempotent,
                replay_of: s.replay_of.map(replay_in),
            }
        }

        fn step_out(s: r::StepSpec) -> w::StepSpec {
            w::StepSpec {
                id: s.id,
                tool: s.tool,
                call: s.call.map(call_kind_out),
                args: s.args,
                target: s.target,
                fallbacks: s.fallbacks,
                side_effect: s.side_effect,
                compensation: s.compensation,
                checkpoint: s.checkpoint,
                idempotent: s.idempotent,
                replay_of: s.replay_of.map(replay_out),
            }
        }

        pub(super) fn input_in(i: w::Input) -> r::Input {
            use w::InputKind as K;
            let kind = match i.kind {
                K::Run(x) => r::InputKind::Run(r::RunStart {
                    run_id: x.run_id,
                    seed: x.seed,
                    config: x.config,
                }),
                K::Step(s) => r::InputKind::Step(step_in(s)),
                K::Fanout(f) => r::InputKind::Fanout(r::FanoutSpec {
                    id: f.id,
                    min_results: f.min_results,
                    branches: f.branches.into_iter().map(step_in).collect(),
                }),
                K::Joined(s) => r::InputKind::Joined(s),
                K::Read(values) => r::InputKind::Read(
                    values
                        .into_iter()
                        .map(|v| r::StoredValue { key: v.key, value: v.value, version: v.version })
                        .collect(),
                ),
                K::Swapped(s) => r::InputKind::Swapped(r::Swapped {
                    ok: s.ok,
                    current: s.current,
                    version: s.version,
                }),
                K::Claimed(c) => r::InputKind::Claimed(r::Claimed { ok: c.ok, current: c.current }),
                K::Taken(t) => r::InputKind::Taken(r::Taken { ok: t.ok, tokens: t.tokens }),
                K::Attempt(a) => r::InputKind::Attempt(match a {
                    w::CallResult::Ok(v) => r::CallResult::Ok(v),
                    w::CallResult::Failed(v) => r::CallResult::Failed(v),
                    w::CallResult::Response(v) => r::CallResult::Response(v),
                }),
                K::Decision(d) => r::InputKind::Decision(r::Decision {
                    decision: d.decision,
                    policy: d.policy.map(|p| r::PolicyIdentity {
                        name: p.name,
                        version: p.version,
                        digest: p.digest,
                    }),
                }),
                K::Slept => r::InputKind::Slept,
                K::Restored(ok) => r::InputKind::Restored(ok),
                K::Cancel => r::InputKind::Cancel,
                K::End => r::InputKind::End,
                K::Recover => r::InputKind::Recover,
            };
            r::Input { now_ms: i.now_ms, kind }
        }

        fn write_out(x: r::Write) -> w::Write {
            w::Write { key: x.key, value: x.value, ttl_ms: x.ttl_ms }
        }

        pub(super) fn effect_out(e: r::Effect) -> w::Effect {
            match e {
                r::Effect::Read(keys) => w::Effect::Read(keys),
                r::Effect::Write(x) => w::Effect::Write(write_out(x)),
                r::Effect::Claim(x) => w::Effect::Claim(write_out(x)),
                r::Effect::Swap(x) => w::Effect::Swap(w::Swap {
                    key: x.key,
                    expected: x.expected,
                    value: x.value,
                    ttl_ms: x.ttl_ms,
                }),
                r::Effect::Take(x) => w::Effect::Take(w::Take {
                    key: x.key,
                    cost: x.cost,
                    capacity: x.capacity,
                }),
                r::Effect::Refund(x) => w::Effect::Refund(w::Refund {
                    key: x.key,
                    amount: x.amount,
                    capacity: x.capacity,
                }),
                r::Effect::Delete(k) => w::Effect::Delete(k),
                r::Effect::Call(c) => w::Effect::Call(w::Call {
                    role: match c.role {
                        r::CallRole::Operation => w::CallRole::Operation,
                        r::CallRole::Fallback => w::CallRole::Fallback,
                        r::CallRole::Compensation => w::CallRole::Compensation,
                    },
                    step: c.step,
                    target: c.target,
                    key: c.key,
                    attempt: c.attempt,
                    timeout_ms: c.timeout_ms,
                    tool: c.tool,
                }),
                r::Effect::Decide(d) => w::Effect::Decide(w::Decide {
                    observation: d.observation,
                    context: d.context,
                }),
                r::Effect::Sleep(s) => w::Effect::Sleep(w::Sleep { ms: s.ms, cancellable: s.cancellable }),
                r::Effect::Restore(s) => w::Effect::Restore(s),
                r::Effect::Fork(f) => w::Effect::Fork(w::Fork {
                    fanout: f.fanout,
                    branches: f
                        .branches
                        .into_iter()
                        .map(|b| w::Branch { state: b.state, step: step_out(b.step) })
                        .collect(),
                }),
                r::Effect::Emit(e) => w::Effect::Emit(e),
                r::Effect::Append(a) => w::Effect::Append(w::Append {
                    stream: a.stream,
                    record: a.record,
                    depth_threshold: a.depth_threshold,
                }),
                r::Effect::Log(l) => w::Effect::Log(l),
                r::Effect::Finish(f) => w::Effect::Finish(w::Finish {
                    step: f.step,
                    outcome: match f.outcome {
                        r::StepOutcome::Ok => w::StepOutcome::Ok,
                        r::StepOutcome::Failed => w::StepOutcome::Failed,
                        r::StepOutcome::Escalated => w::StepOutcome::Escalated,
                        r::StepOutcome::Replan => w::StepOutcome::Replan,
                        r::StepOutcome::AwaitingInput => w::StepOutcome::AwaitingInput,
                        r::StepOutcome::DeadLettered => w::StepOutcome::DeadLettered,
                        r::StepOutcome::Cancelled => w::StepOutcome::Cancelled,
                        r::StepOutcome::InFlight => w::StepOutcome::InFlight,
                        r::StepOutcome::Interrupted => w::StepOutcome::Interrupted,
                        r::StepOutcome::Completed => w::StepOutcome::Completed,
                    },
                    run_finished: f.run_finished,
                    result: f.result,
                    envelope: f.envelope,
                    rendered: f.rendered,
                    token: f.token,
                }),
            }
        }
    }
);
