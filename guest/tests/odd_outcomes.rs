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
        assert_eq!(
            obs["type"], "agent_recovery.InvalidObservation",
            "{result}: {obs}"
        );
        let message = obs["message"].as_str().unwrap();
        assert!(
            message.starts_with("the operation's observation is not one"),
            "{message}"
        );
    }
}

#[test]
fn a_usable_observation_is_decided_on_unchanged() {
    let obs = json!({"source": "http", "status": 503});
    assert_eq!(decided_on(json!({"failed": obs})), obs);
    assert_eq!(decided_on(json!({"response": obs})), obs);
}

#[test]
fn names_over_the_limit_are_refused_as_too_large() {
    use agent_recovery_policy::ErrorKind;
    use agent_recovery_policy::MAX_ID_BYTES;
    let long = "n".repeat(MAX_ID_BYTES + 1);
    let fits = "n".repeat(MAX_ID_BYTES);
    let run = |id: &str| {
        advance(
            "",
            &json!({"input":"run","now_ms":0,"run_id":id}).to_string(),
        )
    };
    assert!(run(&fits).is_ok());
    let e = run(&long).unwrap_err();
    assert_eq!(e.kind, ErrorKind::TooLarge);
    assert!(
        e.message.starts_with("`run_id` is 513 bytes"),
        "{}",
        e.message
    );
    let state = run("r").unwrap().state;
    for (member, step) in [
        ("step.id", json!({"id": long, "tool": "t"})),
        ("step.tool", json!({"id": "s", "tool": long})),
        (
            "step.target",
            json!({"id": "s", "tool": "t", "target": long}),
        ),
        (
            "step.fallbacks[]",
            json!({"id": "s", "tool": "t", "fallbacks": ["a", long]}),
        ),
    ] {
        let input = json!({"input":"step","now_ms":0,"step":step}).to_string();
        let e = advance(&state, &input).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooLarge, "{member}");
        assert!(
            e.message.starts_with(&format!("`{member}` is 513 bytes")),
            "{}",
            e.message
        );
        assert!(e.message.ends_with("put data in `args`"), "{}", e.message);
    }
    let fan = json!({"input":"fanout","now_ms":0,"fanout":{"id": long, "min_results": 1, "branches": [{"id":"b","tool":"t"}]}});
    let e = advance(&state, &fan.to_string()).unwrap_err();
    assert!(
        e.message.starts_with("`fanout.id` is 513 bytes"),
        "{}",
        e.message
    );
    // The state is untouched by a refused input: a next step starts.
    let ok = json!({"input":"step","now_ms":0,"step":{"id": fits, "tool": "t"}});
    assert!(advance(&state, &ok.to_string()).is_ok());
}
