//! Durability in the loop (docs/durability.md §1-3, docs/runtime.md "The
//! journal", "Recovery", "Replay"): every transition driven natively through
//! `advance`, with hand-written answers (decisions are written here, not asked
//! from a policy, so each test states exactly what the policy said).

use agent_recovery_policy::{ErrorKind, advance};
use serde_json::{Value, json};

const T0: u64 = 1_767_225_600_000;

/// One `advance`: the new state, the effects parsed, and the effects' text.
/// A breaker `swap` the batch ends with is answered at once (the store took
/// it), and the next batch's effects follow.
fn adv(state: &str, input: Value) -> (String, Vec<Value>, String) {
    let r = advance(state, &input.to_string())
        .unwrap_or_else(|e| panic!("{input}: {:?} {}", e.kind, e.message));
    let mut fx: Vec<Value> = serde_json::from_str(&r.effects).unwrap();
    if fx.last().is_some_and(|f| f["effect"] == "swap") {
        fx.pop();
        let now = input["now_ms"].clone();
        let (s, more, text) = adv(
            &r.state,
            json!({"input":"swapped","now_ms":now,"ok":true,"version":1}),
        );
        fx.extend(more);
        return (s, fx, text);
    }
    (r.state, fx, r.effects)
}

/// An effect in short: `emit:<event>`, `write:<kind>`, `delete:<kind>`,
/// `call:<call>:<step>:<attempt>`, `finish:<outcome>`, or its kind.
fn label(fx: &Value) -> String {
    let kind = fx["effect"].as_str().unwrap();
    let store_kind = |k: &Value| {
        k.as_str()
            .unwrap()
            .trim_start_matches("agent-recovery/")
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    match kind {
        "emit" => format!("emit:{}", fx["event"]["event"].as_str().unwrap()),
        "write" | "delete" => format!("{kind}:{}", store_kind(&fx["key"])),
        "call" => format!(
            "call:{}:{}:{}",
            fx["call"].as_str().unwrap(),
            fx["step"].as_str().unwrap(),
            fx["attempt"]
        ),
        "finish" => format!("finish:{}", fx["outcome"].as_str().unwrap()),
        other => other.to_owned(),
    }
}

fn labels(fx: &[Value]) -> Vec<String> {
    fx.iter().map(label).collect()
}

fn start(config: Value) -> String {
    adv(
        "",
        json!({"input":"run","now_ms":T0,"run_id":"r","seed":7,"config":config}),
    )
    .0
}

fn step(id: &str, compensable: bool) -> Value {
    json!({"id": id, "tool": format!("t.{id}"), "args": {"step": id},
           "side_effect": true, "compensation": compensable})
}

/// Start a step from an idle state up to its first call (nothing stored).
fn to_call(state: &str, step: Value) -> (String, Vec<Value>, String) {
    let (s, fx, _) = adv(state, json!({"input":"step","now_ms":T0,"step":step}));
    assert_eq!(labels(&fx), ["read"]);
    let (s, fx, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    assert_eq!(labels(&fx), ["claim"]);
    adv(&s, json!({"input":"claimed","now_ms":T0,"ok":true}))
}

fn ok(state: &str) -> (String, Vec<Value>, String) {
    adv(state, json!({"input":"attempt","now_ms":T0,"result":"ok"}))
}

fn failed(state: &str, now: u64) -> (String, Vec<Value>, String) {
    adv(
        state,
        json!({"input":"attempt","now_ms":now,"result":{"failed":{"source":"http","status":503}}}),
    )
}

fn decision(state: &str, now: u64, action: &str, class: &str) -> (String, Vec<Value>, String) {
    adv(
        state,
        json!({"input":"decision","now_ms":now,"decision":{"action":action,
               "envelope":{"code":"tool.http.503_unavailable","class":class}}}),
    )
}

fn recover(state: &str, now: u64) -> (String, Vec<Value>, String) {
    adv(state, json!({"input":"recover","now_ms":now}))
}

fn err(state: &str, input: Value) -> agent_recovery_policy::PolicyError {
    advance(state, &input.to_string()).expect_err(&input.to_string())
}

fn record(fx: &[Value]) -> &Value {
    &fx.iter().find(|f| f["effect"] == "append").unwrap()["record"]
}

fn state_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// Two compensable steps completed, then the third step's first call: the
/// journaled state (a worker killed there left it in the store).
fn killed_in_third_step(config: Value) -> (String, Vec<Value>) {
    let s = start(config);
    let (s, _, _) = to_call(&s, step("charge", true));
    let (s, _, _) = ok(&s);
    let (s, _, _) = to_call(&s, step("book", true));
    let (s, _, _) = ok(&s);
    let (s, fx, _) = to_call(&s, step("mail", false));
    (s, fx)
}

#[test]
fn the_journal_is_written_before_every_call_with_the_state_advance_returns() {
    let s = start(json!({}));
    let (s, fx, text) = to_call(&s, step("charge", true));
    assert_eq!(
        labels(&fx),
        ["write:attempts", "write:journal", "call:operation:charge:1"]
    );
    let j = &fx[1];
    assert_eq!(j["key"], "agent-recovery/journal/r");
    assert_eq!(j["ttl_ms"], Value::Null);
    assert_eq!(j["value"]["v"], 1);
    assert_eq!(j["value"]["run_id"], "r");
    assert_eq!(j["value"]["written_ms"], T0);
    // The same bytes as the state returned with this batch, phase `calling`.
    assert!(
        text.contains(&format!(r#""state":{s},"v":1,"written_ms":{T0}}}"#)),
        "{text}"
    );
    assert_eq!(state_of(&s)["phase"], "calling");
    // The call names the step's tool (how `recover` finds the operation).
    assert_eq!(fx[2]["tool"], "t.charge");
    // A success does not end the run: no delete.
    let (s, fx, _) = ok(&s);
    assert!(
        !labels(&fx).iter().any(|l| l.ends_with("journal")),
        "{fx:?}"
    );
    // A retry's call is journaled again, with the new state.
    let (s, _, _) = to_call(&s, step("book", true));
    let (s, _, _) = failed(&s, T0);
    let (s, fx, _) = decision(&s, T0, "retry", "transient");
    assert_eq!(labels(&fx).last().unwrap(), "call:operation:book:2");
    assert_eq!(labels(&fx)[labels(&fx).len() - 2], "write:journal");
    let _ = s;
}

#[test]
fn compensation_calls_are_journaled_and_the_run_end_deletes_the_entry() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("charge", true));
    let (s, _, _) = ok(&s);
    let (s, _, _) = to_call(&s, step("book", false));
    let (s, _, _) = failed(&s, T0);
    let (s, fx, text) = decision(&s, T0, "compensate", "permanent");
    let l = labels(&fx);
    assert_eq!(
        &l[l.len() - 3..],
        [
            "emit:compensate",
            "write:journal",
            "call:compensation:charge:1"
        ]
    );
    assert_eq!(fx.last().unwrap()["tool"], "t.charge");
    assert!(text.contains(&format!(r#""state":{s},"v":1"#)));
    let (_, fx, _) = ok(&s);
    // The record, then the step's key, then the journal entry goes, then finish.
    assert_eq!(
        labels(&fx),
        [
            "emit:attempt",
            "emit:ok",
            "emit:dead_letter",
            "append",
            "delete:idem",
            "emit:outcome",
            "delete:journal",
            "finish:dead_lettered"
        ]
    );
}

#[test]
fn a_run_ending_other_than_ok_deletes_its_journal_before_finish() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("charge", false));
    let (s, _, _) = failed(&s, T0);
    let (_, fx, _) = decision(&s, T0, "fail", "permanent");
    let l = labels(&fx);
    assert_eq!(
        &l[l.len() - 3..],
        ["emit:outcome", "delete:journal", "finish:failed"]
    );
}

#[test]
fn journal_false_writes_and_deletes_nothing() {
    let s = start(json!({"journal": false}));
    let (s, fx, _) = to_call(&s, step("charge", true));
    assert_eq!(labels(&fx), ["write:attempts", "call:operation:charge:1"]);
    let (s, _, _) = ok(&s);
    let (_, fx, _) = adv(&s, json!({"input":"end","now_ms":T0}));
    assert_eq!(labels(&fx), ["finish:completed"]);
}

#[test]
fn end_deletes_the_journal_and_finishes_the_run_completed() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("charge", true));
    let (s, _, _) = ok(&s);
    let (s, fx, _) = adv(&s, json!({"input":"end","now_ms":T0 + 5}));
    assert_eq!(
        fx,
        vec![
            json!({"effect":"delete","key":"agent-recovery/journal/r"}),
            json!({"effect":"finish","step":"","outcome":"completed","run_finished":true,
                   "result":null,"envelope":null,"rendered":null,"token":null}),
        ]
    );
    assert_eq!(state_of(&s)["phase"], "finished");
    assert_eq!(state_of(&s)["outcome"], "completed");
    // After it the run is over.
    let e = err(
        &s,
        json!({"input":"step","now_ms":T0,"step":step("x", false)}),
    );
    assert!(e.message.contains("the run is over"), "{}", e.message);
    let e = err(&s, json!({"input":"end","now_ms":T0}));
    assert!(e.message.contains("the run is over"), "{}", e.message);
}

#[test]
fn end_mid_step_is_refused_and_leaves_the_state_as_it_was() {
    let s = start(json!({}));
    let (reading, _, _) = adv(
        &s,
        json!({"input":"step","now_ms":T0,"step":step("charge", false)}),
    );
    let e = err(&reading, json!({"input":"end","now_ms":T0}));
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("phase \"reading\""), "{}", e.message);
    let (calling, _, _) = to_call(&s, step("charge", false));
    let e = err(&calling, json!({"input":"end","now_ms":T0}));
    assert!(e.message.contains("phase \"calling\""), "{}", e.message);
}

#[test]
fn recover_refuses_a_state_that_is_not_journaled() {
    let s = start(json!({}));
    let (reading, _, _) = adv(
        &s,
        json!({"input":"step","now_ms":T0,"step":step("charge", false)}),
    );
    let (done, _, _) = to_call(&s, step("charge", false));
    let (done, _, _) = ok(&done);
    let (ended, _, _) = adv(&done, json!({"input":"end","now_ms":T0}));
    for state in [&s, &reading, &done, &ended] {
        let e = err(state, json!({"input":"recover","now_ms":T0}));
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.contains("not a journaled state"), "{}", e.message);
    }
    // A branch's state is never journaled.
    let fan = json!({"input":"fanout","now_ms":T0,"fanout":{"id":"q","min_results":1,
                     "branches":[{"id":"a","tool":"quote"}]}});
    let (_, fx, _) = adv(&s, fan);
    let branch = fx.last().unwrap()["branches"][0]["state"]
        .as_str()
        .unwrap()
        .to_owned();
    let e = err(&branch, json!({"input":"recover","now_ms":T0}));
    assert!(e.message.contains("fan-out branch"), "{}", e.message);
    // No state at all.
    let e = err("", json!({"input":"recover","now_ms":T0}));
    assert!(e.message.contains("must be `run`"), "{}", e.message);
}

#[test]
fn recover_calls_the_same_target_with_the_same_key_and_attempt_then_rolls_back() {
    let (s, fx) =
        killed_in_third_step(json!({"dead_letter":{"owner":"ops","runbook":"https://rb/9"}}));
    let journaled_call = fx.last().unwrap().clone();
    let (s, fx, _) = recover(&s, T0 + 1000);
    assert_eq!(labels(&fx), ["emit:recover", "read"]);
    assert_eq!(fx[0]["event"]["step"], "mail");
    assert_eq!(fx[0]["event"]["target"], "t.mail");
    assert_eq!(fx[0]["event"]["t_ms"], 1000);
    let key = journaled_call["key"].as_str().unwrap();
    assert_eq!(fx[1]["keys"], json!([format!("agent-recovery/idem/{key}")]));
    assert_eq!(state_of(&s)["recovering"], true);
    // Our own in-flight mark: call again, identical to the journaled call.
    let (s, fx, text) = adv(
        &s,
        json!({"input":"read","now_ms":T0 + 1000,"values":{
            format!("agent-recovery/idem/{key}"): {"status":"in_flight","since_ms":T0}}}),
    );
    assert_eq!(labels(&fx), ["write:journal", "call:operation:mail:1"]);
    assert_eq!(fx[1], journaled_call);
    assert!(text.contains(&format!(r#""state":{s},"v":1"#)));
    // It succeeds now: the run cannot go on, so both completed steps are
    // undone in reverse order, then the record, outcome interrupted.
    let (s, fx, _) = ok(&s);
    let l = labels(&fx);
    assert_eq!(
        &l[..4],
        ["emit:attempt", "emit:ok", "write:idem", "emit:compensate"]
    );
    assert!(!l.contains(&"emit:outcome".to_owned()), "{l:?}");
    assert_eq!(&l[4..], ["write:journal", "call:compensation:book:1"]);
    let (s, fx, _) = ok(&s);
    assert_eq!(
        &labels(&fx)[2..],
        [
            "emit:compensate",
            "write:journal",
            "call:compensation:charge:1"
        ]
    );
    let (s, fx, _) = ok(&s);
    assert_eq!(
        labels(&fx),
        [
            "emit:attempt",
            "emit:ok",
            "emit:dead_letter",
            "append",
            "emit:outcome",
            "delete:journal",
            "finish:interrupted"
        ]
    );
    assert_eq!(fx[4]["event"]["state"], "interrupted");
    let r = record(&fx);
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["step_outcome"], "ok");
    assert_eq!(r["recovered"], true);
    assert_eq!(r["step_id"], "mail");
    assert_eq!(r["v"], 1);
    assert_eq!(r["owner"], "ops");
    assert_eq!(r["runbook"], "https://rb/9");
    assert_eq!(r["replay_of"], Value::Null);
    assert_eq!(
        r["input"],
        json!({"id":"mail","tool":"t.mail","call":null,"args":{"step":"mail"},"target":null,
               "fallbacks":[],"side_effect":true,"compensation":false,"checkpoint":false,
               "idempotent":null})
    );
    let comps: Vec<&str> = r["compensations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["step"].as_str().unwrap())
        .collect();
    assert_eq!(comps, ["book", "charge"]);
    // The step's cache entry stays `done` (it did run); only the journal went.
    assert!(!labels(&fx).contains(&"delete:idem".to_owned()));
    assert_eq!(state_of(&s)["outcome"], "interrupted");
    assert_eq!(state_of(&s)["phase"], "finished");
}

#[test]
fn recover_answers_from_the_cache_when_the_call_had_finished() {
    let (s, fx) = killed_in_third_step(json!({}));
    let key = fx.last().unwrap()["key"].as_str().unwrap().to_owned();
    let (s, _, _) = recover(&s, T0);
    let (s, fx, _) = adv(
        &s,
        json!({"input":"read","now_ms":T0,"values":{
            format!("agent-recovery/idem/{key}"):
                {"status":"done","result":{"sent":true},"target":"t.mail","at_ms":T0}}}),
    );
    let l = labels(&fx);
    assert_eq!(
        l,
        [
            "emit:cached",
            "emit:compensate",
            "write:journal",
            "call:compensation:book:1"
        ]
    );
    assert!(!l.iter().any(|l| l.starts_with("call:operation")));
    let (s, _, _) = ok(&s);
    let (_, fx, _) = ok(&s);
    let r = record(&fx);
    assert_eq!(
        (r["outcome"].as_str(), r["step_outcome"].as_str()),
        (Some("interrupted"), Some("ok"))
    );
}

#[test]
fn a_resumed_step_that_fails_rolls_back_and_deletes_its_key() {
    let (s, _) = killed_in_third_step(json!({}));
    let (s, _, _) = recover(&s, T0);
    let (s, _, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    let (s, _, _) = failed(&s, T0);
    let (s, fx, _) = decision(&s, T0, "fail", "permanent");
    let l = labels(&fx);
    assert_eq!(
        l,
        [
            "emit:decision",
            "delete:idem",
            "emit:compensate",
            "write:journal",
            "call:compensation:book:1"
        ]
    );
    let (s, _, _) = ok(&s);
    let (_, fx, _) = ok(&s);
    let r = record(&fx);
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["step_outcome"], "failed");
    assert_eq!(r["last_envelope"]["code"], "tool.http.503_unavailable");
    assert_eq!(r["attempts"], 1);
    // The key's delete happened once, when the step ended.
    assert!(!labels(&fx).contains(&"delete:idem".to_owned()));
    assert_eq!(
        fx.last().unwrap()["envelope"]["code"],
        "tool.http.503_unavailable"
    );
}

#[test]
fn a_resumed_step_that_is_dead_lettered_is_recorded_as_usual_with_recovered() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("only", false));
    let (s, _, _) = recover(&s, T0);
    let (s, _, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    let (s, _, _) = failed(&s, T0);
    let (_, fx, _) = decision(&s, T0, "dead_letter", "transient");
    let r = record(&fx);
    assert_eq!(r["outcome"], "dead_lettered");
    assert_eq!(r["recovered"], true);
    assert_eq!(r["step_outcome"], Value::Null);
    let l = labels(&fx);
    assert_eq!(
        &l[l.len() - 2..],
        ["delete:journal", "finish:dead_lettered"]
    );
}

#[test]
fn a_resumed_step_can_retry_under_the_ordinary_rules() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("only", true));
    let (s, _, _) = recover(&s, T0);
    let (s, _, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    let (s, _, _) = failed(&s, T0);
    let (s, fx, _) = adv(
        &s,
        json!({"input":"decision","now_ms":T0,"decision":{"action":"retry","delay_ms":53,
               "envelope":{"code":"tool.http.503_unavailable","class":"transient"}}}),
    );
    assert_eq!(labels(&fx).last().unwrap(), "sleep");
    let (s, fx, _) = adv(&s, json!({"input":"slept","now_ms":T0 + 53}));
    // After the sleep the loop reads the target's breaker again.
    assert_eq!(labels(&fx), ["read"]);
    let (s, fx, _) = adv(&s, json!({"input":"read","now_ms":T0 + 53,"values":{}}));
    // The second call counts as attempt 2 and is journaled like any call.
    assert_eq!(
        labels(&fx),
        ["write:attempts", "write:journal", "call:operation:only:2"]
    );
    let (s, _, _) = ok(&s);
    let (_, fx, _) = ok(&s); // its own compensation
    let r = record(&fx);
    assert_eq!(
        (r["outcome"].as_str(), r["step_outcome"].as_str()),
        (Some("interrupted"), Some("ok"))
    );
    assert_eq!(r["compensations"][0]["step"], "only");
}

#[test]
fn recover_in_a_compensation_calls_it_again_then_goes_on_in_reverse_order() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("charge", true));
    let (s, _, _) = ok(&s);
    let (s, _, _) = to_call(&s, step("book", true));
    let (s, _, _) = ok(&s);
    let (s, _, _) = to_call(&s, step("mail", false));
    let (s, _, _) = failed(&s, T0);
    let (s, fx, _) = decision(&s, T0, "compensate", "permanent");
    let journaled = fx.last().unwrap().clone();
    assert_eq!(label(&journaled), "call:compensation:book:1");
    // Killed during book's compensation; a new worker recovers.
    let (s, fx, _) = recover(&s, T0 + 7);
    assert_eq!(
        labels(&fx),
        ["emit:recover", "write:journal", "call:compensation:book:1"]
    );
    assert_eq!(fx[0]["event"]["step"], "mail");
    assert_eq!(fx[2], journaled);
    let (s, fx, _) = ok(&s);
    assert_eq!(labels(&fx).last().unwrap(), "call:compensation:charge:1");
    let (_, fx, _) = ok(&s);
    let r = record(&fx);
    assert_eq!(r["outcome"], "dead_lettered");
    assert_eq!(r["recovered"], true);
    assert_eq!(r["compensations"].as_array().unwrap().len(), 2);
    assert_eq!(label(fx.last().unwrap()), "finish:dead_lettered");
}

#[test]
fn recover_while_joining_rolls_back_the_completed_steps() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("charge", true));
    let (s, _, _) = ok(&s);
    let fan = json!({"input":"fanout","now_ms":T0,"fanout":{"id":"quotes","min_results":1,
                     "branches":[{"id":"a","tool":"quote","side_effect":true,"compensation":true}]}});
    let (s, fx, text) = adv(&s, fan);
    assert_eq!(labels(&fx), ["emit:fanout", "write:journal", "fork"]);
    assert!(text.contains(&format!(r#""state":{s},"v":1"#)));
    assert_eq!(state_of(&s)["phase"], "joining");
    // The branch journals its own state before its call.
    let branch = fx[2]["branches"][0]["state"].as_str().unwrap().to_owned();
    let (_, bfx, _) = to_call(&branch, json!({"id":"a","tool":"quote"}));
    assert_eq!(
        labels(&bfx),
        ["write:attempts", "write:branch", "call:operation:a:1"]
    );
    // Recovery reads the branch's entry; none here (the branch never reached
    // its call), so only charge is rolled back.
    let (s, fx, _) = recover(&s, T0);
    assert_eq!(labels(&fx), ["emit:recover", "read"]);
    assert_eq!(fx[0]["event"]["step"], "quotes");
    let (s, fx, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    assert_eq!(
        labels(&fx),
        [
            "emit:compensate",
            "write:journal",
            "call:compensation:charge:1"
        ]
    );
    let (_, fx, _) = ok(&s);
    let r = record(&fx);
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["step_id"], "quotes");
    assert_eq!(r["step_outcome"], Value::Null);
    assert_eq!(r["recovered"], true);
    assert_eq!(label(fx.last().unwrap()), "finish:interrupted");
}

#[test]
fn a_cancel_during_recovery_still_ends_in_the_dead_letter_queue() {
    let (s, _) = killed_in_third_step(json!({}));
    let (s, _, _) = recover(&s, T0);
    let (s, _, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    let (s, fx, _) = adv(&s, json!({"input":"cancel","now_ms":T0}));
    assert_eq!(labels(&fx)[0], "emit:cancelled");
    let (s, _, _) = ok(&s);
    let (_, fx, _) = ok(&s);
    let r = record(&fx);
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["step_outcome"], "cancelled");
}

#[test]
fn a_recovered_run_past_its_deadline_does_not_call_again() {
    let s = start(json!({"deadline_ms": 1000}));
    let (s, _, _) = to_call(&s, step("only", false));
    let (s, _, _) = recover(&s, T0 + 5000);
    let (_, fx, _) = adv(&s, json!({"input":"read","now_ms":T0 + 5000,"values":{}}));
    let l = labels(&fx);
    assert!(!l.iter().any(|l| l.starts_with("call")), "{l:?}");
    assert_eq!(record(&fx)["outcome"], "dead_lettered");
    assert_eq!(record(&fx)["last_envelope"]["code"], "tool.timeout.total");
}

#[test]
fn every_record_has_the_new_fields() {
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("only", false));
    let (s, _, _) = failed(&s, T0);
    let (_, fx, _) = decision(&s, T0, "dead_letter", "transient");
    let r = record(&fx);
    for (field, want) in [
        ("v", json!(1)),
        ("owner", Value::Null),
        ("runbook", Value::Null),
        ("step_outcome", Value::Null),
        ("recovered", json!(false)),
        ("replay_of", Value::Null),
        ("outcome", json!("dead_lettered")),
    ] {
        assert_eq!(r[field], want, "{field}");
    }
    assert_eq!(r["input"]["id"], "only");
    assert_eq!(r["input"]["args"], json!({"step":"only"}));
    // A cancellation between steps whose compensation fails: no step, input null.
    let s = start(json!({}));
    let (s, _, _) = to_call(&s, step("charge", true));
    let (s, _, _) = ok(&s);
    let (s, fx, _) = adv(&s, json!({"input":"cancel","now_ms":T0}));
    assert_eq!(labels(&fx).last().unwrap(), "call:compensation:charge:1");
    let (s, _, _) = failed(&s, T0);
    let (_, fx, _) = decision(&s, T0, "fail", "permanent");
    let r = record(&fx);
    assert_eq!(r["outcome"], "cancelled");
    assert_eq!(r["input"], Value::Null);
    assert_eq!(r["recovered"], false);
}

#[test]
fn replay_of_derives_the_key_and_is_recorded() {
    // `printf '%s' '["agent-recovery/replay","<K>",1]' | sha256sum`, K = sha256("x").
    let original = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
    let want = "3f4d885aed61cff19379692c8cd6ed3a54cd99f97b6f43b3e59ce05353aea38e";
    let s = adv(
        "",
        json!({"input":"run","now_ms":T0,"run_id":"r/replay/1","seed":7}),
    )
    .0;
    let mut st = step("charge", false);
    st["replay_of"] = json!({"key": original, "n": 1, "id": "12"});
    let (s, fx, _) = to_call(&s, st);
    assert_eq!(fx.last().unwrap()["key"], want);
    let (s, _, _) = failed(&s, T0);
    let (_, fx, _) = decision(&s, T0, "dead_letter", "transient");
    let r = record(&fx);
    assert_eq!(r["key"], want);
    assert_eq!(r["replay_of"], json!({"id": "12", "n": 1}));
    assert!(r["input"].get("replay_of").is_none(), "{}", r["input"]);
    assert_eq!(r["run_id"], "r/replay/1");
}

#[test]
fn a_bad_replay_of_is_refused_with_a_hint() {
    let s = start(json!({}));
    let k = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
    for (replay_of, needle) in [
        (json!({"key": "abc", "n": 1, "id": "1"}), "64 lowercase hex"),
        (
            json!({"key": k.to_uppercase(), "n": 1, "id": "1"}),
            "64 lowercase hex",
        ),
        (
            json!({"key": format!("{k}0"), "n": 1, "id": "1"}),
            "64 lowercase hex",
        ),
        (json!({"key": k, "n": 0, "id": "1"}), "count from 1"),
        (
            json!({"key": k, "n": 9_007_199_254_740_992_u64, "id": "1"}),
            "count from 1",
        ),
        (json!({"key": k, "n": -1, "id": "1"}), "invalid value"),
        (json!({"key": k, "n": 1, "id": ""}), "record's id"),
        (json!({"key": k, "n": 1}), "missing field `id`"),
        (
            json!({"key": k, "n": 1, "id": "1", "why": 1}),
            "unknown field `why`",
        ),
        (json!("12"), "invalid type"),
    ] {
        let mut st = step("charge", false);
        st["replay_of"] = replay_of.clone();
        let e = err(&s, json!({"input":"step","now_ms":T0,"step":st}));
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{replay_of}");
        assert!(e.message.contains(needle), "{replay_of}: {}", e.message);
    }
    let fan = json!({"input":"fanout","now_ms":T0,"fanout":{"id":"q","min_results":1,
        "branches":[{"id":"a","tool":"quote","replay_of":{"key":k,"n":1,"id":"1"}}]}});
    let e = err(&s, fan);
    assert!(e.message.contains("replay_of"), "{}", e.message);
}

#[test]
fn a_bad_dead_letter_configuration_is_an_invalid_config_error() {
    for config in [
        json!({"dead_letter":{"depth_threshold":0}}),
        json!({"dead_letter":{"owner":1}}),
        json!({"dead_letter":{"alert":true}}),
        json!({"journal":1}),
    ] {
        let e = err(
            "",
            json!({"input":"run","now_ms":T0,"run_id":"r","config":config}),
        );
        assert_eq!(e.kind, ErrorKind::InvalidConfig, "{config}");
        assert!(e.message.contains("see docs/runtime.md"), "{}", e.message);
    }
}

#[test]
fn a_recovery_killed_during_its_rollback_is_recovered_again() {
    let (s, _) = killed_in_third_step(json!({}));
    let (s, _, _) = recover(&s, T0);
    let (s, _, _) = adv(&s, json!({"input":"read","now_ms":T0,"values":{}}));
    // The resumed step succeeds; the rollback starts with book's compensation,
    // and the recovering worker dies there too: its journal holds this state.
    let (s, fx, _) = ok(&s);
    let journaled = fx.last().unwrap().clone();
    assert_eq!(label(&journaled), "call:compensation:book:1");
    let (s, fx, _) = recover(&s, T0 + 10);
    assert_eq!(
        labels(&fx),
        ["emit:recover", "write:journal", "call:compensation:book:1"]
    );
    assert_eq!(fx[2], journaled);
    let (s, _, _) = ok(&s);
    let (_, fx, _) = ok(&s);
    let r = record(&fx);
    // The outcome the resumed step reached survives the second recovery.
    assert_eq!(r["outcome"], "interrupted");
    assert_eq!(r["step_outcome"], "ok");
    assert_eq!(r["recovered"], true);
    let comps: Vec<&str> = r["compensations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["step"].as_str().unwrap())
        .collect();
    assert_eq!(comps, ["book", "charge"]);
}
