//! The recovery loop as a pure, sans-I/O state machine (`agent:recovery/runtime@0.2.0`).
//!
//! [`advance`] takes the run's state (JSON text the host stores) and one input
//! (what just happened), and returns the new state and the effects the host
//! carries out, in order: read or write store keys, call the operation, ask the
//! active policy to decide, sleep, restore a checkpoint, emit an event, append a
//! dead-letter record, finish the step. Nothing a host can see is kept between
//! calls (only a parsed copy of the last state returned, see [`advance`]); every
//! host (Rust, Node, Python) drives the same transitions, so the loop cannot
//! drift. The whole protocol is specified in `docs/runtime.md`.
//!
//! ```
//! use agent_recovery_policy::advance;
//! let run = advance("", r#"{"input":"run","now_ms":0,"run_id":"r1","seed":7}"#).unwrap();
//! let step = r#"{"input":"step","now_ms":0,"step":{"id":"s1","tool":"search"}}"#;
//! let next = advance(&run.state, step).unwrap();
//! assert!(next.effects.starts_with(r#"[{"effect":"read","keys":["agent-recovery/breaker/search""#));
//! ```

pub mod breaker;
pub mod config;
pub mod decision_log;
pub mod effect;
mod fanout;
mod fanout_recover;
pub mod input;
pub(crate) mod json_write;
mod machine;
pub mod outcome;
mod quota;
pub mod state;
mod swap;
pub mod typed;

use crate::error::{ErrorKind, PolicyError};

pub use outcome::check_json as check_outcome;

/// The new state and the effects, both JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advanced {
    /// The new state: pass it to the next call unchanged.
    pub state: String,
    /// A JSON array of effects.
    pub effects: String,
}

/// The largest state text kept parsed between calls (see [`advance`]).
const KEEP_MAX_BYTES: usize = 1 << 20;

/// Bytes reserved for the state's text up front, at least (a step's state
/// is about 1 KB; the last state's length when larger).
const STATE_CAPACITY: usize = 1536;

/// The state the last `advance` returned, as text and parsed.
struct Kept {
    text: String,
    state: Box<state::State>,
}

/// The most effects a kept batch buffer holds (a step's batches have 1 to 8).
const SPARE_EFFECTS: usize = 32;

std::thread_local! {
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
    /// The last batch's buffer, empty: the next batch is pushed into it
    /// instead of a new one grown one effect at a time.
    static SPARE_FX: std::cell::RefCell<Vec<effect::Effect>> = const { std::cell::RefCell::new(Vec::new()) };
    static KEEP: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Whether `advance` keeps the state it returns parsed, to skip parsing it
/// when the next call passes the same bytes back (on by default). Off, every
/// call parses its state: the tests compare both ways byte for byte.
#[doc(hidden)]
pub fn keep_state(on: bool) {
    KEEP.with(|k| k.set(on));
    if !on {
        KEPT.with(|k| k.borrow_mut().take());
    }
}

/// Feed one input to the loop. `state` is empty for a new run.
///
/// The component keeps nothing a host can observe between calls: the state
/// is the host's. To save parsing it again, `advance` remembers the last
/// state it returned (up to 1 MiB) with its parsed form, and uses that form
/// when the next call passes exactly the same bytes; any other text is
/// parsed as always, so the answer is the same either way.
pub fn advance(state: &str, input: &str) -> Result<Advanced, PolicyError> {
    let (input, now) = input::parse(input)?;
    let (state, effects) = advance_parsed(state, input, now, effects_json)?;
    Ok(Advanced { state, effects })
}

/// [`advance`] from an input already read (the JSON text's or the typed
/// one's): runs the loop and hands the batch and the new state's text to
/// `out`, which writes the effects in its own shape.
pub(crate) fn advance_parsed<T>(
    state: &str,
    input: input::Input,
    now: u64,
    out: impl FnOnce(&[effect::Effect], &str) -> Result<T, PolicyError>,
) -> Result<(String, T), PolicyError> {
    // The kept state if `state` is its text; its text's buffer either way,
    // to hold the next one.
    let (kept, mut spare) = match KEPT.with(|k| k.borrow_mut().take()) {
        Some(k) if k.text == state => (Some(k.state), k.text),
        Some(k) => (None, k.text),
        None => (None, String::new()),
    };
    let state = if let Some(kept) = kept {
        Some(kept)
    } else if state.trim().is_empty() {
        None
    } else {
        crate::api::check_size("state", state)?;
        Some(serde_json::from_str::<Box<state::State>>(state).map_err(|e| {
            PolicyError::new(
                ErrorKind::InvalidArgument,
                format!("state is not a state returned by advance ({e}); pass the previous state unchanged"),
            )
        })?)
    };
    let fx = SPARE_FX.with(|f| std::mem::take(&mut *f.borrow_mut()));
    let (state, mut effects) = machine::advance(state, input, now, fx)?;
    let text = json_write::to_string(&state, spare.len().max(STATE_CAPACITY)).map_err(|e| {
        PolicyError::new(
            ErrorKind::Internal,
            format!("could not serialize output ({e}); please report this"),
        )
    })?;
    // The journal holds the state this batch returns: serialized once, the same
    // bytes; without the `end` of a step sent with one, so it holds what a step
    // then `end` journals.
    let journaled = journal_text(&state, &effects, &text)?;
    let written = out(&effects, &journaled)?;
    effects.clear();
    if effects.capacity() <= SPARE_EFFECTS {
        SPARE_FX.with(|f| *f.borrow_mut() = effects);
    }
    if text.len() <= KEEP_MAX_BYTES && KEEP.with(std::cell::Cell::get) {
        spare.clear();
        spare.push_str(&text);
        KEPT.with(|k| {
            *k.borrow_mut() = Some(Kept { text: spare, state });
        });
    }
    Ok((text, written))
}

/// The state text a batch's journal entries hold: `text`, less the
/// `end_after_step` member when set (and the batch journals at all).
fn journal_text<'a>(
    state: &state::State,
    effects: &[effect::Effect],
    text: &'a str,
) -> Result<std::borrow::Cow<'a, str>, PolicyError> {
    if !state.end_after_step
        || !effects
            .iter()
            .any(|fx| matches!(fx, effect::Effect::Journal { .. }))
    {
        return Ok(std::borrow::Cow::Borrowed(text));
    }
    let head = text
        .strip_suffix(state::END_AFTER_STEP_TAIL)
        .ok_or_else(|| {
            PolicyError::new(
                ErrorKind::Internal,
                "the state does not end with its `end_after_step` member; please report this",
            )
        })?;
    let mut out = String::with_capacity(head.len() + 1);
    out.push_str(head);
    out.push('}');
    Ok(std::borrow::Cow::Owned(out))
}

/// Fills the journal entries of a batch that have no state yet with `state`
/// (the JSON text of the state the batch leaves behind). A resumed fan-out
/// branch's entries are filled with the branch's own state first.
fn fill_journals(effects: &mut [effect::Effect], state: &str) -> Result<(), PolicyError> {
    for fx in effects {
        if let effect::Effect::Journal { value, .. } = fx
            && value.state.is_none()
        {
            value.state = Some(
                serde_json::value::RawValue::from_string(state.to_owned()).map_err(|e| {
                    PolicyError::new(
                        ErrorKind::Internal,
                        format!("the state is not JSON ({e}); please report this"),
                    )
                })?,
            );
        }
    }
    Ok(())
}

/// The batch as JSON text, each journal entry without a state holding
/// `state` (the text `advance` returns): the bytes serde writes after
/// [`fill_journals`], without copying and re-reading the state to make a
/// `RawValue` of it.
fn effects_json(effects: &[effect::Effect], state: &str) -> Result<String, PolicyError> {
    let internal = |e: &dyn std::fmt::Display| {
        PolicyError::new(
            ErrorKind::Internal,
            format!("could not serialize output ({e}); please report this"),
        )
    };
    let mut out: Vec<u8> = Vec::with_capacity(512 + state.len());
    out.push(b'[');
    for (i, fx) in effects.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match fx {
            effect::Effect::Journal { key, value, ttl_ms } if value.state.is_none() => {
                out.extend_from_slice(br#"{"effect":"write","key":"#);
                json_write::write_str(&mut out, key);
                out.extend_from_slice(br#","value":"#);
                journal_value(&mut out, value, state);
                out.extend_from_slice(br#","ttl_ms":"#);
                json_write::write(&mut out, ttl_ms).map_err(|e| internal(&e))?;
                out.push(b'}');
            }
            other => json_write::write(&mut out, other).map_err(|e| internal(&e))?,
        }
    }
    out.push(b']');
    String::from_utf8(out).map_err(|e| internal(&e))
}

/// A journal entry without a state, holding `state` (the text `advance`
/// returns): the bytes serde writes once the state is filled in.
fn journal_value(out: &mut Vec<u8>, value: &effect::JournalEntry, state: &str) {
    out.extend_from_slice(br#"{"run_id":"#);
    json_write::write_str(out, &value.run_id);
    out.extend_from_slice(br#","state":"#);
    out.extend_from_slice(state.as_bytes());
    out.extend_from_slice(br#","v":"#);
    json_write::write_u64(out, u64::from(value.v));
    out.extend_from_slice(br#","written_ms":"#);
    json_write::write_u64(out, value.written_ms);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::effect::{Effect, JournalEntry};

    #[test]
    fn the_batch_text_is_what_serde_writes_after_filling_the_journal() {
        let state = r#"{"v":1,"run_id":"r\"1","phase":"calling"}"#;
        let mut fx = vec![
            Effect::Delete { key: "k".into() },
            Effect::Journal {
                key: "agent-recovery/journal/r\"1".into(),
                value: JournalEntry {
                    run_id: "r\"1".into(),
                    state: None,
                    v: 1,
                    written_ms: 1_767_225_600_000,
                },
                ttl_ms: None,
            },
            Effect::Sleep {
                ms: 5,
                cancellable: true,
            },
        ];
        let fast = super::effects_json(&fx, state).unwrap();
        super::fill_journals(&mut fx, state).unwrap();
        assert_eq!(fast, serde_json::to_string(&fx).unwrap());
        assert_eq!(super::effects_json(&[], state).unwrap(), "[]");
    }
}
