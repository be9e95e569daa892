//! `serve`: a long-running decision service on stdin/stdout (JSON Lines).
//!
//! Each input line is an observation, or `{"observation":..,"context":..,
//! "id":..}` (`context` and `id` optional). Each non-blank line gets exactly
//! one output line, in order:
//!
//! - `{"policy":{"name","version","sha256"},"decision":<the component's JSON>}`,
//!   plus `"id"` when the input had one, plus `"fallback":{"kind","message"}`
//!   when the active policy failed and the reference answered instead;
//! - `{"error":{"kind","message"}}` (plus `"id"`) when there is no decision:
//!   bad input, or the policy failed under `--on-failure closed`.
//!
//! A bad line never stops the stream; end of input ends it (exit 0). With
//! `--watch`, the `--policy` file is swapped in when it changes; swaps,
//! refusals, failures and fallbacks are logged to stderr, one line each.

use std::io::{BufRead, Read, Write};
use std::time::Duration;

use agent_recovery::{
    Answer, Error, FailurePolicy, Loader, PolicyHandle, SwapOptions, WatchOptions,
};
use anyhow::Context as _;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::Usage;
use crate::args::{Global, OnFailure, Serve};

/// `serve [--policy WASM] [--watch] [--sha256 HEX] [--on-failure closed|reference] [--poll-ms MS]`.
pub fn serve(g: &Global, args: Serve, loader: Loader) -> anyhow::Result<()> {
    if g.config.is_some() {
        return Err(Usage(
            "`serve` does not take --config; put policy parameters in each line's context.config"
                .into(),
        )
        .into());
    }
    let failure_policy = match args.on_failure {
        OnFailure::Closed => FailurePolicy::FailClosed,
        OnFailure::Reference => FailurePolicy::FallbackToReference,
    };
    let path = g.policy.as_deref();
    for (needs_policy, given) in [("watch", args.watch), ("sha256", args.sha256.is_some())] {
        if given && path.is_none() {
            return Err(Usage(format!(
                "--{needs_policy} needs --policy WASM, the component file to serve"
            ))
            .into());
        }
    }
    let mut swap = SwapOptions::default();
    if let Some(hex) = args.sha256.as_deref() {
        swap = swap.sha256(hex).map_err(|e| Usage(e.message().into()))?;
    }
    // The embedded reference (no --policy) ships with the program: no signature.
    if let Some(keys) = crate::signing::required_keys(g)? {
        swap = swap.require_signature(keys);
    }
    let poll = args.poll_ms;
    let watch = WatchOptions::default()
        .interval(Duration::from_millis(poll))
        .map_err(|e| Usage(format!("--poll-ms: {}", e.message())))?
        .swap_options(swap.clone());

    let builder = PolicyHandle::builder()
        .loader(loader)
        .failure_policy(failure_policy)
        .on_event(|event| eprintln!("agent-recovery: {event}"));
    let handle = match path {
        Some(path) => builder
            .file(path, &swap)
            .with_context(|| format!("--policy {path}"))?,
        None => builder.reference()?,
    };
    eprintln!("agent-recovery: serving {}", handle.active().id());
    let _watcher = match (path, args.watch) {
        (Some(path), true) => Some(handle.watch(path, watch)?),
        _ => None,
    };

    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        let max = handle.active().policy().limits().max_input_bytes();
        let reply = match read_line(&mut stdin, max, &mut line).context("cannot read stdin")? {
            None => return Ok(()),
            Some(Line::TooLong(len)) => error_line(
                None,
                "input-too-large",
                &format!(
                    "the line is larger than the input limit of {max} bytes (at least {len}); send a smaller observation (truncate the body)"
                ),
            ),
            Some(Line::Complete) => match reply(&handle, &line) {
                Some(reply) => reply,
                None => continue,
            },
        };
        let written = writeln!(stdout, "{reply}").and_then(|()| stdout.flush());
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(anyhow::Error::new(e).context("cannot write to stdout")),
        }
    }
}

/// What [`read_line`] read into its buffer.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// One line (without its `\n` or `\r\n`).
    Complete,
    /// A line longer than the limit, skipped up to its end; at least this many bytes.
    TooLong(usize),
}

/// Reads one line of at most `max` bytes into `buf`; `None` at end of input.
/// A longer line is consumed without being kept.
fn read_line(
    reader: &mut impl BufRead,
    max: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Line>> {
    buf.clear();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let read = Read::take(&mut *reader, limit).read_until(b'\n', buf)?;
    if read == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Some(Line::Complete));
    }
    if buf.len() <= max {
        return Ok(Some(Line::Complete)); // the last line, without a newline
    }
    let mut skipped = buf.len();
    buf.clear();
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            break;
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(at) => {
                skipped += at;
                reader.consume(at + 1);
                break;
            }
            None => {
                let n = available.len();
                skipped += n;
                reader.consume(n);
            }
        }
    }
    Ok(Some(Line::TooLong(skipped)))
}

/// A line of the `{"observation":..,"context":..,"id":..}` form.
#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    observation: Option<&'a RawValue>,
    #[serde(borrow)]
    context: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
}

/// The reply to one input line; `None` for a blank line.
fn reply(handle: &PolicyHandle, line: &[u8]) -> Option<String> {
    let text = match agent_recovery::utf8(line) {
        Ok(text) => text,
        Err(e) => return Some(error(None, &e)),
    };
    if text.trim().is_empty() {
        return None;
    }
    let (observation, context, id) = match serde_json::from_str::<Request<'_>>(text) {
        Ok(Request {
            observation: Some(observation),
            context,
            id,
        }) => (observation.get(), context.map_or("{}", |c| c.get()), id),
        _ => (text, "{}", None),
    };
    Some(match handle.decide_json(observation, context) {
        Ok(answer) => decision_line(id, &answer),
        Err(e) => error(id, &e),
    })
}

fn decision_line(id: Option<&RawValue>, answer: &Answer) -> String {
    let policy = serde_json::to_string(&*answer.policy).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(answer.json.len() + policy.len() + 64);
    out.push('{');
    if let Some(id) = id {
        out.push_str(&format!("\"id\":{},", id.get()));
    }
    out.push_str(&format!("\"policy\":{policy},\"decision\":{}", answer.json));
    if let Some(fallback) = &answer.fallback {
        let member = json!({"kind": fallback.kind().as_str(), "message": fallback.message()});
        out.push_str(&format!(",\"fallback\":{member}"));
    }
    out.push('}');
    out
}

fn error(id: Option<&RawValue>, e: &Error) -> String {
    error_line(id, e.kind().as_str(), e.message())
}

fn error_line(id: Option<&RawValue>, kind: &str, message: &str) -> String {
    let body = json!({"kind": kind, "message": message});
    match id {
        Some(id) => format!("{{\"id\":{},\"error\":{body}}}", id.get()),
        None => format!("{{\"error\":{body}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Result<String, usize>> {
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some(line) = read_line(&mut reader, max, &mut buf).unwrap() {
            out.push(match line {
                Line::Complete => Ok(String::from_utf8(buf.clone()).unwrap()),
                Line::TooLong(n) => Err(n),
            });
        }
        out
    }

    #[test]
    fn lines_are_split_and_long_ones_skipped_whole() {
        let got = lines(b"ab\r\n0123456789abc\n\nxyz", 10);
        assert_eq!(
            got,
            vec![
                Ok("ab".into()),
                Err(13),
                Ok(String::new()),
                Ok("xyz".into())
            ]
        );
        assert_eq!(lines(b"0123456789\n", 10), vec![Ok("0123456789".into())]);
        assert_eq!(lines(b"0123456789x", 10), vec![Err(11)]);
        assert!(lines(b"", 10).is_empty());
    }
}
