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

    impl exports::agent::recovery0_3_0::scenario::Guest for Adapter {
        fn parse(
            text: String,
        ) -> Result<exports::agent::recovery0_3_0::scenario::Plan, exports::agent::recovery0_3_0::scenario::ScenarioError> {
            use exports::agent::recovery0_3_0::scenario as w;
            crate::scenario::parse(&text)
                .map(scenario_wit::plan_out)
                .map_err(|message| w::ScenarioError { message })
        }
    }

    /// Field-by-field conversions from [`crate::scenario`] to the WIT values.
    mod scenario_wit {
        use super::exports::agent::recovery0_3_0::scenario as w;
        use crate::scenario as r;

        fn outcomes(o: Vec<r::Outcome>) -> Vec<w::Outcome> {
            o.into_iter()
                .map(|o| match o {
                    r::Outcome::Ok => w::Outcome::Ok,
                    r::Outcome::Observation(t) => w::Outcome::Observation(t),
                })
                .collect()
        }

        fn step(s: r::Step) -> w::Step {
            w::Step {
                id: s.id,
                tool: s.tool,
                call: s.call,
                target: s.target,
                args: s.args,
                side_effect: s.side_effect,
                idempotent: s.idempotent,
                checkpoint: s.checkpoint,
                outcomes: outcomes(s.outcomes),
                fallbacks: s
                    .fallbacks
                    .into_iter()
                    .map(|f| w::Fallback { target: f.target, outcomes: outcomes(f.outcomes) })
                    .collect(),
                compensation: s.compensation.map(outcomes),
                replay_of: s.replay_of,
            }
        }

        pub(super) fn plan_out(p: r::Plan) -> w::Plan {
            w::Plan {
                run_id: p.run_id,
                seed: p.seed,
                now_ms: p.now_ms,
                config: p.config,
                cancel_at_ms: p.cancel_at_ms,
                kill_after_calls: p.kill_after_calls,
                recover: p.recover,
                steps: p
                    .steps
                    .into_iter()
                    .map(|s| match s {
                        r::PlanStep::Step(s) => w::PlanStep::Step(step(s)),
                        r::PlanStep::Fanout(f) => w::PlanStep::Fanout(w::Fanout {
                            id: f.id,
                            min_results: f.min_results,
                            branches: f.branches.into_iter().map(step).collect(),
                        }),
                    })
                    .collect(),
            }
        }
    }

    impl exports::agent::recovery0_3_0::telemetry::Guest for Adapter {
        fn map_lane(
            state: String,
            observations: Vec<exports::agent::recovery0_3_0::telemetry::Observation>,
        ) -> Result<exports::agent::recovery0_3_0::telemetry::Mapped, t::PolicyError> {
            let obs = observations.into_iter().map(telemetry_wit::observation_in).collect();
            let out = crate::telemetry::map_lane(&state, obs).map_err(err)?;
            Ok(exports::agent::recovery0_3_0::telemetry::Mapped {
                state: out.state,
                instructions: out
                    .instructions
                    .into_iter()
                    .map(telemetry_wit::instruction_out)
                    .collect(),
            })
        }

        fn map_lane_json(
            state: String,
            observations: String,
        ) -> Result<exports::agent::recovery0_3_0::telemetry::MappedJson, t::PolicyError> {
            let (state, instructions) =
                crate::telemetry::map_lane_json(&state, &observations).map_err(err)?;
            Ok(exports::agent::recovery0_3_0::telemetry::MappedJson { state, instructions })
        }
    }

    /// Field-by-field conversions between the telemetry WIT values and
    /// [`crate::telemetry`].
    mod telemetry_wit {
        use super::exports::agent::recovery0_3_0::runtime as rw;
        use super::exports::agent::recovery0_3_0::telemetry as w;
        use crate::telemetry as r;

        fn policy_in(p: rw::PolicyIdentity) -> r::PolicyId {
            r::PolicyId { name: p.name, version: p.version, sha256: p.digest }
        }

        fn role(c: rw::CallRole) -> &'static str {
            match c {
                rw::CallRole::Operation => "operation",
                rw::CallRole::Fallback => "fallback",
                rw::CallRole::Compensation => "compensation",
            }
        }

        pub(super) fn observation_in(o: w::Observation) -> r::Observation {
            use w::ObservationKind as K;
            let kind = match o.kind {
                K::Lane(l) => r::ObservationKind::Lane(r::LaneStart {
                    run_id: l.run_id,
                    kind: match l.kind {
                        w::LaneKind::Step(s) => {
                            r::LaneKind::Step { id: s.id, tool: s.tool, target: s.target }
                        }
                        w::LaneKind::Fanout(f) => r::LaneKind::Fanout {
                            id: f.id,
                            min_results: f.min_results,
                            branches: f.branches,
                        },
                        w::LaneKind::Bare => r::LaneKind::Bare,
                    },
                    policy: l.policy.map(policy_in),
                }),
                K::CallStart(c) => r::ObservationKind::CallStart {
                    role: role(c.role).to_owned(),
                    step: c.step,
                    target: c.target,
                    key: c.key,
                    attempt: c.attempt,
                    timeout_ms: c.timeout_ms,
                },
                K::CallEnd => r::ObservationKind::CallEnd,
                K::Decided(d) => r::ObservationKind::Decided {
                    decision: d.decision,
                    policy: d.policy.map(policy_in),
                },
                K::Event(e) => r::ObservationKind::Event(e),
                K::Append(a) => r::ObservationKind::Append { stream: a.stream, record: a.record },
                K::Finish(f) => r::ObservationKind::Finish {
                    outcome: super::typed_wit::outcome_in(f.outcome).as_str().to_owned(),
                    envelope: f.envelope,
                },
                K::Abandon => r::ObservationKind::Abandon,
            };
            r::Observation { now_ms: o.now_ms, kind }
        }

        fn key(k: r::SpanKey) -> w::SpanKey {
            match k {
                r::SpanKey::Lane => w::SpanKey::Lane,
                r::SpanKey::Chain => w::SpanKey::Chain,
                r::SpanKey::Attempt => w::SpanKey::Attempt,
            }
        }

        fn attrs(a: Vec<r::Attribute>) -> Vec<w::Attribute> {
            a.into_iter()
                .map(|a| w::Attribute {
                    key: a.key,
                    value: match a.value {
                        r::AttrValue::Text(s) => w::AttributeValue::Text(s),
                        r::AttrValue::Int(n) => w::AttributeValue::Int(n),
                        r::AttrValue::Float(f) => w::AttributeValue::Float(f),
                        r::AttrValue::Flag(b) => w::AttributeValue::Flag(b),
                    },
                })
                .collect()
        }

        pub(super) fn instruction_out(i: r::Instruction) -> w::Instruction {
            use r::Instruction as I;
            match i {
                I::StartSpan { key: k, parent, name, start_ms, attributes } => {
                    w::Instruction::StartSpan(w::StartSpan {
                        key: key(k),
                        parent: parent.map(key),
                        name,
                        kind: w::SpanKind::Internal,
                        start_ms,
                        attributes: attrs(attributes),
                    })
                }
                I::AddEvent { key: k, name, time_ms, attributes } => {
                    w::Instruction::AddEvent(w::SpanEvent {
                        key: key(k),
                        name,
                        time_ms,
                        attributes: attrs(attributes),
                    })
                }
                I::AddLink { key: k, step, attributes } => w::Instruction::AddLink(w::SpanLink {
                    key: key(k),
                    step,
                    attributes: attrs(attributes),
                }),
                I::SetAttributes { key: k, attributes } => {
                    w::Instruction::SetAttributes(w::SpanAttributes {
                        key: key(k),
                        attributes: attrs(attributes),
                    })
                }
                I::SetError { key: k, description } => {
                    w::Instruction::SetError(w::SpanError { key: key(k), description })
                }
                I::EndSpan { key: k, end_ms } => {
                    w::Instruction::EndSpan(w::SpanEnd { key: key(k), end_ms })
                }
                I::RememberStep { key: k, step } => {
                    w::Instruction::RememberStep(w::RememberStep { key: key(k), step })
                }
                I::RecordMetric { instrument, value, attributes } => {
                    w::Instruction::RecordMetric(w::Metric {
                        instrument,
                        value,
                        attributes: attrs(attributes),
                    })
                }
                I::EmitLog {
                    key: k,
                    event_name,
                    time_ms,
                    severity_number,
                    severity_text,
                    body,
                    attributes,
                } => w::Instruction::EmitLog(w::LogRecord {
                    key: k.map(key),
                    event_name,
                    time_ms,
                    severity_number,
                    severity_text,
                    body,
                    attributes: attrs(attributes),
                }),
            }
        }
    }

    /// Field-by-field conversions between the WIT values and [`crate::typed`].
    mod typed_wit {
        use super::exports::agent::recovery0_3_0::runtime as w;
        use super::t::CallKind as WitCall;
        use crate::typed as r;

        /// A step outcome as the loop names it (`StepOutcome::as_str`).
        pub(super) fn outcome_in(o: w::StepOutcome) -> r::StepOutcome {
            match o {
                w::StepOutcome::Ok => r::StepOutcome::Ok,
                w::StepOutcome::Failed => r::StepOutcome::Failed,
                w::StepOutcome::Escalated => r::StepOutcome::Escalated,
                w::StepOutcome::Replan => r::StepOutcome::Replan,
                w::StepOutcome::AwaitingInput => r::StepOutcome::AwaitingInput,
                w::StepOutcome::DeadLettered => r::StepOutcome::DeadLettered,
                w::StepOutcome::Cancelled => r::StepOutcome::Cancelled,
                w::StepOutcome::InFlight => r::StepOutcome::InFlight,
                w::StepOutcome::Interrupted => r::StepOutcome::Interrupted,
                w::StepOutcome::Completed => r::StepOutcome::Completed,
            }
        }

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
                    first: x.first.map(|f| r::FirstStep { step: step_in(f.step), end: f.end }),
                    started_ms: x.started_ms,
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
                K::Attempt(a) => r::InputKind::Attempt(r::CallEnded {
                    result: match a.result {
                        w::CallResult::Ok(v) => r::CallResult::Ok(v),
                        w::CallResult::Failed(v) => r::CallResult::Failed(v),
                        w::CallResult::Response(v) => r::CallResult::Response(v),
                        w::CallResult::TimedOut => r::CallResult::TimedOut,
                        w::CallResult::UnknownTool => r::CallResult::UnknownTool,
                        w::CallResult::NoCompensation => r::CallResult::NoCompensation,
                    },
                    took_ms: a.took_ms,
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
                r::Effect::ReadOrStop(keys) => w::Effect::ReadOrStop(keys),
                r::Effect::Write(x) => w::Effect::Write(write_out(x)),
                r::Effect::Claim(x) => w::Effect::Claim(write_out(x)),
                r::Effect::Swap(x) => w::Effect::Swap(w::Swap {
                    key: x.key,
                    expected: x.expected,
                    value: x.value,
                    ttl_ms: x.ttl_ms,
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
