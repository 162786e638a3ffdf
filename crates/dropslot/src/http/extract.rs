//! `JsonBody<T>`: the one way a request body enters the service. Non-JSON → 415, over the
//! limit → 413, malformed → 400, a wrong type → 400 naming the dotted field path.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

use crate::error::{Error, FieldErrors};

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

/// The parsed body and its raw bytes (kept for idempotency fingerprints).
pub struct JsonBody<T>(pub T, pub Bytes);

fn is_json(content_type: &str) -> bool {
    let mime = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Error> {
        let json = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(is_json);
        if !json {
            return Err(Error::UnsupportedMediaType);
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                Error::PayloadTooLarge
            } else {
                Error::BadRequest { message: "The request body could not be read.".into(), errors: FieldErrors::new() }
            }
        })?;
        let value = parse(&bytes)?;
        Ok(JsonBody(value, bytes))
    }
}

/// Deserialises with the failing field's dotted path (`drop_offs.0.parcels.1.values`).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| classify(&e));
    let value = value?;
    de.end().map_err(|e| Error::BadRequest { message: format!("Malformed JSON: {e}."), errors: FieldErrors::new() })?;
    Ok(value)
}

fn classify(e: &serde_path_to_error::Error<serde_json::Error>) -> Error {
    {
        let path = dotted(e.path());
        let inner = e.inner();
        if inner.is_data() && !path.is_empty() {
            Error::BadRequest {
                message: "A field has the wrong JSON type.".into(),
                errors: FieldErrors::single(path, strip_position(&inner.to_string())),
            }
        } else if inner.is_data() {
            Error::BadRequest {
                message: "The request body must be a JSON object.".into(),
                errors: FieldErrors::single("body", strip_position(&inner.to_string())),
            }
        } else {
            Error::BadRequest { message: format!("Malformed JSON: {inner}."), errors: FieldErrors::new() }
        }
    }
}

fn dotted(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path {
        if !out.is_empty() {
            out.push('.');
        }
        match seg {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } => out.push_str(key),
            Segment::Enum { variant } => out.push_str(variant),
            Segment::Unknown => out.push('?'),
        }
    }
    out
}

/// `serde_json` appends " at line 1 column 57": useless to a client reading a field path.
fn strip_position(msg: &str) -> String {
    let msg = msg.split(" at line ").next().unwrap_or(msg);
    let mut s = msg.to_string();
    if let Some(first) = s.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    s.push('.');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct P {
        a: Option<Vec<Q>>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Q {
        v: Option<f64>,
    }

    #[test]
    fn type_errors_carry_dotted_paths() {
        let Err(Error::BadRequest { errors, .. }) = parse::<P>(br#"{"a":[{"v":1},{"v":"x"}]}"#) else { panic!() };
        assert!(errors.contains("a.1.v"), "{errors:?}");
        assert!(matches!(parse::<P>(b"{\"a\":"), Err(Error::BadRequest { .. })));
        assert!(matches!(parse::<P>(b"{} trailing"), Err(Error::BadRequest { .. })));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(!is_json("text/plain"));
    }
}
