//! The live board (`/ops/live`, CONTRACT §16) over real HTTP on both backends: each
//! published route's progress (served, failed, left) and predicted end, and each kind of
//! alert as the day runs on the injected clock — a driver silent for 15 minutes, a stop
//! taking over three times its service, a stop predicted past its slot. In a real browser at
//! desktop and phone size, checked with axe (screenshots into docs/ops/ with
//! `DROPSLOT_SCREENSHOTS`).

use serde_json::json;

use crate::browser::{Browser, DESKTOP, PHONE};
use crate::common::TestServer;
use crate::dashboard_http::Visitor;
use crate::new_time::{Day, day};

/// Signs `v` in at `/ops` with the operator token.
async fn sign_in(v: &mut Visitor<'_>, token: &str) {
    let form = v.get("/ops/sign-in").await;
    let csrf = form.csrf();
    assert_eq!(v.post("/ops/sign-in", &[("csrf", &csrf), ("token", token)]).await.status, 303);
}

/// The live board at `query`, in a new session (the clock's jumps end an idle one).
async fn board(d: &Day, query: &str) -> crate::dashboard_http::Page {
    let mut v = Visitor::new(&d.s);
    sign_in(&mut v, &d.op).await;
    v.get(&format!("/ops/live{query}")).await
}

/// A route's row as the board shows it.
#[derive(Debug, PartialEq)]
struct Row {
    served: u32,
    failed: u32,
    left: u32,
    planned_end: String,
    predicted_end: String,
    alerts: u32,
}

fn attr(tag: &str, name: &str) -> String {
    let from = tag.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("{name} in {tag}")) + name.len() + 2;
    tag[from..].split('"').next().unwrap().to_string()
}

/// The row of `driver`'s route on the page.
fn row(page: &str, driver: &str) -> Row {
    let tr = page
        .split("<tr id=\"route-")
        .skip(1)
        .find(|r| r.contains(&format!("<td>{driver}</td>")))
        .unwrap_or_else(|| panic!("a row of {driver}: {page}"));
    let tag = tr.split('>').next().unwrap();
    Row {
        served: attr(tag, "data-served").parse().unwrap(),
        failed: attr(tag, "data-failed").parse().unwrap(),
        left: attr(tag, "data-left").parse().unwrap(),
        planned_end: attr(tag, "data-planned"),
        predicted_end: attr(tag, "data-end"),
        alerts: attr(tag, "data-alerts").parse().unwrap(),
    }
}

/// The alerts of `kind` on the page: (driver, text).
fn alerts(page: &str, kind: &str) -> Vec<String> {
    page.split("<li class=\"alert ")
        .skip(1)
        .filter(|a| a.contains(&format!("data-kind=\"{kind}\"")))
        .map(|a| a.split("</li>").next().unwrap().to_string())
        .collect()
}

async fn position(d: &Day, route: usize, key: &str, at: &str, (lat, lng): (f64, f64)) {
    let req =
        d.s.http.post(d.s.url("/driver/positions")).bearer_auth(&d.routes[route].0).header("Idempotency-Key", key);
    let r = d.s.send(req.json(&json!({"lat": lat, "lng": lng, "accuracy_m": 10.0, "at": at}))).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

async fn transition(d: &Day, route: usize, stop: usize, key: &str, body: serde_json::Value) {
    let code = &d.routes[route].1[stop];
    let req = d.s.http.post(d.s.url(&format!("/driver/shipments/{code}/transitions"))).bearer_auth(&d.routes[route].0);
    let r = d.s.send(req.header("Idempotency-Key", key).json(&body)).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn at(s: &TestServer, t: &str) {
    s.app.clock.set(t.parse().unwrap());
}

/// Ana is late (routes[0]), Ben fails his first stop (routes[1]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_board_shows_progress_predicted_ends_and_each_alert() {
    let d = day(TestServer::start().await, 4, None).await;
    let s = &d.s;
    // 13:00: both vans just left; nothing served, the plan's end stands, no alert.
    let page = board(&d, "").await;
    assert_eq!(page.status, 200, "{}", page.body);
    // Reloaded without script: a link, and by itself when the dispatcher asks (never unasked:
    // axe's meta-refresh rule).
    assert!(page.body.contains("id=\"reload\" href=\"/ops/live?depot=YYZ1&amp;date=2026-11-23\""), "{}", page.body);
    assert!(!page.body.contains("http-equiv=\"refresh\""));
    let auto = board(&d, "?auto=1").await.body;
    assert!(
        auto.contains("<meta http-equiv=\"refresh\" content=\"60\">") && auto.contains("id=\"auto-off\""),
        "{auto}"
    );
    for driver in ["Ana", "Ben"] {
        let r = row(&page.body, driver);
        assert_eq!((r.served, r.failed, r.left, r.alerts), (0, 0, 2, 0), "{r:?}");
        assert_eq!(r.predicted_end, r.planned_end, "on time: {r:?}");
    }
    assert!(page.body.contains("id=\"alerts-none\""));

    // 13:16: nobody has reported a position since the start, over 15 minutes ago.
    at(s, "2026-11-23T18:16:00Z");
    let page = board(&d, "").await.body;
    let silent = alerts(&page, "no-position");
    assert_eq!(silent.len(), 2, "{page}");
    assert!(silent.iter().all(|a| a.contains("since 13:00")), "{silent:?}");
    // Ana reports: only Ben is silent.
    position(&d, 0, "p1", "2026-11-23T18:16:00Z", (43.6405, -79.39)).await;
    let page = board(&d, "").await.body;
    let silent = alerts(&page, "no-position");
    assert_eq!(silent.len(), 1, "{page}");
    assert!(silent[0].contains("<strong>Ben</strong>"), "{silent:?}");

    // 14:05: Ana delivers her first stop, Ben's first one fails.
    at(s, "2026-11-23T19:05:00Z");
    let delivered = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]});
    transition(&d, 0, 0, "a1", delivered).await;
    transition(&d, 1, 0, "b1", json!({"to": "failed", "reason": "Nobody home"})).await;
    position(&d, 0, "p2", "2026-11-23T19:05:00Z", (43.6405, -79.39)).await;
    position(&d, 1, "q1", "2026-11-23T19:05:00Z", (43.6405, -79.39)).await;
    let page = board(&d, "").await.body;
    let (ana, ben) = (row(&page, "Ana"), row(&page, "Ben"));
    assert_eq!((ana.served, ana.failed, ana.left), (1, 0, 1), "{ana:?}");
    assert_eq!((ben.served, ben.failed, ben.left), (0, 1, 1), "{ben:?}");
    assert!(alerts(&page, "slow-stop").is_empty(), "{page}");

    // 15:30: Ana has reported where she is, but her second stop, reached long ago, is not
    // served: over three times its service time.
    at(s, "2026-11-23T20:30:00Z");
    position(&d, 0, "p3", "2026-11-23T20:30:00Z", (43.6445, -79.39)).await;
    let page = board(&d, "").await.body;
    let slow = alerts(&page, "slow-stop");
    assert_eq!(slow.len(), 2, "both vans are slow at their stop: {page}");
    assert!(slow.iter().any(|a| a.contains("<strong>Ana</strong>") && a.contains("over three times")), "{slow:?}");
    assert!(alerts(&page, "past-slot").is_empty(), "{page}");

    // 17:50: Ana is 20 km away from her last stop: it is predicted after its slot's end
    // (18:00), and her route's end moves past the plan's.
    at(s, "2026-11-23T22:50:00Z");
    position(&d, 0, "p4", "2026-11-23T22:50:00Z", (43.82, -79.39)).await;
    let page = board(&d, "").await.body;
    let past = alerts(&page, "past-slot");
    assert_eq!(past.len(), 1, "{page}");
    assert!(past[0].contains("<strong>Ana</strong>") && past[0].contains("end at 18:00"), "{past:?}");
    let ana = row(&page, "Ana");
    assert!(ana.predicted_end > ana.planned_end && ana.predicted_end.as_str() > "18:00", "{ana:?}");
    assert!(ana.alerts >= 2, "past the slot and slow: {ana:?}");

    // Served: Ana's route is finished, its alerts gone; her end is when she was done (plus
    // the drive back).
    transition(
        &d,
        0,
        1,
        "a2",
        json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]}),
    )
    .await;
    let page = board(&d, "").await.body;
    let ana = row(&page, "Ana");
    assert_eq!((ana.served, ana.left, ana.alerts), (2, 0, 0), "{ana:?}");
    assert!(ana.predicted_end.as_str() >= "17:50", "{ana:?}");
    assert!(!alerts(&page, "past-slot").iter().any(|a| a.contains("Ana")));
    // Another day's board lists none of these routes; a bad date is the envelope's words.
    let page = board(&d, "?depot=YYZ1&date=2026-11-24").await.body;
    assert!(page.contains("id=\"routes-none\""), "{page}");
    let bad = board(&d, "?date=tomorrow").await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("query.date"), "{}", bad.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_live_board_desktop_and_phone() {
    let d = day(TestServer::start().await, 4, None).await;
    let s = &d.s;
    // Each kind of alert on the page: Ben silent, Ana slow and late.
    at(s, "2026-11-23T19:05:00Z");
    let delivered = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]});
    transition(&d, 0, 0, "a1", delivered).await;
    at(s, "2026-11-23T22:50:00Z");
    position(&d, 0, "p1", "2026-11-23T22:50:00Z", (43.82, -79.39)).await;
    for (size, name) in [(DESKTOP, "live-desktop"), (PHONE, "live-phone")] {
        let b = Browser::start(size).await;
        b.goto(&format!("{}/ops/sign-in", s.base)).await;
        b.fill("#token", &d.op).await;
        b.click("#sign-in button[type=submit]").await;
        b.goto(&format!("{}/ops/live", s.base)).await;
        assert!(b.current_url().await.ends_with("/ops/live"), "{}", b.current_url().await);
        let text = b.text("#alerts").await;
        for words in ["No position from the driver", "over three times", "after its slot"] {
            assert!(text.contains(words), "{words}: {text}");
        }
        assert!(b.text("#routes").await.contains("Ana"));
        b.assert_accessible(name).await;
        if size == PHONE {
            let fits = b.eval("return document.documentElement.scrollWidth <= window.innerWidth + 1").await;
            assert_eq!(fits, json!(true), "{name} overflows the phone's width");
        }
        b.screenshot(name).await;
    }
}
