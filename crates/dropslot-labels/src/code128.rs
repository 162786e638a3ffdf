//! Code 128 encoding via `barcoders`, with our own choice of character sets.
//!
//! `barcoders` wants the caller to spell out the character sets (`Ɓ` = set B,
//! `Ć` = set C). We use set B and switch to set C for runs of four or more
//! digits, the same rule Zebra's automatic mode (`^BC…,A`) applies, so the
//! PDF bars and the printer's bars have about the same width.

use barcoders::sym::code128::Code128;

const SET_B: char = '\u{0181}';
const SET_C: char = '\u{0106}';

/// Makes `raw` safe to encode and to put in a ZPL `^FD`: printable ASCII is
/// kept, except `^` and `~` (ZPL command prefixes), `>` (a Code 128 invocation
/// prefix on Zebra printers) and `\`; those and anything else become `?`.
/// Leading/trailing spaces are trimmed.
pub(crate) fn sanitize(raw: &str) -> String {
    raw.trim()
        .chars()
        .map(|c| match c {
            '^' | '~' | '>' | '\\' => '?',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

/// Longest payload we encode. Even at 1 pt modules a 100-character symbol is
/// wider than any page we print; and `barcoders`' checksum sums in `i32` and
/// overflows (a panic in debug builds) past about 6,000 characters.
const MAX_PAYLOAD: usize = 100;

/// Encodes a [`sanitize`]d payload as modules (`true` = bar), from the start
/// character through the stop pattern, without quiet zones. `None` for an
/// empty payload or one longer than [`MAX_PAYLOAD`] (too wide to print).
pub(crate) fn encode(payload: &str) -> Option<Vec<bool>> {
    if payload.is_empty() || payload.len() > MAX_PAYLOAD || !payload.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return None;
    }
    let modules =
        Code128::new(with_sets(payload)).or_else(|_| Code128::new(format!("{SET_B}{payload}"))).ok()?.encode();
    Some(modules.into_iter().map(|m| m == 1).collect())
}

/// Inserts set selectors: set C for digit runs of ≥ 4 (an odd run leaves its
/// first digit in set B), set B elsewhere.
fn with_sets(payload: &str) -> String {
    let bytes = payload.as_bytes();
    let mut out = String::with_capacity(payload.len() + 4);
    let mut in_c = None;
    let mut i = 0;
    while i < bytes.len() {
        let run = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if run >= 4 {
            if run % 2 == 1 {
                if in_c != Some(false) {
                    out.push(SET_B);
                    in_c = Some(false);
                }
                out.push(char::from(bytes[i]));
                i += 1;
            }
            if in_c != Some(true) {
                out.push(SET_C);
                in_c = Some(true);
            }
            let even = run - run % 2;
            out.push_str(&payload[i..i + even]);
            i += even;
        } else {
            if in_c != Some(false) {
                out.push(SET_B);
                in_c = Some(false);
            }
            let n = run.max(1);
            out.push_str(&payload[i..i + n]);
            i += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets() {
        assert_eq!(with_sets("DOK7M2Q9XR4TB"), "\u{181}DOK7M2Q9XR4TB");
        assert_eq!(with_sets("123456"), "\u{106}123456");
        assert_eq!(with_sets("12345"), "\u{181}1\u{106}2345");
        assert_eq!(with_sets("AB12345678C"), "\u{181}AB\u{106}12345678\u{181}C");
        assert_eq!(with_sets("A123"), "\u{181}A123");
    }

    #[test]
    fn encodes_with_quiet_free_ends() {
        let m = encode("DOK7M2Q9XR4TB").unwrap();
        // start + 13 data + check = 15 symbols of 11 modules, stop = 13.
        assert_eq!(m.len(), 15 * 11 + 13);
        assert!(m[0] && *m.last().unwrap());
        assert!(encode("").is_none());
        assert!(encode(&"A".repeat(MAX_PAYLOAD)).is_some());
        assert!(encode(&"A".repeat(10_000)).is_none(), "too long to print, and no overflow");
        assert_eq!(sanitize(" ^XZ~é> "), "?XZ???");
    }
}
