//! Property tests through the host: backoff bounds, the retry budget, and
//! determinism under a seed.

mod common;

use agent_recovery::types::{BackoffConfig, CallKind, PolicyConfig};
use proptest::prelude::*;
use serde_json::Value;

use common::policy;

/// The contract's defaults: (base_ms, cap_ms) per kind of call.
fn defaults(call: CallKind) -> (u64, u64) {
    match call {
        CallKind::Tool => (250, 30_000),
        CallKind::Llm | CallKind::Agent => (1_000, 30_000),
    }
}

fn ceiling(base: u64, cap: u64, attempt: u32) -> u64 {
    let factor = 1u64.checked_shl(attempt - 1).unwrap_or(u64::MAX);
    cap.min(base.saturating_mul(factor))
}

fn call_kind() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        Just(CallKind::Tool),
        Just(CallKind::Llm),
        Just(CallKind::Agent)
    ]
}

fn call_name(call: CallKind) -> &'static str {
    match call {
        CallKind::Tool => "tool",
        CallKind::Llm => "llm",
        CallKind::Agent => "agent",
    }
}

/// Retryable observations of several shapes, some with a server-given delay.
fn observation() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..120).prop_map(|s| format!(
            r#"{{"source":"http","status":429,"headers":{{"retry-after":"{s}"}}}}"#
        )),
        Just(r#"{"source":"http","status":429}"#.to_string()),
        Just(r#"{"source":"http","status":503}"#.to_string()),
        (0u64..90_000).prop_map(|ms| format!(
            r#"{{"source":"http","status":503,"headers":{{"retry-after-ms":"{ms}"}}}}"#
        )),
        Just(r#"{"source":"network","code":"ECONNRESET"}"#.to_string()),
        Just(r#"{"source":"timeout","phase":"connect","after_ms":5000}"#.to_string()),
        Just(r#"{"source":"exception","type":"httpx.ConnectTimeout"}"#.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn backoff_stays_within_the_full_jitter_ceiling(
        call in call_kind(),
        attempt in 1u32..=40,
        seed in any::<u64>(),
    ) {
        let delay = policy().backoff(call, attempt, Some(seed), None).unwrap();
        let (base, cap) = defaults(call);
        prop_assert!(delay <= ceiling(base, cap, attempt), "delay {delay} attempt {attempt}");
    }

    #[test]
    fn backoff_respects_configured_base_and_cap(
        call in call_kind(),
        attempt in 1u32..=70,
        seed in any::<u64>(),
        base in 1u64..=10_000,
        extra in 0u64..=100_000,
    ) {
        let cap = base + extra;
        let b = BackoffConfig { base_ms: base, cap_ms: cap, max_attempts: 100 };
        let config = PolicyConfig { tool: Some(b), llm: Some(b), agent: Some(b), retry_budget_ms: None };
        let delay = policy().backoff(call, attempt, Some(seed), Some(config)).unwrap();
        prop_assert!(delay <= ceiling(base, cap, attempt), "delay {delay} base {base} cap {cap} attempt {attempt}");
    }

    #[test]
    fn decide_never_retries_past_the_budget(
        obs in observation(),
        call in call_kind(),
        attempt in 1u32..=6,
        elapsed in 0u64..=70_000,
        seed in any::<u64>(),
    ) {
        let ctx = format!(
            r#"{{"call":"{}","attempt":{attempt},"elapsed_ms":{elapsed},"seed":{seed}}}"#,
            call_name(call)
        );
        let text = policy().decide_json(&obs, &ctx).unwrap();
        let d: Value = serde_json::from_str(&text).unwrap();
        let remaining = 60_000u64.saturating_sub(elapsed);
        if d["action"] == "retry" {
            let delay = d["delay_ms"].as_u64().unwrap();
            prop_assert!(delay <= remaining, "delay {delay} > remaining {remaining}: {text}");
            prop_assert_eq!(d["budget_remaining_ms"].as_u64(), Some(remaining - delay), "{}", text);
            prop_assert_eq!(d["envelope"]["retry_after_ms"].as_u64(), Some(delay));
        } else {
            prop_assert!(d["delay_ms"].is_null(), "{}", text);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes(
        obs in observation(),
        attempt in 1u32..=5,
        seed in any::<u64>(),
    ) {
        let ctx = format!(r#"{{"call":"tool","attempt":{attempt},"seed":{seed}}}"#);
        let a = policy().decide_json(&obs, &ctx).unwrap();
        let b = policy().decide_json(&obs, &ctx).unwrap();
        prop_assert_eq!(&a, &b);
        // A fresh instance (not from the pool) agrees too.
        let fresh = agent_recovery::Policy::loader().pool_size(0).reference().unwrap();
        prop_assert_eq!(&fresh.decide_json(&obs, &ctx).unwrap(), &a);
        let d1 = policy().backoff(CallKind::Llm, attempt, Some(seed), None).unwrap();
        let d2 = fresh.backoff(CallKind::Llm, attempt, Some(seed), None).unwrap();
        prop_assert_eq!(d1, d2);
    }
}
