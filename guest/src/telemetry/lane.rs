//! One lane's mapping (docs/telemetry.md, "The mapping"): its state between
//! calls, and what each observation turns into.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::types::{
    Attribute, Instruction, LaneKind, Mapped, Observation, ObservationKind, PolicyId, SpanKey,
};
use crate::error::{ErrorKind, PolicyError};
use crate::runtime::effect::DEAD_LETTER_STREAM;

/// Severity number `WARN` of the OpenTelemetry log data model.
const SEVERITY_WARN: u8 = 13;

/// A lane between calls (the `state` of `map-lane`).
#[derive(Default, Serialize, Deserialize)]
struct Lane {
    run_id: String,
    /// Does the lane have its own span (not a cancellation between steps)?
    own: bool,
    /// The step id of a step lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    step_id: Option<String>,
    /// The open compensation chain: compensations started and failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chain: Option<(u64, u64)>,
    /// The pending attempt: its end time and call kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attempt: Option<(u64, String)>,
    /// The last `decide` answer: its envelope's class and retryable, and the
    /// policy that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decided: Option<Verdict>,
    /// Has the lane ended (`finish` or `abandon`)?
    #[serde(default)]
    ended: bool,
}

#[derive(Serialize, Deserialize)]
struct Verdict {
    class: String,
    retryable: Option<bool>,
    policy: Option<PolicyId>,
}

/// Maps `observations` of one lane, in order; `state` is the previous call's
/// (empty for a new lane, whose first observation must be `lane`).
pub fn map_lane(state: &str, observations: Vec<Observation>) -> Result<Mapped, PolicyError> {
    let mut lane = if state.is_empty() {
        None
    } else {
        Some(
            serde_json::from_str::<Lane>(state)
                .map_err(|e| PolicyError::json("the telemetry lane state", &e))?,
        )
    };
    let mut out = Vec::new();
    for o in observations {
        match (&mut lane, o.kind) {
            (None, ObservationKind::Lane(start)) => {
                lane = Some(Lane::start(start, o.now_ms, &mut out));
            }
            (None, _) => {
                return Err(PolicyError::new(
                    ErrorKind::InvalidArgument,
                    "a new telemetry lane starts with a `lane` observation; pass the state the \
                     previous map-lane returned",
                ));
            }
            (Some(_), ObservationKind::Lane(_)) => {
                return Err(PolicyError::new(
                    ErrorKind::InvalidArgument,
                    "this telemetry lane has started already; a new lane starts from an empty state",
                ));
            }
            (Some(l), kind) => l.observe(o.now_ms, kind, &mut out),
        }
    }
    let lane = lane.unwrap_or_default();
    let state = serde_json::to_string(&lane)
        .map_err(|e| PolicyError::new(ErrorKind::Internal, e.to_string()))?;
    Ok(Mapped {
        state,
        instructions: out,
    })
}

/// [`map_lane`] with JSON text in and out: observations as a JSON array, the
/// instructions as one.
pub fn map_lane_json(state: &str, observations: &str) -> Result<(String, String), PolicyError> {
    let obs: Vec<Observation> = serde_json::from_str(observations)
        .map_err(|e| PolicyError::json("the telemetry observations", &e))?;
    let m = map_lane(state, obs)?;
    let text = serde_json::to_string(&m.instructions)
        .map_err(|e| PolicyError::new(ErrorKind::Internal, e.to_string()))?;
    Ok((m.state, text))
}

/// A timeline event (docs/runtime.md, "Events"): the members telemetry reads.
/// A member of another type makes the event unreadable, and it is dropped.
#[derive(Deserialize)]
struct Ev {
    event: String,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    attempt: Option<u64>,
    #[serde(default)]
    call: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    delay_ms: Option<u64>,
    #[serde(default)]
    state: Option<String>,
}

impl Ev {
    /// The event's members as span-event attributes (the key only as its hash).
    fn attributes(&self) -> Vec<Attribute> {
        fn text(a: &mut Vec<Attribute>, k: &str, v: &Option<String>) {
            if let Some(v) = v {
                a.push(Attribute::text(k, v.clone()));
            }
        }
        let mut a = Vec::with_capacity(8);
        text(&mut a, "agent_recovery.step.id", &self.step);
        text(&mut a, "agent_recovery.target", &self.target);
        if let Some(n) = self.attempt {
            a.push(Attribute::int("agent_recovery.attempt", n));
        }
        text(&mut a, "agent_recovery.call.kind", &self.call);
        if let Some(k) = &self.key {
            a.push(key_hash(k));
        }
        text(&mut a, "agent_recovery.action", &self.action);
        text(&mut a, "error.type", &self.code);
        if let Some(d) = self.delay_ms {
            a.push(Attribute::int("agent_recovery.delay_ms", d));
        }
        text(&mut a, "agent_recovery.state", &self.state);
        a
    }

    fn code(&self) -> Attribute {
        Attribute::text("error.type", self.code.clone().unwrap_or_default())
    }

    fn target(&self) -> Attribute {
        Attribute::text(
            "agent_recovery.target",
            self.target.clone().unwrap_or_default(),
        )
    }
}

/// The part of a decision (or of a dead-letter record's `last_envelope`) read.
#[derive(Deserialize)]
struct Env {
    #[serde(default)]
    class: Option<String>,
    #[serde(default)]
    retryable: Option<bool>,
    #[serde(default)]
    code: Option<String>,
}

#[derive(Deserialize)]
struct Decision {
    #[serde(default)]
    envelope: Option<Env>,
}

#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    last_envelope: Option<Env>,
}

/// `agent_recovery.idempotency_key.hash`: hex sha256 of the key, never the key.
fn key_hash(key: &str) -> Attribute {
    let hex = crate::idempotency::lower_hex(&Sha256::digest(key.as_bytes()));
    Attribute::text("agent_recovery.idempotency_key.hash", hex)
}

fn policy_attributes(policy: Option<&PolicyId>, out: &mut Vec<Attribute>) {
    if let Some(p) = policy {
        out.push(Attribute::text(
            "agent_recovery.policy.name",
            p.name.clone(),
        ));
        out.push(Attribute::text(
            "agent_recovery.policy.version",
            p.version.clone(),
        ));
        out.push(Attribute::text(
            "agent_recovery.policy.sha256",
            p.sha256.clone(),
        ));
    }
}

fn metric(instrument: &str, value: u64, attributes: Vec<Attribute>) -> Instruction {
    Instruction::RecordMetric {
        instrument: instrument.to_owned(),
        value,
        attributes,
    }
}

/// Should the outcome mark the step span as an error?
fn is_error(outcome: &str) -> bool {
    matches!(outcome, "failed" | "escalated" | "dead_lettered")
}

impl Lane {
    fn start(start: super::types::LaneStart, now_ms: u64, out: &mut Vec<Instruction>) -> Lane {
        let mut lane = Lane {
            run_id: start.run_id,
            ..Lane::default()
        };
        let mut attrs = vec![Attribute::text(
            "agent_recovery.run.id",
            lane.run_id.clone(),
        )];
        let name = match start.kind {
            LaneKind::Bare => return lane,
            LaneKind::Step { id, tool, target } => {
                attrs.push(Attribute::text("agent_recovery.step.id", id.clone()));
                attrs.push(Attribute::text("agent_recovery.tool", tool.clone()));
                attrs.push(Attribute::text(
                    "agent_recovery.target",
                    target.unwrap_or(tool),
                ));
                lane.step_id = Some(id);
                "agent_recovery.step"
            }
            LaneKind::Fanout {
                id,
                min_results,
                branches,
            } => {
                attrs.push(Attribute::text("agent_recovery.step.id", id));
                attrs.push(Attribute::int(
                    "agent_recovery.fanout.min_results",
                    min_results.into(),
                ));
                attrs.push(Attribute::int(
                    "agent_recovery.fanout.branches",
                    branches.into(),
                ));
                "agent_recovery.fanout"
            }
        };
        policy_attributes(start.policy.as_ref(), &mut attrs);
        lane.own = true;
        out.push(Instruction::StartSpan {
            key: SpanKey::Lane,
            parent: None,
            name: name.to_owned(),
            start_ms: now_ms,
            attributes: attrs,
        });
        lane
    }

    /// The lane's own span, if any.
    fn lane_key(&self) -> Option<SpanKey> {
        self.own.then_some(SpanKey::Lane)
    }

    /// Where span events go: the open chain, else the lane's span.
    fn current(&self) -> Option<SpanKey> {
        if self.chain.is_some() {
            Some(SpanKey::Chain)
        } else {
            self.lane_key()
        }
    }

    fn observe(&mut self, now_ms: u64, kind: ObservationKind, out: &mut Vec<Instruction>) {
        if self.ended {
            return;
        }
        match kind {
            ObservationKind::Lane(_) => {}
            ObservationKind::CallStart {
                role,
                step,
                target,
                key,
                attempt,
                timeout_ms,
            } => {
                self.end_attempt(None, out);
                let parent = match (&self.chain, role.as_str()) {
                    (Some(_), "compensation") => Some(SpanKey::Chain),
                    _ => self.lane_key(),
                };
                let mut attrs = vec![
                    Attribute::text("agent_recovery.step.id", step),
                    Attribute::text("agent_recovery.target", target),
                    Attribute::text("agent_recovery.call.kind", role.clone()),
                    Attribute::int("agent_recovery.attempt", attempt.into()),
                    key_hash(&key),
                ];
                if attempt > 1 {
                    attrs.push(Attribute::int(
                        "http.request.resend_count",
                        u64::from(attempt - 1),
                    ));
                }
                if let Some(t) = timeout_ms {
                    attrs.push(Attribute::int("agent_recovery.timeout_ms", t));
                }
                out.push(Instruction::StartSpan {
                    key: SpanKey::Attempt,
                    parent,
                    name: "agent_recovery.attempt".to_owned(),
                    start_ms: now_ms,
                    attributes: attrs,
                });
                self.attempt = Some((now_ms, role));
            }
            ObservationKind::CallEnd => {
                if let Some(p) = &mut self.attempt {
                    p.0 = now_ms;
                }
            }
            ObservationKind::Decided { decision, policy } => {
                self.decided = serde_json::from_str::<Decision>(&decision)
                    .ok()
                    .and_then(|d| d.envelope)
                    .map(|e| Verdict {
                        class: e.class.unwrap_or_default(),
                        retryable: e.retryable,
                        policy,
                    });
            }
            ObservationKind::Event(text) => self.event(&text, now_ms, out),
            ObservationKind::Append { stream, record } => {
                self.appended(&stream, record, now_ms, out);
            }
            ObservationKind::Finish { outcome, envelope } => {
                self.finish(&outcome, envelope.as_deref(), now_ms, out);
            }
            ObservationKind::Abandon => self.abandon(now_ms, out),
        }
    }

    /// Ends the pending attempt; `failure` is the decision event when it failed.
    fn end_attempt(&mut self, failure: Option<&Ev>, out: &mut Vec<Instruction>) {
        let Some((end_ms, kind)) = self.attempt.take() else {
            return;
        };
        let mut m = vec![Attribute::text("agent_recovery.call.kind", kind)];
        if let Some(ev) = failure {
            m.push(ev.code());
            if let Some(a) = &ev.action {
                m.push(Attribute::text("agent_recovery.action", a.clone()));
            }
            let code = ev.code.clone().unwrap_or_default();
            let mut attrs = vec![Attribute::text("error.type", code.clone())];
            if let Some(a) = &ev.action {
                attrs.push(Attribute::text("agent_recovery.action", a.clone()));
            }
            if let Some(d) = ev.delay_ms {
                attrs.push(Attribute::int("agent_recovery.delay_ms", d));
            }
            if let Some(v) = self.decided.take() {
                if !v.class.is_empty() {
                    attrs.push(Attribute::text("agent_recovery.class", v.class));
                }
                if let Some(r) = v.retryable {
                    attrs.push(Attribute::flag("agent_recovery.retryable", r));
                }
                policy_attributes(v.policy.as_ref(), &mut attrs);
            }
            out.push(Instruction::SetAttributes {
                key: SpanKey::Attempt,
                attributes: attrs,
            });
            out.push(Instruction::SetError {
                key: SpanKey::Attempt,
                description: code,
            });
        }
        out.push(Instruction::EndSpan {
            key: SpanKey::Attempt,
            end_ms,
        });
        out.push(metric("agent_recovery.attempts", 1, m));
    }

    fn appended(&mut self, stream: &str, record: String, now_ms: u64, out: &mut Vec<Instruction>) {
        if stream != DEAD_LETTER_STREAM {
            return;
        }
        let code = serde_json::from_str::<Record>(&record)
            .ok()
            .and_then(|r| r.last_envelope)
            .and_then(|e| e.code);
        // On the step's own span (the chain's when there is none: a cancellation).
        let key = if self.own {
            Some(SpanKey::Lane)
        } else {
            self.chain.as_ref().map(|_| SpanKey::Chain)
        };
        let mut log = vec![Attribute::text(
            "agent_recovery.run.id",
            self.run_id.clone(),
        )];
        if let Some(step) = &self.step_id {
            log.push(Attribute::text("agent_recovery.step.id", step.clone()));
        }
        if let Some(c) = &code {
            log.push(Attribute::text("error.type", c.clone()));
        }
        out.push(Instruction::EmitLog {
            key,
            event_name: "agent_recovery.dead_letter".to_owned(),
            time_ms: now_ms,
            severity_number: SEVERITY_WARN,
            severity_text: "WARN".to_owned(),
            body: record.clone(),
            attributes: log,
        });
        let Some(key) = key else {
            return;
        };
        let mut attrs = vec![Attribute::text("agent_recovery.dead_letter.record", record)];
        if let Some(c) = code {
            attrs.push(Attribute::text("error.type", c));
        }
        out.push(Instruction::AddEvent {
            key,
            name: "agent_recovery.dead_letter".to_owned(),
            time_ms: now_ms,
            attributes: attrs,
        });
    }

    fn event(&mut self, text: &str, now_ms: u64, out: &mut Vec<Instruction>) {
        let Ok(ev) = serde_json::from_str::<Ev>(text) else {
            return;
        };
        match ev.event.as_str() {
            "attempt" | "outcome" | "fanout" => return,
            "ok" => {
                self.end_attempt(None, out);
                return;
            }
            "decision" => {
                let mut m = vec![ev.code()];
                if let Some(a) = &ev.action {
                    m.push(Attribute::text("agent_recovery.action", a.clone()));
                }
                out.push(metric("agent_recovery.decisions", 1, m));
                if self.attempt.is_some() {
                    self.end_attempt(Some(&ev), out);
                    return;
                }
            }
            "sleep" => out.push(metric(
                "agent_recovery.retry.delay",
                ev.delay_ms.unwrap_or(0),
                vec![ev.target()],
            )),
            "breaker" => out.push(metric(
                "agent_recovery.breaker.transitions",
                1,
                vec![
                    ev.target(),
                    Attribute::text(
                        "agent_recovery.breaker.state",
                        ev.state.clone().unwrap_or_default(),
                    ),
                ],
            )),
            "short_circuit" => {
                out.push(metric(
                    "agent_recovery.short_circuits",
                    1,
                    vec![ev.target()],
                ));
            }
            "dead_letter" => {
                out.push(metric("agent_recovery.dead_letters", 1, vec![ev.code()]));
                return;
            }
            "compensate" => {
                self.compensate(&ev, now_ms, out);
                return;
            }
            _ => {}
        }
        if let Some(key) = self.current() {
            out.push(Instruction::AddEvent {
                key,
                name: format!("agent_recovery.{}", ev.event),
                time_ms: now_ms,
                attributes: ev.attributes(),
            });
        }
    }

    fn compensate(&mut self, ev: &Ev, now_ms: u64, out: &mut Vec<Instruction>) {
        let failed = ev.state.as_deref() == Some("failed");
        out.push(metric(
            "agent_recovery.compensations",
            1,
            vec![Attribute::text(
                "agent_recovery.compensation.state",
                if failed { "failed" } else { "started" },
            )],
        ));
        if self.chain.is_none() {
            out.push(Instruction::StartSpan {
                key: SpanKey::Chain,
                parent: self.lane_key(),
                name: "agent_recovery.compensation".to_owned(),
                start_ms: now_ms,
                attributes: vec![Attribute::text(
                    "agent_recovery.run.id",
                    self.run_id.clone(),
                )],
            });
        }
        let chain = self.chain.get_or_insert((0, 0));
        if failed {
            chain.1 += 1;
        } else {
            chain.0 += 1;
            let undone = ev.step.clone().unwrap_or_default();
            out.push(Instruction::AddLink {
                key: SpanKey::Chain,
                step: undone.clone(),
                attributes: vec![Attribute::text("agent_recovery.step.id", undone)],
            });
        }
        out.push(Instruction::AddEvent {
            key: SpanKey::Chain,
            name: "agent_recovery.compensate".to_owned(),
            time_ms: now_ms,
            attributes: ev.attributes(),
        });
    }

    fn finish(
        &mut self,
        outcome: &str,
        envelope: Option<&str>,
        now_ms: u64,
        out: &mut Vec<Instruction>,
    ) {
        self.end_attempt(None, out);
        if let Some((started, failed)) = self.chain.take() {
            out.push(Instruction::SetAttributes {
                key: SpanKey::Chain,
                attributes: vec![
                    Attribute::int("agent_recovery.compensation.count", started),
                    Attribute::int("agent_recovery.compensation.failed", failed),
                ],
            });
            if failed > 0 {
                out.push(Instruction::SetError {
                    key: SpanKey::Chain,
                    description: "agent_recovery.compensation_failed".to_owned(),
                });
            }
            out.push(Instruction::EndSpan {
                key: SpanKey::Chain,
                end_ms: now_ms,
            });
        }
        self.ended = true;
        if !self.own {
            // A cancellation between steps: no step of its own to count or end.
            return;
        }
        out.push(metric(
            "agent_recovery.steps",
            1,
            vec![Attribute::text("agent_recovery.step.outcome", outcome)],
        ));
        let code = envelope
            .and_then(|e| serde_json::from_str::<serde_json::Value>(e).ok())
            .and_then(|e| e.get("code")?.as_str().map(str::to_owned));
        let mut attrs = vec![Attribute::text("agent_recovery.step.outcome", outcome)];
        if let Some(c) = &code
            && outcome != "ok"
        {
            attrs.push(Attribute::text("error.type", c.clone()));
        }
        out.push(Instruction::SetAttributes {
            key: SpanKey::Lane,
            attributes: attrs,
        });
        if is_error(outcome) {
            out.push(Instruction::SetError {
                key: SpanKey::Lane,
                description: code.unwrap_or_else(|| outcome.to_owned()),
            });
        }
        if outcome == "ok"
            && let Some(id) = &self.step_id
        {
            out.push(Instruction::RememberStep {
                key: SpanKey::Lane,
                step: id.clone(),
            });
        }
        out.push(Instruction::EndSpan {
            key: SpanKey::Lane,
            end_ms: now_ms,
        });
    }

    /// Ends the open spans with no outcome and no metric: the attempt at the
    /// end of its call, the chain and the lane's span now.
    fn abandon(&mut self, now_ms: u64, out: &mut Vec<Instruction>) {
        if let Some((end_ms, _)) = self.attempt.take() {
            out.push(Instruction::EndSpan {
                key: SpanKey::Attempt,
                end_ms,
            });
        }
        if self.chain.take().is_some() {
            out.push(Instruction::EndSpan {
                key: SpanKey::Chain,
                end_ms: now_ms,
            });
        }
        if self.own {
            out.push(Instruction::EndSpan {
                key: SpanKey::Lane,
                end_ms: now_ms,
            });
        }
        self.ended = true;
    }
}
