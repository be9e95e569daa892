//! The document slot of the reference component.
//!
//! The reference component carries a fixed-size slot in its data: a marker,
//! a little-endian `u32` length, then room for a policy document's canonical
//! JSON text. An empty slot (length 0) is the reference policy. Packing a
//! document (`agent-recovery policy pack`, or any host's `pack` function)
//! writes the length and text over the slot's bytes in a copy of the
//! component: the result is an ordinary policy component, with its own sha256,
//! that every host loads, verifies and hot-swaps like any other. The
//! component reads the slot once, at its first call, and validates it there
//! too: a slot that does not hold a valid document makes every call fail
//! with the validation error.

use super::Document;
use crate::config::{BreakerThresholds, ConfigOverrides};
use crate::decide::Context;
use crate::error::{ErrorKind, PolicyError};
use crate::model::{CallKind, Decision, Envelope};
use crate::observation::Observation;
use crate::registry::Registry;
use crate::sdk::{PolicyInfo, RecoveryPolicy, Reference};
use std::sync::OnceLock;

/// The 32 bytes that open the slot; a packer finds the slot by them.
pub const SLOT_MARKER: &[u8; 32] = b"agent-recovery/policy-document/1";

/// The slot's size in bytes: marker, length, document text.
pub const SLOT_BYTES: usize = 16 * 1024;

const HEADER: usize = SLOT_MARKER.len() + 4;

#[allow(
    clippy::indexing_slicing,
    reason = "a const fn over constants: every index is checked at compile time"
)]
const fn empty_slot() -> [u8; SLOT_BYTES] {
    let mut s = [0u8; SLOT_BYTES];
    let mut i = 0;
    while i < SLOT_MARKER.len() {
        s[i] = SLOT_MARKER[i];
        i += 1;
    }
    s
}

#[used]
static SLOT: [u8; SLOT_BYTES] = empty_slot();

/// The slot's bytes as the component holds them: read through volatile loads
/// so that the compiler cannot fold them into the empty slot it was built with.
fn slot_text() -> Option<Result<String, PolicyError>> {
    let base = core::ptr::addr_of!(SLOT).cast::<u8>();
    // SAFETY: every index is below SLOT_BYTES, inside the static.
    let byte = |i: usize| unsafe { core::ptr::read_volatile(base.add(i)) };
    let mut len = [0u8; 4];
    for (i, b) in len.iter_mut().enumerate() {
        *b = byte(SLOT_MARKER.len() + i);
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 {
        return None;
    }
    if len > SLOT_BYTES - HEADER {
        return Some(Err(PolicyError::new(
            ErrorKind::InvalidConfig,
            format!(
                "the component's policy document slot says {len} bytes, more than it holds; pack the document again with `agent-recovery policy pack`"
            ),
        )));
    }
    let bytes: Vec<u8> = (HEADER..HEADER + len).map(byte).collect();
    Some(String::from_utf8(bytes).map_err(|e| {
        PolicyError::new(
            ErrorKind::InvalidConfig,
            format!("the component's policy document is not UTF-8 ({e}); pack the document again with `agent-recovery policy pack`"),
        )
    }))
}

/// The document packed into this component: none for the reference policy.
pub fn embedded() -> Option<&'static Result<Document, PolicyError>> {
    static DOC: OnceLock<Option<Result<Document, PolicyError>>> = OnceLock::new();
    DOC.get_or_init(|| slot_text().map(|t| t.and_then(|t| Document::parse(&t))))
        .as_ref()
}

fn with_doc<T>(
    doc: impl FnOnce(&'static Document) -> Result<T, PolicyError>,
    reference: impl FnOnce() -> Result<T, PolicyError>,
) -> Result<T, PolicyError> {
    match embedded() {
        None => reference(),
        Some(Ok(d)) => doc(d),
        Some(Err(e)) => Err(e.clone()),
    }
}

/// The reference component's policy: the reference, or the document packed
/// into its slot.
pub struct Embedded;

impl RecoveryPolicy for Embedded {
    fn info() -> PolicyInfo {
        match embedded() {
            None => Reference::info(),
            Some(Ok(d)) => PolicyInfo {
                name: d.name.clone(),
                version: d.version.clone(),
                description: format!("{} (policy document {})", d.description, d.digest())
                    .trim_start()
                    .to_owned(),
            },
            Some(Err(e)) => PolicyInfo {
                name: "invalid-policy-document".to_owned(),
                version: "0.0.0".to_owned(),
                description: e.message.clone(),
            },
        }
    }

    fn classify(obs: &Observation) -> Result<Envelope, PolicyError> {
        with_doc(|d| d.classify(obs), || Reference::classify(obs))
    }

    fn decide(obs: Observation, ctx: Context) -> Result<Decision, PolicyError> {
        match embedded() {
            None => Reference::decide(obs, ctx),
            Some(Ok(d)) => d.decide(obs, ctx),
            Some(Err(e)) => Err(e.clone()),
        }
    }

    fn breaker() -> BreakerThresholds {
        match embedded() {
            Some(Ok(d)) => d.breaker(),
            _ => BreakerThresholds::default(),
        }
    }

    fn classify_json(observation: &str) -> Result<String, PolicyError> {
        match embedded() {
            None => Reference::classify_json(observation),
            Some(_) => crate::json_out::envelope(&Self::classify(&crate::api::parse_observation(
                observation,
            )?)?),
        }
    }

    fn decide_json(observation: &str, context: &str) -> Result<String, PolicyError> {
        match embedded() {
            None => Reference::decide_json(observation, context),
            Some(_) => crate::json_out::decision(&Self::decide(
                crate::api::parse_observation(observation)?,
                crate::api::parse_context(context)?,
            )?),
        }
    }

    fn backoff_delay(
        call: CallKind,
        attempt: u32,
        seed: Option<u64>,
        config: Option<&ConfigOverrides>,
    ) -> Result<u64, PolicyError> {
        with_doc(
            |d| d.backoff_delay(call, attempt, seed, config),
            || Reference::backoff_delay(call, attempt, seed, config),
        )
    }

    fn smoke_tests() -> String {
        match embedded() {
            None => Reference::smoke_tests(),
            Some(Ok(d)) => d.smoke_tests.clone(),
            // One case, so that a host's smoke run reports the document's
            // validation error (every decision fails with it).
            Some(Err(_)) => {
                r#"[{"observation":{"source":"http","status":503},"context":{"attempt":1},"expect":{"action":"retry"}}]"#
                    .to_owned()
            }
        }
    }

    fn registry() -> Registry {
        match embedded() {
            Some(Ok(d)) => d.registry(),
            _ => Reference::registry(),
        }
    }
}
