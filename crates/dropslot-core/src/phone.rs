//! Phone numbers as people write them: the one rule for a receiver's, a sender's and a
//! driver's phone.

/// The rule, as a client reads it.
pub const RULE: &str = "The phone number must have 7 to 15 digits, optionally starting with +.";

/// Optional `+`, then 7–15 digits; spaces, dashes, dots and parentheses allowed between.
pub fn valid_phone(s: &str) -> bool {
    let rest = s.strip_prefix('+').unwrap_or(s);
    let mut digits = 0;
    for c in rest.chars() {
        match c {
            '0'..='9' => digits += 1,
            ' ' | '-' | '.' | '(' | ')' => {}
            _ => return false,
        }
    }
    (7..=15).contains(&digits)
}
