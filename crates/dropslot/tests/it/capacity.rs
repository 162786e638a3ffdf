//! Slot capacity and slot choice (CONTRACT §10), on both backends: limits set per date through
//! the admin API, previews that skip a full slot, orders that never oversell it (concurrent,
//! asynchronous, deleted), `GET /slots`, and the errors at their paths. The clock is pinned
//! to Monday 2026-11-23 07:00 in Toronto: the 09:00 pick-up books the 14:00 drop-off slot
//! (`TOR-DT-PM`), then the 18:00 one (`TOR-DT-EV`).

use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, DROP_OFF, PICK_UP, TestServer, assert_envelope, request};

const DATE: &str = "2026-11-23";

/// Sets a drop-off slot's limits on a date (`stops`/`parcels` as given: a number or null).
async fn limit(s: &TestServer, slot: &str, date: &str, limits: Value) -> Value {
    let mut body = json!({"zone": "TOR-DT", "time_slot_code": slot, "date": date});
    for (k, v) in limits.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = s.send(s.http.put(s.url("/admin/capacity")).bearer_auth(ADMIN_TOKEN).json(&body)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"].clone()
}

/// The one-drop-off order request, asking for `slot` on `date` when given.
fn asking(weights: &[f64], slot: Option<&str>) -> Value {
    let mut body = request(weights);
    if let Some(slot) = slot {
        body["drop_offs"][0]["scheduled_date"] = json!(DATE);
        body["drop_offs"][0]["time_slot_code"] = json!(slot);
    }
    body
}

/// An order's drop-off slot (date, code).
fn slot_of(r: &Value) -> (String, String) {
    let d = &r["object"]["shipments"][0]["drop_off_shipment"];
    (
        d["scheduled_date"].as_str().unwrap_or_default().into(),
        d["time_slot"]["code"].as_str().unwrap_or_default().into(),
    )
}

/// The preview's first drop-off slot (date, code).
async fn previewed(s: &TestServer) -> (String, String) {
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = &r.body["object"]["pick_ups"][0]["drop_offs"][0];
    (d["scheduled_date"].as_str().unwrap_or_default().into(), d["time_slot_code"].as_str().unwrap_or_default().into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_slot_sends_the_preview_and_the_next_order_to_the_next_slot() {
    let s = TestServer::start().await;
    let before = previewed(&s).await;
    assert_eq!(before.1, "TOR-DT-PM", "{before:?}");
    let shown = limit(&s, "TOR-DT-PM", DATE, json!({"stops": 2})).await;
    assert_eq!((shown["stops"].as_u64(), shown["parcels"].as_u64()), (Some(2), None), "{shown}");
    for _ in 0..2 {
        let r = s.order(&request(&[500.0])).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(slot_of(&r.body).1, "TOR-DT-PM");
    }
    // Full: the preview books the next slot with room, the same day, as it skips a closed one.
    assert_eq!(previewed(&s).await, (DATE.to_string(), "TOR-DT-EV".to_string()));
    let r = s.order(&request(&[500.0])).await;
    assert_eq!((r.status.as_u16(), slot_of(&r.body).1.as_str()), (201, "TOR-DT-EV"), "{}", r.body);
    // The admin list shows the fill (test orders are counted apart from live ones).
    let r = s.get(&format!("/admin/capacity?date={DATE}"), ADMIN_TOKEN).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let slots = r.body["object"]["slots"].as_array().unwrap();
    let pm = slots.iter().find(|v| v["time_slot_code"] == "TOR-DT-PM").unwrap();
    assert_eq!((pm["stops"].as_u64(), pm["overridden"].as_bool()), (Some(2), Some(true)), "{pm}");
    assert_eq!((pm["test_fill"]["stops"].as_u64(), pm["fill"]["stops"].as_u64()), (Some(2), Some(0)), "{pm}");
    assert_eq!(pm["test_fill"]["parcels"].as_u64(), Some(2), "{pm}");
    let pick_up = slots.iter().find(|v| v["time_slot_code"] == "TOR-PU-AM").unwrap();
    assert_eq!((pick_up["city"].as_str(), pick_up["test_fill"]["stops"].as_u64()), (Some("toronto"), Some(3)));
    // `null` lifts the limit for that date.
    assert!(limit(&s, "TOR-DT-PM", DATE, json!({"stops": null})).await["stops"].is_null());
    assert_eq!(previewed(&s).await.1, "TOR-DT-PM");
}

/// 40 orders at once for a 7-stop slot: exactly 7 are written, the rest get the 422 at the
/// slot's path, and nothing partial is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_concurrent_orders_for_a_seven_stop_slot_write_exactly_seven() {
    let s = TestServer::start().await;
    limit(&s, "TOR-DT-EV", DATE, json!({"stops": 7})).await;
    let body = asking(&[500.0], Some("TOR-DT-EV"));
    let replies = futures_join(&s, &body, 40).await;
    let ok = replies.iter().filter(|r| r.status == 201).count();
    assert_eq!(ok, 7, "accepted: {ok}");
    for r in replies.iter().filter(|r| r.status != 201) {
        assert_envelope(r, 422);
        assert!(r.error_at("drop_offs.0.time_slot_code")[0].contains("full"), "{}", r.body);
    }
    let written = s.scalar("SELECT count(*) FROM drop_off_shipments WHERE slot_code = 'TOR-DT-EV'");
    assert_eq!(written, 7);
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 7, "no order without its shipment");
}

async fn futures_join(s: &TestServer, body: &Value, n: usize) -> Vec<crate::common::Reply> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (http, url, token, body) = (s.http.clone(), s.url("/requests/sync"), s.token.clone(), body.clone());
        tasks.spawn(async move { http.post(url).bearer_auth(token).json(&body).send().await.expect("request") });
    }
    let mut out = Vec::new();
    while let Some(res) = tasks.join_next().await {
        let res = res.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let body: Value = res.json().await.unwrap();
        out.push(crate::common::Reply { status, headers, body });
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_shipment_frees_its_stop_and_a_parcel_limit_binds() {
    let s = TestServer::start().await;
    limit(&s, "TOR-DT-PM", DATE, json!({"stops": 1})).await;
    let mut first = asking(&[500.0], Some("TOR-DT-PM"));
    first["drop_offs"][0]["parcels"][0]["custom_code"] = json!("CAPACITYTEST000001");
    assert_eq!(s.order(&first).await.status, 201);
    let r = s.order(&asking(&[500.0], Some("TOR-DT-PM"))).await;
    assert_envelope(&r, 422);
    assert!(!r.error_at("drop_offs.0.time_slot_code").is_empty(), "{}", r.body);
    // Its only parcel deleted, the shipment is deleted and its stop is free again.
    assert_eq!(s.delete_parcel("CAPACITYTEST000001", &s.token).await.status, 200);
    assert_eq!(s.order(&asking(&[500.0], Some("TOR-DT-PM"))).await.status, 201);
    // A parcel limit: 3 parcels in the evening slot.
    limit(&s, "TOR-DT-EV", DATE, json!({"parcels": 3})).await;
    assert_eq!(s.order(&asking(&[500.0, 600.0], Some("TOR-DT-EV"))).await.status, 201);
    let r = s.order(&asking(&[500.0, 600.0], Some("TOR-DT-EV"))).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("drop_offs.0.time_slot_code")[0].contains("full"), "{}", r.body);
    assert_eq!(s.order(&asking(&[500.0], Some("TOR-DT-EV"))).await.status, 201, "one parcel still fits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_lists_what_can_be_booked_with_what_remains() {
    let s = TestServer::start().await;
    let text = DROP_OFF.replace(' ', "%20").replace(',', "%2C");
    let r = s.get(&format!("/slots?text={text}&days=2"), &s.token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let listed: Vec<(String, String)> = r.body["object"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["scheduled_date"].as_str().unwrap().into(), v["time_slot_code"].as_str().unwrap().into()))
        .collect();
    let day = |d: &str, c: &str| (d.to_string(), c.to_string());
    assert_eq!(
        listed,
        [
            day(DATE, "TOR-DT-PM"),
            day(DATE, "TOR-DT-EV"),
            day("2026-11-24", "TOR-DT-PM"),
            day("2026-11-24", "TOR-DT-EV")
        ]
    );
    assert!(r.body["object"][0]["remaining"].is_null(), "unlimited: {}", r.body);
    assert_eq!(r.body["object"][0]["time_slot_datetime_start"], "2026-11-23T14:00:00-05:00");
    // A limit shows what remains; a full slot is not listed.
    limit(&s, "TOR-DT-EV", DATE, json!({"stops": 1, "parcels": 4})).await;
    limit(&s, "TOR-DT-PM", "2026-11-24", json!({"stops": 0})).await;
    let r = s.get(&format!("/slots?text={text}&days=2"), &s.token).await;
    let all = r.body["object"].as_array().unwrap();
    let ev = all.iter().find(|v| v["scheduled_date"] == DATE && v["time_slot_code"] == "TOR-DT-EV").unwrap();
    assert_eq!(ev["remaining"], json!({"stops": 1, "parcels": 4}));
    assert!(!all.iter().any(|v| v["scheduled_date"] == "2026-11-24" && v["time_slot_code"] == "TOR-DT-PM"));
    // Sunday the 29th is not served; a postal code alone is an address.
    let r = s.get("/slots?text=M5V%203L9&from=2026-11-29&days=1", &s.token).await;
    assert_eq!((r.status.as_u16(), r.body["object"].as_array().map(Vec::len)), (200, Some(0)), "{}", r.body);
    for (query, path) in [
        ("days=2", "query.text"),
        ("text=nowhere", "query.text"),
        ("text=M5V&days=15", "query.days"),
        ("text=M5V&from=23-11-2026", "query.from"),
        ("text=M5V&text=M5V", "query.text"),
        ("text=M5V&colour=red", "query.colour"),
    ] {
        let r = s.get(&format!("/slots?{query}"), &s.token).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at(path).is_empty(), "{query}: {}", r.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_slot_is_booked_or_refused_at_its_path() {
    let s = TestServer::start().await;
    let r = s.order(&asking(&[500.0], Some("TOR-DT-EV"))).await;
    assert_eq!((r.status.as_u16(), slot_of(&r.body)), (201, (DATE.into(), "TOR-DT-EV".into())), "{}", r.body);
    let preview = s.preview(&asking(&[500.0], Some("TOR-DT-EV"))).await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    let cases = [
        (json!({"scheduled_date": DATE}), "drop_offs.0.time_slot_code"),
        (json!({"time_slot_code": "TOR-DT-EV"}), "drop_offs.0.scheduled_date"),
        (json!({"scheduled_date": "23/11/2026", "time_slot_code": "TOR-DT-EV"}), "drop_offs.0.scheduled_date"),
        (json!({"scheduled_date": DATE, "time_slot_code": "TOR-PU-AM"}), "drop_offs.0.time_slot_code"),
        (json!({"scheduled_date": "2026-11-29", "time_slot_code": "TOR-DT-EV"}), "drop_offs.0.time_slot_code"),
        (json!({"scheduled_date": "2026-11-20", "time_slot_code": "TOR-DT-EV"}), "drop_offs.0.time_slot_code"),
    ];
    for (fields, path) in cases {
        let mut body = request(&[500.0]);
        for (k, v) in fields.as_object().unwrap() {
            body["drop_offs"][0][k] = v.clone();
        }
        for r in [s.order(&body).await, s.preview(&body).await] {
            assert_envelope(&r, 422);
            assert!(!r.error_at(path).is_empty(), "{fields}: {}", r.body);
        }
    }
    // Two drop-offs of a preview asking two dates.
    let mut two = request(&[500.0]);
    two["drop_offs"] = json!([
        {"address": {"text": DROP_OFF}, "parcels": [{"unit": "g", "values": 500}], "scheduled_date": DATE, "time_slot_code": "TOR-DT-EV"},
        {"address": {"text": DROP_OFF}, "parcels": [{"unit": "g", "values": 500}], "scheduled_date": "2026-11-24", "time_slot_code": "TOR-DT-EV"},
    ]);
    two["pick_up_address"] = json!({"text": PICK_UP});
    let r = s.preview(&two).await;
    assert_envelope(&r, 422);
    assert!(!r.error_at("drop_offs.1.scheduled_date").is_empty(), "{}", r.body);
}

/// Two asynchronous requests accepted for the last place of a slot: one order is written, the
/// other request ends `failed` with the slot's error at its path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_request_whose_asked_slot_filled_meanwhile_ends_failed() {
    let s = TestServer::start().await;
    limit(&s, "TOR-DT-EV", DATE, json!({"stops": 1})).await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = s.post("/requests/async", &s.token, &asking(&[500.0], Some("TOR-DT-EV"))).await;
        assert_eq!(r.status, 202, "{}", r.body);
        ids.push(r.body["object"]["request_id"].as_str().unwrap().to_string());
    }
    let mut ended = Vec::new();
    for id in &ids {
        let done = async {
            loop {
                let r = s.get(&format!("/requests/{id}"), &s.token).await;
                let status = r.body["object"]["status"].as_str().unwrap_or_default().to_string();
                if status == "completed" || status == "failed" {
                    return r.body["object"].clone();
                }
                tokio::task::yield_now().await;
            }
        };
        ended.push(tokio::time::timeout(std::time::Duration::from_secs(30), done).await.expect("the request ends"));
    }
    let statuses: Vec<&str> = ended.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert!(statuses.contains(&"completed") && statuses.contains(&"failed"), "{ended:?}");
    let failed = ended.iter().find(|e| e["status"] == "failed").unwrap();
    let errors = failed["errors"]["drop_offs.0.time_slot_code"][0].as_str().unwrap_or_default();
    assert!(errors.contains("full"), "{failed}");
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE slot_code = 'TOR-DT-EV'"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_capacity_api_refuses_what_it_cannot_apply() {
    let s = TestServer::start().await;
    let put = |body: Value| {
        let s = &s;
        async move { s.send(s.http.put(s.url("/admin/capacity")).bearer_auth(ADMIN_TOKEN).json(&body)).await }
    };
    let base = json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-PM", "date": DATE});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    for (body, path) in [
        (with("city", json!("toronto")), "zone"),
        (with("zone", json!("NOPE")), "zone"),
        (with("time_slot_code", json!("TOR-PU-AM")), "time_slot_code"),
        (with("date", json!("2026-13-01")), "date"),
        (with("stops", json!(-1)), "stops"),
        (with("parcels", json!(2_000_000)), "parcels"),
        (json!({"city": "toronto", "time_slot_code": "TOR-PU-AM", "date": DATE, "parcels": 3}), "parcels"),
    ] {
        let r = put(body.clone()).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at(path).is_empty(), "{body}: {}", r.body);
    }
    // A pick-up slot's limit: one order, then the next day's pick-up.
    let r = put(json!({"city": "toronto", "time_slot_code": "TOR-PU-AM", "date": DATE, "stops": 0})).await;
    assert_eq!((r.status.as_u16(), r.body["object"]["city"].as_str()), (200, Some("toronto")), "{}", r.body);
    let r = s.preview(&request(&[500.0])).await;
    let p = &r.body["object"]["pick_ups"][0];
    assert_eq!(
        (p["scheduled_date"].as_str(), p["time_slot_code"].as_str()),
        (Some(DATE), Some("TOR-PU-PM")),
        "{}",
        r.body
    );
    let r = s.get("/admin/capacity", ADMIN_TOKEN).await;
    assert_envelope(&r, 422);
    assert!(!r.error_at("query.date").is_empty(), "{}", r.body);
    assert_eq!(
        s.get(&format!("/admin/capacity?date={DATE}"), &s.token).await.status,
        401,
        "a client token is not the admin's"
    );
}

/// A replayed order (the same `Idempotency-Key` and body) takes no second place: it answers
/// the first order again even though its slot is now full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_replay_takes_no_second_place() {
    let s = TestServer::start().await;
    limit(&s, "TOR-DT-EV", DATE, json!({"stops": 1})).await;
    let body = asking(&[500.0], Some("TOR-DT-EV"));
    let send = || {
        s.send(
            s.http.post(s.url("/requests/sync")).bearer_auth(&s.token).header("Idempotency-Key", "slot-1").json(&body),
        )
    };
    let first = send().await;
    assert_eq!(first.status, 201, "{}", first.body);
    let again = send().await;
    assert_eq!(
        (again.status.as_u16(), again.headers.get("idempotent-replayed").is_some()),
        (201, true),
        "{}",
        again.body
    );
    assert_eq!(again.body, first.body);
    let r = s.get(&format!("/admin/capacity?date={DATE}"), ADMIN_TOKEN).await;
    let ev = r.body["object"]["slots"].as_array().unwrap().iter().find(|v| v["time_slot_code"] == "TOR-DT-EV").cloned();
    assert_eq!(ev.unwrap()["test_fill"]["stops"], 1);
    // Another order for the slot is refused: the one place is the first order's.
    assert_envelope(&s.order(&body).await, 422);
}
