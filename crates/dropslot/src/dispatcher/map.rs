//! A plan's map drawn as SVG on the server: no tile server, no script. Stops are projected
//! equirectangularly (longitude scaled by the cosine of the mean latitude) into a fixed box,
//! north up, one scale for both axes so distances look like distances.

/// The drawing box, in SVG user units.
pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 480.0;
const PAD: f64 = 28.0;

/// Dark enough for white numbers on them (≥ 4.5:1) and for lines on white (≥ 3:1).
const COLOURS: [&str; 8] = ["#0a5cad", "#a4161a", "#1e6b34", "#7a4d00", "#6a1b9a", "#00695c", "#ad1457", "#37474f"];
/// Line patterns, so that routes differ by more than colour.
const DASHES: [&str; 4] = ["none", "10 5", "3 4", "12 4 3 4"];

/// One route as drawn: its colour, line pattern, the polyline's points (depot, stops, depot)
/// and each stop's place and label.
pub struct MapRoute {
    pub letter: char,
    pub colour: &'static str,
    pub dash: &'static str,
    pub points: String,
    pub stops: Vec<MapStop>,
}

pub struct MapStop {
    pub x: String,
    pub y: String,
    /// The route's letter and the stop's number (`A3`), the same as in the tables.
    pub label: String,
    /// A return stop (parcels handed back to a merchant): drawn as a square, not a disc.
    pub ret: bool,
}

/// A stop to draw: where it is (lat, lng) and whether it is a return stop.
pub type Spot = ((f64, f64), bool);

/// Where a route's driver last was (the phone's reported position).
pub struct MapPosition {
    pub x: String,
    pub y: String,
    pub letter: char,
    pub colour: &'static str,
}

pub struct Map {
    pub routes: Vec<MapRoute>,
    pub depot: (String, String),
    pub positions: Vec<MapPosition>,
}

/// The letter of the `i`th route (`A`, `B`, …, then `a`, …).
pub fn letter(i: usize) -> char {
    let i = u8::try_from(i % 52).unwrap_or(0);
    if i < 26 { char::from(b'A' + i) } else { char::from(b'a' + i - 26) }
}

/// The colour of the `i`th route, in the map.
fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// The `i`th route's colour as an index into the stylesheet's `tone-N` classes (the same
/// colours, in the same order), for its table's card.
pub fn tone(i: usize) -> usize {
    i % COLOURS.len()
}

fn text(v: f64) -> String {
    format!("{v:.1}")
}

/// Draws `routes` (each: its index among the plan's routes and its stops in order) around the
/// depot at `depot`, with the drivers' last positions (route index, (lat, lng)).
pub fn draw(depot: (f64, f64), routes: &[(usize, Vec<Spot>)], positions: &[(usize, (f64, f64))]) -> Map {
    let all: Vec<(f64, f64)> = std::iter::once(depot)
        .chain(routes.iter().flat_map(|(_, s)| s.iter().map(|(at, _)| *at)))
        .chain(positions.iter().map(|(_, p)| *p))
        .collect();
    let mean_lat = all.iter().map(|p| p.0).sum::<f64>() / all.len() as f64;
    let k = mean_lat.to_radians().cos().max(0.01);
    let xs = all.iter().map(|p| p.1 * k);
    let ys = all.iter().map(|p| p.0);
    let (min_x, max_x) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (min_y, max_y) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
    let (span_x, span_y) = (max_x - min_x, max_y - min_y);
    // At least ~10 m across, so that one point alone (or stops on one line) has a scale.
    let scale = ((WIDTH - 2.0 * PAD) / span_x.max(1e-4)).min((HEIGHT - 2.0 * PAD) / span_y.max(1e-4));
    // Centred in the box.
    let (off_x, off_y) = ((WIDTH - span_x * scale) / 2.0, (HEIGHT - span_y * scale) / 2.0);
    let at = |(lat, lng): (f64, f64)| (off_x + (lng * k - min_x) * scale, off_y + (max_y - lat) * scale);
    let home = at(depot);
    let drawn = routes
        .iter()
        .map(|(i, stops)| {
            let placed: Vec<(f64, f64)> = stops.iter().map(|(p, _)| at(*p)).collect();
            let line: Vec<String> = std::iter::once(home)
                .chain(placed.iter().copied())
                .chain(std::iter::once(home))
                .map(|(x, y)| format!("{},{}", text(x), text(y)))
                .collect();
            let letter = letter(*i);
            MapRoute {
                letter,
                colour: colour(*i),
                dash: DASHES[(i / 2) % DASHES.len()],
                points: line.join(" "),
                stops: placed
                    .iter()
                    .zip(stops)
                    .enumerate()
                    .map(|(n, ((x, y), (_, ret)))| MapStop {
                        x: text(*x),
                        y: text(*y),
                        label: format!("{letter}{}", n + 1),
                        ret: *ret,
                    })
                    .collect(),
            }
        })
        .collect();
    let positions = positions
        .iter()
        .map(|(i, p)| {
            let (x, y) = at(*p);
            MapPosition { x: text(x), y: text(y), letter: letter(*i), colour: colour(*i) }
        })
        .collect();
    Map { routes: drawn, depot: (text(home.0), text(home.1)), positions }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xy(s: &MapStop) -> (f64, f64) {
        (s.x.parse().unwrap(), s.y.parse().unwrap())
    }

    #[test]
    fn stops_land_inside_the_box_north_up_and_east_right() {
        let depot = (43.6387, -79.4210);
        let map = draw(
            depot,
            &[(0, vec![((43.65, -79.38), false), ((43.64, -79.39), true)]), (2, vec![((43.66, -79.40), false)])],
            &[],
        );
        assert_eq!(map.routes.len(), 2);
        assert_eq!((map.routes[0].letter, map.routes[1].letter), ('A', 'C'));
        assert_eq!(map.routes[0].points.split(' ').count(), 4, "depot, two stops, depot");
        for s in map.routes.iter().flat_map(|r| &r.stops) {
            let (x, y) = xy(s);
            assert!((0.0..=WIDTH).contains(&x) && (0.0..=HEIGHT).contains(&y), "{} at {x},{y}", s.label);
        }
        let (a1, a2) = (xy(&map.routes[0].stops[0]), xy(&map.routes[0].stops[1]));
        assert!(a1.1 < a2.1, "the stop further north is higher");
        let depot_x: f64 = map.depot.0.parse().unwrap();
        assert!(depot_x < a1.0, "the depot, further west, is left");
        assert_eq!(map.routes[1].stops[0].label, "C1");
        assert!(map.routes[0].stops[1].ret && !map.routes[0].stops[0].ret, "a return stop is marked");
    }

    #[test]
    fn one_point_alone_is_drawn_in_the_middle() {
        let map = draw((43.6, -79.4), &[], &[]);
        assert_eq!(map.depot, (text(WIDTH / 2.0), text(HEIGHT / 2.0)));
    }

    #[test]
    fn a_driver_beyond_the_stops_widens_the_map() {
        let far = (43.70, -79.30);
        let map = draw((43.6387, -79.4210), &[(1, vec![((43.65, -79.38), false)])], &[(1, far)]);
        let p = &map.positions[0];
        let (x, y): (f64, f64) = (p.x.parse().unwrap(), p.y.parse().unwrap());
        assert!((0.0..=WIDTH).contains(&x) && (0.0..=HEIGHT).contains(&y), "{x},{y}");
        assert_eq!(p.letter, 'B');
        let (sx, sy) = xy(&map.routes[0].stops[0]);
        assert!(x > sx && y < sy, "north-east of the stop");
    }
}
