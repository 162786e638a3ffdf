//! Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`
//! with the endpoint's `whsec_` secret (its base64 part is the key).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A new signing secret: `whsec_` + base64 of 32 random bytes.
pub fn new_secret() -> String {
    format!("whsec_{}", STANDARD.encode(dropslot_core::ids::random_bytes::<32>()))
}

/// The HMAC key of a `whsec_` secret; a stored secret that does not decode is an error.
fn key(secret: &str) -> Result<Vec<u8>, String> {
    let b64 = secret.strip_prefix("whsec_").ok_or("a signing secret must start with whsec_")?;
    STANDARD.decode(b64).map_err(|e| format!("a signing secret is not base64: {e}"))
}

/// `v1,<signature>` for one secret.
pub fn sign(secret: &str, webhook_id: &str, timestamp: i64, body: &str) -> Result<String, String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key(secret)?).map_err(|e| e.to_string())?;
    mac.update(webhook_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    Ok(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// The `webhook-signature` header: one signature per secret (two during a rotation),
/// space-separated.
pub fn header(secrets: &[String], webhook_id: &str, timestamp: i64, body: &str) -> Result<String, String> {
    let signatures = secrets.iter().map(|s| sign(s, webhook_id, timestamp, body)).collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn matches_the_specification_example() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = r#"{"test": 2432232314}"#;
        let signature = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body).unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn rotation_sends_both_signatures() {
        let (a, b) = (new_secret(), new_secret());
        let h = header(&[a.clone(), b.clone()], "msg_1", 1, "{}").unwrap();
        let parts: Vec<&str> = h.split(' ').collect();
        assert_eq!(parts, [sign(&a, "msg_1", 1, "{}").unwrap(), sign(&b, "msg_1", 1, "{}").unwrap()]);
        assert!(sign("nope", "m", 1, "{}").is_err());
    }
}
