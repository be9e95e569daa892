//! Limits, the instance pool and loading, through the real component.

mod common;

use std::sync::Arc;

use agent_recovery::{ErrorKind, Limits, Policy};

use common::policy;

const OBS_429: &str = r#"{"source":"http","status":429,"headers":{"retry-after":"2"}}"#;

/// An observation whose body is `n` bytes of a JSON array of objects.
fn big_observation(n: usize) -> String {
    let item = r#"{"k":"v","n":1},"#;
    let items = item.repeat(n / item.len());
    format!(
        r#"{{"source":"http","status":500,"body":{{"error":{{"message":"m","items":[{}]}}}}}}"#,
        items.trim_end_matches(',')
    )
}

fn loader(limits: Limits) -> agent_recovery::Loader {
    Policy::loader().limits(limits).pool_size(4)
}

#[test]
fn running_out_of_fuel_is_an_error_and_the_instance_is_dropped() {
    // Enough fuel to instantiate and handle a small input, not a 1 MB body.
    let limits = Limits::default()
        .with_fuel_base(5_000_000)
        .with_fuel_per_byte(0);
    let policy = loader(limits).reference().expect("loads");
    policy
        .classify_json(OBS_429)
        .expect("a small input fits the base fuel");
    assert_eq!(policy.idle_instances(), 1);

    let err = policy
        .classify_json(&big_observation(1 << 20))
        .expect_err("a 1 MB body needs more than 5M fuel");
    assert_eq!(err.kind(), ErrorKind::OutOfFuel, "{err}");
    assert!(err.message().contains("fuel"), "{err}");
    assert_eq!(
        policy.idle_instances(),
        0,
        "the instance that ran out must not be reused"
    );

    // The next call gets a fresh instance and works.
    policy
        .classify_json(OBS_429)
        .expect("a fresh instance works");
    assert_eq!(policy.idle_instances(), 1);
}

#[test]
fn a_memory_blow_up_is_an_error_and_the_instance_is_dropped() {
    let limits = Limits::default().with_memory_bytes(8 << 20);
    let policy = loader(limits).reference().expect("loads");
    policy
        .classify_json(OBS_429)
        .expect("a small input fits in 8 MiB");
    assert_eq!(policy.idle_instances(), 1);

    let err = policy
        .classify_json(&big_observation(6 << 20))
        .expect_err("a 6 MB body of objects does not fit in 8 MiB");
    assert_eq!(err.kind(), ErrorKind::MemoryLimit, "{err}");
    assert!(err.message().contains("memory limit"), "{err}");
    assert_eq!(policy.idle_instances(), 0);
    policy
        .classify_json(OBS_429)
        .expect("a fresh instance works");
}

#[test]
fn inputs_over_the_limit_are_refused_before_the_call() {
    let policy = loader(Limits::default().with_max_input_bytes(100))
        .reference()
        .expect("loads");
    policy.classify_json(OBS_429).expect("60 bytes fit");
    let idle = policy.idle_instances();
    let big = format!(
        r#"{{"source":"http","status":500,"body":"{}"}}"#,
        "x".repeat(100)
    );
    let err = policy.classify_json(&big).expect_err("over 100 bytes");
    assert_eq!(err.kind(), ErrorKind::InputTooLarge);
    assert!(err.message().contains("100 bytes"), "{err}");
    assert_eq!(policy.idle_instances(), idle, "no instance was used");
    // Observation and context count together.
    let err = policy
        .decide_json(OBS_429, &" ".repeat(50))
        .expect_err("60 + 50 bytes");
    assert_eq!(err.kind(), ErrorKind::InputTooLarge);
}

#[test]
fn policy_errors_keep_the_instance() {
    let policy = loader(Limits::default()).reference().expect("loads");
    let err = policy.classify_json("not json").expect_err("invalid JSON");
    assert!(matches!(err.kind(), ErrorKind::Policy(_)), "{err:?}");
    assert!(err.kind().is_bad_input());
    assert_eq!(
        policy.idle_instances(),
        1,
        "a policy-error is a normal return"
    );
}

#[test]
fn the_pool_reuses_instances_and_serves_threads_in_parallel() {
    let policy = Arc::new(loader(Limits::default()).reference().expect("loads"));
    let ctx = r#"{"call":"tool","attempt":2,"seed":42}"#;
    let expected = policy.decide_json(OBS_429, ctx).expect("decides");
    assert_eq!(policy.idle_instances(), 1);
    for _ in 0..5 {
        policy.decide_json(OBS_429, ctx).expect("decides");
    }
    assert_eq!(
        policy.idle_instances(),
        1,
        "sequential calls reuse one instance"
    );

    let threads: Vec<_> = (0..8)
        .map(|_| {
            let policy = Arc::clone(&policy);
            std::thread::spawn(move || {
                (0..20)
                    .map(|_| policy.decide_json(OBS_429, ctx).expect("decides"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for thread in threads {
        for got in thread.join().expect("no panic") {
            assert_eq!(got, expected, "same input, same bytes, on any instance");
        }
    }
    assert!(
        policy.idle_instances() <= 4,
        "the pool keeps at most pool_size instances"
    );
}

#[test]
fn pool_size_zero_instantiates_every_call() {
    let policy = Policy::loader().pool_size(0).reference().expect("loads");
    policy.classify_json(OBS_429).expect("works");
    assert_eq!(policy.idle_instances(), 0);
}

#[test]
fn loading_rejects_what_is_not_a_policy_component() {
    let cases: [(&[u8], ErrorKind, &str); 4] = [
        (b"", ErrorKind::Load, "not a WebAssembly binary"),
        (
            b"{\"source\":\"http\"}",
            ErrorKind::Load,
            "not a WebAssembly binary",
        ),
        (
            b"\0asm\x01\0\0\0",
            ErrorKind::Load,
            "core WebAssembly module",
        ),
        // A valid, empty component: it exports nothing of the world.
        (
            b"\0asm\x0d\0\x01\0",
            ErrorKind::Incompatible,
            "agent:recovery/recovery-policy@0.1.0",
        ),
    ];
    for (bytes, kind, needle) in cases {
        let err = Policy::from_bytes(bytes).expect_err("not a policy");
        assert_eq!(err.kind(), kind, "{bytes:?}: {err}");
        assert!(err.message().contains(needle), "{bytes:?}: {err}");
        assert!(!err.message().contains('\n'), "one line: {err}");
    }
    let err = Policy::from_file("/no/such/policy.wasm").expect_err("missing file");
    assert_eq!(err.kind(), ErrorKind::Io);
    assert!(err.message().contains("/no/such/policy.wasm"), "{err}");
}

#[test]
fn the_reference_policy_verifies_and_has_an_identity() {
    let policy = policy();
    let verified = policy
        .verify()
        .expect("the reference passes its smoke tests");
    assert_eq!(verified.info.contract, "0.1.0");
    assert_eq!(verified.info.name, "agent-recovery-reference");
    assert!(verified.smoke_cases > 0);
    let sha = policy.sha256();
    assert_eq!(sha.len(), 64);
    assert!(
        sha.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    let again = Policy::from_bytes(Policy::reference_bytes()).expect("loads");
    assert_eq!(again.sha256(), sha, "same bytes, same digest");
}

#[test]
fn default_limits_are_the_documented_ones() {
    let limits = Limits::default();
    assert_eq!(limits.memory_bytes(), 128 << 20);
    assert_eq!(limits.fuel_base(), 100_000_000);
    assert_eq!(limits.fuel_per_byte(), 1_000);
    assert_eq!(limits.max_input_bytes(), 16 << 20);
    assert_eq!(
        Limits::default().with_fuel_per_byte(u64::MAX).fuel_for(2),
        u64::MAX
    );
}
