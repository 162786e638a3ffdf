//! Geocoding: address text → postal code → place (lat/lng, city, region) → service zone.
//! Offline, over the shipped dataset of Canadian FSAs and US ZIP codes (data/ATTRIBUTION.md).

pub mod dataset;
pub mod postal;

use std::sync::{Arc, LazyLock};

use crate::config::ServiceArea;
use dataset::Dataset;
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
            PostalCode::Ca { fsa, ldu } => format!("{fsa}{}", ldu.as_deref().unwrap_or("")),
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
        })
    }

    pub fn dataset_len(&self) -> usize {
        self.dataset.len()
    }

    pub fn knows(&self, country: Country, key: &str) -> bool {
        self.dataset.lookup(country, key).is_some()
    }
}
