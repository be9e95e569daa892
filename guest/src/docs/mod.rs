//! The registry as documentation: `docs/errors.md`, the MCP `## Errors` block,
//! and JSON Schemas of the outputs. Generated here, in the policy, so every
//! runtime produces the same text; CI checks the committed copies.

mod markdown;
mod schema;

pub use markdown::{errors_block, errors_block_for, markdown, markdown_for};
pub use schema::json_schema;

use crate::model::{Envelope, Upstream};
use crate::registry::CodeInfo;

/// A representative envelope for a code.
pub fn example_envelope(c: &CodeInfo) -> Envelope {
    let retry_after_ms = c.retryable.then_some(2000);
    let hint = if c.retryable {
        "Wait 2000 ms, then retry the same request with the same idempotency key.".to_owned()
    } else {
        c.recovery.to_owned()
    };
    Envelope {
        code: c.code.clone(),
        message: c.message.to_owned(),
        class: c.class,
        retryable: c.retryable,
        severity: c.severity,
        category: c.category,
        retry_after_ms,
        field: None,
        allowed_values: None,
        suggested_value: None,
        hint,
        request_id: Some("req_0123456789".to_owned()),
        related_codes: c.related_codes.clone(),
        docs_url: None,
        upstream: Upstream::default(),
        hint_from_server: false,
    }
}
