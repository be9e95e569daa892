//! `test DIR`: run a directory of policy tests against the policy and print
//! a pass/fail report, a diff for each failure, and the codes covered.
//!
//! A test file (`*.yaml`, `*.yml` or `*.json`) holds one case or a list of
//! cases:
//!
//! ```yaml
//! name: a 409 on a payment is permanent     # optional; default: file and index
//! observation: { source: http, status: 409 }
//! context: { call: tool, attempt: 1 }       # optional
//! expect:
//!   action: fail                            # the decision's action
//!   code: tool.http.409_conflict            # the envelope's code
//!   class: permanent                        # the envelope's class
//!   reason: permanent                       # the decision's reason
//!   decision: { max_attempts: 3 }           # any subset of the decision
//!   envelope: { retryable: false }          # any subset of the envelope
//!   error: invalid_context                  # or: the policy refuses the input
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agent_recovery::{ErrorKind, Policy};
use serde_json::Value;

use crate::args::{Global, Test};
use crate::commands::print;
use crate::style::Output;
use crate::{Failed, Usage, document};

const EXPECT_KEYS: &[&str] = &[
    "action", "code", "class", "reason", "decision", "envelope", "error",
];

struct Case {
    name: String,
    observation: Value,
    context: Value,
    expect: serde_json::Map<String, Value>,
}

fn cases_of(path: &Path) -> anyhow::Result<Vec<Case>> {
    let shown = path.display().to_string();
    let file = path
        .file_name()
        .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
    let list = match document::read_value(&shown)? {
        Value::Array(list) => list,
        one => vec![one],
    };
    let mut out = Vec::new();
    for (i, v) in list.into_iter().enumerate() {
        let at = format!("{shown} case {i}");
        let Value::Object(mut m) = v else {
            return Err(Usage(format!(
                "{at}: expected an object with observation and expect; see docs/policy-documents.md"
            ))
            .into());
        };
        if let Some(k) = m
            .keys()
            .find(|k| !["name", "observation", "context", "expect", "source"].contains(&k.as_str()))
        {
            return Err(Usage(format!(
                "{at}: unknown member {k:?}; expected name, observation, context, expect"
            ))
            .into());
        }
        let Some(observation) = m.remove("observation") else {
            return Err(Usage(format!(
                "{at}: missing observation; add the failed call to test"
            ))
            .into());
        };
        let Some(Value::Object(expect)) = m.remove("expect") else {
            return Err(Usage(format!(
                "{at}: missing expect (an object); add what the policy must decide"
            ))
            .into());
        };
        if let Some(k) = expect.keys().find(|k| !EXPECT_KEYS.contains(&k.as_str())) {
            return Err(Usage(format!(
                "{at}: unknown expect member {k:?}; expected one of {}",
                EXPECT_KEYS.join(", ")
            ))
            .into());
        }
        let name = match m.remove("name") {
            Some(Value::String(s)) => s,
            _ => format!("{file} #{i}"),
        };
        out.push(Case {
            name,
            observation,
            context: m
                .remove("context")
                .unwrap_or_else(|| Value::Object(Default::default())),
            expect,
        });
    }
    Ok(out)
}

/// Where `got` differs from `want` (a subset): one `path: expected X, got Y` line each.
fn diff(path: &str, want: &Value, got: Option<&Value>, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Some(Value::Object(g))) => {
            for (k, wv) in w {
                diff(&format!("{path}.{k}"), wv, g.get(k), out);
            }
        }
        (w, Some(g)) if w == g => {}
        (w, g) => out.push(format!(
            "{path}: expected {w}, got {}",
            g.map_or_else(|| "nothing".to_owned(), Value::to_string)
        )),
    }
}

/// Runs one case; returns the diff lines (empty: passed) and the code decided on.
fn run_case(policy: &Policy, c: &Case) -> (Vec<String>, Option<String>) {
    let mut lines = Vec::new();
    let result = policy.decide_json(&c.observation.to_string(), &c.context.to_string());
    let decision = match result {
        Ok(text) => serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        Err(e) => {
            let kind = match e.kind() {
                ErrorKind::Policy(k) => k.as_str().replace('-', "_"),
                other => format!("{other:?}"),
            };
            match c.expect.get("error") {
                Some(Value::String(want)) if want.replace('-', "_") == kind => {}
                Some(want) => lines.push(format!(
                    "error: expected {want}, got {kind} ({})",
                    e.message()
                )),
                None => lines.push(format!(
                    "the policy refused the input: {kind}: {}",
                    e.message()
                )),
            }
            return (lines, None);
        }
    };
    if let Some(want) = c.expect.get("error") {
        lines.push(format!(
            "error: expected {want}, got a decision: {}",
            decision["action"]
        ));
    }
    let env = &decision["envelope"];
    for (key, got) in [
        ("action", decision.get("action")),
        ("code", env.get("code")),
        ("class", env.get("class")),
        ("reason", decision.get("reason")),
    ] {
        if let Some(want) = c.expect.get(key) {
            diff(key, want, got, &mut lines);
        }
    }
    if let Some(want) = c.expect.get("decision") {
        diff("decision", want, Some(&decision), &mut lines);
    }
    if let Some(want) = c.expect.get("envelope") {
        diff("envelope", want, Some(env), &mut lines);
    }
    (lines, env["code"].as_str().map(str::to_owned))
}

/// The codes a policy document overrides (none for a component).
fn overridden(g: &Global) -> anyhow::Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let Some(path) = g.policy.as_deref().filter(|p| document::is_document(p)) else {
        return Ok(out);
    };
    let doc = document::read_value(path)?;
    if let Some(Value::Object(codes)) = doc.pointer("/overrides/codes") {
        out.extend(codes.keys().cloned());
    }
    if let Some(Value::Object(providers)) = doc.pointer("/overrides/providers") {
        for table in providers.values().filter_map(Value::as_object) {
            out.extend(table.keys().cloned());
        }
    }
    Ok(out)
}

/// `test DIR`.
pub fn run(g: &Global, a: Test, policy: Policy) -> anyhow::Result<()> {
    let entries = std::fs::read_dir(&a.dir).map_err(|e| {
        Usage(format!(
            "cannot read directory {}: {e}; pass the directory of test files",
            a.dir
        ))
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| document::is_document(&p.display().to_string()))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in &files {
        cases.extend(cases_of(f)?);
    }
    if cases.is_empty() {
        return Err(Usage(format!(
            "{} has no test cases (*.yaml, *.yml, *.json); add some",
            a.dir
        ))
        .into());
    }
    let paint = Output::new(g).paint;
    let info = policy.info()?;
    let mut report = vec![format!(
        "policy {} {} (sha256 {})",
        info.name,
        info.version,
        policy.sha256()
    )];
    let (mut failed, mut touched) = (0, BTreeSet::new());
    for c in &cases {
        let (lines, code) = run_case(&policy, c);
        touched.extend(code);
        if lines.is_empty() {
            report.push(format!("{} {}", paint.dim("pass"), c.name));
        } else {
            failed += 1;
            report.push(format!("{} {}", paint.bold("FAIL"), c.name));
            report.extend(lines.iter().map(|l| format!("    {l}")));
        }
    }
    let registry: Vec<Value> = serde_json::from_str(&policy.registry_json()?).unwrap_or_default();
    report.push(format!(
        "coverage: {} of {} registry codes decided on",
        touched.len(),
        registry.len()
    ));
    let overridden = overridden(g)?;
    if !overridden.is_empty() {
        let missed: Vec<&str> = overridden
            .iter()
            .filter(|c| !touched.contains(*c))
            .map(String::as_str)
            .collect();
        report.push(format!(
            "coverage: {} of {} overridden codes tested{}",
            overridden.len() - missed.len(),
            overridden.len(),
            if missed.is_empty() {
                String::new()
            } else {
                format!(" (untested: {})", missed.join(", "))
            }
        ));
    }
    report.push(format!(
        "{} passed, {failed} failed, {} cases in {} files",
        cases.len() - failed,
        cases.len(),
        files.len()
    ));
    print(&report.join("\n"))?;
    if failed > 0 {
        return Err(Failed(format!(
            "{failed} of {} policy tests failed; see the report above",
            cases.len()
        ))
        .into());
    }
    Ok(())
}
