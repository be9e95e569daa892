//! Reading and validating a policy document: every error names the bad path
//! and ends with a hint.

use super::{CallerConfig, CodeOverride, Document, FORMAT};
use crate::config::{BackoffOverrides, BreakerOverrides, Config, ConfigOverrides};
use crate::error::{ErrorKind, PolicyError};
use crate::model::{Action, ErrorClass, Severity};
use crate::runtime::config::DeadLetterConfig;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The largest document accepted, bytes of JSON text.
pub const MAX_DOCUMENT: usize = 64 * 1024;

const TOP: &[&str] = &[
    "format",
    "name",
    "version",
    "description",
    "calls",
    "retry_budget_ms",
    "breaker",
    "caller_config",
    "assume_idempotent",
    "overrides",
    "fallbacks",
    "dead_letters",
    "smoke_tests",
];
const CODE_KEYS: &[&str] = &["class", "action", "hint", "severity", "cause"];

fn bad(path: &str, msg: impl std::fmt::Display) -> PolicyError {
    PolicyError::new(ErrorKind::InvalidConfig, format!("{path}: {msg}"))
}

fn object<'a>(
    v: &'a Value,
    path: &str,
    keys: &[&str],
) -> Result<&'a Map<String, Value>, PolicyError> {
    let Value::Object(m) = v else {
        return Err(bad(
            path,
            format!(
                "expected an object, got {}; see docs/schema/policy.schema.json",
                crate::json_kind(v)
            ),
        ));
    };
    if !keys.is_empty()
        && let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str()))
    {
        return Err(bad(
            path,
            format!("unknown member {k:?}; expected one of {}", keys.join(", ")),
        ));
    }
    Ok(m)
}

fn text(v: &Value, path: &str) -> Result<String, PolicyError> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        Value::String(_) => Err(bad(path, "is empty; write a non-empty string")),
        _ => Err(bad(
            path,
            format!("expected a string, got {}", crate::json_kind(v)),
        )),
    }
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn member<T: serde::de::DeserializeOwned>(v: &Value, path: &str) -> Result<T, PolicyError> {
    crate::from_value(v).map_err(|e| bad(path, format!("{e}; see docs/schema/policy.schema.json")))
}

fn one_of<T: Copy>(
    v: &Value,
    path: &str,
    what: &str,
    all: &[T],
    name: fn(T) -> &'static str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, PolicyError> {
    let s = text(v, path)?;
    parse(&s).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|x| name(*x)).collect();
        bad(
            path,
            format!("unknown {what} {s:?}; expected one of {}", names.join(", ")),
        )
    })
}

fn code_override(v: &Value, path: &str) -> Result<CodeOverride, PolicyError> {
    let m = object(v, path, CODE_KEYS)?;
    let mut o = CodeOverride::default();
    for (k, v) in m {
        let p = format!("{path}.{k}");
        match k.as_str() {
            "class" => {
                o.class = Some(one_of(
                    v,
                    &p,
                    "class",
                    ErrorClass::ALL,
                    ErrorClass::as_str,
                    ErrorClass::parse,
                )?)
            }
            "action" => {
                o.action = Some(one_of(
                    v,
                    &p,
                    "action",
                    Action::ALL,
                    Action::as_str,
                    Action::parse,
                )?)
            }
            "severity" => {
                o.severity = Some(one_of(
                    v,
                    &p,
                    "severity",
                    Severity::ALL,
                    Severity::as_str,
                    Severity::parse,
                )?)
            }
            "hint" => o.hint = Some(leak(text(v, &p)?)),
            _ => o.cause = Some(leak(text(v, &p)?)),
        }
    }
    if o == CodeOverride::default() {
        return Err(bad(
            path,
            format!(
                "changes nothing; set at least one of {}",
                CODE_KEYS.join(", ")
            ),
        ));
    }
    Ok(o)
}

fn code_table(v: &Value, path: &str) -> Result<BTreeMap<String, CodeOverride>, PolicyError> {
    let mut out = BTreeMap::new();
    for (code, o) in object(v, path, &[])? {
        let p = format!("{path}[{code:?}]");
        if crate::registry::lookup(code).is_none() {
            return Err(bad(
                &p,
                format!("unknown code {code:?}; list the codes with `agent-recovery registry`"),
            ));
        }
        out.insert(code.clone(), code_override(o, &p)?);
    }
    Ok(out)
}

fn fallbacks(v: &Value) -> Result<BTreeMap<String, Vec<String>>, PolicyError> {
    let mut out = BTreeMap::new();
    for (target, chain) in object(v, "fallbacks", &[])? {
        let p = format!("fallbacks[{target:?}]");
        if target.trim().is_empty() {
            return Err(bad(
                &p,
                "is an empty target; name the target the chain follows",
            ));
        }
        let Value::Array(items) = chain else {
            return Err(bad(
                &p,
                format!(
                    "expected an array of targets, got {}; write e.g. [\"llm.anthropic\"]",
                    crate::json_kind(chain)
                ),
            ));
        };
        if items.is_empty() {
            return Err(bad(
                &p,
                "is empty; list at least one target to fall back to, or leave the target out",
            ));
        }
        let mut seen: Vec<String> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let ip = format!("{p}[{i}]");
            let next = text(item, &ip)?;
            if next == *target || seen.contains(&next) {
                return Err(bad(
                    &ip,
                    format!("{next:?} is already in the chain; a chain names each target once"),
                ));
            }
            seen.push(next);
        }
        out.insert(target.clone(), seen);
    }
    Ok(out)
}

fn dead_letters(v: &Value) -> Result<BTreeMap<String, DeadLetterConfig>, PolicyError> {
    const KEYS: &[&str] = &["owner", "runbook", "depth_threshold"];
    let mut out = BTreeMap::new();
    for (tool, entry) in object(v, "dead_letters", &[])? {
        let p = format!("dead_letters[{tool:?}]");
        let star = tool.find('*');
        let pattern_ok = match star {
            None => !tool.trim().is_empty(),
            Some(at) => {
                at + 1 == tool.len() && (tool.as_str() == "*" || (tool.ends_with(".*") && at > 1))
            }
        };
        if !pattern_ok {
            return Err(bad(
                &p,
                format!(
                    "{tool:?} is not a tool pattern; write a tool's name, a prefix such as \"payments.*\", or \"*\""
                ),
            ));
        }
        let m = object(entry, &p, KEYS)?;
        let mut dl = DeadLetterConfig::default();
        for (k, v) in m {
            let kp = format!("{p}.{k}");
            match k.as_str() {
                "owner" => dl.owner = Some(text(v, &kp)?),
                "runbook" => dl.runbook = Some(text(v, &kp)?),
                _ => match v.as_u64() {
                    Some(n) if n >= 1 => dl.depth_threshold = Some(n),
                    _ => {
                        return Err(bad(
                            &kp,
                            format!("expected an integer from 1, got {v}; e.g. 10"),
                        ));
                    }
                },
            }
        }
        if dl == DeadLetterConfig::default() {
            return Err(bad(
                &p,
                format!("changes nothing; set at least one of {}", KEYS.join(", ")),
            ));
        }
        out.insert(tool.clone(), dl);
    }
    Ok(out)
}

fn smoke_tests(v: &Value) -> Result<String, PolicyError> {
    let Value::Array(cases) = v else {
        return Err(bad(
            "smoke_tests",
            format!("expected an array, got {}", crate::json_kind(v)),
        ));
    };
    if cases.is_empty() {
        return Err(bad(
            "smoke_tests",
            "is empty; a policy must ship at least one smoke case",
        ));
    }
    for (i, case) in cases.iter().enumerate() {
        let p = format!("smoke_tests[{i}]");
        let m = object(case, &p, &["observation", "context", "expect"])?;
        for need in ["observation", "expect"] {
            if !m.contains_key(need) {
                return Err(bad(
                    &p,
                    format!(
                        "missing {need:?}; a case is {{observation, context?, expect: {{action, code}}}}"
                    ),
                ));
            }
        }
    }
    Ok(v.to_string())
}

impl Document {
    /// Parses and validates a policy document (JSON text).
    pub fn parse(text_json: &str) -> Result<Document, PolicyError> {
        if text_json.len() > MAX_DOCUMENT {
            return Err(PolicyError::new(
                ErrorKind::TooLarge,
                format!(
                    "the policy document is {} bytes, more than {MAX_DOCUMENT}; shorten its hints and causes",
                    text_json.len()
                ),
            ));
        }
        let v: Value = serde_json::from_str(text_json)
            .map_err(|e| PolicyError::json("policy document", &e))?;
        Self::from_value(&v)
    }

    /// Validates a policy document already parsed as JSON.
    pub fn from_value(v: &Value) -> Result<Document, PolicyError> {
        let top = object(v, "document", TOP)?;
        let need = |k: &str| {
            top.get(k)
                .ok_or_else(|| bad(k, "missing; see docs/schema/policy.schema.json"))
        };
        match need("format")?.as_u64() {
            Some(f) if f == u64::from(FORMAT) => {}
            _ => {
                return Err(bad(
                    "format",
                    format!(
                        "unsupported format {}; this policy reads format {FORMAT}",
                        need("format")?
                    ),
                ));
            }
        }
        let version = text(need("version")?, "version")?;
        if !is_semver(&version) {
            return Err(bad(
                "version",
                format!("{version:?} is not a semver version; write e.g. \"1.0.0\""),
            ));
        }
        let mut limits = ConfigOverrides::default();
        if let Some(calls) = top.get("calls") {
            for (k, c) in object(calls, "calls", &["tool", "llm", "agent"])? {
                let b: BackoffOverrides = member(c, &format!("calls.{k}"))?;
                match k.as_str() {
                    "tool" => limits.tool = Some(b),
                    "llm" => limits.llm = Some(b),
                    _ => limits.agent = Some(b),
                }
            }
        }
        if let Some(b) = top.get("retry_budget_ms") {
            limits.retry_budget_ms = Some(member(b, "retry_budget_ms")?);
        }
        if let Some(b) = top.get("breaker") {
            limits.breaker = Some(member::<BreakerOverrides>(b, "breaker")?);
        }
        Config::default()
            .with(&limits)
            .map_err(|e| bad("document", e.message))?;
        let caller_config = match top.get("caller_config") {
            None => CallerConfig::Override,
            Some(c) => match text(c, "caller_config")?.as_str() {
                "override" => CallerConfig::Override,
                "clamp" => CallerConfig::Clamp,
                other => {
                    return Err(bad(
                        "caller_config",
                        format!("unknown mode {other:?}; expected one of override, clamp"),
                    ));
                }
            },
        };
        let assume_idempotent = match top.get("assume_idempotent") {
            None => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                return Err(bad(
                    "assume_idempotent",
                    format!("expected a boolean, got {}", crate::json_kind(other)),
                ));
            }
        };
        let (mut codes, mut providers) = (BTreeMap::new(), BTreeMap::new());
        if let Some(o) = top.get("overrides") {
            let m = object(o, "overrides", &["codes", "providers"])?;
            if let Some(c) = m.get("codes") {
                codes = code_table(c, "overrides.codes")?;
            }
            if let Some(p) = m.get("providers") {
                for (name, table) in object(p, "overrides.providers", &[])? {
                    providers.insert(
                        name.clone(),
                        code_table(table, &format!("overrides.providers[{name:?}]"))?,
                    );
                }
            }
        }
        Ok(Document {
            name: text(need("name")?, "name")?,
            version,
            description: top
                .get("description")
                .map(|d| text(d, "description"))
                .transpose()?
                .unwrap_or_default(),
            limits,
            caller_config,
            assume_idempotent,
            codes,
            providers,
            fallbacks: top
                .get("fallbacks")
                .map(fallbacks)
                .transpose()?
                .unwrap_or_default(),
            dead_letters: top
                .get("dead_letters")
                .map(dead_letters)
                .transpose()?
                .unwrap_or_default(),
            smoke_tests: smoke_tests(need("smoke_tests")?)?,
            digest: digest(v),
        })
    }
}

fn is_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The canonical text of a JSON value: object keys sorted by their UTF-8
/// bytes, no whitespace, strings and numbers as serde_json writes them (the
/// same text idempotency keys hash).
pub fn canonical(v: &Value) -> String {
    crate::idempotency::canonical_json(v)
}

fn digest(v: &Value) -> String {
    let mut out = String::from("sha256:");
    for b in Sha256::digest(canonical(v).as_bytes()) {
        let _ = write!(out, "{b:02x}");
    }
    out
}
