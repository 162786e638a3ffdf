//! WGS84 coordinates, the great-circle distance between two of them, and the rule that a
//! stop's precise position lies near its postal code's location (CONTRACT §11: 10 km).

/// The Earth's mean radius (IUGG), in metres: the sphere the great-circle distance is on.
pub const EARTH_RADIUS_M: f64 = 6_371_008.8;

/// How far given coordinates (or a matched address point) may lie from the location of the
/// address's postal code. A postal code's location is a representative point of its area
/// (an FSA in a city spans a few kilometres), so 10 km keeps every real address of the area
/// and refuses coordinates of another city or a swapped latitude and longitude.
pub const NEAR_POSTAL_CODE_M: f64 = 10_000.0;

/// A position on the WGS84 ellipsoid, in degrees: latitude in [-90, 90], longitude in
/// [-180, 180], both finite. [`LatLng::new`] is the only way to make one from input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatLng {
    lat: f64,
    lng: f64,
}

/// A position with what every distance from it needs computed once: its latitude in radians
/// and that latitude's cosine. [`LatLng::distance_m`] is [`Spot::distance_m`] (the same
/// operations in the same order), so a distance never depends on which of the two asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spot {
    at: LatLng,
    phi: f64,
    cos_phi: f64,
}

impl Spot {
    pub fn of(at: LatLng) -> Spot {
        let phi = at.lat.to_radians();
        Spot { at, phi, cos_phi: phi.cos() }
    }

    pub fn at(&self) -> LatLng {
        self.at
    }

    /// The great-circle (haversine) distance to `other`, in metres.
    pub fn distance_m(&self, other: &Spot) -> f64 {
        let d_phi = other.phi - self.phi;
        let d_lambda = (other.at.lng - self.at.lng).to_radians();
        let h = (d_phi / 2.0).sin().powi(2) + self.cos_phi * other.cos_phi * (d_lambda / 2.0).sin().powi(2);
        2.0 * EARTH_RADIUS_M * h.sqrt().min(1.0).asin()
    }
}

/// Which half of a coordinate pair is out of its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinateError {
    Lat,
    Lng,
}

impl CoordinateError {
    pub fn message(self) -> &'static str {
        match self {
            CoordinateError::Lat => "The latitude must be a number from -90 to 90 (WGS84 degrees).",
            CoordinateError::Lng => "The longitude must be a number from -180 to 180 (WGS84 degrees).",
        }
    }
}

impl LatLng {
    /// The latitude is checked first: a pair with both out of range reports the latitude.
    pub fn new(lat: f64, lng: f64) -> Result<LatLng, CoordinateError> {
        if !lat.is_finite() || !(-90.0..=90.0).contains(&lat) {
            return Err(CoordinateError::Lat);
        }
        if !lng.is_finite() || !(-180.0..=180.0).contains(&lng) {
            return Err(CoordinateError::Lng);
        }
        // -0.0 is shown as "-0": keep the plain zero.
        Ok(LatLng { lat: lat + 0.0, lng: lng + 0.0 })
    }

    /// Decimal text, as the postal dataset and the interface show coordinates.
    pub fn parse(lat: &str, lng: &str) -> Option<LatLng> {
        LatLng::new(lat.trim().parse().ok()?, lng.trim().parse().ok()?).ok()
    }

    pub fn lat(self) -> f64 {
        self.lat
    }

    pub fn lng(self) -> f64 {
        self.lng
    }

    /// The great-circle (haversine) distance to `other`, in metres. On a sphere of the
    /// Earth's mean radius, so within 0.5 % of the ellipsoidal distance: ample for a 10 km
    /// rule and for ordering candidates.
    pub fn distance_m(self, other: LatLng) -> f64 {
        Spot::of(self).distance_m(&Spot::of(other))
    }

    /// The box of latitudes and longitudes holding every point within `radius_m` of this
    /// one: `(lat_min, lat_max, lng_min, lng_max)`, for an indexed range scan that the exact
    /// distance then filters. Near a pole (or across the antimeridian) the longitudes widen
    /// to the whole circle rather than wrap.
    pub fn bounding_box(self, radius_m: f64) -> (f64, f64, f64, f64) {
        let d_lat = (radius_m / EARTH_RADIUS_M).to_degrees();
        let (lat_min, lat_max) = ((self.lat - d_lat).max(-90.0), (self.lat + d_lat).min(90.0));
        let cos = lat_min.to_radians().cos().min(lat_max.to_radians().cos());
        if cos <= 1e-6 {
            return (lat_min, lat_max, -180.0, 180.0);
        }
        let d_lng = d_lat / cos;
        let (lng_min, lng_max) = (self.lng - d_lng, self.lng + d_lng);
        if lng_min < -180.0 || lng_max > 180.0 {
            return (lat_min, lat_max, -180.0, 180.0);
        }
        (lat_min, lat_max, lng_min, lng_max)
    }
}

/// Coordinates farther from the postal code's location than [`NEAR_POSTAL_CODE_M`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TooFar {
    pub distance_m: f64,
}

impl TooFar {
    /// Says how far, rounded up to 0.1 km so that a refused distance never reads as 10.0 km.
    pub fn message(self) -> String {
        let km = (self.distance_m / 100.0).ceil() / 10.0;
        format!(
            "The coordinates are {km:.1} km from the location of the address's postal code; they must lie within {} km of it.",
            NEAR_POSTAL_CODE_M / 1000.0
        )
    }
}

/// CONTRACT §11: precise coordinates must lie within 10 km of the postal code's location.
pub fn check_near(postal_code: LatLng, at: LatLng) -> Result<(), TooFar> {
    let distance_m = postal_code.distance_m(at);
    if distance_m <= NEAR_POSTAL_CODE_M { Ok(()) } else { Err(TooFar { distance_m }) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(lat: f64, lng: f64) -> LatLng {
        LatLng::new(lat, lng).unwrap()
    }

    #[test]
    fn ranges_are_checked_latitude_first() {
        assert_eq!(LatLng::new(90.0, 180.0).map(|p| (p.lat(), p.lng())), Ok((90.0, 180.0)));
        assert_eq!(LatLng::new(-90.0, -180.0).map(|p| (p.lat(), p.lng())), Ok((-90.0, -180.0)));
        assert_eq!(LatLng::new(90.000_001, 0.0), Err(CoordinateError::Lat));
        assert_eq!(LatLng::new(0.0, -180.5), Err(CoordinateError::Lng));
        assert_eq!(LatLng::new(f64::NAN, f64::NAN), Err(CoordinateError::Lat));
        assert_eq!(LatLng::new(0.0, f64::INFINITY), Err(CoordinateError::Lng));
        assert_eq!(LatLng::new(-0.0, -0.0).map(|p| format!("{}", p.lat())), Ok("0".into()));
        assert_eq!(LatLng::parse(" 43.6426", "-79.3871 ").map(LatLng::lng), Some(-79.3871));
        assert_eq!(LatLng::parse("43.6426", "west"), None);
    }

    #[test]
    fn known_distances() {
        // CN Tower to Toronto City Hall: about 1.2 km.
        let d = at(43.6426, -79.3871).distance_m(at(43.6534, -79.3841));
        assert!((1_150.0..1_300.0).contains(&d), "{d}");
        // Toronto to Montréal: about 504 km.
        let d = at(43.6532, -79.3832).distance_m(at(45.5017, -73.5673));
        assert!((500_000.0..510_000.0).contains(&d), "{d}");
        // One degree of latitude: 111.2 km on the mean sphere.
        assert!((at(0.0, 0.0).distance_m(at(1.0, 0.0)) - 111_195.0).abs() < 10.0);
        // Antipodes: half the circumference, no NaN from rounding past 1.
        let half = at(0.0, 0.0).distance_m(at(0.0, 180.0));
        assert!((half - std::f64::consts::PI * EARTH_RADIUS_M).abs() < 1.0, "{half}");
    }

    #[test]
    fn the_ten_km_rule_says_how_far() {
        let m5v = at(43.6426, -79.3871);
        assert!(check_near(m5v, at(43.6419, -79.3860)).is_ok());
        // 0.09 degrees of latitude north: about 10.0 km, inside.
        assert!(check_near(m5v, at(43.6426 + 0.0899, -79.3871)).is_ok());
        let far = check_near(m5v, at(43.6426 + 0.0905, -79.3871)).unwrap_err();
        assert!(far.distance_m > NEAR_POSTAL_CODE_M);
        assert_eq!(
            far.message(),
            "The coordinates are 10.1 km from the location of the address's postal code; they must lie within 10 km of it."
        );
        // Montréal's coordinates for a Toronto postal code.
        let e = check_near(m5v, at(45.5017, -73.5673)).unwrap_err();
        assert!(e.message().starts_with("The coordinates are 50"), "{}", e.message());
        // Swapped latitude and longitude are refused by range or by distance.
        assert!(check_near(m5v, at(-79.3871, 43.6426)).is_err());
    }

    #[test]
    fn a_bounding_box_holds_its_circle() {
        let (a, b, c, d) = at(43.64, -79.38).bounding_box(10_000.0);
        assert!(a < 43.551 && b > 43.729 && c < -79.50 && d > -79.26, "{a} {b} {c} {d}");
        assert!(at(89.99, 10.0).bounding_box(10_000.0).2 <= -180.0);
        assert!(at(10.0, 179.99).bounding_box(10_000.0).3 >= 180.0);
    }

    proptest! {
        /// Every point within the radius lies inside the box; the distance is symmetric.
        #[test]
        fn the_box_never_loses_a_near_point(
            lat in -89.0f64..89.0, lng in -179.0f64..179.0, bearing in 0.0f64..360.0, frac in 0.0f64..1.0,
        ) {
            let c = at(lat, lng);
            let r = 10_000.0 * frac;
            // A point at distance r along `bearing` (the spherical destination formula).
            let (phi, lambda, theta, delta) =
                (lat.to_radians(), lng.to_radians(), bearing.to_radians(), r / EARTH_RADIUS_M);
            let phi2 = (phi.sin() * delta.cos() + phi.cos() * delta.sin() * theta.cos()).asin();
            let lambda2 = lambda
                + (theta.sin() * delta.sin() * phi.cos()).atan2(delta.cos() - phi.sin() * phi2.sin());
            let p = at(phi2.to_degrees(), lambda2.to_degrees());
            prop_assert!((c.distance_m(p) - r).abs() < 0.01);
            prop_assert!((c.distance_m(p) - p.distance_m(c)).abs() < 1e-6);
            let (a, b, lo, hi) = c.bounding_box(10_000.0);
            prop_assert!(p.lat() >= a && p.lat() <= b && p.lng() >= lo && p.lng() <= hi);
        }
    }
}
