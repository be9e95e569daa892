//! Codes for provider conditions that no HTTP status expresses.

use super::{CodeDef, LLM, code_def};

pub(super) const DEFS: &[CodeDef] = &[code_def!(
    "output.malformed_tool_call",
    LLM,
    Semantic,
    Error,
    Validation,
    false,
    "The model produced a tool call that could not be used.",
    "A response (often a 200) ended because the model's tool call was malformed, unexpected or one too many (Gemini `finishReason: MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`).",
    "Re-plan: restate the tool's schema or simplify the tool set, then call the model again."
)];
