//! A call's failure that is not an observation the loop can use never stops
//! the run: the loop decides on an `agent_recovery.InvalidObservation`
//! exception that says why (docs/runtime.md, "Inputs").

use agent_recovery_policy::advance;
use serde_json::{Value, json};

/// The state of a run whose step `s` waits for its first call's `attempt`.
fn calling() -> String {
    let mut state = advance("", r#"{"input":"run","now_ms":0,"run_id":"r","seed":7}"#)
        .unwrap()
        .state;
    let step = r#"{"input":"step","now_ms":0,"step":{"id":"s","tool":"t","call":"tool"}}"#;
    let mut input = step.to_owned();
    loop {
        let out = advance(&state, &input).unwrap();
        state = out.state;
        let effects: Vec<Value> = serde_json::from_str(&out.effects).unwrap();
        let last = effects.last().unwrap();
        input = match last["effect"].as_str().unwrap() {
            "read" => {
                let values: serde_json::Map<String, Value> = last["keys"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| (k.as_str().unwrap().to_owned(), Value::Null))
                    .collect();
                json!({"input":"read","now_ms":0,"values":values}).to_string()
            }
            "claim" => r#"{"input":"claimed","now_ms":0,"ok":true}"#.to_owned(),
            "call" => return state,
            other => panic!("unexpected effect {other}"),
        };
    }
}

/// The observation of the `decide` effect that answers `result`.
fn decided_on(result: Value) -> Value {
    let input = json!({"input":"attempt","now_ms":0,"result":result}).to_string();
    let out = advance(&calling(), &input).unwrap_or_else(|e| panic!("{result}: {}", e.message));
    let effects: Vec<Value> = serde_json::from_str(&out.effects).unwrap();
    let decide = effects.last().unwrap();
    assert_eq!(decide["effect"], "decide", "{result}: {effects:?}");
    serde_json::from_str(decide["observation"].as_str().unwrap()).unwrap()
}

#[test]
fn an_unusable_observation_is_decided_on_as_an_invalid_observation() {
    let cases = [
        json!({"failed": null}),
        json!({"failed": 42}),
        json!({"failed": [1, 2]}),
        json!({"failed": {}}),
        json!({"failed": {"source": "carrier-pigeon"}}),
        json!({"failed": {"source": "http", "status": "503"}}),
        json!({"failed": {"source": "http", "status": null}}),
        json!({"response": null}),
        json!({"response": "ok"}),
        json!({"response": {"source": "http"}}),
    ];
    for result in cases {
        let obs = decided_on(result.clone());
        assert_eq!(obs["source"], "exception", "{result}: {obs}");
        assert_eq!(obs["type"], "agent_recovery.InvalidObservation", "{result}: {obs}");
        let message = obs["message"].as_str().unwrap();
        assert!(message.starts_with("the operation's observation is not one"), "{message}");
    }
}

#[test]
fn a_usable_observation_is_decided_on_unchanged() {
    let obs = json!({"source": "http", "status": 503});
    assert_eq!(decided_on(json!({"failed": obs})), obs);
    assert_eq!(decided_on(json!({"response": obs})), obs);
}
