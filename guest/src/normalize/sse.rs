//! Server-sent event streams that fail after a `200`.
//!
//! A streaming LLM call answers `200` with `Content-Type: text/event-stream`
//! before it knows how generation will go; a failure half-way through arrives
//! as an event, not as a status. The SDKs read it so:
//!
//! - Anthropic (`anthropic/_streaming.py`): an event named `error`, whose data
//!   is the usual error body, `{"type":"error","error":{"type":"overloaded_error",...}}`;
//! - OpenAI (`openai/_streaming.py`): any event whose data is a JSON object
//!   with an `error` member (chat completions send it without an event name;
//!   the Assistants API names it `error`).
//!
//! The first such event's data is classified like a response body of that
//! status, so a mid-stream `overloaded_error` is `http.529_overloaded` as it
//! would be on its own. Events are parsed as the WHATWG HTML "server-sent
//! events" section says: lines end with CRLF, LF or CR; a blank line ends an
//! event; `:` starts a comment; one space after the colon is dropped; several
//! `data` lines are joined with a newline.

use crate::json_view::View;

/// The longest stream read, in bytes; an error event after it is not seen.
const MAX_STREAM: usize = 4 * 1024 * 1024;

/// Whether a text body is an event stream: the content type says so, or the
/// text starts like one (`event:`, `data:`, `id:`, `retry:` or a `:` comment).
pub(super) fn is_event_stream(content_type: Option<&str>, text: &str) -> bool {
    if content_type.is_some_and(|ct| {
        ct.trim_start()
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
    }) {
        return true;
    }
    let t = text.trim_start_matches(['\u{feff}', '\r', '\n']);
    ["event:", "data:", "id:", "retry:", ":"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// One dispatched event.
struct Event {
    name: Option<String>,
    data: String,
}

/// The events of a stream, in order (at most [`MAX_STREAM`] bytes are read).
fn events(text: &str) -> Vec<Event> {
    let mut end = text.len().min(MAX_STREAM);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = text.get(..end).unwrap_or("");
    let mut out = Vec::new();
    let mut name: Option<String> = None;
    let mut data: Option<String> = None;
    let normalized = text.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        if line.is_empty() {
            if let Some(d) = data.take() {
                out.push(Event {
                    name: name.take(),
                    data: d,
                });
            }
            name = None;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => name = Some(value.to_owned()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
    // A stream cut off mid-event still reports its error.
    if let Some(d) = data {
        out.push(Event { name, data: d });
    }
    out
}

/// What the first error event of a stream carried.
pub(super) enum StreamError {
    /// Its data as JSON.
    Json(View<'static>),
    /// An `error` event whose data is not JSON (kept as the message).
    Text(String),
}

/// The first error event of the stream, if any.
pub(super) fn first_error(text: &str) -> Option<StreamError> {
    for e in events(text) {
        let named_error = e.name.as_deref() == Some("error");
        match View::parse(&e.data).map(View::into_owned) {
            Ok(v) if named_error && v.is_object() => return Some(StreamError::Json(v)),
            Ok(v)
                if v.get("error")
                    .is_some_and(|x| x.is_object() || x.is_string()) =>
            {
                return Some(StreamError::Json(v));
            }
            Ok(_) => {}
            Err(_) if named_error => return Some(StreamError::Text(e.data)),
            Err(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_anthropic_error_event() {
        let s = "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let Some(StreamError::Json(v)) = first_error(s) else {
            panic!("no error event");
        };
        assert_eq!(
            v.pointer("/error/type").and_then(View::as_str),
            Some("overloaded_error")
        );
    }

    #[test]
    fn finds_an_unnamed_data_error_and_joins_lines() {
        let s = ": comment\r\ndata: {\"error\":\r\ndata: {\"message\":\"m\",\"type\":\"server_error\"}}\r\n\r\n";
        let Some(StreamError::Json(v)) = first_error(s) else {
            panic!("no error event");
        };
        assert_eq!(
            v.pointer("/error/type").and_then(View::as_str),
            Some("server_error")
        );
    }

    #[test]
    fn a_clean_stream_has_no_error() {
        let s = "data: {\"choices\":[]}\n\ndata: [DONE]\n\n";
        assert!(first_error(s).is_none());
        assert!(first_error("").is_none());
        let Some(StreamError::Text(t)) = first_error("event: error\ndata: boom") else {
            panic!("no error event");
        };
        assert_eq!(t, "boom");
    }

    #[test]
    fn detects_streams() {
        assert!(is_event_stream(
            Some("text/event-stream; charset=utf-8"),
            "x"
        ));
        assert!(is_event_stream(None, "\nevent: error\n"));
        assert!(!is_event_stream(Some("text/plain"), "hello"));
    }
}
