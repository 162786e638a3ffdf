//! The day's report (CONTRACT §17) on both backends: a published day driven through the driver
//! API under the injected clock — some stops late on purpose, one failed, positions sent —
//! gives exactly the on-time share and ETA figures this test computes from what it saw: the
//! windows the tracking page showed after each step, and when each stop was served.

use serde_json::{Value, json};

use crate::common::{TestServer, assert_envelope};
use crate::driver_api::{DATE, operator};

/// TOR-DT-PM is 14:00–18:00 in Toronto (UTC−5), in Unix milliseconds.
fn slot() -> (i64, i64) {
    (ms("2026-11-23T19:00:00Z"), ms("2026-11-23T23:00:00Z"))
}

fn ms(t: &str) -> i64 {
    t.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

fn ms_of(v: &Value) -> i64 {
    ms(v.as_str().unwrap_or_else(|| panic!("not a time: {v}")))
}

/// Every window the recipients see now (the tracking JSON), by shipment.
async fn shown(s: &TestServer, codes: &[String]) -> Vec<(String, i64, i64)> {
    let mut out = Vec::new();
    for code in codes {
        let res =
            s.http.get(format!("{}/track/{code}", s.base)).header("Accept", "application/json").send().await.unwrap();
        let t: Value = res.json().await.unwrap();
        if let Some(eta) = t.get("eta") {
            out.push((code.clone(), ms_of(&eta["from"]), ms_of(&eta["to"])));
        }
    }
    out
}

/// The great-circle distance, metres (the core's formula, written again to check it).
fn haversine(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (p1, p2) = (a.0.to_radians(), b.0.to_radians());
    let (dp, dl) = (p2 - p1, (b.1 - a.1).to_radians());
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6_371_008.8 * h.sqrt().min(1.0).asin()
}

/// A step of the drive: the clock, a position sent then, the stop served then (its index in
/// the route, and whether it failed).
type Step<'a> = (&'a str, (f64, f64), Option<(usize, bool)>);

struct Day {
    s: TestServer,
    op: String,
    /// The route's shipments in visiting order.
    order: Vec<String>,
    /// What the recipients were shown: (at, shipment, from, to), oldest first.
    told: Vec<(i64, String, i64, i64)>,
    /// When each served stop was served, and whether it failed.
    served: Vec<(String, i64, bool)>,
    positions: Vec<(i64, (f64, f64))>,
    started_ms: i64,
}

impl Day {
    async fn observe(&mut self) {
        let now = self.s.app.clock.now().as_millisecond();
        for (code, from, to) in shown(&self.s, &self.order).await {
            self.told.push((now, code, from, to));
        }
    }

    fn at(&self, t: &str) {
        self.s.app.clock.set(t.parse().unwrap());
    }
}

/// Six drop-offs on one route, published at 07:00 Toronto time, started at 13:30 and driven
/// through the afternoon: two served after the slot closed, one failed.
async fn driven_day() -> Day {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (ana, codes) = crate::eta::ana_and_orders(&s, &op, &live, 6).await;
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["object"]["unassigned"], json!([]), "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    let route = s.get("/driver/route", &ana).await.body["object"].clone();
    let stops = route["routes"][0]["stops"].as_array().unwrap().clone();
    let order: Vec<String> =
        stops.iter().map(|st| st["shipments"][0]["unique_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(order.len(), 6, "{route}");
    let mut day = Day { s, op, order, told: Vec::new(), served: Vec::new(), positions: Vec::new(), started_ms: 0 };
    day.observe().await;

    for code in &codes {
        day.s.ops_moves(&ops, code, &["to_pick_up", "picked_up", "processing"]).await;
    }
    let all: Vec<String> = stops
        .iter()
        .flat_map(|st| st["shipments"][0]["parcels"].as_array().unwrap().clone())
        .map(|p| p["pick_up_code"].as_str().unwrap().to_string())
        .collect();
    day.at("2026-11-23T18:30:00Z");
    day.started_ms = ms("2026-11-23T18:30:00Z");
    let req = day.s.http.post(day.s.url("/driver/route/start")).bearer_auth(&ana).header("Idempotency-Key", "start");
    assert_eq!(day.s.send(req.json(&json!({"scanned": all}))).await.status, 200);
    day.observe().await;

    // The first stop is served five minutes into the window shown when the route started
    // (more than 30 minutes before): an ETA kept.
    let (_, _, from, _) = day.told.iter().rfind(|(_, c, _, _)| *c == day.order[0]).unwrap().clone();
    let first = jiff::Timestamp::from_millisecond((from + 5 * 60_000).max(ms("2026-11-23T18:51:00Z"))).unwrap();
    assert!(first < "2026-11-23T20:00:00Z".parse().unwrap(), "{first}");
    let first = first.to_string();
    // (clock, a position sent then, the stop served then: index, failed).
    let steps: [Step; 8] = [
        ("2026-11-23T18:50:00Z", (43.640, -79.388), None),
        (first.as_str(), (43.637, -79.390), Some((0, false))),
        ("2026-11-23T20:10:00Z", (43.641, -79.387), Some((1, false))),
        ("2026-11-23T20:40:00Z", (43.645, -79.384), Some((2, true))),
        ("2026-11-23T21:30:00Z", (43.648, -79.390), Some((3, false))),
        ("2026-11-23T22:15:00Z", (43.650, -79.389), None),
        ("2026-11-23T23:20:00Z", (43.653, -79.386), Some((4, false))),
        ("2026-11-23T23:40:00Z", (43.657, -79.390), Some((5, false))),
    ];
    for (k, (t, (lat, lng), stop)) in steps.into_iter().enumerate() {
        day.at(t);
        let req = day.s.http.post(day.s.url("/driver/positions")).bearer_auth(&ana);
        let body = json!({"lat": lat, "lng": lng, "accuracy_m": 8.0, "at": t});
        let r = day.s.send(req.header("Idempotency-Key", format!("p{k}")).json(&body)).await;
        assert_eq!(r.status, 201, "{}", r.body);
        day.positions.push((ms(t), (lat, lng)));
        day.observe().await;
        if let Some((i, failed)) = stop {
            let code = day.order[i].clone();
            let body = if failed {
                json!({"to": "failed", "reason": "Nobody home"})
            } else {
                json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]})
            };
            let req = day.s.http.post(day.s.url(&format!("/driver/shipments/{code}/transitions"))).bearer_auth(&ana);
            let r = day.s.send(req.header("Idempotency-Key", format!("s{k}")).json(&body)).await;
            assert_eq!(r.status, 200, "{}", r.body);
            day.served.push((code, ms(t), failed));
            day.observe().await;
        }
    }
    day
}

/// The figures this test expects, from what it saw: (on time, served, told, kept, median
/// error in minutes).
fn expected(day: &Day) -> (u32, u32, u32, u32, Option<f64>) {
    let (open, close) = slot();
    let (mut on_time, mut told, mut kept, mut errors) = (0, 0, 0, Vec::new());
    for (code, t, _) in &day.served {
        on_time += u32::from(*t >= open && *t <= close);
        // The window shown last at least 30 minutes before the stop was served.
        let w = day.told.iter().rfind(|(at, c, _, _)| c == code && *at <= t - 30 * 60_000);
        if let Some((_, _, from, to)) = w {
            told += 1;
            kept += u32::from(t >= from && t <= to);
            errors.push((2 * t - from - to).abs() / 2);
        }
    }
    errors.sort_unstable();
    let n = errors.len();
    let median = match n {
        0 => None,
        _ if n % 2 == 1 => Some(errors[n / 2] as f64),
        _ => Some((errors[n / 2 - 1] + errors[n / 2]) as f64 / 2.0),
    };
    (on_time, day.served.len() as u32, told, kept, median.map(|m| (m / 6_000.0).round() / 10.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The figures are exact: the same operations on the same integers as the service's.
#[allow(clippy::float_cmp)]
async fn the_days_report_gives_the_figures_of_the_day_as_driven_as_json_and_csv() {
    let day = driven_day().await;
    let s = &day.s;
    let (on_time, served, told, kept, median) = expected(&day);
    assert_eq!((on_time, served), (4, 6), "two stops served after 18:00 local, by design");
    assert!(told >= 5, "windows were shown hours ahead: {:?}", day.told);
    assert!(kept >= 1 && kept < told, "some kept, some not: {kept} of {told}");

    let r = s.get(&format!("/ops/reports/day?date={DATE}&depot=YYZ1"), &day.op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let report = &r.body["object"];
    let total = &report["days"][0]["totals"];
    assert_eq!(report["days"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(
        (total["shipments"].as_u64(), total["delivered"].as_u64(), total["failed"].as_u64()),
        (Some(6), Some(5), Some(1))
    );
    assert_eq!(total["failed_by_reason"], json!({"Nobody home": 1}));
    assert_eq!(total["returned"], 0);
    assert_eq!((total["on_time"].as_u64(), total["served"].as_u64()), (Some(u64::from(on_time)), Some(6)));
    assert_eq!(total["on_time_share"].as_f64(), Some(f64::from(on_time) / f64::from(served)));
    assert_eq!(
        (total["eta_told"].as_u64(), total["eta_kept"].as_u64()),
        (Some(u64::from(told)), Some(u64::from(kept)))
    );
    assert_eq!(total["eta_kept_share"].as_f64(), Some(f64::from(kept) / f64::from(told)));
    assert_eq!(total["eta_median_error_min"].as_f64(), median);
    let local = |t: i64| {
        jiff::Timestamp::from_millisecond(t).unwrap().to_zoned(jiff::tz::TimeZone::get("America/Toronto").unwrap())
    };
    assert_eq!(
        total["first_stop_at"],
        local(day.served[0].1).timestamp().display_with_offset(local(day.served[0].1).offset()).to_string()
    );
    assert_eq!(total["last_stop_at"], "2026-11-23T18:40:00-05:00");
    // Driven: the positions from the route's start on, great-circle.
    let driven: f64 =
        day.positions.windows(2).filter(|w| w[0].0 >= day.started_ms).map(|w| haversine(w[0].1, w[1].1)).sum();
    let got = total["driven_distance_m"].as_i64().unwrap();
    assert!((got as f64 - driven).abs() <= 1.0, "driven {got} m, positions say {driven}");
    assert_eq!(total["driven_duration_s"], (ms("2026-11-23T23:40:00Z") - day.started_ms) / 1000);
    assert!(total["planned_distance_m"].as_i64().unwrap() > 0 && total["planned_duration_s"].as_i64().unwrap() > 0);
    // One route, one driver, one zone, one slot: each row holds the whole day.
    for group in ["routes", "drivers", "zones", "slots"] {
        let rows = report["days"][0][group].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{group}: {report}");
        assert_eq!(
            (rows[0]["on_time"].clone(), rows[0]["eta_kept"].clone()),
            (total["on_time"].clone(), total["eta_kept"].clone())
        );
    }
    assert_eq!(report["days"][0]["slots"][0]["key"], "14:00–18:00");
    assert_eq!(report["totals"]["on_time"], total["on_time"]);

    // The same rows as CSV.
    let res = s
        .http
        .get(s.url(&format!("/ops/reports/day?date={DATE}&depot=YYZ1")))
        .bearer_auth(&day.op)
        .header("Accept", "text/csv")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let csv = res.text().await.unwrap();
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert!(lines[0].starts_with("date,group,key,shipments,delivered,failed,failed_by_reason,"), "{csv}");
    let d = &report["days"][0];
    let json_rows: Vec<&Value> = std::iter::once(&d["totals"])
        .chain(["routes", "drivers", "zones", "slots", "hours"].iter().flat_map(|g| d[*g].as_array().unwrap()))
        .chain(std::iter::once(&report["totals"]))
        .collect();
    assert_eq!(lines.len() - 1, json_rows.len(), "{csv}");
    let header: Vec<&str> = lines[0].split(',').collect();
    for (line, row) in lines[1..].iter().zip(json_rows) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        for (name, cell) in header.iter().zip(cells) {
            let want = match &row[*name] {
                Value::Null => String::new(),
                Value::String(v) => v.clone(),
                Value::Object(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; "),
                v => v.to_string(),
            };
            assert_eq!(cell, want, "column {name} of {line}");
        }
    }

    // Today's figures as gauges on /metrics, by depot (the clock is still on the day).
    let metrics = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    let gauge = |name: &str| {
        let prefix = format!("dropslot_{name}{{depot=\"YYZ1\"}} ");
        let line = metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{prefix}: {metrics}"));
        line[prefix.len()..].parse::<f64>().unwrap()
    };
    assert_eq!(gauge("report_shipments"), 6.0);
    assert_eq!(gauge("report_failed"), 1.0);
    assert_eq!(gauge("report_on_time_ratio"), f64::from(on_time) / f64::from(served));
    assert_eq!(gauge("report_eta_kept_ratio"), f64::from(kept) / f64::from(told));
    assert_eq!(Some(gauge("report_eta_error_median_minutes")), median);

    // A range: one row a day; the failed stop's re-attempt day has no plan yet.
    let r = s.get(&format!("/ops/reports/day?from={DATE}&to=2026-11-24&depot=YYZ1"), &day.op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let days = r.body["object"]["days"].as_array().unwrap();
    assert_eq!(days.iter().map(|d| d["date"].as_str().unwrap()).collect::<Vec<_>>(), [DATE, "2026-11-24"]);
    assert_eq!(days[1]["totals"]["shipments"], 0);
    assert_eq!(r.body["object"]["totals"]["eta_median_error_min"].as_f64(), median);
    assert_eq!(r.body["object"]["totals"]["on_time"], on_time);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_refuses_bad_input_with_the_envelope_and_other_tokens() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    for (query, path) in [
        ("date=2026-13-01&depot=YYZ1", "query.date"),
        ("date=23-11-2026&depot=YYZ1", "query.date"),
        ("depot=YYZ1", "query.date"),
        ("date=2026-11-23", "query.depot"),
        ("date=2026-11-23&depot=NOPE", "query.depot"),
        ("from=2026-01-01&to=2026-06-01&depot=YYZ1", "query.to"),
        ("from=2026-02-01&to=2026-01-01&depot=YYZ1", "query.to"),
        ("from=2026-01-01&depot=YYZ1", "query.to"),
        ("date=2026-11-23&from=2026-11-23&to=2026-11-24&depot=YYZ1", "query.date"),
        ("date=2026-11-23&depot=YYZ1&zone=x", "query.zone"),
        ("date=2026-11-23&depot=YYZ1&depot=YYZ1", "query.depot"),
    ] {
        let r = s.get(&format!("/ops/reports/day?{query}"), &op).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at(path).is_empty(), "{query}: {}", r.body);
    }
    // 93 days is the most a report covers.
    assert_eq!(s.get("/ops/reports/day?from=2026-01-01&to=2026-04-03&depot=YYZ1", &op).await.status, 200);
    assert_envelope(&s.get("/ops/reports/day?from=2026-01-01&to=2026-04-04&depot=YYZ1", &op).await, 422);
    let r = s.send(s.http.get(s.url("/ops/reports/day?date=2026-11-23&depot=YYZ1"))).await;
    assert_envelope(&r, 401);
    for token in [&live, &ops] {
        assert_envelope(&s.get("/ops/reports/day?date=2026-11-23&depot=YYZ1", token).await, 403);
    }
}

/// Signs the browser in at `/ops` with the operator's token, starting from `path`.
async fn browser_sign_in(b: &crate::browser::Browser, s: &TestServer, token: &str, path: &str) {
    b.goto(&format!("{}{path}", s.base)).await;
    assert!(b.current_url().await.ends_with("/ops/sign-in"), "signed out: sent to sign in");
    b.fill("#token", token).await;
    b.click("#sign-in button[type=submit]").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_the_report_page_draws_its_charts_on_the_server_at_desktop_and_phone_width() {
    use crate::browser::{Browser, DESKTOP, PHONE};
    let day = driven_day().await;
    let s = &day.s;
    let (on_time, served, told, kept, _) = expected(&day);
    let share =
        |part: u32, whole: u32| format!("{:.0}% ({part} of {whole})", f64::from(part) / f64::from(whole) * 100.0);
    let page = format!("/ops/reports?depot=YYZ1&date={DATE}");
    let b = Browser::start(DESKTOP).await;
    browser_sign_in(&b, s, &day.op, &page).await;
    b.goto(&format!("{}{page}", s.base)).await;
    b.assert_accessible("reports-desktop").await;
    b.screenshot("reports-desktop").await;
    assert_eq!(b.text("#sum-shipments").await, "6");
    assert_eq!(b.text("#sum-on-time").await, share(on_time, served));
    assert_eq!(b.text("#sum-eta-kept").await, share(kept, told));
    // Three charts, drawn by the server: one bar a slot, one a reason, one an hour with a
    // told window; each named for screen readers.
    assert_eq!(b.count("svg.chart").await, 3);
    assert_eq!(b.count("#chart-on-time rect").await, 1);
    assert_eq!(b.count("#chart-failures rect").await, 1);
    assert!(b.text("#chart-failures").await.contains("Nobody home"));
    assert!(b.count("#chart-eta rect").await >= 1);
    assert_eq!(b.attr("#chart-eta", "role").await, "img");
    assert_eq!(b.count("#routes tbody tr").await, 1);
    // Served without script: the same page over plain HTTP holds the charts.
    let html = b.eval("return document.documentElement.outerHTML").await;
    assert!(html.as_str().unwrap().contains("<title id=\"chart-on-time-t\">On time by slot</title>"));

    let p = Browser::start(PHONE).await;
    browser_sign_in(&p, s, &day.op, &page).await;
    p.goto(&format!("{}{page}", s.base)).await;
    p.assert_accessible("reports-phone").await;
    p.screenshot("reports-phone").await;
    let fits = p.eval("return document.documentElement.scrollWidth <= window.innerWidth + 1").await;
    assert_eq!(fits, json!(true), "the report overflows the phone's width");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_page_needs_a_session_and_names_a_bad_field() {
    use crate::dashboard_http::Visitor;
    use reqwest::StatusCode;
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let mut v = Visitor::new(&s);
    let r = v.get("/ops/reports").await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/ops/sign-in"));
    let form = v.get("/ops/sign-in").await;
    let csrf = form.csrf();
    let r = v.post("/ops/sign-in", &[("csrf", &csrf), ("token", &op)]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    // Today at the first depot by default: no route yet, every table says so.
    let r = v.get("/ops/reports").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("Report: ") && r.body.contains("(YYZ1), 2026-11-23"), "{}", r.body);
    assert!(r.body.contains("No published delivery route on 2026-11-23.") && r.body.contains("Nothing to show yet."));
    for (query, field) in [("date=2026-02-30", "query.date"), ("depot=NOPE", "query.depot"), ("week=1", "query.week")] {
        let r = v.get(&format!("/ops/reports?{query}")).await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{query}: {}", r.body);
        assert!(r.body.contains(field), "{query}: {}", r.body);
    }
}
