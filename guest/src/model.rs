//! The data model: enums, the envelope and the decision. Each type has a JSON
//! form (snake_case) that is part of the public contract.

use serde::Serialize;
use serde_json::Value;

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $variant),+
        }
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The JSON name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }
            /// Parse the JSON name (also accepts kebab-case).
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($s => Some($name::$variant),)+
                    _ => {
                        let snake = s.replace('-', "_");
                        match snake.as_str() { $($s => Some($name::$variant),)+ _ => None }
                    }
                }
            }
        }
    };
}

string_enum!(
    /// The kind of call that failed.
    CallKind { /// A tool call.
        Tool = "tool", /// An LLM provider call.
        Llm = "llm", /// A call to another agent.
        Agent = "agent" }
);
string_enum!(
    /// The five recovery classes.
    ErrorClass { /// Retry with backoff.
        Transient = "transient", /// Never retry the same request.
        Permanent = "permanent", /// Re-plan with the hint.
        Semantic = "semantic", /// Take the fallback path.
        Policy = "policy", /// Restore or resume.
        State = "state" }
);
string_enum!(
    /// Severity ladder.
    Severity { /// Soft warning.
        Info = "info", /// Partial success.
        Warning = "warning", /// Recoverable failure.
        Error = "error", /// Escalate.
        Fatal = "fatal" }
);
string_enum!(
    /// Repair strategy.
    Category {
        /// Malformed request.
        Validation = "validation",
        /// Credentials.
        Auth = "auth",
        /// Too many requests.
        RateLimit = "rate_limit",
        /// Quota or billing exhausted.
        Quota = "quota",
        /// Deadline passed.
        Timeout = "timeout",
        /// Connection failed.
        Network = "network",
        /// Downstream failed.
        Dependency = "dependency",
        /// Resource missing.
        NotFound = "not_found",
        /// State conflict.
        Conflict = "conflict",
        /// Session or context state.
        State = "state",
        /// Safety or content policy.
        Safety = "safety",
        /// Cancelled.
        Cancelled = "cancelled",
        /// More input needed.
        InputRequired = "input_required",
        /// Unexpected failure.
        Internal = "internal",
    }
);
string_enum!(
    /// Where an observation came from.
    SourceKind { /// HTTP response.
        Http = "http", /// JSON-RPC.
        Jsonrpc = "jsonrpc", /// MCP.
        Mcp = "mcp", /// A2A.
        A2a = "a2a", /// Network error.
        Network = "network", /// Client exception.
        Exception = "exception", /// Caller timeout.
        Timeout = "timeout" }
);
string_enum!(
    /// Timeout phase.
    TimeoutPhase { /// Connecting.
        Connect = "connect", /// Reading.
        Read = "read", /// Writing.
        Write = "write", /// Pool.
        Pool = "pool", /// Overall deadline.
        Total = "total" }
);
string_enum!(
    /// The next step.
    Action {
        /// Sleep, then retry with the same idempotency key.
        Retry = "retry",
        /// Stop and surface the code.
        Fail = "fail",
        /// Re-plan with the hint.
        Replan = "replan",
        /// Take the fallback chain.
        Fallback = "fallback",
        /// Restore the checkpoint, then retry.
        Restore = "restore",
        /// Hand over to a human.
        Escalate = "escalate",
        /// Wait for input, then resume.
        AwaitInput = "await_input",
        /// Run compensations, then dead-letter.
        Compensate = "compensate",
        /// Write to the dead letter queue.
        DeadLetter = "dead_letter",
    }
);
string_enum!(
    /// Stability of a registry code.
    Stability { /// Never renamed or removed.
        Stable = "stable", /// May change.
        Beta = "beta", /// Replaced.
        Deprecated = "deprecated" }
);

/// What was observed, kept so nothing is lost.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Upstream {
    /// Where it came from.
    pub source: Option<SourceKind>,
    /// The provider or protocol recognised.
    pub provider: Option<String>,
    /// The HTTP status.
    pub status: Option<u16>,
    /// The provider's own error code, as text.
    pub code: Option<String>,
    /// The provider's error type or status name.
    #[serde(rename = "type")]
    pub error_type: Option<String>,
}

/// The agent-readable error envelope.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Envelope {
    /// Stable dotted registry code.
    pub code: String,
    /// Short declarative sentence.
    pub message: String,
    /// Recovery class.
    pub class: ErrorClass,
    /// True only for transient failures.
    pub retryable: bool,
    /// Escalation level.
    pub severity: Severity,
    /// Repair strategy.
    pub category: Category,
    /// Server-requested delay (classify) or chosen delay (retry decision).
    pub retry_after_ms: Option<u64>,
    /// Offending field.
    pub field: Option<String>,
    /// Allowed values (any JSON).
    pub allowed_values: Option<Value>,
    /// Suggested value (any JSON).
    pub suggested_value: Option<Value>,
    /// Imperative one-line hint.
    pub hint: String,
    /// Request id.
    pub request_id: Option<String>,
    /// Sibling codes.
    pub related_codes: Vec<String>,
    /// Documentation link.
    pub docs_url: Option<String>,
    /// What was observed.
    pub upstream: Upstream,
    /// Whether `hint` came from the server (then decisions never rewrite it).
    #[serde(skip)]
    pub hint_from_server: bool,
}

/// The decision: the next step and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    /// The next step.
    pub action: Action,
    /// For retry: the delay in ms.
    pub delay_ms: Option<u64>,
    /// The attempt that just failed.
    pub attempt: u32,
    /// The attempt limit that applied.
    pub max_attempts: u32,
    /// Budget left after the delay.
    pub budget_remaining_ms: u64,
    /// Machine-readable reason.
    pub reason: &'static str,
    /// Registry code for the decision itself.
    pub reason_code: Option<&'static str>,
    /// The error, normalized.
    pub envelope: Envelope,
    /// The policy's circuit-breaker thresholds, which the recovery loop applies
    /// to the failure decided on (absent from decisions of policies built
    /// before it existed; the loop then uses 3 / 30 000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<crate::config::BreakerThresholds>,
    /// Whether a retry may send the call again without repeating an effect or
    /// output already had (`docs/frameworks-and-protocols.md`); absent when the
    /// observation says neither `replay` nor `response_started`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_safe: Option<bool>,
    /// A policy document's fallback chains by target (`docs/policy-documents.md`);
    /// absent unless the document sets them. The recovery loop falls back
    /// along the chain of a step's target when the step names no fallbacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// A policy document's dead-letter owner, runbook and depth threshold by
    /// tool pattern; absent unless the document sets them. The recovery loop
    /// uses the entry of a step's tool for what the run configuration leaves unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letters:
        Option<std::collections::BTreeMap<String, crate::runtime::config::DeadLetterConfig>>,
}
