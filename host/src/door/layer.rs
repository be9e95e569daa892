//! The door as a `tower` layer: each request is a run of one step whose
//! attempts are calls of the inner service.
//!
//! Why a layer and not a `tower::retry::Policy`: a retry policy is asked
//! after each attempt whether to go again, and keeps its own count; here the
//! component's loop owns the attempts (the delays, the breakers and the
//! fallback targets, the attempt budget, the run's deadline), so the layer
//! hands the whole request to a step and the loop calls the inner service as
//! often as it decides. Stack it with the other layers; turn off any retry
//! layer below it, or the attempts multiply.

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tower::{Layer, Service};

use super::future::Recoverable;
use super::observe::default_observation;
use super::outcome::{CheckFn, ObserveFn};
use super::{Door, DoorError};
use crate::runtime::Call;

type ArgsFn<Req> = Arc<dyn Fn(&Req) -> Value + Send + Sync>;
type PrepareFn<Req> = Arc<dyn Fn(&mut Req, &Call) + Send + Sync>;

/// Wraps a service in a [`Door`]: [`RecoverService`] runs each request as a
/// step, calling the inner service (a clone of it, made ready) per attempt.
///
/// # Default
///
/// | option | default |
/// | --- | --- |
/// | [`args`](Self::args) | `null` |
/// | [`prepare`](Self::prepare) | none: the request is sent as it came |
/// | [`check`](Self::check) | none: every response is a success |
/// | [`observe`](Self::observe) | an I/O error (or one a boxed error wraps) as the `network` failure it names, else an `exception` of the error's type and message |
pub struct RecoverLayer<Req, Res, Err> {
    door: Door,
    args: Option<ArgsFn<Req>>,
    prepare: Option<PrepareFn<Req>>,
    check: Option<CheckFn<Res>>,
    observe: ObserveFn<Err>,
}

impl<Req, Res, Err> Clone for RecoverLayer<Req, Res, Err> {
    fn clone(&self) -> Self {
        RecoverLayer {
            door: self.door.clone(),
            args: self.args.clone(),
            prepare: self.prepare.clone(),
            check: self.check.clone(),
            observe: Arc::clone(&self.observe),
        }
    }
}

impl<Req, Res, Err> fmt::Debug for RecoverLayer<Req, Res, Err> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecoverLayer")
            .field("door", &self.door)
            .finish_non_exhaustive()
    }
}

impl<Req, Res, Err: fmt::Display + 'static> RecoverLayer<Req, Res, Err> {
    /// Each request under `door`'s runtime and options.
    pub fn new(door: Door) -> Self {
        RecoverLayer {
            door,
            args: None,
            prepare: None,
            check: None,
            observe: Arc::new(default_observation::<Err>),
        }
    }
}

impl<Req, Res, Err> RecoverLayer<Req, Res, Err> {
    /// The request's arguments as JSON (part of the idempotency key and of
    /// a dead-letter record).
    pub fn args(mut self, f: impl Fn(&Req) -> Value + Send + Sync + 'static) -> Self {
        self.args = Some(Arc::new(f));
        self
    }
    /// Sets each attempt's request from its [`Call`]: the idempotency key as
    /// a header, `call.target` as the host or model to call.
    pub fn prepare(mut self, f: impl Fn(&mut Req, &Call) + Send + Sync + 'static) -> Self {
        self.prepare = Some(Arc::new(f));
        self
    }
    /// A response to hand the component for judgement (`Some(observation)`,
    /// e.g. `{"source":"http","status":503}`); `None` is a success.
    pub fn check(mut self, f: impl Fn(&Res) -> Option<String> + Send + Sync + 'static) -> Self {
        self.check = Some(Arc::new(f));
        self
    }
    /// How the inner service's error becomes an observation.
    pub fn observe(mut self, f: impl Fn(&Err) -> String + Send + Sync + 'static) -> Self {
        self.observe = Arc::new(f);
        self
    }
}

impl<S, Req, Res, Err> Layer<S> for RecoverLayer<Req, Res, Err> {
    type Service = RecoverService<S, Req, Res, Err>;

    fn layer(&self, inner: S) -> Self::Service {
        RecoverService {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose every request is a step under a [`Door`]; made by
/// [`RecoverLayer`]. Its error is the door's: [`DoorError::Stopped`] with
/// the decision, the envelope for the model and the inner service's last error.
pub struct RecoverService<S, Req, Res, Err> {
    inner: S,
    layer: RecoverLayer<Req, Res, Err>,
}

impl<S: Clone, Req, Res, Err> Clone for RecoverService<S, Req, Res, Err> {
    fn clone(&self) -> Self {
        RecoverService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, Req, Res, Err> fmt::Debug for RecoverService<S, Req, Res, Err> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecoverService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, Req, Res, Err> Service<Req> for RecoverService<S, Req, Res, Err>
where
    S: Service<Req, Response = Res, Error = Err> + Clone + Send + 'static,
    S::Future: Send,
    Req: Clone + Send + 'static,
    Res: Send + 'static,
    Err: fmt::Display + Send + 'static,
{
    type Response = Res;
    type Error = DoorError<Err>;
    type Future = Pin<Box<dyn Future<Output = Result<Res, DoorError<Err>>> + Send>>;

    /// Always ready: each attempt waits for the readiness of its own clone
    /// of the inner service.
    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let inner = self.inner.clone();
        let layer = self.layer.clone();
        let args = layer.args.as_ref().map_or(Value::Null, |f| f(&request));
        Box::pin(async move {
            let prepare = layer.prepare.clone();
            let attempt = move |call: Call| {
                let mut service = inner.clone();
                let mut request = request.clone();
                if let Some(prepare) = &prepare {
                    prepare(&mut request, &call);
                }
                async move {
                    poll_fn(|cx| service.poll_ready(cx)).await?;
                    service.call(request).await
                }
            };
            let observe = Arc::clone(&layer.observe);
            let mut recover = Recoverable::recover(attempt, &layer.door)
                .args(args)
                .observe(move |e| observe(e));
            if let Some(check) = layer.check.clone() {
                recover = recover.check(move |r| check(r));
            }
            recover.await
        })
    }
}
