//! Idempotency keys: the same logical action always gets the same key.
//!
//! `key = hex(sha256(canonical_json([run_id, step_id, tool, args])))`, where the
//! canonical JSON sorts object keys by their UTF-8 bytes, has no whitespace, and
//! writes integral numbers below 2^53 without a fraction (`1.0` -> `1`), so
//! `{"b":1,"a":2}` and `{"a":2,"b":1.0}` give the same key.

use crate::error::PolicyError;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// Canonical JSON text of a value.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical_str(k, out);
                out.push(':');
                write_canonical(val, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                let _ = write!(out, "{}", f as i64);
            }
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// The key of the `n`-th replay of a dead-letter record whose step had the
/// key `original`: `hex(sha256(canonical_json(["agent-recovery/replay", original, n])))`
/// (docs/durability.md §3, Replay): fresh, so the tool runs again, and derived,
/// so every runtime replaying the same record the same time uses the same one.
pub fn replay_key(original: &str, n: u64) -> String {
    let material = Value::Array(vec![
        Value::String("agent-recovery/replay".to_owned()),
        Value::String(original.to_owned()),
        Value::from(n),
    ]);
    hex_sha256(&canonical_json(&material))
}

fn hex_sha256(text: &str) -> String {
    lower_hex(&Sha256::digest(text.as_bytes()))
}

/// Bytes as lowercase hex digits, two a byte.
pub(crate) fn lower_hex(bytes: &[u8]) -> String {
    let digit = |n: u8| char::from(if n < 10 { b'0' + n } else { b'a' + (n - 10) });
    let mut hex = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        hex.push(digit(b >> 4));
        hex.push(digit(b & 0x0f));
    }
    hex
}

/// The idempotency key of one logical action.
pub fn key(
    run_id: &str,
    step_id: &str,
    tool: &str,
    args_json: &str,
) -> Result<String, PolicyError> {
    let args: Value = if args_json.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(args_json).map_err(|e| PolicyError::json("args", &e))?
    };
    Ok(key_of(run_id, step_id, tool, &args))
}

/// [`key`] of arguments already parsed: the same key as `key` of their JSON
/// text, without writing and reading that text again.
pub fn key_of(run_id: &str, step_id: &str, tool: &str, args: &Value) -> String {
    let mut out = String::with_capacity(96);
    out.push('[');
    for part in [run_id, step_id, tool] {
        write_canonical_str(part, &mut out);
        out.push(',');
    }
    write_canonical(args, &mut out);
    out.push(']');
    hex_sha256(&out)
}

fn write_canonical_str(s: &str, out: &mut String) {
    // serde_json's escaping of a string, as `Value::String(..).to_string()` writes it.
    if let Ok(text) = serde_json::to_string(s) {
        out.push_str(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_float_form_do_not_matter() {
        let a = key("r", "s", "t", r#"{"b":1,"a":{"y":[1,2],"x":"é"}}"#).unwrap();
        let b = key("r", "s", "t", r#"{ "a": {"x":"é","y":[1,2.0]}, "b": 1.0 }"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn every_part_matters() {
        let base = key("r", "s", "t", "{}").unwrap();
        assert_ne!(base, key("r2", "s", "t", "{}").unwrap());
        assert_ne!(base, key("r", "s2", "t", "{}").unwrap());
        assert_ne!(base, key("r", "s", "t2", "{}").unwrap());
        assert_ne!(base, key("r", "s", "t", r#"{"a":1}"#).unwrap());
        // No ambiguity from concatenation.
        assert_ne!(
            key("ab", "c", "t", "{}").unwrap(),
            key("a", "bc", "t", "{}").unwrap()
        );
    }

    #[test]
    fn replay_keys_match_sha256sum_of_the_documented_text() {
        // `printf '%s' '["agent-recovery/replay","abc",1]' | sha256sum` (coreutils).
        assert_eq!(
            replay_key("abc", 1),
            "092037d1642e98534d5638f2988ca5004d2ff1ab64f48feacec92c9b855965e5"
        );
        assert_eq!(
            replay_key("abc", 2),
            "d7dcb3e0f7f9390eb696d4b6d57eebdf18e5e5a4d9c8136f269decd21e222752"
        );
    }

    #[test]
    fn invalid_args_are_an_error() {
        assert!(key("r", "s", "t", "{").is_err());
    }
}
