//! The only clock read the policy makes, and only as a last resort: to measure an
//! HTTP-date `Retry-After` when neither the response's `Date` header nor the
//! caller's `now_ms` is available. On wasm32-wasip2 this is `wasi:clocks/wall-clock`.

/// Unix time in milliseconds, if the clock is readable.
pub fn now_ms() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
}
