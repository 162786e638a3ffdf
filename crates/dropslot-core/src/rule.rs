//! How a type's own parsing rule reports a refused value through serde: the JSON type was
//! right, the value is not (an amount with three decimals). The HTTP edge makes it a 422 at
//! its path rather than a 400; the configuration loader shows it as plain text.

use serde::de;

/// The marker that sets a rule's message apart from serde's own type errors.
const INVALID_VALUE: &str = "\u{1}invalid:";

/// A value error for a `Deserialize` impl to return.
pub fn invalid_value<E: de::Error>(message: &str) -> E {
    E::custom(format_args!("{INVALID_VALUE}{message}"))
}

/// The rule's message when `message` came from [`invalid_value`], else `None`.
pub fn broken(message: &str) -> Option<&str> {
    message.strip_prefix(INVALID_VALUE)
}

/// A message with the marker removed (for errors read outside the HTTP edge, such as the
/// configuration file's).
pub fn plain(message: &str) -> String {
    message.replace(INVALID_VALUE, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_message_is_told_apart_and_can_be_made_plain() {
        let e: serde_json::Error = invalid_value("Must be positive.");
        let text = e.to_string();
        assert_eq!(broken(&text), Some("Must be positive."));
        assert_eq!(broken("invalid type: string"), None);
        assert_eq!(plain(&text), "Must be positive.");
    }
}
