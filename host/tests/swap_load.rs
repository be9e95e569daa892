//! Swapping under load: reader threads decide continuously while another
//! thread swaps between the reference and the payments policy hundreds of
//! times. No call may fail, and every answer must be exactly what the policy
//! it names would answer.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent_recovery::{Policy, PolicyHandle, SwapOptions};

use common::handle::{CTX_409, CTX_503, OBS_409, OBS_503, payments_wasm};

const READERS: usize = 4;
const SWAPS: usize = 300;

/// Observations the two policies decide differently, with both answers.
struct Case {
    observation: &'static str,
    context: &'static str,
    reference: String,
    payments: String,
}

#[test]
fn swapping_under_load_fails_no_call_and_every_answer_matches_its_policy() {
    let reference = Arc::new(Policy::loader().pool_size(8).reference().unwrap());
    let payments = Arc::new(Policy::loader().pool_size(8).file(payments_wasm()).unwrap());
    let (reference_sha, payments_sha) = (reference.sha256(), payments.sha256());
    let cases: Vec<Case> = [(OBS_409, CTX_409), (OBS_503, CTX_503)]
        .into_iter()
        .map(|(observation, context)| Case {
            observation,
            context,
            reference: reference.decide_json(observation, context).unwrap(),
            payments: payments.decide_json(observation, context).unwrap(),
        })
        .collect();
    for case in &cases {
        assert_ne!(
            case.reference, case.payments,
            "{}: must differ",
            case.observation
        );
    }

    let handle = PolicyHandle::builder()
        .policy(Arc::clone(&reference))
        .unwrap();
    let stop = AtomicBool::new(false);
    // Answers by version: [reference, payments].
    let answered = [AtomicU64::new(0), AtomicU64::new(0)];
    let problems = Mutex::new(Vec::<String>::new());
    let problem = |p: String| {
        problems
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(p)
    };

    std::thread::scope(|scope| {
        for _ in 0..READERS {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for case in &cases {
                        match handle.decide_json(case.observation, case.context) {
                            Ok(answer) if answer.policy.sha256 == reference_sha => {
                                if answer.json != case.reference {
                                    problem(format!("reference answered {}", answer.json));
                                }
                                answered[0].fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(answer) if answer.policy.sha256 == payments_sha => {
                                if answer.json != case.payments {
                                    problem(format!("payments answered {}", answer.json));
                                }
                                answered[1].fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(answer) => problem(format!("unknown policy {}", answer.policy)),
                            Err(e) => problem(format!("call failed: {e}")),
                        }
                    }
                }
            });
        }
        let swapper = scope.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(120);
            for i in 0..SWAPS {
                let (target, to) = if i % 2 == 0 {
                    (&payments, 1)
                } else {
                    (&reference, 0)
                };
                let seen = answered[to].load(Ordering::Relaxed);
                handle
                    .swap_policy(Arc::clone(target), &SwapOptions::default())
                    .expect("both policies pass their checks");
                // Do not swap again before the new version has answered a
                // call: this interleaves swaps and calls without sleeping.
                while answered[to].load(Ordering::Relaxed) == seen {
                    assert!(Instant::now() < deadline, "readers stalled after swap {i}");
                    std::thread::yield_now();
                }
            }
        });
        let swapped = swapper.join();
        stop.store(true, Ordering::Relaxed);
        swapped.expect("the swapper finished");
    });

    let problems = problems
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    assert!(
        problems.is_empty(),
        "{} problems, first: {:?}",
        problems.len(),
        problems.first()
    );
    let stats = handle.stats();
    assert_eq!(
        (stats.swaps, stats.refusals, stats.failures),
        (SWAPS as u64, 0, 0)
    );
    let counts = answered.map(|a| a.into_inner());
    assert!(
        counts[0] >= (SWAPS / 2) as u64 && counts[1] >= (SWAPS / 2) as u64,
        "{counts:?}"
    );
    eprintln!("answers by version (reference, payments): {counts:?}");
}
