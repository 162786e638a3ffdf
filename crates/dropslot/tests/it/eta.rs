//! Live ETAs (CONTRACT §14) on both backends: publishing gives each drop-off a window inside
//! its slot; a driver who runs late moves the later windows (tracking JSON, page and reads
//! follow), and a window past the slot says so (`late: true`).

use serde_json::{Value, json};

use crate::common::{PICK_UP, TestServer};
use crate::driver_api::{DATE, operator};
use crate::receiver::Receiver;

const HOOKS: &str = "[webhooks]\nallow_private = true\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms\"\n";

/// The slot of the orders below, in UTC: TOR-DT-PM is 14:00–18:00 in Toronto (UTC−5).
const SLOT: (&str, &str) = ("2026-11-23T19:00:00Z", "2026-11-23T23:00:00Z");

fn ts(v: &Value) -> jiff::Timestamp {
    v.as_str().unwrap_or_else(|| panic!("{v}")).parse().unwrap()
}

async fn tracking(s: &TestServer, code: &str) -> Value {
    let res = s.http.get(format!("{}/track/{code}", s.base)).header("Accept", "application/json").send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// Driver Ana (a van of 20 parcels, 08:00–22:00 on Mondays) and `n` one-parcel drop-offs of
/// the afternoon slot, spread north and east of the downtown zone: Ana's token and the
/// drop-offs' tracking codes.
pub(crate) async fn ana_and_orders(s: &TestServer, op: &str, live: &str, n: i32) -> (String, Vec<String>) {
    let body = json!({
        "name": "Ana", "phone": "+1 416 555 0199", "depot": "YYZ1",
        "vehicle": {"name": "Van", "capacity_parcels": 20, "capacity_kg": 500},
        "shift": {"start": "08:00", "end": "22:00"}, "weekdays": ["mon"]
    });
    let r = s.post("/ops/drivers", op, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let ana = r.body["object"]["sign_in_url"].as_str().unwrap().split_once("#token=").unwrap().1.to_string();
    let mut codes = Vec::new();
    for i in 0..n {
        let order = json!({
            "pick_up_address": {"text": PICK_UP},
            "drop_offs": [{
                "address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "lat": 43.636 + 0.004 * f64::from(i),
                            "lng": -79.39 + 0.003 * f64::from(i % 3), "person_name": format!("Receiver {i}"),
                            "person_phone": "+1 416 555 0100"},
                "scheduled_date": DATE, "time_slot_code": "TOR-DT-PM",
                "parcels": [{"unit": "g", "values": 1000}]
            }]
        });
        let r = s.post("/requests/sync", live, &order).await;
        assert_eq!(r.status, 201, "{}", r.body);
        codes.push(r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string());
    }
    (ana, codes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_running_late_moves_the_later_windows_and_a_window_past_the_slot_says_so() {
    let s = TestServer::start_with(HOOKS).await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let rx = Receiver::start().await;
    let r = s.post("/webhooks", &live, &json!({"url": rx.url, "events": ["same.shipment.in_transit"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let (ana, codes) = ana_and_orders(&s, &op, &live, 10).await;
    // Not planned yet: no ETA anywhere.
    assert!(tracking(&s, &codes[0]).await.get("eta").is_none());
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let plan = &r.body["object"];
    assert_eq!(plan["unassigned"], json!([]), "{plan}");
    let id = plan["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);

    // Published: each drop-off has a window of at most 30 minutes inside its slot, in route order.
    let day = s.get("/driver/route", &ana).await.body["object"].clone();
    let order: Vec<String> = day["routes"][0]["stops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["shipments"][0]["unique_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order.len(), 10, "{day}");
    let (open, close) = (SLOT.0.parse::<jiff::Timestamp>().unwrap(), SLOT.1.parse::<jiff::Timestamp>().unwrap());
    let mut planned = Vec::new();
    for (k, code) in order.iter().enumerate() {
        let t = tracking(&s, code).await;
        let (from, to) = (ts(&t["eta"]["from"]), ts(&t["eta"]["to"]));
        assert_eq!((t["stops_before"].as_u64(), &t["eta"]["late"]), (Some(k as u64), &json!(false)), "{t}");
        assert!(open <= from && from < to && to <= close, "{t}");
        assert!((to - from).get_minutes() <= 30, "{t}");
        planned.push(from);
    }
    let read = s.get(&format!("/shipments/{}", order[0]), &live).await;
    assert_eq!(read.body["object"]["eta"]["from"], tracking(&s, &order[0]).await["eta"]["from"]);

    // At the depot, loaded and started on time.
    for code in &codes {
        for to in ["to_pick_up", "picked_up", "processing"] {
            assert_eq!(s.ops_move(&ops, code, &json!({"to": to})).await.status, 200);
        }
    }
    let all: Vec<String> = day["routes"][0]["stops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|st| st["shipments"][0]["parcels"].as_array().unwrap().iter())
        .map(|p| p["pick_up_code"].as_str().unwrap().to_string())
        .collect();
    let req = s.http.post(s.url("/driver/route/start")).bearer_auth(&ana).header("Idempotency-Key", "start");
    assert_eq!(s.send(req.json(&json!({"scanned": all}))).await.status, 200);
    // "Out for delivery" webhooks carry each shipment's window.
    for hook in rx.delivered(10).await {
        let data = &hook.json()["data"];
        let k = order.iter().position(|c| data["unique_id"] == c.as_str()).unwrap();
        assert_eq!(ts(&data["eta"]["from"]), planned[k], "{data}");
    }

    // The first stop is served an hour after the slot opens: every later window moves later.
    s.app.clock.set("2026-11-23T20:00:00Z".parse().unwrap());
    let deliver = |code: String, key: &'static str| {
        let req = s.http.post(s.url(&format!("/driver/shipments/{code}/transitions"))).bearer_auth(&ana);
        let body = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]});
        s.send(req.header("Idempotency-Key", key).json(&body))
    };
    assert_eq!(deliver(order[0].clone(), "d1").await.status, 200);
    let first = tracking(&s, &order[0]).await;
    assert!(first.get("eta").is_none() && first["status"] == "delivered", "served: no ETA any more: {first}");
    let mut moved = Vec::new();
    for (k, code) in order.iter().enumerate().skip(1) {
        let t = tracking(&s, code).await;
        assert_eq!(t["stops_before"].as_u64(), Some(k as u64 - 1), "one stop fewer before it: {t}");
        let from = ts(&t["eta"]["from"]);
        assert!(from > planned[k], "stop {k}: {from} not later than planned {}", planned[k]);
        moved.push(t);
    }
    // The page says it too.
    let page = s.http.get(format!("{}/track/{}", s.base, order[1])).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("id=\"eta\"") && page.contains("next stop"), "{page}");

    // Far behind: at 17:40 the driver is still near the second stop. The last stops fall past
    // the slot's end: their windows leave it, and say so; the others stay inside it.
    s.app.clock.set("2026-11-23T22:40:00Z".parse().unwrap());
    let req = s.http.post(s.url("/driver/positions")).bearer_auth(&ana).header("Idempotency-Key", "p1");
    let at = json!({"lat": 43.640, "lng": -79.387, "accuracy_m": 10.0, "at": "2026-11-23T22:40:00Z"});
    assert_eq!(s.send(req.json(&at)).await.status, 201);
    let mut late = 0;
    for code in order.iter().skip(1) {
        let t = tracking(&s, code).await;
        let (from, to) = (ts(&t["eta"]["from"]), ts(&t["eta"]["to"]));
        if t["eta"]["late"] == true {
            late += 1;
            assert!(to > close, "a late window lies past the slot: {t}");
        } else {
            assert!(open <= from && to <= close, "inside the slot unless late: {t}");
        }
    }
    assert!(late >= 1, "the last stops are late");
    let last = s.get(&format!("/shipments/{}", order[9]), &live).await;
    assert_eq!(last.body["object"]["eta"]["late"], true, "{}", last.body);
    let page = s.http.get(format!("{}/track/{}", s.base, order[9])).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Running late"), "{page}");
}
