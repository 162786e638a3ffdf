//! When a delivery fails (CONTRACT §15) through the API, on the suite's backend: the policy per
//! client and mode, the re-attempt booked in the failure's transaction, returns and their
//! failures, and the merchant's decisions with their errors and races. The clock is pinned to
//! Monday 2026-11-23, 07:00 in Toronto: the order is for today, a re-attempt for Tuesday.

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestServer, assert_envelope, request};

/// A live order of `live`'s client, moved out for delivery: its tracking code.
async fn out_for_delivery(s: &TestServer, live: &str, ops: &str) -> String {
    let r = s.post("/requests/sync", live, &request(&[500.0])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let tracking = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    for to in ["to_pick_up", "picked_up", "processing", "in_transit"] {
        let r = s.ops_move(ops, &tracking, &json!({"to": to})).await;
        assert_eq!(r.status, 200, "{to}: {}", r.body);
    }
    tracking
}

async fn fail(s: &TestServer, ops: &str, tracking: &str) -> Value {
    let r = s.ops_move(ops, tracking, &json!({"to": "failed", "reason": "Nobody at home"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"].clone()
}

fn slot_of(o: &Value) -> (String, String) {
    let d = &o["drop_off_shipment"];
    (d["scheduled_date"].as_str().unwrap().to_string(), d["time_slot"]["code"].as_str().unwrap_or_default().to_string())
}

fn statuses(o: &Value) -> Vec<(String, String)> {
    o["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["status"].as_str().unwrap().to_string(), e["actor"].as_str().unwrap().to_string()))
        .collect()
}

/// The live drop-off fill of a slot on a date (stops), from the admin API.
async fn stops_in(s: &TestServer, date: &str, slot: &str) -> i64 {
    let r = s.get(&format!("/admin/capacity?date={date}"), ADMIN_TOKEN).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["time_slot_code"] == slot && row["zone"] == "TOR-DT")
        .map_or(0, |row| row["fill"]["stops"].as_i64().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_is_each_clients_in_each_mode() {
    let s = TestServer::start().await;
    let (_, test, live, _) = s.new_client("Maple Goods").await;
    let r = s.get("/attempts/settings", &live).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"], json!({"max_attempts": 3, "after_failure": "reattempt", "max_return_attempts": 2}));
    let hold = json!({"max_attempts": 2, "after_failure": "hold", "max_return_attempts": 1});
    let put = |token: &str, body: &Value| s.send(s.http.put(s.url("/attempts/settings")).bearer_auth(token).json(body));
    assert_eq!(put(&live, &hold).await.status, 200);
    assert_eq!(s.get("/attempts/settings", &live).await.body["object"], hold);
    assert_eq!(s.get("/attempts/settings", &test).await.body["object"]["after_failure"], "reattempt", "test is apart");
    let r = put(&live, &json!({"max_attempts": 0, "after_failure": "hold", "max_return_attempts": 11})).await;
    assert_envelope(&r, 422);
    assert!(!r.error_at("max_attempts").is_empty() && !r.error_at("max_return_attempts").is_empty());
    let r = put(&live, &json!({"max_attempts": 2, "after_failure": "shrug", "max_return_attempts": 1})).await;
    assert!(r.status == 400 || r.status == 422, "{}", r.body);
    let r = put(&live, &json!({"max_attempts": 2, "after_failure": "hold", "max_return_attempts": 1, "x": 1})).await;
    assert_envelope(&r, 400);
    assert_eq!(s.get("/attempts/settings", &live).await.body["object"], hold, "a refused PUT changes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_rebooked_on_the_next_operating_day_and_delivered_then() {
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let tracking = out_for_delivery(&s, &live, &ops).await;
    let before = stops_in(&s, "2026-11-24", "TOR-DT-PM").await;
    let o = fail(&s, &ops, &tracking).await;
    assert_eq!(o["status"], "to_attempt", "{o}");
    assert_eq!(slot_of(&o), ("2026-11-24".into(), "TOR-DT-PM".into()), "Tuesday's first slot with room");
    let events = statuses(&o);
    let n = events.len();
    assert_eq!(events[n - 2], ("failed".into(), "ops".into()));
    assert_eq!(events[n - 1], ("to_attempt".into(), "system".into()));
    assert!(o["events"][n - 1]["reason"].as_str().unwrap().contains("2026-11-24"), "{o}");
    assert_eq!(o["attempts"], 1);
    assert_eq!(stops_in(&s, "2026-11-24", "TOR-DT-PM").await, before + 1, "the re-attempt took a place");
    // Out again on Tuesday, delivered: the second attempt.
    assert_eq!(s.ops_move(&ops, &tracking, &json!({"to": "in_transit"})).await.status, 200);
    let proof = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "J. Doe"}]});
    let r = s.ops_move(&ops, &tracking, &proof).await;
    assert_eq!(
        (r.body["object"]["status"].as_str(), r.body["object"]["attempts"].as_i64()),
        (Some("delivered"), Some(2))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_failures_return_it_and_a_return_failed_twice_is_cancelled() {
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let tracking = out_for_delivery(&s, &live, &ops).await;
    let mut dates = Vec::new();
    for attempt in 1..=3 {
        let o = fail(&s, &ops, &tracking).await;
        if attempt < 3 {
            assert_eq!(o["status"], "to_attempt");
            dates.push(slot_of(&o).0);
            assert_eq!(s.ops_move(&ops, &tracking, &json!({"to": "in_transit"})).await.status, 200);
        } else {
            assert_eq!(o["status"], "return_scheduled", "{o}");
            let ret = &o["return_stop"];
            assert_eq!(ret["failed_attempts"], 0);
            assert!(ret["time_slot_code"].as_str().is_some_and(|c| !c.is_empty()), "{o}");
        }
    }
    assert!(dates[0] < dates[1], "each re-attempt on a later day: {dates:?}");
    // The return stop fails: booked again (same.shipment.rescheduled), then cancelled.
    let first = fail(&s, &ops, &tracking).await;
    assert_eq!(first["status"], "return_scheduled");
    assert_eq!(first["return_stop"]["failed_attempts"], 1);
    let r = s.ops_move(&ops, &tracking, &json!({"to": "failed"})).await;
    assert!(!r.error_at("reason").is_empty(), "a failed return needs a reason too: {}", r.body);
    let last = fail(&s, &ops, &tracking).await;
    assert_eq!(last["status"], "cancelled", "{last}");
    assert!(last["events"].as_array().unwrap().last().unwrap()["reason"].as_str().unwrap().contains("2 time"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_for_the_merchant_who_reschedules_returns_or_cancels() {
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let (_, _, other, _) = s.new_client("Somebody Else").await;
    let hold = json!({"max_attempts": 3, "after_failure": "hold", "max_return_attempts": 2});
    assert_eq!(s.send(s.http.put(s.url("/attempts/settings")).bearer_auth(&live).json(&hold)).await.status, 200);
    let [a, b, c] = [
        out_for_delivery(&s, &live, &ops).await,
        out_for_delivery(&s, &live, &ops).await,
        out_for_delivery(&s, &live, &ops).await,
    ];
    for t in [&a, &b, &c] {
        assert_eq!(fail(&s, &ops, t).await["status"], "failed", "held");
    }
    let reschedule = |t: &str, token: &str, date: &str, slot: &str| {
        let body = json!({"scheduled_date": date, "time_slot_code": slot});
        let (s, t, token) = (&s, t.to_string(), token.to_string());
        async move { s.post(&format!("/shipments/{t}/reschedule"), &token, &body).await }
    };
    // Errors first: nothing written by any of them.
    assert_envelope(&reschedule(&a, &other, "2026-11-25", "TOR-DT-PM").await, 404);
    let r = reschedule(&a, &live, "2026-11-22", "TOR-DT-PM").await;
    assert!(r.error_at("time_slot_code")[0].contains("cannot be booked"), "a past date: {}", r.body);
    let r = reschedule(&a, &live, "2026-11-29", "TOR-DT-PM").await;
    assert!(!r.error_at("time_slot_code").is_empty(), "a Sunday: {}", r.body);
    let r = reschedule(&a, &live, "2026-11-25", "TOR-E-PM").await;
    assert!(r.error_at("time_slot_code")[0].contains("not a drop-off time slot"), "another zone's: {}", r.body);
    let r = reschedule(&a, &live, "Wednesday", "TOR-DT-PM").await;
    assert!(!r.error_at("scheduled_date").is_empty());
    let full =
        json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-EV", "date": "2026-11-25", "stops": 0, "parcels": null});
    assert_eq!(s.send(s.http.put(s.url("/admin/capacity")).bearer_auth(ADMIN_TOKEN).json(&full)).await.status, 200);
    let r = reschedule(&a, &live, "2026-11-25", "TOR-DT-EV").await;
    assert!(r.error_at("time_slot_code")[0].contains("full"), "{}", r.body);
    assert_eq!(s.get(&format!("/shipments/{a}"), &live).await.body["object"]["status"], "failed");
    // The merchant decides: another slot (to_attempt), a return, a cancellation.
    let r = reschedule(&a, &live, "2026-11-25", "TOR-DT-PM").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["object"]["status"].as_str(), slot_of(&r.body["object"])),
        (Some("to_attempt"), ("2026-11-25".into(), "TOR-DT-PM".into()))
    );
    assert_eq!(stops_in(&s, "2026-11-25", "TOR-DT-PM").await, 1);
    // Moved again while to_attempt: Wednesday's place goes back.
    let r = reschedule(&a, &live, "2026-11-26", "TOR-DT-PM").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(stops_in(&s, "2026-11-25", "TOR-DT-PM").await, 0, "freed once");
    assert_eq!(stops_in(&s, "2026-11-26", "TOR-DT-PM").await, 1);
    let r = s.post(&format!("/shipments/{b}/return"), &live, &json!({})).await;
    assert_eq!(r.body["object"]["status"], "return_scheduled", "{}", r.body);
    assert_envelope(&s.post(&format!("/shipments/{b}/return"), &live, &json!({})).await, 409);
    let r = s.post(&format!("/shipments/{b}/cancel"), &live, &json!({})).await;
    assert_eq!(r.body["object"]["status"], "cancelled", "{}", r.body);
    assert!(r.body["object"].get("return_stop").is_none(), "a cancelled return frees its stop: {}", r.body);
    let r = s.post(&format!("/shipments/{c}/cancel"), &live, &json!({})).await;
    assert_eq!(r.body["object"]["status"], "cancelled");
    for t in [&b, &c] {
        let r = reschedule(t, &live, "2026-11-26", "TOR-DT-PM").await;
        assert_envelope(&r, 409);
        assert!(r.body["message"].as_str().unwrap().contains("cancelled"), "{}", r.body);
    }
    // Out for delivery: too late to change the slot, cancel or return.
    assert_eq!(s.ops_move(&ops, &a, &json!({"to": "in_transit"})).await.status, 200);
    let r = reschedule(&a, &live, "2026-11-27", "TOR-DT-PM").await;
    assert_envelope(&r, 409);
    assert!(r.body["message"].as_str().unwrap().contains("out for delivery"), "{}", r.body);
    assert_envelope(&s.post(&format!("/shipments/{a}/cancel"), &live, &json!({})).await, 409);
    assert_envelope(&s.post(&format!("/shipments/{a}/return"), &live, &json!({})).await, 409);
}

/// Two changes at once: of one shipment (one wins, the other is told it changed meanwhile),
/// and of two shipments into a slot with one place left (one gets it, the other a 422).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn simultaneous_changes_never_overfill_a_slot() {
    let s = TestServer::start().await;
    let (_, _, live, _) = s.new_client("Maple Goods").await;
    let mut codes = Vec::new();
    for _ in 0..3 {
        let r = s.post("/requests/sync", &live, &request(&[500.0])).await;
        codes.push(r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string());
    }
    let to = |t: &str, date: &str| {
        let body = json!({"scheduled_date": date, "time_slot_code": "TOR-DT-PM"});
        let (s, t, live) = (&s, t.to_string(), live.clone());
        async move { s.post(&format!("/shipments/{t}/reschedule"), &live, &body).await }
    };
    // Eight changes of one shipment at once, each to another day: each is made whole or told the
    // shipment changed meanwhile; in the end it holds exactly one place, in the slot it is in.
    let days = [
        "2026-11-24",
        "2026-11-25",
        "2026-11-26",
        "2026-11-27",
        "2026-11-28",
        "2026-11-30",
        "2026-12-01",
        "2026-12-02",
    ];
    let answers = futures_util::future::join_all(days.iter().map(|d| to(&codes[0], d))).await;
    for a in &answers {
        assert!(a.status == 200 || a.status == 409, "{}", a.body);
        if a.status == 409 {
            assert!(a.body["message"].as_str().unwrap().contains("changed meanwhile"), "{}", a.body);
        }
    }
    assert!(answers.iter().any(|a| a.status == 200));
    let now = s.get(&format!("/shipments/{}", codes[0]), &live).await;
    let (date, _) = slot_of(&now.body["object"]);
    let mut held = 0;
    for d in days {
        let n = stops_in(&s, d, "TOR-DT-PM").await;
        assert_eq!(n, i64::from(d == date), "{d}: one place, where the shipment is ({date})");
        held += n;
    }
    assert_eq!(held, 1);
    // A slot none of the above went to, with one place left.
    let one =
        json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-PM", "date": "2026-12-04", "stops": 1, "parcels": null});
    assert_eq!(s.send(s.http.put(s.url("/admin/capacity")).bearer_auth(ADMIN_TOKEN).json(&one)).await.status, 200);
    let (x, y) = tokio::join!(to(&codes[1], "2026-12-04"), to(&codes[2], "2026-12-04"));
    let mut got = [x.status, y.status];
    got.sort_unstable();
    assert_eq!(got, [200, 422], "{} / {}", x.body, y.body);
    assert_eq!(stops_in(&s, "2026-12-04", "TOR-DT-PM").await, 1, "never more than the limit");
}

/// The dispatcher's board lists the day's failures with their reasons, the re-attempts by date
/// and the returns due, each linked to its shipment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_shows_the_days_failures_reattempts_and_returns() {
    let s = TestServer::start().await;
    let op = crate::plans::operator(&s).await;
    let mut clients = Vec::new();
    for (name, after) in [("Again", "reattempt"), ("Hold", "hold"), ("Back", "return")] {
        let (_, _, live, ops) = s.new_client(name).await;
        let policy = json!({"max_attempts": 3, "after_failure": after, "max_return_attempts": 2});
        assert_eq!(s.send(s.http.put(s.url("/attempts/settings")).bearer_auth(&live).json(&policy)).await.status, 200);
        let tracking = out_for_delivery(&s, &live, &ops).await;
        let r = s.ops_move(&ops, &tracking, &json!({"to": "failed", "reason": format!("{name}: nobody home")})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        clients.push(tracking);
    }
    let mut v = crate::dashboard_http::Visitor::new(&s);
    let csrf = v.get("/ops/sign-in").await.csrf();
    assert_eq!(v.post("/ops/sign-in", &[("csrf", &csrf), ("token", &op)]).await.status, 303);
    let page = v.get("/ops/board?depot=YYZ1&date=2026-11-23").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let section = |id: &str| -> String {
        let at = page.body.find(&format!("<table id=\"{id}\">")).unwrap_or_else(|| panic!("no #{id}: {}", page.body));
        let rest = &page.body[at..];
        rest[..rest.find("</table>").unwrap()].to_string()
    };
    let failed = section("failed");
    for (code, reason) in clients.iter().zip(["Again: nobody home", "Hold: nobody home", "Back: nobody home"]) {
        assert!(failed.contains(&format!("href=\"/track/{code}\"")) && failed.contains(reason), "{failed}");
    }
    assert!(
        failed.contains("awaiting the merchant&#39;s decision") || failed.contains("awaiting the merchant's decision")
    );
    let reattempts = section("reattempts");
    assert!(reattempts.contains(&clients[0]) && reattempts.contains("2026-11-24"), "{reattempts}");
    assert!(!reattempts.contains(&clients[1]) && !reattempts.contains(&clients[2]));
    let returns = section("returns");
    assert!(returns.contains(&clients[2]) && !returns.contains(&clients[0]), "{returns}");
    // The counts of shipments to plan leave them out: a delivery plan would not take them.
    let counts = section("counts");
    assert!(!counts.contains("<td>Delivery</td>"), "failed and returning drop-offs are not to plan: {counts}");
    // Another day's board has no failure of that day.
    let other = v.get("/ops/board?depot=YYZ1&date=2026-11-25").await;
    assert!(other.body.contains("id=\"failed-none\""), "{}", other.body);
}

/// The dashboard on a phone: the policy page, a held failure "awaiting your decision", and the
/// merchant's decisions made with the page's forms (no script), each page axe-clean.
#[tokio::test]
async fn browser_the_merchant_decides_in_the_dashboard() {
    use crate::browser::{Browser, PHONE};
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let b = Browser::start(PHONE).await;
    b.goto(&format!("{}/dashboard/sign-in", s.base)).await;
    b.fill("#token", &live).await;
    b.click("#sign-in button[type=submit]").await;
    b.goto(&format!("{}/dashboard/attempts", s.base)).await;
    b.assert_accessible("attempts-phone").await;
    b.screenshot("attempts-phone").await;
    b.tap("#after-hold").await;
    b.fill("#max-attempts", "2").await;
    b.click("#policy button[type=submit]").await;
    assert!(b.text("#saved").await.contains("saved"));
    let policy = s.get("/attempts/settings", &live).await;
    assert_eq!(policy.body["object"]["after_failure"], "hold", "{}", policy.body);
    assert_eq!(policy.body["object"]["max_attempts"], 2);

    let [a, c] = [out_for_delivery(&s, &live, &ops).await, out_for_delivery(&s, &live, &ops).await];
    for t in [&a, &c] {
        assert_eq!(fail(&s, &ops, t).await["status"], "failed");
    }
    b.goto(&format!("{}/dashboard/shipments/{a}", s.base)).await;
    assert!(b.text("#awaiting").await.contains("Nobody at home"), "{}", b.text("main").await);
    b.assert_accessible("shipment-awaiting-phone").await;
    b.screenshot("shipment-awaiting-phone").await;
    b.select("#new-slot", "2026-11-25 TOR-DT-EV").await;
    b.click("#reschedule button[type=submit]").await;
    assert_eq!(b.attr("#status", "class").await, "status s-to_attempt");
    let r = s.get(&format!("/shipments/{a}"), &live).await;
    assert_eq!(slot_of(&r.body["object"]), ("2026-11-25".into(), "TOR-DT-EV".into()));
    b.click("#return").await;
    assert_eq!(b.attr("#status", "class").await, "status s-return_scheduled");
    assert!(!b.text("#return-stop").await.is_empty());
    b.goto(&format!("{}/dashboard/shipments/{c}", s.base)).await;
    b.click("#cancel").await;
    assert_eq!(b.attr("#status", "class").await, "status s-cancelled");
    assert_eq!(b.count("#decide-h").await, 0, "nothing left to decide");
}

/// `kill -9` while drivers' failures are being written, then a restart and the phones sending
/// them again under their keys: each shipment has exactly one `failed` and one `to_attempt`,
/// one place in the re-attempt's slot, and one recipient message per trigger — on the suite's
/// backend, the failure and all it causes being one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_9_between_failures_and_their_answers_books_each_once() {
    const K: usize = 6;
    let s = TestServer::start().await;
    let op = crate::plans::operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (_, ana) = crate::plans::driver(&s, &op, "Ana", 40, ("08:00", "22:00")).await;
    let mut codes = Vec::new();
    for i in 0..K {
        let tracking = crate::plans::order(&s, &live, i, 1, "TOR-DT-PM").await;
        for to in ["to_pick_up", "picked_up", "processing"] {
            assert_eq!(s.ops_move(&ops, &tracking, &json!({"to": to})).await.status, 200);
        }
        codes.push(tracking);
    }
    let plan = json!({"date": "2026-11-23", "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1});
    let r = s.post("/ops/plans", &op, &plan).await;
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    let day = s.get("/driver/route", &ana).await.body["object"].clone();
    let scanned: Vec<Value> = day["routes"][0]["stops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["shipments"].as_array().unwrap().iter())
        .flat_map(|sh| sh["parcels"].as_array().unwrap().iter().map(|p| p["pick_up_code"].clone()))
        .collect();
    assert_eq!(scanned.len(), K, "{day}");
    let start = s.http.post(s.url("/driver/route/start")).bearer_auth(&ana).header("Idempotency-Key", "start");
    assert_eq!(s.send(start.json(&json!({"scanned": scanned}))).await.status, 200);

    // The same database, served by a process of its own that is killed mid-way.
    let fail = |base: &str, code: &str| {
        let url = format!("{base}{}/driver/shipments/{code}/transitions", crate::common::API);
        let req = s.http.post(url).bearer_auth(&ana).header("Idempotency-Key", format!("fail-{code}"));
        req.json(&json!({"to": "failed", "reason": "Nobody home"})).send()
    };
    let (mut first, base, _) = crate::cli::spawn_serve_with(&s.db.url(), &[]);
    let mut pending: futures_util::stream::FuturesUnordered<_> = codes.iter().map(|c| fail(&base, c)).collect();
    let answered = pending.next().await.expect("one request").expect("one answer");
    assert_eq!(answered.status(), 200);
    first.kill().unwrap();
    first.wait().unwrap();
    drop(pending);
    let (mut second, base, _) = crate::cli::spawn_serve_with(&s.db.url(), &[]);
    for code in &codes {
        let r = fail(&base, code).await.expect("an answer");
        assert_eq!(r.status(), 200, "{code}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["object"]["status"], "to_attempt", "{code}: {body}");
        assert!(body["object"].get("eta").is_none(), "no ETA of the route it left: {body}");
    }
    second.kill().unwrap();
    second.wait().unwrap();
    for code in &codes {
        let events = |status: &str| {
            s.scalar(&format!(
                "SELECT count(*) FROM shipment_events e JOIN drop_off_shipments d ON d.id = e.shipment_id
                 WHERE e.shipment_kind = 'drop_off' AND d.unique_id = '{code}' AND e.status = '{status}'"
            ))
        };
        assert_eq!((events("failed"), events("to_attempt")), (1, 1), "{code}");
        let messages = s.scalar(&format!(
            "SELECT count(*) FROM notifications WHERE shipment_unique_id = '{code}' AND trigger_kind = 'failed'"
        ));
        let channels = s.scalar(&format!(
            "SELECT count(DISTINCT channel) FROM notifications WHERE shipment_unique_id = '{code}' AND trigger_kind = 'failed'"
        ));
        assert_eq!(messages, channels, "{code}: one message per trigger and channel");
    }
    let booked = s.scalar(
        "SELECT stops FROM slot_fill WHERE mode = 'live' AND kind = 'drop_off' AND place = 'TOR-DT'
           AND slot_code = 'TOR-DT-PM' AND date = '2026-11-24'",
    );
    assert_eq!(booked, K as i64, "one place each in Tuesday's slot");
}
