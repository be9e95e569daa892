//! Every accessor of [`View`] agrees with `serde_json::Value` on the same text.

use super::*;
use proptest::prelude::*;

/// Compare `view` with `value` through every accessor, recursively.
fn agree(view: &View<'_>, value: &Value, at: &str) {
    assert_eq!(view.kind(), crate::json_kind(value), "kind at {at}");
    assert_eq!(view.as_str(), value.as_str(), "as_str at {at}");
    assert_eq!(view.as_u64(), value.as_u64(), "as_u64 at {at}");
    assert_eq!(view.as_i64(), value.as_i64(), "as_i64 at {at}");
    assert_eq!(
        view.as_f64().map(f64::to_bits),
        value.as_f64().map(f64::to_bits),
        "as_f64 at {at}"
    );
    assert_eq!(view.as_bool(), value.as_bool(), "as_bool at {at}");
    assert_eq!(view.is_null(), value.is_null(), "is_null at {at}");
    assert_eq!(view.is_boolean(), value.is_boolean(), "is_boolean at {at}");
    assert_eq!(view.is_string(), value.is_string(), "is_string at {at}");
    assert_eq!(view.is_array(), value.is_array(), "is_array at {at}");
    assert_eq!(view.is_object(), value.is_object(), "is_object at {at}");
    assert_eq!(view.is_number(), value.is_number(), "is_number at {at}");
    assert_eq!(view.is_u64(), value.is_u64(), "is_u64 at {at}");
    assert_eq!(view.is_i64(), value.is_i64(), "is_i64 at {at}");
    assert_eq!(view.is_f64(), value.is_f64(), "is_f64 at {at}");
    assert_eq!(view.as_number(), value.as_number(), "as_number at {at}");
    assert_eq!(view.to_value(), *value, "to_value at {at}");
    match (view.as_array(), value.as_array()) {
        (Some(a), Some(b)) => {
            assert_eq!(a.len(), b.len(), "array length at {at}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                agree(x, y, &format!("{at}/{i}"));
            }
        }
        (a, b) => assert_eq!(a.is_some(), b.is_some(), "as_array at {at}"),
    }
    match (view.as_object(), value.as_object()) {
        (Some(o), Some(m)) => {
            for k in o.keys() {
                assert_eq!(
                    o.contains_key(k),
                    m.contains_key(k),
                    "contains {k:?} at {at}"
                );
                match (view.get(k), value.get(k)) {
                    (Some(x), Some(y)) => agree(x, y, &format!("{at}/{k}")),
                    (x, y) => panic!("get {k:?} at {at}: {x:?} vs {y:?}"),
                }
            }
            assert_eq!(view.get("absent-key"), None);
            assert_eq!(
                view.get("absent-key").is_some(),
                value.get("absent-key").is_some()
            );
            // Iteration order is the BTreeMap's: sorted, duplicates collapsed.
            let sorted: Vec<(&str, Value)> = o
                .sorted()
                .into_iter()
                .map(|(k, v)| (k.as_ref(), v.to_value()))
                .collect();
            let want: Vec<(&str, Value)> = m.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            assert_eq!(sorted, want, "sorted members at {at}");
        }
        (o, m) => assert_eq!(o.is_some(), m.is_some(), "as_object at {at}"),
    }
}

fn check_text(text: &str) {
    let value: Result<Value, _> = serde_json::from_str(text);
    let view = View::parse(text);
    match (&view, &value) {
        (Ok(view), Ok(value)) => {
            agree(view, value, "");
            for p in POINTERS {
                match (view.pointer(p), value.pointer(p)) {
                    (Some(x), Some(y)) => agree(x, y, p),
                    (x, y) => assert_eq!(x.is_some(), y.is_some(), "pointer {p:?}"),
                }
            }
            let owned = view.clone().into_owned();
            assert_eq!(owned.to_value(), *value);
            assert_eq!(View::from_value(value).to_value(), *value);
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "error for {text:?}"),
        (a, b) => panic!("{text:?}: view {a:?} vs value {b:?}"),
    }
}

const POINTERS: &[&str] = &[
    "", "/", "/a", "/a/b", "/0", "/00", "/+1", "/1", "/a/0", "/a~1b", "/m~0n", "a", "/a/b/c",
];

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        prop_oneof![
            Just("0"),
            Just("-0"),
            Just("429"),
            Just("429.0"),
            Just("4.29e2"),
            Just("-1"),
            Just("18446744073709551615"),
            Just("18446744073709551616"),
            Just("9223372036854775807"),
            Just("-9223372036854775808"),
            Just("-9223372036854775809"),
            Just("1e400"),
            Just("-1e400"),
            Just("1e-400"),
            Just("0.1"),
            Just("9007199254740993"),
            Just("9007199254740991.0"),
            Just("1E2"),
        ]
        .prop_map(str::to_owned),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        string(),
    ]
}

/// A JSON string literal, with and without escapes.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop_oneof![
            Just("a"),
            Just("b"),
            Just("a~1b"),
            Just("m~n"),
            Just("a/b"),
            Just("0"),
            Just("1"),
            Just("message"),
            Just("")
        ]
        .prop_map(|s| format!("{s:?}")),
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
        Just(r#""\u00e9\n\"x\\""#.to_owned()),
        Just(r#""\ud83d\ude00""#.to_owned()),
        Just(r#""a""#.replace('a', "\\u0061")),
    ]
}

fn json() -> impl Strategy<Value = String> {
    scalar().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(|xs| format!("[{}]", xs.join(","))),
            // Keys from a small set, so duplicates are common.
            prop::collection::vec((string(), inner), 0..6).prop_map(|ms| {
                let members: Vec<String> = ms.iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_accessor_agrees_with_value(text in json()) {
        check_text(&text);
    }

    #[test]
    fn invalid_text_fails_with_the_same_error(text in json(), cut in 0usize..64, junk in "[\\[\\]{},:\"0-9a-z\\\\ ]{0,4}") {
        let mut t = text;
        let at = cut.min(t.len());
        if t.is_char_boundary(at) {
            t.insert_str(at, &junk);
        }
        check_text(&t);
    }
}

#[test]
fn edges() {
    for t in [
        r#"{"a":1,"a":2}"#,
        r#"{"b":1,"a":{"x":1},"b":[1,{"a":2}],"a":3}"#,
        r#"{"$serde_json::private::RawValue":"[1,{\"a\":2}]"}"#,
        r#"{"$serde_json::private::RawValue":1}"#,
        r#"{"$serde_json::private::RawValue":"[1"}"#,
        r#"{"$serde_json::private::RawValue":"1","b":2}"#,
        r#"{"a":1,"$serde_json::private::RawValue":"1"}"#,
        "429.0",
        "1e400",
        "[]",
        "{}",
        "",
        " ",
        "[1,]",
        r#"{"a":1,}"#,
        "{\"a\":\"\u{1}\"}",
        r#""\ud800""#,
        "nul",
        "[1] x",
        &"[".repeat(200),
        &format!("{}{}", "[".repeat(127), "]".repeat(127)),
        &format!("{}{}", "[".repeat(128), "]".repeat(128)),
    ] {
        check_text(t);
    }
}

#[test]
fn unescaped_strings_borrow_and_the_last_duplicate_wins() {
    let v = View::parse(r#"{"k":"plain","e":"a\nb","k":"last"}"#).expect("json");
    assert!(matches!(
        v.get("k"),
        Some(View::String(Cow::Borrowed("last")))
    ));
    assert!(matches!(v.get("e"), Some(View::String(Cow::Owned(_)))));
    let mut o = v.as_object().cloned().expect("object");
    assert_eq!(o.remove("k"), Some(View::String(Cow::Borrowed("last"))));
    assert!(!o.contains_key("k"));
    assert_eq!(o.remove("k"), None);
}
