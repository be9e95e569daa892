//! The borrowed observation that classification reads.
//!
//! [`ObservationView`] is what [`Observation`] is, with its JSON members as
//! [`View`]s: built straight from the JSON text (the reference's
//! `classify_json` / `decide_json`, no `Value` tree) or from an `&Observation`
//! (views of its `Value`s, no text round trip). The rules of the input
//! contract (what each `source` needs, the shape inference, every error text)
//! live here once; [`Observation::from_json`] is this parse made owned.

mod contract;

use crate::error::PolicyError;
use crate::headers::{HeaderList, Headers};
use crate::json_view::View;
use crate::model::{CallKind, TimeoutPhase};
use crate::observation::{Body, ExceptionDetail, Failure, MAX_PARSED_BODY, Observation, Protocol};
use std::borrow::Cow;

/// An HTTP body, borrowed.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum BodyView<'a> {
    /// No body.
    #[default]
    Empty,
    /// A JSON body (given as JSON, or text that parsed as JSON).
    Json(View<'a>),
    /// Any other text.
    Text(Cow<'a, str>),
}

impl<'a> BodyView<'a> {
    /// From text: JSON when it parses as JSON, else text (as [`Body::from_text`]).
    pub fn from_text(s: Cow<'a, str>) -> Self {
        let t = s.trim_start();
        if s.len() <= MAX_PARSED_BODY && (t.starts_with('{') || t.starts_with('[')) {
            let parsed = match &s {
                Cow::Borrowed(b) => View::parse(b).ok(),
                Cow::Owned(o) => View::parse(o).ok().map(View::into_owned),
            };
            if let Some(v) = parsed {
                return BodyView::Json(v);
            }
        }
        if s.trim().is_empty() {
            BodyView::Empty
        } else {
            BodyView::Text(s)
        }
    }
}

/// What failed, borrowed (as [`Failure`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FailureView<'a> {
    /// An HTTP response.
    Http {
        /// Status code.
        status: u16,
        /// Headers.
        headers: Cow<'a, HeaderList<'a>>,
        /// Body.
        body: BodyView<'a>,
    },
    /// A JSON-RPC message.
    Rpc {
        /// Dialect.
        protocol: Protocol,
        /// The message.
        message: View<'a>,
    },
    /// A network error.
    Network {
        /// Error code.
        code: Cow<'a, str>,
        /// Message.
        message: Option<Cow<'a, str>>,
    },
    /// A client exception.
    Exception {
        /// Qualified type name.
        type_name: Cow<'a, str>,
        /// Message.
        message: Option<Cow<'a, str>>,
        /// What else it carries, if anything.
        detail: Option<Box<ExceptionDetailView<'a>>>,
    },
    /// A caller-measured timeout.
    Timeout {
        /// Phase.
        phase: TimeoutPhase,
        /// Waited for, in ms.
        after_ms: Option<u64>,
    },
}

/// What an exception carries, borrowed (as [`ExceptionDetail`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ExceptionDetailView<'a> {
    /// The HTTP status it carries.
    pub status: Option<u16>,
    /// The response headers.
    pub headers: HeaderList<'a>,
    /// The response body.
    pub body: BodyView<'a>,
    /// The framework's own retry verdict (a hint).
    pub retryable: Option<bool>,
    /// The exception it was raised from.
    pub cause: Option<Box<ObservationView<'a>>>,
    /// The members of an exception group.
    pub exceptions: Vec<ObservationView<'a>>,
}

impl<'a> ExceptionDetailView<'a> {
    fn from_detail(d: &'a ExceptionDetail) -> Self {
        Self {
            status: d.status,
            headers: d.headers.list().clone(),
            body: body_view(&d.body),
            retryable: d.retryable,
            cause: d
                .cause
                .as_deref()
                .map(|c| Box::new(ObservationView::from_observation(c))),
            exceptions: d
                .exceptions
                .iter()
                .map(ObservationView::from_observation)
                .collect(),
        }
    }

    fn into_detail(self) -> ExceptionDetail {
        ExceptionDetail {
            status: self.status,
            headers: Headers::from_list(self.headers),
            body: owned_body(self.body),
            retryable: self.retryable,
            cause: self.cause.map(|c| Box::new(c.into_observation())),
            exceptions: self
                .exceptions
                .into_iter()
                .map(ObservationView::into_observation)
                .collect(),
        }
    }
}

fn body_view(body: &Body) -> BodyView<'_> {
    match body {
        Body::Empty => BodyView::Empty,
        Body::Json(v) => BodyView::Json(View::from_value(v)),
        Body::Text(t) => BodyView::Text(Cow::Borrowed(t)),
    }
}

fn owned_body(body: BodyView<'_>) -> Body {
    match body {
        BodyView::Empty => Body::Empty,
        BodyView::Json(v) => Body::Json(v.to_value()),
        BodyView::Text(t) => Body::Text(t.into_owned()),
    }
}

/// A failed call as observed, borrowed (as [`Observation`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ObservationView<'a> {
    /// What failed.
    pub failure: FailureView<'a>,
    /// Kind of call, if known.
    pub call: Option<CallKind>,
    /// Provider hint, lowercase.
    pub provider: Option<Cow<'a, str>>,
    /// Caller's request id.
    pub request_id: Option<Cow<'a, str>>,
    /// Caller's clock (Unix ms).
    pub now_ms: Option<u64>,
    /// An embedded decision context, if any.
    pub context: Option<View<'a>>,
}

impl<'a> ObservationView<'a> {
    /// Parse the JSON text of an observation (errors as [`Observation::from_json_str`]).
    pub fn parse(text: &'a str) -> Result<Self, PolicyError> {
        let v = View::parse(text).map_err(|e| PolicyError::json("observation", &e))?;
        Self::from_view(v)
    }

    /// An observation given as a JSON value, its strings borrowed (errors as
    /// [`Observation::from_json`]).
    pub fn from_value(v: &'a serde_json::Value) -> Result<Self, PolicyError> {
        Self::from_view(View::from_value(v))
    }

    /// A view of an owned observation: its `Value`s are borrowed, not re-parsed.
    pub fn from_observation(obs: &'a Observation) -> Self {
        let failure = match &obs.failure {
            Failure::Http {
                status,
                headers,
                body,
            } => FailureView::Http {
                status: *status,
                headers: Cow::Borrowed(headers.list()),
                body: body_view(body),
            },
            Failure::Rpc { protocol, message } => FailureView::Rpc {
                protocol: *protocol,
                message: View::from_value(message),
            },
            Failure::Network { code, message } => FailureView::Network {
                code: Cow::Borrowed(code),
                message: message.as_deref().map(Cow::Borrowed),
            },
            Failure::Exception {
                type_name,
                message,
                detail,
            } => FailureView::Exception {
                type_name: Cow::Borrowed(type_name),
                message: message.as_deref().map(Cow::Borrowed),
                detail: detail
                    .as_deref()
                    .map(|d| Box::new(ExceptionDetailView::from_detail(d))),
            },
            Failure::Timeout { phase, after_ms } => FailureView::Timeout {
                phase: *phase,
                after_ms: *after_ms,
            },
        };
        Self {
            failure,
            call: obs.call,
            provider: obs.provider.as_deref().map(Cow::Borrowed),
            request_id: obs.request_id.as_deref().map(Cow::Borrowed),
            now_ms: obs.now_ms,
            context: obs.context.as_ref().map(View::from_value),
        }
    }

    /// The owned observation (its views become the `Value`s serde_json would have built).
    pub fn into_observation(self) -> Observation {
        let owned = |s: Cow<'_, str>| s.into_owned();
        let failure = match self.failure {
            FailureView::Http {
                status,
                headers,
                body,
            } => Failure::Http {
                status,
                headers: Headers::from_list(headers.into_owned()),
                body: owned_body(body),
            },
            FailureView::Rpc { protocol, message } => Failure::Rpc {
                protocol,
                message: message.to_value(),
            },
            FailureView::Network { code, message } => Failure::Network {
                code: code.into_owned(),
                message: message.map(owned),
            },
            FailureView::Exception {
                type_name,
                message,
                detail,
            } => Failure::Exception {
                type_name: type_name.into_owned(),
                message: message.map(owned),
                detail: detail.map(|d| Box::new(d.into_detail())),
            },
            FailureView::Timeout { phase, after_ms } => Failure::Timeout { phase, after_ms },
        };
        Observation {
            failure,
            call: self.call,
            provider: self.provider.map(owned),
            request_id: self.request_id.map(owned),
            now_ms: self.now_ms,
            context: self.context.as_ref().map(View::to_value),
        }
    }
}
