//! Normalize + decide (`decide_json`) on a realistic mix of observations:
//! through the host (Wasmtime, pooled instance, fuel metering) versus the
//! same guest crate called natively; plus the cost of a fresh instance.
//!
//! Run: `cargo bench -p agent-recovery --bench decide`. Each `mix` iteration
//! decides all observations once, so per-call time is the reported time
//! divided by the mix size (criterion's throughput line gives calls/s).

use std::hint::black_box;

use agent_recovery::Policy;
use agent_recovery::types::CallKind;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

// The 13-observation mix every decide_json benchmark uses (one list, three
// readers: this bench, host/examples/wasm_calls.rs, guest/examples/pieces.rs).
include!("../../tests/bench/mix.rs");

const CONTEXT: &str = r#"{"attempt":1,"elapsed_ms":1500,"seed":42}"#;

fn decide(c: &mut Criterion) {
    let policy = Policy::reference().expect("the reference policy loads");
    // Both paths must agree byte for byte before we compare their speed.
    for obs in MIX {
        let host = policy.decide_json(obs, CONTEXT).expect("host decides");
        let native = agent_recovery_policy::decide_json(obs, CONTEXT).expect("native decides");
        assert_eq!(host, native, "host and native disagree on {obs}");
    }

    let mut group = c.benchmark_group("decide_json_mix");
    group.throughput(Throughput::Elements(MIX.len() as u64));
    group.bench_function("host_wasmtime", |b| {
        b.iter(|| {
            for obs in MIX {
                black_box(
                    policy
                        .decide_json(black_box(obs), CONTEXT)
                        .expect("decides"),
                );
            }
        })
    });
    group.bench_function("native", |b| {
        b.iter(|| {
            for obs in MIX {
                black_box(
                    agent_recovery_policy::decide_json(black_box(obs), CONTEXT).expect("decides"),
                );
            }
        })
    });
    group.finish();
}

fn instantiate(c: &mut Criterion) {
    let mut group = c.benchmark_group("instance");
    // The smallest export: what a pooled call costs beyond the policy's own work.
    let pooled = Policy::reference().expect("loads");
    group.bench_function("pooled_call_backoff", |b| {
        b.iter(|| {
            black_box(
                pooled
                    .backoff(CallKind::Tool, 2, Some(7), None)
                    .expect("delay"),
            )
        })
    });
    // pool_size(0): every call instantiates a fresh store and instance.
    let fresh = Policy::loader().pool_size(0).reference().expect("loads");
    group.bench_function("fresh_instance_backoff", |b| {
        b.iter(|| {
            black_box(
                fresh
                    .backoff(CallKind::Tool, 2, Some(7), None)
                    .expect("delay"),
            )
        })
    });
    // Loading the already-compiled reference: link WASI and resolve exports.
    group.bench_function("link_reference", |b| {
        b.iter(|| black_box(Policy::reference().expect("loads")))
    });
    group.finish();
}

criterion_group!(benches, decide, instantiate);
criterion_main!(benches);
