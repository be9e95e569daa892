//! Server hints about when to retry, in all their forms, as integer milliseconds.
//!
//! - `retry-after-ms: 1500` (OpenAI, Anthropic)
//! - `Retry-After: 5` (delta-seconds; decimals accepted) or an HTTP-date, measured
//!   against the response's `Date` header when present, else the caller's clock
//! - `x-ratelimit-reset-requests` / `-tokens: 6m0s` (OpenAI durations), `ratelimit-reset: 30`
//!   (IETF draft, delta-seconds), `x-ratelimit-reset-after: 1.5` (seconds)
//! - google.rpc.RetryInfo `retryDelay: "30s"` and JSON-RPC `data.retryAfter` (seconds)
//!
//! Every value is clamped to [`MAX_HINT_MS`] so that absurd values cannot overflow.

use crate::headers::HeaderList;
use crate::json_view::View;

/// The largest hint honoured: one day. Anything longer is clamped to it.
pub const MAX_HINT_MS: u64 = 86_400_000;

/// Parse decimal seconds (`"5"`, `"1.5"`, `"0.25"`) into milliseconds, without floats.
pub fn seconds_str_to_ms(s: &str) -> Option<u64> {
    thousandths(s).map(|ms| ms.min(MAX_HINT_MS))
}

/// A non-negative decimal times 1000, rounded up (saturating, unclamped).
fn thousandths(s: &str) -> Option<u64> {
    let s = s.trim();
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse().unwrap_or(u64::MAX)
    };
    let mut ms = whole.saturating_mul(1000);
    // Round up the fractional part to whole milliseconds: never retry sooner than asked.
    let mut digits = frac.bytes().map(|b| u64::from(b - b'0'));
    let mut frac_ms = 0;
    for _ in 0..3 {
        frac_ms = frac_ms * 10 + digits.next().unwrap_or(0);
    }
    if digits.any(|d| d > 0) {
        frac_ms += 1;
    }
    ms = ms.saturating_add(frac_ms);
    Some(ms)
}

/// Seconds as a JSON number or numeric string into milliseconds.
pub(crate) fn seconds_value_to_ms(v: &View<'_>) -> Option<u64> {
    match v {
        View::Number(n) => seconds_str_to_ms(&n.to_string()),
        View::String(s) => seconds_str_to_ms(s).or_else(|| duration_to_ms(s)),
        _ => None,
    }
}

/// Milliseconds as a JSON number or numeric string.
pub(crate) fn ms_value(v: &View<'_>) -> Option<u64> {
    match v {
        View::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f.ceil() as u64)
            })
            .map(|m| m.min(MAX_HINT_MS)),
        View::String(s) => thousandths(s).map(|x| x.div_ceil(1000).min(MAX_HINT_MS)),
        _ => None,
    }
}

/// Go/protobuf-style durations: `1s`, `1.5s`, `20ms`, `6m0s`, `1h2m3.5s`.
pub fn duration_to_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        if num_len == 0 {
            return None;
        }
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let (unit, tail) = tail.split_at(unit_len);
        let secs_ms = seconds_str_to_ms(num)?; // num interpreted as seconds, in ms
        let ms = match unit {
            "ms" => secs_ms.div_ceil(1000),
            "s" => secs_ms,
            "m" => secs_ms.saturating_mul(60),
            "h" => secs_ms.saturating_mul(3600),
            "us" | "µs" | "ns" => u64::from(secs_ms > 0),
            _ => return None,
        };
        total = total.saturating_add(ms);
        rest = tail;
    }
    Some(total.min(MAX_HINT_MS))
}

/// Parse an HTTP-date (IMF-fixdate, RFC 850 or asctime) into Unix milliseconds.
pub fn http_date_to_unix_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let parts: Vec<&str> = s.split([' ', ',', '-']).filter(|p| !p.is_empty()).collect();
    // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT -> [Sun, 06, Nov, 1994, 08:49:37, GMT]
    // RFC 850:     Sunday, 06-Nov-94 08:49:37 GMT -> [Sunday, 06, Nov, 94, 08:49:37, GMT]
    // asctime:     Sun Nov  6 08:49:37 1994 -> [Sun, Nov, 6, 08:49:37, 1994]
    let (day, mon, year, time) = match parts.as_slice() {
        [_, d, m, y, t, "GMT" | "UTC"] => (*d, *m, *y, *t),
        [_, m, d, t, y] => (*d, *m, *y, *t),
        _ => return None,
    };
    let day: u32 = day.parse().ok()?;
    let month = match mon {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let mut year: i64 = year.parse().ok()?;
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    let mut hms = time.split(':').map(|p| p.parse::<u64>().ok());
    let (h, mi, se) = (hms.next()??, hms.next()??, hms.next()??);
    if hms.next().is_some() || !(1..=31).contains(&day) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if days < 0 {
        return None;
    }
    let secs = (days as u64) * 86_400 + h * 3600 + mi * 60 + se;
    secs.checked_mul(1000)
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The delay a response's headers ask for, if any. `now_ms` is the caller's clock,
/// used only for an HTTP-date `Retry-After` when there is no `Date` header.
pub(crate) fn from_headers(h: &HeaderList<'_>, now_ms: Option<u64>) -> Option<u64> {
    if let Some(ms) = h.get("retry-after-ms").and_then(thousandths) {
        // retry-after-ms is milliseconds, possibly fractional: round up.
        return Some(ms.div_ceil(1000).min(MAX_HINT_MS));
    }
    if let Some(ra) = h.get("retry-after") {
        if let Some(ms) = seconds_str_to_ms(ra) {
            return Some(ms);
        }
        if let Some(at) = http_date_to_unix_ms(ra) {
            let reference = h
                .get("date")
                .and_then(http_date_to_unix_ms)
                .or(now_ms)
                .or_else(crate::clock::now_ms)?;
            return Some(at.saturating_sub(reference).min(MAX_HINT_MS));
        }
    }
    if let Some(ms) = h.get("x-ratelimit-reset-after").and_then(seconds_str_to_ms) {
        return Some(ms);
    }
    if let Some(ms) = h.get("ratelimit-reset").and_then(seconds_str_to_ms) {
        return Some(ms);
    }
    openai_reset(h)
}

/// OpenAI's `x-ratelimit-reset-{requests,tokens}`: the resets of the exhausted limits
/// (remaining `0`), or the longest when no remaining counts are given.
fn openai_reset(h: &HeaderList<'_>) -> Option<u64> {
    let mut chosen = None;
    let mut any_remaining = false;
    let mut longest = None;
    for (reset_name, remaining_name) in [
        (
            "x-ratelimit-reset-requests",
            "x-ratelimit-remaining-requests",
        ),
        ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens"),
    ] {
        let reset = h.get(reset_name).and_then(duration_to_ms);
        longest = longest.max(reset);
        if let Some(rem) = h.get(remaining_name) {
            any_remaining = true;
            if rem == "0" {
                chosen = chosen.max(reset);
            }
        }
    }
    if any_remaining { chosen } else { longest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up_to_whole_ms() {
        assert_eq!(seconds_str_to_ms("5"), Some(5000));
        assert_eq!(seconds_str_to_ms("1.5"), Some(1500));
        assert_eq!(seconds_str_to_ms("0.0001"), Some(1));
        assert_eq!(seconds_str_to_ms(".25"), Some(250));
        assert_eq!(seconds_str_to_ms("-1"), None);
        assert_eq!(seconds_str_to_ms("NaN"), None);
        assert_eq!(seconds_str_to_ms(""), None);
        assert_eq!(
            seconds_str_to_ms("99999999999999999999999"),
            Some(MAX_HINT_MS)
        );
    }

    #[test]
    fn durations() {
        assert_eq!(duration_to_ms("1s"), Some(1000));
        assert_eq!(duration_to_ms("6m0s"), Some(360_000));
        assert_eq!(duration_to_ms("20ms"), Some(20));
        assert_eq!(duration_to_ms("1h2m3.5s"), Some(3_723_500));
        assert_eq!(duration_to_ms("1.5s"), Some(1500));
        assert_eq!(duration_to_ms("soon"), None);
        assert_eq!(duration_to_ms("5x"), None);
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            http_date_to_unix_ms("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        assert_eq!(
            http_date_to_unix_ms("Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        assert_eq!(
            http_date_to_unix_ms("Sun Nov  6 08:49:37 1994"),
            Some(784_111_777_000)
        );
        assert_eq!(http_date_to_unix_ms("Sun, 06 Foo 1994 08:49:37 GMT"), None);
        assert_eq!(http_date_to_unix_ms("Sun, 06 Nov 1994 25:49:37 GMT"), None);
    }

    #[test]
    fn retry_after_date_is_measured_against_date_header() {
        let h = crate::headers::Headers::from_pairs([
            ("Retry-After", "Wed, 21 Oct 2026 07:28:30 GMT"),
            ("Date", "Wed, 21 Oct 2026 07:28:00 GMT"),
        ]);
        assert_eq!(from_headers(h.list(), Some(0)), Some(30_000));
    }

    #[test]
    fn openai_reset_picks_exhausted_limit() {
        let h = crate::headers::Headers::from_pairs([
            ("x-ratelimit-remaining-requests", "10"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(from_headers(h.list(), None), Some(360_000));
    }
}
