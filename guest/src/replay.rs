//! Replay safety: whether a retry may send the same call again without
//! repeating an effect or output someone already has.
//!
//! An observation may say what the call does and how far it got:
//!
//! - `"replay"`: `"read_only"` (no side effect), `"idempotent"` (repeating it
//!   has the effect of doing it once, e.g. it carries an idempotency key the
//!   server honours) or `"unsafe"` (a repeat may do it twice);
//! - `"response_started"`: `true` when part of the response's content (a body
//!   chunk, a streamed token, a tool's partial output) reached the caller before
//!   the failure. An error status line alone does not count.
//!
//! The decision then carries `replay_safe`:
//!
//! 1. a started response is never safe to replay: what was already passed on
//!    would be produced again (a call is committed once its response is used);
//! 2. otherwise a read-only or idempotent call is safe;
//! 3. otherwise (unsafe, or unknown and the context does not say
//!    `idempotent: true`) it is safe only when the failure shows that the
//!    server did not act: the request never reached it (refused, DNS, TLS,
//!    connect or pool timeout) or it refused it before processing (429, 425,
//!    503, 529).
//!
//! `replay_safe` is absent when the observation says neither, so a decision
//! for any other observation is unchanged. `replay` also stands in for the
//! context's `idempotent` when the context does not set it.

use crate::error::PolicyError;

/// What a call does, as far as repeating it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// No side effect.
    ReadOnly,
    /// Repeating it has the effect of doing it once.
    Idempotent,
    /// A repeat may do it twice.
    Unsafe,
}

impl Replay {
    /// From its JSON name.
    pub fn parse(s: &str) -> Result<Self, PolicyError> {
        match s {
            "read_only" => Ok(Self::ReadOnly),
            "idempotent" => Ok(Self::Idempotent),
            "unsafe" => Ok(Self::Unsafe),
            other => Err(PolicyError::observation(format!(
                "replay {other:?} is not one of read_only, idempotent, unsafe; use one of those or omit it"
            ))),
        }
    }

    /// Whether repeating the call cannot duplicate an effect.
    pub fn is_repeatable(self) -> bool {
        self != Self::Unsafe
    }
}

/// Failures whose request never reached the server.
const NOT_SENT: &[&str] = &[
    "network.connection_refused",
    "network.dns_temporary",
    "network.dns_not_found",
    "network.unreachable",
    "network.tls_error",
    "timeout.connect",
    "timeout.pool",
];

/// Responses that refuse the request before processing it.
const REFUSED_UNPROCESSED: &[&str] = &[
    "http.425_too_early",
    "http.429_rate_limited",
    "http.503_unavailable",
    "http.529_overloaded",
];

/// Whether a retry of the failed call is safe to replay; `None` when the
/// observation says neither `replay` nor `response_started`. `code` is the
/// envelope's code, `idempotent` the context's word.
pub(crate) fn safe(
    replay: Option<Replay>,
    response_started: Option<bool>,
    idempotent: Option<bool>,
    code: &str,
) -> Option<bool> {
    if replay.is_none() && response_started.is_none() {
        return None;
    }
    if response_started == Some(true) {
        return Some(false);
    }
    let repeatable = replay.map_or(idempotent == Some(true), Replay::is_repeatable);
    let base = code.split_once('.').map_or(code, |(_, b)| b);
    Some(repeatable || NOT_SENT.contains(&base) || REFUSED_UNPROCESSED.contains(&base))
}

#[cfg(test)]
mod tests {
    use super::{Replay, safe};

    #[test]
    fn nothing_said_nothing_decided() {
        assert_eq!(safe(None, None, Some(true), "tool.timeout.read"), None);
    }

    #[test]
    fn a_started_response_is_never_replayed() {
        for r in [Replay::ReadOnly, Replay::Idempotent, Replay::Unsafe] {
            assert_eq!(
                safe(Some(r), Some(true), None, "llm.stream.error"),
                Some(false)
            );
        }
    }

    #[test]
    fn unsafe_calls_replay_only_what_the_server_did_not_act_on() {
        let u = Some(Replay::Unsafe);
        assert_eq!(
            safe(u, None, None, "tool.network.connection_refused"),
            Some(true)
        );
        assert_eq!(
            safe(u, Some(false), None, "tool.http.429_rate_limited"),
            Some(true)
        );
        assert_eq!(safe(u, Some(false), None, "tool.timeout.read"), Some(false));
        assert_eq!(
            safe(u, None, Some(true), "tool.http.500_internal_error"),
            Some(false)
        );
        assert_eq!(
            safe(None, Some(false), None, "tool.timeout.read"),
            Some(false)
        );
        assert_eq!(
            safe(None, Some(false), Some(true), "tool.timeout.read"),
            Some(true)
        );
        assert_eq!(
            safe(
                Some(Replay::Idempotent),
                Some(false),
                None,
                "tool.timeout.read"
            ),
            Some(true)
        );
    }

    #[test]
    fn the_member_is_absent_unless_the_observation_speaks() {
        let ctx = r#"{"attempt":1,"seed":2}"#;
        let plain = crate::api::decide_json(r#"{"source":"network","code":"ECONNRESET"}"#, ctx)
            .expect("a decision");
        assert!(!plain.contains("replay_safe"), "{plain}");
        let said = crate::api::decide_json(
            r#"{"source":"network","code":"ECONNRESET","replay":"idempotent"}"#,
            ctx,
        )
        .expect("a decision");
        assert!(said.ends_with(r#","replay_safe":true}"#), "{said}");
    }

    #[test]
    fn names() {
        assert_eq!(Replay::parse("read_only").ok(), Some(Replay::ReadOnly));
        let e = Replay::parse("maybe").expect_err("not a kind");
        assert!(
            e.message.contains("read_only, idempotent, unsafe"),
            "{}",
            e.message
        );
    }
}
