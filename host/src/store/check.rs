//! Argument checks shared by every backend, so they all refuse the same input
//! with the same message.

use super::StoreError;

/// The longest key or stream name, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 1024;

/// The longest value or record, in bytes of JSON text (8 MiB).
pub const MAX_VALUE_BYTES: usize = 8 * 1024 * 1024;

/// The largest time, TTL, version or sequence number: 2^53 - 1, the largest
/// integer a JavaScript number holds exactly.
pub const MAX_INTEGER: u64 = (1 << 53) - 1;

/// A key or stream name: 1..=MAX_NAME_BYTES bytes, no NUL.
pub(crate) fn name(what: &str, name: &str) -> Result<(), StoreError> {
    if name.is_empty() {
        return Err(StoreError::invalid(format!(
            "the {what} is empty; pass a non-empty name such as \"breaker/api\""
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(StoreError::invalid(format!(
            "the {what} is {} bytes long, more than {MAX_NAME_BYTES}; hash long names into a shorter one",
            name.len()
        )));
    }
    if name.contains('\0') {
        return Err(StoreError::invalid(format!(
            "the {what} {name:?} contains a NUL character; remove it"
        )));
    }
    Ok(())
}

/// A prefix for `keys`: may be empty, at most MAX_NAME_BYTES, no NUL.
pub(crate) fn prefix(prefix: &str) -> Result<(), StoreError> {
    if prefix.is_empty() {
        return Ok(());
    }
    name("prefix", prefix)
}

/// A value or record: JSON text of at most MAX_VALUE_BYTES bytes.
pub(crate) fn json(what: &str, key: &str, text: &str) -> Result<(), StoreError> {
    if text.len() > MAX_VALUE_BYTES {
        return Err(StoreError::invalid(format!(
            "the {what} for {key:?} is {} bytes, more than {MAX_VALUE_BYTES}; store large payloads elsewhere and keep a reference",
            text.len()
        )));
    }
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(StoreError::invalid(format!(
            "the {what} for {key:?} is not JSON ({e}); pass JSON text, e.g. serde_json::to_string(&value)"
        )));
    }
    Ok(())
}

/// A time, TTL, version or sequence number: at most MAX_INTEGER.
pub(crate) fn integer(what: &str, n: u64) -> Result<(), StoreError> {
    if n > MAX_INTEGER {
        return Err(StoreError::invalid(format!(
            "{what} {n} is larger than {MAX_INTEGER} (2^53 - 1); pass Unix milliseconds or a smaller number"
        )));
    }
    Ok(())
}

/// The arguments of a compare-and-set; returns the expiry time.
pub(crate) fn cas(
    key: &str,
    expected: Option<u64>,
    value: &str,
    ttl_ms: Option<u64>,
    now_ms: u64,
) -> Result<Option<u64>, StoreError> {
    name("key", key)?;
    integer("now_ms", now_ms)?;
    if let Some(expected) = expected {
        if expected == 0 {
            return Err(StoreError::invalid(format!(
                "expected version 0 for {key:?} never exists (versions start at 1); pass None to create the entry"
            )));
        }
        integer("expected version", expected)?;
    }
    json("value", key, value)?;
    let Some(ttl) = ttl_ms else {
        return Ok(None);
    };
    if ttl == 0 {
        return Err(StoreError::invalid(format!(
            "ttl_ms 0 for {key:?} would expire the entry at once; pass None for no expiry or at least 1"
        )));
    }
    integer("ttl_ms", ttl)?;
    let at = now_ms + ttl; // both <= 2^53 - 1: no overflow in u64
    integer("now_ms + ttl_ms", at)?;
    Ok(Some(at))
}
