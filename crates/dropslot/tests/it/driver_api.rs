//! The driver app's API (CONTRACT §13) on both backends: a driver reads only its own
//! published route of today, scans only its own parcels, and no other token reaches it.

use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, PICK_UP, TestServer, assert_envelope};

pub(crate) const DATE: &str = "2026-11-23";

pub(crate) async fn operator(s: &TestServer) -> String {
    let r = s.send(s.http.post(s.url("/admin/operator-tokens")).bearer_auth(ADMIN_TOKEN)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["token"].as_str().unwrap().to_string()
}

pub(crate) async fn driver(s: &TestServer, op: &str, name: &str) -> (String, String) {
    let body = json!({
        "name": name, "phone": "+1 416 555 0199", "depot": "YYZ1",
        "vehicle": {"name": "Van", "capacity_parcels": 4, "capacity_kg": 500},
        "shift": {"start": "08:00", "end": "22:00"}, "weekdays": ["mon"]
    });
    let r = s.post("/ops/drivers", op, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let token = r.body["object"]["sign_in_url"].as_str().unwrap().split_once("#token=").unwrap().1.to_string();
    (r.body["object"]["id"].as_str().unwrap().to_string(), token)
}

/// A live order at point `i` with two parcels; its tracking code and the parcels' codes.
pub(crate) async fn order(s: &TestServer, live: &str, i: usize) -> (String, Vec<String>) {
    let body = json!({
        "pick_up_address": {"text": PICK_UP},
        "drop_offs": [{
            "address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "lat": 43.640 + 0.004 * i as f64, "lng": -79.39,
                        "person_name": format!("Receiver {i}"), "person_phone": "+1 416 555 0100"},
            "scheduled_date": DATE, "time_slot_code": "TOR-DT-PM",
            "parcels": [{"unit": "g", "values": 1000, "custom_code": format!("DRIVERAPI0000000{i}")}, {"unit": "g", "values": 900}]
        }]
    });
    let r = s.post("/requests/sync", live, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let sh = &r.body["object"]["shipments"][0];
    let codes = sh["parcels"].as_array().unwrap().iter().map(|p| p["pick_up_code"].as_str().unwrap().to_string());
    (sh["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string(), codes.collect())
}

/// Every shipment of a driver's day (`GET /driver/route`'s object), stop by stop.
pub(crate) fn day_shipments(day: &Value) -> impl Iterator<Item = &Value> {
    day["routes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["stops"].as_array().unwrap())
        .flat_map(|s| s["shipments"].as_array().unwrap())
}

pub(crate) fn shipments_of(day: &Value) -> Vec<String> {
    day_shipments(day).map(|sh| sh["unique_id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_reads_and_scans_only_its_own_published_route_of_today() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (ana, ana_token) = driver(&s, &op, "Ana").await;
    let (_, ben_token) = driver(&s, &op, "Ben").await;
    // Four orders of two parcels, vans of four parcels: two stops each.
    let mut orders = Vec::new();
    for i in 0..4 {
        orders.push(order(&s, &live, i).await);
    }
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let plan = r.body["object"].clone();
    // A draft is no driver's yet.
    let r = s.get("/driver/route", &ana_token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"], json!({"date": DATE, "routes": []}));
    let id = plan["id"].as_str().unwrap();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);

    let ana_day = s.get("/driver/route", &ana_token).await.body["object"].clone();
    let ben_day = s.get("/driver/route", &ben_token).await.body["object"].clone();
    let (mine, theirs) = (shipments_of(&ana_day), shipments_of(&ben_day));
    assert_eq!(mine.len() + theirs.len(), 4, "{ana_day} {ben_day}");
    assert!(mine.iter().all(|u| !theirs.contains(u)), "each sees only its own stops");
    let planned = plan["routes"].as_array().unwrap().iter().find(|r| r["driver_id"] == ana.as_str()).unwrap();
    assert_eq!(ana_day["routes"][0]["id"], planned["id"]);
    let stop = &ana_day["routes"][0]["stops"][0];
    assert_eq!(stop["seq"], 1);
    assert_eq!(stop["window"]["from"], "2026-11-23T14:00:00-05:00");
    assert!(stop["navigation"]["geo"].as_str().unwrap().starts_with("geo:43.6"), "{stop}");
    assert!(stop["receiver"].as_str().unwrap().starts_with("Receiver "), "{stop}");
    assert_eq!(stop["shipments"][0]["status"], "scheduled");
    assert_eq!(stop["shipments"][0]["parcels"].as_array().unwrap().len(), 2);

    // A scan of one of Ana's parcels, by pick-up code and by custom code; Ben's is a 404.
    let (tracking, codes) = orders.iter().find(|(t, _)| mine.contains(t)).unwrap();
    let r = s.post("/driver/scans", &ana_token, &json!({"code": codes[1]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["shipment_unique_id"], tracking.as_str());
    let i = orders.iter().position(|(t, _)| t == tracking).unwrap();
    let r = s.post("/driver/scans", &ana_token, &json!({"code": format!("DRIVERAPI0000000{i}")})).await;
    assert_eq!(r.body["object"]["pick_up_code"], codes[0].as_str(), "{}", r.body);
    let (_, other) = orders.iter().find(|(t, _)| theirs.contains(t)).unwrap();
    assert_envelope(&s.post("/driver/scans", &ana_token, &json!({"code": other[0]})).await, 404);
    assert_envelope(&s.post("/driver/scans", &ana_token, &json!({"code": "NOTACODE"})).await, 404);
    let r = s.post("/driver/scans", &ana_token, &json!({"code": " "})).await;
    assert_envelope(&r, 422);
    r.error_at("code");

    // Only driver tokens: client, ops and operator tokens are refused, an unknown one is a 401.
    for token in [live.as_str(), ops.as_str(), s.token.as_str(), op.as_str()] {
        assert_envelope(&s.get("/driver/route", token).await, 403);
    }
    assert_envelope(&s.get("/driver/route", "ds_driver_unknown").await, 401);
    // A driver token reaches nothing else.
    assert_envelope(&s.get("/orders", &ana_token).await, 403);
    assert_envelope(&s.get(&format!("/ops/plans/{id}"), &ana_token).await, 403);
}

/// A server with an operator, a merchant, drivers Ana and Ben (vans of four parcels), `orders`
/// orders of two parcels, and today's delivery plan over them published.
struct Published {
    s: TestServer,
    op: String,
    live: String,
    ops: String,
    ana: String,
    ben: String,
    id: String,
}

async fn published(orders: usize) -> Published {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (_, ana) = driver(&s, &op, "Ana").await;
    let (_, ben) = driver(&s, &op, "Ben").await;
    for i in 0..orders {
        order(&s, &live, i).await;
    }
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    Published { s, op, live, ops, ana, ben, id }
}

/// A driver call reads its published plans through a cache of parsed plans (issue 33): a
/// change to a published plan reaches the drivers' next reads, and a plan read before is not
/// served stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_a_published_plan_reaches_the_drivers_next_read() {
    // Three orders of two parcels in two vans of four: one van keeps room for one more.
    let Published { s, op, live, ana, ben, id, .. } = published(3).await;
    let both = || async {
        let mut all = shipments_of(&s.get("/driver/route", &ana).await.body["object"]);
        all.extend(shipments_of(&s.get("/driver/route", &ben).await.body["object"]));
        all.sort();
        all
    };
    let before = both().await;
    assert_eq!(before.len(), 3, "{before:?}");
    assert_eq!(both().await, before, "read twice, the same");

    // A late order, placed by re-optimising the published plan: both drivers' next reads see
    // the plan's new version.
    let (late, _) = order(&s, &live, 3).await;
    let r = s.post(&format!("/ops/plans/{id}/optimize"), &op, &json!({"time_limit_s": 1})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["status"], "published", "{}", r.body);
    let after = both().await;
    assert_eq!(after.len(), 4, "{after:?}");
    assert!(after.contains(&late), "the late order is on a driver's route: {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_records_a_delivery_once_per_key_and_only_on_its_own_route() {
    let Published { s, ops, ana, ben, .. } = published(4).await;
    let mine = shipments_of(&s.get("/driver/route", &ana).await.body["object"]);
    let theirs = shipments_of(&s.get("/driver/route", &ben).await.body["object"]);
    // At the depot, loaded: the shipments are on their way.
    for tracking in mine.iter().chain(&theirs) {
        for to in ["to_pick_up", "picked_up", "processing", "in_transit"] {
            assert_eq!(s.ops_move(&ops, tracking, &json!({"to": to})).await.status, 200);
        }
    }
    let delivered = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "Receiver 0"}]});
    let send = |tracking: &str, key: Option<&str>, body: &Value| {
        let mut req =
            s.http.post(s.url(&format!("/driver/shipments/{tracking}/transitions"))).bearer_auth(&ana).json(body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        s.send(req)
    };
    let events = |tracking: &str| {
        s.scalar(&format!(
            "SELECT count(*) FROM shipment_events e JOIN drop_off_shipments d ON d.id = e.shipment_id
             WHERE e.shipment_kind = 'drop_off' AND d.unique_id = '{tracking}' AND e.status = 'delivered'"
        ))
    };

    // Sent twice at once with one key (a phone's retry): one delivery, both answered 200.
    let (a, b) = tokio::join!(send(&mine[0], Some("stop-1"), &delivered), send(&mine[0], Some("stop-1"), &delivered));
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (200, 200), "{} / {}", a.body, b.body);
    let replayed =
        [&a, &b].iter().filter(|r| r.headers.get("idempotent-replayed").is_some_and(|v| v == "true")).count();
    assert_eq!(replayed, 1, "one took the move, the other replays it");
    assert_eq!(a.body["object"]["status"], "delivered", "{}", a.body);
    assert_eq!(events(&mine[0]), 1, "delivered once");
    // Later, the same key and body: the same answer again; with another body: refused.
    let again = send(&mine[0], Some("stop-1"), &delivered).await;
    assert_eq!((again.status.as_u16(), again.body["object"]["status"].as_str()), (200, Some("delivered")));
    let failed = json!({"to": "failed", "reason": "Nobody home"});
    assert_envelope(&send(&mine[0], Some("stop-1"), &failed).await, 409);
    assert_eq!(events(&mine[0]), 1);

    // A failed stop, a refused move, a missing key, another driver's shipment.
    // The default policy books the re-attempt in the failure's own transaction (CONTRACT §15).
    let r = send(&mine[1], Some("stop-2"), &failed).await;
    assert_eq!((r.status.as_u16(), r.body["object"]["status"].as_str()), (200, Some("to_attempt")), "{}", r.body);
    assert!(r.body["object"]["events"].as_array().unwrap().iter().any(|e| e["status"] == "failed"), "{}", r.body);
    assert_envelope(&send(&mine[1], Some("stop-2b"), &delivered).await, 409);
    let r = send(&mine[1], None, &delivered).await;
    assert_envelope(&r, 422);
    r.error_at("header.Idempotency-Key");
    assert_envelope(&send(&theirs[0], Some("stop-3"), &delivered).await, 404);
    assert_eq!(events(&theirs[0]), 0);
    // The ops API's rules hold: a delivery needs its proof.
    let r = send(&mine[1], Some("stop-4"), &json!({"to": "delivered"})).await;
    assert_envelope(&r, 422);
    r.error_at("proof_of_delivery");
    assert_eq!(events(&mine[1]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_starts_once_every_parcel_is_scanned_and_its_drop_offs_go_in_transit_once() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (_, ana) = driver(&s, &op, "Ana").await;
    let mut codes = std::collections::HashMap::new();
    for i in 0..2 {
        let (tracking, parcels) = order(&s, &live, i).await;
        codes.insert(tracking, parcels);
    }
    let start = |key: &str, scanned: Vec<&String>| {
        let req = s.http.post(s.url("/driver/route/start")).bearer_auth(&ana).header("Idempotency-Key", key);
        s.send(req.json(&json!({"scanned": scanned})))
    };
    let all: Vec<&String> = codes.values().flatten().collect();
    // No published route yet.
    assert_envelope(&start("k0", all.clone()).await, 404);
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    let trackings: Vec<String> = codes.keys().cloned().collect();
    // One shipment is at the depot, the other not yet picked up: nothing moves.
    for to in ["to_pick_up", "picked_up", "processing"] {
        assert_eq!(s.ops_move(&ops, &trackings[0], &json!({"to": to})).await.status, 200);
    }
    let r = start("k1", all.clone()).await;
    assert_envelope(&r, 409);
    assert!(r.body["message"].as_str().unwrap().contains(&format!("{} (scheduled)", trackings[1])), "{}", r.body);
    let in_transit = || s.scalar("SELECT count(*) FROM shipment_events WHERE status = 'in_transit'");
    assert_eq!(in_transit(), 0);
    for to in ["to_pick_up", "picked_up", "processing"] {
        assert_eq!(s.ops_move(&ops, &trackings[1], &json!({"to": to})).await.status, 200);
    }
    // A parcel left unscanned: refused, naming it.
    let (left, scanned): (Vec<&String>, Vec<&String>) = all.iter().partition(|c| **c == all[0]);
    let r = start("k2", scanned).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("scanned")[0].contains(left[0].as_str()), "{}", r.body);
    // Everything scanned: both go in transit, once, however often the phone retries.
    let r = start("k3", all.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let statuses: Vec<&str> = r.body["object"]["routes"][0]["stops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["shipments"].as_array().unwrap())
        .map(|sh| sh["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["in_transit", "in_transit"]);
    assert_eq!(start("k3", all.clone()).await.status, 200);
    assert_eq!(in_transit(), 2);
    let r = s.send(s.http.post(s.url("/driver/route/start")).bearer_auth(&ana).json(&json!({"scanned": []}))).await;
    assert_envelope(&r, 422);
    r.error_at("header.Idempotency-Key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn positions_are_taken_at_most_every_30_s_while_a_route_is_published_and_kept_30_days() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    let (ana_id, ana) = driver(&s, &op, "Ana").await;
    order(&s, &live, 0).await;
    let report = |key: Option<&str>, body: Value| {
        let mut req = s.http.post(s.url("/driver/positions")).bearer_auth(&ana).json(&body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        s.send(req)
    };
    // NOW is 2026-11-23T12:00:00Z.
    let at = |t: &str| json!({"lat": 43.6452, "lng": -79.3806, "accuracy_m": 12.5, "at": t});
    assert_envelope(&report(Some("p0"), at("2026-11-23T11:59:00Z")).await, 404);
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);

    let r = report(Some("p1"), at("2026-11-23T11:59:00Z")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let again = report(Some("p1"), at("2026-11-23T11:59:00Z")).await;
    assert_eq!(
        (again.status.as_u16(), again.headers.get("idempotent-replayed").map(|v| v.to_str().unwrap())),
        (201, Some("true"))
    );
    let r = report(Some("p2"), at("2026-11-23T11:59:20Z")).await;
    assert_envelope(&r, 429);
    assert_eq!(r.headers["retry-after"], "30");
    assert_eq!(report(Some("p3"), at("2026-11-23T11:59:31Z")).await.status, 201);
    // Kept offline and sent later: an older one 30 s apart from the rest is taken too.
    assert_eq!(report(Some("p4"), at("2026-11-23T11:58:00Z")).await.status, 201);
    let latest = s.app.store.latest_position(&ana_id).await.unwrap().unwrap();
    assert_eq!(latest.at_ms, "2026-11-23T11:59:31Z".parse::<jiff::Timestamp>().unwrap().as_millisecond());
    assert_eq!(s.scalar("SELECT count(*) FROM driver_positions"), 3);

    for (body, path) in [
        (json!({"lat": 91.0, "lng": -79.3, "accuracy_m": 5.0, "at": "2026-11-23T11:50:00Z"}), "lat"),
        (json!({"lat": 43.6, "lng": 181.0, "accuracy_m": 5.0, "at": "2026-11-23T11:50:00Z"}), "lng"),
        (json!({"lat": 43.6, "lng": -79.3, "accuracy_m": -1.0, "at": "2026-11-23T11:50:00Z"}), "accuracy_m"),
        (json!({"lat": 43.6, "lng": -79.3, "accuracy_m": 5.0, "at": "2026-11-21T11:50:00Z"}), "at"),
        (json!({"lat": 43.6, "lng": -79.3, "accuracy_m": 5.0, "at": "2026-11-23T12:10:00Z"}), "at"),
        (json!({"lat": 43.6, "lng": -79.3, "accuracy_m": 5.0, "at": "yesterday"}), "at"),
    ] {
        let r = report(Some("bad"), body).await;
        assert_envelope(&r, 422);
        r.error_at(path);
    }
    report(None, at("2026-11-23T11:57:00Z")).await.error_at("header.Idempotency-Key");

    // The dispatcher sees the latest on the published plan: on the map and by the route.
    let mut v = crate::dashboard_http::Visitor::new(&s);
    let csrf = v.get("/ops/sign-in").await.csrf();
    assert_eq!(v.post("/ops/sign-in", &[("csrf", &csrf), ("token", &op)]).await.status, 303);
    let page = v.get(&format!("/ops/plans/{id}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Last position: 06:59, ±12 m"), "{}", page.body);
    assert_eq!(page.body.matches("<g class=\"driver\" data-route=\"A\">").count(), 1, "{}", page.body);

    // 30 days: what the service received before then is deleted, the rest kept.
    let now = "2026-11-23T12:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
    let old = dropslot_store::Position { lat: 43.6, lng: -79.3, accuracy_m: 5.0, at_ms: now - 31 * 86_400_000 };
    s.app.store.record_position(&ana_id, "old", old, now - 31 * 86_400_000).await.unwrap();
    assert_eq!(s.app.store.purge_positions(now - 30 * 86_400_000).await.unwrap(), 1);
    assert_eq!(s.scalar("SELECT count(*) FROM driver_positions"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pick_up_scan_at_the_merchant_picks_up_through_the_driver_api_once() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    let (_, ana) = driver(&s, &op, "Ana").await;
    let (first, codes) = order(&s, &live, 0).await;
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "pick_up", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    // The pick-up stop lists the drop-offs collected there, with the parcels to scan.
    let day = s.get("/driver/route", &ana).await.body["object"].clone();
    let stop = &day["routes"][0]["stops"][0];
    assert_eq!(stop["kind"], "pick_up", "{day}");
    assert_eq!(stop["shipments"][0]["unique_id"], first.as_str());
    assert_eq!(stop["shipments"][0]["status"], "scheduled");
    let listed: Vec<&str> = stop["shipments"][0]["parcels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pick_up_code"].as_str().unwrap())
        .collect();
    assert_eq!(listed, codes.iter().map(String::as_str).collect::<Vec<_>>());
    let r = s.post("/driver/scans", &ana, &json!({"code": codes[1]})).await;
    assert_eq!((r.status.as_u16(), &r.body["object"]["stop_seq"]), (200, &json!(1)), "{}", r.body);
    // The label's QR code (the tracking URL) names a shipment of two parcels: each is scanned.
    let r = s.post("/driver/scans", &ana, &json!({"code": format!("{}/track/{first}", s.base)})).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("code")[0].contains("2 parcels"), "{}", r.body);

    let pick_up = |key: &str| {
        let req = s.http.post(s.url(&format!("/driver/shipments/{first}/transitions"))).bearer_auth(&ana);
        s.send(req.header("Idempotency-Key", key).json(&json!({"to": "picked_up"})))
    };
    let r = pick_up("pk-1").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let seen: Vec<&str> =
        r.body["object"]["events"].as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(seen, ["scheduled", "to_pick_up", "picked_up"]);
    assert_eq!(r.body["object"]["pick_up_status"], "picked_up");
    // A phone that lost the answer sends it again: replayed, nothing moves twice.
    let again = pick_up("pk-1").await;
    assert_eq!((again.status.as_u16(), &again.headers["idempotent-replayed"]), (200, &"true".parse().unwrap()));
    assert_eq!(again.body["object"]["events"].as_array().unwrap().len(), 3);
    // Another key is another scan: the shipment is past pick-up.
    assert_envelope(&pick_up("pk-2").await, 409);
    // A shipment not collected on this driver's route is a 404.
    let (other, _) = order(&s, &live, 1).await;
    let req = s.http.post(s.url(&format!("/driver/shipments/{other}/transitions"))).bearer_auth(&ana);
    assert_envelope(&s.send(req.header("Idempotency-Key", "pk-3").json(&json!({"to": "picked_up"}))).await, 404);
}
