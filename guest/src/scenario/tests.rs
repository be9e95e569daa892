use super::{Outcome, PlanStep, parse};

const HINT: &str = "see docs/runtime.md, \"Scenarios\", for the format";

#[test]
fn texts_are_kept_as_written() {
    let p = parse(r#"{"run_id":"r","now_ms":0,"config":{ "a" : 1.0 },"steps":[{"id":"s","tool":"t","args":[1, 2.50],"outcomes":[ {"b":2, "a":1} ]}]}"#).unwrap();
    assert_eq!(p.config, r#"{ "a" : 1.0 }"#);
    let PlanStep::Step(s) = &p.steps[0] else {
        panic!("{p:?}")
    };
    assert_eq!(s.args.as_deref(), Some("[1, 2.50]"));
    assert_eq!(
        s.outcomes,
        [Outcome::Observation(r#"{"b":2, "a":1}"#.into())]
    );
}

#[test]
fn the_first_unknown_member_as_written_is_named() {
    let e = parse(r#"{"zz":1,"aa":2,"run_id":"r","now_ms":0,"steps":[]}"#).unwrap_err();
    assert!(
        e.starts_with("scenario: unknown field `zz`, expected one of `run_id`"),
        "{e}"
    );
    assert!(e.ends_with(HINT), "{e}");
}

#[test]
fn structure_is_checked_before_the_rules() {
    // `steps` is empty (a rule) and a member is unknown (structure): structure first.
    let e = parse(r#"{"run_id":"","now_ms":0,"steps":[],"x":1}"#).unwrap_err();
    assert!(e.contains("unknown field `x`"), "{e}");
}

#[test]
fn a_long_value_is_cut_in_the_message() {
    let long = "x".repeat(200);
    let e = parse(&format!(
        r#"{{"run_id":"{long}é","now_ms":"{long}","steps":[]}}"#
    ))
    .unwrap_err();
    let got = e.split("got ").nth(1).unwrap().split(';').next().unwrap();
    assert_eq!(got.chars().count(), 80, "{e}");
}

#[test]
fn hostile_input_is_an_error_never_a_panic() {
    for text in [
        "",
        "null",
        "\"s\"",
        "{",
        "[[[[",
        "{\"steps\":[null]}",
        "{\"now_ms\":0,\"steps\":[{\"id\":\"a\",\"fanout\":7}]}",
    ] {
        assert!(parse(text).is_err(), "{text}");
    }
}
