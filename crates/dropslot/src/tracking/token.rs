//! The change page's token (CONTRACT §15): per shipment and unguessable, derived from the
//! drop-off's secret label token by HMAC-SHA256 (nothing new is stored), checked in constant
//! time. Knowing it does not reveal the label token, nor the other way round without the code.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of the MAC a link keeps: 128 bits, 32 hex characters (short enough for an SMS).
const KEPT: usize = 16;
/// Separates this use of the label token from any other.
const PURPOSE: &[u8] = b"dropslot change page v1\0";

fn mac(label_token: &str, code: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(label_token.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(PURPOSE);
    mac.update(code.as_bytes());
    mac
}

/// The token of the shipment `code` whose label token is `label_token`.
pub fn token(label_token: &str, code: &str) -> String {
    dropslot_core::ids::hex(&mac(label_token, code).finalize().into_bytes()[..KEPT])
}

/// Whether `given` is the shipment's token (in constant time once it has the token's form).
pub fn matches(label_token: &str, code: &str, given: &str) -> bool {
    let Some(bytes) = unhex(given).filter(|b| b.len() == KEPT) else { return false };
    mac(label_token, code).verify_truncated_left(&bytes).is_ok()
}

/// The change page's path (`/track/{code}/change/{token}`): what the tracking page links to.
pub fn change_path(code: &str, label_token: &str) -> String {
    format!("/track/{code}/change/{}", token(label_token, code))
}

/// The change page's link in a recipient message.
pub fn change_url(base: &str, code: &str, label_token: &str) -> String {
    format!("{base}{}", change_path(code, label_token))
}

/// Lower-case hex to bytes; `None` for anything else.
fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if text.len() % 2 != 0 {
        return None;
    }
    text.as_bytes().chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_belongs_to_one_shipment_and_its_label_token() {
        let t = token("label-secret", "DS1");
        assert_eq!(t.len(), 2 * KEPT);
        assert!(matches("label-secret", "DS1", &t));
        assert!(!matches("label-secret", "DS2", &t), "another code");
        assert!(!matches("other-secret", "DS1", &t), "another label token");
        assert!(!matches("label-secret", "DS1", &t.to_uppercase()), "one spelling");
        assert!(!matches("label-secret", "DS1", &t[..30]), "the whole token");
        assert!(!matches("label-secret", "DS1", ""));
        assert_eq!(change_url("https://x.test", "DS1", "label-secret"), format!("https://x.test/track/DS1/change/{t}"));
    }
}
