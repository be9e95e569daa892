//! The Rust snippets of README.md and docs/runtime.md compile and run as
//! written: each one is the body of a function below (between `// README:`
//! markers), which the tests run, and a test checks that the page shows
//! exactly that code.

type Fallible = Result<(), Box<dyn std::error::Error>>;

fn readme_quickstart() -> Fallible {
    // README: Rust
    use agent_recovery::door::{BlockingRecoverable, Door};
    use agent_recovery::runtime::Call;

    let door = Door::builder().tool("charge").call("tool").build()?;
    let charge = |call: Call| match call.attempt {
        1 => Err(503),   // the status of a failed HTTP call
        _ => Ok("ch_1"), // a real call sends call.key to the service as its Idempotency-Key
    };
    let answer = charge
        .recover(&door) // an async closure: the same, then `.await`
        .observe(|status| format!(r#"{{"source":"http","status":{status}}}"#)) // the failure, for the policy
        .call()?;
    assert_eq!(answer, "ch_1");
    // README: end
    Ok(())
}

fn quickstart() -> Fallible {
    // README: Quickstart (Rust)
    use agent_recovery::runtime::{Clock, Outcome, Runtime, Step, VirtualClock};
    use std::sync::Arc;

    let clock = Arc::new(VirtualClock::new(1_767_225_600_000)); // or the default SystemClock
    let runtime = Runtime::builder().clock(clock.clone()).seed(7).build()?;
    let mut run = runtime.run("run-1")?;
    let report = run.step(
        Step::new("charge", "payments.charge", |call| {
            // call.key is the same on every attempt; call.target is the target or a fallback
            if call.attempt == 1 {
                Outcome::Failed(r#"{"source":"http","status":503}"#.into())
            } else {
                Outcome::Ok(serde_json::json!({"id": "ch_1"}))
            }
        })
        .call("tool")
        .args(serde_json::json!({"amount": 10})),
    )?;
    assert_eq!(report.outcome, "ok");
    assert_eq!(report.result, Some(serde_json::json!({"id": "ch_1"})));
    assert!(clock.now_ms() > 1_767_225_600_000); // slept on the virtual clock
    // README: end
    Ok(())
}

fn retry_and_runtime() -> Fallible {
    // README: `Retry` and `Runtime`
    use agent_recovery::Policy;
    use agent_recovery::retry::{Attempt, Retry};
    use agent_recovery::runtime::{Call, Outcome, Runtime, Step, VirtualClock};
    use std::sync::Arc;

    fn charge(attempt: u32) -> Result<&'static str, String> {
        match attempt {
            1 => Err(r#"{"source":"http","status":503}"#.into()), // an observation
            _ => Ok("ch_1"),
        }
    }
    let policy = Arc::new(Policy::reference()?);

    // One step with Retry; the sleeper is its clock (std::thread::sleep in production).
    let mut slept = Vec::new();
    let id = Retry::new("run-1", "charge", "payments.charge", r#"{"amount":10}"#)
        .seed(7)
        .run(
            &*policy,
            |a: &Attempt| charge(a.number),
            |delay| slept.push(delay),
        )?;

    // The same step in a run, whose budget, breakers and compensations span its steps.
    let runtime = Runtime::builder()
        .policy(policy.clone())
        .clock(Arc::new(VirtualClock::new(1_767_225_600_000))) // SystemClock by default
        .seed(7)
        .build()?;
    let mut run = runtime.run("run-1")?;
    let report = run.step(
        Step::new("charge", "payments.charge", |call: &Call| {
            match charge(call.attempt) {
                Ok(id) => Outcome::Ok(id.into()),
                Err(observation) => Outcome::Failed(observation),
            }
        })
        .call("tool")
        .args(serde_json::json!({"amount": 10})),
    )?;
    assert_eq!(report.result, Some(id.into()));
    assert_eq!(slept.len(), 1);
    // README: end
    Ok(())
}

#[test]
fn the_readme_quickstart_runs() {
    readme_quickstart().unwrap();
}

#[test]
fn the_quickstart_runs() {
    quickstart().unwrap();
}

#[test]
fn the_retry_and_runtime_example_runs() {
    retry_and_runtime().unwrap();
}

/// The code between `// README: <title>` and `// README: end` in this file,
/// without the function's indentation.
fn marked(title: &str) -> String {
    let source = include_str!("readme_rust_runtime.rs");
    let start = format!("    // README: {title}\n");
    let from = source.find(&start).unwrap() + start.len();
    let len = source[from..].find("    // README: end\n").unwrap();
    source[from..from + len]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first ```rust block after the heading `<title>` (any level) in `page`.
fn page_block(page: &str, title: &str) -> String {
    let at = page
        .lines()
        .position(|l| {
            l.trim_start_matches('#').strip_prefix(' ') == Some(title) && l.starts_with('#')
        })
        .unwrap_or_else(|| panic!("no heading {title:?}"));
    let rest = page.lines().skip(at).collect::<Vec<_>>().join("\n") + "\n";
    let from = rest.find("```rust\n").unwrap() + "```rust\n".len();
    let len = rest[from..].find("```\n").unwrap();
    rest[from..from + len].trim_end().to_owned()
}

#[test]
fn the_pages_show_exactly_the_code_that_runs() {
    let readme = include_str!("../../README.md");
    let runtime = include_str!("../../docs/runtime.md");
    for (file, page, title) in [
        ("README.md", readme, "Rust"),
        ("docs/runtime.md", runtime, "Quickstart (Rust)"),
        ("docs/runtime.md", runtime, "`Retry` and `Runtime`"),
    ] {
        let (shown, tested) = (page_block(page, title), marked(title));
        assert!(
            shown == tested.trim_end(),
            "{file}, section {title:?}, differs from host/tests/readme_rust_runtime.rs; \
             copy one to the other\n--- {file}\n{shown}\n--- test\n{tested}"
        );
    }
}
