//! Who this policy is, and the smoke set a host runs before activating it.

/// Policy name.
pub const NAME: &str = "agent-recovery-reference";
/// Policy version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Contract (WIT package) version.
pub const CONTRACT: &str = "0.1.0";
/// One line on what it is.
pub const DESCRIPTION: &str =
    "The reference recovery policy: the decision flow and the agent-readable envelope.";

/// The smoke set: JSON array of `{"observation", "context", "expect": {"action", "code"}}`.
pub const SMOKE_TESTS: &str = r#"[
{"observation":{"source":"http","status":429,"headers":{"retry-after":"1"}},"context":{"call":"tool","attempt":1,"seed":7},"expect":{"action":"retry","code":"tool.http.429_rate_limited"}},
{"observation":{"source":"http","status":400},"context":{"call":"tool","attempt":1,"seed":7},"expect":{"action":"fail","code":"tool.http.400_bad_request"}},
{"observation":{"source":"timeout","phase":"connect","after_ms":5000},"context":{"call":"tool","attempt":5,"seed":7},"expect":{"action":"dead_letter","code":"tool.timeout.connect"}},
{"observation":{"source":"a2a","message":{"jsonrpc":"2.0","id":1,"result":{"id":"t1","status":{"state":"input-required"}}}},"context":{"attempt":1},"expect":{"action":"await_input","code":"agent.task.input_required"}}
]"#;
