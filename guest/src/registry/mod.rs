//! The registry: every code the policy can emit, with class, severity,
//! category, cause and recovery guidance.
//!
//! Codes are `<surface>.<kind>.<detail>`. A definition names a base
//! (`http.429_rate_limited`) and the surfaces it applies to (`tool`, `llm`,
//! `agent`, `runtime`); the registry lists every expanded code.
//!
//! Stability rules: codes are added, never renamed or removed. A retired code
//! stays, marked [`Stability::Deprecated`], with its replacement. The test
//! `registry_is_append_only` in `tests/` holds the published list.

mod http;
mod protocol;
mod provider;
mod runtime;
mod transport;

use crate::model::{CallKind, Category, ErrorClass, Severity, Stability};
use serde::Serialize;
use std::sync::OnceLock;

/// The first segment of a code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Surface {
    /// `tool.`
    Tool,
    /// `llm.`
    Llm,
    /// `agent.`
    Agent,
    /// `runtime.`: decisions of the policy itself.
    Runtime,
}

impl Surface {
    /// The prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Llm => "llm",
            Self::Agent => "agent",
            Self::Runtime => "runtime",
        }
    }
}

impl From<CallKind> for Surface {
    fn from(c: CallKind) -> Self {
        match c {
            CallKind::Tool => Self::Tool,
            CallKind::Llm => Self::Llm,
            CallKind::Agent => Self::Agent,
        }
    }
}

/// Tool, LLM and agent calls alike.
pub(crate) const ALL_CALLS: &[Surface] = &[Surface::Tool, Surface::Llm, Surface::Agent];
/// LLM calls only.
pub(crate) const LLM: &[Surface] = &[Surface::Llm];
/// Tool calls only.
pub(crate) const TOOL: &[Surface] = &[Surface::Tool];
/// Agent calls only.
pub(crate) const AGENT: &[Surface] = &[Surface::Agent];
/// The policy's own decisions.
pub(crate) const RUNTIME: &[Surface] = &[Surface::Runtime];

/// One code definition, before expansion over surfaces.
#[derive(Debug)]
pub struct CodeDef {
    /// The code without its surface, e.g. `http.429_rate_limited`.
    pub base: &'static str,
    /// The surfaces it applies to; the first is used when the call's surface is not listed.
    pub surfaces: &'static [Surface],
    /// Recovery class.
    pub class: ErrorClass,
    /// Severity.
    pub severity: Severity,
    /// Category.
    pub category: Category,
    /// Retryable by default (a server's explicit signal may override it).
    pub retryable: bool,
    /// Default message when the upstream gave none.
    pub message: &'static str,
    /// When it is emitted.
    pub cause: &'static str,
    /// What to do: the default hint (imperative, one line).
    pub recovery: &'static str,
    /// Stability.
    pub stability: Stability,
    /// Replacement, for deprecated codes.
    pub replaced_by: Option<&'static str>,
    /// Sibling bases (expanded on the same surface).
    pub related: &'static [&'static str],
}

/// A shorthand for stable definitions.
macro_rules! code_def {
    ($base:literal, $surf:expr, $class:ident, $sev:ident, $cat:ident, $retry:literal,
     $msg:literal, $cause:literal, $recovery:literal $(, related = [$($rel:literal),*])?) => {
        $crate::registry::CodeDef {
            base: $base,
            surfaces: $surf,
            class: $crate::model::ErrorClass::$class,
            severity: $crate::model::Severity::$sev,
            category: $crate::model::Category::$cat,
            retryable: $retry,
            message: $msg,
            cause: $cause,
            recovery: $recovery,
            stability: $crate::model::Stability::Stable,
            replaced_by: None,
            related: &[$($($rel),*)?],
        }
    };
}
pub(crate) use code_def;

/// Every definition table.
fn tables() -> [&'static [CodeDef]; 5] {
    [
        http::DEFS,
        protocol::DEFS,
        transport::DEFS,
        runtime::DEFS,
        provider::DEFS,
    ]
}

/// Find a definition by base.
pub fn def(base: &str) -> Option<&'static CodeDef> {
    tables().into_iter().flatten().find(|d| d.base == base)
}

/// The surface a definition is emitted on for a call of surface `want`.
pub fn surface_for(def: &CodeDef, want: Surface) -> Surface {
    if def.surfaces.contains(&want) {
        want
    } else {
        def.surfaces.first().copied().unwrap_or(want)
    }
}

/// One expanded registry row (the JSON form of `code-info`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CodeInfo {
    /// The full dotted code.
    pub code: String,
    /// Recovery class.
    pub class: ErrorClass,
    /// Severity.
    pub severity: Severity,
    /// Category.
    pub category: Category,
    /// Retryable by default.
    pub retryable: bool,
    /// When it is emitted.
    pub cause: &'static str,
    /// What to do.
    pub recovery: &'static str,
    /// Stability.
    pub stability: Stability,
    /// Replacement code, for deprecated codes.
    pub replaced_by: Option<String>,
    /// Sibling codes.
    pub related_codes: Vec<String>,
    /// Default message.
    #[serde(skip)]
    pub message: &'static str,
}

/// Every code, sorted.
pub fn codes() -> &'static [CodeInfo] {
    static CODES: OnceLock<Vec<CodeInfo>> = OnceLock::new();
    CODES.get_or_init(|| {
        let mut out = Vec::new();
        for d in tables().into_iter().flatten() {
            for s in d.surfaces {
                let full = |b: &str| {
                    let rs = def(b).map(|rd| surface_for(rd, *s)).unwrap_or(*s);
                    format!("{}.{}", rs.as_str(), b)
                };
                out.push(CodeInfo {
                    code: format!("{}.{}", s.as_str(), d.base),
                    class: d.class,
                    severity: d.severity,
                    category: d.category,
                    retryable: d.retryable,
                    cause: d.cause,
                    recovery: d.recovery,
                    stability: d.stability,
                    replaced_by: d.replaced_by.map(full),
                    related_codes: d.related.iter().map(|b| full(b)).collect(),
                    message: d.message,
                });
            }
        }
        out.sort_by(|a, b| a.code.cmp(&b.code));
        out
    })
}

/// Look up a full code.
pub fn lookup(code: &str) -> Option<&'static CodeInfo> {
    let all = codes();
    all.binary_search_by(|c| c.code.as_str().cmp(code))
        .ok()
        .and_then(|i| all.get(i))
}

/// The registry as JSON text.
pub fn codes_json() -> String {
    serde_json::to_string(codes()).unwrap_or_else(|_| "[]".to_owned())
}

/// A policy's own registry: the reference's codes as a custom policy changes
/// them. [`RecoveryPolicy::registry`](crate::sdk::RecoveryPolicy::registry)
/// returns one, and the exported component serves *it* (the `registry`
/// interface, `docs/errors.md` style markdown, the MCP `## Errors` block), so
/// what a policy documents is what it decides.
///
/// ```
/// use agent_recovery_policy::ErrorClass;
/// use agent_recovery_policy::Registry;
///
/// let registry = Registry::reference()
///     .set_class("tool.http.409_conflict", ErrorClass::Permanent)
///     .set_recovery("tool.http.409_conflict", "Do not retry: check the payment first.");
/// assert!(registry.unknown_codes().is_empty());
/// let row = registry.lookup("tool.http.409_conflict").unwrap();
/// assert_eq!(row.class, ErrorClass::Permanent);
/// ```
///
/// The changing methods take a full code; a code the registry does not hold
/// changes nothing and is listed by [`unknown_codes`](Self::unknown_codes)
/// (test it natively: a policy's unit tests should assert it is empty).
/// The reference's published codes stay append-only; a custom policy may
/// change what they mean for *its* callers, and deprecate or add its own.
#[derive(Clone, Debug, PartialEq)]
pub struct Registry {
    codes: Vec<CodeInfo>,
    unknown: Vec<String>,
}

impl Registry {
    /// The reference policy's registry.
    pub fn reference() -> Self {
        Registry {
            codes: codes().to_vec(),
            unknown: Vec::new(),
        }
    }

    /// Adds a code (or replaces the row of the same code), keeping the rows sorted.
    pub fn with_code(mut self, info: CodeInfo) -> Self {
        match self.codes.binary_search_by(|c| c.code.cmp(&info.code)) {
            Ok(i) => {
                if let Some(row) = self.codes.get_mut(i) {
                    *row = info;
                }
            }
            Err(i) => self.codes.insert(i, info),
        }
        self
    }

    fn change(mut self, code: &str, f: impl FnOnce(&mut CodeInfo)) -> Self {
        match self.codes.iter_mut().find(|c| c.code == code) {
            Some(row) => f(row),
            None => self.unknown.push(code.to_owned()),
        }
        self
    }

    /// Changes a code's recovery class; `retryable` follows it (only
    /// `transient` codes are retryable by default).
    pub fn set_class(self, code: &str, class: ErrorClass) -> Self {
        self.change(code, |row| {
            row.class = class;
            row.retryable = class == ErrorClass::Transient;
        })
    }

    /// Changes a code's severity.
    pub fn set_severity(self, code: &str, severity: Severity) -> Self {
        self.change(code, |row| row.severity = severity)
    }

    /// Changes a code's recovery guidance (its default hint).
    pub fn set_recovery(self, code: &str, recovery: &'static str) -> Self {
        self.change(code, |row| row.recovery = recovery)
    }

    /// Changes what the documentation says causes the code.
    pub fn set_cause(self, code: &str, cause: &'static str) -> Self {
        self.change(code, |row| row.cause = cause)
    }

    /// Marks a code deprecated, replaced by `replaced_by`; it stays listed.
    pub fn deprecate(self, code: &str, replaced_by: &str) -> Self {
        let replaced_by = replaced_by.to_owned();
        self.change(code, |row| {
            row.stability = Stability::Deprecated;
            row.replaced_by = Some(replaced_by);
        })
    }

    /// Every code, sorted.
    pub fn codes(&self) -> &[CodeInfo] {
        &self.codes
    }

    /// One code.
    pub fn lookup(&self, code: &str) -> Option<&CodeInfo> {
        self.codes
            .binary_search_by(|c| c.code.as_str().cmp(code))
            .ok()
            .and_then(|i| self.codes.get(i))
    }

    /// The codes a changing method was given that the registry does not hold.
    pub fn unknown_codes(&self) -> &[String] {
        &self.unknown
    }

    /// The registry as JSON text (the `codes-json` export).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.codes).unwrap_or_else(|_| "[]".to_owned())
    }
}
