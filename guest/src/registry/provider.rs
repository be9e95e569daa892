//! Codes for provider conditions that no HTTP status expresses.

use super::{ALL_CALLS, CodeDef, LLM, code_def};

pub(super) const DEFS: &[CodeDef] = &[
    code_def!(
        "output.malformed_tool_call",
        LLM,
        Semantic,
        Error,
        Validation,
        false,
        "The model produced a tool call that could not be used.",
        "A response (often a 200) ended because the model's tool call was malformed, unexpected or one too many (Gemini `finishReason: MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`).",
        "Re-plan: restate the tool's schema or simplify the tool set, then call the model again."
    ),
    code_def!(
        "conversation.state_lost",
        LLM,
        State,
        Error,
        State,
        false,
        "The server-side conversation state is gone or out of step.",
        "The provider no longer holds the conversation the request continues, or holds it in another state (Anthropic `thread_not_found`, `thread_already_continued`, `thread_fingerprint_mismatch`).",
        "Restore from your own copy: replay the full conversation as a new thread, then call again."
    ),
    code_def!(
        "stream.error",
        ALL_CALLS,
        Transient,
        Error,
        Dependency,
        true,
        "The response stream ended with an error.",
        "A streaming response (`text/event-stream`, status 2xx) carried an `event: error` (or an error object in a data event) whose data names no more specific error.",
        "Discard the partial output and retry the whole request after the backoff delay."
    ),
];
