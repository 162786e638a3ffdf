//! The first start of the real binary on a new database (docs/operations.md, "The first
//! start"): the whole product at once (the demo client's tokens, an operator sign-in link,
//! two demo drivers per depot) and fleet capacity as the install's default; a database already
//! in use keeps selling on limits and gets nothing new.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::browser::Browser;
use crate::cli::Serve;
use crate::common::{API, NOW, TestDb, request, test_config};

/// `serve` on `db` with the test configuration around `fragment`: the process, its base URL
/// and every line it printed up to "listening on".
fn serve(db: &TestDb, dir: &std::path::Path, fragment: &str) -> (Serve, String, Vec<String>) {
    let config = dir.join("dropslot.toml");
    std::fs::write(&config, test_config(fragment)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", db.url())
        .env("DROPSLOT_NOW", NOW)
        .env("DROPSLOT_CONFIG", &config)
        .env_remove("DROPSLOT_BASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let serve = Serve(child);
    let mut printed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        let listening = line.contains("listening on");
        printed.push(line);
        if listening {
            break;
        }
    }
    assert!(printed.iter().any(|l| l.contains("listening on")), "serve did not report listening: {printed:?}");
    std::thread::spawn(move || lines.for_each(drop));
    (serve, format!("http://127.0.0.1:{port}"), printed)
}

/// The first word of the printed lines that contains `needle`.
fn word<'a>(printed: &'a [String], needle: &str) -> Option<&'a str> {
    printed.iter().flat_map(|l| l.split_whitespace()).find(|w| w.contains(needle))
}

/// A new database: the test and live tokens, an operator sign-in link that signs a browser in
/// to `/ops`, two working demo drivers per depot; the install records fleet as its default,
/// so a live order takes its stop in the depot's tentative plan. A second start prints and
/// creates nothing.
#[tokio::test]
async fn a_new_database_starts_with_the_whole_demo_and_sells_on_its_fleet() {
    let db = TestDb::fresh();
    let dir = tempfile::tempdir().unwrap();
    // `[capacity]` without a mode: the install's default decides.
    let fragment = "[demo]\nfleet = true\n[capacity]\n";
    let (first, base, printed) = serve(&db, dir.path(), fragment);
    let test = word(&printed, "ds_test_").expect("a test token").to_string();
    let live = word(&printed, "ds_live_").expect("a live token").to_string();
    let operator = word(&printed, "/ops/sign-in#token=ds_operator_").expect("an operator sign-in link").to_string();
    assert!(operator.starts_with(&format!("{base}/ops/sign-in#token=")), "{operator}");
    let drivers: Vec<&str> =
        printed.iter().flat_map(|l| l.split_whitespace()).filter(|w| w.contains("/driver#token=ds_driver_")).collect();
    assert_eq!(drivers.len(), 4, "two per depot of the demo area: {printed:?}");
    assert!(printed.iter().any(|l| l.contains("[demo] fleet = false")), "says how to turn it off: {printed:?}");
    assert_eq!(db.scalar("SELECT count(*) FROM drivers WHERE name LIKE 'Demo driver %'"), 4);
    assert_eq!(db.scalar("SELECT count(*) FROM install_settings WHERE key = 'capacity_mode' AND value = 'fleet'"), 1);

    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    // Each driver link's token opens the driver's own API.
    for link in &drivers {
        let token = link.split("#token=").nth(1).unwrap();
        let r = http.get(format!("{base}{API}/driver/route")).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), 200, "{link}");
    }
    // The test token previews; the live token's order is placed on a demo van.
    let r = http.post(format!("{base}{API}/requests/preview")).bearer_auth(&test).json(&request(&[500.0])).send();
    assert_eq!(r.await.unwrap().status(), 200);
    let r = http.post(format!("{base}{API}/requests/sync")).bearer_auth(&live).json(&request(&[500.0])).send();
    let r = r.await.unwrap();
    let status = r.status();
    let order: Value = r.json().await.unwrap();
    assert_eq!(status, 201, "{order}");
    assert_eq!(
        db.scalar(
            "SELECT count(*) FROM fleet_stops s JOIN drivers d ON d.unique_id = s.driver_id
             WHERE d.name LIKE 'Demo driver %'"
        ),
        1,
        "booked on the fleet: {order}"
    );

    // The operator link signs a browser in; the token leaves the address bar.
    let b = Browser::start((1280, 900)).await;
    b.goto(&operator).await;
    b.wait_until("location.pathname === '/ops/board'").await;
    assert!(!b.current_url().await.contains("token"), "{}", b.current_url().await);
    let main = b.text("main").await;
    // The fleet's day: the two demo vans of YYZ1, the order's stop on one of them.
    assert!(
        main.contains("The fleet's day") && main.contains("Demo driver 2 (YYZ1)") && main.contains("1 / 80"),
        "the board shows the demo fleet: {main}"
    );
    drop(b);

    drop(first);
    let (_second, _, again) = serve(&db, dir.path(), fragment);
    assert!(word(&again, "ds_").is_none() && word(&again, "#token=").is_none(), "nothing printed again: {again:?}");
    assert_eq!(db.scalar("SELECT count(*) FROM drivers"), 4);
    assert_eq!(db.scalar("SELECT count(*) FROM staff_tokens WHERE kind = 'operator'"), 1);
}

/// A database already in use when this version first starts on it (it holds a client and no
/// install setting): no demo is created, and the install's default is limits, so it keeps
/// selling as it did.
#[tokio::test]
async fn a_database_in_use_gets_no_demo_and_keeps_selling_on_limits() {
    let db = TestDb::fresh();
    let dir = tempfile::tempdir().unwrap();
    let out = crate::cli::dropslot(&db.url(), &["client", "create", "--name", "Shop"]);
    assert!(out.status.success(), "{out:?}");
    // What a database from before the install's settings looks like: a client, no setting.
    assert_eq!(db.scalar("SELECT count(*) FROM install_settings WHERE value = 'fleet'"), 1, "a new database's");
    db.execute("DELETE FROM install_settings");
    let (_serve, _, printed) = serve(&db, dir.path(), "[demo]\nfleet = true\n[capacity]\n");
    assert!(word(&printed, "ds_").is_none(), "{printed:?}");
    assert_eq!(db.scalar("SELECT count(*) FROM drivers"), 0);
    assert_eq!(db.scalar("SELECT count(*) FROM install_settings WHERE key = 'capacity_mode' AND value = 'limits'"), 1);
}

/// `[demo] fleet = false`: a new database gets its demo client and test token only.
#[tokio::test]
async fn demo_fleet_off_creates_the_demo_client_only() {
    let db = TestDb::fresh();
    let dir = tempfile::tempdir().unwrap();
    let (_serve, _, printed) = serve(&db, dir.path(), "[demo]\nfleet = false\n");
    assert!(word(&printed, "ds_test_").is_some(), "{printed:?}");
    assert!(word(&printed, "ds_live_").is_none() && word(&printed, "#token=").is_none(), "{printed:?}");
    assert_eq!(db.scalar("SELECT count(*) FROM drivers"), 0);
    assert_eq!(db.scalar("SELECT count(*) FROM staff_tokens"), 0);
}
