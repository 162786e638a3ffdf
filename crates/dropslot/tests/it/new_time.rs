//! "New time" and "next stop" messages (CONTRACT §16) end to end on both backends: a late
//! driver's progress and positions re-time the route; the recipients whose live window left
//! the one they were last told get one e-mail over real SMTP (two at most a day), the others
//! none; a replay sends nothing more; `next_stop`, when switched on, says "you are next".

use serde_json::{Value, json};

use crate::common::{PICK_UP, TestServer};
// A driver of depot YYZ1 (a van of four parcels) has room for two of the orders below.
use crate::driver_api::{DATE, driver, operator};
use crate::notifications::{Smtp, start};
use crate::receiver::Receiver;

/// A live order of two parcels to `r{i}@example.com` (and a phone: its SMS go to the receiver); its code.
async fn order(s: &TestServer, live: &str, i: usize) -> String {
    let body = json!({
        "pick_up_address": {"text": PICK_UP},
        "drop_offs": [{
            "address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "lat": 43.640 + 0.004 * i as f64,
                        "lng": -79.39, "person_name": format!("Receiver {i}"),
                        "person_email": format!("r{i}@example.com"), "person_phone": "+1 416 555 0100"},
            "scheduled_date": DATE, "time_slot_code": "TOR-DT-PM",
            "parcels": [{"unit": "g", "values": 1000}, {"unit": "g", "values": 1000}]
        }]
    });
    let r = s.post("/requests/sync", live, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()
}

/// The day as the tests below need it: `n` orders, two drivers, a published plan, every
/// route started at 13:00 local. Each driver's token and its stops' codes in route order.
pub(crate) struct Day {
    pub s: TestServer,
    pub live: String,
    pub op: String,
    pub routes: Vec<(String, Vec<String>)>,
}

pub(crate) async fn day(s: TestServer, n: usize, settings: Option<Value>) -> Day {
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    if let Some(body) = settings {
        assert_eq!(
            s.send(s.http.put(s.url("/notifications/settings")).bearer_auth(&live).json(&body)).await.status,
            200
        );
    }
    let drivers = [driver(&s, &op, "Ana").await, driver(&s, &op, "Ben").await];
    let mut codes = Vec::new();
    for i in 0..n {
        codes.push(order(&s, &live, i).await);
    }
    let body = json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1});
    let r = s.post("/ops/plans", &op, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["object"]["unassigned"], json!([]), "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    for code in &codes {
        s.ops_moves(&ops, code, &["to_pick_up", "picked_up", "processing"]).await;
    }
    s.app.clock.set("2026-11-23T18:00:00Z".parse().unwrap());
    let mut routes = Vec::new();
    for (_, token) in drivers {
        let day = s.get("/driver/route", &token).await.body["object"].clone();
        let Some(stops) = day["routes"][0]["stops"].as_array().cloned() else { continue };
        let order: Vec<String> =
            stops.iter().map(|st| st["shipments"][0]["unique_id"].as_str().unwrap().to_string()).collect();
        let scanned: Vec<String> = stops
            .iter()
            .flat_map(|st| st["shipments"][0]["parcels"].as_array().unwrap().clone())
            .map(|p| p["pick_up_code"].as_str().unwrap().to_string())
            .collect();
        let req = s.http.post(s.url("/driver/route/start")).bearer_auth(&token).header("Idempotency-Key", "start");
        assert_eq!(s.send(req.json(&json!({"scanned": scanned}))).await.status, 200);
        routes.push((token, order));
    }
    assert_eq!(routes.len(), 2, "both vans have stops");
    Day { s, live, op, routes }
}

async fn window(s: &TestServer, code: &str) -> (jiff::Timestamp, jiff::Timestamp) {
    let res = s.http.get(format!("{}/track/{code}", s.base)).header("Accept", "application/json").send().await.unwrap();
    let t: Value = res.json().await.unwrap();
    let at = |v: &Value| v.as_str().unwrap_or_else(|| panic!("{t}")).parse::<jiff::Timestamp>().unwrap();
    (at(&t["eta"]["from"]), at(&t["eta"]["to"]))
}

/// The shipment's listed e-mails of `trigger` (each has its SMS beside it).
async fn listed(s: &TestServer, live: &str, code: &str, trigger: &str) -> Vec<Value> {
    let r = s.get(&format!("/shipments/{code}/notifications"), live).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"]["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["trigger"] == trigger && n["channel"] == "email")
        .cloned()
        .collect()
}

async fn position(s: &TestServer, token: &str, key: &str, at: &str, (lat, lng): (f64, f64)) -> u16 {
    let req = s.http.post(s.url("/driver/positions")).bearer_auth(token).header("Idempotency-Key", key);
    s.send(req.json(&json!({"lat": lat, "lng": lng, "accuracy_m": 10.0, "at": at}))).await.status.as_u16()
}

async fn deliver(s: &TestServer, token: &str, code: &str, key: &str) -> u16 {
    let req = s.http.post(s.url(&format!("/driver/shipments/{code}/transitions"))).bearer_auth(token);
    let body = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]});
    s.send(req.header("Idempotency-Key", key).json(&body)).await.status.as_u16()
}

fn new_times<'a>(mail: &'a [Value], code_email: &str) -> Vec<&'a Value> {
    mail.iter()
        .filter(|m| m["rcpt_tos"][0] == code_email && m["subject"].as_str().unwrap().contains("new arrival time"))
        .collect()
}

/// `HH:MM` local (UTC−5 in November) of a time.
fn local(t: jiff::Timestamp) -> String {
    t.to_zoned(jiff::tz::TimeZone::get("America/Toronto").unwrap()).strftime("%H:%M").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_driver_sends_one_new_time_to_the_stops_that_moved_two_at_most() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let d = day(start(&smtp, &sms).await, 4, None).await;
    let s = &d.s;
    // Scheduled and out-for-delivery: two e-mails per order.
    smtp.wait_for(8, "scheduled and out for delivery").await;
    let recipient = |code: &str| -> String {
        let mails = smtp.messages();
        let m = mails
            .iter()
            .find(|m| m["text"].as_str().unwrap_or_default().contains(&format!("/track/{code}")))
            .unwrap_or_else(|| panic!("a message of {code}"));
        m["rcpt_tos"][0].as_str().unwrap().to_string()
    };
    let (late_token, late) = (&d.routes[0].0, d.routes[0].1.clone());
    let (on_time_token, on_time) = (&d.routes[1].0, d.routes[1].1.clone());
    let told: Vec<_> = {
        let mut w = Vec::new();
        for c in &late {
            w.push(window(s, c).await);
        }
        w
    };
    // The on-time van serves its first stop on time and reports where it is: its next stop
    // stays in its window, and nobody on it hears of a new time.
    s.app.clock.set("2026-11-23T19:05:00Z".parse().unwrap());
    assert_eq!(deliver(s, on_time_token, &on_time[0], "b1").await, 200);
    s.app.clock.set("2026-11-23T19:06:00Z".parse().unwrap());
    assert_eq!(position(s, on_time_token, "q1", "2026-11-23T19:06:00Z", (43.6405, -79.39)).await, 201);
    // The late van serves its first stop an hour after the slot opened: the second stop's
    // window moves past the one told at the start.
    s.app.clock.set("2026-11-23T20:00:00Z".parse().unwrap());
    assert_eq!(deliver(s, late_token, &late[0], "a1").await, 200);
    let moved = window(s, &late[1]).await;
    assert!(moved.0 > told[1].1, "the window left the told one: {moved:?} vs {:?}", told[1]);
    // Enqueued in the re-timing's transaction: listed once the request answered.
    assert_eq!(listed(s, &d.live, &late[1], "new_time").await.len(), 1);
    // Scheduled and out for delivery (8), two delivered, one new time.
    let mail = smtp.wait_for(11, "the first new time").await;
    let to = recipient(&late[1]);
    let first = new_times(&mail, &to);
    assert_eq!(first.len(), 1, "{mail:?}");
    let text = first[0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("between {} and {}", local(moved.0), local(moved.1))), "{text}");
    for code in [&late[0], &on_time[0], &on_time[1]] {
        assert!(listed(s, &d.live, code, "new_time").await.is_empty(), "{code} did not move");
    }

    // The same position twice (a replay by its key) and the same progress replayed: nothing.
    let at = "2026-11-23T20:00:30Z";
    assert_eq!(position(s, late_token, "p1", at, (43.6405, -79.39)).await, 201);
    assert_eq!(position(s, late_token, "p1", at, (43.6405, -79.39)).await, 201);
    assert_eq!(deliver(s, late_token, &late[0], "a1").await, 200);
    assert_eq!(listed(s, &d.live, &late[1], "new_time").await.len(), 1, "nothing more");

    // Later still: a second new time.
    s.app.clock.set("2026-11-23T21:30:00Z".parse().unwrap());
    assert_eq!(position(s, late_token, "p2", "2026-11-23T21:30:00Z", (43.6405, -79.39)).await, 201);
    let second = window(s, &late[1]).await;
    assert!(second.0 > moved.1, "{second:?} vs {moved:?}");
    assert_eq!(listed(s, &d.live, &late[1], "new_time").await.len(), 2);
    let mail = smtp.wait_for(12, "the second new time").await;
    assert_eq!(new_times(&mail, &to).len(), 2);
    // And a third move: no more than two a day.
    s.app.clock.set("2026-11-23T22:45:00Z".parse().unwrap());
    assert_eq!(position(s, late_token, "p3", "2026-11-23T22:45:00Z", (43.6405, -79.39)).await, 201);
    let third = window(s, &late[1]).await;
    assert!(third.0 > second.1, "it moved again: {third:?} vs {second:?}");
    assert_eq!(listed(s, &d.live, &late[1], "new_time").await.len(), 2, "two at most");
    assert!(listed(s, &d.live, &on_time[1], "new_time").await.is_empty());
    // A message queued after the third move would be on its way before this delivered one:
    // once it arrives, the count of new times is final.
    assert_eq!(deliver(s, on_time_token, &on_time[1], "b2").await, 200);
    let mail = smtp.wait_for(13, "the last delivered e-mail").await;
    assert_eq!(mail.iter().filter(|m| m["subject"].as_str().unwrap().contains("new arrival time")).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_stop_when_switched_on_says_you_are_next_once() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let on = json!({"sender_name": "Corner Shop", "email": true, "sms": true,
        "triggers": {"scheduled": true, "out_for_delivery": true, "delivered": true, "failed": true, "next_stop": true}});
    let d = day(start(&smtp, &sms).await, 4, Some(on)).await;
    let s = &d.s;
    smtp.wait_for(8, "scheduled and out for delivery").await;
    let (token, stops) = (&d.routes[0].0, d.routes[0].1.clone());
    // Nothing is "next" before a stop is served (the van is on its way from the depot).
    assert!(listed(s, &d.live, &stops[0], "next_stop").await.is_empty());
    s.app.clock.set("2026-11-23T19:05:00Z".parse().unwrap());
    assert_eq!(deliver(s, token, &stops[0], "a1").await, 200);
    let next = listed(s, &d.live, &stops[1], "next_stop").await;
    assert_eq!(next.len(), 1, "{next:?}");
    // Delivered e-mail of the first stop, next-stop e-mail of the second.
    let mail = smtp.wait_for(10, "delivered and next stop").await;
    let nexts: Vec<_> = mail.iter().filter(|m| m["subject"].as_str().unwrap().contains("next stop")).collect();
    assert_eq!(nexts.len(), 1, "{mail:?}");
    let text = nexts[0]["text"].as_str().unwrap();
    assert!(
        text.contains("you are the driver's next stop, in about") && text.contains(&format!("/track/{}", stops[1]))
    );
    // A position later: still the next stop, told once.
    assert_eq!(position(s, token, "p1", "2026-11-23T19:06:00Z", (43.6405, -79.39)).await, 201);
    assert_eq!(listed(s, &d.live, &stops[1], "next_stop").await.len(), 1);
    // The other van's stops were not next after a served stop.
    for code in &d.routes[1].1 {
        assert!(listed(s, &d.live, code, "next_stop").await.is_empty());
    }
}

/// Off by default: a client that never switched it on gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_stop_is_off_by_default() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let d = day(start(&smtp, &sms).await, 4, None).await;
    let s = &d.s;
    let (token, stops) = (&d.routes[0].0, d.routes[0].1.clone());
    s.app.clock.set("2026-11-23T19:05:00Z".parse().unwrap());
    assert_eq!(deliver(s, token, &stops[0], "a1").await, 200);
    let next = listed(s, &d.live, &stops[1], "next_stop").await;
    assert_eq!(next.len(), 1, "recorded, not sent: {next:?}");
    assert_eq!(next[0]["state"], "disabled");
    let _ = &d.op;
}

/// Eight re-timings of one route at once, each seeing the same moved windows (as two
/// processes re-timing after the same progress would): one `new_time` per shipment, one told
/// window. On PostgreSQL they run on their own connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_retimings_enqueue_one_new_time_per_shipment() {
    let d = day(TestServer::start().await, 4, None).await;
    let s = &d.s;
    let (token, stops) = (&d.routes[0].0, d.routes[0].1.clone());
    let route = s.get("/driver/route", token).await.body["object"]["routes"][0]["id"].as_str().unwrap().to_string();
    let etas = s.app.store.route_etas(&route).await.unwrap();
    assert_eq!(etas.len(), stops.len(), "{etas:?}");
    let two_hours: i64 = 2 * 3_600_000;
    let moved: Vec<(String, dropslot_store::StoredEta)> = etas
        .into_iter()
        .map(|(u, e)| {
            let e = dropslot_store::StoredEta {
                arrival_ms: e.arrival_ms + two_hours,
                from_ms: e.from_ms + two_hours,
                to_ms: e.to_ms + two_hours,
                ..e
            };
            (u, e)
        })
        .collect();
    let now = s.app.clock.now();
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let (app, route, moved) = (s.app.clone(), route.clone(), moved.clone());
            tokio::spawn(async move { app.store.save_etas(&route, moved, Vec::new(), now).await })
        })
        .collect();
    for run in runs {
        run.await.unwrap().unwrap();
    }
    for code in &stops {
        let rows = listed(s, &d.live, code, "new_time").await;
        assert_eq!(rows.len(), 1, "{code}: {rows:?}");
        // No channel configured: recorded as such, never sent.
        assert_eq!(rows[0]["state"], "not_configured");
    }
    // The windows stored are the moved ones: the tracking page shows them.
    let (from, _) = window(s, &stops[0]).await;
    assert_eq!(from.as_millisecond(), moved.iter().find(|(u, _)| *u == stops[0]).unwrap().1.from_ms);
}
