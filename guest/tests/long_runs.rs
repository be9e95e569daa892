//! A long run costs the same per step as a short one: the state the host
//! stores and hands back does not grow with the number of completed steps.

use agent_recovery_policy::advance;
use serde_json::{Value, json};

/// Drives `n` steps that succeed at once (ids `s000000`.. of one length);
/// returns the final state and the largest state text of the last step.
fn run_steps(n: usize) -> (String, usize) {
    let mut state = advance("", r#"{"input":"run","now_ms":0,"run_id":"r","seed":7}"#)
        .unwrap()
        .state;
    let mut largest = 0;
    for i in 0..n {
        largest = 0;
        let mut input = step_input(&format!("s{i:06}"));
        loop {
            let out = advance(&state, &input.to_string()).unwrap();
            state = out.state;
            largest = largest.max(state.len());
            let effects: Vec<Value> = serde_json::from_str(&out.effects).unwrap();
            let last = effects.last().expect("a batch ends with an effect");
            input = match last["effect"].as_str().unwrap() {
                "read" => {
                    let values: serde_json::Map<String, Value> = last["keys"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|k| (k.as_str().unwrap().to_owned(), Value::Null))
                        .collect();
                    json!({"input":"read","now_ms":0,"values":values})
                }
                "claim" => json!({"input":"claimed","now_ms":0,"ok":true}),
                "call" => json!({"input":"attempt","now_ms":0,"result":"ok"}),
                "finish" => break,
                other => panic!("unexpected effect {other}"),
            };
        }
    }
    (state, largest)
}

fn step_input(id: &str) -> Value {
    json!({"input":"step","now_ms":0,"step":{"id":id,"tool":"t"}})
}

#[test]
fn the_state_does_not_grow_with_the_steps_of_a_run() {
    // Past the window of remembered ids (64), every step leaves the same state.
    let (_, short) = run_steps(100);
    let (_, long) = run_steps(5_000);
    assert_eq!(short, long, "state bytes after 100 steps vs after 5,000");
    assert!(long < 4_096, "the state of a long run is {long} bytes");
}

#[test]
fn a_recent_step_id_is_refused_and_the_run_goes_on() {
    let (state, _) = run_steps(3);
    let again = advance(&state, &step_input("s000002").to_string()).unwrap_err();
    assert!(again.message.contains("already used"), "{}", again.message);
    assert!(advance(&state, &step_input("s000003").to_string()).is_ok());
}
