//! Names over the loop's limit (docs/runtime.md, "Limits") are refused by
//! the runtime before the component sees them, naming the member; odd
//! observations never stop a run (the loop decides on an InvalidObservation).

use std::sync::Arc;

use agent_recovery::runtime::{
    Call, MAX_ID_BYTES, Outcome, Runtime, RuntimeError, Step, VirtualClock,
};
use agent_recovery::{ErrorKind, PolicyErrorKind};
use serde_json::{Value, json};

fn ok(v: Value) -> impl FnMut(&Call) -> Outcome + Send {
    move |_| Outcome::Ok(v.clone())
}

fn runtime() -> Runtime {
    Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .seed(7)
        .build()
        .unwrap()
}

#[test]
fn the_host_limit_is_the_components() {
    assert_eq!(MAX_ID_BYTES, agent_recovery_policy::MAX_ID_BYTES);
}

fn too_large(r: Result<impl std::fmt::Debug, RuntimeError>, member: &str) {
    match r {
        Err(RuntimeError::Policy(e)) => {
            assert_eq!(
                e.kind(),
                ErrorKind::Policy(PolicyErrorKind::TooLarge),
                "{e}"
            );
            let text = e.to_string();
            assert!(text.contains(&format!("`{member}` is ")), "{text}");
            assert!(text.ends_with("put data in `args`"), "{text}");
        }
        other => panic!("{member}: expected too-large, got {other:?}"),
    }
}

#[test]
fn names_over_the_limit_are_refused_naming_the_member() {
    let rt = runtime();
    let long = "n".repeat(MAX_ID_BYTES + 1);
    too_large(rt.run(&long).map(|_| ()), "run_id");
    too_large(rt.run(&"r".repeat(10_000_000)).map(|_| ()), "run_id");
    let mut run = rt.run("r").unwrap();
    too_large(run.step(Step::new(&long, "t", ok(Value::Null))), "step.id");
    too_large(
        run.step(Step::new("s", &long, ok(Value::Null))),
        "step.tool",
    );
    too_large(
        run.step(Step::new("s", "t", ok(Value::Null)).target(&long)),
        "step.target",
    );
    too_large(
        run.fanout(&long, 1, vec![Step::new("b", "t", ok(Value::Null))]),
        "fanout.id",
    );
    // The run goes on, and names at the limit run.
    let name = "n".repeat(MAX_ID_BYTES);
    let report = run.step(Step::new(&name, &name, ok(json!(1)))).unwrap();
    assert_eq!(report.outcome, "ok");
    assert_eq!(report.result, Some(json!(1)));
}

#[test]
fn an_unusable_observation_is_decided_on_and_the_run_goes_on() {
    let rt = runtime();
    for (id, obs) in [("null", "null"), ("number", "42"), ("empty", "{}")] {
        let mut run = rt.run(&format!("odd-{id}")).unwrap();
        let report = run
            .step(Step::new(id, "t", move |_| Outcome::Failed(obs.into())).call("tool"))
            .unwrap();
        assert_eq!(report.outcome, "failed", "{id}");
        let env = report.envelope.unwrap();
        assert_eq!(
            env["upstream"]["type"], "agent_recovery.InvalidObservation",
            "{id}: {env}"
        );
        // A failed step ends the run; a next step reports that end.
        assert!(report.run_finished);
        let next = run.step(Step::new("next", "t", ok(json!(1)))).unwrap();
        assert!(next.run_finished, "{id}");
    }
}
