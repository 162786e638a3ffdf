//! `dropslot copy` (`SQLite` to `PostgreSQL`) as an operator runs it: a real `serve` on a
//! `SQLite` file, killed; the copy into a fresh `PostgreSQL` database; a real `serve` on that.
//! Every read a client or the tracking page makes answers the same, tokens and idempotency
//! keys keep working, and new rows get ids after the copied ones. Skips on `SQLite`
//! (`DROPSLOT_TEST_DATABASE_URL` must name a `PostgreSQL` server).

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::Serve;
use crate::common::{API, TestDb, request, request_with_codes};

/// Label and tracking links are built from this, so both servers print the same ones.
const BASE_URL: &str = "https://copy.example.com";
const CODE: &str = "COPYTEST00000001";
const DELETED_CODE: &str = "COPYTEST00000002";
const KEY: &str = "copy-key-0001";

/// Every table the copy moves, in its order.
const TABLES: &[&str] = &[
    "clients",
    "tokens",
    "saved_addresses",
    "orders",
    "pick_up_shipments",
    "shipment_orders",
    "drop_off_shipments",
    "parcels",
    "shipment_events",
    "idempotency_keys",
    "webhook_endpoints",
    "webhook_messages",
    "webhook_deliveries",
    "webhook_attempts",
    "address_points",
    "order_requests",
    "slot_fill",
    "capacity_overrides",
    "drivers",
    "staff_tokens",
    "publishable_keys",
    "plans",
    "published_routes",
    "published_stops",
    "proofs",
    "notifications",
    "notification_recipients",
    "notification_settings",
    "attempt_policies",
    "fleet_days",
    "fleet_stops",
    "stop_etas",
    "eta_windows",
    "told_etas",
    "install_settings",
];

fn copy(from: &str, to: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["copy", "--from", from, "--to", to])
        .env_remove("DATABASE_URL")
        .env_remove("DROPSLOT_CONFIG")
        .output()
        .expect("run dropslot copy")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

/// A failure as the CLI reports it: this exit code and one line on stderr.
fn assert_fails(o: &Output, code: i32) -> String {
    assert_eq!(o.status.code(), Some(code), "{o:?}");
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn call(&self, req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
        let res = req.send().await.expect("the server answers");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        (status, headers, res.json().await.expect("a JSON body"))
    }

    async fn get(&self, path: &str, token: &str) -> Value {
        let (status, _, body) = self.call(self.http.get(format!("{}{API}{path}", self.base)).bearer_auth(token)).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    async fn post(&self, path: &str, token: &str, body: &Value, key: Option<&str>) -> (u16, bool, Value) {
        let mut req = self.http.post(format!("{}{API}{path}", self.base)).bearer_auth(token).json(body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        let (status, headers, body) = self.call(req).await;
        (status, headers.get("idempotent-replayed").is_some_and(|v| v == "true"), body)
    }

    /// The public tracking page, as JSON.
    async fn track(&self, code: &str) -> Value {
        let (status, _, body) =
            self.call(self.http.get(format!("{}/track/{code}", self.base)).header("Accept", "application/json")).await;
        assert_eq!(status, 200, "/track/{code}: {body}");
        body
    }

    /// A label's bytes, by the link an order shows (its base replaced by this server's).
    async fn label(&self, link: &str) -> Vec<u8> {
        let url = link.replacen(BASE_URL, &self.base, 1);
        let res = self.http.get(&url).send().await.expect("the server answers");
        assert_eq!(res.status(), 200, "{url}");
        res.bytes().await.expect("label bytes").to_vec()
    }
}

fn tracking(order: &Value) -> String {
    order["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().expect("a tracking code").to_string()
}

/// The first label link anywhere in `v`.
fn label_link(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if s.starts_with(&format!("{BASE_URL}/labels/")) => Some(s.clone()),
        Value::Array(a) => a.iter().find_map(label_link),
        Value::Object(o) => o.values().find_map(label_link),
        _ => None,
    }
}

/// What the source's server showed, to be read again from the target's.
struct Seen {
    orders: Vec<String>,
    trackings: Vec<String>,
    saved_address: i64,
    endpoint: i64,
}

/// Every read of the data made, by path: the client's and the demo client's orders, each
/// order and shipment, the parcel by custom code, the saved addresses, the webhook endpoints
/// and deliveries (with their attempt logs), and the public tracking pages.
async fn reads(c: &Client, seen: &Seen, token: &str, demo: &str) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    for (who, t) in [("client", token), ("demo", demo)] {
        all.insert(format!("{who} /orders"), c.get("/orders?limit=100", t).await);
        all.insert(format!("{who} /orders page 1"), c.get("/orders?limit=1", t).await);
        all.insert(format!("{who} /saved-addresses"), c.get("/saved-addresses", t).await);
    }
    for id in &seen.orders {
        all.insert(format!("/orders/{id}"), c.get(&format!("/orders/{id}"), token).await);
    }
    for code in &seen.trackings {
        all.insert(format!("/shipments/{code}"), c.get(&format!("/shipments/{code}"), token).await);
        all.insert(format!("/track/{code}"), c.track(code).await);
    }
    let path = format!("/parcels/find/by-custom-code/{CODE}");
    all.insert(path.clone(), c.get(&path, token).await);
    for path in [
        format!("/saved-addresses/{}", seen.saved_address),
        "/webhooks".to_string(),
        format!("/webhooks/{}", seen.endpoint),
        format!("/webhooks/{}/deliveries?limit=100", seen.endpoint),
    ] {
        all.insert(path.clone(), c.get(&path, token).await);
    }
    all
}

/// `PostgreSQL` keeps instants to the microsecond: an attempt's `at` (the system clock's, to
/// the nanosecond on `SQLite`) as the copy keeps it.
fn to_microseconds(reads: &mut BTreeMap<String, Value>, endpoint: i64) {
    let key = format!("/webhooks/{endpoint}/deliveries?limit=100");
    let Some(Value::Array(deliveries)) = reads.get_mut(&key).and_then(|r| r["object"].get_mut("deliveries")) else {
        panic!("no deliveries in {key}");
    };
    for d in deliveries {
        for a in d["log"].as_array_mut().into_iter().flatten() {
            let at: jiff::Timestamp = a["at"].as_str().expect("an attempt time").parse().expect("RFC 3339");
            let kept = at
                .round(jiff::TimestampRound::new().smallest(jiff::Unit::Microsecond).mode(jiff::RoundMode::Trunc))
                .expect("rounds");
            a["at"] = json!(kept.to_string());
        }
    }
}

/// Every delivery has made its one attempt (the schedule allows no retry) and failed: the
/// outbox is settled, so the copy's reads cannot move under the comparison.
async fn settled(c: &Client, token: &str, endpoint: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = c.get(&format!("/webhooks/{endpoint}/deliveries?limit=100"), token).await;
        let deliveries = page["object"]["deliveries"].as_array().cloned().unwrap_or_default();
        if !deliveries.is_empty() && deliveries.iter().all(|d| d["state"] == "failed" && d["attempts"] == 1) {
            return;
        }
        assert!(Instant::now() < deadline, "the deliveries did not settle: {page}");
        tokio::task::yield_now().await;
    }
}

#[test]
fn a_sqlite_database_copied_to_postgres_reads_back_the_same() {
    let target = TestDb::fresh();
    if !matches!(target, TestDb::Postgres { .. }) {
        eprintln!("skipped: the copy needs DROPSLOT_TEST_DATABASE_URL=postgres://…");
        return;
    }
    let pg = target.url();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("source.db");
    let sqlite = format!("sqlite://{}", path.display());
    // One attempt per delivery: the receiver (port 9, closed) refuses it, and it is failed.
    let config = dir.path().join("dropslot.toml");
    // Generous rate limits: the test polls its asynchronous request as fast as it answers.
    let generous = crate::common::GENEROUS_LIMITS;
    // An SMS provider nobody answers at: a live message is claimed (its recipient gets an
    // opt-out token) and fails at once (no retries).
    let sms = "[notifications.sms]\nurl = \"http://127.0.0.1:9/sms\"\nfrom = \"+15550009999\"\n";
    // YYZ1 books on its fleet (issue 45): a live order takes its stop in the tentative plan.
    let fleet = "[capacity.depots]\nYYZ1 = \"fleet\"\n";
    std::fs::write(&config, format!("[webhooks]\nretry_schedule = \"\"\n{sms}{generous}{fleet}")).unwrap();
    let config = config.display().to_string();
    let env = [
        ("DROPSLOT_CONFIG", config.as_str()),
        ("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE", "1"),
        ("DROPSLOT_BASE_URL", BASE_URL),
        ("DROPSLOT_ADMIN_TOKEN", crate::common::ADMIN_TOKEN),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();

    // The source: a server on SQLite, with a client and tokens made by the CLI.
    let (server, base, demo) = crate::cli::spawn_serve_with(&sqlite, &env);
    let server = Serve(server);
    let demo = demo.expect("a demo token on the empty file");
    let client = stdout(&crate::cli::dropslot(&sqlite, &["client", "create", "--name", "Copy Parcels"]));
    let token = stdout(&crate::cli::dropslot(&sqlite, &["token", "create", "--client", &client, "--kind", "test"]));
    let revoked = stdout(&crate::cli::dropslot(&sqlite, &["token", "create", "--client", &client, "--kind", "live"]));
    assert!(crate::cli::dropslot(&sqlite, &["token", "revoke", &revoked[..16]]).status.success());
    let key_args =
        ["token", "create", "--client", &client, "--kind", "publishable", "--origin", "https://shop.example"];
    let publishable = stdout(&crate::cli::dropslot(&sqlite, &key_args));
    // The fleet: an operator token and a driver with its driver token.
    let operator = stdout(&crate::cli::dropslot(&sqlite, &["token", "create", "--kind", "operator"]));
    let driver = stdout(&crate::cli::dropslot(
        &sqlite,
        &[
            "driver",
            "create",
            "--name",
            "Sam Rivera",
            "--phone",
            "+1 416 555 0199",
            "--depot",
            "YYZ1",
            "--capacity-parcels",
            "120",
            "--capacity-kg",
            "800",
            "--shift",
            "08:00-18:00",
            "--weekdays",
            "mon,fri",
        ],
    ));
    let (driver_id, sign_in) = driver.split_once('\n').expect("the id, then the sign-in link");
    let driver_token = sign_in.split_once("#token=").expect("a sign-in link").1.to_string();
    // Address points move too (their coordinates are the one REAL column).
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../dropslot-core/data/address-points-sample.csv");
    assert!(crate::cli::dropslot(&sqlite, &["addresses", "import", sample]).status.success());
    let source = Client { http: http.clone(), base };
    let replayed_body = request(&[2500.0]);
    let (seen, idempotent, before) = rt.block_on(async {
        let c = &source;
        let hook = json!({"url": "http://127.0.0.1:9/hook", "events": ["*"],
            "auth_header": {"name": "X-Api-Key", "value": "copy-secret-1234"}});
        let (status, _, e) = c.post("/webhooks", &token, &hook, None).await;
        assert_eq!(status, 201, "{e}");
        let endpoint = e["object"]["id"].as_i64().unwrap();
        // A slot's limit on a date (the orders below fill its counters).
        let limit = json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-EV", "date": "2026-11-23", "stops": 50});
        let put = c.http.put(format!("{}{API}/admin/capacity", c.base)).bearer_auth(crate::common::ADMIN_TOKEN);
        let (status, _, l) = c.call(put.json(&limit)).await;
        assert_eq!(status, 200, "{l}");
        // An asynchronous request, completed before anything else moves.
        let (status, _, accepted) = c.post("/requests/async", &token, &crate::async_orders::large(2), None).await;
        assert_eq!(status, 202, "{accepted}");
        let status_path = format!("/requests/{}", accepted["object"]["request_id"].as_str().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.get(&status_path, &token).await["object"]["status"] != "completed" {
            assert!(Instant::now() < deadline, "the asynchronous request did not complete");
            tokio::task::yield_now().await;
        }
        let mut orders = Vec::new();
        for body in [request_with_codes(&[CODE, DELETED_CODE]), request(&[500.0, 1500.0])] {
            let (status, _, o) = c.post("/requests/sync", &token, &body, None).await;
            assert_eq!(status, 201, "{o}");
            orders.push(o["object"].clone());
        }
        let (status, _, idempotent) = c.post("/requests/sync", &token, &replayed_body, Some(KEY)).await;
        assert_eq!(status, 201, "{idempotent}");
        orders.push(idempotent["object"].clone());
        let (status, _, o) = c.post("/requests/sync", &demo, &request(&[700.0]), None).await;
        assert_eq!(status, 201, "{o}");

        // Deleted by custom code: its shipment is re-priced, the parcel leaves the reads.
        let (status, _, d) = c
            .call(
                c.http
                    .delete(format!("{}{API}/parcels/find/by-custom-code/{DELETED_CODE}", c.base))
                    .bearer_auth(&token)
                    .header("X-Requested-With", "XMLHttpRequest"),
            )
            .await;
        assert_eq!(status, 200, "{d}");
        let happy = tracking(&orders[1]);
        let (status, _, r) =
            c.post("/sandbox/scenarios/happy", &token, &json!({"drop_off_shipment_unique_ids": [happy]}), None).await;
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["object"]["affected"].as_array().map(Vec::len), Some(1), "{r}");
        settled(c, &token, endpoint).await;
        let saved = c.get("/saved-addresses", &token).await;
        let seen = Seen {
            orders: orders.iter().map(|o| o["unique_id"].as_str().unwrap().to_string()).collect(),
            trackings: orders.iter().map(tracking).collect(),
            saved_address: saved["object"]["saved_addresses"][0]["id"].as_i64().expect("a saved address"),
            endpoint,
        };
        let before = reads(c, &seen, &token, &demo).await;
        (seen, idempotent, before)
    });
    // A published day plan: a live order of the client on the driver's route.
    let live = stdout(&crate::cli::dropslot(&sqlite, &["token", "create", "--client", &client, "--kind", "live"]));
    let plan = rt.block_on(async {
        let c = &source;
        // YYZ1 books on its fleet: this order's stop is placed in its tentative plan (a row of
        // `fleet_stops`), and the day plan starts from it.
        let (status, _, o) = c.post("/requests/sync", &live, &request(&[800.0]), None).await;
        assert_eq!(status, 201, "{o}");
        let date = o["object"]["shipments"][0]["drop_off_shipment"]["scheduled_date"].as_str().unwrap().to_string();
        let body = json!({"date": date, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1});
        let (status, _, p) = c.post("/ops/plans", &operator, &body, None).await;
        assert_eq!(status, 201, "{p}");
        let id = p["object"]["id"].as_str().unwrap().to_string();
        let (status, _, p) = c.post(&format!("/ops/plans/{id}/publish"), &operator, &json!({}), None).await;
        assert_eq!(status, 200, "{p}");
        assert_eq!(p["object"]["cost"]["shipments_assigned"], 1, "{p}");
        // Recipient notifications: the client's settings, and the live order's SMS claimed
        // (and failed), its recipient then opted out.
        let settings = json!({"sender_name": "Copy Parcels", "email": true, "sms": true,
            "triggers": {"scheduled": true, "out_for_delivery": false, "delivered": true, "failed": true}});
        let put = c.http.put(format!("{}{API}/notifications/settings", c.base)).bearer_auth(&live);
        let (status, _, r) = c.call(put.json(&settings)).await;
        assert_eq!(status, 200, "{r}");
        // An attempts policy of its own (CONTRACT §15).
        let policy = json!({"max_attempts": 2, "after_failure": "hold", "max_return_attempts": 1});
        let put = c.http.put(format!("{}{API}/attempts/settings", c.base)).bearer_auth(&live);
        let (status, _, r) = c.call(put.json(&policy)).await;
        assert_eq!(status, 200, "{r}");
        let live_tracking = tracking(&o["object"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let n = c.get(&format!("/shipments/{live_tracking}/notifications"), &live).await;
            if n["object"]["notifications"][0]["state"] == "failed" {
                break;
            }
            assert!(Instant::now() < deadline, "the live SMS was never tried: {n}");
            tokio::task::yield_now().await;
        }
        let file = rusqlite::Connection::open(&path).unwrap();
        let token: String =
            file.query_row("SELECT opt_out_token FROM notification_recipients", [], |r| r.get(0)).unwrap();
        let r = c.http.post(format!("{}/notifications/opt-out/{token}", c.base)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        p["object"].clone()
    });
    // A proof image the driver uploaded (its bytes are the one large BLOB).
    let mut proof_png = Vec::new();
    let mut e = png::Encoder::new(&mut proof_png, 2, 2);
    e.set_color(png::ColorType::Grayscale);
    e.write_header().unwrap().write_image_data(&[0, 255, 255, 0]).unwrap();
    rt.block_on(async {
        let c = &source;
        let req = c.http.post(format!("{}{API}/driver/proofs", c.base)).bearer_auth(&driver_token);
        let req = req.header("Content-Type", "image/png").header("Idempotency-Key", "copy-proof");
        let (status, _, p) = c.call(req.body(proof_png.clone())).await;
        assert_eq!(status, 201, "{p}");
    });
    let label = label_link(&before[&format!("/orders/{}", seen.orders[0])]).expect("a label link");
    let label_bytes = rt.block_on(source.label(&label));
    drop(server);

    // The copy.
    let out = copy(&sqlite, &pg);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: Vec<(String, i64)> = stdout(&out)
        .lines()
        .map(|l| {
            let (table, rows) = l.split_once(' ').expect("table and rows");
            (table.to_string(), rows.trim().parse().expect("a row count"))
        })
        .collect();
    assert_eq!(summary.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), TABLES, "one line per table, in order");
    let file = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let in_sqlite = |sql: &str| -> i64 { file.query_row(sql, [], |r| r.get(0)).unwrap() };
    for (table, rows) in &summary {
        assert_eq!(*rows, in_sqlite(&format!("SELECT count(*) FROM {table}")), "{table}: every row");
        assert_eq!(*rows, target.scalar(&format!("SELECT count(*) FROM {table}")), "{table}: in PostgreSQL");
        assert!(*rows > 0, "{table}: the scenario leaves rows in every table");
        let no_ids = [
            "idempotency_keys",
            "slot_fill",
            "capacity_overrides",
            "address_points",
            "plans",
            "published_routes",
            "published_stops",
            "proofs",
            "notification_recipients",
            "notification_settings",
            "attempt_policies",
            "fleet_days",
            "fleet_stops",
            "stop_etas",
            "told_etas",
            "install_settings",
        ];
        if !no_ids.contains(&table.as_str()) {
            // The sequence continues right after the copied ids (the tables without ids aside).
            let max = in_sqlite(&format!("SELECT max(id) FROM {table}"));
            let last =
                target.scalar(&format!("SELECT pg_sequence_last_value(pg_get_serial_sequence('{table}', 'id'))"));
            assert_eq!(last, max, "{table}: the sequence");
        }
    }
    // The install's choice of capacity mode goes with the data.
    let fleet = "SELECT count(*) FROM install_settings WHERE key = 'capacity_mode' AND value = 'fleet'";
    assert_eq!((in_sqlite(fleet), target.scalar(fleet)), (1, 1));
    let rows = |table: &str| summary.iter().find(|(t, _)| t == table).map(|(_, n)| *n);
    assert_eq!(
        (rows("clients"), rows("tokens"), rows("orders"), rows("parcels")),
        // Five orders made by `sync` (one live, on the plan), one (of two drop-offs, three
        // parcels) by `async`; a live token beside the test and the revoked one.
        (Some(2), Some(4), Some(6), Some(10))
    );
    let max_event = in_sqlite("SELECT max(id) FROM shipment_events");
    let max_shipment_order = in_sqlite("SELECT max(id) FROM shipment_orders");
    let max_order = in_sqlite("SELECT max(id) FROM orders");

    // Refusals: a target that holds data (exit 1, one line), a missing source, wrong URLs (usage).
    let err = assert_fails(&copy(&sqlite, &pg), 1);
    assert!(err.contains("fresh"), "{err}");
    let missing = format!("sqlite://{}", dir.path().join("missing.db").display());
    assert_fails(&copy(&missing, &pg), 1);
    assert_eq!(copy(&pg, &pg).status.code(), Some(2));
    assert_eq!(copy(&sqlite, &sqlite).status.code(), Some(2));
    assert_eq!(target.scalar("SELECT count(*) FROM orders"), 6, "a refused copy leaves the target as it was");
    let hex = dropslot_core::ids::hex(&proof_png);
    let same =
        format!("SELECT count(*) FROM proofs WHERE bytes = decode('{hex}', 'hex') AND size = {}", proof_png.len());
    assert_eq!(target.scalar(&same), 1, "the proof's bytes, exactly");
    let opted_out = "SELECT count(*) FROM notification_recipients WHERE opted_out_at IS NOT NULL";
    assert_eq!(target.scalar(opted_out), 1, "an opt-out survives the move");

    // The target: a server on PostgreSQL, finding the copied clients (no demo client made).
    let (server, base, again) = crate::cli::spawn_serve_with(&pg, &env);
    let server = Serve(server);
    assert!(again.is_none(), "the copied database is not empty");
    let target_http = Client { http, base };
    rt.block_on(async {
        let c = &target_http;
        let mut after = reads(c, &seen, &token, &demo).await;
        let mut before = before;
        to_microseconds(&mut before, seen.endpoint);
        to_microseconds(&mut after, seen.endpoint);
        assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>());
        for (path, was) in &before {
            assert_eq!(&after[path], was, "{path} reads the same after the copy");
        }
        assert_eq!(c.label(&label).await, label_bytes, "a label link serves the same document");
        // The revoked token stays revoked.
        let (status, _, _) = c.call(c.http.get(format!("{}{API}/orders", c.base)).bearer_auth(&revoked)).await;
        assert_eq!(status, 401);
        // A publishable key moves with its origins.
        let slots = format!("{}{API}/slots?text=M5V%203L9&days=1", c.base);
        let req = c.http.get(&slots).bearer_auth(&publishable).header("Origin", "https://shop.example");
        let (status, _, body) = c.call(req).await;
        assert_eq!(status, 200, "{body}");
        // Staff tokens and drivers move too.
        let (status, _, drivers) =
            c.call(c.http.get(format!("{}{API}/ops/drivers", c.base)).bearer_auth(&operator)).await;
        assert_eq!(status, 200, "{drivers}");
        assert_eq!(drivers["object"]["drivers"][0]["id"], driver_id, "{drivers}");
        assert_eq!(drivers["object"]["drivers"][0]["weekdays"], json!(["mon", "fri"]), "{drivers}");
        let (status, _, _) =
            c.call(c.http.get(format!("{}{API}/ops/drivers", c.base)).bearer_auth(&driver_token)).await;
        assert_eq!(status, 403, "a driver token stays a driver token");
        // The published plan reads the same.
        let plan_path = format!("{}{API}/ops/plans/{}", c.base, plan["id"].as_str().unwrap());
        let (status, _, copied) = c.call(c.http.get(plan_path).bearer_auth(&operator)).await;
        assert_eq!(status, 200, "{copied}");
        assert_eq!(copied["object"], plan, "the plan reads the same after the copy");
        // The same key and body: a replay of the copied order.
        let (status, replay, body) = c.post("/requests/sync", &token, &replayed_body, Some(KEY)).await;
        assert_eq!((status, replay), (201, true), "{body}");
        assert_eq!(body, idempotent);
        // New rows get ids after the copied ones.
        let (status, _, e) = c.post("/webhooks", &token, &json!({"url": "http://127.0.0.1:9/other"}), None).await;
        assert_eq!(status, 201, "{e}");
        assert_eq!(e["object"]["id"].as_i64(), Some(seen.endpoint + 1), "{e}");
        let (status, _, o) = c.post("/requests/sync", &token, &request(&[900.0]), None).await;
        assert_eq!(status, 201, "{o}");
        assert!(o["object"]["shipments"][0]["shipment_order_id"].as_i64().unwrap() > max_shipment_order, "{o}");
        let id = o["object"]["unique_id"].as_str().unwrap();
        let read = c.get(&format!("/orders/{id}"), &token).await;
        assert!(read["object"]["shipments"][0]["events"][0]["id"].as_i64().unwrap() > max_event, "{read}");
    });
    assert_eq!(target.scalar("SELECT max(id) FROM orders"), max_order + 1);
    drop(server);
}
