//! Fan-out through the real Runtime and the real component: branches on
//! threads with the real clock, the result array, a successful branch's
//! compensation registered for later, cancellation, and bad fan-outs.
//! Expected values follow docs/runtime.md ("Fan-out"), not recorded output.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use agent_recovery::runtime::{
    Call, Outcome, Runtime, RuntimeError, Step, SystemClock, VirtualClock,
};
use serde_json::{Value, json};

fn ok(v: Value) -> impl FnMut(&Call) -> Outcome + Send {
    move |_| Outcome::Ok(v.clone())
}

#[test]
fn branches_run_concurrently_with_the_real_clock() {
    // Three branches that each wait for the other two at a barrier: only
    // concurrent branches can pass it (sequential ones would deadlock, so a
    // watchdog bounds the test instead of a sleep).
    let runtime = Runtime::builder()
        .clock(Arc::new(SystemClock))
        .seed(7)
        .build()
        .unwrap();
    let barrier = Arc::new(Barrier::new(3));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut run = runtime.run("fan-threads").unwrap();
        let branches = (0..3)
            .map(|i| {
                let b = Arc::clone(&barrier);
                Step::new(&format!("b{i}"), "search", move |_: &Call| {
                    b.wait();
                    Outcome::Ok(json!(i))
                })
                .target(&format!("host-{i}"))
            })
            .collect();
        let report = run.fanout("all", 3, branches).unwrap();
        tx.send(report).unwrap();
    });
    let report = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the branches ran concurrently (else the barrier never opens)");
    assert_eq!(report.outcome, "ok");
    assert!(!report.run_finished);
    assert_eq!(report.result, Some(json!([0, 1, 2])));
}

#[test]
fn the_result_has_null_for_failed_branches_and_a_branch_is_compensated_later() {
    let clock = Arc::new(VirtualClock::new(1_767_225_600_000));
    // A breaker that does not open within the attempt budget, so 5 calls are made.
    let runtime = Runtime::builder()
        .clock(clock)
        .seed(7)
        .breaker(10, 30_000)
        .build()
        .unwrap();
    let undone = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut run = runtime.run("fan-comp").unwrap();
    let u = Arc::clone(&undone);
    let report = run
        .fanout(
            "holds",
            1,
            vec![
                Step::new("hold-a", "seat.hold", ok(json!({"seat": "12A"})))
                    .target("air-a")
                    .side_effect(true)
                    .compensate(move |call: &Call| {
                        u.lock().unwrap().push(call.step.clone());
                        Outcome::Ok(Value::Null)
                    }),
                Step::new("hold-b", "seat.hold", |_: &Call| {
                    Outcome::Failed(r#"{"source":"http","status":400}"#.into())
                })
                .target("air-b"),
            ],
        )
        .unwrap();
    assert_eq!(report.outcome, "ok", "1 of 2 meets min_results 1");
    assert_eq!(report.result, Some(json!([{"seat": "12A"}, null])));
    // A later step exhausts its attempts: the branch's compensation runs.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let report = run
        .step(
            Step::new("pay", "payments.charge", move |_: &Call| {
                c.fetch_add(1, Ordering::SeqCst);
                Outcome::Failed(r#"{"source":"http","status":503}"#.into())
            })
            .call("tool"),
        )
        .unwrap();
    assert_eq!(report.outcome, "dead_lettered");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        5,
        "the default attempt budget"
    );
    assert_eq!(*undone.lock().unwrap(), vec!["hold-a".to_owned()]);
}

#[test]
fn a_cancelled_run_starts_no_branch_and_compensates() {
    let clock = Arc::new(VirtualClock::new(1_767_225_600_000));
    let runtime = Runtime::builder().clock(clock).seed(7).build().unwrap();
    let mut run = runtime.run("fan-cancel").unwrap();
    let undone = Arc::new(AtomicUsize::new(0));
    let u = Arc::clone(&undone);
    run.step(
        Step::new("book", "hotel.book", ok(Value::Null))
            .side_effect(true)
            .compensate(move |_: &Call| {
                u.fetch_add(1, Ordering::SeqCst);
                Outcome::Ok(Value::Null)
            }),
    )
    .unwrap();
    run.cancel_flag().store(true, Ordering::SeqCst);
    let called = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&called);
    let report = run
        .fanout(
            "quotes",
            1,
            vec![Step::new("q", "quote", move |_: &Call| {
                c.fetch_add(1, Ordering::SeqCst);
                Outcome::Ok(Value::Null)
            })],
        )
        .unwrap();
    assert_eq!(report.outcome, "cancelled");
    assert_eq!(
        called.load(Ordering::SeqCst),
        0,
        "no branch is called after cancel"
    );
    assert_eq!(
        undone.load(Ordering::SeqCst),
        1,
        "the completed step is compensated"
    );
}

#[test]
fn bad_fanouts_are_typed_errors_not_panics() {
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(0)))
        .build()
        .unwrap();
    let cases: Vec<(&str, u32, Vec<&str>)> = vec![
        ("f", 0, vec!["a"]),      // min_results 0
        ("f", 3, vec!["a", "b"]), // more than the branches
        ("f", 1, vec![]),         // no branch
        ("f", 1, vec!["a", "a"]), // a repeated branch id
        ("a", 1, vec!["a"]),      // a branch named like the fan-out
        ("", 1, vec!["a"]),       // no id
    ];
    for (id, k, ids) in cases {
        let mut run = runtime.run("bad").unwrap();
        let branches = ids
            .iter()
            .map(|b| Step::new(b, "t", ok(Value::Null)))
            .collect();
        match run.fanout(id, k, branches) {
            Err(RuntimeError::Policy(e)) => {
                assert_eq!(
                    e.kind(),
                    agent_recovery::ErrorKind::InvalidArgument,
                    "{id} {k} {ids:?}: {e}"
                )
            }
            other => panic!("{id} {k} {ids:?}: expected an invalid-argument error, got {other:?}"),
        }
    }
}

#[test]
fn a_step_id_is_used_once_per_run_by_steps_fanouts_and_branches() {
    // docs/runtime.md: `id` is unique in the run; the loop refuses a repeat
    // (it would otherwise reuse the first step's key and cache entry).
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(0)))
        .build()
        .unwrap();
    let mut run = runtime.run("ids").unwrap();
    assert_eq!(
        run.step(Step::new("s", "t", ok(Value::Null)))
            .unwrap()
            .outcome,
        "ok"
    );
    let again = run.step(Step::new("s", "u", ok(Value::Null)));
    assert!(
        matches!(&again, Err(RuntimeError::Policy(e)) if e.kind() == agent_recovery::ErrorKind::InvalidArgument && e.to_string().contains("already used")),
        "{again:?}"
    );
    let fan = run.fanout("f", 1, vec![Step::new("s", "t", ok(Value::Null))]);
    assert!(
        matches!(fan, Err(RuntimeError::Policy(_))),
        "a branch reusing a step's id: {fan:?}"
    );
    let fan = run
        .fanout("f", 1, vec![Step::new("b", "t", ok(Value::Null))])
        .unwrap();
    assert_eq!(fan.outcome, "ok", "the refused calls left the run usable");
    let fan = run.fanout("g", 1, vec![Step::new("b", "t", ok(Value::Null))]);
    assert!(
        matches!(fan, Err(RuntimeError::Policy(_))),
        "a branch id reused by a later fan-out: {fan:?}"
    );
}
