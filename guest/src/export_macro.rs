/// Export a [`RecoveryPolicy`] implementation as the `recovery-policy` component.
///
/// Use it once, at the root of a `cdylib` crate built for `wasm32-wasip2` that
/// depends on `wit-bindgen` (the same version as this crate) and on this crate:
///
/// ```text
/// struct MyPolicy;
/// impl agent_recovery_policy::RecoveryPolicy for MyPolicy { /* ... */ }
/// agent_recovery_policy::export_policy!(MyPolicy, "../wit/agent-recovery@0.1.0");
/// ```
///
/// The second argument is the path of the published contract's folder,
/// `wit/agent-recovery@0.1.0/` of this repository, relative to the crate's
/// `Cargo.toml`. All WIT conversions are generated here; your type only
/// deals in this crate's Rust types.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty, $path:literal) => {
        $crate::__export_policy_impl!(
            $policy,
            { world: "recovery-policy", path: $path },
            recovery,
        );
    };
}

/// The body of [`export_policy!`]: `$gen` is the `wit_bindgen::generate!`
/// input, `$pkg` the module wit-bindgen names the 0.1 package (`recovery`, or
/// `recovery0_1_0` when 0.2 is in the same resolve), and `$extra` more items for
/// the generated module (the reference adds its `runtime@0.2.0` export there).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_policy_impl {
    ($policy:ty, $gen:tt, $pkg:ident, $($extra:tt)*) => {
        #[doc(hidden)]
        type __AgentRecoveryExportedPolicy = $policy;

        #[doc(hidden)]
        #[allow(missing_docs, clippy::all)]
        mod __agent_recovery_export {
        use $crate::__private::config::{BackoffOverrides, ConfigOverrides};
        use $crate::__private::decide::{Context, Seed};
        use $crate::{ErrorKind as K, PolicyError as E};
        use $crate::__private::headers::Headers;
        use $crate::__private::model as m;
        use $crate::__private::observation::{self as o, Body, Failure, Observation};
        use $crate::__private::registry::CodeInfo;
        use $crate::__private::sdk::RecoveryPolicy as _;
        type P = super::__AgentRecoveryExportedPolicy;

        ::wit_bindgen::generate!($gen);

use exports::agent::$pkg::{
    backoff, classify, decide, idempotency, meta, observation as wo, registry, render, types as t,
};

struct Adapter;
        export!(Adapter);

fn err(e: E) -> t::PolicyError {
    t::PolicyError {
        kind: match e.kind {
            K::InvalidJson => t::ErrorKind::InvalidJson,
            K::InvalidObservation => t::ErrorKind::InvalidObservation,
            K::InvalidContext => t::ErrorKind::InvalidContext,
            K::InvalidConfig => t::ErrorKind::InvalidConfig,
            K::InvalidArgument => t::ErrorKind::InvalidArgument,
            K::TooLarge => t::ErrorKind::TooLarge,
            _ => t::ErrorKind::Internal,
        },
        message: e.message,
    }
}

fn call_in(c: t::CallKind) -> m::CallKind {
    match c {
        t::CallKind::Tool => m::CallKind::Tool,
        t::CallKind::Llm => m::CallKind::Llm,
        t::CallKind::Agent => m::CallKind::Agent,
    }
}

fn class_out(c: m::ErrorClass) -> t::ErrorClass {
    match c {
        m::ErrorClass::Transient => t::ErrorClass::Transient,
        m::ErrorClass::Permanent => t::ErrorClass::Permanent,
        m::ErrorClass::Semantic => t::ErrorClass::Semantic,
        m::ErrorClass::Policy => t::ErrorClass::Policy,
        m::ErrorClass::State => t::ErrorClass::State,
    }
}

fn severity_out(s: m::Severity) -> t::Severity {
    match s {
        m::Severity::Info => t::Severity::Info,
        m::Severity::Warning => t::Severity::Warning,
        m::Severity::Error => t::Severity::Error,
        m::Severity::Fatal => t::Severity::Fatal,
    }
}

fn category_out(c: m::Category) -> t::Category {
    use m::Category as C;
    match c {
        C::Validation => t::Category::Validation,
        C::Auth => t::Category::Auth,
        C::RateLimit => t::Category::RateLimit,
        C::Quota => t::Category::Quota,
        C::Timeout => t::Category::Timeout,
        C::Network => t::Category::Network,
        C::Dependency => t::Category::Dependency,
        C::NotFound => t::Category::NotFound,
        C::Conflict => t::Category::Conflict,
        C::State => t::Category::State,
        C::Safety => t::Category::Safety,
        C::Cancelled => t::Category::Cancelled,
        C::InputRequired => t::Category::InputRequired,
        C::Internal => t::Category::Internal,
    }
}

fn source_out(s: m::SourceKind) -> t::SourceKind {
    match s {
        m::SourceKind::Http => t::SourceKind::Http,
        m::SourceKind::Jsonrpc => t::SourceKind::Jsonrpc,
        m::SourceKind::Mcp => t::SourceKind::Mcp,
        m::SourceKind::A2a => t::SourceKind::A2a,
        m::SourceKind::Network => t::SourceKind::Network,
        m::SourceKind::Exception => t::SourceKind::Exception,
        m::SourceKind::Timeout => t::SourceKind::Timeout,
    }
}

fn action_out(a: m::Action) -> t::Action {
    match a {
        m::Action::Retry => t::Action::Retry,
        m::Action::Fail => t::Action::Fail,
        m::Action::Replan => t::Action::Replan,
        m::Action::Fallback => t::Action::Fallback,
        m::Action::Restore => t::Action::Restore,
        m::Action::Escalate => t::Action::Escalate,
        m::Action::AwaitInput => t::Action::AwaitInput,
        m::Action::Compensate => t::Action::Compensate,
        m::Action::DeadLetter => t::Action::DeadLetter,
    }
}

fn envelope_out(e: m::Envelope) -> t::Envelope {
    t::Envelope {
        code: e.code,
        message: e.message,
        class: class_out(e.class),
        retryable: e.retryable,
        severity: severity_out(e.severity),
        category: category_out(e.category),
        retry_after_ms: e.retry_after_ms,
        field: e.field,
        allowed_values: e.allowed_values.map(|v| v.to_string()),
        suggested_value: e.suggested_value.map(|v| v.to_string()),
        hint: e.hint,
        request_id: e.request_id,
        related_codes: e.related_codes,
        docs_url: e.docs_url,
        upstream: t::Upstream {
            source: source_out(e.upstream.source.unwrap_or(m::SourceKind::Http)),
            provider: e.upstream.provider,
            status: e.upstream.status,
            code: e.upstream.code,
            error_type: e.upstream.error_type,
        },
    }
}

fn observation_in(obs: wo::Observation) -> Result<Observation, E> {
    let failure = match obs.failure {
        wo::Failure::Http(h) => Failure::Http {
            status: h.status,
            headers: Headers::from_pairs(h.headers),
            body: h.body.map_or(Body::Empty, Body::from_text),
        },
        wo::Failure::Rpc(r) => Failure::Rpc {
            protocol: match r.protocol {
                wo::RpcProtocol::Jsonrpc => o::Protocol::JsonRpc,
                wo::RpcProtocol::Mcp => o::Protocol::Mcp,
                wo::RpcProtocol::A2a => o::Protocol::A2a,
            },
            message: $crate::__private::serde_json::from_str(&r.message).map_err(|e| E::json("message", &e))?,
        },
        wo::Failure::Network(n) => Failure::Network {
            code: n.code,
            message: n.message,
        },
        wo::Failure::Exception(x) => Failure::Exception {
            type_name: x.exception_type,
            message: x.message,
            detail: None,
        },
        wo::Failure::Timeout(x) => Failure::Timeout {
            phase: match x.phase {
                t::TimeoutPhase::Connect => m::TimeoutPhase::Connect,
                t::TimeoutPhase::Read => m::TimeoutPhase::Read,
                t::TimeoutPhase::Write => m::TimeoutPhase::Write,
                t::TimeoutPhase::Pool => m::TimeoutPhase::Pool,
                t::TimeoutPhase::Total => m::TimeoutPhase::Total,
            },
            after_ms: x.after_ms,
        },
    };
    let mut out = Observation::new(failure);
    out.call = obs.call.map(call_in);
    out.provider = obs.provider.map(|p| p.to_ascii_lowercase());
    out.request_id = obs.request_id;
    Ok(out)
}

fn backoff_in(b: t::BackoffConfig) -> BackoffOverrides {
    BackoffOverrides {
        base_ms: Some(b.base_ms),
        cap_ms: Some(b.cap_ms),
        max_attempts: Some(b.max_attempts),
    }
}

fn config_in(c: t::PolicyConfig) -> ConfigOverrides {
    ConfigOverrides {
        tool: c.tool.map(backoff_in),
        llm: c.llm.map(backoff_in),
        agent: c.agent.map(backoff_in),
        retry_budget_ms: c.retry_budget_ms,
        breaker: None,
    }
}

fn context_in(c: t::Context) -> Context {
    Context {
        call: c.call.map(|k| call_in(k).as_str().to_owned()),
        attempt: Some(c.attempt),
        elapsed_ms: Some(c.elapsed_ms),
        seed: c.seed.map(Seed),
        now_ms: c.now_ms,
        idempotent: c.idempotent,
        checkpoint_available: c.checkpoint_available,
        fallback_available: c.fallback_available,
        compensations_pending: c.compensations_pending,
        config: c.config.map(config_in),
    }
}

fn code_out(c: &CodeInfo) -> t::CodeInfo {
    t::CodeInfo {
        code: c.code.clone(),
        class: class_out(c.class),
        severity: severity_out(c.severity),
        category: category_out(c.category),
        retryable: c.retryable,
        cause: c.cause.to_owned(),
        recovery: c.recovery.to_owned(),
        stability: match c.stability {
            m::Stability::Stable => t::Stability::Stable,
            m::Stability::Beta => t::Stability::Beta,
            m::Stability::Deprecated => t::Stability::Deprecated,
        },
        replaced_by: c.replaced_by.clone(),
        related_codes: c.related_codes.clone(),
    }
}

impl classify::Guest for Adapter {
    fn classify(observation: wo::Observation) -> Result<t::Envelope, t::PolicyError> {
        let obs = observation_in(observation).map_err(err)?;
        P::classify(&obs).map(envelope_out).map_err(err)
    }

    fn classify_json(observation: String) -> Result<String, t::PolicyError> {
        P::classify_json(&observation).map_err(err)
    }
}

impl decide::Guest for Adapter {
    fn decide(
        observation: wo::Observation,
        context: t::Context,
    ) -> Result<t::Decision, t::PolicyError> {
        let obs = observation_in(observation).map_err(err)?;
        let d = P::decide(obs, context_in(context)).map_err(err)?;
        Ok(t::Decision {
            action: action_out(d.action),
            delay_ms: d.delay_ms,
            attempt: d.attempt,
            max_attempts: d.max_attempts,
            budget_remaining_ms: d.budget_remaining_ms,
            reason: d.reason.to_owned(),
            reason_code: d.reason_code.map(str::to_owned),
            envelope: envelope_out(d.envelope),
        })
    }

    fn decide_json(observation: String, context: String) -> Result<String, t::PolicyError> {
        P::decide_json(&observation, &context).map_err(err)
    }
}

impl backoff::Guest for Adapter {
    fn delay(
        call: t::CallKind,
        attempt: u32,
        seed: Option<u64>,
        config: Option<t::PolicyConfig>,
    ) -> Result<u64, t::PolicyError> {
        let cfg = config.map(config_in);
        P::backoff_delay(call_in(call), attempt, seed, cfg.as_ref()).map_err(err)
    }
}

/// The exported policy's own registry (`RecoveryPolicy::registry`), built once.
fn policy_registry() -> &'static $crate::__private::registry::Registry {
    static REGISTRY: ::std::sync::OnceLock<$crate::__private::registry::Registry> = ::std::sync::OnceLock::new();
    REGISTRY.get_or_init(P::registry)
}

impl registry::Guest for Adapter {
    fn codes() -> Vec<t::CodeInfo> {
        policy_registry().codes().iter().map(code_out).collect()
    }

    fn lookup(code: String) -> Option<t::CodeInfo> {
        policy_registry().lookup(&code).map(code_out)
    }

    fn codes_json() -> String {
        policy_registry().to_json()
    }

    fn codes_markdown() -> String {
        let name = P::info().name;
        let who = if name == $crate::__private::meta::NAME {
            "the reference policy".to_owned()
        } else {
            format!("the policy `{name}`")
        };
        $crate::__private::docs::markdown_for(policy_registry().codes(), &who)
    }

    fn errors_block(codes: Vec<String>) -> String {
        $crate::__private::docs::errors_block_for(policy_registry().codes(), &codes)
    }

    fn json_schema(name: String) -> Option<String> {
        $crate::__private::docs::json_schema(&name)
    }
}

impl idempotency::Guest for Adapter {
    fn key(
        run_id: String,
        step_id: String,
        tool: String,
        args_json: String,
    ) -> Result<String, t::PolicyError> {
        $crate::idempotency_key(&run_id, &step_id, &tool, &args_json).map_err(err)
    }
}

impl render::Guest for Adapter {
    fn render_json(
        envelope: String,
        format: render::RenderFormat,
        options: String,
    ) -> Result<String, t::PolicyError> {
        use $crate::__private::render::Format as F;
        let f = match format {
            render::RenderFormat::JsonrpcError => F::JsonrpcError,
            render::RenderFormat::McpToolResult => F::McpToolResult,
            render::RenderFormat::A2aTaskStatus => F::A2aTaskStatus,
            render::RenderFormat::ProblemJson => F::ProblemJson,
            render::RenderFormat::ModelToolResult => F::ModelToolResult,
            render::RenderFormat::CoordinatorText => F::CoordinatorText,
            render::RenderFormat::DownstreamWrap => F::DownstreamWrap,
        };
        $crate::__private::render::render_json(&envelope, f, &options).map_err(err)
    }
}

impl meta::Guest for Adapter {
    fn info() -> t::PolicyInfo {
        let i = P::info();
        t::PolicyInfo { name: i.name, version: i.version, contract: $crate::__private::meta::CONTRACT.to_owned(), description: i.description }
    }

    fn smoke_tests() -> String {
        P::smoke_tests()
    }
}

        $($extra)*
        }
    };
}
