//! Hostile components (tests/hostile/, built by build.rs) through the real
//! host: each is refused at load or activation, or contained per call; the
//! host survives, the previous policy keeps answering, and the error says
//! what happened.

mod common;

use std::path::Path;
use std::sync::Arc;

use agent_recovery::{
    ErrorKind, Event, FailurePolicy, Limits, Policy, PolicyHandle, SwapError, SwapOptions,
    SwapStage, WORLD,
};

use common::handle::{CTX_503, OBS_503, Recorded, builder, hostile, reference_handle};
use common::policy;

/// Swaps `path` into a fresh reference handle and checks that it is refused
/// at `stage` with `kind`, that the reference still answers, and that the
/// refusal was counted and reported.
fn refused(path: &Path, stage: SwapStage, kind: ErrorKind) -> SwapError {
    refused_with(Limits::default(), path, stage, kind)
}

/// [`refused`] with a handle whose policies run under `limits`.
fn refused_with(limits: Limits, path: &Path, stage: SwapStage, kind: ErrorKind) -> SwapError {
    let (builder, recorded) = builder(FailurePolicy::FailClosed);
    let loader = Policy::loader().limits(limits).pool_size(2);
    let handle = builder
        .loader(loader)
        .reference()
        .expect("the reference loads");
    let err = handle
        .swap_file(path, &SwapOptions::default())
        .expect_err("a hostile component must be refused");
    check_refusal(&handle, &recorded, &err, stage, kind);
    err
}

fn check_refusal(
    handle: &PolicyHandle,
    recorded: &Recorded,
    err: &SwapError,
    stage: SwapStage,
    kind: ErrorKind,
) {
    assert_eq!((err.stage(), err.kind()), (stage, kind), "{err}");
    assert!(!err.message().contains('\n'), "one line: {err}");
    still_the_reference(handle);
    let stats = handle.stats();
    assert_eq!((stats.swaps, stats.refusals), (0, 1), "{stats:?}");
    match recorded.all().as_slice() {
        [Event::Refused { active, error }] => {
            assert_eq!(active.sha256, policy().sha256());
            assert_eq!(error, err);
        }
        other => panic!("expected one refusal event, got {other:?}"),
    }
}

/// The handle still answers, with the reference, exactly as the reference does.
fn still_the_reference(handle: &PolicyHandle) {
    let answer = handle.decide_json(OBS_503, CTX_503).expect("still answers");
    assert_eq!(answer.policy.sha256, policy().sha256());
    assert_eq!(answer.policy.name, "agent-recovery-reference");
    let expected = policy().decide_json(OBS_503, CTX_503).expect("decides");
    assert_eq!(answer.json, expected);
    assert!(answer.fallback.is_none());
}

/// A handle whose active policy is `path`, loaded unchecked.
fn unchecked(path: &Path, failure_policy: FailurePolicy) -> (PolicyHandle, Recorded) {
    unchecked_with(Limits::default(), path, failure_policy)
}

fn unchecked_with(
    limits: Limits,
    path: &Path,
    failure_policy: FailurePolicy,
) -> (PolicyHandle, Recorded) {
    let (builder, recorded) = builder(failure_policy);
    let loaded = Policy::loader()
        .limits(limits)
        .pool_size(2)
        .file(path)
        .expect("loads");
    let handle = builder
        .policy(Arc::new(loaded))
        .expect("reads its identity");
    (handle, recorded)
}

/// Under fail-closed the caller gets `kind`; under fallback the reference
/// answers and the answer says so. Both are counted and reported.
fn contained_per_call(path: &Path, kind: ErrorKind) {
    contained_per_call_with(Limits::default(), path, kind);
}

fn contained_per_call_with(limits: Limits, path: &Path, kind: ErrorKind) {
    let (handle, recorded) = unchecked_with(limits.clone(), path, FailurePolicy::FailClosed);
    let name = handle.active().id().name.clone();
    assert!(name.starts_with("hostile-"), "{name}");
    for _ in 0..2 {
        let err = handle
            .decide_json(OBS_503, CTX_503)
            .expect_err("fails closed");
        assert_eq!(err.kind(), kind, "{err}");
    }
    assert_eq!((handle.stats().failures, handle.stats().fallbacks), (2, 0));
    let lines = recorded.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains(&name) && lines[0].contains(kind.as_str()),
        "{lines:?}"
    );

    let (handle, recorded) = unchecked_with(limits, path, FailurePolicy::FallbackToReference);
    let answer = handle
        .decide_json(OBS_503, CTX_503)
        .expect("the reference answers");
    assert_eq!(answer.policy.sha256, policy().sha256());
    assert_eq!(answer.json, policy().decide_json(OBS_503, CTX_503).unwrap());
    let fallback = answer.fallback.expect("the answer says it is a fallback");
    assert_eq!(fallback.kind(), kind, "{fallback}");
    assert_eq!((handle.stats().failures, handle.stats().fallbacks), (1, 1));
    assert!(
        matches!(recorded.all().as_slice(), [Event::FellBack { policy, .. }] if policy.name == name)
    );
    // The failing policy is still the active one: a fallback is not a swap.
    assert_eq!(handle.active().id().name, name);
}

#[test]
fn spin_is_refused_at_activation_and_contained_per_call() {
    let path = hostile("spin");
    let err = refused(&path, SwapStage::Verify, ErrorKind::OutOfFuel);
    assert!(err.message().contains("smoke case 0"), "{err}");
    assert!(err.message().contains("ran out of fuel"), "{err}");
    assert_eq!(err.candidate_sha256().map(str::len), Some(64));

    let small = Limits::default().with_fuel_base(20_000_000);
    let spin = Policy::loader()
        .limits(small)
        .pool_size(2)
        .file(&path)
        .unwrap();
    for _ in 0..2 {
        let err = spin.decide_json(OBS_503, "{}").expect_err("spins");
        assert_eq!(err.kind(), ErrorKind::OutOfFuel, "{err}");
        assert_eq!(spin.idle_instances(), 0, "a spun instance is dropped");
    }
    contained_per_call(&path, ErrorKind::OutOfFuel);
}

#[test]
fn membomb_hits_the_memory_limit() {
    let path = hostile("membomb");
    // Under the default limits fuel stops it first: filling 1 MiB takes fuel,
    // and 100 M units run out before 128 MiB are touched.
    refused(&path, SwapStage::Verify, ErrorKind::OutOfFuel);
    // With a memory limit below what the fuel allows, the limit stops it.
    let small = Limits::default().with_memory_bytes(16 << 20);
    let err = refused_with(
        small.clone(),
        &path,
        SwapStage::Verify,
        ErrorKind::MemoryLimit,
    );
    assert!(
        err.message().contains("memory limit of 16777216 bytes"),
        "{err}"
    );

    let bomb = Policy::loader()
        .limits(small.clone())
        .pool_size(2)
        .file(&path)
        .unwrap();
    let err = bomb.classify_json(OBS_503).expect_err("bombs");
    assert_eq!(err.kind(), ErrorKind::MemoryLimit, "{err}");
    assert_eq!(bomb.idle_instances(), 0);
    assert_eq!(
        bomb.info().unwrap().name,
        "hostile-membomb",
        "a fresh instance answers"
    );
    contained_per_call_with(small, &path, ErrorKind::MemoryLimit);
}

#[test]
fn panic_traps_the_instance_is_discarded_and_the_next_call_is_fine() {
    let path = hostile("panic");
    let err = refused(&path, SwapStage::Verify, ErrorKind::Trap);
    assert!(err.message().contains("trapped"), "{err}");

    let panicky = Policy::loader().pool_size(2).file(&path).unwrap();
    assert_eq!(panicky.info().unwrap().name, "hostile-panic");
    assert_eq!(panicky.idle_instances(), 1);
    for _ in 0..3 {
        let err = panicky.decide_json(OBS_503, "{}").expect_err("panics");
        assert_eq!(err.kind(), ErrorKind::Trap, "{err}");
        assert_eq!(
            panicky.idle_instances(),
            0,
            "a trapped instance is never reused"
        );
        // The next call gets a fresh instance and works.
        assert_eq!(panicky.info().unwrap().name, "hostile-panic");
        assert_eq!(panicky.idle_instances(), 1);
    }
    contained_per_call(&path, ErrorKind::Trap);
}

#[test]
fn sneaky_is_refused_at_load_for_its_imports() {
    let path = hostile("sneaky");
    let err = refused(&path, SwapStage::Load, ErrorKind::Incompatible);
    for needle in ["wasi:filesystem/", "wasi:sockets/", "may import only"] {
        assert!(err.message().contains(needle), "{needle}: {err}");
    }
    // Not even an unchecked load gets it in.
    let err = Policy::from_file(&path).expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::Incompatible);
}

#[test]
fn garbage_is_refused_at_activation_and_fails_closed_or_falls_back_per_call() {
    let path = hostile("garbage");
    let err = refused(&path, SwapStage::Verify, ErrorKind::InvalidOutput);
    assert!(err.message().contains("not a JSON decision"), "{err}");
    contained_per_call(&path, ErrorKind::InvalidOutput);

    // classify-json returns an unterminated object: also invalid output.
    let (handle, _) = unchecked(&path, FailurePolicy::FallbackToReference);
    let answer = handle
        .classify_json(OBS_503)
        .expect("the reference answers");
    assert_eq!(answer.json, policy().classify_json(OBS_503).unwrap());
    assert_eq!(
        answer.fallback.map(|e| e.kind()),
        Some(ErrorKind::InvalidOutput)
    );
}

#[test]
fn wrong_world_is_refused_at_load() {
    let err = refused(
        &hostile("wrong-world"),
        SwapStage::Load,
        ErrorKind::Incompatible,
    );
    assert!(err.message().contains(WORLD), "{err}");
}

#[test]
fn a_truncated_reference_is_refused_at_load() {
    let bytes = Policy::reference_bytes();
    let (handle, recorded) = reference_handle();
    let err = handle
        .swap_bytes(&bytes[..bytes.len() / 2], &SwapOptions::default())
        .expect_err("truncated");
    check_refusal(&handle, &recorded, &err, SwapStage::Load, ErrorKind::Load);
    assert!(err.message().contains("cannot compile"), "{err}");
}

#[test]
fn a_sha256_mismatch_is_refused_before_compiling() {
    let payments = common::handle::payments_wasm();
    let (handle, recorded) = reference_handle();
    let pinned = SwapOptions::default().sha256(&policy().sha256()).unwrap();
    let err = handle
        .swap_file(&payments, &pinned)
        .expect_err("wrong digest");
    check_refusal(
        &handle,
        &recorded,
        &err,
        SwapStage::Digest,
        ErrorKind::DigestMismatch,
    );
    assert!(err.message().contains(&policy().sha256()), "{err}");
    let got = err
        .candidate_sha256()
        .expect("the candidate's digest")
        .to_string();
    assert!(err.message().contains(&got), "{err}");

    // Bytes that would not even compile are refused for their digest first.
    let err = handle
        .swap_bytes(b"not a component", &pinned)
        .expect_err("wrong digest");
    assert_eq!(
        (err.stage(), err.kind()),
        (SwapStage::Digest, ErrorKind::DigestMismatch)
    );

    // With its own digest pinned, the payments policy goes in.
    let bytes = std::fs::read(&payments).unwrap();
    let own = agent_recovery::Policy::from_bytes(&bytes).unwrap().sha256();
    let id = handle
        .swap_file(
            &payments,
            &SwapOptions::default().sha256(&own.to_uppercase()).unwrap(),
        )
        .expect("the pinned digest matches");
    assert_eq!(
        (id.name.as_str(), id.sha256.as_str()),
        ("payments-strict", own.as_str())
    );
}

#[test]
fn a_missing_file_is_refused_at_read() {
    let (handle, recorded) = reference_handle();
    let err = handle
        .swap_file("/no/such/policy.wasm", &SwapOptions::default())
        .expect_err("missing");
    check_refusal(&handle, &recorded, &err, SwapStage::Read, ErrorKind::Io);
    assert!(err.message().contains("/no/such/policy.wasm"), "{err}");
}
