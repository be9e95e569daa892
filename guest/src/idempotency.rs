//! Idempotency keys: the same logical action always gets the same key.
//!
//! `key = hex(sha256(canonical_json([run_id, step_id, tool, args])))`, where the
//! canonical JSON sorts object keys by their UTF-8 bytes, has no whitespace, and
//! writes integral numbers below 2^53 without a fraction (`1.0` -> `1`), so
//! `{"b":1,"a":2}` and `{"a":2,"b":1.0}` give the same key.

use crate::error::PolicyError;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON text of a value.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(v, &mut out);
    // Every byte is a `str`'s, an ASCII escape or an ASCII number.
    String::from_utf8(out).unwrap_or_default()
}

/// Appends the canonical JSON text of `v` to `out`: strings escaped as
/// `serde_json` escapes them, integers in decimal, written in place (no
/// text of a part made and copied).
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            out.push(b'{');
            // The map's own order when it is already by key bytes (a
            // `BTreeMap`'s), else sorted here.
            let mut prev: Option<&String> = None;
            if m.keys().all(|k| {
                let sorted = prev.is_none_or(|p| p.as_bytes() < k.as_bytes());
                prev = Some(k);
                sorted
            }) {
                write_members(m.iter(), out);
            } else {
                let mut entries: Vec<(&String, &Value)> = m.iter().collect();
                entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                write_members(entries.into_iter(), out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                crate::runtime::json_write::write_u64(out, u);
            } else if let Some(i) = n.as_i64() {
                crate::runtime::json_write::write_i64(out, i);
            } else {
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
                        crate::runtime::json_write::write_i64(out, f as i64);
                    }
                    _ => out.extend_from_slice(n.to_string().as_bytes()),
                }
            }
        }
        Value::String(s) => crate::runtime::json_write::write_str(out, s),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

/// `"key":value` for each member, comma-separated.
fn write_members<'a>(members: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    for (i, (k, val)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        crate::runtime::json_write::write_str(out, k);
        out.push(b':');
        write_canonical(val, out);
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
    hex_sha256(canonical_json(&material).as_bytes())
}

fn hex_sha256(text: &[u8]) -> String {
    lower_hex(&Sha256::digest(text))
}

/// Bytes as lowercase hex digits, two a byte.
pub(crate) fn lower_hex(bytes: &[u8]) -> String {
    let digit = |n: u8| if n < 10 { b'0' + n } else { b'a' + (n - 10) };
    // Collected in one allocation of the exact size.
    let hex: Vec<u8> = bytes
        .iter()
        .flat_map(|&b| [digit(b >> 4), digit(b & 0x0f)])
        .collect();
    // Only ASCII digits and letters.
    String::from_utf8(hex).unwrap_or_default()
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
    let mut out = Vec::with_capacity(128);
    out.push(b'[');
    for part in [run_id, step_id, tool] {
        crate::runtime::json_write::write_str(&mut out, part);
        out.push(b',');
    }
    write_canonical(args, &mut out);
    out.push(b']');
    hex_sha256(&out)
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
    fn negative_integers_floats_and_escapes_are_written_canonically() {
        // A float that is not a small integer is written as `serde_json` writes
        // the number (`1e+300`); an integral one below 2^53 as an integer.
        let v: Value = serde_json::from_str(
            r#"{"z":null,"s":"\u00e9\u0001\"","n":-5,"m":-9223372036854775808,"g":-2.0,"f":1e300,"b":false}"#,
        )
        .unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"b":false,"f":1e+300,"g":-2,"m":-9223372036854775808,"n":-5,"s":"\u00e9\u0001\"","z":null}"#
                .replace("\\u00e9", "\u{e9}")
        );
    }

    #[test]
    fn invalid_args_are_an_error() {
        assert!(key("r", "s", "t", "{").is_err());
    }
}
