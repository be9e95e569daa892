//! Hot swap through a `PolicyHandle`: atomic activation, answers that say who
//! answered, counters and events, and the failure policy's scope.

mod common;

use std::sync::Arc;

use agent_recovery::{
    ErrorKind, Event, FailurePolicy, Limits, Policy, PolicyErrorKind, PolicyHandle, SwapOptions,
};

use common::handle::{CTX_409, OBS_409, builder, payments_wasm, reference_handle};
use common::policy;

fn payments() -> Arc<Policy> {
    Arc::new(Policy::from_file(payments_wasm()).expect("the payments policy loads"))
}

#[test]
fn a_swap_is_atomic_calls_in_flight_finish_on_the_old_version() {
    let (handle, recorded) = reference_handle();
    let before = handle.active();
    let reference_answer = handle.decide_json(OBS_409, CTX_409).unwrap();
    assert_eq!(reference_answer.policy, *before.id());

    let payments = payments();
    let id = handle
        .swap_policy(Arc::clone(&payments), &SwapOptions::default())
        .expect("the payments policy passes its checks");
    assert_eq!(id.name, "payments-strict");
    assert_eq!(id.version, "1.0.0");
    assert_eq!(id.sha256, payments.sha256());

    // A caller that loaded the old version before the swap still uses it.
    let old = before.policy().decide_json(OBS_409, CTX_409).unwrap();
    assert_eq!(old, reference_answer.json);
    // New calls get the new one, and say so; the bytes are the component's.
    let after = handle.decide_json(OBS_409, CTX_409).unwrap();
    assert_eq!(after.policy, id);
    assert_eq!(after.json, payments.decide_json(OBS_409, CTX_409).unwrap());
    assert_ne!(
        after.json, reference_answer.json,
        "409: the policies differ"
    );
    assert!(after.json.contains(r#""action":"fail""#), "{}", after.json);

    assert_eq!(handle.stats().swaps, 1);
    match recorded.all().as_slice() {
        [Event::Swapped { from, to }] => {
            assert_eq!(from.sha256, policy().sha256());
            assert_eq!(*to, id);
        }
        other => panic!("expected one swap event, got {other:?}"),
    }
    let line = recorded.lines().remove(0);
    let expected = format!(
        "swapped policy agent-recovery-reference 0.1.0 sha256:{} -> payments-strict 1.0.0 sha256:{}",
        policy().sha256(),
        id.sha256
    );
    assert_eq!(line, expected);
}

#[test]
fn clones_share_the_active_policy_and_swap_back_and_forth() {
    let (handle, _) = reference_handle();
    let other = handle.clone();
    let payments = payments();
    let reference = Arc::clone(handle.active().policy());
    for round in 0..3 {
        other
            .swap_policy(Arc::clone(&payments), &SwapOptions::default())
            .unwrap();
        assert_eq!(
            handle.active().id().name,
            "payments-strict",
            "round {round}"
        );
        other
            .swap_policy(Arc::clone(&reference), &SwapOptions::default())
            .unwrap();
        assert_eq!(handle.active().id().name, "agent-recovery-reference");
    }
    assert_eq!(handle.stats().swaps, 6);
}

#[test]
fn swap_file_compiles_and_activates_a_component() {
    let (handle, _) = reference_handle();
    let id = handle
        .swap_file(
            payments_wasm(),
            &SwapOptions::default().reference_smoke_set(true),
        )
        .expect("payments also passes the reference's smoke set");
    assert_eq!(id.name, "payments-strict");
    let bytes = std::fs::read(payments_wasm()).unwrap();
    let again = handle.swap_bytes(&bytes, &SwapOptions::default()).unwrap();
    assert_eq!(again, id);
}

#[test]
fn a_handle_can_start_from_a_validated_file() {
    let (first, _) = builder(FailurePolicy::FailClosed);
    let handle = first
        .file(payments_wasm(), &SwapOptions::default())
        .expect("validated");
    assert_eq!(handle.active().id().name, "payments-strict");
    let (second, _) = builder(FailurePolicy::FailClosed);
    let err = second
        .file("/no/such.wasm", &SwapOptions::default())
        .expect_err("a refused file builds no handle");
    assert_eq!(err.kind(), ErrorKind::Io);
}

#[test]
fn bad_input_is_the_callers_error_under_both_failure_policies() {
    for failure_policy in [
        FailurePolicy::FailClosed,
        FailurePolicy::FallbackToReference,
    ] {
        let (builder, recorded) = builder(failure_policy);
        let handle = builder.policy(payments()).unwrap();
        let err = handle.decide_json("not json", "{}").expect_err("bad input");
        assert_eq!(err.kind(), ErrorKind::Policy(PolicyErrorKind::InvalidJson));
        let err = handle
            .decide_json(OBS_409, r#"{"atempt":1}"#)
            .expect_err("unknown context member");
        assert_eq!(
            err.kind(),
            ErrorKind::Policy(PolicyErrorKind::InvalidContext)
        );
        assert_eq!(handle.stats(), agent_recovery::Stats::default());
        assert!(recorded.all().is_empty(), "{:?}", recorded.lines());
    }
}

#[test]
fn when_the_reference_itself_fails_there_is_nothing_to_fall_back_to() {
    // So little fuel that the reference runs out on a 1 MB body.
    let limits = Limits::default()
        .with_fuel_base(5_000_000)
        .with_fuel_per_byte(0);
    let (builder, recorded) = builder(FailurePolicy::FallbackToReference);
    let handle: PolicyHandle = builder
        .loader(Policy::loader().limits(limits))
        .reference()
        .unwrap();
    let body = "x".repeat(1 << 20);
    let obs = format!(r#"{{"source":"http","status":500,"body":{{"m":"{body}"}}}}"#);
    let err = handle.decide_json(&obs, "{}").expect_err("out of fuel");
    assert_eq!(err.kind(), ErrorKind::OutOfFuel);
    let stats = handle.stats();
    assert_eq!((stats.failures, stats.fallbacks), (1, 0));
    assert!(matches!(recorded.all().as_slice(), [Event::Failed { .. }]));
}

#[test]
fn an_unchecked_swap_skips_verification_but_not_loading() {
    let (handle, _) = reference_handle();
    let garbage = common::handle::hostile("garbage");
    let unchecked = SwapOptions::default().verify(false);
    let id = handle
        .swap_file(&garbage, &unchecked)
        .expect("activated unchecked");
    assert_eq!(id.name, "hostile-garbage");
    let err = handle.swap_file(common::handle::hostile("sneaky"), &unchecked);
    assert_eq!(
        err.map_err(|e| e.kind()).err(),
        Some(ErrorKind::Incompatible)
    );
}
