//! The human summary of an envelope or a decision (terminal output).
//!
//! Built from the policy's JSON, never from anything else, so the summary
//! cannot say something the JSON does not. Output that is not the documented
//! shape (a custom policy's surprise) gets `None`, and the caller prints the
//! JSON as is.

use serde_json::Value;

use crate::style::Paint;

/// Width of the labels column.
const LABEL: usize = 9;

/// The summary of a `classify` envelope.
pub fn envelope(json: &str, paint: Paint) -> Option<String> {
    let env: Value = serde_json::from_str(json).ok()?;
    let mut out = headline(&env, paint)?;
    let retry = match (
        env.get("retryable")?.as_bool()?,
        uint(&env, "retry_after_ms"),
    ) {
        (true, Some(ms)) => format!("yes, the server asked to wait {ms} ms"),
        (true, None) => "yes".to_string(),
        (false, _) => "no".to_string(),
    };
    line(&mut out, "retryable", &retry, paint);
    details(&mut out, &env, paint);
    Some(out)
}

/// The summary of a `decide` decision.
pub fn decision(json: &str, paint: Paint) -> Option<String> {
    let d: Value = serde_json::from_str(json).ok()?;
    let env = d.get("envelope")?;
    let mut out = headline(env, paint)?;
    line(&mut out, "action", &action(&d, paint)?, paint);
    let mut reason = text(&d, "reason")?.to_string();
    if let Some(code) = text(&d, "reason_code") {
        reason.push_str(&format!(" ({code})"));
    }
    line(&mut out, "reason", &reason, paint);
    details(&mut out, env, paint);
    Some(out)
}

/// One row of the walkthrough table, from a decision.
pub struct Row {
    /// The observation's file name.
    pub name: String,
    /// `envelope.code`.
    pub code: String,
    /// `envelope.class`.
    pub class: String,
    /// `action`.
    pub action: String,
    /// `delay_ms` with its unit, or `-`.
    pub delay: String,
}

impl Row {
    /// The row for a decision's JSON.
    pub fn new(name: &str, json: &str) -> Option<Row> {
        let d: Value = serde_json::from_str(json).ok()?;
        let env = d.get("envelope")?;
        Some(Row {
            name: name.to_string(),
            code: text(env, "code")?.to_string(),
            class: text(env, "class")?.to_string(),
            action: text(&d, "action")?.to_string(),
            delay: uint(&d, "delay_ms").map_or_else(|| "-".into(), |ms| format!("{ms} ms")),
        })
    }
}

/// The walkthrough's summary table: one line per observation, columns aligned.
pub fn table(rows: &[Row], paint: Paint) -> String {
    let heads = ["observation", "code", "class", "action", "delay"];
    let width = |i: usize, head: &str| {
        rows.iter()
            .map(|r| {
                [&r.name, &r.code, &r.class, &r.action, &r.delay][i]
                    .chars()
                    .count()
            })
            .chain([head.len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = heads.iter().enumerate().map(|(i, h)| width(i, h)).collect();
    let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())));
    let mut out = String::new();
    let head: Vec<String> = heads.iter().zip(&widths).map(|(h, w)| pad(h, *w)).collect();
    out.push_str(&paint.bold(head.join("  ").trim_end()));
    for r in rows {
        let [w0, w1, w2, w3, ..] = widths[..] else {
            continue;
        };
        out.push('\n');
        out.push_str(&format!(
            "{}  {}  {}  {}  {}",
            pad(&r.name, w0),
            pad(&r.code, w1),
            paint.class(&r.class) + &" ".repeat(w2.saturating_sub(r.class.chars().count())),
            paint.action(&r.action) + &" ".repeat(w3.saturating_sub(r.action.chars().count())),
            r.delay,
        ));
    }
    out
}

/// `code  class · category · severity`.
fn headline(env: &Value, paint: Paint) -> Option<String> {
    let code = text(env, "code")?;
    let class = text(env, "class")?;
    let mut tags = vec![paint.class(class)];
    for key in ["category", "severity"] {
        if let Some(v) = text(env, key) {
            tags.push(v.to_string());
        }
    }
    Some(format!("{}  {}", paint.bold(code), tags.join(" · ")))
}

/// `retry in 1800 ms (attempt 1 of 3, 58200 ms of retry budget left)`.
fn action(d: &Value, paint: Paint) -> Option<String> {
    let action = text(d, "action")?;
    let mut out = paint.action(action);
    if let Some(ms) = uint(d, "delay_ms") {
        out.push_str(&format!(" in {ms} ms"));
    }
    let mut facts = Vec::new();
    if let (Some(a), Some(max)) = (uint(d, "attempt"), uint(d, "max_attempts")) {
        facts.push(format!("attempt {a} of {max}"));
    }
    if let Some(left) = uint(d, "budget_remaining_ms") {
        facts.push(format!("{left} ms of retry budget left"));
    }
    if !facts.is_empty() {
        out.push_str(&paint.dim(&format!(" ({})", facts.join(", "))));
    }
    Some(out)
}

/// hint, field, message, upstream, request id.
fn details(out: &mut String, env: &Value, paint: Paint) {
    if let Some(hint) = text(env, "hint") {
        line(out, "hint", hint, paint);
    }
    if let Some(field) = text(env, "field") {
        line(out, "field", field, paint);
    }
    if let Some(message) = text(env, "message") {
        line(out, "message", message, paint);
    }
    if let Some(up) = env.get("upstream") {
        let mut facts = Vec::new();
        for key in ["source", "provider"] {
            if let Some(v) = text(up, key)
                && !facts.iter().any(|f| f == v)
            {
                facts.push(v.to_string());
            }
        }
        for key in ["status", "code", "type"] {
            match up.get(key) {
                Some(Value::String(v)) => facts.push(format!("{key} {v}")),
                Some(Value::Number(v)) => facts.push(format!("{key} {v}")),
                _ => {}
            }
        }
        if !facts.is_empty() {
            line(out, "upstream", &facts.join(" · "), paint);
        }
    }
    if let Some(id) = text(env, "request_id") {
        line(out, "request", id, paint);
    }
}

fn line(out: &mut String, label: &str, value: &str, paint: Paint) {
    let label = format!("{label:<LABEL$}");
    out.push_str(&format!("\n  {} {value}", paint.dim(&label)));
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)?.as_str()
}

fn uint(v: &Value, key: &str) -> Option<u64> {
    v.get(key)?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Paint = Paint { color: false };

    #[test]
    fn a_decision_reads_as_its_json_says() {
        let json = r#"{"action":"retry","delay_ms":1800,"attempt":1,"max_attempts":3,"budget_remaining_ms":58200,"reason":"transient","reason_code":null,"envelope":{"code":"llm.http.429_rate_limited","message":"Rate limit reached.","class":"transient","retryable":true,"severity":"error","category":"rate_limit","retry_after_ms":1800,"field":null,"hint":"Wait 1800 ms.","request_id":"req_1","upstream":{"source":"http","provider":"openai","status":429,"code":"rate_limit_exceeded","type":"tokens"}}}"#;
        let text = decision(json, PLAIN).unwrap();
        assert_eq!(
            text,
            "llm.http.429_rate_limited  transient · rate_limit · error\n  \
             action    retry in 1800 ms (attempt 1 of 3, 58200 ms of retry budget left)\n  \
             reason    transient\n  \
             hint      Wait 1800 ms.\n  \
             message   Rate limit reached.\n  \
             upstream  http · openai · status 429 · code rate_limit_exceeded · type tokens\n  \
             request   req_1"
        );
    }

    #[test]
    fn other_shapes_are_not_summarized() {
        assert!(decision("{}", PLAIN).is_none());
        assert!(envelope("not json", PLAIN).is_none());
        assert!(envelope(r#"{"code":1}"#, PLAIN).is_none());
    }

    #[test]
    fn the_table_aligns_columns_with_or_without_colour() {
        let rows = [
            Row {
                name: "a.json".into(),
                code: "tool.http.503_unavailable".into(),
                class: "transient".into(),
                action: "retry".into(),
                delay: "250 ms".into(),
            },
            Row {
                name: "longer-name.json".into(),
                code: "llm.x".into(),
                class: "permanent".into(),
                action: "fail".into(),
                delay: "-".into(),
            },
        ];
        let plain = table(&rows, PLAIN);
        let lines: Vec<&str> = plain.lines().collect();
        assert_eq!(lines.len(), 3);
        let col = |l: &str| {
            l.find("transient")
                .or_else(|| l.find("permanent"))
                .or_else(|| l.find("class"))
        };
        assert_eq!(col(lines[0]), col(lines[1]));
        assert_eq!(col(lines[1]), col(lines[2]));
        let coloured = table(&rows, Paint { color: true });
        let stripped = coloured
            .replace("\u{1b}[1m", "")
            .replace("\u{1b}[33m", "")
            .replace("\u{1b}[31m", "")
            .replace("\u{1b}[32m", "")
            .replace("\u{1b}[0m", "");
        assert!(coloured.contains('\u{1b}'));
        assert_eq!(stripped.lines().nth(1), plain.lines().nth(1));
    }
}
