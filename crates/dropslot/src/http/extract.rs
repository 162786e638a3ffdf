//! `JsonBody<T>`: the one way a request body enters the service. Non-JSON or compressed →
//! 415, over the limit → 413, stalled → 408, malformed → 400, a wrong type → 400 naming the
//! dotted field path, a required field left out → 422 at its path (see `json.rs`). `FormBody`, the same for a public page's plain HTML
//! form. Also `PathParam` and `query_params`, the other two ways input enters.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, FieldErrors};

/// The query's parameters by name, each at most once and each one of `known`.
pub fn query_params<'a>(raw: Option<&str>, known: &[&'a str]) -> Result<HashMap<&'a str, String>, Error> {
    let mut errors = FieldErrors::new();
    let mut out = HashMap::new();
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        match known.iter().find(|k| **k == key) {
            Some(k) if out.contains_key(k) => errors.add(format!("query.{key}"), "Give this parameter once."),
            Some(k) => {
                out.insert(*k, value.into_owned());
            }
            None => errors.add(format!("query.{key}"), format!("Unknown parameter; use {}.", known.join(", "))),
        }
    }
    errors.into_result()?;
    Ok(out)
}

/// A path parameter; one that does not parse names nothing that exists: an enveloped 404.
pub struct PathParam<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> axum::extract::FromRequestParts<S> for PathParam<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Error> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| PathParam(v))
            .map_err(|_| Error::NotFound)
    }
}

/// The typed body and the parsed JSON value it was read from (the idempotency fingerprint
/// is the value's canonical text, so both come from the same single parse).
pub struct JsonBody<T>(pub T, pub Value);

fn is_json(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Only an uncompressed body is accepted: a compressed one would be parsed as garbage.
fn identity_encoding(headers: &axum::http::HeaderMap) -> bool {
    headers.get_all(CONTENT_ENCODING).iter().all(|v| {
        v.to_str().is_ok_and(|v| v.split(',').all(|c| c.trim().is_empty() || c.trim().eq_ignore_ascii_case("identity")))
    })
}

/// How much of a body is read, and for how long: what [`JsonBody`] needs of the state.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Bytes; over it is a 413.
    pub size: usize,
    /// A body not received whole within it is a 408.
    pub read_timeout: std::time::Duration,
}

/// The whole body of `req`, uncompressed, within `limits`: a compressed body is a 415, a
/// declared length over the limit a 413 before a byte is read (and a body that turns out
/// longer a 413 too, as the route's `DefaultBodyLimit` marks it), one that stalls a 408.
/// [`JsonBody`] reads through it; so does a route that takes another type of body (a proof
/// image), with its own limits.
pub async fn read_body<S: Send + Sync>(req: Request, state: &S, limits: BodyLimits) -> Result<Bytes, Error> {
    if !identity_encoding(req.headers()) {
        return Err(Error::UnsupportedEncoding);
    }
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.size as u64) {
        return Err(Error::PayloadTooLarge);
    }
    // A body that stalls (trickled, or shorter than its Content-Length) is a 408.
    let read = tokio::time::timeout(limits.read_timeout, Bytes::from_request(req, state));
    read.await.map_err(|_| Error::BodyTimeout)?.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            Error::PayloadTooLarge
        } else {
            Error::BadRequest { message: "The request body could not be read.".into(), errors: FieldErrors::new() }
        }
    })
}

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
    BodyLimits: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Error> {
        let limits = BodyLimits::from_ref(state);
        let content_type = super::single(req.headers(), &CONTENT_TYPE, "Content-Type")?;
        let json = content_type.and_then(|v| v.to_str().ok()).is_some_and(is_json);
        if !json {
            return Err(Error::UnsupportedMediaType);
        }
        let bytes = read_body(req, state, limits).await?;
        let value = super::json::parse_value(&bytes)?;
        let typed = super::json::from_value(&value)?;
        Ok(JsonBody(typed, value))
    }
}

/// A submitted HTML form (`application/x-www-form-urlencoded`): its fields in order, read
/// within the same limits as a JSON body. Anything else is a 415.
pub struct FormBody(pub Vec<(String, String)>);

impl FormBody {
    /// The first value of `name`, as sent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

impl<S> FromRequest<S> for FormBody
where
    S: Send + Sync,
    BodyLimits: FromRef<S>,
{
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Error> {
        let limits = BodyLimits::from_ref(state);
        let content_type = super::single(req.headers(), &CONTENT_TYPE, "Content-Type")?;
        let form = content_type.and_then(|v| v.to_str().ok()).is_some_and(|v| {
            v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
        });
        if !form {
            return Err(Error::UnsupportedMediaType);
        }
        let bytes = read_body(req, state, limits).await?;
        Ok(FormBody(url::form_urlencoded::parse(&bytes).into_owned().collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types_and_encodings() {
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        let mut h = axum::http::HeaderMap::new();
        assert!(identity_encoding(&h));
        h.insert(CONTENT_ENCODING, "identity".parse().unwrap());
        assert!(identity_encoding(&h));
        h.append(CONTENT_ENCODING, "gzip".parse().unwrap());
        assert!(!identity_encoding(&h));
    }
}
