//! `policy replay LOG`: decide every logged observation and context again
//! with the candidate policy (`--policy`, else the reference) and print the
//! decisions that would change (docs/decision-logs.md, "Replay").
//!
//! Exit status: 0 nothing changed, 1 some decision changed, 2 a bad log
//! (the message names the line).

use agent_recovery::Policy;
use serde_json::{Value, json};

use crate::args::{Global, PolicyReplay};
use crate::commands::print;
use crate::style::Output;
use crate::{Failed, Usage};

/// One changed member of a decision: its path, the logged and the new value
/// (None: absent).
struct Change {
    field: String,
    old: Option<Value>,
    new: Option<Value>,
}

/// What replaying one line gave.
enum Replayed {
    Same,
    Changed(Vec<Change>),
    /// Not replayable: why.
    Skipped(String),
}

/// The members of a line replay reads.
struct Line {
    number: usize,
    run_id: String,
    step: String,
    attempt: u64,
    observation: Value,
    context: Value,
    decision: Value,
    omitted: Value,
}

fn parse(number: usize, text: &str, log: &str) -> anyhow::Result<Line> {
    let bad = |what: String| {
        Usage(format!(
            "{log} line {number}: {what}; pass a file a runtime's decision_log wrote (docs/decision-logs.md)"
        ))
    };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let Value::Object(mut m) = v else {
        return Err(bad("not a JSON object".into()).into());
    };
    if m.get("v").and_then(Value::as_u64) != Some(1) {
        return Err(bad("no `\"v\":1` (not a decision log line, or a newer format)".into()).into());
    }
    let text_of = |k: &str| match m.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(bad(format!("`{k}` is missing or not a string"))),
    };
    let run_id = text_of("run_id")?;
    let step = text_of("step")?;
    let attempt = m
        .get("attempt")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("`attempt` is missing or not an integer".into()))?;
    let mut take = |k: &str| m.remove(k).unwrap_or(Value::Null);
    let (observation, context, decision, omitted) = (
        take("observation"),
        take("context"),
        take("decision"),
        take("omitted"),
    );
    if !decision.is_object() && !decision.is_null() {
        return Err(bad("`decision` is not an object".into()).into());
    }
    Ok(Line {
        number,
        run_id,
        step,
        attempt,
        observation,
        context,
        decision,
        omitted,
    })
}

/// Every member path where `old` and `new` differ (objects member by
/// member, anything else as a whole).
fn diff(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff(&p, a.get(k), b.get(k), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Change {
            field: path.to_owned(),
            old: a.cloned(),
            new: b.cloned(),
        }),
    }
}

fn replay_one(policy: &Policy, line: &Line) -> Replayed {
    for member in ["observation", "context", "decision"] {
        if let Some(why) = line.omitted.get(member).and_then(Value::as_str) {
            return Replayed::Skipped(match (member, why) {
                ("observation", "digest") => {
                    "logged with observation: digest (only its sha256)".to_owned()
                }
                (m, "size") => format!("its {m} was over max_record_bytes"),
                (m, w) => format!("its {m} was not logged ({w})"),
            });
        }
    }
    if line.observation.is_null() || line.context.is_null() || line.decision.is_null() {
        return Replayed::Skipped("the line has no observation, context or decision".into());
    }
    let mut old = line.decision.clone();
    let new = match policy.decide_json(&line.observation.to_string(), &line.context.to_string()) {
        Ok(text) => serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
        Err(e) => json!({"error": {"kind": e.kind().as_str(), "message": e.to_string()}}),
    };
    let mut new = new;
    // Without a seed the delay is drawn at random: not comparable.
    if line.context.get("seed").is_none() {
        for d in [&mut old, &mut new] {
            if let Some(m) = d.as_object_mut() {
                m.remove("delay_ms");
            }
        }
    }
    let mut changes = Vec::new();
    diff("", Some(&old), Some(&new), &mut changes);
    if changes.is_empty() {
        Replayed::Same
    } else {
        Replayed::Changed(changes)
    }
}

fn shown(v: &Option<Value>) -> String {
    v.as_ref()
        .map_or_else(|| "(absent)".to_owned(), Value::to_string)
}

/// `policy replay LOG`.
pub fn run(g: &Global, a: PolicyReplay, policy: Policy) -> anyhow::Result<()> {
    let text = if a.log == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Usage(format!("cannot read stdin: {e}; pass the log file's path")))?
    } else {
        std::fs::read_to_string(&a.log).map_err(|e| {
            Usage(format!(
                "cannot read {}: {e}; pass the path of a decision log",
                a.log
            ))
        })?
    };
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        lines.push(parse(i + 1, raw, &a.log)?);
    }
    // The report by default (also when piped); JSON lines with --json.
    let json_out = g.json;
    let paint = Output::new(g).paint;
    let info = policy.info()?;
    let mut report = Vec::new();
    if !json_out {
        report.push(format!(
            "replay of {} against {} {} (sha256 {})",
            a.log,
            info.name,
            info.version,
            policy.sha256()
        ));
    }
    let (mut changed, mut same, mut skipped) = (0usize, 0usize, 0usize);
    for line in &lines {
        let at = format!(
            "line {}: run {} step {} attempt {}",
            line.number, line.run_id, line.step, line.attempt
        );
        match replay_one(&policy, line) {
            Replayed::Same => same += 1,
            Replayed::Skipped(why) => {
                skipped += 1;
                if json_out {
                    report.push(
                        json!({"line": line.number, "run_id": line.run_id, "step": line.step,
                               "attempt": line.attempt, "skipped": why})
                        .to_string(),
                    );
                } else {
                    report.push(format!("{} {at}: {why}", paint.dim("skipped")));
                }
            }
            Replayed::Changed(changes) => {
                changed += 1;
                if json_out {
                    let list: Vec<Value> = changes
                        .iter()
                        .map(|c| json!({"field": c.field, "old": c.old, "new": c.new}))
                        .collect();
                    report.push(
                        json!({"line": line.number, "run_id": line.run_id, "step": line.step,
                               "attempt": line.attempt, "changes": list})
                        .to_string(),
                    );
                } else {
                    report.push(format!("{} {at}", paint.bold("changed")));
                    for c in &changes {
                        report.push(format!(
                            "    {}: {} -> {}",
                            c.field,
                            shown(&c.old),
                            shown(&c.new)
                        ));
                    }
                }
            }
        }
    }
    let total = lines.len();
    if json_out {
        report.push(
            json!({"summary": {"decisions": total, "changed": changed, "unchanged": same, "skipped": skipped}})
                .to_string(),
        );
    } else {
        report.push(format!(
            "{total} decisions: {changed} changed, {same} unchanged, {skipped} skipped"
        ));
    }
    print(&report.join("\n"))?;
    if changed > 0 {
        return Err(Failed(format!(
            "{changed} of {total} decisions would change under {} {}; see the report above",
            info.name, info.version
        ))
        .into());
    }
    Ok(())
}
