//! The borrowed fast path (`classify_json` / `decide_json` read the text into
//! views, never a `Value`) answers exactly as the `Value` path (the text parsed
//! into a `serde_json::Value`, then `Observation::from_json`, `classify` and
//! `decide`), on every observation of `tests/vectors/` written four ways:
//! as is, with every object's members in reverse order, with a decoy member
//! repeated before the real one in every object (the last duplicate wins), and
//! with every string escaped. A `Value` is a `BTreeMap`: member order and
//! earlier duplicates never show, so none may show on the fast path either.

use agent_recovery_policy::__private::json_out;
use agent_recovery_policy::{Context, Observation, classify, classify_json, decide, decide_json};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// `(observation, context)` of every vector case.
fn cases() -> Vec<(Value, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("tests/vectors")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = fs::read_to_string(&f).expect("a vector file");
        let cases: Value = serde_json::from_str(&text).expect("vector JSON");
        for c in cases.as_array().into_iter().flatten() {
            let Some(obs) = c.get("observation") else {
                continue;
            };
            // Seeded, so that both paths draw the same jitter.
            let ctx = match c.get("context") {
                None | Some(Value::Null) => r#"{"seed":7}"#.to_owned(),
                Some(Value::Object(m)) if !m.contains_key("seed") => {
                    let mut m = m.clone();
                    m.insert("seed".into(), 7.into());
                    Value::Object(m).to_string()
                }
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            out.push((obs.clone(), ctx));
        }
    }
    assert!(out.len() > 300, "only {} vector cases", out.len());
    out
}

#[derive(Clone, Copy)]
enum Way {
    AsIs,
    Reversed,
    Decoys,
    Escaped,
}

/// `v` as JSON text, written `way`.
fn write(v: &Value, way: Way) -> String {
    match v {
        Value::String(s) if matches!(way, Way::Escaped) => {
            let mut out = String::from("\"");
            for unit in s.encode_utf16() {
                out.push_str(&format!("\\u{unit:04x}"));
            }
            out.push('"');
            out
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|x| write(x, way)).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => {
            let key = |k: &str| write(&Value::String(k.to_owned()), way);
            let mut parts: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{}:{}", key(k), write(x, way)))
                .collect();
            match way {
                Way::Reversed => parts.reverse(),
                Way::Decoys => {
                    let decoys: Vec<String> = m
                        .keys()
                        .map(|k| format!(r#"{}:{{"decoy":[1,"x"]}}"#, key(k)))
                        .collect();
                    parts = decoys.into_iter().chain(parts).collect();
                }
                Way::AsIs | Way::Escaped => {}
            }
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

fn answer(r: Result<String, agent_recovery_policy::PolicyError>) -> String {
    r.unwrap_or_else(|e| format!("error {e}"))
}

/// The fast path's envelope and decision for `text` equal the `Value` path's.
fn check(text: &str, ctx: &str) {
    let owned = serde_json::from_str::<Value>(text)
        .map_err(|e| e.to_string())
        .map(Observation::from_json);
    let Ok(owned) = owned else {
        // Not JSON: both paths give serde_json's error for the same text.
        assert_eq!(
            answer(classify_json(text)),
            answer(Observation::from_json_str(text).map(|_| String::new())),
        );
        return;
    };
    let want_envelope = answer(
        owned
            .clone()
            .and_then(|o| classify(&o))
            .and_then(|e| json_out::envelope(&e)),
    );
    let want_decision =
        answer(owned.and_then(|o| json_out::decision(&decide(o, Context::from_json_str(ctx)?)?)));
    assert_eq!(answer(classify_json(text)), want_envelope, "{text}");
    assert_eq!(
        answer(decide_json(text, ctx)),
        want_decision,
        "{text} {ctx}"
    );
}

#[test]
fn the_fast_path_answers_as_the_value_path() {
    let mut checked = 0;
    for (obs, ctx) in cases() {
        for way in [Way::AsIs, Way::Reversed, Way::Decoys, Way::Escaped] {
            let text = write(&obs, way);
            let value: Value = serde_json::from_str(&text).expect("written JSON parses");
            assert_eq!(value, obs, "{text}");
            check(&text, &ctx);
            checked += 1;
        }
    }
    assert!(checked > 1200);
}

/// Where order shows: headers whose names differ only in case (the first in
/// sorted order wins), members copied into the output (`allowed_values`,
/// `suggested_value`: sorted, duplicates collapsed), a problem+json `errors`
/// map (its names joined in sorted order), and duplicates everywhere.
#[test]
fn order_and_duplicates_where_they_show() {
    let ctx = r#"{"seed":7}"#;
    for text in [
        r#"{"status":429,"headers":{"retry-after":"2","Retry-After":"9"}}"#,
        r#"{"status":429,"headers":{"Retry-After":"9","retry-after":"2"}}"#,
        r#"{"status":429,"headers":{"retry-after":"2","retry-after":"5"}}"#,
        r#"{"status":429,"headers":{" Retry-After ":"7","RETRY-AFTER":"3","retry-after":"1"}}"#,
        r#"{"status":429,"headers":[["Retry-After","9"],["retry-after","2"]]}"#,
        r#"{"status":429,"headers":{"x-should-retry":"false","X-Should-Retry":"true"}}"#,
        r#"{"status":400,"body":{"error":{"code":"tool.http.400_bad_request","retryable":false,"allowed_values":{"z":1,"a":[{"y":1,"b":2,"y":3}],"a":0},"suggested_value":{"k":"v","c":{"q":1,"p":2}}}}}"#,
        r#"{"status":422,"headers":{"content-type":"application/problem+json"},"body":{"title":"t","status":422,"errors":{"zeta":["x"],"alpha":["y"],"zeta":["z"]," alpha":[]}}}"#,
        r#"{"source":"mcp","message":{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"b":{"type":"x"},"a":{"type":"y"},"b":{"type":"z"}}}}}"#,
        r#"{"source":"http","source":"network","code":"ECONNRESET"}"#,
        r#"{"status":500,"status":429,"body":"{\"error\":\"rate_limit\",\"retry_after\":1,\"retry_after\":3}"}"#,
        r#"{"source":"mcp","message":"{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32602,\"message\":\"a\",\"message\":\"b\"}}"}"#,
        r#"{"status":429,"headers":{"retry-after":"2"},"context":{"attempt":2,"attempt":3}}"#,
        r#"{"status":429,"headers":[["a"]]}"#,
        r#"{"status":429,"headers":{"a":{"b":1}}}"#,
        r#"{"$serde_json::private::RawValue":"{\"status\":503}"}"#,
        r#"{"status":503,"body":"  {\"error\":{\"type\":\"overloaded_error\",\"message\":\"\u00e9\"}}"}"#,
        r#"{"status":503"#,
        "",
    ] {
        check(text, ctx);
    }
}

/// What the `Value` path always gave (a `BTreeMap` sorts `Retry-After` before
/// `retry-after`, and keeps the last of a repeated member), pinned.
#[test]
fn pinned_answers_of_the_btreemap_order() {
    for (text, want) in [
        (
            r#"{"status":429,"headers":{"retry-after":"2","Retry-After":"9"}}"#,
            r#""retry_after_ms":9000"#,
        ),
        (
            r#"{"status":429,"headers":{"Retry-After":"9","retry-after":"2"}}"#,
            r#""retry_after_ms":9000"#,
        ),
        (
            r#"{"status":429,"headers":{"retry-after":"2","retry-after":"5"}}"#,
            r#""retry_after_ms":5000"#,
        ),
        (
            r#"{"status":429,"headers":[["retry-after","2"],["Retry-After","9"]]}"#,
            r#""retry_after_ms":2000"#,
        ),
        (
            r#"{"status":400,"body":{"error":{"code":"tool.http.400_bad_request","retryable":false,"allowed_values":{"z":1,"a":[{"y":1,"b":2,"y":3}],"a":0}}}}"#,
            r#""allowed_values":{"a":0,"z":1}"#,
        ),
        (
            r#"{"status":422,"headers":{"content-type":"application/problem+json"},"body":{"title":"t","status":422,"errors":{"zeta":["x"],"alpha":["y"],"zeta":["z"]}}}"#,
            r#""field":"alpha,zeta""#,
        ),
    ] {
        let got = classify_json(text).expect("an envelope");
        assert!(got.contains(want), "{text}\n want {want}\n got {got}");
    }
}
