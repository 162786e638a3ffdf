//! The offline geocoder dataset: parses `data/postal-codes.tsv` (Canadian FSAs and US ZIPs,
//! derived from the npm package `zipcodes`) and looks places up by country and code.

use super::postal::{Country, is_fsa_first, is_postal_letter};

/// The columns `scripts/derive-geodata.sh` writes, in order.
const HEADER: &str = "country\tcode\tlat\tlng\tcity\tregion";

/// Where a postal code is: the dataset's own text (coordinates with at most 4 decimals, so
/// nothing is lost or invented by a float round trip).
#[derive(Debug, Clone, Copy)]
pub struct Place<'t> {
    pub lat: &'t str,
    pub lng: &'t str,
    pub city: &'t str,
    pub region: &'t str,
}

/// All places, over the dataset's text: per country, the codes (as numbers) sorted, each
/// with where its row starts. 8 bytes a place, where a map of owned strings took about 280
/// (12 MB of the process's 28 MB at rest); a lookup is a binary search and a split of one
/// row, which was checked whole when the dataset was parsed.
#[derive(Debug, Clone, Default)]
pub struct Dataset<'t> {
    text: &'t str,
    ca: Vec<(u32, u32)>,
    us: Vec<(u32, u32)>,
}

/// A code as a number: a ZIP's value, or an FSA's three bytes (upper-case). `None` for
/// anything that is not one.
fn key(country: Country, code: &str) -> Option<u32> {
    match country {
        Country::Us => (code.len() == 5 && code.bytes().all(|b| b.is_ascii_digit())).then(|| code.parse().ok())?,
        Country::Ca => {
            let [a, b, c]: [u8; 3] = code.as_bytes().try_into().ok()?;
            Some(u32::from_be_bytes([0, a.to_ascii_uppercase(), b, c.to_ascii_uppercase()]))
        }
    }
}

impl<'t> Dataset<'t> {
    /// Parses the TSV file content. Strict, because the file is generated and committed: a
    /// malformed line or a repeated code means it was damaged, and the error says which
    /// line (1-based, the header being line 1).
    pub fn parse(tsv: &'t str) -> Result<Dataset<'t>, String> {
        let mut lines = tsv.split_inclusive('\n');
        let header = lines.next();
        match header.map(trim_end) {
            Some(HEADER) => {}
            Some(other) => {
                return Err(format!("line 1: expected header {HEADER:?}, got {other:?}"));
            }
            None => return Err("line 1: empty file, expected a header".to_owned()),
        }
        let mut dataset = Dataset { text: tsv, ca: Vec::with_capacity(2_048), us: Vec::with_capacity(tsv.len() / 40) };
        // Where the current row starts in `tsv`.
        let mut start = header.map_or(0, str::len);
        for (idx, raw) in lines.enumerate() {
            let line_no = idx + 2;
            let (country, code, _) = parse_row(trim_end(raw)).map_err(|e| format!("line {line_no}: {e}"))?;
            let key = key(country, code).ok_or_else(|| format!("line {line_no}: code {code:?}"))?;
            let at = u32::try_from(start).map_err(|_| format!("line {line_no}: the file is over 4 GiB"))?;
            match country {
                Country::Ca => dataset.ca.push((key, at)),
                Country::Us => dataset.us.push((key, at)),
            }
            start += raw.len();
        }
        for (country, rows) in [(Country::Ca, &mut dataset.ca), (Country::Us, &mut dataset.us)] {
            // By code, then by place in the file: of two rows with one code, the second is
            // the repeat.
            rows.sort_unstable();
            if let Some(pair) = rows.windows(2).find(|w| w[0].0 == w[1].0) {
                let at = pair[1].1 as usize;
                let line_no = tsv[..at].matches('\n').count() + 1;
                let code = tsv[at..].split('\t').nth(1).unwrap_or("");
                return Err(format!("line {line_no}: duplicate code {}\t{code}", country.code()));
            }
            rows.shrink_to_fit();
        }
        Ok(dataset)
    }

    /// The place for a dataset key: an FSA (any case, "M5V" or "m5v") or a 5-digit ZIP.
    pub fn lookup(&self, country: Country, code: &str) -> Option<Place<'t>> {
        let key = key(country, code)?;
        let rows = match country {
            Country::Ca => &self.ca,
            Country::Us => &self.us,
        };
        let at = rows.binary_search_by_key(&key, |&(k, _)| k).ok().map(|i| rows[i].1 as usize)?;
        let line = self.text.get(at..)?.split('\n').next()?;
        place_of(trim_end(line))
    }

    /// Number of places, both countries together.
    pub fn len(&self) -> usize {
        self.ca.len() + self.us.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A line without its line break (`\n` or `\r\n`).
fn trim_end(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

/// The place of a row [`Dataset::parse`] checked whole: its columns split, not checked again
/// (a lookup is on every request's path; checking the row again was half of its cost).
fn place_of(line: &str) -> Option<Place<'_>> {
    let mut fields = line.splitn(6, '\t').skip(2);
    let (lat, lng, city, region) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    Some(Place { lat, lng, city, region })
}

fn parse_row(line: &str) -> Result<(Country, &str, Place<'_>), String> {
    let mut fields = line.split('\t');
    let mut next = |name: &str| fields.next().ok_or_else(|| format!("missing column {name}"));
    let (country, code, lat, lng, city, region) =
        (next("country")?, next("code")?, next("lat")?, next("lng")?, next("city")?, next("region")?);
    if fields.next().is_some() {
        return Err("more than 6 columns".to_owned());
    }
    let country = match country {
        "CA" => Country::Ca,
        "US" => Country::Us,
        other => return Err(format!("country {other:?} is not CA or US")),
    };
    let code_ok = match country {
        Country::Ca => matches!(code.as_bytes(), &[a, d, b]
            if is_fsa_first(a) && d.is_ascii_digit() && is_postal_letter(b)),
        Country::Us => code.len() == 5 && code.bytes().all(|b| b.is_ascii_digit()),
    };
    if !code_ok {
        return Err(format!("code {code:?} is not a valid {} code", country.code()));
    }
    check_coord(lat, "lat", 90)?;
    check_coord(lng, "lng", 180)?;
    if city.trim().is_empty() {
        return Err("empty city".to_owned());
    }
    if !(region.len() == 2 && region.bytes().all(|b| b.is_ascii_uppercase())) {
        return Err(format!("region {region:?} is not a 2-letter code"));
    }
    let place = Place { lat, lng, city, region };
    Ok((country, code, place))
}

/// Accepts plain decimal degrees, `-?\d{1,3}(\.\d{1,4})?` within ±`max`, as the derive
/// script writes them. Checked byte-wise rather than with `str::parse::<f64>`, which would
/// also let NaN, exponents and excess precision through, and is slower over 44k rows.
fn check_coord(s: &str, name: &str, max: u32) -> Result<(), String> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let shape_ok = (1..=3).contains(&int.len())
        && all_digits(int)
        && (digits.len() == int.len() || (1..=4).contains(&frac.len()))
        && all_digits(frac);
    // Only once the shape is right is `int` 1–3 ASCII digits, so the parse cannot fail.
    let in_range =
        shape_ok && int.parse::<u32>().is_ok_and(|v| v < max || (v == max && frac.bytes().all(|b| b == b'0')));
    if in_range {
        Ok(())
    } else {
        Err(format!("{name} {s:?} is not decimal degrees (at most 4 places) within ±{max}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "country\tcode\tlat\tlng\tcity\tregion\n\
        CA\tM5V\t43.6525\t-79.3686\tDowntown Toronto (cn Tower)\tON\n\
        CA\tH3E\t45.4679\t-73.5457\tL'Île-des-soeurs\tQC\n\
        US\t10001\t40.7484\t-73.9967\tNew York\tNY\n";

    #[test]
    fn parses_a_small_sample() {
        let ds = Dataset::parse(SAMPLE).unwrap();
        assert_eq!(ds.len(), 3);
        assert!(!ds.is_empty());
        let m5v = ds.lookup(Country::Ca, "M5V").unwrap();
        assert_eq!((m5v.lat, m5v.lng), ("43.6525", "-79.3686"));
        assert_eq!(m5v.region, "ON");
        assert_eq!(ds.lookup(Country::Ca, "m5v").unwrap().city, "Downtown Toronto (cn Tower)");
        assert_eq!(ds.lookup(Country::Ca, "h3e").unwrap().city, "L'Île-des-soeurs");
        assert_eq!(ds.lookup(Country::Us, "10001").unwrap().city, "New York");
        // Keys are per country, and unknown or odd keys are just absent.
        assert!(ds.lookup(Country::Us, "M5V").is_none());
        assert!(ds.lookup(Country::Ca, "10001").is_none());
        assert!(ds.lookup(Country::Ca, "M5").is_none());
        assert!(ds.lookup(Country::Ca, "ÉÉ").is_none());
        assert!(ds.lookup(Country::Us, "").is_none());
    }

    #[test]
    fn accepts_crlf_and_header_only() {
        let crlf = SAMPLE.replace('\n', "\r\n");
        let ds = Dataset::parse(&crlf).unwrap();
        assert_eq!(ds.len(), 3);
        // A looked-up row carries no line break.
        assert_eq!(ds.lookup(Country::Us, "10001").unwrap().region, "NY");
        assert!(Dataset::parse(HEADER).unwrap().is_empty());
        // The extremes are valid coordinates.
        let poles = format!("{HEADER}\nUS\t10002\t-90.0\t180\tSomewhere\tNY\nUS\t10003\t0\t-0.5\tX\tNY\n");
        assert_eq!(Dataset::parse(&poles).unwrap().len(), 2);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("", "line 1"),
            ("country\tcode\n", "line 1"),
            ("country\tcode\tlat\tlng\tcity\tregion\nCA\tM5V\t43.6\n", "line 2: missing column lng"),
            (&format!("{SAMPLE}US\t10002\t40.7\t-73.9\tNew York\tNY\textra\n"), "line 5"),
            (&format!("{SAMPLE}MX\t01000\t19.4\t-99.1\tCiudad\tDF\n"), "line 5"),
            (&format!("{SAMPLE}CA\tM5D\t43.6\t-79.3\tToronto\tON\n"), "line 5"),
            (&format!("{SAMPLE}US\t1000\t40.7\t-73.9\tNew York\tNY\n"), "line 5"),
            (&format!("{SAMPLE}US\t10002\t91\t-73.9\tNew York\tNY\n"), "line 5: lat"),
            (&format!("{SAMPLE}US\t10002\t40.7\tNaN\tNew York\tNY\n"), "line 5: lng"),
            (&format!("{SAMPLE}US\t10002\t40.7\t1e1\tNew York\tNY\n"), "line 5: lng"),
            (&format!("{SAMPLE}US\t10002\t40.7\t-73.12345\tNew York\tNY\n"), "line 5: lng"),
            (&format!("{SAMPLE}US\t10002\t40.\t-73.9\tNew York\tNY\n"), "line 5: lat"),
            (&format!("{SAMPLE}US\t10002\t-\t-73.9\tNew York\tNY\n"), "line 5: lat"),
            (&format!("{SAMPLE}US\t10002\t90.0001\t-73.9\tNew York\tNY\n"), "line 5: lat"),
            (&format!("{SAMPLE}US\t10002\t40.7\t-73.9\t \tNY\n"), "line 5: empty city"),
            (&format!("{SAMPLE}US\t10002\t40.7\t-73.9\tNew York\tNew York\n"), "line 5: region"),
            (&format!("{SAMPLE}US\t10001\t40.7\t-73.9\tNew York\tNY\n"), "line 5: duplicate"),
            (&format!("{SAMPLE}\n"), "line 5"),
        ];
        for (tsv, want) in cases {
            let err = Dataset::parse(tsv).unwrap_err();
            assert!(err.starts_with(want), "{tsv:?}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn parses_the_real_file() {
        let ds = Dataset::parse(include_str!("../../data/postal-codes.tsv")).unwrap();
        assert!(ds.len() > 40_000, "{}", ds.len());

        let m5v = ds.lookup(Country::Ca, "M5V").unwrap();
        // The package names Canadian FSAs by area ("Downtown Toronto (cn Tower / ...)").
        assert!(m5v.city.contains("Toronto"), "{}", m5v.city);
        assert_eq!(m5v.region, "ON");
        let lat: f64 = m5v.lat.parse().unwrap();
        assert!((lat - 43.6).abs() < 0.1, "{lat}");

        let nyc = ds.lookup(Country::Us, "10001").unwrap();
        assert_eq!((nyc.city, nyc.region), ("New York", "NY"));
        let lat: f64 = nyc.lat.parse().unwrap();
        assert!((lat - 40.75).abs() < 0.1, "{lat}");

        // Round trip with extraction, as the address pipeline will use it.
        let code = super::super::postal::PostalCode::find_in("100 King St W, Toronto, ON M5X 1A9").unwrap();
        assert_eq!(ds.lookup(code.country(), code.lookup_key()).unwrap().region, "ON");

        // A lookup splits its row without checking it again: every row gives back exactly the
        // place the strict parse read from it.
        let tsv = include_str!("../../data/postal-codes.tsv");
        for line in tsv.lines().skip(1) {
            let (country, code, place) = super::parse_row(line).unwrap();
            let found = ds.lookup(country, code).unwrap();
            assert_eq!(
                (found.lat, found.lng, found.city, found.region),
                (place.lat, place.lng, place.city, place.region)
            );
        }
    }
}
