//! Road times between stops (CONTRACT §12): the travel matrix a day plan is solved on.
//!
//! Two sources give the same [`Matrix`]: the embedded model here (great-circle distance × a
//! detour factor, at a city's speed) and an OSRM `table` service, which the service crate
//! asks in blocks ([`blocks`]) and whose answers [`OsrmTable::parse`] reads. Both are pure
//! here: no HTTP, no clock.

use std::ops::Range;

use serde::Deserialize;

use crate::geo::distance::LatLng;

pub use crate::config::RoadModel;

// The model's numbers are configuration (`config::RoadModel`); how it drives is here.
impl RoadModel {
    /// The road from `a` to `b`: metres and seconds, both rounded up (a leg between two
    /// different points never takes 0 s).
    pub fn leg(&self, a: LatLng, b: LatLng) -> Leg {
        self.driven(a.distance_m(b))
    }

    /// [`RoadModel::leg`] between two spots (their trigonometry computed once).
    pub fn leg_spots(&self, a: &crate::geo::distance::Spot, b: &crate::geo::distance::Spot) -> Leg {
        self.driven(a.distance_m(b))
    }

    /// The road over a straight line of `straight_m` metres.
    fn driven(&self, straight_m: f64) -> Leg {
        let metres = straight_m * self.detour;
        let seconds = metres / (self.speed_kmh / 3.6);
        Leg { metres: metres.ceil() as i64, seconds: seconds.ceil() as i64 }
    }

    /// The full matrix between `points` (row = from, column = to).
    pub fn matrix(&self, points: &[LatLng]) -> Matrix {
        let n = points.len();
        let mut m = Matrix::zero(n);
        for (i, &a) in points.iter().enumerate() {
            for (j, &b) in points.iter().enumerate() {
                if i != j {
                    m.set(i, j, self.leg(a, b));
                }
            }
        }
        m
    }
}

/// One direction between two stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Leg {
    pub metres: i64,
    pub seconds: i64,
}

/// Travel times and distances between `size` points, row-major (from × to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    size: usize,
    legs: Vec<Leg>,
}

impl Matrix {
    pub fn zero(size: usize) -> Self {
        Self { size, legs: vec![Leg::default(); size * size] }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    #[inline]
    pub fn leg(&self, from: usize, to: usize) -> Leg {
        self.legs[from * self.size + to]
    }

    #[inline]
    pub fn seconds(&self, from: usize, to: usize) -> i64 {
        self.leg(from, to).seconds
    }

    #[inline]
    pub fn metres(&self, from: usize, to: usize) -> i64 {
        self.leg(from, to).metres
    }

    pub fn set(&mut self, from: usize, to: usize, leg: Leg) {
        self.legs[from * self.size + to] = leg;
    }

    /// Copies one answered block in: `table` holds `sources.len()` rows of
    /// `destinations.len()` legs.
    pub fn fill(&mut self, sources: Range<usize>, destinations: Range<usize>, table: &OsrmTable) {
        for (r, from) in sources.enumerate() {
            for (c, to) in destinations.clone().enumerate() {
                self.set(from, to, table.legs[r * table.columns + c]);
            }
        }
    }
}

/// How to cover an `n × n` matrix with requests OSRM accepts: squares of at most
/// `per_side` sources × `per_side` destinations (OSRM's `--max-table-size` bounds sources ×
/// destinations by its square; 100 by default).
pub fn blocks(n: usize, per_side: usize) -> Vec<(Range<usize>, Range<usize>)> {
    let per_side = per_side.max(1);
    let chunks: Vec<Range<usize>> = (0..n).step_by(per_side).map(|s| s..(s + per_side).min(n)).collect();
    let mut out = Vec::with_capacity(chunks.len() * chunks.len());
    for s in &chunks {
        for d in &chunks {
            out.push((s.clone(), d.clone()));
        }
    }
    out
}

/// The coordinates one block sends (sources, then the destinations not among them) and the
/// `sources=` / `destinations=` indices into that list, as OSRM's table service takes them.
pub fn block_request(points: &[LatLng], sources: &Range<usize>, destinations: &Range<usize>) -> BlockRequest {
    let same = sources == destinations;
    let mut coordinates: Vec<LatLng> = points[sources.clone()].to_vec();
    if !same {
        coordinates.extend_from_slice(&points[destinations.clone()]);
    }
    let join = |r: Range<usize>| r.map(|i| i.to_string()).collect::<Vec<_>>().join(";");
    let offset = if same { 0 } else { sources.len() };
    BlockRequest {
        // OSRM takes `longitude,latitude`, six decimals (0.1 m).
        path: coordinates.iter().map(|p| format!("{:.6},{:.6}", p.lng(), p.lat())).collect::<Vec<_>>().join(";"),
        sources: join(0..sources.len()),
        destinations: join(offset..offset + destinations.len()),
    }
}

/// The variable parts of one table request: `/table/v1/driving/{path}?sources=…&destinations=…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRequest {
    pub path: String,
    pub sources: String,
    pub destinations: String,
}

/// One block of an OSRM `table` answer, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct OsrmTable {
    columns: usize,
    legs: Vec<Leg>,
}

/// Why an OSRM answer cannot be used. Said in an operator's terms: the service answers the
/// API's caller with it (a plan cannot be made without road times).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OsrmError {
    /// OSRM answered with its own error code (`NoTable`, `TooBig`, `InvalidQuery` …).
    #[error("the routing engine refused the table request: {code}: {message}")]
    Refused { code: String, message: String },
    #[error("the routing engine's answer is not a table of the size asked: {0}")]
    Malformed(String),
    /// A `null` duration: OSRM found no road between two stops.
    #[error("the routing engine finds no road between two of the stops (row {row}, column {column} of a block)")]
    NoRoute { row: usize, column: usize },
}

#[derive(Deserialize)]
struct RawTable {
    code: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    durations: Option<Vec<Vec<Option<f64>>>>,
    #[serde(default)]
    distances: Option<Vec<Vec<Option<f64>>>>,
}

impl OsrmTable {
    /// Reads an answer to a request of `rows` sources × `columns` destinations with
    /// `annotations=duration,distance`. Seconds and metres are rounded up; a missing,
    /// negative or non-finite value, or a table of another shape, is an error, never a guess.
    pub fn parse(body: &[u8], rows: usize, columns: usize) -> Result<Self, OsrmError> {
        let raw: RawTable = serde_json::from_slice(body).map_err(|e| OsrmError::Malformed(e.to_string()))?;
        if raw.code != "Ok" {
            return Err(OsrmError::Refused { code: raw.code, message: raw.message.unwrap_or_default() });
        }
        let (Some(durations), Some(distances)) = (raw.durations, raw.distances) else {
            return Err(OsrmError::Malformed("durations or distances are missing".into()));
        };
        if durations.len() != rows || distances.len() != rows {
            return Err(OsrmError::Malformed(format!("{} rows where {rows} were asked", durations.len())));
        }
        let mut legs = Vec::with_capacity(rows * columns);
        for (row, (d, m)) in durations.iter().zip(&distances).enumerate() {
            if d.len() != columns || m.len() != columns {
                return Err(OsrmError::Malformed(format!("row {row} has {} columns, not {columns}", d.len())));
            }
            for (column, (s, metres)) in d.iter().zip(m).enumerate() {
                let (Some(s), Some(metres)) = (*s, *metres) else {
                    return Err(OsrmError::NoRoute { row, column });
                };
                if !(s.is_finite() && s >= 0.0 && metres.is_finite() && metres >= 0.0) {
                    return Err(OsrmError::Malformed(format!("row {row}, column {column}: {s} s, {metres} m")));
                }
                legs.push(Leg { metres: metres.ceil() as i64, seconds: s.ceil() as i64 });
            }
        }
        Ok(Self { columns, legs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(lat: f64, lng: f64) -> LatLng {
        LatLng::new(lat, lng).unwrap()
    }

    #[test]
    fn the_embedded_model_drives_the_detoured_great_circle_at_the_city_speed() {
        let model = RoadModel::new(36.0, 1.5).unwrap();
        // 0.01° of latitude is 1,111.95 m on the mean sphere; × 1.5 = 1,667.9 m; at 10 m/s.
        let leg = model.leg(at(43.65, -79.38), at(43.66, -79.38));
        assert_eq!(leg, Leg { metres: 1668, seconds: 167 });
        let m = model.matrix(&[at(43.65, -79.38), at(43.66, -79.38), at(43.65, -79.37)]);
        assert_eq!(m.leg(0, 1), leg);
        assert_eq!(m.leg(1, 0), leg);
        assert_eq!(m.leg(2, 2), Leg::default());
        assert!(m.seconds(1, 2) > m.seconds(0, 1), "the diagonal is longer");
    }

    #[test]
    fn unreal_speeds_and_detours_are_refused() {
        assert!(RoadModel::new(0.0, 1.3).is_err());
        assert!(RoadModel::new(f64::NAN, 1.3).is_err());
        assert!(RoadModel::new(30.0, 0.9).is_err());
        assert!(RoadModel::new(30.0, 1.0).is_ok());
    }

    #[test]
    fn blocks_cover_every_cell_exactly_once_within_the_request_size() {
        for (n, per) in [(0, 100), (1, 100), (100, 100), (101, 100), (250, 100), (7, 3), (9, 1)] {
            let mut seen = vec![0; n * n];
            let all = blocks(n, per);
            assert_eq!(all.len(), n.div_ceil(per).pow(2), "{n}/{per}: as few requests as the limit allows");
            for (s, d) in all {
                assert!(s.len() * d.len() <= per * per, "{n}/{per}: {s:?} × {d:?}");
                for i in s.clone() {
                    for j in d.clone() {
                        seen[i * n + j] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{n}/{per}");
        }
    }

    #[test]
    fn a_block_request_sends_longitude_first_and_indexes_its_halves() {
        let points = [at(43.0, -79.0), at(43.1, -79.1), at(43.2, -79.2), at(43.3, -79.3)];
        let r = block_request(&points, &(0..2), &(2..4));
        assert_eq!(r.path, "-79.000000,43.000000;-79.100000,43.100000;-79.200000,43.200000;-79.300000,43.300000");
        assert_eq!((r.sources.as_str(), r.destinations.as_str()), ("0;1", "2;3"));
        let same = block_request(&points, &(1..3), &(1..3));
        assert_eq!(same.path, "-79.100000,43.100000;-79.200000,43.200000");
        assert_eq!((same.sources.as_str(), same.destinations.as_str()), ("0;1", "0;1"));
    }

    #[test]
    fn osrm_answers_are_read_strictly() {
        let ok = br#"{"code":"Ok","durations":[[0,10.2],[9.9,0]],"distances":[[0,100.5],[99,0]]}"#;
        let t = OsrmTable::parse(ok, 2, 2).unwrap();
        let mut m = Matrix::zero(3);
        m.fill(1..3, 1..3, &t);
        assert_eq!(m.leg(1, 2), Leg { metres: 101, seconds: 11 });
        assert_eq!(m.leg(2, 1), Leg { metres: 99, seconds: 10 });
        assert!(matches!(OsrmTable::parse(ok, 3, 2), Err(OsrmError::Malformed(_))));
        assert!(matches!(OsrmTable::parse(ok, 2, 3), Err(OsrmError::Malformed(_))));
        let refused = br#"{"code":"TooBig","message":"Too many table coordinates"}"#;
        assert_eq!(
            OsrmTable::parse(refused, 2, 2).unwrap_err().to_string(),
            "the routing engine refused the table request: TooBig: Too many table coordinates"
        );
        let null = br#"{"code":"Ok","durations":[[0,null]],"distances":[[0,null]]}"#;
        assert_eq!(OsrmTable::parse(null, 1, 2), Err(OsrmError::NoRoute { row: 0, column: 1 }));
        assert!(matches!(OsrmTable::parse(b"<html>", 1, 1), Err(OsrmError::Malformed(_))));
        let negative = br#"{"code":"Ok","durations":[[-1]],"distances":[[0]]}"#;
        assert!(matches!(OsrmTable::parse(negative, 1, 1), Err(OsrmError::Malformed(_))));
    }
}
