//! Slots the fleet can deliver (issue 45), from the outside, on both backends: with `[capacity]
//! mode = "fleet"` a drop-off slot has room while depot YYZ1's tentative plan of the date can
//! take the stop with the drivers working that day. The clock is pinned to Monday 2026-11-23
//! 07:00 in Toronto; orders book that day's 14:00–18:00 (`TOR-DT-PM`) or 18:00–21:00
//! (`TOR-DT-EV`) slots in zone TOR-DT.

use serde_json::{Value, json};

use crate::common::{PICK_UP, TestServer};
use crate::plans::{DATE, operator};
use crate::receiver::Receiver;

const FLEET: &str = "[capacity]\nmode = \"fleet\"\n";

/// A driver of YYZ1 working every day with this van and shift; its id.
async fn driver(s: &TestServer, op: &str, name: &str, parcels: u32, kg: u32, shift: (&str, &str)) -> String {
    let body = json!({
        "name": name, "phone": "+1 416 555 0199", "depot": "YYZ1",
        "vehicle": {"name": "Van", "capacity_parcels": parcels, "capacity_kg": kg},
        "shift": {"start": shift.0, "end": shift.1},
        "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    });
    let r = s.post("/ops/drivers", op, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["id"].as_str().expect("id").to_string()
}

/// Downtown Toronto points (TOR-DT, M5V), each its own stop.
fn point(i: usize) -> (f64, f64) {
    let (row, col) = (i / 5, i % 5);
    (43.6400 + 0.0030 * row as f64, -79.3990 + 0.0040 * col as f64)
}

/// An order of one drop-off at point `i` with parcels of `grams` each, in the slot asked (or
/// the earliest with room).
fn body(i: usize, grams: &[u32], slot: Option<&str>) -> Value {
    let (lat, lng) = point(i);
    let mut drop_off = json!({
        "address": {"text": format!("{} Front St W, Toronto, ON M5V 2T6", 100 + i), "lat": lat, "lng": lng,
                    "person_name": format!("Receiver {i}"), "person_phone": "+1 416 555 0100"},
        "parcels": grams.iter().map(|g| json!({"unit": "g", "values": g})).collect::<Vec<_>>()
    });
    if let Some(slot) = slot {
        drop_off["scheduled_date"] = json!(DATE);
        drop_off["time_slot_code"] = json!(slot);
    }
    json!({"pick_up_address": {"text": PICK_UP}, "drop_offs": [drop_off]})
}

/// The (date, slot code) an order's drop-off was booked into, and its unique id.
fn booked(r: &Value) -> (String, String, String) {
    let d = &r["object"]["shipments"][0]["drop_off_shipment"];
    let s = |v: &Value| v.as_str().unwrap_or_else(|| panic!("{v} in {d}")).to_string();
    (s(&d["scheduled_date"]), s(&d["time_slot"]["code"]), s(&d["unique_id"]))
}

/// A delivery plan of YYZ1 on the date; its answer.
async fn plan(s: &TestServer, op: &str) -> Value {
    let r =
        s.post("/ops/plans", op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"].clone()
}

/// Every shipment of the plan's routes.
fn routed(plan: &Value) -> Vec<String> {
    let mut out: Vec<String> = plan["routes"]
        .as_array()
        .expect("routes")
        .iter()
        .flat_map(|r| r["stops"].as_array().expect("stops").iter())
        .flat_map(|s| s["shipment_unique_ids"].as_array().expect("ids").iter())
        .map(|u| u.as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// A van whose shift ends at 15:00 serves one hour of the afternoon slot; another starting at
/// 17:30 serves the evening. Orders asking for no slot fill the afternoon until its van has no
/// time left, then the next goes to the evening; the plan made then routes every one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_fill_a_slot_to_what_its_van_can_drive_then_move_on_and_the_plan_routes_them_all() {
    let s = TestServer::start_with(FLEET).await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    // No driver: no room at all, said at the address.
    let r = s.post("/requests/sync", &live, &body(0, &[1500], None)).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(!r.error_at("drop_offs.0.address.text").is_empty());
    driver(&s, &op, "Early", 100, 500, ("08:00", "15:00")).await;
    driver(&s, &op, "Late", 100, 500, ("17:30", "22:00")).await;
    let mut afternoon = Vec::new();
    let mut moved = None;
    for i in 0..40 {
        let r = s.post("/requests/sync", &live, &body(i, &[1500], None)).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let (date, slot, id) = booked(&r.body);
        assert_eq!(date, DATE);
        if slot == "TOR-DT-PM" {
            assert!(moved.is_none(), "a full slot stays full for stops like these");
            afternoon.push(id);
        } else {
            assert_eq!(slot, "TOR-DT-EV");
            moved = Some(id);
            break;
        }
    }
    let evening = moved.expect("the afternoon filled and an order moved to the evening");
    // Between 14:00 and 15:00, less the drive back: a handful of stops, not forty.
    assert!((3..20).contains(&afternoon.len()), "{} in the afternoon", afternoon.len());
    // Asked for the full afternoon: a 422 at the slot, in words.
    let r = s.post("/requests/sync", &live, &body(45, &[1500], Some("TOR-DT-PM"))).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.error_at("drop_offs.0.time_slot_code"), ["This time slot is full on that date."]);
    // A preview books as an order would.
    let r = s.post("/requests/preview", &live, &body(46, &[1500], None)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The admin API shows each drop-off slot's room as the fleet sees it: the afternoon bound
    // by its van's shift, the evening with room.
    let r = s
        .send(s.http.get(s.url(&format!("/admin/capacity?date={DATE}"))).bearer_auth(crate::common::ADMIN_TOKEN))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let slot = |code: &str| -> Value {
        r.body["object"]["slots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["zone"] == "TOR-DT" && v["time_slot_code"] == code)
            .unwrap()["fleet"]
            .clone()
    };
    let (pm, ev) = (slot("TOR-DT-PM"), slot("TOR-DT-EV"));
    assert_eq!(
        (pm["depot"].as_str(), pm["vans"].as_u64(), pm["booked"].as_u64()),
        (Some("YYZ1"), Some(2), Some(afternoon.len() as u64 + 1)),
        "{pm}"
    );
    assert!(pm["stops"].as_u64().unwrap() <= 2, "{pm}");
    assert!(ev["stops"].as_u64().unwrap() >= 5 && ev["binds"].is_null(), "{ev}");
    let pick_up = r.body["object"]["slots"].as_array().unwrap().iter().find(|v| v["city"].is_string()).unwrap().clone();
    assert!(pick_up.get("fleet").is_none(), "a pick-up slot has no fleet room: {pick_up}");
    let plan = plan(&s, &op).await;
    assert_eq!(plan["unassigned"], json!([]), "{}", plan["unassigned"]);
    let mut all = afternoon.clone();
    all.push(evening);
    all.sort();
    assert_eq!(routed(&plan), all, "every accepted shipment is on a route");
}

/// The afternoon's van carries 20 kg, the evening's 500: a 30 kg drop-off asking no slot is
/// booked into the evening, a light one into the afternoon; asked for the afternoon, the heavy
/// one is a 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_off_too_heavy_for_the_afternoon_van_is_booked_into_the_evening() {
    let s = TestServer::start_with(FLEET).await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    driver(&s, &op, "Small", 50, 20, ("08:00", "18:30")).await;
    driver(&s, &op, "Big", 50, 500, ("18:00", "22:00")).await;
    let r = s.post("/requests/sync", &live, &body(1, &[15_000, 15_000], None)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(booked(&r.body).1, "TOR-DT-EV");
    let r = s.post("/requests/sync", &live, &body(2, &[2_000], None)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(booked(&r.body).1, "TOR-DT-PM");
    let r = s.post("/requests/sync", &live, &body(3, &[15_000, 15_000], Some("TOR-DT-PM"))).await;
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(!r.error_at("drop_offs.0.time_slot_code").is_empty());
    let plan = plan(&s, &op).await;
    assert_eq!(plan["unassigned"], json!([]), "{}", plan["unassigned"]);
    assert_eq!(routed(&plan).len(), 2);
}

/// One van of 10 parcels with 6 booked; 40 orders at once for the last 4 places, through two
/// server processes on PostgreSQL (one on SQLite, whose deployment is one process per file):
/// exactly 4 are accepted, the rest told the slot is full, and the plan of the day leaves
/// nobody out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_orders_at_once_for_the_last_places_never_oversell_the_van() {
    let s = TestServer::start_with(FLEET).await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    driver(&s, &op, "Only", 10, 500, ("08:00", "22:00")).await;
    for i in 0..6 {
        let r = s.post("/requests/sync", &live, &body(i, &[1500], Some("TOR-DT-PM"))).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), crate::common::test_config(FLEET)).unwrap();
    let other = if s.sqlite_file().is_none() {
        let path = config.path().to_str().unwrap().to_string();
        Some(crate::cli::spawn_serve_with(&s.db.url(), &[("DROPSLOT_CONFIG", &path)]))
    } else {
        None
    };
    let bases: Vec<String> = std::iter::once(s.base.clone()).chain(other.as_ref().map(|(_, b, _)| b.clone())).collect();
    let sends = (0..40).map(|i| {
        let url = format!("{}{}/requests/sync", bases[i % bases.len()], crate::common::API);
        let req = s.http.post(url).bearer_auth(&live).json(&body(10 + i, &[1500], Some("TOR-DT-PM")));
        s.send(req)
    });
    let replies = futures_util::future::join_all(sends).await;
    let accepted = replies.iter().filter(|r| r.status == 201).count();
    for r in replies.iter().filter(|r| r.status != 201) {
        assert_eq!(r.status, 422, "{}", r.body);
        assert_eq!(r.error_at("drop_offs.0.time_slot_code"), ["This time slot is full on that date."]);
    }
    assert_eq!(accepted, 4, "the van's last 4 places, no more");
    let plan = plan(&s, &op).await;
    assert_eq!(plan["unassigned"], json!([]), "{}", plan["unassigned"]);
    assert_eq!(routed(&plan).len(), 10);
    if let Some((mut child, _, _)) = other {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Two vans of 6 parcels carry ten afternoon drop-offs; one driver is removed. The four that the
/// other van cannot carry are rebooked into the next slot with room (the next day's afternoon:
/// the van is full all day), each with one `same.shipment.rescheduled` (changed by `system`)
/// and one "new time" message per channel, sent by a real SMTP server and SMS receiver; a later
/// change of the fleet moves nothing again; each day's plan routes what it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_removed_rebooks_what_no_longer_fits_once_with_its_webhook_and_message() {
    let smtp = crate::notifications::Smtp::start();
    let sms = Receiver::start().await;
    let s = crate::notifications::start_plus(&smtp, &sms, FLEET).await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    let rx = Receiver::start().await;
    let r = s.post("/webhooks", &live, &json!({"url": rx.url, "events": ["same.shipment.rescheduled"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    driver(&s, &op, "Ana", 6, 500, ("08:00", "22:00")).await;
    let ben = driver(&s, &op, "Ben", 6, 500, ("08:00", "22:00")).await;
    let mut shipments = Vec::new();
    for i in 0..10 {
        let mut b = body(i, &[1500], Some("TOR-DT-PM"));
        b["drop_offs"][0]["address"]["person_email"] = json!(format!("r{i}@example.com"));
        let r = s.post("/requests/sync", &live, &b).await;
        assert_eq!(r.status, 201, "{}", r.body);
        shipments.push(booked(&r.body).2);
    }
    // Full for the day: two vans of 6 parcels, 10 booked, 2 left.
    let r = s.delete(&format!("/ops/drivers/{ben}"), &op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut moved = Vec::new();
    for id in &shipments {
        let r = s.get(&format!("/shipments/{id}"), &live).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let d = &r.body["object"]["drop_off_shipment"];
        let at =
            (d["scheduled_date"].as_str().unwrap().to_string(), d["time_slot"]["code"].as_str().unwrap().to_string());
        if at.0 != DATE {
            assert_eq!(at, ("2026-11-24".to_string(), "TOR-DT-PM".to_string()), "the next slot with room");
            moved.push(id.clone());
        }
    }
    assert_eq!(moved.len(), 4, "what one van of 6 cannot carry of 10");
    let got = rx.wait_until("the rescheduled events", |g| g.iter().filter(|r| r.ok()).count() >= 4).await;
    let mut told: Vec<String> =
        got.iter().map(|r| r.json()["data"]["tracking_code"].as_str().unwrap().to_string()).collect();
    told.sort();
    moved.sort();
    assert_eq!(told, moved, "one event per rebooked shipment");
    for r in &got {
        let d = &r.json()["data"];
        assert_eq!(r.event(), "same.shipment.rescheduled");
        assert_eq!(d["changed_by"], "system", "{d}");
        assert_eq!(
            (d["previous"]["scheduled_date"].as_str(), d["new"]["scheduled_date"].as_str()),
            (Some(DATE), Some("2026-11-24"))
        );
    }
    // Ten "scheduled" e-mails, then the four new times.
    let mails = smtp.wait_for(14, "the new-time e-mails").await;
    let new_time: Vec<&Value> =
        mails.iter().filter(|m| m["subject"].as_str().is_some_and(|t| t.contains("has a new time"))).collect();
    assert_eq!(new_time.len(), 4, "{mails:?}");
    for id in &moved {
        let r = s.get(&format!("/shipments/{id}/notifications"), &live).await;
        let listed = r.body["object"]["notifications"].as_array().unwrap().clone();
        let mine: Vec<&Value> = listed.iter().filter(|n| n["trigger"] == "rescheduled").collect();
        assert_eq!(mine.len(), 2, "one per channel: {listed:?}");
    }
    // The fleet changes again without taking room: nothing moves a second time.
    let r = s.send(s.http.patch(s.url("/ops/drivers/x")).bearer_auth(&op).json(&json!({"name": "X"}))).await;
    assert_eq!(r.status, 404);
    let again = driver(&s, &op, "Cleo", 1, 500, ("20:00", "21:00")).await;
    let r = s.delete(&format!("/ops/drivers/{again}"), &op).await;
    assert_eq!(r.status, 200);
    assert_eq!(rx.received().len(), 4, "each shipment rebooked once");
    assert_eq!(smtp.messages().len(), 14, "one new-time e-mail each");
    // Each day's plan routes what it holds.
    let plan = plan(&s, &op).await;
    assert_eq!(plan["unassigned"], json!([]), "{}", plan["unassigned"]);
    assert_eq!(routed(&plan).len(), 6);
}

/// With `[dispatch] unplaced = "hold"`, a van made smaller leaves what it can carry no more on
/// the board for the dispatcher: nothing is moved, no webhook, the board lists it with why, and
/// shows each van's use of the day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_shipments_wait_on_the_board_with_the_vans_use() {
    let s = TestServer::start_with(&format!("{FLEET}[dispatch]\nunplaced = \"hold\"\n")).await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    let ana = driver(&s, &op, "Ana", 8, 500, ("08:00", "22:00")).await;
    let mut shipments = Vec::new();
    for i in 0..6 {
        let r = s.post("/requests/sync", &live, &body(i, &[1500], Some("TOR-DT-PM"))).await;
        assert_eq!(r.status, 201, "{}", r.body);
        shipments.push(booked(&r.body).2);
    }
    let r = s
        .send(
            s.http
                .patch(s.url(&format!("/ops/drivers/{ana}")))
                .bearer_auth(&op)
                .json(&json!({"vehicle": {"capacity_parcels": 4}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for id in &shipments {
        let r = s.get(&format!("/shipments/{id}"), &live).await;
        assert_eq!(r.body["object"]["drop_off_shipment"]["scheduled_date"], DATE, "held, not moved");
    }
    let mut v = crate::dashboard_http::Visitor::new(&s);
    let csrf = v.get("/ops/sign-in").await.csrf();
    assert_eq!(v.post("/ops/sign-in", &[("csrf", &csrf), ("token", &op)]).await.status, 303);
    let page = v.get(&format!("/ops/board?depot=YYZ1&date={DATE}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let section = |id: &str| -> String {
        let at = page.body.find(&format!("<table id=\"{id}\">")).unwrap_or_else(|| panic!("no #{id}: {}", page.body));
        let rest = &page.body[at..];
        rest[..rest.find("</table>").unwrap()].to_string()
    };
    let held = section("held");
    let listed = shipments.iter().filter(|id| held.contains(id.as_str())).count();
    assert_eq!(listed, 2, "six booked, four fit: {held}");
    assert!(held.contains("every van is full (parcels)"), "{held}");
    let vans = section("vans");
    assert!(vans.contains(&ana) && vans.contains("4 / 4"), "{vans}");
    // Another day: nothing held.
    let other = v.get("/ops/board?depot=YYZ1&date=2026-11-25").await;
    assert!(other.body.contains("id=\"held-none\""), "{}", other.body);
}

/// The background improvement: thirty drop-offs booked in a scrambled order onto two vans; the
/// day's tentative plan handed to the solver (paced, on its thread) comes back cheaper with
/// every stop, is written (read anew from the rows, its routes are the improved ones), and the
/// next order and the day plan still take every stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_solver_improves_a_tentative_plan_without_losing_a_stop() {
    let s = TestServer::start_with(FLEET).await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    driver(&s, &op, "Ana", 200, 500, ("08:00", "22:00")).await;
    driver(&s, &op, "Ben", 200, 500, ("08:00", "22:00")).await;
    for k in 0..30 {
        let i = (k * 7) % 30;
        let slot = if k % 2 == 0 { "TOR-DT-PM" } else { "TOR-DT-EV" };
        let r = s.post("/requests/sync", &live, &body(i, &[1500], Some(slot))).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let date: jiff::civil::Date = DATE.parse().unwrap();
    let store = &s.app.store;
    let before = store.tentative_plan("YYZ1", date).await.unwrap().expect("YYZ1 books on its fleet");
    assert_eq!(before.len(), 30);
    let improved = dropslot::plans::improve::improve_day(&s.app, "YYZ1", date, 2.0).await.unwrap();
    assert!(improved, "a plan kept by insertion leaves the solver something to improve");
    let after = store.tentative_plan("YYZ1", date).await.unwrap().unwrap();
    assert!(after.valid() && after.len() == 30);
    assert!(after.totals().0 < before.totals().0, "cheaper: {:?} < {:?}", after.totals(), before.totals());
    // Written: the rows read anew give the improved routes.
    let stored = store.tentative_routes("YYZ1", date).await.unwrap();
    let counts = |r: Vec<(String, usize)>| -> Vec<(String, usize)> { r };
    assert_eq!(
        counts(stored.iter().map(|(d, ids)| (d.clone(), ids.len())).collect()),
        counts(after.routes().iter().map(|(d, ids)| (d.clone(), ids.len())).collect())
    );
    // Nothing changed since: a second look finds nothing better to write, or writes a cheaper
    // plan still; either way every stop stays.
    let _ = dropslot::plans::improve::improve_day(&s.app, "YYZ1", date, 0.5).await.unwrap();
    assert_eq!(store.tentative_plan("YYZ1", date).await.unwrap().unwrap().len(), 30);
    let r = s.post("/requests/sync", &live, &body(31, &[1500], Some("TOR-DT-EV"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let plan = plan(&s, &op).await;
    assert_eq!(plan["unassigned"], json!([]), "{}", plan["unassigned"]);
    assert_eq!(routed(&plan).len(), 31);
}
