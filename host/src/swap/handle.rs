//! [`PolicyHandle`]: the active policy, shared by every caller, swapped at
//! runtime without a restart.
//!
//! # How a swap works
//!
//! A candidate is validated completely while the active policy keeps
//! answering (digest, compile, world, imports, contract, smoke set: see
//! [`SwapOptions`]); only then is it activated, by one atomic pointer store
//! (`arc-swap`). A call loads the pointer once, lock-free, and runs to the end
//! on the policy it loaded, so calls already running finish on the old
//! version and new calls use the new one; no call fails or waits because of a
//! swap. A refused candidate changes nothing but the counters. Swaps run one
//! at a time, in the order they were asked for.
//!
//! This is the bundle model of OPA (atomic activation, the old bundle stays
//! when a new one fails verification) with Extism's digest pinning and
//! per-call limits, and Envoy's failure policy for calls that fail at runtime.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arc_swap::ArcSwap;

use crate::error::{Error, ErrorKind, Result};
use crate::runtime::Telemetry;
use crate::swap::active::{ActivePolicy, Answer};
use crate::swap::candidate;
use crate::swap::error::{SwapError, SwapStage};
use crate::swap::events::{Counters, Event, Sink, Stats};
use crate::swap::telemetry::SwapTelemetry;
use crate::{FailurePolicy, Loader, Policy, PolicyId, SwapOptions};

/// The policy every caller uses, swappable at runtime.
///
/// Cheap to clone (clones share one active policy); `Send + Sync`.
///
/// ```
/// use agent_recovery::{PolicyHandle, SwapOptions};
///
/// let handle = PolicyHandle::builder().reference()?;
/// let obs = r#"{"source":"http","status":503}"#;
/// let answer = handle.decide_json(obs, r#"{"attempt":1,"seed":7}"#)?;
/// assert_eq!(answer.policy.name, "agent-recovery-reference");
///
/// // A candidate that fails validation is refused; the old policy stays.
/// let err = handle.swap_bytes(b"not a component", &SwapOptions::default()).unwrap_err();
/// assert_eq!(err.kind(), agent_recovery::ErrorKind::Load);
/// assert_eq!(handle.active().id().name, "agent-recovery-reference");
/// assert_eq!(handle.stats().refusals, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct PolicyHandle {
    shared: Arc<Shared>,
}

struct Shared {
    active: ArcSwap<ActivePolicy>,
    /// Held for a whole swap (validation included); calls never take it.
    swapping: Mutex<()>,
    loader: Loader,
    failure_policy: FailurePolicy,
    /// The embedded reference, loaded on first need (fallback, reference smoke set).
    reference: OnceLock<Arc<ActivePolicy>>,
    counters: Counters,
    sink: Option<Sink>,
    telemetry: SwapTelemetry,
}

/// Options for building a [`PolicyHandle`].
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`loader`](Self::loader) | [`Loader::default()`]: default limits, pool, no cache |
/// | [`failure_policy`](Self::failure_policy) | [`FailurePolicy::FailClosed`] |
/// | [`on_event`](Self::on_event) | none: events are only counted |
/// | [`telemetry`](Self::telemetry) | [`Telemetry::global()`], read when the builder is made |
#[derive(Default)]
pub struct HandleBuilder {
    loader: Loader,
    failure_policy: FailurePolicy,
    sink: Option<Sink>,
    telemetry: SwapTelemetry,
}

impl HandleBuilder {
    /// How candidates are loaded (limits, pool size, cache directory); the
    /// reference used for fallback is loaded with it too.
    pub fn loader(mut self, loader: Loader) -> Self {
        self.loader = loader;
        self
    }

    /// What to do when the active policy fails a call.
    pub fn failure_policy(mut self, failure_policy: FailurePolicy) -> Self {
        self.failure_policy = failure_policy;
        self
    }

    /// Called with every [`Event`], on the thread that caused it (the swapping
    /// thread, or the caller whose call failed). Keep it quick.
    pub fn on_event(mut self, sink: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.sink = Some(Arc::new(sink));
        self
    }

    /// Where swaps, refusals and failed calls are reported as OpenTelemetry
    /// span events (on the caller's current span) and the
    /// `agent_recovery.policy.swaps` counter (this telemetry's meter);
    /// `docs/telemetry.md`, "Policy swaps". [`Telemetry::off`]: neither.
    pub fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = SwapTelemetry::new(&telemetry);
        self
    }

    /// A handle whose first policy is the embedded reference.
    pub fn reference(self) -> Result<PolicyHandle> {
        let reference = load_reference(&self.loader)?;
        let handle = self.start(Arc::clone(&reference));
        let _ = handle.shared.reference.set(reference);
        Ok(handle)
    }

    /// A handle whose first policy is `policy`, trusted as it is (only its
    /// identity is read); use [`PolicyHandle::swap_policy`] to validate one.
    pub fn policy(self, policy: Arc<Policy>) -> Result<PolicyHandle> {
        let id = PolicyId::of(&policy)?;
        Ok(self.start(Arc::new(ActivePolicy::new(policy, id))))
    }

    /// A handle whose first policy is the component file at `path`, validated
    /// like a swap (a refused file builds no handle).
    pub fn file(
        self,
        path: impl AsRef<Path>,
        options: &SwapOptions,
    ) -> Result<PolicyHandle, SwapError> {
        let path = path.as_ref();
        let bytes = candidate::read(path)?;
        let sig = candidate::read_signature(path, options)?;
        let label = path.display().to_string();
        let signed = candidate::Signed {
            sig: sig.as_deref(),
            label: &label,
        };
        let reference_smoke_set = || reference_smoke_set(&self.loader, None);
        let first =
            candidate::from_bytes(&self.loader, &bytes, &signed, options, &reference_smoke_set)?;
        Ok(self.start(Arc::new(first)))
    }

    fn start(self, first: Arc<ActivePolicy>) -> PolicyHandle {
        let handle = PolicyHandle {
            shared: Arc::new(Shared {
                active: ArcSwap::new(first),
                swapping: Mutex::new(()),
                loader: self.loader,
                failure_policy: self.failure_policy,
                reference: OnceLock::new(),
                counters: Counters::default(),
                sink: self.sink,
                telemetry: self.telemetry,
            }),
        };
        if handle.shared.failure_policy == FailurePolicy::FallbackToReference {
            // Load it now so that the first fallback is not slow; a failure
            // here is retried on first need (and then fails closed).
            let _ = handle.reference();
        }
        handle
    }
}

impl PolicyHandle {
    /// Options for building a handle.
    pub fn builder() -> HandleBuilder {
        HandleBuilder::default()
    }

    /// The active policy. Hold it to make several calls on one version; a
    /// swap meanwhile does not affect it.
    pub fn active(&self) -> Arc<ActivePolicy> {
        self.shared.active.load_full()
    }

    /// Running totals: swaps, refusals, failures, fallbacks.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// The failure policy this handle was built with.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.shared.failure_policy
    }

    /// Decides with the active policy (see [`Policy::decide_json`]); the
    /// [`Answer`] says which policy answered.
    pub fn decide_json(&self, observation: &str, context: &str) -> Result<Answer> {
        self.answer(|p| p.decide_json(observation, context))
    }

    /// Classifies with the active policy (see [`Policy::classify_json`]).
    pub fn classify_json(&self, observation: &str) -> Result<Answer> {
        self.answer(|p| p.classify_json(observation))
    }

    /// Validates the component file at `path` and activates it; on any
    /// failure the active policy stays and the error says why. When `options`
    /// [require a signature](SwapOptions::require_signature), it is read from
    /// `path` with `.sig` appended.
    pub fn swap_file(
        &self,
        path: impl AsRef<Path>,
        options: &SwapOptions,
    ) -> Result<Arc<PolicyId>, SwapError> {
        let _swapping = self.lock();
        let path = path.as_ref();
        let label = path.display().to_string();
        let candidate = candidate::read(path).and_then(|bytes| {
            let sig = candidate::read_signature(path, options)?;
            let signed = candidate::Signed {
                sig: sig.as_deref(),
                label: &label,
            };
            candidate::from_bytes(&self.shared.loader, &bytes, &signed, options, &|| {
                self.reference_smoke_set()
            })
        });
        self.activate(candidate)
    }

    /// Validates component bytes and activates them; see [`swap_file`](Self::swap_file).
    /// Bytes carry no signature: when `options` require one they are refused
    /// (use [`swap_signed_bytes`](Self::swap_signed_bytes)).
    pub fn swap_bytes(
        &self,
        bytes: &[u8],
        options: &SwapOptions,
    ) -> Result<Arc<PolicyId>, SwapError> {
        self.swap_signed(bytes, None, "the candidate", options)
    }

    /// Validates component bytes with their signature (the text of their
    /// `.sig`) and activates them; see [`swap_file`](Self::swap_file). The
    /// signature is checked when `options` [require one](SwapOptions::require_signature).
    pub fn swap_signed_bytes(
        &self,
        bytes: &[u8],
        signature: &[u8],
        options: &SwapOptions,
    ) -> Result<Arc<PolicyId>, SwapError> {
        self.swap_signed(bytes, Some(signature), "the candidate", options)
    }

    /// Validates `bytes` and their signature (named `label` in messages) and activates them.
    pub(crate) fn swap_signed(
        &self,
        bytes: &[u8],
        signature: Option<&[u8]>,
        label: &str,
        options: &SwapOptions,
    ) -> Result<Arc<PolicyId>, SwapError> {
        let _swapping = self.lock();
        let signed = candidate::Signed {
            sig: signature,
            label,
        };
        let candidate =
            candidate::from_bytes(&self.shared.loader, bytes, &signed, options, &|| {
                self.reference_smoke_set()
            });
        self.activate(candidate)
    }

    /// Validates an already loaded policy (digest pin, verify) and activates
    /// it. Loading once and swapping the same `Arc<Policy>` in again later
    /// skips compiling (a fast switch back to a known version).
    ///
    /// A loaded policy has no signature to check: when `options` require one,
    /// it is refused with [`ErrorKind::Signature`](crate::ErrorKind::Signature).
    pub fn swap_policy(
        &self,
        policy: Arc<Policy>,
        options: &SwapOptions,
    ) -> Result<Arc<PolicyId>, SwapError> {
        let _swapping = self.lock();
        let candidate = match options.trusted_keys() {
            Some(_) => Err(SwapError::new(
                SwapStage::Signature,
                Error::new(
                    ErrorKind::Signature,
                    "an already loaded policy carries no signature to check; swap the signed file (swap_file) or its bytes and signature (swap_signed_bytes)",
                ),
                Some(policy.sha256()),
            )),
            None => candidate::checked(policy, options, &|| self.reference_smoke_set()),
        };
        self.activate(candidate)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.shared
            .swapping
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn activate(
        &self,
        candidate: Result<ActivePolicy, SwapError>,
    ) -> Result<Arc<PolicyId>, SwapError> {
        match candidate {
            Ok(next) => {
                let next = Arc::new(next);
                let to = Arc::clone(next.id());
                let previous = self.shared.active.swap(next);
                self.emit(Event::Swapped {
                    from: Arc::clone(previous.id()),
                    to: Arc::clone(&to),
                });
                Ok(to)
            }
            Err(error) => {
                self.refuse(error.clone());
                Err(error)
            }
        }
    }

    /// Reports a refused candidate.
    pub(crate) fn refuse(&self, error: SwapError) {
        self.emit(Event::Refused {
            active: Arc::clone(self.active().id()),
            error,
        });
    }

    fn emit(&self, event: Event) {
        self.shared.counters.count(&event);
        self.shared.telemetry.record(&event);
        if let Some(sink) = &self.shared.sink {
            sink(&event);
        }
    }

    /// Runs `call` on the active policy and applies the failure policy.
    fn answer(&self, call: impl Fn(&Policy) -> Result<String>) -> Result<Answer> {
        let active = self.active();
        let error = match call(active.policy()) {
            Ok(json) => {
                return Ok(Answer {
                    json,
                    policy: Arc::clone(active.id()),
                    fallback: None,
                });
            }
            Err(error) if !error.kind().is_policy_failure() => return Err(error),
            Err(error) => error,
        };
        let policy = Arc::clone(active.id());
        let reference = match self.shared.failure_policy {
            FailurePolicy::FallbackToReference => self
                .reference()
                .ok()
                .filter(|r| r.id().sha256 != policy.sha256),
            FailurePolicy::FailClosed => None,
        };
        if let Some(reference) = reference
            && let Ok(json) = call(reference.policy())
        {
            let reference_id = Arc::clone(reference.id());
            self.emit(Event::FellBack {
                policy,
                error: error.clone(),
                reference: Arc::clone(&reference_id),
            });
            return Ok(Answer {
                json,
                policy: reference_id,
                fallback: Some(error),
            });
        }
        self.emit(Event::Failed {
            policy,
            error: error.clone(),
        });
        Err(error)
    }

    /// The embedded reference, loaded once per handle on first need.
    fn reference(&self) -> Result<Arc<ActivePolicy>> {
        if let Some(reference) = self.shared.reference.get() {
            return Ok(Arc::clone(reference));
        }
        let loaded = load_reference(&self.shared.loader)?;
        Ok(Arc::clone(self.shared.reference.get_or_init(|| loaded)))
    }

    fn reference_smoke_set(&self) -> Result<String> {
        reference_smoke_set(&self.shared.loader, self.reference().ok())
    }
}

impl std::fmt::Debug for PolicyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyHandle")
            .field("active", self.active().id())
            .field("failure_policy", &self.shared.failure_policy)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn load_reference(loader: &Loader) -> Result<Arc<ActivePolicy>> {
    let policy = Arc::new(loader.clone().reference()?);
    let id = PolicyId::of(&policy)?;
    Ok(Arc::new(ActivePolicy::new(policy, id)))
}

/// The reference's own smoke set, from `loaded` or a freshly loaded reference.
fn reference_smoke_set(loader: &Loader, loaded: Option<Arc<ActivePolicy>>) -> Result<String> {
    let reference = match loaded {
        Some(reference) => reference,
        None => load_reference(loader)?,
    };
    reference.policy().smoke_tests()
}

#[allow(dead_code, reason = "compile-time check only")]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<PolicyHandle>();
    check::<Error>();
}
