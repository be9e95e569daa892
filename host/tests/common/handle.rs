//! Handles with an event recorder, and the guest artifacts build.rs built.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use agent_recovery::{Event, FailurePolicy, HandleBuilder, Policy, PolicyHandle};

/// An observation the reference and the payments policy decide differently
/// (the payments policy makes a 409 permanent).
pub const OBS_409: &str = r#"{"source":"http","status":409}"#;
pub const CTX_409: &str = r#"{"call":"tool","attempt":1,"seed":3}"#;

/// Another one: an LLM 503 at attempt 2 (payments allows one LLM retry).
pub const OBS_503: &str = r#"{"source":"http","status":503}"#;
pub const CTX_503: &str = r#"{"call":"llm","attempt":2,"seed":1}"#;

/// Events a handle reported, in order.
#[derive(Clone, Default)]
pub struct Recorded(Arc<Mutex<Vec<Event>>>);

impl Recorded {
    pub fn all(&self) -> Vec<Event> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn lines(&self) -> Vec<String> {
        self.all().iter().map(ToString::to_string).collect()
    }
}

/// A builder that records events into the returned [`Recorded`].
pub fn builder(failure_policy: FailurePolicy) -> (HandleBuilder, Recorded) {
    let recorded = Recorded::default();
    let sink = recorded.clone();
    let builder = PolicyHandle::builder()
        .loader(Policy::loader().pool_size(2))
        .failure_policy(failure_policy)
        .on_event(move |e| {
            sink.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(e.clone());
        });
    (builder, recorded)
}

/// A fail-closed handle on the reference, recording events.
pub fn reference_handle() -> (PolicyHandle, Recorded) {
    let (builder, recorded) = builder(FailurePolicy::FailClosed);
    (builder.reference().expect("the reference loads"), recorded)
}

/// The sha256 of the embedded reference.
pub fn reference_sha256() -> String {
    common_reference().sha256()
}

fn common_reference() -> &'static Policy {
    super::policy()
}

/// The payments policy built by build.rs.
pub fn payments_wasm() -> PathBuf {
    PathBuf::from(env!("AGENT_RECOVERY_PAYMENTS_WASM"))
}

/// A hostile fixture built by build.rs, by name (`spin`, `membomb`, ...).
pub fn hostile(name: &str) -> PathBuf {
    let path = match name {
        "spin" => env!("AGENT_RECOVERY_HOSTILE_SPIN_WASM"),
        "membomb" => env!("AGENT_RECOVERY_HOSTILE_MEMBOMB_WASM"),
        "panic" => env!("AGENT_RECOVERY_HOSTILE_PANIC_WASM"),
        "sneaky" => env!("AGENT_RECOVERY_HOSTILE_SNEAKY_WASM"),
        "garbage" => env!("AGENT_RECOVERY_HOSTILE_GARBAGE_WASM"),
        "wrong-world" => env!("AGENT_RECOVERY_HOSTILE_WRONG_WORLD_WASM"),
        other => panic!("no hostile fixture {other:?}"),
    };
    PathBuf::from(path)
}
