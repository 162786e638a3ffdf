//! Street numbers and street names: read from an address text and folded into the keys an
//! address point is matched by (CONTRACT §11), so that "290 Bremner Blvd, Toronto, ON M5V
//! 3L9" and "290 BREMNER BOULEVARD" meet: case, accents, punctuation and abbreviations fold.

/// The street part of an address text, folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreetAddress {
    /// The house number, lower-case letters and digits: `290`, `12a`.
    pub number: String,
    /// The street name, folded ([`street_key`]): `bremner boulevard`.
    pub street: String,
    /// A unit given before the number (`5-290 …`, `Unit 5, 290 …`), folded; not matched on.
    pub unit: Option<String>,
}

/// Words that name the kind of street, folded to one spelling (the USPS and Canada Post
/// abbreviations, English and French). `st` and `ste` are decided by their place (`saint`).
const STREET_TYPES: &[(&str, &str)] = &[
    ("alley", "alley"),
    ("aly", "alley"),
    ("av", "avenue"),
    ("ave", "avenue"),
    ("aven", "avenue"),
    ("avenue", "avenue"),
    ("avn", "avenue"),
    ("blvd", "boulevard"),
    ("boul", "boulevard"),
    ("boulevard", "boulevard"),
    ("center", "centre"),
    ("centre", "centre"),
    ("cir", "circle"),
    ("circ", "circle"),
    ("circle", "circle"),
    ("cl", "close"),
    ("close", "close"),
    ("court", "court"),
    ("cres", "crescent"),
    ("cresc", "crescent"),
    ("crescent", "crescent"),
    ("crs", "crescent"),
    ("crt", "court"),
    ("ct", "court"),
    ("ctr", "centre"),
    ("dr", "drive"),
    ("drive", "drive"),
    ("drv", "drive"),
    ("expressway", "expressway"),
    ("expy", "expressway"),
    ("freeway", "freeway"),
    ("fwy", "freeway"),
    ("gardens", "gardens"),
    ("gate", "gate"),
    ("gdns", "gardens"),
    ("gr", "grove"),
    ("grove", "grove"),
    ("grv", "grove"),
    ("heights", "heights"),
    ("highway", "highway"),
    ("hts", "heights"),
    ("hwy", "highway"),
    ("lane", "lane"),
    ("ln", "lane"),
    ("parkway", "parkway"),
    ("pkwy", "parkway"),
    ("pky", "parkway"),
    ("pl", "place"),
    ("place", "place"),
    ("pt", "point"),
    ("quay", "quay"),
    ("rd", "road"),
    ("road", "road"),
    ("route", "route"),
    ("rte", "route"),
    ("sq", "square"),
    ("square", "square"),
    ("str", "street"),
    ("street", "street"),
    ("tce", "terrace"),
    ("ter", "terrace"),
    ("terr", "terrace"),
    ("terrace", "terrace"),
    ("trail", "trail"),
    ("trl", "trail"),
    ("way", "way"),
];

const DIRECTIONS: &[(&str, &str)] = &[
    ("e", "east"),
    ("east", "east"),
    ("est", "east"),
    ("n", "north"),
    ("ne", "northeast"),
    ("nord", "north"),
    ("north", "north"),
    ("northeast", "northeast"),
    ("northwest", "northwest"),
    ("nw", "northwest"),
    ("o", "west"),
    ("ouest", "west"),
    ("s", "south"),
    ("se", "southeast"),
    ("south", "south"),
    ("southeast", "southeast"),
    ("southwest", "southwest"),
    ("sud", "south"),
    ("sw", "southwest"),
    ("w", "west"),
    ("west", "west"),
];

/// Other words with one folded spelling.
const OTHER_WORDS: &[(&str, &str)] = &[("mt", "mount"), ("mtn", "mountain")];

/// Words that start a unit after the street (`… Blvd Unit 5`, `Suite 200`, `Apt 3`).
const UNIT_WORDS: &[&str] = &["apartment", "apt", "bureau", "suite", "unit", "app", "appt", "ph", "penthouse"];

/// Province, territory and state codes: where an address text without commas stops being a
/// street when no street type ends the name.
const REGIONS: &[&str] = &[
    "ab", "bc", "mb", "nb", "nl", "ns", "nt", "nu", "on", "pe", "qc", "sk", "yt", "ontario", "quebec", "al", "ak",
    "az", "ar", "ca", "co", "ct", "de", "dc", "fl", "ga", "hi", "id", "il", "in", "ia", "ks", "ky", "la", "me", "md",
    "ma", "mi", "mn", "ms", "mo", "mt", "ne", "nv", "nh", "nj", "nm", "ny", "nc", "nd", "oh", "ok", "or", "pa", "ri",
    "sc", "sd", "tn", "tx", "ut", "vt", "va", "wa", "wv", "wi", "wy",
];

fn lookup(table: &[(&str, &'static str)], word: &str) -> Option<&'static str> {
    table.binary_search_by(|(k, _)| (*k).cmp(word)).ok().map(|i| table[i].1)
}

/// One lower-case character without its accent (é → e, ß → ss, œ → oe); other characters as
/// they are. Covers Latin-1 and Latin Extended-A, the letters of Canadian and US addresses.
fn push_folded(out: &mut String, c: char) {
    let base = match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => 'a',
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => 'c',
        'ď' | 'đ' | 'ð' => 'd',
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => 'e',
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => 'g',
        'ĥ' | 'ħ' => 'h',
        'ì' | 'í' | 'î' | 'ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => 'i',
        'ĵ' => 'j',
        'ķ' => 'k',
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => 'l',
        'ñ' | 'ń' | 'ņ' | 'ň' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => 'o',
        'ŕ' | 'ŗ' | 'ř' => 'r',
        'ś' | 'ŝ' | 'ş' | 'š' => 's',
        'ţ' | 'ť' | 'ŧ' => 't',
        'ù' | 'ú' | 'û' | 'ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => 'u',
        'ŵ' => 'w',
        'ý' | 'ÿ' | 'ŷ' => 'y',
        'ź' | 'ż' | 'ž' => 'z',
        'ß' => return out.push_str("ss"),
        'æ' => return out.push_str("ae"),
        'œ' => return out.push_str("oe"),
        'þ' => return out.push_str("th"),
        other => other,
    };
    out.push(base);
}

/// The words of a text, folded: lower-case, accents off, apostrophes dropped (Queen's →
/// queens), every other character that is not a letter or digit a separator.
pub fn fold_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if matches!(c, '\'' | '’' | 'ʼ' | '`' | '´') {
            continue;
        }
        if c.is_alphanumeric() {
            push_folded(&mut word, c);
        } else if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Folded words joined by one space: a unit or a city as stored with a point.
pub fn fold(text: &str) -> String {
    fold_words(text).join(" ")
}

/// The street key of folded words: every abbreviation spelled out. `st`/`ste` followed by a
/// name word is `saint`/`sainte` (St Clair Ave W, Rue Ste-Catherine), else `street`
/// (King St W); a direction, a street type or nothing after it makes it the type.
fn key_of(words: &[String]) -> String {
    let mut out: Vec<&str> = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let next_is_name =
            words.get(i + 1).is_some_and(|n| lookup(DIRECTIONS, n).is_none() && lookup(STREET_TYPES, n).is_none());
        let folded = match w.as_str() {
            "st" | "saint" if next_is_name => "saint",
            "st" => "street",
            "ste" | "sainte" if next_is_name => "sainte",
            other => lookup(STREET_TYPES, other)
                .or_else(|| lookup(DIRECTIONS, other))
                .or_else(|| lookup(OTHER_WORDS, other))
                .unwrap_or(w),
        };
        out.push(folded);
    }
    out.join(" ")
}

/// A street name as matched: `"BREMNER BLVD"`, `"Bremner Boulevard"` and `"bremner blvd."`
/// all give `bremner boulevard`; `"Rue Sainte-Catherine E"` gives `rue sainte catherine
/// east`. Empty when the name has no letter or digit.
pub fn street_key(name: &str) -> String {
    key_of(&fold_words(name))
}

/// A house number as matched: letters and digits, lower-case (`"290"`, `"12A"` → `12a`,
/// `"12 A"` → `12a`); `None` unless it starts with a digit and is at most 12 characters.
pub fn number_key(number: &str) -> Option<String> {
    let key: String = fold_words(number).concat();
    (key.starts_with(|c: char| c.is_ascii_digit()) && key.len() <= 12).then_some(key)
}

impl StreetAddress {
    /// Reads the street number and name of an address text: the first comma-separated part
    /// that starts with a house number (after an optional unit: `Unit 5, …`, `#5 …`,
    /// `5-290 …`), up to a unit word (`Suite 200`). A text without commas ends its street at
    /// the last street type (and a direction after it), or else at a province or state code
    /// or the postal code. `None` when no part starts with a number followed by a name.
    pub fn parse(text: &str) -> Option<StreetAddress> {
        let parts: Vec<&str> = text.split([',', ';', '\n']).collect();
        let single = parts.len() == 1;
        parts.into_iter().find_map(|part| Self::parse_part(part, single))
    }

    fn parse_part(part: &str, single: bool) -> Option<StreetAddress> {
        let mut tokens = part.split_whitespace().peekable();
        let mut unit = None;
        // A unit before the number: "Unit 5 290 …", "Apt. 5 …", "#5 290 …".
        if let Some(first) = tokens.peek() {
            let word = fold(first);
            if UNIT_WORDS.contains(&word.as_str()) {
                tokens.next();
                unit = tokens.next().map(fold);
            } else if let Some(rest) = first.strip_prefix('#') {
                let rest = fold(rest);
                tokens.next();
                unit = if rest.is_empty() { tokens.next().map(fold) } else { Some(rest) };
            }
        }
        let raw_number = tokens.next()?;
        // "5-290": unit 5 of number 290 (the Canadian way of writing a unit first).
        let number = match raw_number.split_once('-') {
            Some((u, n))
                if u.starts_with(|c: char| c.is_ascii_digit()) && n.starts_with(|c: char| c.is_ascii_digit()) =>
            {
                unit = Some(fold(u));
                number_key(n)?
            }
            _ => number_key(raw_number)?,
        };
        let rest: Vec<&str> = tokens.collect();
        let mut words = fold_words(&rest.join(" "));
        // A unit after the street ends it: "… Blvd Suite 200", "… Blvd #5".
        let unit_at = rest.iter().position(|t| t.starts_with('#')).map(|i| fold_words(&rest[..i].join(" ")).len());
        let unit_word = words.iter().position(|w| UNIT_WORDS.contains(&w.as_str()));
        if let Some(end) = [unit_at, unit_word].into_iter().flatten().min() {
            words.truncate(end);
        }
        if single {
            Self::trim_single(&mut words);
        }
        let street = key_of(&words);
        (!street.is_empty() && !words.iter().all(|w| w.chars().all(|c| c.is_ascii_digit()))).then_some(StreetAddress {
            number,
            street,
            unit: unit.filter(|u| !u.is_empty()),
        })
    }

    /// A whole address on one line ("290 Bremner Blvd Toronto ON M5V 3L9"): the street ends
    /// at its last type word and a direction after it; failing that, before the first
    /// province or state code or postal-code-looking word.
    fn trim_single(words: &mut Vec<String>) {
        let last_type = words.iter().rposition(|w| lookup(STREET_TYPES, w).is_some() || w == "st");
        if let Some(t) = last_type.filter(|&t| t > 0) {
            let end = if words.get(t + 1).is_some_and(|w| lookup(DIRECTIONS, w).is_some()) { t + 2 } else { t + 1 };
            words.truncate(end);
            return;
        }
        let postal_like = |w: &str| w.len() >= 3 && w.chars().any(|c| c.is_ascii_digit());
        if let Some(end) = words.iter().skip(1).position(|w| REGIONS.contains(&w.as_str()) || postal_like(w)) {
            words.truncate(end + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Option<(String, String)> {
        StreetAddress::parse(text).map(|a| (a.number, a.street))
    }

    fn pair(n: &str, s: &str) -> (String, String) {
        (n.to_string(), s.to_string())
    }

    #[test]
    fn the_tables_are_sorted_for_binary_search() {
        for table in [STREET_TYPES, DIRECTIONS, OTHER_WORDS] {
            assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "{:?}", table.windows(2).find(|w| w[0].0 >= w[1].0));
        }
    }

    #[test]
    fn the_brief_s_example_folds_to_one_key() {
        let a = StreetAddress::parse("290 Bremner Blvd, Toronto, ON M5V 3L9").unwrap();
        let b = StreetAddress::parse("290 BREMNER BOULEVARD").unwrap();
        assert_eq!(a, b);
        assert_eq!((a.number.as_str(), a.street.as_str()), ("290", "bremner boulevard"));
        assert_eq!(street_key("BREMNER BLVD"), "bremner boulevard");
        assert_eq!(street_key("Bremner Blvd."), "bremner boulevard");
    }

    #[test]
    fn abbreviations_fold_both_ways() {
        for (a, b) in [
            ("King St W", "KING STREET WEST"),
            ("Spadina Ave", "Spadina Avenue"),
            ("Spadina Av", "spadina avenue"),
            ("Avenue Rd", "Avenue Road"),
            ("Don Mills Rd", "Don Mills Road"),
            ("Lake Shore Blvd E", "Lake Shore Boulevard East"),
            ("Bay View Dr", "Bay View Drive"),
            ("Palmerston Cres", "Palmerston Crescent"),
            ("Glen Ct", "Glen Court"),
            ("Bain Pl", "Bain Place"),
            ("Joe Shuster Ln", "Joe Shuster Lane"),
            ("Hwy 7", "Highway 7"),
            ("Don Valley Pkwy", "Don Valley Parkway"),
            ("Berczy Sq", "Berczy Square"),
            ("Wolfrey Terr", "Wolfrey Terrace"),
            ("Yonge St N", "Yonge Street North"),
            ("Bloor St S", "Bloor Street South"),
            ("Queen's Quay W", "QUEENS QUAY WEST"),
            ("St Clair Ave W", "Saint Clair Avenue West"),
            ("St. George St.", "Saint George Street"),
            ("Rue Ste-Catherine E", "rue Sainte Catherine Est"),
            ("Boul. René-Lévesque O", "BOULEVARD RENE LEVESQUE OUEST"),
            ("Mt Pleasant Rd", "Mount Pleasant Road"),
            ("Côte-des-Neiges", "COTE DES NEIGES"),
        ] {
            assert_eq!(street_key(a), street_key(b), "{a} / {b}");
        }
        assert_ne!(street_key("King St W"), street_key("King St E"));
        assert_eq!(street_key("Queen St"), "queen street");
        assert_eq!(street_key("St Clair Ave W"), "saint clair avenue west");
        assert_eq!(street_key("—"), "");
    }

    #[test]
    fn accents_and_punctuation_fold() {
        assert_eq!(fold_words("Élan Ñandú Straße, Œuvre"), ["elan", "nandu", "strasse", "oeuvre"]);
        assert_eq!(fold("  Unit #5B "), "unit 5b");
        assert_eq!(number_key("12A"), Some("12a".into()));
        assert_eq!(number_key("12 a"), Some("12a".into()));
        assert_eq!(number_key("A12"), None);
        assert_eq!(number_key(""), None);
        assert_eq!(number_key("1234567890123"), None);
    }

    #[test]
    fn numbers_and_units_are_read_from_the_text() {
        assert_eq!(parsed("100 King St W, Toronto, ON M5X 1A9").unwrap(), pair("100", "king street west"));
        let a = StreetAddress::parse("5-290 Bremner Blvd, Toronto M5V 3L9").unwrap();
        assert_eq!((a.number.as_str(), a.unit.as_deref()), ("290", Some("5")));
        let a = StreetAddress::parse("Unit 5, 290 Bremner Blvd, Toronto").unwrap();
        assert_eq!((a.number.as_str(), a.street.as_str(), a.unit), ("290", "bremner boulevard", None));
        let a = StreetAddress::parse("#12 290 Bremner Blvd, Toronto").unwrap();
        assert_eq!((a.number.as_str(), a.unit.as_deref()), ("290", Some("12")));
        assert_eq!(parsed("290 Bremner Blvd Suite 200, Toronto").unwrap(), pair("290", "bremner boulevard"));
        assert_eq!(parsed("290 Bremner Blvd #200, Toronto").unwrap(), pair("290", "bremner boulevard"));
        assert_eq!(parsed("12A Elm Ave, Toronto M4W 1N1").unwrap(), pair("12a", "elm avenue"));
        assert_eq!(parsed("350 5th Ave, New York, NY 10118").unwrap(), pair("350", "5th avenue"));
        assert_eq!(parsed("1 Yonge Street, Toronto").unwrap(), pair("1", "yonge street"));
    }

    #[test]
    fn one_line_addresses_end_at_the_street() {
        assert_eq!(parsed("290 Bremner Blvd Toronto ON M5V 3L9").unwrap(), pair("290", "bremner boulevard"));
        assert_eq!(parsed("100 King St W Toronto ON M5X 1A9").unwrap(), pair("100", "king street west"));
        assert_eq!(parsed("40 The Esplanade Toronto ON M5E 1A8").unwrap(), pair("40", "the esplanade toronto"));
        assert_eq!(parsed("40 The Esplanade M5E 1A8").unwrap(), pair("40", "the esplanade"));
        assert_eq!(parsed("1 Broadway ON M4P").unwrap(), pair("1", "broadway"));
    }

    #[test]
    fn texts_without_a_street_number_have_no_street() {
        for text in ["M5V 3L9", "Toronto, ON M5V 3L9", "10001", "", "CN Tower, M5V 3L9", "290, Toronto", "12 345"] {
            assert_eq!(StreetAddress::parse(text), None, "{text}");
        }
    }
}
