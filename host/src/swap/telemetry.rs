//! A [`PolicyHandle`](crate::PolicyHandle)'s [`Event`]s as OpenTelemetry
//! span events and a counter (`docs/telemetry.md`, "Policy swaps").
//!
//! Each event becomes a span event on the caller's **current span**
//! (`Context::current()`: the thread that swapped, or whose call failed), and
//! nothing when there is none or it is not recording: a swap from a file
//! watcher's thread has no span. So swaps and refusals are also counted in
//! `agent_recovery.policy.swaps`, whatever the thread. Only the OpenTelemetry
//! API is used; with [`Telemetry::off`] nothing is called at all.

use opentelemetry::metrics::Counter;
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, KeyValue};

use crate::PolicyId;
use crate::runtime::Telemetry;
use crate::swap::events::Event;

/// The handle's telemetry: on (span events, and the counter from the
/// [`Telemetry`]'s meter) or off.
pub(crate) struct SwapTelemetry {
    swaps: Option<Counter<u64>>,
}

impl Default for SwapTelemetry {
    /// [`Telemetry::global`], as a runtime's default.
    fn default() -> Self {
        SwapTelemetry::new(&Telemetry::global())
    }
}

impl SwapTelemetry {
    pub(crate) fn new(telemetry: &Telemetry) -> SwapTelemetry {
        SwapTelemetry {
            swaps: telemetry.meter().map(|meter| {
                meter
                    .u64_counter("agent_recovery.policy.swaps")
                    .with_unit("{swap}")
                    .with_description("Policy candidates a handle activated or refused")
                    .build()
            }),
        }
    }

    /// Counts a swap or refusal; adds the span event to the current span.
    pub(crate) fn record(&self, event: &Event) {
        let Some(swaps) = &self.swaps else {
            return;
        };
        match event {
            Event::Swapped { .. } => {
                swaps.add(1, &[KeyValue::new("agent_recovery.swap.result", "swapped")]);
            }
            Event::Refused { error, .. } => swaps.add(
                1,
                &[
                    KeyValue::new("agent_recovery.swap.result", "refused"),
                    KeyValue::new("error.type", error.kind().as_str()),
                ],
            ),
            _ => {}
        }
        let cx = Context::current();
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        let (name, attributes) = span_event(event);
        span.add_event(name, attributes);
    }
}

/// The span event's name and attributes (the table of "Policy swaps").
fn span_event(event: &Event) -> (&'static str, Vec<KeyValue>) {
    let mut a = Vec::with_capacity(8);
    let name = match event {
        Event::Swapped { from, to } => {
            policy(&mut a, "agent_recovery.policy", to);
            policy(&mut a, "agent_recovery.swap.from", from);
            "agent_recovery.policy.swapped"
        }
        Event::Refused { active, error } => {
            policy(&mut a, "agent_recovery.policy", active);
            a.push(KeyValue::new("error.type", error.kind().as_str()));
            a.push(message(error.message()));
            "agent_recovery.policy.refused"
        }
        Event::Failed { policy: p, error } => {
            policy(&mut a, "agent_recovery.policy", p);
            a.push(KeyValue::new("error.type", error.kind().as_str()));
            a.push(message(error.message()));
            "agent_recovery.policy.failed"
        }
        Event::FellBack {
            policy: p,
            error,
            reference,
        } => {
            policy(&mut a, "agent_recovery.policy", p);
            a.push(KeyValue::new("error.type", error.kind().as_str()));
            a.push(message(error.message()));
            policy(&mut a, "agent_recovery.policy.reference", reference);
            "agent_recovery.policy.fell_back"
        }
    };
    (name, a)
}

/// `{prefix}.name`, `.version`, `.sha256`.
fn policy(out: &mut Vec<KeyValue>, prefix: &str, id: &PolicyId) {
    out.push(KeyValue::new(format!("{prefix}.name"), id.name.clone()));
    out.push(KeyValue::new(
        format!("{prefix}.version"),
        id.version.clone(),
    ));
    out.push(KeyValue::new(format!("{prefix}.sha256"), id.sha256.clone()));
}

fn message(text: &str) -> KeyValue {
    KeyValue::new("agent_recovery.policy.error.message", text.to_owned())
}
