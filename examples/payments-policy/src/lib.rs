//! A stricter recovery policy for a payments agent: what a platform team would
//! actually write on top of the reference policy.
//!
//! Differences from the reference:
//! - **One retry for LLM calls** (`max_attempts` 2): a payment flow should not
//!   wait on a struggling model; it falls back instead.
//! - **Three attempts for tools**, and a **20 s run retry budget** (not 60 s):
//!   the user is waiting at a checkout.
//! - **HTTP 409 is permanent**: a conflict on a payment (already captured,
//!   idempotency key in flight) must never be "restored and retried" blindly;
//!   fail and let a human or the saga look at it.
//! - **Never retry an ambiguous failure without an idempotency key**, even if
//!   the caller did not say `idempotent: false` — money may have moved.
//! - **The circuit breaker opens after 2 consecutive transient failures, for
//!   60 s** ([`BREAKER`]; the reference: 3 / 30 s). Two 503s in a row from a
//!   payment processor mean an incident more often than a blip, and every
//!   further charge attempt against it is one more possibly-ambiguous charge
//!   and one more customer waiting. 60 s is three times the 20 s run budget:
//!   a checkout that finds the processor's breaker open is never made to wait
//!   for the probe (the wait exceeds its budget, so it ends at once, or a
//!   fallback processor takes it), and the probe comes after the checkouts
//!   in flight have given up.
//!
//! Its registry says so: [`Payments::registry`] makes the three `http.409_conflict`
//! codes permanent with this policy's hint, so `codes-json`, the markdown docs
//! (`agent-recovery --policy payments_policy.wasm registry --format markdown`)
//! and the MCP `## Errors` block document the rule it applies.
//!
//! Everything else (normalization, rendering, keys) is the reference.

use agent_recovery_policy::Registry;
use agent_recovery_policy::{
    Action, Context, Decision, Envelope, ErrorClass, Observation, PolicyError,
};
use agent_recovery_policy::{
    BackoffOverrides, BreakerOverrides, BreakerThresholds, ConfigOverrides,
};
use agent_recovery_policy::{PolicyInfo, RecoveryPolicy};

/// The payments policy.
pub struct Payments;

/// This policy's circuit-breaker thresholds: open after 2 consecutive
/// transient failures, for 60 s (see the crate documentation for why).
pub const BREAKER: BreakerThresholds = BreakerThresholds {
    failure_threshold: 2,
    open_ms: 60_000,
    rate: None,
};

/// The parameters this policy imposes; a caller may tighten them further, never loosen.
pub const LIMITS: ConfigOverrides = ConfigOverrides {
    tool: Some(BackoffOverrides {
        base_ms: Some(250),
        cap_ms: Some(5_000),
        max_attempts: Some(3),
    }),
    llm: Some(BackoffOverrides {
        base_ms: Some(1_000),
        cap_ms: Some(5_000),
        max_attempts: Some(2),
    }),
    agent: Some(BackoffOverrides {
        base_ms: Some(500),
        cap_ms: Some(5_000),
        max_attempts: Some(2),
    }),
    retry_budget_ms: Some(20_000),
    breaker: Some(BreakerOverrides {
        failure_threshold: Some(BREAKER.failure_threshold),
        open_ms: Some(BREAKER.open_ms),
        rate: None,
    }),
};

fn tighter(
    limit: Option<BackoffOverrides>,
    asked: Option<BackoffOverrides>,
) -> Option<BackoffOverrides> {
    let (Some(l), a) = (limit, asked.unwrap_or_default()) else {
        return asked;
    };
    let min = |x: Option<u64>, y: Option<u64>| match (x, y) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    Some(BackoffOverrides {
        base_ms: min(l.base_ms, a.base_ms),
        cap_ms: min(l.cap_ms, a.cap_ms),
        max_attempts: match (l.max_attempts, a.max_attempts) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
    })
}

/// The caller's configuration, clamped to [`LIMITS`]. For the breaker,
/// tighter means opening sooner and staying open longer: a caller may lower
/// `failure_threshold` below 2 or raise `open_ms` above 60 000, not the reverse.
pub fn clamp(asked: Option<ConfigOverrides>) -> ConfigOverrides {
    let a = asked.unwrap_or_default();
    let b = a.breaker.unwrap_or_default();
    ConfigOverrides {
        tool: tighter(LIMITS.tool, a.tool),
        llm: tighter(LIMITS.llm, a.llm),
        agent: tighter(LIMITS.agent, a.agent),
        retry_budget_ms: Some(a.retry_budget_ms.map_or(20_000, |b| b.min(20_000))),
        breaker: Some(BreakerOverrides {
            failure_threshold: Some(b.failure_threshold.map_or(BREAKER.failure_threshold, |n| {
                n.min(BREAKER.failure_threshold)
            })),
            open_ms: Some(
                b.open_ms
                    .map_or(BREAKER.open_ms, |ms| ms.max(BREAKER.open_ms)),
            ),
            // Consecutive failures only: a failure-rate mode could open later.
            rate: None,
        }),
    }
}

fn is_conflict(env: &Envelope) -> bool {
    env.code.ends_with(".http.409_conflict")
}

impl RecoveryPolicy for Payments {
    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "payments-strict".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description:
                "Stricter recovery for payment agents: 1 LLM retry, 20 s budget, 409 permanent."
                    .into(),
        }
    }

    fn breaker() -> BreakerThresholds {
        BREAKER
    }

    fn classify(obs: &Observation) -> Result<Envelope, PolicyError> {
        let env = agent_recovery_policy::classify(obs)?;
        Ok(if is_conflict(&env) {
            Self::classify_envelope(env)
        } else {
            env
        })
    }

    fn decide(obs: Observation, mut ctx: Context) -> Result<Decision, PolicyError> {
        ctx.config = Some(clamp(ctx.config));
        // Money may have moved: without an explicit idempotency guarantee, treat the call as not idempotent.
        if ctx.idempotent.is_none() {
            ctx.idempotent = Some(false);
        }
        let mut d = agent_recovery_policy::decide(obs, ctx)?;
        if is_conflict(&d.envelope) {
            d.envelope = Self::classify_envelope(d.envelope);
            d.action = Action::Fail;
            d.reason = "permanent";
            d.reason_code = None;
        }
        Ok(d)
    }

    fn smoke_tests() -> String {
        SMOKE_TESTS.to_owned()
    }

    fn registry() -> Registry {
        CONFLICT_CODES
            .iter()
            .fold(Registry::reference(), |registry, code| {
                registry
                    .set_class(code, ErrorClass::Permanent)
                    .set_cause(code, CONFLICT_CAUSE)
                    .set_recovery(code, CONFLICT_HINT)
            })
    }
}

/// The codes of an HTTP 409, on every surface.
pub const CONFLICT_CODES: [&str; 3] = [
    "agent.http.409_conflict",
    "llm.http.409_conflict",
    "tool.http.409_conflict",
];

/// What this policy's documentation says about a 409.
const CONFLICT_CAUSE: &str = "The server answered 409 on a payment call: already captured, or an idempotency key in flight. payments-strict treats it as permanent.";

/// This policy's hint for a 409 (envelopes and documentation alike).
pub const CONFLICT_HINT: &str = "Do not retry: check the payment's current state (it may already be captured) before any new attempt.";

impl Payments {
    /// A 409 made permanent.
    fn classify_envelope(mut env: Envelope) -> Envelope {
        env.class = ErrorClass::Permanent;
        env.retryable = false;
        env.hint = CONFLICT_HINT.into();
        env
    }
}

/// The smoke set the host runs before activating this policy.
pub const SMOKE_TESTS: &str = r#"[
{"observation":{"source":"http","status":409},"context":{"call":"tool","attempt":1},"expect":{"action":"fail","code":"tool.http.409_conflict"}},
{"observation":{"source":"http","status":503},"context":{"call":"llm","attempt":2,"seed":1},"expect":{"action":"dead_letter","code":"llm.http.503_unavailable"}},
{"observation":{"source":"http","status":429,"headers":{"retry-after":"1"}},"context":{"call":"tool","attempt":1,"seed":7},"expect":{"action":"retry","code":"tool.http.429_rate_limited"}},
{"observation":{"source":"timeout","phase":"read"},"context":{"call":"tool","attempt":1},"expect":{"action":"fail","code":"tool.timeout.read"}}
]"#;

#[cfg(target_arch = "wasm32")]
agent_recovery_policy::export_policy!(Payments, "../../wit/agent-recovery@0.1.0");
