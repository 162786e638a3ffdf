//! Geocoding: address text → postal code → place (lat/lng, city, region) → service zone.
//! Offline, over the shipped dataset of Canadian FSAs and US ZIP codes (data/ATTRIBUTION.md);
//! a location is made precise by given coordinates or an address point (CONTRACT §11).

pub mod dataset;
pub mod distance;
pub mod points;
pub mod postal;
pub mod street;

use std::sync::{Arc, LazyLock};

use crate::config::ServiceArea;
use dataset::Dataset;
use distance::{LatLng, TooFar};
use postal::{Country, PostalCode};

static EMBEDDED: LazyLock<Arc<Dataset<'static>>> = LazyLock::new(|| {
    // The dataset is part of the binary and is parsed by a unit test, so this cannot fail.
    Arc::new(Dataset::parse(include_str!("../../data/postal-codes.tsv")).expect("embedded postal dataset parses"))
});

/// A located address inside the service area.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    pub text: String,
    /// Interface form: lower-case, with a space (`m5v 2t6`).
    pub postal_code: String,
    /// The code the dataset matched: FSA (`M5V`) or 5-digit ZIP.
    pub lookup_key: String,
    pub lat: String,
    pub lng: String,
    pub city: String,
    pub region: String,
    /// Index of the serving zone in the service area.
    pub zone: usize,
    /// Where `lat` and `lng` come from.
    pub located_by: LocatedBy,
}

/// How a located address got its coordinates (CONTRACT §11), most precise first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LocatedBy {
    /// An imported address point with the text's street number and name.
    Point,
    /// The `lat` and `lng` the request gave.
    Given,
    /// The location of the postal code (the dataset's representative point). The default:
    /// rows stored before locations were told apart were all located so.
    #[default]
    PostalCode,
}

impl LocatedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            LocatedBy::Point => "point",
            LocatedBy::Given => "given",
            LocatedBy::PostalCode => "postal_code",
        }
    }
}

impl Location {
    /// The postal code's location, when this location is still that (the dataset's text
    /// always reads; `None` only for a location already made precise).
    pub fn postal_code_point(&self) -> Option<LatLng> {
        (self.located_by == LocatedBy::PostalCode).then(|| LatLng::parse(&self.lat, &self.lng)).flatten()
    }

    /// The request's own coordinates, if they lie within 10 km of the postal code's
    /// location (else how far they are). Shown as the shortest decimal text that reads back
    /// as the same number.
    pub fn give(&mut self, at: LatLng) -> Result<(), TooFar> {
        if let Some(postal) = self.postal_code_point() {
            distance::check_near(postal, at)?;
        }
        self.set(at, LocatedBy::Given);
        Ok(())
    }

    /// An address point's coordinates (chosen by `points::PointQuery::choose`, which keeps
    /// the 10 km rule).
    pub fn at_point(&mut self, at: LatLng) {
        self.set(at, LocatedBy::Point);
    }

    fn set(&mut self, at: LatLng, by: LocatedBy) {
        self.lat = at.lat().to_string();
        self.lng = at.lng().to_string();
        self.located_by = by;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeoError {
    NoPostalCode,
    UnknownPostalCode,
    OutsideServiceArea,
}

impl GeoError {
    pub fn message(self) -> &'static str {
        match self {
            Self::NoPostalCode => {
                "The address could not be located: include a Canadian postal code (e.g. M5V 2T6) or a US ZIP code."
            }
            Self::UnknownPostalCode => "The address could not be located: its postal code is unknown.",
            Self::OutsideServiceArea => "The address is outside the service area.",
        }
    }
}

#[derive(Clone)]
pub struct Geocoder {
    dataset: Arc<Dataset<'static>>,
}

impl Default for Geocoder {
    fn default() -> Self {
        Self::embedded()
    }
}

impl Geocoder {
    pub fn embedded() -> Self {
        Self { dataset: EMBEDDED.clone() }
    }

    pub fn locate(&self, text: &str, area: &ServiceArea) -> Result<Location, GeoError> {
        let code = PostalCode::find_in(text).ok_or(GeoError::NoPostalCode)?;
        let place = self.dataset.lookup(code.country(), code.lookup_key()).ok_or(GeoError::UnknownPostalCode)?;
        let compact = match &code {
            PostalCode::Ca { fsa, ldu } => {
                let ldu = ldu.as_deref().unwrap_or("");
                let mut compact = String::with_capacity(fsa.len() + ldu.len());
                compact.push_str(fsa);
                compact.push_str(ldu);
                compact
            }
            PostalCode::Us { zip, .. } => zip.clone(),
        };
        let zone = area.zone_for(&compact).ok_or(GeoError::OutsideServiceArea)?;
        Ok(Location {
            text: text.to_string(),
            postal_code: code.normalized(),
            lookup_key: code.lookup_key().to_string(),
            lat: place.lat.to_owned(),
            lng: place.lng.to_owned(),
            city: place.city.to_owned(),
            region: place.region.to_owned(),
            zone,
            located_by: LocatedBy::PostalCode,
        })
    }

    pub fn dataset_len(&self) -> usize {
        self.dataset.len()
    }

    pub fn knows(&self, country: Country, key: &str) -> bool {
        self.dataset.lookup(country, key).is_some()
    }
}
