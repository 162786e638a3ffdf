//! Asynchronous orders (CONTRACT §3.5): `POST /requests/async` validates the whole payload
//! at the door and makes it durable before its 202; the worker turns it into one order,
//! priced like the preview, once, even across a `kill -9`; `GET /requests/{id}` follows it;
//! `same.request.completed` goes to webhooks.

use std::collections::BTreeSet;
use std::time::Duration;

use dropslot::auth::ClientSettings;
use dropslot_store::{NewRequest, Scope};
use serde_json::{Value, json};

use crate::common::{DROP_OFF, GENEROUS_LIMITS, PICK_UP, TestDb, TestServer, assert_envelope, cents};
use crate::receiver::Receiver;

/// A request of `n` drop-offs; drop-off i has 1 to 5 parcels of varied sizes and units.
pub fn large(n: usize) -> Value {
    let units = [("g", 500.0), ("kg", 3.0), ("lb", 15.0), ("oz", 100.0), ("g", 24_000.0)];
    let drop_offs: Vec<Value> = (0..n)
        .map(|i| {
            let parcels: Vec<Value> = (0..=(i % 5))
                .map(|j| {
                    let (unit, values) = units[(i + j) % units.len()];
                    json!({"unit": unit, "values": values})
                })
                .collect();
            json!({
                "address": {"text": DROP_OFF, "person_name": format!("Receiver {i}"), "person_phone": "+1 416 555 0100"},
                "parcels": parcels
            })
        })
        .collect();
    json!({"pick_up_address": {"text": PICK_UP}, "drop_offs": drop_offs})
}

const WITH_HOOKS: &str = "[webhooks]\nallow_private = true\n";

/// A receiver subscribed to `same.request.completed` (the server must allow loopback
/// targets): how the tests learn, without polling, that a request has ended.
async fn subscribed(s: &TestServer) -> Receiver {
    let receiver = Receiver::start().await;
    let r = s.post("/webhooks", &s.token, &json!({"url": receiver.url, "events": ["same.request.completed"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    receiver
}

/// The request ids whose `same.request.completed` has arrived.
fn ended(got: &[crate::receiver::Received]) -> BTreeSet<String> {
    got.iter()
        .filter(|r| r.ok() && r.event() == "same.request.completed")
        .filter_map(|r| r.json()["data"]["request_id"].as_str().map(str::to_string))
        .collect()
}

/// Waits for the request's `same.request.completed`, then reads `GET /requests/{id}`.
async fn finished(s: &TestServer, receiver: &Receiver, request_id: &str) -> Value {
    receiver.wait_until(&format!("{request_id} ending"), |g| ended(g).contains(request_id)).await;
    let r = s.get(&format!("/requests/{request_id}"), &s.token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"].clone()
}

/// The sum over an order's shipments of one money field, in cents.
fn charged(order: &Value, field: &str) -> i64 {
    order["shipments"].as_array().expect("shipments").iter().map(|s| cents(&s[field])).sum()
}

#[tokio::test]
async fn a_request_of_100_drop_offs_becomes_one_order_priced_like_its_preview() {
    let s = TestServer::start_with(WITH_HOOKS).await;
    let receiver = subscribed(&s).await;
    let body = large(100);
    let preview = s.preview(&body).await;
    assert_eq!(preview.status, 200, "{}", preview.body);

    let r = s.post("/requests/async", &s.token, &body).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["code"], 202);
    let object = &r.body["object"];
    assert_eq!(object["status"], "queued");
    assert_eq!(object["drop_offs_count"], 100);
    let request_id = object["request_id"].as_str().expect("a request id").to_string();
    assert!(object["status_url"].as_str().unwrap().ends_with(&format!("/requests/{request_id}")));

    let done = finished(&s, &receiver, &request_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["errors"], json!({}));
    assert!(done["completed_at"].as_str().is_some_and(|t| t.ends_with("-05:00")), "{done}");
    let order = &done["order"];
    let shipments = order["shipments"].as_array().expect("the order's shipments");
    assert_eq!(shipments.len(), 100);
    // One order, one pick-up, 100 drop-off shipments, every parcel, in the database.
    let unique_id = order["unique_id"].as_str().unwrap();
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1);
    assert_eq!(s.scalar("SELECT count(*) FROM pick_up_shipments"), 1);
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments"), 100);
    assert_eq!(s.scalar("SELECT count(*) FROM parcels"), (0..100).map(|i| i % 5 + 1).sum::<i64>());
    let pick_ups: Vec<&Value> = shipments.iter().map(|x| &x["pick_up_shipment"]["unique_id"]).collect();
    assert!(pick_ups.iter().all(|p| *p == pick_ups[0]), "every drop-off shares the one pick-up");
    // Priced as the preview of the same payload: the minimum applies once, to the order.
    let p = &preview.body["object"];
    for field in ["actual_total_price", "actual_total_tax", "total_price", "total_tax", "price_with_tax"] {
        assert_eq!(charged(order, field), cents(&p[field]), "{field}");
    }
    // The same order, read back: the read view is the creation shape plus the lifecycle.
    let read = s.get(&format!("/orders/{unique_id}"), &s.token).await;
    assert_eq!(read.status, 200, "{}", read.body);
    let mut read = read.body["object"].clone();
    for shipment in read["shipments"].as_array_mut().expect("shipments") {
        let view = shipment.as_object_mut().unwrap();
        for lifecycle in ["status", "pick_up_status", "attempts", "max_attempts", "located_by", "events"] {
            assert!(view.remove(lifecycle).is_some(), "{lifecycle}");
        }
    }
    assert_eq!(&read, order, "GET /requests/{{id}}'s order is the order in the creation shape");

    let metrics = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "dropslot_orders_created_total{kind=\"async\"} 1"), "{metrics}");

    let got = receiver.delivered(1).await;
    let event = got[0].json();
    assert_eq!(event["event"], "same.request.completed");
    assert_eq!(event["data"]["request_id"], request_id.as_str());
    assert_eq!(event["data"]["status"], "completed");
    assert_eq!(event["data"]["unique_id"], unique_id);
    assert_eq!(s.scalar("SELECT count(*) FROM webhook_messages WHERE event = 'same.request.completed'"), 1);
}

#[tokio::test]
async fn one_bad_drop_off_is_a_422_with_its_path_and_queues_nothing() {
    let s = TestServer::start().await;
    let mut body = large(100);
    body["drop_offs"][57]["parcels"][0]["unit"] = json!("stone");
    body["drop_offs"][88]["address"]["person_phone"] = json!("12");
    let r = s.post("/requests/async", &s.token, &body).await;
    assert_envelope(&r, 422);
    assert!(!r.error_at("drop_offs.57.parcels.0.unit").is_empty());
    assert!(!r.error_at("drop_offs.88.address.person_phone").is_empty());
    // Over the asynchronous limits: 101 drop-offs, 6 parcels.
    let r = s.post("/requests/async", &s.token, &large(101)).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("drop_offs")[0].contains("at most 100"), "{}", r.body);
    let mut six = large(1);
    six["drop_offs"][0]["parcels"] = json!(vec![json!({"unit": "g", "values": 100}); 6]);
    assert_envelope(&s.post("/requests/async", &s.token, &six).await, 422);
    // A custom code another parcel already holds is refused at the door, at its path.
    let taken = "TAKENCODE00000001";
    let r = s.order(&crate::common::request_with_codes(&[taken])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let mut body = large(3);
    body["drop_offs"][2]["parcels"][0]["custom_code"] = json!(taken);
    let r = s.post("/requests/async", &s.token, &body).await;
    assert_envelope(&r, 422);
    assert!(!r.error_at("drop_offs.2.parcels.0.custom_code").is_empty());
    assert_eq!(s.scalar("SELECT count(*) FROM order_requests"), 0);
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1);
}

#[tokio::test]
async fn an_idempotent_retry_replays_the_202_and_queues_once() {
    let s = TestServer::start_with(WITH_HOOKS).await;
    let receiver = subscribed(&s).await;
    let body = large(4);
    let send = |key: &'static str, body: Value| {
        s.send(s.http.post(s.url("/requests/async")).bearer_auth(&s.token).header("Idempotency-Key", key).json(&body))
    };
    let first = send("async-key-1", body.clone()).await;
    assert_eq!(first.status, 202, "{}", first.body);
    assert!(!first.headers.contains_key("idempotent-replayed"));
    let again = send("async-key-1", body.clone()).await;
    assert_eq!(again.status, 202, "{}", again.body);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, first.body, "the same request id and answer");
    // The same key with another body, or the same body sent to `sync`, is a conflict.
    assert_envelope(&send("async-key-1", large(5)).await, 409);
    let sync = s
        .send(
            s.http
                .post(s.url("/requests/sync"))
                .bearer_auth(&s.token)
                .header("Idempotency-Key", "async-key-1")
                .json(&body),
        )
        .await;
    assert_envelope(&sync, 409);
    assert_eq!(s.scalar("SELECT count(*) FROM order_requests"), 1);
    let id = first.body["object"]["request_id"].as_str().unwrap();
    assert_eq!(finished(&s, &receiver, id).await["status"], "completed");
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1);
}

#[tokio::test]
async fn a_request_is_its_clients_own_and_an_unknown_one_is_a_404() {
    let s = TestServer::start_with(WITH_HOOKS).await;
    let receiver = subscribed(&s).await;
    let r = s.post("/requests/async", &s.token, &large(2)).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["object"]["request_id"].as_str().unwrap().to_string();
    let (_, other_test, other_live, _) = s.new_client("Other").await;
    for token in [other_test.as_str(), other_live.as_str()] {
        assert_envelope(&s.get(&format!("/requests/{id}"), token).await, 404);
    }
    assert_envelope(&s.get("/requests/RQ0000000000AAAAAAAAAAAA", &s.token).await, 404);
    assert_eq!(finished(&s, &receiver, &id).await["status"], "completed");
}

/// A code taken between the door's check and the worker's write: the request fails with
/// the code's path, no order is written, and the webhook says so. (Queued through the store,
/// as the handler would after its check, with the code already taken.)
#[tokio::test]
async fn a_custom_code_taken_meanwhile_fails_the_request_at_its_path() {
    let s = TestServer::start_with(WITH_HOOKS).await;
    let receiver = subscribed(&s).await;
    let code = "MEANWHILE00000001";
    assert_eq!(s.order(&crate::common::request_with_codes(&[code])).await.status, 201);
    let mut body = large(3);
    body["drop_offs"][1]["parcels"][0]["custom_code"] = json!(code);
    let terms = ClientSettings {
        pricing: Some(s.app.settings.pricing.clone()),
        limits: Some(s.app.settings.limits),
        rate_limits: None,
    };
    let scope = Scope { client: dropslot_core::ids::ClientId(1), mode: dropslot_store::Mode::Test };
    let request = NewRequest {
        request_id: "RQ0000000000MEANWHILE001".into(),
        payload: body.to_string(),
        terms: terms.stored().unwrap().unwrap(),
        drop_offs_count: 3,
        created_at: "2026-11-23T07:00:00-05:00".into(),
        due_ms: 0,
        idempotency: None,
        response: String::new(),
    };
    s.app.store.queue_request(scope, request).await.expect("queued");
    s.app.requests_queued.notify_one();
    let done = finished(&s, &receiver, "RQ0000000000MEANWHILE001").await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["order"], Value::Null);
    assert!(done["errors"]["drop_offs.1.parcels.0.custom_code"].is_array(), "{done}");
    assert_eq!(done["completed_at"].as_str().map(|t| t.ends_with("-05:00")), Some(true), "{done}");
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1, "only the order holding the code");
    let event = receiver.received().iter().find(|r| r.event() == "same.request.completed").unwrap().json();
    assert_eq!(event["data"]["status"], "failed");
    assert_eq!(event["data"]["unique_id"], Value::Null);
    assert!(event["data"]["errors"]["drop_offs.1.parcels.0.custom_code"].is_array());
}

/// `kill -9` while the worker writes: after a restart every accepted request completes as
/// exactly one order; none is lost, none is written twice.
#[tokio::test]
async fn a_kill_9_mid_processing_then_a_restart_completes_every_request_once() {
    const N: usize = 10;
    let db = TestDb::fresh();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("dropslot.toml");
    // Short leases, so the restarted process takes over the killed one's claims (requests and
    // webhook deliveries) at once.
    let fragment = format!("{GENEROUS_LIMITS}\n[async_orders]\nlease = \"1s\"\n[webhooks]\ntimeout = \"1s\"\n");
    std::fs::write(&config, fragment).unwrap();
    let config = config.display().to_string();
    let env = [("DROPSLOT_CONFIG", config.as_str()), ("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE", "1")];
    let (mut first, base, token) = crate::cli::spawn_serve_with(&db.url(), &env);
    let token = token.expect("a demo token");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let api = |base: &str, path: &str| format!("{base}{}{path}", crate::common::API);
    let receiver = Receiver::start().await;
    let hook = json!({"url": receiver.url, "events": ["same.request.completed"]});
    let r = http.post(api(&base, "/webhooks")).bearer_auth(&token).json(&hook).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let posts = (0..N).map(|_| {
        let req = http.post(api(&base, "/requests/async")).bearer_auth(&token).json(&large(100));
        async move {
            let r = req.send().await.expect("the server answers");
            assert_eq!(r.status(), 202);
            let body: Value = r.json().await.unwrap();
            body["object"]["request_id"].as_str().unwrap().to_string()
        }
    });
    let ids: BTreeSet<String> = futures_util::future::join_all(posts).await.into_iter().collect();
    // Killed as soon as the first order is in.
    receiver.wait_until("a first request ending", |g| !ended(g).is_empty()).await;
    first.kill().unwrap();
    first.wait().unwrap();
    let completed = db.scalar("SELECT count(*) FROM order_requests WHERE status = 'completed'");
    if db.scalar("SELECT count(*) FROM order_requests WHERE status = 'processing'") == 0 {
        // The kill fell between two claims. Leave what a kill during one leaves (the next
        // request held by the dead process, under a lease still running), so the restart has a
        // claim to take over in every run.
        let until = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() + 1000;
        db.execute(&format!(
            "UPDATE order_requests SET status = 'processing', claim = 7, attempts = attempts + 1, next_attempt_ms = {until}
             WHERE id = (SELECT min(id) FROM order_requests WHERE status = 'queued')"
        ));
    }
    let processing = db.scalar("SELECT count(*) FROM order_requests WHERE status = 'processing'");
    assert!(completed < N as i64 && processing >= 1, "killed mid-way: {completed} completed, {processing} processing");
    assert_eq!(db.scalar("SELECT count(*) FROM orders"), completed, "an order only with its completion");

    let (mut second, _, again) = crate::cli::spawn_serve_with(&db.url(), &env);
    assert!(again.is_none());
    receiver.wait_until("every request ending", |g| ended(g) == ids).await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(db.scalar("SELECT count(*) FROM order_requests WHERE status = 'completed'"), N as i64);
    assert_eq!(db.scalar("SELECT count(*) FROM orders"), N as i64);
    assert_eq!(db.scalar("SELECT count(DISTINCT order_id) FROM order_requests"), N as i64);
    assert_eq!(db.scalar("SELECT count(*) FROM drop_off_shipments"), (N * 100) as i64);
}

/// Random valid payloads, generated by proptest from a fixed seed (so a failure replays):
/// 1 to 5 parcels of any unit and weight up to the largest class, on drop-offs in every
/// zone. Drop-offs: 1 (then `sync` takes it too) to `max`.
fn random_payloads(cases: usize, max: usize) -> Vec<Value> {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    // One address per zone (the offline geocoder places them by their postal prefix).
    const ADDRESSES: [&str; 5] = [
        "290 Bremner Blvd, Toronto, ON M5V 3L9",
        "1 Danforth Ave, Toronto, ON M4C 1A1",
        "1 Dufferin St, Toronto, ON M6H 1A1",
        "1 Yonge St, Toronto, ON M2N 1A1",
        "1 Markham Rd, Toronto, ON M1P 1A1",
    ];
    // Up to the largest size class (25 kg) in each unit, never 0.
    let parcel = prop_oneof![
        (1u32..=25_000).prop_map(|g| json!({"unit": "g", "values": g})),
        (1u32..=25_000).prop_map(|g| json!({"unit": "kg", "values": f64::from(g) / 1000.0})),
        (1u32..=5_500).prop_map(|c| json!({"unit": "lb", "values": f64::from(c) / 100.0})),
        (1u32..=880).prop_map(|o| json!({"unit": "oz", "values": o})),
    ];
    let drop_off = (0..ADDRESSES.len(), prop::collection::vec(parcel, 1..=5)).prop_map(|(a, parcels)| {
        json!({"address": {"text": ADDRESSES[a], "person_name": "Receiver", "person_phone": "+1 416 555 0100"},
               "parcels": parcels})
    });
    let payload = prop::collection::vec(drop_off, 1..=max)
        .prop_map(|drop_offs| json!({"pick_up_address": {"text": PICK_UP}, "drop_offs": drop_offs}));
    let mut runner = TestRunner::deterministic();
    (0..cases).map(|_| payload.new_tree(&mut runner).expect("a payload").current()).collect()
}

/// CONTRACT §3.5's "for any payload": random valid payloads, each previewed, then created
/// asynchronously (and with `sync` too when it has one drop-off); what each created order
/// charges, summed over its shipment orders, is its preview's every total.
#[tokio::test]
async fn random_payloads_are_charged_what_their_preview_quotes() {
    const FIELDS: [&str; 5] = ["actual_total_price", "actual_total_tax", "total_price", "total_tax", "price_with_tax"];
    let s = TestServer::start_with(WITH_HOOKS).await;
    let receiver = subscribed(&s).await;
    let payloads = random_payloads(24, 30);
    assert!(payloads.iter().any(|p| p["drop_offs"].as_array().unwrap().len() == 1), "some go to sync too");
    let mut pending = Vec::new();
    for body in &payloads {
        let preview = s.preview(body).await;
        assert_eq!(preview.status, 200, "{body}: {}", preview.body);
        let quoted: Vec<i64> = FIELDS.iter().map(|f| cents(&preview.body["object"][f])).collect();
        if body["drop_offs"].as_array().unwrap().len() == 1 {
            let r = s.order(body).await;
            assert_eq!(r.status, 201, "{body}: {}", r.body);
            let charged: Vec<i64> = FIELDS.iter().map(|f| charged(&r.body["object"], f)).collect();
            assert_eq!(charged, quoted, "sync, {body}");
        }
        let r = s.post("/requests/async", &s.token, body).await;
        assert_eq!(r.status, 202, "{body}: {}", r.body);
        pending.push((r.body["object"]["request_id"].as_str().unwrap().to_string(), quoted, body));
    }
    let ids: BTreeSet<String> = pending.iter().map(|(id, _, _)| id.clone()).collect();
    receiver.wait_until("every request ending", |g| ended(g).is_superset(&ids)).await;
    for (id, quoted, body) in pending {
        let r = s.get(&format!("/requests/{id}"), &s.token).await;
        assert_eq!(r.body["object"]["status"], "completed", "{}", r.body);
        let order = &r.body["object"]["order"];
        assert_eq!(order["shipments"].as_array().map(Vec::len), body["drop_offs"].as_array().map(Vec::len));
        let charged: Vec<i64> = FIELDS.iter().map(|f| charged(order, f)).collect();
        assert_eq!(charged, quoted, "async, {body}");
    }
}
