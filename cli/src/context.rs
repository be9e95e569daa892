//! The decision context and policy parameters built from flags and `--config`.
//!
//! For `decide`, flags become members of the context object passed next to
//! the observation; the policy fills members the flags leave out from the
//! observation's own `context` member, so flags win. `--config` is merged
//! over the observation's `context.config` (the file wins, member by member).
//!
//! For `backoff` the parameters are typed (WIT `policy-config`), whose
//! per-call records have no optional fields, so members the file leaves out
//! take the contract's documented defaults.

use serde::Deserialize;
use serde_json::{Map, Value};

use agent_recovery::types::{BackoffConfig, CallKind, PolicyConfig};

use crate::Usage;
use crate::args::{CallArg, ContextFlags};

/// The WIT call kind for `--call`.
pub fn call_kind(call: CallArg) -> CallKind {
    match call {
        CallArg::Tool => CallKind::Tool,
        CallArg::Llm => CallKind::Llm,
        CallArg::Agent => CallKind::Agent,
    }
}

/// The context JSON for `decide`: `{}` when no flag and no config is given.
pub fn decide_context(
    flags: &ContextFlags,
    observation: &str,
    config: Option<Map<String, Value>>,
) -> Result<String, Usage> {
    let mut ctx = Map::new();
    if let Some(call) = flags.call {
        ctx.insert("call".into(), Value::from(call.name()));
    }
    if let Some(attempt) = flags.attempt {
        ctx.insert("attempt".into(), Value::from(attempt));
    }
    for (value, key) in [
        (flags.elapsed_ms, "elapsed_ms"),
        (flags.seed, "seed"),
        (flags.now_ms, "now_ms"),
    ] {
        if let Some(n) = value {
            ctx.insert(key.into(), Value::from(n));
        }
    }
    if let Some(file) = config {
        let mut merged = embedded_config(observation);
        merge(&mut merged, file);
        ctx.insert("config".into(), Value::Object(merged));
    }
    Ok(Value::Object(ctx).to_string())
}

/// `context.config` of the observation, if it parses and has one.
fn embedded_config(observation: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(observation) {
        Ok(Value::Object(mut obs)) => match obs.remove("context") {
            Some(Value::Object(mut ctx)) => match ctx.remove("config") {
                Some(Value::Object(config)) => config,
                _ => Map::new(),
            },
            _ => Map::new(),
        },
        _ => Map::new(),
    }
}

/// Merges `over` into `base`, recursively for objects; `over` wins.
fn merge(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(b)), Value::Object(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    tool: Option<BackoffFile>,
    llm: Option<BackoffFile>,
    agent: Option<BackoffFile>,
    retry_budget_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackoffFile {
    base_ms: Option<u64>,
    cap_ms: Option<u64>,
    max_attempts: Option<u32>,
}

/// The typed parameters for `backoff` from `--config`.
pub fn policy_config(path: &str, config: Map<String, Value>) -> Result<PolicyConfig, Usage> {
    let file: ConfigFile = serde_json::from_value(Value::Object(config)).map_err(|e| {
        Usage(format!(
            "config {path} is invalid: {e}; allowed members are tool, llm, agent (each with base_ms, cap_ms, max_attempts) and retry_budget_ms"
        ))
    })?;
    let fill = |b: Option<BackoffFile>, base_ms, max_attempts| {
        b.map(|b| BackoffConfig {
            base_ms: b.base_ms.unwrap_or(base_ms),
            cap_ms: b.cap_ms.unwrap_or(30_000),
            max_attempts: b.max_attempts.unwrap_or(max_attempts),
        })
    };
    Ok(PolicyConfig {
        tool: fill(file.tool, 250, 5),
        llm: fill(file.llm, 1000, 3),
        agent: fill(file.agent, 1000, 3),
        retry_budget_ms: file.retry_budget_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_file_wins_over_embedded_config_member_by_member() {
        let obs = r#"{"source":"http","status":503,"context":{"config":{"tool":{"base_ms":10,"cap_ms":20},"retry_budget_ms":5}}}"#;
        let file = json!({"tool": {"base_ms": 99}}).as_object().cloned();
        let ctx = decide_context(&ContextFlags::default(), obs, file).unwrap();
        let ctx: Value = serde_json::from_str(&ctx).unwrap();
        assert_eq!(
            ctx,
            json!({"config": {"tool": {"base_ms": 99, "cap_ms": 20}, "retry_budget_ms": 5}})
        );
    }

    #[test]
    fn flags_become_context_members() {
        let flags = ContextFlags {
            call: Some(CallArg::Llm),
            attempt: Some(2),
            elapsed_ms: Some(100),
            seed: Some(u64::MAX),
            now_ms: None,
        };
        let ctx: Value =
            serde_json::from_str(&decide_context(&flags, "{}", None).unwrap()).unwrap();
        assert_eq!(
            ctx,
            json!({"call": "llm", "attempt": 2, "elapsed_ms": 100, "seed": 18446744073709551615u64})
        );
        let none = decide_context(&ContextFlags::default(), "{}", None).unwrap();
        assert_eq!(none, "{}");
    }
}
