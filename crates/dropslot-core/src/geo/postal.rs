//! Postal-code extraction: finds the Canadian postal code / FSA or US ZIP in free address
//! text and gives its normalised form and the key the offline geocoder dataset uses.

/// Which postal system a code belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Country {
    Ca,
    Us,
}

impl Country {
    /// The ISO 3166-1 alpha-2 code, as in the dataset's `country` column.
    pub fn code(self) -> &'static str {
        match self {
            Country::Ca => "CA",
            Country::Us => "US",
        }
    }
}

/// A postal code found in free address text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostalCode {
    /// Canadian: FSA ("M5V") and optional LDU ("2T6"), both stored upper-case.
    Ca { fsa: String, ldu: Option<String> },
    /// US: five-digit ZIP and optional +4.
    Us { zip: String, plus4: Option<String> },
}

impl PostalCode {
    /// Finds the postal code of an address text, case-insensitively.
    ///
    /// Recognised: Canadian "M5V 2T6", "m5v2t6", "M5V-2T6" or a lone FSA token "M5V"; US
    /// "10001" or "10001-1234" as a standalone token. Every candidate must be bounded by
    /// non-alphanumeric characters (so "AM5V" and "123456" do not match).
    ///
    /// Addresses end with their postal code, so later candidates win. A full Canadian code
    /// is specific enough to win outright (in "100 King St W, Toronto, ON M5X 1A9" nothing
    /// else is considered); otherwise the last lone FSA or ZIP is taken, which keeps a
    /// 5-digit street number from beating a trailing FSA and an "Apt B4C"-like token from
    /// beating a trailing ZIP. Returns `None` if there is no candidate.
    pub fn find_in(text: &str) -> Option<PostalCode> {
        let bytes = text.as_bytes();
        let mut last_full = None;
        let mut last_other = None;
        // Tracks the character before the current one; the start of text counts as a
        // boundary. Unicode-aware so that "ÉM5V" is one word, not "É" + "M5V".
        let mut prev_alnum = false;
        for (i, c) in text.char_indices() {
            let token_start = c.is_ascii_alphanumeric() && !prev_alnum;
            prev_alnum = c.is_alphanumeric();
            if !token_start {
                continue;
            }
            if let Some(code) = match_ca_full(text, bytes, i) {
                last_full = Some(code);
            } else if let Some(code) = match_ca_fsa(text, bytes, i).or_else(|| match_us(text, bytes, i)) {
                last_other = Some(code);
            }
        }
        last_full.or(last_other)
    }

    /// The interface's normalised form: lower-case with a space, "m5v 2t6"; a lone FSA
    /// "m5v"; US "10001" or "10001-1234".
    pub fn normalized(&self) -> String {
        match self {
            PostalCode::Ca { fsa, ldu: Some(ldu) } => {
                let mut code = String::with_capacity(fsa.len() + 1 + ldu.len());
                for part in [fsa.as_str(), " ", ldu] {
                    code.push_str(part);
                }
                code.make_ascii_lowercase();
                code
            }
            PostalCode::Ca { fsa, ldu: None } => fsa.to_ascii_lowercase(),
            PostalCode::Us { zip, plus4: Some(plus4) } => format!("{zip}-{plus4}"),
            PostalCode::Us { zip, plus4: None } => zip.clone(),
        }
    }

    /// The key used in the dataset: the upper-case FSA ("M5V") or the 5-digit ZIP.
    pub fn lookup_key(&self) -> &str {
        match self {
            PostalCode::Ca { fsa, .. } => fsa,
            PostalCode::Us { zip, .. } => zip,
        }
    }

    pub fn country(&self) -> Country {
        match self {
            PostalCode::Ca { .. } => Country::Ca,
            PostalCode::Us { .. } => Country::Us,
        }
    }
}

/// Whether `b` (already upper-cased) may be an FSA's first letter: W and Z are never used
/// there, and D, F, I, O, Q, U nowhere in a Canadian postal code.
pub(crate) fn is_fsa_first(b: u8) -> bool {
    matches!(b, b'A' | b'B' | b'C' | b'E' | b'G' | b'H' | b'J' | b'K' | b'L' | b'M' | b'N')
        || matches!(b, b'P' | b'R' | b'S' | b'T' | b'V' | b'X' | b'Y')
}

/// Whether `b` (already upper-cased) may be a postal-code letter after the first one.
pub(crate) fn is_postal_letter(b: u8) -> bool {
    b.is_ascii_uppercase() && !matches!(b, b'D' | b'F' | b'I' | b'O' | b'Q' | b'U')
}

/// Whether `bytes[at..]` is an FSA (letter, digit, letter) in any case. `get` keeps short
/// tails from panicking.
fn is_fsa_at(bytes: &[u8], at: usize) -> bool {
    matches!(bytes.get(at..at + 3), Some(&[a, d, b])
        if is_fsa_first(a.to_ascii_uppercase())
            && d.is_ascii_digit()
            && is_postal_letter(b.to_ascii_uppercase()))
}

/// Whether `bytes[at..]` is an LDU (digit, letter, digit) in any case.
fn is_ldu_at(bytes: &[u8], at: usize) -> bool {
    matches!(bytes.get(at..at + 3), Some(&[d1, l, d2])
        if d1.is_ascii_digit() && is_postal_letter(l.to_ascii_uppercase()) && d2.is_ascii_digit())
}

fn is_digits(bytes: &[u8], at: usize, n: usize) -> bool {
    bytes.get(at..at + n).is_some_and(|s| s.iter().all(u8::is_ascii_digit))
}

/// Whether a token may end at byte `at`: end of text or a non-alphanumeric character. `at`
/// always follows ASCII bytes, so it is a char boundary; `get` makes that not matter anyway.
fn ends_token(text: &str, at: usize) -> bool {
    text.get(at..).is_none_or(|rest| rest.chars().next().is_none_or(|c| !c.is_alphanumeric()))
}

fn upper(bytes: &[u8], at: usize) -> String {
    bytes[at..at + 3].iter().map(|b| char::from(b.to_ascii_uppercase())).collect()
}

/// "M5V 2T6", "M5V-2T6" or "M5V2T6" starting at `at`.
fn match_ca_full(text: &str, bytes: &[u8], at: usize) -> Option<PostalCode> {
    if !is_fsa_at(bytes, at) {
        return None;
    }
    let sep = usize::from(matches!(bytes.get(at + 3), Some(b' ' | b'-')));
    let ldu_at = at + 3 + sep;
    if !is_ldu_at(bytes, ldu_at) || !ends_token(text, ldu_at + 3) {
        return None;
    }
    Some(PostalCode::Ca { fsa: upper(bytes, at), ldu: Some(upper(bytes, ldu_at)) })
}

/// A lone FSA token starting at `at`.
fn match_ca_fsa(text: &str, bytes: &[u8], at: usize) -> Option<PostalCode> {
    (is_fsa_at(bytes, at) && ends_token(text, at + 3)).then(|| PostalCode::Ca { fsa: upper(bytes, at), ldu: None })
}

/// A standalone "10001" or "10001-1234" starting at `at`.
fn match_us(text: &str, bytes: &[u8], at: usize) -> Option<PostalCode> {
    if !is_digits(bytes, at, 5) || !ends_token(text, at + 5) {
        return None;
    }
    let zip = text[at..at + 5].to_owned();
    let plus4 = (bytes.get(at + 5) == Some(&b'-') && is_digits(bytes, at + 6, 4) && ends_token(text, at + 10))
        .then(|| text[at + 6..at + 10].to_owned());
    Some(PostalCode::Us { zip, plus4 })
}

#[cfg(test)]
mod tests {
    use super::*;

    // `Option`-returning so that they compare directly with `find_in`.
    #[allow(clippy::unnecessary_wraps)]
    fn ca(fsa: &str, ldu: Option<&str>) -> Option<PostalCode> {
        Some(PostalCode::Ca { fsa: fsa.into(), ldu: ldu.map(Into::into) })
    }

    #[allow(clippy::unnecessary_wraps)]
    fn us(zip: &str, plus4: Option<&str>) -> Option<PostalCode> {
        Some(PostalCode::Us { zip: zip.into(), plus4: plus4.map(Into::into) })
    }

    #[test]
    fn canadian_full_code_beats_street_number() {
        let found = PostalCode::find_in("100 King St W, Toronto, ON M5X 1A9");
        assert_eq!(found, ca("M5X", Some("1A9")));
        // A 5-digit street number is still not a ZIP when a Canadian code follows.
        let found = PostalCode::find_in("10000 Yonge St, Richmond Hill, ON L4C 3C8");
        assert_eq!(found, ca("L4C", Some("3C8")));
        assert_eq!(PostalCode::find_in("12345 Main St, Toronto ON M5V"), ca("M5V", None));
    }

    #[test]
    fn canadian_forms() {
        for text in ["M5V 2T6", "m5v 2t6", "M5V2T6", "m5v2t6", "M5V-2T6", "Toronto, m5V-2t6."] {
            let found = PostalCode::find_in(text).unwrap();
            assert_eq!(Some(found.clone()), ca("M5V", Some("2T6")), "{text}");
            assert_eq!(found.normalized(), "m5v 2t6");
            assert_eq!(found.lookup_key(), "M5V");
            assert_eq!(found.country(), Country::Ca);
        }
    }

    #[test]
    fn lone_fsa() {
        let found = PostalCode::find_in("Toronto ON m5v").unwrap();
        assert_eq!(Some(found.clone()), ca("M5V", None));
        assert_eq!(found.normalized(), "m5v");
        assert_eq!(found.lookup_key(), "M5V");
    }

    #[test]
    fn full_code_preferred_over_lone_fsa_and_last_full_wins() {
        assert_eq!(PostalCode::find_in("M5V 2T6, then K1A"), ca("M5V", Some("2T6")));
        assert_eq!(PostalCode::find_in("from M5V 2T6 to K1A 0B1"), ca("K1A", Some("0B1")));
        // A full Canadian code wins even over a later ZIP.
        assert_eq!(PostalCode::find_in("M5V 2T6 ref 10001"), ca("M5V", Some("2T6")));
    }

    #[test]
    fn invalid_letters_are_not_codes() {
        for bad in ['D', 'F', 'I', 'O', 'Q', 'U'] {
            let full = format!("Toronto ON M5{bad} 2T6");
            assert_eq!(PostalCode::find_in(&full), None, "{full}");
            let lone = format!("Toronto ON M5{bad}");
            assert_eq!(PostalCode::find_in(&lone), None, "{lone}");
            // Not as an LDU letter either; the FSA alone then remains.
            let ldu = format!("M5V 2{bad}6");
            assert_eq!(PostalCode::find_in(&ldu), ca("M5V", None), "{ldu}");
        }
        // W and Z never start an FSA.
        assert_eq!(PostalCode::find_in("W5V 2T6"), None);
        assert_eq!(PostalCode::find_in("Z5V"), None);
    }

    #[test]
    fn tokens_must_be_bounded() {
        assert_eq!(PostalCode::find_in("AM5V 2T6"), None);
        assert_eq!(PostalCode::find_in("M5V 2T6X"), ca("M5V", None));
        assert_eq!(PostalCode::find_in("M5VX"), None);
        assert_eq!(PostalCode::find_in("order 123456"), None);
        assert_eq!(PostalCode::find_in("A10001"), None);
        assert_eq!(PostalCode::find_in("10001B"), None);
    }

    #[test]
    fn us_zip_and_plus4() {
        let found = PostalCode::find_in("Beverly Hills, CA 90210-1234").unwrap();
        assert_eq!(Some(found.clone()), us("90210", Some("1234")));
        assert_eq!(found.normalized(), "90210-1234");
        assert_eq!(found.lookup_key(), "90210");
        assert_eq!(found.country(), Country::Us);

        let found = PostalCode::find_in("New York, NY 10001").unwrap();
        assert_eq!(found.normalized(), "10001");
        // A malformed +4 leaves the plain ZIP.
        assert_eq!(PostalCode::find_in("NY 10001-123"), us("10001", None));
    }

    #[test]
    fn street_number_and_zip() {
        assert_eq!(PostalCode::find_in("350 5th Ave, New York, NY 10118"), us("10118", None));
        assert_eq!(PostalCode::find_in("35000 5th Ave, New York, NY 10118"), us("10118", None));
        // A suite that looks like an FSA does not beat the trailing ZIP.
        assert_eq!(PostalCode::find_in("350 5th Ave, Suite B4C, NY 10118"), us("10118", None));
    }

    #[test]
    fn unicode_text() {
        let text = "Café Crème, 1 Rue Saint-Jérôme, Montréal (QC) h3e 1a1 🚚";
        assert_eq!(PostalCode::find_in(text), ca("H3E", Some("1A1")));
        assert_eq!(PostalCode::find_in("🚚M5V 2T6🚚"), ca("M5V", Some("2T6")));
        // A non-ASCII letter glued on front makes it part of a word.
        assert_eq!(PostalCode::find_in("ÉM5V 2T6"), None);
        assert_eq!(PostalCode::find_in("M5V 2T6é"), ca("M5V", None));
        assert_eq!(PostalCode::find_in("１０００１"), None);
    }

    #[test]
    fn nothing_found() {
        assert_eq!(PostalCode::find_in(""), None);
        assert_eq!(PostalCode::find_in("   \n\t"), None);
        assert_eq!(PostalCode::find_in("1 Main St, Springfield"), None);
    }

    #[test]
    fn never_panics() {
        let long = "9".repeat(200_000) + " M5V 2T6 " + &"é🚚".repeat(50_000);
        assert_eq!(PostalCode::find_in(&long), ca("M5V", Some("2T6")));
        // Every short string over an alphabet of the interesting characters, so that
        // truncated codes at the end of text and multi-byte neighbours are all covered.
        let alphabet = ['M', '5', 'V', '2', 'T', ' ', '-', 'é', '🚚'];
        let mut buf = String::new();
        let mut idx = [0usize; 6];
        loop {
            buf.clear();
            buf.extend(idx.iter().map(|&i| alphabet[i]));
            for (start, _) in buf.char_indices() {
                let _ = PostalCode::find_in(&buf[start..]);
                let _ = PostalCode::find_in(&buf[..start]);
            }
            let mut pos = 0;
            loop {
                if pos == idx.len() {
                    return;
                }
                idx[pos] += 1;
                if idx[pos] < alphabet.len() {
                    break;
                }
                idx[pos] = 0;
                pos += 1;
            }
        }
    }
}
