//! The interface's envelope, the one shape of every JSON response, and the raw JSON answer
//! stored responses are replayed with.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::Error;

/// The interface's envelope, the one shape of every JSON response: `{"status", "code",
/// "message", "object"}`, and on an error also `"errors"` (before `"object"`). `T` is the
/// type of `object`, so every response is typed end to end (and so is its OpenAPI schema).
#[derive(Serialize, Debug, utoipa::ToSchema)]
#[schema(
    description = "The envelope of every JSON answer: `status` (`success`), `code` (the HTTP status), `message` and the typed `object`."
)]
pub struct Envelope<'a, T: Serialize> {
    /// `success` (`error` only on the error envelope).
    #[schema(example = "success")]
    pub status: &'static str,
    /// Equals the HTTP status.
    pub code: u16,
    /// Short human text; do not parse it.
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub errors: Option<&'a super::FieldErrors>,
    pub object: &'a T,
}

/// The error envelope of CONTRACT §2, as the OpenAPI document names it. Never built: every
/// error body is written by [`error_json`] (a test holds the two to the same keys).
#[derive(utoipa::ToSchema)]
#[schema(
    description = "The error envelope (CONTRACT §2): the HTTP status is `code`; `errors` maps a field path (`drop_offs.0.address.text`, `header.Idempotency-Key`, `path.custom_code`, `query.limit`, `body`) to messages."
)]
#[allow(dead_code)] // a schema only
pub struct ErrorEnvelope {
    /// Always `error`.
    #[schema(pattern = "^error$", example = "error")]
    status: String,
    /// Equals the HTTP status.
    code: u16,
    /// Human text; do not parse it.
    message: String,
    /// Field path → messages; `{}` when no field is to blame.
    errors: super::FieldErrors,
    object: super::EmptyObject,
}

impl<'a, T: Serialize> Envelope<'a, T> {
    pub fn success(code: u16, message: &'a str, object: &'a T) -> Self {
        Envelope { status: "success", code, message, errors: None, object }
    }

    /// The JSON text; a value that cannot be serialised is an error, never an empty body.
    pub fn to_json(&self) -> serde_json::Result<String> {
        dropslot_core::json::to_string(self, 4096)
    }
}

impl<T: Serialize> IntoResponse for Envelope<'_, T> {
    fn into_response(self) -> Response {
        // The buffer starts at 4 KiB: from serde_json's 128 bytes it grew five times for a
        // preview's 2 KB, a copy each time.
        match dropslot_core::json::to_vec(&self, 4096) {
            Ok(out) => json_response(self.code, out),
            Err(e) => Error::Internal(format!("serialising a response: {e}")).into_response(),
        }
    }
}

/// The error envelope's JSON text (`object` is `{}`). Serialising strings and a string map
/// cannot fail; if it ever did, the answer is still a whole envelope, never an empty body.
pub fn error_json(code: u16, message: &str, errors: &super::FieldErrors) -> String {
    let object = super::EmptyObject {};
    Envelope { status: "error", code, message, errors: Some(errors), object: &object }.to_json().unwrap_or_else(|_| {
        r#"{"status":"error","code":500,"message":"Internal server error.","errors":{},"object":{}}"#.to_string()
    })
}

/// A success envelope with HTTP status = `code`.
pub fn envelope<T: Serialize>(code: u16, message: &str, object: &T) -> Response {
    Envelope::success(code, message, object).into_response()
}

/// Raw JSON bytes with a status (used to replay stored responses byte for byte).
pub fn json_response(code: u16, body: impl Into<axum::body::Body>) -> Response {
    let mut res = Response::new(body.into());
    *res.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    fn keys(json: &str) -> Vec<String> {
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        value.as_object().unwrap().keys().cloned().collect()
    }

    /// The documented error envelope is what `error_json` writes: the same keys, all required.
    #[test]
    fn error_json_has_the_documented_shape() {
        let schema = serde_json::to_value(ErrorEnvelope::schema()).unwrap();
        let mut documented: Vec<String> = schema["properties"].as_object().unwrap().keys().cloned().collect();
        let mut required: Vec<String> = serde_json::from_value(schema["required"].clone()).unwrap();
        let errors = crate::error::FieldErrors::single("drop_offs", "m");
        let mut written = keys(&error_json(422, "The given data was invalid.", &errors));
        for list in [&mut documented, &mut required, &mut written] {
            list.sort();
        }
        assert_eq!(written, documented);
        assert_eq!(written, required);
    }
}
