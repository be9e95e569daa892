//! The loop's state machine natively: bad inputs and states are errors with a
//! hint, never a panic (a panic in the component is a trap), in any phase.

use agent_recovery_policy::ErrorKind;
use agent_recovery_policy::advance;
use proptest::prelude::*;

fn started() -> String {
    advance("", r#"{"input":"run","now_ms":0,"run_id":"r","seed":7}"#)
        .unwrap()
        .state
}

fn reading() -> String {
    advance(
        &started(),
        r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t"}}"#,
    )
    .unwrap()
    .state
}

#[test]
fn bad_inputs_are_errors_with_a_hint() {
    let state = started();
    let cases: &[(&str, &str, &str)] = &[
        ("", "{", "input"),
        ("", "[]", "expected an object"),
        (
            "",
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t"}}"#,
            "must be `run`",
        ),
        ("", r#"{"input":"run","now_ms":0}"#, "run_id"),
        (
            "",
            r#"{"input":"run","now_ms":0,"run_id":"r","config":{"atempt_budget":1}}"#,
            "atempt_budget",
        ),
        (
            &state,
            r#"{"input":"run","now_ms":0,"run_id":"r"}"#,
            "already started",
        ),
        (
            &state,
            r#"{"input":"step","step":{"id":"s","tool":"t"}}"#,
            "now_ms",
        ),
        (
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"","tool":"t"}}"#,
            "non-empty",
        ),
        (
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"rpc"}}"#,
            "tool, llm or agent",
        ),
        (
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","retries":3}}"#,
            "retries",
        ),
        (
            &state,
            r#"{"input":"attempt","now_ms":0,"result":"ok"}"#,
            "phase",
        ),
        (
            &state,
            r#"{"input":"teleport","now_ms":0}"#,
            "unknown input",
        ),
        (
            "{\"v\":1}",
            r#"{"input":"slept","now_ms":0}"#,
            "not a state",
        ),
        ("not json", r#"{"input":"slept","now_ms":0}"#, "not a state"),
    ];
    for (state, input, needle) in cases {
        let err = advance(state, input).expect_err(input);
        assert!(err.message.contains(needle), "{input}: {}", err.message);
        assert!(
            matches!(
                err.kind,
                ErrorKind::InvalidArgument | ErrorKind::InvalidJson | ErrorKind::InvalidConfig
            ),
            "{input}: {:?}",
            err.kind
        );
    }
    let reading = reading();
    let err = advance(
        &reading,
        r#"{"input":"attempt","now_ms":0,"result":{"maybe":1}}"#,
    )
    .unwrap_err();
    assert!(err.message.contains("`result` must be"), "{}", err.message);
    let err = advance(&reading, r#"{"input":"attempt","now_ms":0,"result":"ok"}"#).unwrap_err();
    assert!(err.message.contains("phase \"reading\""), "{}", err.message);
    let err = advance(&reading, r#"{"input":"read","now_ms":0,"values":[]}"#).unwrap_err();
    assert!(err.message.contains("`values` object"), "{}", err.message);
    let err = advance(
        &reading,
        r#"{"input":"read","now_ms":0,"values":{"agent-recovery/breaker/t":{"state":"ajar"}}}"#,
    )
    .unwrap_err();
    assert!(err.message.contains("delete the key"), "{}", err.message);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any text as the input, in two phases: an error or a new state, never a panic.
    #[test]
    fn any_input_never_panics(text in ".{0,200}", kind in prop::sample::select(vec![
        "run", "step", "read", "claimed", "attempt", "decision", "slept", "restored", "cancel", "end", "recover", "swapped"])) {
        let _ = advance(&started(), &text);
        let _ = advance(&reading(), &text);
        let framed = format!(r#"{{"input":"{kind}","now_ms":1,"x":{}}}"#, serde_json::to_string(&text).unwrap());
        let _ = advance(&started(), &framed);
        let _ = advance(&reading(), &framed);
    }

    /// Any JSON value where a decision or a result goes: never a panic.
    #[test]
    fn any_json_answer_never_panics(v in prop::sample::select(vec![
        "null", "1", "\"ok\"", "[]", "{}", r#"{"ok":null}"#, r#"{"failed":7}"#, r#"{"response":{"status":"x"}}"#,
        r#"{"action":7}"#, r#"{"action":"retry","delay_ms":-1}"#, r#"{"action":"explode"}"#])) {
        let state = reading();
        let claimed = advance(&state, r#"{"input":"read","now_ms":0,"values":{}}"#).unwrap().state;
        let calling = advance(&claimed, r#"{"input":"claimed","now_ms":0,"ok":true}"#).unwrap().state;
        let _ = advance(&calling, &format!(r#"{{"input":"attempt","now_ms":0,"result":{v}}}"#));
        let deciding = advance(&calling, r#"{"input":"attempt","now_ms":0,"result":{"failed":{"source":"http","status":503}}}"#).unwrap().state;
        let _ = advance(&deciding, &format!(r#"{{"input":"decision","now_ms":0,"decision":{v}}}"#));
    }
}

/// A run with the retry quota `q` (20 tokens, 3 a retry) whose first call
/// failed and was decided `retry`, its breaker recorded: the loop then
/// asks for the retry's tokens. Then `more` inputs. The state and the last batch.
fn quota_retry(more: &[&str]) -> (String, String) {
    let run = r#"{"input":"run","now_ms":0,"run_id":"r","seed":7,"config":{"retry_quota":{"name":"q","capacity":20,"retry_cost":3}}}"#;
    let mut state = advance("", run).unwrap().state;
    let mut effects = String::new();
    let inputs = [
        r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"tool"}}"#,
        r#"{"input":"read","now_ms":0,"values":{}}"#,
        r#"{"input":"claimed","now_ms":0,"ok":true}"#,
        r#"{"input":"attempt","now_ms":0,"result":{"failed":{"source":"http","status":503}}}"#,
        r#"{"input":"decision","now_ms":0,"decision":{"action":"retry","delay_ms":10,"envelope":{"code":"tool.http.503_unavailable","class":"transient"}}}"#,
        // The failure is recorded in the target's breaker (a fresh store took the swap).
        r#"{"input":"swapped","now_ms":0,"ok":true,"version":1}"#,
    ];
    for input in inputs.iter().chain(more) {
        let next = advance(&state, input).unwrap();
        state = next.state;
        effects = next.effects;
    }
    (state, effects)
}

/// The retry quota is a compare-and-set swap on `{"tokens":N}`: a retry
/// takes its cost from the bucket the run last saw (absent: full), a
/// conflict answers the bucket another worker wrote and the loop takes from
/// that, a bucket short of the cost refuses the retry without a write, and
/// 64 conflicts in a row refuse it too (docs/runtime.md, Retry quota).
#[test]
fn the_retry_quota_is_swapped_in() {
    let retrying = || quota_retry(&[]);
    let last = |effects: &str| -> serde_json::Value {
        let fx: Vec<serde_json::Value> = serde_json::from_str(effects).unwrap();
        fx.last().unwrap().clone()
    };
    // The loop's answer to a swap: its new state, its last effect, its batch.
    let answer = |state: &str, ok: bool, current: u64, version: u64| {
        let input = if ok {
            format!(r#"{{"input":"swapped","now_ms":0,"ok":true,"version":{version}}}"#)
        } else {
            format!(
                r#"{{"input":"swapped","now_ms":0,"ok":false,"current":{{"tokens":{current}}},"version":{version}}}"#
            )
        };
        let next = advance(state, &input).unwrap();
        let fx = last(&next.effects);
        (next.state, fx, next.effects)
    };
    let swap = |expected: Option<u64>, tokens: u64| serde_json::json!({"effect":"swap","key":"agent-recovery/quota/q","expected":expected,"value":{"tokens":tokens},"ttl_ms":null});
    let sleep = serde_json::json!({"effect":"sleep","ms":10,"cancellable":true});
    let refused = |effects: &str| {
        !effects.contains(r#""effect":"swap""#)
            && effects.contains("runtime.budget.retry_quota_exhausted")
    };

    // Granted at once: the bucket was absent (full), 20 - 3.
    let (state, effects) = retrying();
    assert_eq!(last(&effects), swap(None, 17));
    assert_eq!(answer(&state, true, 0, 4).1, sleep);

    // Another worker wrote 4 tokens meanwhile: the loop takes 3 of those.
    let (next, fx, _) = answer(&state, false, 4, 9);
    assert_eq!(fx, swap(Some(9), 1));
    assert_eq!(answer(&next, true, 0, 10).1, sleep);
    // A count past this run's capacity is clamped to it (20 - 3).
    assert_eq!(answer(&state, false, 500, 2).1, swap(Some(2), 17));

    // Only 2 tokens left: refused, nothing written, the step is exhausted.
    let (_, _, effects) = answer(&state, false, 2, 9);
    assert!(refused(&effects), "{effects}");

    // Contended for good: after 64 swaps in all, refused.
    let mut contended = state.clone();
    for round in 1..64u64 {
        let (next, fx, _) = answer(&contended, false, 20, round);
        assert_eq!(fx, swap(Some(round), 17), "round {round}");
        contended = next;
    }
    let (_, _, effects) = answer(&contended, false, 20, 99);
    assert!(refused(&effects), "{effects}");

    // A malformed answer is refused with a hint, as for a breaker swap.
    let e = advance(&state, r#"{"input":"swapped","now_ms":0}"#).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("boolean `ok`"), "{}", e.message);
    // `taken` is no input of the loop.
    let e = advance(&state, r#"{"input":"taken","now_ms":0,"ok":true}"#).unwrap_err();
    assert!(e.message.contains("unknown input"), "{}", e.message);
}

/// A success refunds the retry's cost on the bucket the take left, then
/// finishes; a stale bucket is refunded on the store's count.
#[test]
fn a_success_refunds_the_retry_quota() {
    let (state, _) = quota_retry(&[
        r#"{"input":"swapped","now_ms":0,"ok":true,"version":5}"#,
        r#"{"input":"slept","now_ms":10}"#,
        // The breakers are read again, and the bucket with them.
        r#"{"input":"read","now_ms":10,"values":{"agent-recovery/quota/q":{"tokens":17}},"versions":{"agent-recovery/quota/q":5}}"#,
    ]);
    let next = advance(
        &state,
        r#"{"input":"attempt","now_ms":10,"result":{"ok":"done"}}"#,
    )
    .unwrap();
    let fx: Vec<serde_json::Value> = serde_json::from_str(&next.effects).unwrap();
    let swaps: Vec<_> = fx.iter().filter(|f| f["effect"] == "swap").collect();
    // The breaker's success is recorded first; its answer then refunds 17 + 3.
    let mut state = next.state;
    let mut fx = fx.clone();
    if swaps.iter().any(|f| f["key"] == "agent-recovery/breaker/t") {
        let next = advance(
            &state,
            r#"{"input":"swapped","now_ms":10,"ok":true,"version":2}"#,
        )
        .unwrap();
        fx = serde_json::from_str(&next.effects).unwrap();
        state = next.state;
    }
    assert_eq!(
        fx.last().unwrap(),
        &serde_json::json!({"effect":"swap","key":"agent-recovery/quota/q","expected":5,"value":{"tokens":20},"ttl_ms":null})
    );
    assert!(!fx.iter().any(|f| f["effect"] == "finish"), "{fx:?}");
    // Another worker took 8 meanwhile: 12 + 3.
    let next = advance(
        &state,
        r#"{"input":"swapped","now_ms":10,"ok":false,"current":{"tokens":12},"version":7}"#,
    )
    .unwrap();
    let fx: Vec<serde_json::Value> = serde_json::from_str(&next.effects).unwrap();
    assert_eq!(
        fx.last().unwrap(),
        &serde_json::json!({"effect":"swap","key":"agent-recovery/quota/q","expected":7,"value":{"tokens":15},"ttl_ms":null})
    );
    let next = advance(
        &next.state,
        r#"{"input":"swapped","now_ms":10,"ok":true,"version":8}"#,
    )
    .unwrap();
    let fx: Vec<serde_json::Value> = serde_json::from_str(&next.effects).unwrap();
    assert!(
        fx.iter()
            .any(|f| f["effect"] == "finish" && f["outcome"] == "ok"),
        "{fx:?}"
    );
}

/// A step reads the bucket with its other keys and swaps on the version it
/// read; a success refunds nothing into a bucket it read full.
#[test]
fn a_step_reads_the_bucket_and_a_full_one_takes_no_refund() {
    let run = r#"{"input":"run","now_ms":0,"run_id":"r","seed":7,"config":{"retry_quota":{"name":"q","capacity":20}}}"#;
    let ok_with = |bucket: &str| -> Vec<serde_json::Value> {
        let mut state = advance("", run).unwrap().state;
        let next = advance(
            &state,
            r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"tool"}}"#,
        )
        .unwrap();
        assert!(
            next.effects.contains(r#""agent-recovery/quota/q""#),
            "the step reads the bucket: {}",
            next.effects
        );
        state = next.state;
        for input in [
            format!(
                r#"{{"input":"read","now_ms":0,"values":{{"agent-recovery/quota/q":{bucket}}},"versions":{{"agent-recovery/quota/q":3}}}}"#
            ),
            r#"{"input":"claimed","now_ms":0,"ok":true}"#.to_owned(),
        ] {
            state = advance(&state, &input).unwrap().state;
        }
        let next = advance(&state, r#"{"input":"attempt","now_ms":0,"result":"ok"}"#).unwrap();
        let mut fx: Vec<serde_json::Value> = serde_json::from_str(&next.effects).unwrap();
        if fx.last().unwrap()["key"] == "agent-recovery/breaker/t" {
            let next = advance(
                &next.state,
                r#"{"input":"swapped","now_ms":0,"ok":true,"version":1}"#,
            )
            .unwrap();
            fx = serde_json::from_str(&next.effects).unwrap();
        }
        fx
    };
    // Full: no swap, the step finishes in the same batch.
    let fx = ok_with(r#"{"tokens":20}"#);
    assert!(
        !fx.iter().any(|f| f["key"] == "agent-recovery/quota/q"),
        "{fx:?}"
    );
    assert_eq!(fx.last().unwrap()["effect"], "finish");
    // 3 tokens: success_refund (1) swapped in on the version read.
    let fx = ok_with(r#"{"tokens":3}"#);
    assert_eq!(
        fx.last().unwrap(),
        &serde_json::json!({"effect":"swap","key":"agent-recovery/quota/q","expected":3,"value":{"tokens":4},"ttl_ms":null})
    );
}

/// The loop owns the attempt timeout: a call that took (`took_ms`) longer
/// than the `timeout_ms` its `call` effect carried, or that the runtime
/// stopped waiting for (`timed_out`), failed with a total timeout whatever
/// it returned; a call within its timeout keeps its result.
#[test]
fn the_loop_judges_the_attempt_timeout() {
    let run =
        r#"{"input":"run","now_ms":0,"run_id":"r","seed":7,"config":{"attempt_timeout_ms":250}}"#;
    let mut calling = advance("", run).unwrap().state;
    let mut call = String::new();
    for input in [
        r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"tool"}}"#,
        r#"{"input":"read","now_ms":0,"values":{}}"#,
        r#"{"input":"claimed","now_ms":0,"ok":true}"#,
    ] {
        let next = advance(&calling, input).unwrap();
        calling = next.state;
        call = next.effects;
    }
    assert!(call.contains(r#""timeout_ms":250"#), "{call}");
    let observed = |input: &str| -> serde_json::Value {
        let next = advance(&calling, input).unwrap();
        let fx: Vec<serde_json::Value> = serde_json::from_str(&next.effects).unwrap();
        fx.last().unwrap().clone()
    };
    let timeout =
        |after: u64| serde_json::json!({"source":"timeout","phase":"total","after_ms":after});
    // 251 ms: a total timeout, though the call returned a value.
    let fx = observed(r#"{"input":"attempt","now_ms":251,"took_ms":251,"result":{"ok":1}}"#);
    assert_eq!(fx["effect"], "decide");
    let obs: serde_json::Value = serde_json::from_str(fx["observation"].as_str().unwrap()).unwrap();
    assert_eq!(obs, timeout(251));
    // Stopped waiting at the timeout.
    let fx = observed(r#"{"input":"attempt","now_ms":250,"took_ms":250,"result":"timed_out"}"#);
    let obs: serde_json::Value = serde_json::from_str(fx["observation"].as_str().unwrap()).unwrap();
    assert_eq!(obs, timeout(250));
    // Without `took_ms`, `timed_out` says the timeout.
    let fx = observed(r#"{"input":"attempt","now_ms":250,"result":"timed_out"}"#);
    let obs: serde_json::Value = serde_json::from_str(fx["observation"].as_str().unwrap()).unwrap();
    assert_eq!(obs, timeout(250));
    // 250 ms is within it: the result stands (the step succeeds).
    let next = advance(
        &calling,
        r#"{"input":"attempt","now_ms":250,"took_ms":250,"result":{"ok":1}}"#,
    )
    .unwrap();
    assert!(next.effects.contains(r#""event":"ok""#), "{}", next.effects);
    // A malformed `took_ms` is refused with a hint.
    let e = advance(
        &calling,
        r#"{"input":"attempt","now_ms":250,"took_ms":-1,"result":"ok"}"#,
    )
    .unwrap_err();
    assert!(e.message.contains("`took_ms`"), "{}", e.message);
}
