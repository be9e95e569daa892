//! The exports of the world, as methods on [`Policy`].
//!
//! The `*_json` methods pass text through unchanged (hosts print it as is, so
//! output is byte-identical across Rust, Node and Python); the host only
//! checks that what comes back is JSON of the promised shape (see `output.rs`
//! for the envelope and the decision). The typed
//! methods use the generated [`types`](crate::types).

use crate::Policy;
use crate::component::gen_::exports::agent::recovery::types::{
    ErrorKind as WitErrorKind, PolicyError,
};
use crate::component::output::{self, Shape};
use crate::error::{Error, ErrorKind, PolicyErrorKind, Result};
use crate::types::{
    CallKind, CodeInfo, Context, Decision, Envelope, Failure, Observation, PolicyConfig,
    PolicyInfo, RenderFormat,
};

impl Policy {
    /// Normalizes a JSON observation into an envelope (JSON text).
    ///
    /// ```
    /// let policy = agent_recovery::Policy::reference()?;
    /// let envelope = policy.classify_json(r#"{"source":"network","code":"ECONNRESET"}"#)?;
    /// assert!(envelope.starts_with('{'));
    /// # Ok::<(), agent_recovery::Error>(())
    /// ```
    pub fn classify_json(&self, observation: &str) -> Result<String> {
        let what = "classify-json";
        let out = self.call(what, observation.len(), |store, p| {
            p.agent_recovery_classify()
                .call_classify_json(store, observation)
        })?;
        output::check(what, Shape::Envelope, out.map_err(policy_error)?)
    }

    /// Decides the next step for a JSON observation and a JSON context
    /// (`{}` when the observation carries a `context` member); returns the
    /// decision as JSON text.
    pub fn decide_json(&self, observation: &str, context: &str) -> Result<String> {
        let what = "decide-json";
        let out = self.call(what, observation.len() + context.len(), |store, p| {
            p.agent_recovery_decide()
                .call_decide_json(store, observation, context)
        })?;
        output::check(what, Shape::Decision, out.map_err(policy_error)?)
    }

    /// Normalizes a typed observation.
    pub fn classify(&self, observation: &Observation) -> Result<Envelope> {
        let size = observation_bytes(observation);
        self.call("classify", size, |store, p| {
            p.agent_recovery_classify()
                .call_classify(store, observation)
        })?
        .map_err(policy_error)
    }

    /// Decides the next step for a typed observation.
    pub fn decide(&self, observation: &Observation, context: Context) -> Result<Decision> {
        let size = observation_bytes(observation);
        self.call("decide", size, |store, p| {
            p.agent_recovery_decide()
                .call_decide(store, observation, context)
        })?
        .map_err(policy_error)
    }

    /// The full-jitter backoff delay in milliseconds before the retry that
    /// follows failed attempt `attempt` (from 1).
    pub fn backoff(
        &self,
        call: CallKind,
        attempt: u32,
        seed: Option<u64>,
        config: Option<PolicyConfig>,
    ) -> Result<u64> {
        self.call("backoff.delay", 0, |store, p| {
            p.agent_recovery_backoff()
                .call_delay(store, call, attempt, seed, config)
        })?
        .map_err(policy_error)
    }

    /// The idempotency key (hex sha256) of one step's tool call.
    pub fn key(&self, run_id: &str, step_id: &str, tool: &str, args_json: &str) -> Result<String> {
        let size = run_id.len() + step_id.len() + tool.len() + args_json.len();
        self.call("idempotency.key", size, |store, p| {
            p.agent_recovery_idempotency()
                .call_key(store, run_id, step_id, tool, args_json)
        })?
        .map_err(policy_error)
    }

    /// Every code the policy can emit, sorted by code.
    pub fn codes(&self) -> Result<Vec<CodeInfo>> {
        self.call("registry.codes", 0, |store, p| {
            p.agent_recovery_registry().call_codes(store)
        })
    }

    /// One code of the registry, if it exists.
    pub fn lookup(&self, code: &str) -> Result<Option<CodeInfo>> {
        self.call("registry.lookup", code.len(), |store, p| {
            p.agent_recovery_registry().call_lookup(store, code)
        })
    }

    /// The registry as JSON text (an array of code objects).
    pub fn registry_json(&self) -> Result<String> {
        let what = "registry.codes-json";
        let out = self.call(what, 0, |store, p| {
            p.agent_recovery_registry().call_codes_json(store)
        })?;
        json(what, out, b'[')
    }

    /// The registry as Markdown, one section per code (this is `docs/errors.md`
    /// for the reference policy).
    pub fn registry_markdown(&self) -> Result<String> {
        self.call("registry.codes-markdown", 0, |store, p| {
            p.agent_recovery_registry().call_codes_markdown(store)
        })
    }

    /// The MCP `## Errors` block for a tool description, for `codes` (codes or
    /// code prefixes such as `tool.http.`; empty means all).
    pub fn errors_block(&self, codes: &[String]) -> Result<String> {
        let size = codes.iter().map(String::len).sum();
        self.call("registry.errors-block", size, |store, p| {
            p.agent_recovery_registry().call_errors_block(store, codes)
        })
    }

    /// The JSON Schema of an output (`envelope`, `decision` or `code-info`),
    /// if the policy knows the name.
    pub fn json_schema(&self, name: &str) -> Result<Option<String>> {
        let what = "registry.json-schema";
        let out = self.call(what, name.len(), |store, p| {
            p.agent_recovery_registry().call_json_schema(store, name)
        })?;
        out.map(|text| json(what, text, b'{')).transpose()
    }

    /// Renders an envelope (JSON text) for a boundary; `options` is a JSON
    /// object or empty.
    pub fn render_json(
        &self,
        envelope: &str,
        format: RenderFormat,
        options: &str,
    ) -> Result<String> {
        self.call("render-json", envelope.len() + options.len(), |store, p| {
            p.agent_recovery_render()
                .call_render_json(store, envelope, format, options)
        })?
        .map_err(policy_error)
    }

    /// Name, version and contract of the policy.
    pub fn info(&self) -> Result<PolicyInfo> {
        self.call("meta.info", 0, |store, p| {
            p.agent_recovery_meta().call_info(store)
        })
    }

    /// The policy's smoke set as JSON text (see [`Policy::run_smoke_tests`]).
    pub fn smoke_tests(&self) -> Result<String> {
        let what = "meta.smoke-tests";
        let out = self.call(what, 0, |store, p| {
            p.agent_recovery_meta().call_smoke_tests(store)
        })?;
        json(what, out, b'[')
    }
}

/// The component's own error, as an [`Error`] of kind [`ErrorKind::Policy`].
fn policy_error(error: PolicyError) -> Error {
    let kind = match error.kind {
        WitErrorKind::InvalidJson => PolicyErrorKind::InvalidJson,
        WitErrorKind::InvalidObservation => PolicyErrorKind::InvalidObservation,
        WitErrorKind::InvalidContext => PolicyErrorKind::InvalidContext,
        WitErrorKind::InvalidConfig => PolicyErrorKind::InvalidConfig,
        WitErrorKind::InvalidArgument => PolicyErrorKind::InvalidArgument,
        WitErrorKind::TooLarge => PolicyErrorKind::TooLarge,
        WitErrorKind::Internal => PolicyErrorKind::Internal,
    };
    Error::new(ErrorKind::Policy(kind), error.message)
}

/// Checks that `text` is one JSON value opening with `open` (`{` or `[`).
fn json(what: &str, text: String, open: u8) -> Result<String> {
    let starts = text.trim_start().as_bytes().first() == Some(&open);
    let parses = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
    if starts && parses {
        return Ok(text);
    }
    let shape = if open == b'{' { "object" } else { "array" };
    let head: String = text.chars().take(60).collect();
    Err(Error::new(
        ErrorKind::InvalidOutput,
        format!(
            "`{what}` returned text that is not a JSON {shape}: {head:?}; the component does not follow the contract, report it to its authors"
        ),
    ))
}

/// The bytes of text a typed observation carries, for the input limit and fuel.
fn observation_bytes(observation: &Observation) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let failure = match &observation.failure {
        Failure::Http(r) => {
            text(&r.body)
                + r.headers
                    .iter()
                    .map(|(n, v)| n.len() + v.len())
                    .sum::<usize>()
        }
        Failure::Rpc(m) => m.message.len(),
        Failure::Network(n) => n.code.len() + text(&n.message),
        Failure::Exception(e) => e.exception_type.len() + text(&e.message),
        Failure::Timeout(_) => 0,
    };
    failure + text(&observation.provider) + text(&observation.request_id)
}
