//! Address points (CONTRACT §11): a line of an address-point file read into a point with the
//! keys it is matched by, and the choice among the stored points that share an address's
//! street number and street name. Pure: the CLI streams the file, the store keeps the points.

use serde::Deserialize;
use serde_json::Value;

use super::Location;
use super::distance::{LatLng, NEAR_POSTAL_CODE_M};
use super::postal::PostalCode;
use super::street::{StreetAddress, fold, number_key, street_key};

/// The header line of the CSV format, in this order.
pub const CSV_HEADER: &str = "number,street,unit,city,postal_code,lat,lng";

/// A point as stored: its match keys (folded) and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressPoint {
    /// [`number_key`]: `290`, `12a`.
    pub number: String,
    /// [`street_key`]: `bremner boulevard`.
    pub street: String,
    /// Folded; empty when the point has none.
    pub unit: String,
    /// Folded; empty when the file gives none.
    pub city: String,
    /// The FSA (`M5V`) or 5-digit ZIP of the point's postal code; empty when the file gives
    /// none or one that does not read as a postal code.
    pub postal_prefix: String,
    pub at: LatLng,
}

/// The two formats `dropslot addresses import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A header line ([`CSV_HEADER`]), then one point a line.
    Csv,
    /// `OpenAddresses` `GeoJSON` lines: one `Feature` a line, no header.
    GeoJsonLines,
}

impl Format {
    /// From the file's first non-empty line: a JSON object starts `GeoJSON` lines, the CSV
    /// header starts CSV; anything else is refused, saying what was expected.
    pub fn detect(first_line: &str) -> Result<Format, String> {
        let line = first_line.trim_start_matches('\u{feff}').trim();
        if line.starts_with('{') {
            return Ok(Format::GeoJsonLines);
        }
        let header: Vec<String> = split_csv(line)?.iter().map(|f| f.trim().to_ascii_lowercase()).collect();
        if header.join(",") == CSV_HEADER {
            Ok(Format::Csv)
        } else {
            Err(format!(
                "not an address-point file: expected the CSV header {CSV_HEADER:?} or a GeoJSON Feature (one a line), found {:?}",
                shorten(line)
            ))
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "CSV",
            Format::GeoJsonLines => "GeoJSON lines",
        }
    }

    /// One data line (not the CSV header, not blank).
    pub fn read(self, line: &str) -> Result<Line, String> {
        match self {
            Format::Csv => read_csv(line),
            Format::GeoJsonLines => read_geojson(line),
        }
    }
}

/// What a well-formed line gives: a point, or the reason it can never match an address.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Point(AddressPoint),
    /// Well-formed, but without a house number or street name: nothing can match it.
    Skipped(&'static str),
}

/// Fields as the file gives them, before folding.
struct Fields<'a> {
    number: &'a str,
    street: &'a str,
    unit: &'a str,
    city: &'a str,
    postal_code: &'a str,
}

fn point(f: &Fields<'_>, at: LatLng) -> Line {
    let Some(number) = number_key(f.number) else { return Line::Skipped("no house number") };
    let street = street_key(f.street);
    if street.is_empty() {
        return Line::Skipped("no street name");
    }
    let postal_prefix = PostalCode::find_in(f.postal_code).map(|c| c.lookup_key().to_string()).unwrap_or_default();
    Line::Point(AddressPoint { number, street, unit: fold(f.unit), city: fold(f.city), postal_prefix, at })
}

fn coordinates(lat: &str, lng: &str) -> Result<LatLng, String> {
    let number = |name: &str, v: &str| {
        v.trim().parse::<f64>().map_err(|_| format!("{name} {:?} is not a number", shorten(v.trim())))
    };
    let (lat, lng) = (number("lat", lat)?, number("lng", lng)?);
    LatLng::new(lat, lng).map_err(|e| e.message().to_string())
}

fn read_csv(line: &str) -> Result<Line, String> {
    let fields = split_csv(line)?;
    let [number, street, unit, city, postal_code, lat, lng] = fields.as_slice() else {
        return Err(format!("{} fields, expected 7 ({CSV_HEADER})", fields.len()));
    };
    let at = coordinates(lat, lng)?;
    Ok(point(&Fields { number, street, unit, city, postal_code }, at))
}

/// One CSV record on one line (RFC 4180 quoting: `"a, b"`, `""` for a quote inside quotes).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::with_capacity(7);
    let mut field = String::new();
    let mut chars = line.trim_end_matches(['\r', '\n']).chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            '"' if quoted => quoted = false,
            '"' if field.trim().is_empty() && !was_quoted => {
                field.clear();
                quoted = true;
                was_quoted = true;
            }
            '"' => return Err("a quote inside an unquoted field".into()),
            ',' if !quoted => {
                fields.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            c if was_quoted && !quoted && !c.is_whitespace() => {
                return Err("text after a closing quote".into());
            }
            c => field.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed on its line".into());
    }
    fields.push(field);
    Ok(fields)
}

#[derive(Deserialize)]
struct Feature {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    properties: serde_json::Map<String, Value>,
    geometry: Option<Geometry>,
}

#[derive(Deserialize)]
struct Geometry {
    #[serde(rename = "type")]
    kind: String,
    coordinates: Vec<f64>,
}

fn read_geojson(line: &str) -> Result<Line, String> {
    let feature: Feature = serde_json::from_str(line).map_err(|e| format!("not a GeoJSON Feature: {e}"))?;
    if feature.kind.as_deref() != Some("Feature") {
        return Err("not a GeoJSON Feature: \"type\" must be \"Feature\"".into());
    }
    let Some(geometry) = feature.geometry else { return Err("the Feature has no geometry".into()) };
    let [lng, lat] = geometry.coordinates.as_slice() else {
        return Err("the Point must have two coordinates, [longitude, latitude]".into());
    };
    if geometry.kind != "Point" {
        return Err(format!("the geometry is a {}, not a Point", shorten(&geometry.kind)));
    }
    let at = LatLng::new(*lat, *lng).map_err(|e| e.message().to_string())?;
    // OpenAddresses writes every property as a string; numbers are taken too.
    let text = |name: &str| match feature.properties.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        None | Some(Value::Null) => Ok(String::new()),
        Some(_) => Err(format!("properties.{name} must be a string")),
    };
    let (number, street, unit, city, postal_code) =
        (text("number")?, text("street")?, text("unit")?, text("city")?, text("postcode")?);
    Ok(point(&Fields { number: &number, street: &street, unit: &unit, city: &city, postal_code: &postal_code }, at))
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 60 { format!("{}…", s.chars().take(60).collect::<String>()) } else { s.to_string() }
}

/// What an address is looked up by: its number and street from the text, where its postal
/// code is, and that code's FSA or ZIP.
#[derive(Debug, Clone, PartialEq)]
pub struct PointQuery {
    pub number: String,
    pub street: String,
    pub postal_prefix: String,
    /// The postal code's location: candidates lie within [`NEAR_POSTAL_CODE_M`] of it.
    pub near: LatLng,
}

impl PointQuery {
    /// `None` when the text has no street number and name, or the location is not a postal
    /// code's (given coordinates are never replaced).
    pub fn for_location(location: &Location) -> Option<PointQuery> {
        if location.located_by != super::LocatedBy::PostalCode {
            return None;
        }
        let street = StreetAddress::parse(&location.text)?;
        Some(PointQuery {
            number: street.number,
            street: street.street,
            postal_prefix: location.lookup_key.clone(),
            near: LatLng::parse(&location.lat, &location.lng)?,
        })
    }

    /// The latitude and longitude ranges a candidate lies in: `(lat_min, lat_max, lng_min,
    /// lng_max)`.
    pub fn search_box(&self) -> (f64, f64, f64, f64) {
        self.near.bounding_box(NEAR_POSTAL_CODE_M)
    }

    /// The point this address is at, among the stored points with its number and street
    /// (any order): none farther than 10 km from the postal code's location, none that the
    /// file put in another FSA or ZIP. A point in the address's own FSA or ZIP beats one
    /// whose file gave no postal code; then a point without a unit beats one with a unit
    /// (the building's entrance); then the nearest to the postal code's location wins.
    pub fn choose(&self, candidates: &[Candidate]) -> Option<LatLng> {
        candidates
            .iter()
            .filter(|c| c.postal_prefix.is_empty() || c.postal_prefix.eq_ignore_ascii_case(&self.postal_prefix))
            .map(|c| (c, self.near.distance_m(c.at)))
            .filter(|(_, d)| *d <= NEAR_POSTAL_CODE_M)
            .min_by(|(a, da), (b, db)| {
                let rank = |c: &Candidate| (c.postal_prefix.is_empty(), !c.unit.is_empty());
                rank(a).cmp(&rank(b)).then(da.total_cmp(db))
            })
            .map(|(c, _)| c.at)
    }
}

/// A stored point that shares an address's number and street.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub at: LatLng,
    pub postal_prefix: String,
    pub unit: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::LocatedBy;

    fn at(lat: f64, lng: f64) -> LatLng {
        LatLng::new(lat, lng).unwrap()
    }

    fn the_point(line: Result<Line, String>) -> AddressPoint {
        match line {
            Ok(Line::Point(p)) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_format_is_told_by_the_first_line() {
        assert_eq!(Format::detect("number,street,unit,city,postal_code,lat,lng"), Ok(Format::Csv));
        assert_eq!(Format::detect("\u{feff}NUMBER, Street ,unit,city,postal_code,lat,lng\r\n"), Ok(Format::Csv));
        assert_eq!(Format::detect(r#"{"type":"Feature"}"#), Ok(Format::GeoJsonLines));
        let e = Format::detect("id,lat,lon").unwrap_err();
        assert!(e.contains("expected the CSV header") && e.contains("id,lat,lon"), "{e}");
    }

    #[test]
    fn csv_lines_read_with_quotes() {
        let p = the_point(Format::Csv.read("290,BREMNER BLVD,,Toronto,M5V 3L9,43.6419,-79.3860"));
        assert_eq!(
            (p.number.as_str(), p.street.as_str(), p.unit.as_str(), p.city.as_str(), p.postal_prefix.as_str()),
            ("290", "bremner boulevard", "", "toronto", "M5V")
        );
        assert_eq!((p.at.lat(), p.at.lng()), (43.6419, -79.386));
        let p = the_point(Format::Csv.read(r#"12A,"Queen's Quay W","Unit ""5""",Toronto,,43.64,-79.38"#));
        assert_eq!((p.number.as_str(), p.street.as_str(), p.unit.as_str()), ("12a", "queens quay west", "unit 5"));
        assert_eq!(p.postal_prefix, "");
        assert_eq!(Format::Csv.read(",Bremner Blvd,,,,43.64,-79.38"), Ok(Line::Skipped("no house number")));
        assert_eq!(Format::Csv.read("290,--,,,,43.64,-79.38"), Ok(Line::Skipped("no street name")));
    }

    #[test]
    fn malformed_csv_lines_say_what_is_wrong() {
        for (line, says) in [
            ("290,Bremner Blvd,,Toronto,M5V,43.64", "6 fields, expected 7"),
            ("290,Bremner Blvd,,Toronto,M5V,north,-79.38", "lat \"north\" is not a number"),
            ("290,Bremner Blvd,,Toronto,M5V,143.64,-79.38", "latitude must be a number from -90 to 90"),
            ("290,Bremner Blvd,,Toronto,M5V,43.64,-279.38", "longitude must be"),
            ("290,\"Bremner Blvd,,Toronto,M5V,43.64,-79.38", "not closed on its line"),
            ("290,Brem\"ner,,Toronto,M5V,43.64,-79.38", "a quote inside an unquoted field"),
        ] {
            let e = Format::Csv.read(line).unwrap_err();
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn geojson_lines_read_like_openaddresses_writes_them() {
        let line = r#"{"type":"Feature","properties":{"hash":"ab12","number":"290","street":"BREMNER BLVD","unit":"","city":"TORONTO","district":"","region":"ON","postcode":"M5V 3L9","id":""},"geometry":{"type":"Point","coordinates":[-79.386,43.6419]}}"#;
        let p = the_point(Format::GeoJsonLines.read(line));
        assert_eq!(
            (p.number.as_str(), p.street.as_str(), p.postal_prefix.as_str()),
            ("290", "bremner boulevard", "M5V")
        );
        assert_eq!((p.at.lat(), p.at.lng()), (43.6419, -79.386));
        let numeric = r#"{"type":"Feature","properties":{"number":290,"street":"Bremner Blvd","postcode":null},"geometry":{"type":"Point","coordinates":[-79.386,43.6419]}}"#;
        assert_eq!(the_point(Format::GeoJsonLines.read(numeric)).number, "290");
        for (line, says) in [
            ("{\"type\":\"Feature\"", "not a GeoJSON Feature"),
            (r#"{"type":"FeatureCollection","features":[]}"#, "\"type\" must be \"Feature\""),
            (r#"{"type":"Feature","properties":{}}"#, "no geometry"),
            (r#"{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[1]}}"#, "two coordinates"),
            (
                r#"{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[200.0,43.6]}}"#,
                "longitude",
            ),
            (
                r#"{"type":"Feature","properties":{"street":[]},"geometry":{"type":"Point","coordinates":[1,2]}}"#,
                "properties.street",
            ),
        ] {
            let e = Format::GeoJsonLines.read(line).unwrap_err();
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    fn location(text: &str) -> Location {
        Location {
            text: text.into(),
            postal_code: "m5v 3l9".into(),
            lookup_key: "M5V".into(),
            lat: "43.6426".into(),
            lng: "-79.3871".into(),
            city: "Toronto".into(),
            region: "ON".into(),
            zone: 0,
            located_by: LocatedBy::PostalCode,
        }
    }

    fn candidate(lat: f64, lng: f64, prefix: &str, unit: &str) -> Candidate {
        Candidate { at: at(lat, lng), postal_prefix: prefix.into(), unit: unit.into() }
    }

    #[test]
    fn a_query_comes_from_a_postal_code_location_with_a_street() {
        let q = PointQuery::for_location(&location("290 Bremner Blvd, Toronto, ON M5V 3L9")).unwrap();
        assert_eq!(
            (q.number.as_str(), q.street.as_str(), q.postal_prefix.as_str()),
            ("290", "bremner boulevard", "M5V")
        );
        assert_eq!(PointQuery::for_location(&location("M5V 3L9")), None);
        let given = Location { located_by: LocatedBy::Given, ..location("290 Bremner Blvd M5V 3L9") };
        assert_eq!(PointQuery::for_location(&given), None);
    }

    #[test]
    fn the_choice_prefers_the_same_postal_area_then_no_unit_then_the_nearest() {
        let q = PointQuery::for_location(&location("290 Bremner Blvd, Toronto, ON M5V 3L9")).unwrap();
        assert_eq!(q.choose(&[]), None);
        // Another FSA, or more than 10 km away: never.
        assert_eq!(q.choose(&[candidate(43.6419, -79.3860, "M4W", "")]), None);
        assert_eq!(q.choose(&[candidate(43.80, -79.3860, "M5V", "")]), None);
        // A point without a postal code, near: taken.
        assert_eq!(q.choose(&[candidate(43.6419, -79.3860, "", "")]), Some(at(43.6419, -79.3860)));
        // The same FSA beats no postal code, even farther away.
        let same = candidate(43.66, -79.39, "m5v", "");
        assert_eq!(q.choose(&[candidate(43.6419, -79.3860, "", ""), same.clone()]), Some(same.at));
        // No unit beats a unit; then the nearest.
        let plain = candidate(43.65, -79.39, "M5V", "");
        assert_eq!(q.choose(&[candidate(43.6427, -79.3871, "M5V", "5"), plain.clone()]), Some(plain.at));
        let near = candidate(43.6427, -79.3871, "M5V", "");
        assert_eq!(q.choose(&[plain, near.clone()]), Some(near.at));
    }
}
