//! The one error type of the service and its rendering as the CONTRACT §2 envelope.
//! Every handler returns `Result<T>`; nothing else decides what an error looks like on the wire.
//! `envelope.rs` has the success envelope and the error envelope's text.

mod envelope;

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use envelope::{Envelope, ErrorEnvelope, envelope, error_json, json_response};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Field path (dotted, into the request body, or `header.X`/`path.x`) → human messages.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(transparent)]
#[schema(example = json!({"drop_offs.0.parcels.1.custom_code": ["The custom code must be 16 to 20 letters or digits."]}))]
pub struct FieldErrors(BTreeMap<String, Vec<String>>);

impl FieldErrors {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.entry(path.into()).or_default().push(message.into());
    }
    pub fn single(path: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new();
        e.add(path, message);
        e
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Messages collected so far (to tell whether a check added any).
    pub fn len_total(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }
    /// Every (path, message), paths in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().flat_map(|(path, msgs)| msgs.iter().map(move |m| (path.as_str(), m.as_str())))
    }
    /// Adds every message of `other`.
    pub fn merge(&mut self, other: FieldErrors) {
        for (path, messages) in other.0 {
            self.0.entry(path).or_default().extend(messages);
        }
    }
    pub fn contains(&self, path: &str) -> bool {
        self.0.contains_key(path)
    }
    /// `Ok(())` when nothing was collected, else the 422.
    pub fn into_result(self) -> Result<()> {
        if self.is_empty() { Ok(()) } else { Err(Error::Validation(self)) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    BadRequest { message: String, errors: FieldErrors },
    #[error("unauthenticated")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("not found")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Gone(&'static str),
    #[error("request body too large")]
    PayloadTooLarge,
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// A body of a type this route does not take (a proof that is not PNG or JPEG): a 415
    /// naming `header.Content-Type`.
    #[error("{0}")]
    MediaType(String),
    #[error("unsupported content encoding")]
    UnsupportedEncoding,
    #[error("the request body was not received in time")]
    BodyTimeout,
    #[error("the given data was invalid")]
    Validation(FieldErrors),
    /// Over a rate limit: when to retry (seconds) and the draft `RateLimit-Policy` and
    /// `RateLimit` header values.
    #[error("rate limited")]
    RateLimited { retry_after: u64, policy: String, limit: String },
    /// A quota other than the request rate is full (a driver's unattached proofs): a 429 whose
    /// message says what frees it.
    #[error("{message}")]
    QuotaFull { message: String, retry_after: u64 },
    #[error("service unavailable: {0}")]
    Unavailable(&'static str),
    /// A service this one depends on (the routing engine) did not answer usably: a 503 whose
    /// message says which and what to do (it names no secret).
    #[error("{0}")]
    Upstream(String),
    #[error("storage error")]
    Store(#[from] dropslot_store::StoreError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Validation(FieldErrors::single(path, message))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Gone(_) => StatusCode::GONE,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType | Self::UnsupportedEncoding | Self::MediaType(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            Self::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } | Self::QuotaFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable(_) | Self::Upstream(_) | Self::Store(dropslot_store::StoreError::Unavailable(_)) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Store(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The human message; never the internals of a 5xx.
    fn public_message(&self) -> String {
        match self {
            Self::BadRequest { message, .. } | Self::QuotaFull { message, .. } => message.clone(),
            Self::Unauthorized => "Unauthenticated: a valid bearer token is required.".into(),
            Self::Forbidden(m) | Self::Gone(m) => (*m).into(),
            Self::NotFound => "Not found.".into(),
            Self::MethodNotAllowed => "Method not allowed.".into(),
            Self::Conflict(m) | Self::Upstream(m) | Self::MediaType(m) => m.clone(),
            Self::PayloadTooLarge => "The request body is too large.".into(),
            Self::UnsupportedMediaType => "The request body must be JSON (Content-Type: application/json).".into(),
            Self::UnsupportedEncoding => {
                "The request body must not be compressed (Content-Encoding: identity, or none).".into()
            }
            Self::BodyTimeout => "The request body was not received in time.".into(),
            Self::Validation(_) => "The given data was invalid.".into(),
            Self::RateLimited { retry_after, .. } => {
                format!("Too many requests: this token's rate limit is reached. Retry in {retry_after} s.")
            }
            Self::Unavailable(_) | Self::Store(dropslot_store::StoreError::Unavailable(_)) => {
                "The service is temporarily unavailable; retry shortly.".into()
            }
            Self::Store(_) | Self::Internal(_) => "Internal server error.".into(),
        }
    }
}

/// What a 5xx response was, for the log line `http::edge` writes with the request's
/// id, method and path. A response extension: it never reaches the client.
#[derive(Clone, Debug)]
pub struct ServerError(pub std::sync::Arc<str>);

/// Serialises as `{}`.
#[derive(Serialize, Default, Clone, Copy, Debug, utoipa::ToSchema)]
#[schema(max_properties = 0)]
pub struct EmptyObject {}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        // Logged by `http::edge`, with the request's id, method and path.
        let failure = status
            .is_server_error()
            .then(|| ServerError(format!("{self:?}; source: {:?}", std::error::Error::source(&self)).into()));
        let mut empty = FieldErrors::new();
        if let Self::MediaType(m) = &self {
            empty.add("header.Content-Type", m.clone());
        }
        let errors = match &self {
            Self::Validation(e) | Self::BadRequest { errors: e, .. } => e,
            _ => &empty,
        };
        let bytes = error_json(status.as_u16(), &self.public_message(), errors);
        let mut res = (status, bytes).into_response();
        if let Some(failure) = failure {
            res.extensions_mut().insert(failure);
        }
        let headers = res.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match self {
            Self::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"dropslot\""));
            }
            // The rest of the body will not come, or will not be read: do not wait for it on
            // this connection.
            Self::BodyTimeout | Self::PayloadTooLarge => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Self::Unavailable(_) | Self::Store(dropslot_store::StoreError::Unavailable(_)) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Self::QuotaFull { retry_after, .. } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            Self::RateLimited { retry_after, policy, limit } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
                for (name, value) in [("ratelimit-policy", policy), ("ratelimit", limit)] {
                    if let Ok(v) = HeaderValue::from_str(&value) {
                        headers.insert(name, v);
                    }
                }
            }
            _ => {}
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every 503 tells the client when to retry: starting, draining, a request that timed
    /// out, a database that is unavailable.
    #[test]
    fn every_503_carries_retry_after() {
        let unavailable = dropslot_store::StoreError::Unavailable("down".into());
        for e in [
            Error::Unavailable("starting"),
            Error::Unavailable("draining"),
            Error::Unavailable("request timed out"),
            Error::Store(unavailable),
        ] {
            let res = e.into_response();
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(res.headers()[header::RETRY_AFTER], "1");
        }
    }
}
