//! Road times from a real OSRM (CONTRACT §12, `[routing] osrm_url`): the test writes a small
//! street grid as OSM XML, extracts and contracts it with OSRM's own tools and car profile,
//! starts `osrm-routed` on loopback, and checks the service's block-by-block matrix against
//! OSRM's answers asked one pair at a time. Also what the dispatcher hears when the engine
//! is down, silent, or refuses. `scripts/osrm.sh` (run by scripts/test-deps.sh) installs OSRM.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dropslot::Settings;
use dropslot::roads::{RoadError, Roads};
use dropslot_core::config::Overrides;
use dropslot_core::geo::distance::LatLng;
use dropslot_core::routing::roads::RoadModel;

/// Where scripts/osrm.sh installs OSRM (its default prefix), unless `DROPSLOT_OSRM_DIR` says.
fn osrm_dir() -> PathBuf {
    let home = || Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cache/dropslot/osrm-26.10.0");
    let dir = std::env::var_os("DROPSLOT_OSRM_DIR").map_or_else(home, PathBuf::from);
    assert!(
        dir.join("bin/osrm-routed").exists(),
        "OSRM is not installed in {}: run scripts/test-deps.sh",
        dir.display()
    );
    dir
}

/// A 6 × 6 grid of residential streets about 200 m apart in downtown Toronto, one-way free.
fn grid_osm() -> String {
    let (rows, cols) = (6, 6);
    let id = |r: usize, c: usize| r * cols + c + 1;
    let mut xml =
        String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<osm version=\"0.6\" generator=\"dropslot-test\">\n");
    let stamp = "timestamp=\"2026-01-01T00:00:00Z\" version=\"1\"";
    for r in 0..rows {
        for c in 0..cols {
            let (lat, lng) = (43.6500 + 0.0018 * r as f64, -79.3800 + 0.0025 * c as f64);
            writeln!(xml, "  <node id=\"{}\" {stamp} lat=\"{lat:.4}\" lon=\"{lng:.4}\"/>", id(r, c)).unwrap();
        }
    }
    let mut way = 100;
    let mut street = |nodes: Vec<usize>, name: String, xml: &mut String| {
        way += 1;
        writeln!(xml, "  <way id=\"{way}\" {stamp}>").unwrap();
        for n in nodes {
            writeln!(xml, "    <nd ref=\"{n}\"/>").unwrap();
        }
        writeln!(xml, "    <tag k=\"highway\" v=\"residential\"/><tag k=\"name\" v=\"{name}\"/>\n  </way>").unwrap();
    };
    for r in 0..rows {
        street((0..cols).map(|c| id(r, c)).collect(), format!("Row {r}"), &mut xml);
    }
    for c in 0..cols {
        street((0..rows).map(|r| id(r, c)).collect(), format!("Column {c}"), &mut xml);
    }
    xml + "</osm>\n"
}

/// `osrm-routed` on a free loopback port, killed when dropped.
struct Routed {
    child: Child,
    url: String,
}

impl Drop for Routed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(tool: &Path, args: &[&Path]) {
    let out = Command::new(tool).args(args).output().expect("run an OSRM tool");
    assert!(out.status.success(), "{} failed: {}", tool.display(), String::from_utf8_lossy(&out.stderr));
}

/// Extracts and contracts the grid, then serves it, allowing at most `max_table` sources ×
/// `max_table` destinations a request. Ready once it says it waits for requests.
fn serve_grid(dir: &Path, max_table: usize) -> Routed {
    let osrm = osrm_dir();
    let osm = dir.join("grid.osm");
    std::fs::write(&osm, grid_osm()).unwrap();
    run(&osrm.join("bin/osrm-extract"), &[Path::new("-p"), &osrm.join("share/profiles/car.lua"), &osm]);
    let graph = dir.join("grid.osrm");
    run(&osrm.join("bin/osrm-contract"), &[&graph]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(osrm.join("bin/osrm-routed"))
        .args(["--algorithm", "ch", "--ip", "127.0.0.1", "--port", &port.to_string()])
        .args(["--max-table-size", &max_table.to_string()])
        .arg(&graph)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start osrm-routed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let line = lines.next().expect("osrm-routed exited before it was ready").unwrap();
        if line.contains("waiting for requests") {
            break;
        }
        assert!(Instant::now() < deadline, "osrm-routed not ready in 30 s");
    }
    // Its request log is read and dropped so that a full pipe never blocks it.
    std::thread::spawn(move || lines.for_each(drop));
    Routed { child, url: format!("http://127.0.0.1:{port}") }
}

fn roads(fragment: &str) -> Roads {
    Roads::new(&Settings::from_toml_fragment(fragment, &Overrides::default()).unwrap().routing)
}

fn at(lat: f64, lng: f64) -> LatLng {
    LatLng::new(lat, lng).unwrap()
}

/// Eight stops on the streets (at crossings and between them), spread over the grid.
fn stops() -> Vec<LatLng> {
    vec![
        at(43.6500, -79.3800),
        at(43.6590, -79.3675),
        at(43.6536, -79.3750),
        at(43.6509, -79.3725),
        at(43.6572, -79.3790),
        at(43.6554, -79.3700),
        at(43.6518, -79.3688),
        at(43.6590, -79.3738),
    ]
}

const MODEL: RoadModel = RoadModel { speed_kmh: 25.0, detour: 1.3 };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_osrm_matrix_is_osrms_table_asked_in_blocks() {
    let dir = tempfile::tempdir().unwrap();
    // At most 3 × 3 a request: 8 stops take 9 blocks, some of them not square.
    let routed = serve_grid(dir.path(), 3);
    let points = stops();
    let fragment = format!("[routing]\nosrm_url = \"{}\"\nosrm_table_size = 3\nosrm_concurrency = 2\n", routed.url);
    let matrix = roads(&fragment).matrix(MODEL, points.clone()).await.expect("a matrix from OSRM");
    assert_eq!(matrix.size(), 8);

    // OSRM asked one pair at a time, independently of the block arithmetic.
    let client = reqwest::Client::new();
    let path: Vec<String> = points.iter().map(|p| format!("{},{}", p.lng(), p.lat())).collect();
    let mut longest = 0;
    for i in 0..8 {
        for j in 0..8 {
            let url = format!(
                "{}/table/v1/driving/{}?sources={i}&destinations={j}&annotations=duration,distance",
                routed.url,
                path.join(";")
            );
            let answer: serde_json::Value = client.get(url).send().await.unwrap().json().await.unwrap();
            let seconds = answer["durations"][0][0].as_f64().unwrap().ceil() as i64;
            let metres = answer["distances"][0][0].as_f64().unwrap().ceil() as i64;
            assert_eq!((matrix.seconds(i, j), matrix.metres(i, j)), (seconds, metres), "from stop {i} to stop {j}");
            longest = longest.max(metres);
        }
    }
    // Real streets: the grid's far corners are over a kilometre apart by road, and a road
    // trip is never shorter than the straight line.
    assert!(longest > 1_500, "{longest}");
    for i in 0..8 {
        for j in 0..8 {
            assert!(matrix.metres(i, j) as f64 + 1.0 >= points[i].distance_m(points[j]), "{i} → {j}");
        }
    }

    // Asking for more than the server allows is OSRM's own refusal, in words.
    let fragment = format!("[routing]\nosrm_url = \"{}\"\nosrm_table_size = 8\n", routed.url);
    let e = roads(&fragment).matrix(MODEL, points).await.unwrap_err();
    assert!(matches!(e, RoadError::Answer { .. }), "{e:?}");
    assert!(e.to_string().contains("refused the table request: TooBig"), "{e}");
}

#[tokio::test]
async fn an_engine_that_is_down_or_silent_is_a_clear_error_in_time() {
    // Nothing listens on the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = roads(&format!("[routing]\nosrm_url = \"http://127.0.0.1:{port}\"\n"))
        .matrix(MODEL, stops())
        .await
        .unwrap_err();
    assert!(matches!(e, RoadError::Down { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("OSRM at 127.0.0.1:") && text.contains("refused"), "{text}");
    assert!(text.contains("unset [routing] osrm_url"), "says what to do: {text}");

    // Something accepts the connection and never answers: the timeout ends it.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let started = Instant::now();
    let e = roads(&format!("[routing]\nosrm_url = \"http://{addr}\"\nosrm_timeout_seconds = 1\n"))
        .matrix(MODEL, stops())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no answer within routing.osrm_timeout_seconds"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "bounded by the timeout: {:?}", started.elapsed());
    held.abort();
}

#[tokio::test]
async fn the_embedded_model_needs_no_engine() {
    let points = stops();
    let matrix = roads("").matrix(MODEL, points.clone()).await.unwrap();
    assert_eq!(matrix.leg(0, 1), MODEL.leg(points[0], points[1]));
    assert_eq!(roads("").source(), "embedded");
}
