//! The decision log (docs/decision-logs.md) through the real component and
//! the real Runtime: the shared vector `tests/vectors/decision_log/lines.json`
//! byte for byte, the file sink (append, rotation), the door, the size bound
//! and the configuration checks.

use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_recovery::runtime::{
    Call, DecisionLog, Outcome, ROTATE_BYTES, Runtime, Step, VirtualClock,
};
use agent_recovery::{Policy, PolicyId};
use serde_json::{Value, json};

fn vector() -> Value {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors/decision_log/lines.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the vector exists"))
        .expect("the vector is JSON")
}

/// The reference's `{"name","version","digest"}`, as the lines carry it.
fn reference_identity() -> Value {
    let id = PolicyId::of(&Policy::reference().expect("the reference loads")).unwrap();
    json!({"name": id.name, "version": id.version, "digest": format!("sha256:{}", id.sha256)})
}

/// The vector's expected line with `$REFERENCE` (the policy's digest, which
/// changes with every build of the reference) filled in.
fn expected_line(line: &Value, digest: &str) -> String {
    line.as_str()
        .expect("a line is a string")
        .replace("$REFERENCE", digest)
}

/// A step whose operation answers from `outcomes` in order (`"ok"` or an observation).
fn scripted(spec: &Value) -> Step<'static> {
    let outcomes: Vec<Value> = spec["outcomes"].as_array().cloned().unwrap_or_default();
    let mut step = Step::new(
        spec["id"].as_str().unwrap(),
        spec["tool"].as_str().unwrap(),
        move |call: &Call| match outcomes.get(call.attempt as usize - 1) {
            Some(Value::String(ok)) if ok == "ok" => Outcome::Ok(Value::Null),
            Some(obs) => Outcome::Failed(obs.to_string()),
            None => Outcome::Failed(r#"{"source":"http","status":500}"#.into()),
        },
    );
    if let Some(call) = spec["call"].as_str() {
        step = step.call(call);
    }
    step
}

/// Runs one case of the vector; returns the lines logged.
fn run_case(case: &Value) -> Vec<String> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let mut log = DecisionLog::callback(move |l| sink.lock().unwrap().push(l.to_owned()));
    if case["observation"] == "digest" {
        log = log.digest_only();
    }
    if let Some(n) = case["max_record_bytes"].as_u64() {
        log = log.max_record_bytes(n);
    }
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(
            case["now_ms"].as_u64().unwrap(),
        )))
        .seed(case["seed"].as_u64().unwrap())
        .decision_log(log)
        .build()
        .expect("the runtime builds");
    let mut run = runtime.run(case["run_id"].as_str().unwrap()).unwrap();
    for spec in case["steps"].as_array().unwrap() {
        run.step(scripted(spec)).expect("the step runs");
    }
    lines.lock().unwrap().clone()
}

#[test]
fn the_shared_vector_byte_for_byte() {
    let v = vector();
    let digest = reference_identity()["digest"].as_str().unwrap().to_owned();
    for case in v["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().unwrap();
        let got = run_case(case);
        let want: Vec<String> = case["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| expected_line(l, &digest))
            .collect();
        assert_eq!(
            got.len(),
            want.len(),
            "{name}: expected {} lines, got {}:\n{}",
            want.len(),
            got.len(),
            got.join("\n")
        );
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(g, w, "{name} line {i}:\nexpected {w}\n     got {g}");
        }
    }
}

#[test]
fn the_lines_say_what_was_decided_on_and_by_whom() {
    let v = vector();
    let case = &v["cases"][0];
    let lines = run_case(case);
    assert!(!lines.is_empty());
    for line in &lines {
        let l: Value = serde_json::from_str(line).expect("a line is JSON");
        assert_eq!(l["policy"], reference_identity());
        assert_eq!(l["run_id"], case["run_id"]);
        // The line's decision is the one the reference makes on its own
        // observation and context.
        let again = Policy::reference()
            .unwrap()
            .decide_json(&l["observation"].to_string(), &l["context"].to_string())
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&again).unwrap(),
            l["decision"]
        );
        assert_eq!(l["action"], l["decision"]["action"]);
        assert_eq!(l["code"], l["decision"]["envelope"]["code"]);
    }
}

#[test]
fn a_file_sink_appends_the_same_lines_and_rotates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decisions.jsonl");
    let v = vector();
    let case = &v["cases"][0];
    let want = run_case(case);
    let run_with_file = || {
        let runtime = Runtime::builder()
            .clock(Arc::new(VirtualClock::new(
                case["now_ms"].as_u64().unwrap(),
            )))
            .seed(case["seed"].as_u64().unwrap())
            .decision_log(DecisionLog::file(&path))
            .build()
            .unwrap();
        let mut run = runtime.run(case["run_id"].as_str().unwrap()).unwrap();
        for spec in case["steps"].as_array().unwrap() {
            run.step(scripted(spec)).unwrap();
        }
    };
    run_with_file();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text, format!("{}\n", want.join("\n")));
    // A file one line short of the bound is renamed to PATH.1 first.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(ROTATE_BYTES - 10)
        .unwrap();
    run_with_file();
    let rotated = dir.path().join("decisions.jsonl.1");
    assert_eq!(
        std::fs::metadata(&rotated).unwrap().len(),
        ROTATE_BYTES - 10
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("{}\n", want.join("\n"))
    );
}

/// Runs the vector's first case with `log`; returns each step's report and the run's events.
fn run_first_case_with(
    log: DecisionLog,
) -> (Vec<agent_recovery::runtime::StepReport>, Vec<String>) {
    let v = vector();
    let case = &v["cases"][0];
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(
            case["now_ms"].as_u64().unwrap(),
        )))
        .seed(case["seed"].as_u64().unwrap())
        .decision_log(log)
        .build()
        .unwrap();
    let mut run = runtime.run(case["run_id"].as_str().unwrap()).unwrap();
    let reports = case["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|spec| run.step(scripted(spec)).expect("the step runs"))
        .collect();
    (reports, run.events().to_vec())
}

#[test]
fn a_file_that_cannot_be_written_is_counted_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let v = vector();
    let lines = v["cases"][0]["lines"].as_array().unwrap().len() as u64;
    let without = run_first_case_with(DecisionLog::callback(|_| {}));
    // Real files the log cannot write: a directory (opening it fails), /dev/full (each write fails).
    for path in [dir.path(), Path::new("/dev/full")] {
        let log = DecisionLog::file(path);
        let got = run_first_case_with(log.clone());
        assert_eq!(got, without, "{}", path.display());
        assert_eq!(log.failed_writes(), lines, "{}", path.display());
    }
}

#[test]
fn an_observation_over_the_bound_is_replaced_by_its_digest() {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let runtime = Runtime::builder()
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .seed(7)
        .decision_log(
            DecisionLog::callback(move |l| sink.lock().unwrap().push(l.to_owned()))
                .max_record_bytes(16_384),
        )
        .build()
        .unwrap();
    let body = "x".repeat(20_000);
    let mut run = runtime.run("big").unwrap();
    let obs = json!({"source": "http", "status": 503, "body": body}).to_string();
    run.step(Step::new("s", "t", move |call: &Call| {
        if call.attempt == 1 {
            Outcome::Failed(obs.clone())
        } else {
            Outcome::Ok(Value::Null)
        }
    }))
    .unwrap();
    let lines = lines.lock().unwrap();
    assert_eq!(lines.len(), 1);
    assert!(lines[0].len() <= 16_384, "{} bytes", lines[0].len());
    let l: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(l["observation"], Value::Null);
    assert_eq!(l["omitted"], json!({"observation": "size"}));
    assert_eq!(l["action"], "retry");
    assert!(l["context"].is_object());
}

#[cfg(feature = "door")]
#[test]
fn the_door_logs_its_decisions() {
    use agent_recovery::door::{BlockingRecoverable, Door};
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let door = Door::builder()
        .tool("charge")
        .call("tool")
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000)))
        .seed(7)
        .decision_log(DecisionLog::callback(move |l| {
            sink.lock().unwrap().push(l.to_owned())
        }))
        .build()
        .unwrap();
    let charge = |call: agent_recovery::runtime::Call| match call.attempt {
        1 => Err(503),
        _ => Ok("ch_1"),
    };
    let answer = charge
        .recover(&door)
        .observe(|status| format!(r#"{{"source":"http","status":{status}}}"#))
        .call()
        .unwrap();
    assert_eq!(answer, "ch_1");
    let lines = lines.lock().unwrap();
    assert_eq!(lines.len(), 1);
    let l: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(
        (l["step"].as_str(), l["action"].as_str()),
        (Some("charge"), Some("retry"))
    );
    assert_eq!(l["policy"], reference_identity());
}

#[test]
fn a_bad_decision_log_configuration_is_refused_with_a_hint() {
    let runtime = Runtime::builder()
        .decision_log(DecisionLog::callback(|_| {}).max_record_bytes(1_000))
        .build()
        .unwrap();
    let Err(e) = runtime.run("r") else {
        panic!("a 1 000-byte bound was accepted");
    };
    let text = e.to_string();
    assert!(
        text.contains("max_record_bytes is 1000") && text.contains("e.g. 65536"),
        "{text}"
    );
    let runtime = Runtime::builder()
        .config_json(json!({"decision_log": {"observation": "all"}}))
        .build()
        .unwrap();
    let text = runtime.run("r").map(|_| ()).unwrap_err().to_string();
    assert!(text.contains("unknown variant `all`"), "{text}");
    let runtime = Runtime::builder()
        .config_json(json!({"decision_log": {"file": "/tmp/x"}}))
        .build()
        .unwrap();
    let text = runtime.run("r").map(|_| ()).unwrap_err().to_string();
    assert!(text.contains("unknown field `file`"), "{text}");
}
