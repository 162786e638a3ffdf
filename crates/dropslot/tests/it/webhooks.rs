//! Webhooks end to end (issue 9): real receivers over real HTTP, signatures checked by the
//! Standard Webhooks reference library, retries on a schedule shortened by configuration.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestServer, assert_envelope, request, request_with_codes};
use crate::receiver::{Answer, Received, Receiver, verify};

/// Loopback receivers allowed; retries after 100 ms.
const FAST: &str = "[webhooks]\nallow_private = true\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms\"\n";

/// `POST /webhooks` → the endpoint object (with its secret).
async fn subscribe(s: &TestServer, token: &str, body: Value) -> Value {
    let r = s.post("/webhooks", token, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"].clone()
}

async fn order(s: &TestServer, token: &str, body: &Value) -> Value {
    let r = s.post("/requests/sync", token, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"].clone()
}

fn tracking(order: &Value) -> String {
    order["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()
}

/// The endpoint once the service has disabled it (it does so just after the failing
/// attempt's answer arrives), waited for at most 30 s.
async fn disabled(s: &TestServer, id: i64) -> Value {
    let poll = async {
        loop {
            let r = s.get(&format!("/webhooks/{id}"), &s.token).await;
            if r.body["object"]["enabled"] == false {
                return r.body["object"].clone();
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), poll).await.expect("the endpoint is disabled")
}

/// Every signature verifies with the reference library; the auth header, User-Agent and
/// Content-Type arrive; the bodies carry what CONTRACT §5 lists.
#[tokio::test]
async fn deliveries_are_signed_and_carry_the_auth_header() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    let e =
        subscribe(&s, &s.token, json!({"url": rx.url, "auth_header": {"name": "X-Api-Key", "value": "k-secret-9876"}}))
            .await;
    let secret = e["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{e}");
    assert_eq!(e["auth_header"], json!({"name": "X-Api-Key", "value_last4": "9876"}));
    assert_eq!(e["events"], json!(["*"]));
    let o = order(&s, &s.token, &request_with_codes(&["HOOKCODE0000000001", "HOOKCODE0000000002"])).await;
    let got = rx.delivered(3).await;
    assert_eq!(verify(secret, &got), [true, true, true]);
    assert_eq!(verify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &got[..1]), [false], "a wrong secret fails");
    for r in &got {
        assert_eq!(r.header("x-api-key"), "k-secret-9876");
        assert!(r.header("user-agent").starts_with("dropslot-webhooks/"), "{:?}", r.headers);
        assert_eq!(r.header("content-type"), "application/json");
        assert!(r.id().starts_with("msg_"));
    }
    let events: Vec<String> = got.iter().map(Received::event).collect();
    assert_eq!(events, ["same.shipment.scheduled", "same.parcel.created", "same.parcel.created"]);
    let d = &got[0].json()["data"];
    let shipment = &o["shipments"][0];
    assert_eq!(d["tracking_code"], tracking(&o));
    assert_eq!(d["unique_id"], tracking(&o));
    assert_eq!(d["id"], shipment["drop_off_shipment"]["id"]);
    assert_eq!(d["status"], "scheduled");
    assert_eq!(d["previous_status"], Value::Null);
    assert_eq!(d["sequence"], 1);
    assert!(d["event_id"].as_i64().is_some());
    assert_eq!(d["order_unique_id"], o["unique_id"]);
    assert_eq!(d["shipment_order_unique_id"], shipment["shipment_order_unique_id"]);
    assert_eq!(d["scheduled_date"], shipment["drop_off_shipment"]["scheduled_date"]);
    assert_eq!(d["time_slot"]["code"], shipment["drop_off_shipment"]["time_slot"]["code"]);
    assert_eq!(d["trigger_datetime"], o["created_at"], "local time of the city");
    assert_eq!(d["parcels"][1]["custom_code"], "HOOKCODE0000000002");
    assert_eq!(d["parcels"][0]["pick_up_code"], shipment["parcels"][0]["pick_up_code"]);
    let p = &got[1].json()["data"];
    assert_eq!(p["custom_code"], "HOOKCODE0000000001");
    assert_eq!(p["pickup_code"], shipment["parcels"][0]["pick_up_code"]);
    assert_eq!(p["tracking_code"], tracking(&o));
    assert_eq!(p["drop_off"]["receiver_name"], "Jane Doe");
    assert_eq!(p["extra_data"]["need_signature"], false);
    assert_eq!(p["pick_up"]["picked_at"], Value::Null);
    // The auth header's value is never shown again.
    let listed = s.get("/webhooks", &s.token).await;
    assert_eq!(listed.status, 200);
    assert!(!listed.body.to_string().contains("k-secret-9876"), "{}", listed.body);
    assert!(!listed.body.to_string().contains(secret), "the secret is shown once");
}

/// `parcel_size` is the size class's display name in the price list the order was priced
/// with (docs/webhooks.md): a client's own list names its sizes (a default code renamed, a
/// code of its own) for its sync and async orders alike; the default list still names the
/// demo client's.
#[tokio::test]
async fn parcel_created_names_sizes_from_the_clients_own_price_list() {
    let s = TestServer::start_with(FAST).await;
    let (id, test, _, _) = s.new_client("Colis Express").await;
    let terms = json!({"pricing": {"min_price": "20.00", "payment_type": {"id": 2, "code": "card", "name": "Card"},
    "sizes": [
        {"code": "small", "name": "Petit colis", "max_grams": 1000, "price": "7.50", "note": "Jusqu'à 1 kg"},
        {"code": "bulky", "name": "Colis volumineux", "max_grams": 30000, "price": "19.00", "note": "Jusqu'à 30 kg"}
    ]}});
    let r =
        s.send(s.http.put(s.url(&format!("/admin/clients/{id}/settings"))).bearer_auth(ADMIN_TOKEN).json(&terms)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (own, default) = (Receiver::start().await, Receiver::start().await);
    subscribe(&s, &test, json!({"url": own.url, "events": ["same.parcel.created"]})).await;
    subscribe(&s, &s.token, json!({"url": default.url, "events": ["same.parcel.created"]})).await;
    let sizes = |got: &[Received]| -> Vec<(String, String)> {
        got.iter()
            .map(|r| {
                let d = &r.json()["data"];
                (d["parcel_code"].as_str().unwrap().into(), d["parcel_size"].as_str().unwrap().into())
            })
            .collect()
    };
    let o = order(&s, &test, &request(&[500.0, 5000.0])).await;
    let codes: Vec<&Value> =
        o["shipments"][0]["parcels"].as_array().unwrap().iter().map(|p| &p["parcel_size_code"]).collect();
    assert_eq!(codes, [&json!("small"), &json!("bulky")]);
    let expected = [("small".to_string(), "Petit colis".to_string()), ("bulky".into(), "Colis volumineux".into())];
    assert_eq!(sizes(&own.delivered(2).await), expected);
    // The asynchronous worker writes under the terms the request was accepted with.
    let r = s.post("/requests/async", &test, &request(&[500.0, 5000.0])).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(sizes(&own.delivered(4).await[2..]), expected);
    order(&s, &s.token, &request(&[500.0, 3000.0])).await;
    let expected = [("small".to_string(), "Small".to_string()), ("medium".into(), "Medium".into())];
    assert_eq!(sizes(&default.delivered(2).await), expected);
}

/// A receiver that fails twice then succeeds gets the event again with the same
/// `webhook-id`; the shipment's later events wait for it, so order holds under retries.
#[tokio::test]
async fn retries_keep_the_webhook_id_and_the_order() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    rx.plan([Answer::status(500), Answer::status(503)]);
    let e = subscribe(&s, &s.token, json!({"url": rx.url, "events": ["*"]})).await;
    let id = e["id"].as_i64().unwrap();
    let o = order(&s, &s.token, &request(&[500.0])).await;
    let r = s.scenario("happy", &json!({"drop_off_shipment_unique_ids": [tracking(&o)]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // scheduled, parcel.created, then to_pick_up … delivered.
    let got = rx.delivered(7).await;
    let all = rx.received();
    assert_eq!(all[0].id(), all[1].id());
    assert_eq!(all[1].id(), all[2].id(), "the same webhook-id on every attempt");
    assert_eq!(all.iter().map(|r| r.answered).take(3).collect::<Vec<_>>(), [500, 503, 200]);
    let kinds: Vec<String> = got.iter().map(Received::event).collect();
    assert_eq!(
        kinds,
        [
            "same.shipment.scheduled",
            "same.parcel.created",
            "same.shipment.to_pick_up",
            "same.shipment.picked_up",
            "same.shipment.processing",
            "same.shipment.in_transit",
            "same.shipment.delivered"
        ]
    );
    let seqs: Vec<i64> = got.iter().filter_map(|r| r.json()["data"]["sequence"].as_i64()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    assert_eq!(verify(e["secret"].as_str().unwrap(), &got), vec![true; 7]);
    // The log shows the three attempts of the first delivery.
    let log = s.get(&format!("/webhooks/{id}/deliveries?limit=100"), &s.token).await;
    assert_eq!(log.status, 200, "{}", log.body);
    let deliveries = log.body["object"]["deliveries"].as_array().unwrap();
    let first = deliveries.last().unwrap();
    assert_eq!(first["event"], "same.shipment.scheduled");
    assert_eq!(first["state"], "delivered");
    assert_eq!(first["attempts"], 3);
    let statuses: Vec<&Value> = first["log"].as_array().unwrap().iter().map(|a| &a["status"]).collect();
    assert_eq!(statuses, [&json!(500), &json!(503), &json!(200)]);
    assert_eq!(first["log"][0]["response"], "received");
    assert!(first["log"][0]["latency_ms"].as_i64().is_some());
}

/// An endpoint subscribed to one kind gets only that kind.
#[tokio::test]
async fn an_endpoint_gets_only_the_kinds_it_subscribes_to() {
    let s = TestServer::start_with(FAST).await;
    let (only, all) = (Receiver::start().await, Receiver::start().await);
    subscribe(&s, &s.token, json!({"url": only.url, "events": ["same.shipment.delivered"]})).await;
    subscribe(&s, &s.token, json!({"url": all.url, "events": ["*"]})).await;
    let o = order(&s, &s.token, &request(&[500.0])).await;
    s.scenario("happy", &json!({"drop_off_shipment_unique_ids": [tracking(&o)]})).await;
    all.delivered(7).await;
    let got = only.delivered(1).await;
    assert_eq!(got[0].event(), "same.shipment.delivered");
    assert_eq!(got[0].json()["data"]["previous_status"], "in_transit");
    // Everything is delivered to the other endpoint; nothing more came here.
    assert_eq!(only.received().len(), 1);
}

/// A receiver that hangs past the 15 s deadline delays no other endpoint and loses nothing:
/// its event comes again, with the same id, after the timeout.
#[tokio::test]
async fn a_hanging_receiver_blocks_no_one_and_loses_nothing() {
    let s = TestServer::start_with(FAST).await;
    let (hang, fast) = (Receiver::start().await, Receiver::start().await);
    let hung = Answer { status: 200, hang: true };
    hang.plan(vec![hung; 4]);
    let h = subscribe(&s, &s.token, json!({"url": hang.url, "events": ["same.shipment.scheduled"]})).await;
    subscribe(&s, &s.token, json!({"url": fast.url, "events": ["same.shipment.scheduled"]})).await;
    for _ in 0..4 {
        order(&s, &s.token, &request(&[500.0])).await;
    }
    // While the first receiver hangs on all four events, the other one gets them all.
    hang.wait_until("four hanging requests", |g| g.len() >= 4).await;
    fast.delivered(4).await;
    assert_eq!(hang.received().len(), 4, "the other endpoint was served before any hung attempt ended");
    // After the 15 s deadline each attempt fails and is retried: same webhook-id, answered.
    let got =
        hang.wait_until("the retries of the hung events", |g| g.len() >= 8 && g[4..].iter().all(Received::ok)).await;
    let first: BTreeSet<&str> = got[..4].iter().map(Received::id).collect();
    let again: BTreeSet<&str> = got[4..].iter().map(Received::id).collect();
    assert_eq!(first, again, "the same four webhook-ids, sent again");
    let log = s.get(&format!("/webhooks/{}/deliveries", h["id"]), &s.token).await;
    let first = log.body["object"]["deliveries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(first["log"][0]["status"], Value::Null, "{first}");
    assert!(first["log"][0]["error"].as_str().unwrap().contains("No answer within 15"), "{first}");
}

/// Endpoints are per mode: a test endpoint gets test events only, is a 404 to the live
/// token and to another client; ops tokens are refused. Deletion and ops moves emit too.
#[tokio::test]
async fn test_and_live_are_separate() {
    let s = TestServer::start_with(FAST).await;
    let (_, test, live, ops) = s.new_client("Separate").await;
    let (test_rx, live_rx) = (Receiver::start().await, Receiver::start().await);
    let t = subscribe(
        &s,
        &test,
        json!({"url": test_rx.url, "events": ["same.shipment.scheduled", "same.shipment.deleted"]}),
    )
    .await;
    let l = subscribe(
        &s,
        &live,
        json!({"url": live_rx.url, "events": ["same.shipment.scheduled", "same.shipment.to_pick_up"]}),
    )
    .await;
    assert_envelope(&s.get(&format!("/webhooks/{}", t["id"]), &live).await, 404);
    assert_envelope(&s.get(&format!("/webhooks/{}", t["id"]), &s.token).await, 404);
    assert_envelope(&s.get("/webhooks", &ops).await, 403);
    let listed = s.get("/webhooks", &live).await;
    assert_eq!(listed.body["object"]["webhooks"].as_array().unwrap().len(), 1);
    assert_eq!(listed.body["object"]["webhooks"][0]["id"], l["id"]);
    // A test order and its deletion → the test endpoint; a live order and an ops move → live.
    let to = order(&s, &test, &request_with_codes(&["SEPARATECODE000001"])).await;
    assert_eq!(s.delete_parcel("SEPARATECODE000001", &test).await.status, 200);
    let lo = order(&s, &live, &request(&[500.0])).await;
    let r = s.ops_move(&ops, &tracking(&lo), &json!({"to": "to_pick_up"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = test_rx.delivered(2).await;
    assert_eq!(
        got.iter().map(Received::event).collect::<Vec<_>>(),
        ["same.shipment.scheduled", "same.shipment.deleted"]
    );
    assert!(got.iter().all(|r| r.json()["data"]["tracking_code"] == tracking(&to)));
    assert_eq!(got[1].json()["data"]["actor"], "client");
    let got = live_rx.delivered(2).await;
    assert_eq!(
        got.iter().map(Received::event).collect::<Vec<_>>(),
        ["same.shipment.scheduled", "same.shipment.to_pick_up"]
    );
    assert!(got.iter().all(|r| r.json()["data"]["tracking_code"] == tracking(&lo)));
    assert_eq!(got[1].json()["data"]["actor"], "ops");
    assert_eq!((test_rx.received().len(), live_rx.received().len()), (2, 2));
}

/// Rotation: both secrets sign (two space-separated signatures) until the old one's 24 h
/// window ends, then only the new one.
#[tokio::test]
async fn rotation_signs_with_both_secrets_for_its_window() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    let e = subscribe(&s, &s.token, json!({"url": rx.url})).await;
    let old = e["secret"].as_str().unwrap().to_string();
    let r = s.post(&format!("/webhooks/{}/rotate-secret", e["id"]), &s.token, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let new = r.body["object"]["secret"].as_str().unwrap().to_string();
    assert_ne!(old, new);
    assert!(r.body["object"]["previous_secret_expires_at"].is_string(), "{}", r.body);
    assert_eq!(s.post(&format!("/webhooks/{}/test", e["id"]), &s.token, &json!({})).await.status, 202);
    let got = rx.delivered(1).await;
    assert_eq!(got[0].header("webhook-signature").split(' ').count(), 2);
    assert_eq!(verify(&old, &got), [true]);
    assert_eq!(verify(&new, &got), [true]);
    assert_eq!(got[0].event(), "same.webhook.test");
    // A day and a second later the old secret no longer signs.
    s.app.clock.advance(jiff::SignedDuration::from_secs(86_401));
    assert_eq!(s.post(&format!("/webhooks/{}/test", e["id"]), &s.token, &json!({})).await.status, 202);
    let got = rx.delivered(2).await;
    assert_eq!(got[1].header("webhook-signature").split(' ').count(), 1);
    assert_eq!(verify(&old, &got[1..]), [false]);
    assert_eq!(verify(&new, &got[1..]), [true]);
}

/// Test event, resend (the same webhook-id again), and a 410 that disables the endpoint at
/// once: its status says so, nothing more is sent, and resend is refused until re-enabled.
#[tokio::test]
async fn resend_test_event_and_gone_disables() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    let e = subscribe(&s, &s.token, json!({"url": rx.url, "description": "orders system"})).await;
    let id = e["id"].as_i64().unwrap();
    let r = s.post(&format!("/webhooks/{id}/test"), &s.token, &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let delivery = r.body["object"]["id"].as_i64().unwrap();
    let first = rx.delivered(1).await;
    let r = s.post(&format!("/webhooks/deliveries/{delivery}/resend"), &s.token, &json!({})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    let got = rx.delivered(2).await;
    assert_eq!(got[1].id(), first[0].id(), "a resend is the same message");
    assert_eq!(got[1].body, first[0].body);
    // Another client cannot resend it.
    let (_, other, _, _) = s.new_client("Other").await;
    assert_envelope(&s.post(&format!("/webhooks/deliveries/{delivery}/resend"), &other, &json!({})).await, 404);
    // 410 Gone: disabled at once.
    rx.plan([Answer::status(410)]);
    order(&s, &s.token, &request(&[500.0])).await;
    rx.wait_until("the 410", |g| g.iter().any(|r| r.answered == 410)).await;
    let shown = disabled(&s, id).await;
    assert_eq!(shown["status"], "disabled_by_service");
    assert!(shown["disabled_reason"].as_str().unwrap().contains("410"), "{shown}");
    let log = s.get(&format!("/webhooks/{id}/deliveries"), &s.token).await;
    let states: BTreeSet<String> = log.body["object"]["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["state"].as_str().unwrap().to_string())
        .collect();
    assert!(!states.contains("pending") && !states.contains("waiting"), "{states:?}");
    assert_envelope(&s.post(&format!("/webhooks/deliveries/{delivery}/resend"), &s.token, &json!({})).await, 409);
    assert_envelope(&s.post(&format!("/webhooks/{id}/test"), &s.token, &json!({})).await, 409);
    // Re-enabled: nothing is replayed by itself; a resend works again.
    let before = rx.received().len();
    let r = s
        .send(s.http.patch(s.url(&format!("/webhooks/{id}"))).bearer_auth(&s.token).json(&json!({"enabled": true})))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["status"], "enabled");
    assert_eq!(s.post(&format!("/webhooks/deliveries/{delivery}/resend"), &s.token, &json!({})).await.status, 202);
    let got = rx.delivered(3).await;
    assert_eq!(got[2].id(), first[0].id());
    assert_eq!(rx.received().len(), before + 1, "only the resend was sent");
}

/// An endpoint with no success for the configured time is disabled (5 days by default).
#[tokio::test]
async fn an_endpoint_failing_too_long_is_disabled() {
    let s = TestServer::start_with(
        "[webhooks]\nallow_private = true\nretry_schedule = \"50ms,50ms,50ms,50ms\"\ndisable_after = \"1ms\"\n",
    )
    .await;
    let rx = Receiver::start().await;
    rx.answer_by_default(Answer::status(500));
    let e = subscribe(&s, &s.token, json!({"url": rx.url, "events": ["same.shipment.scheduled"]})).await;
    order(&s, &s.token, &request(&[500.0])).await;
    rx.wait_until("two failures", |g| g.len() >= 2).await;
    let shown = disabled(&s, e["id"].as_i64().unwrap()).await;
    assert_eq!(shown["status"], "disabled_by_service");
    assert!(shown["failing_since"].is_string());
    assert_eq!(shown["last_error"], "no successful delivery for too long");
    assert!(rx.received().len() <= 2, "nothing is sent after the endpoint is disabled");
}

/// Endpoint validation: every rule answers 422 at its path; PATCH and DELETE work; the
/// delivery log pages with a cursor.
#[tokio::test]
async fn endpoint_validation_update_delete_and_paging() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    for (body, path) in [
        (json!({}), "url"),
        (json!({"url": "ftp://example.com/x"}), "url"),
        (json!({"url": rx.url, "events": ["same.shipment.lost"]}), "events.0"),
        (json!({"url": rx.url, "events": []}), "events"),
        (json!({"url": rx.url, "events": ["*", "same.shipment.delivered"]}), "events"),
        (json!({"url": rx.url, "auth_header": {"name": "Bad Name", "value": "x"}}), "auth_header"),
        (json!({"url": rx.url, "auth_header": {"name": "X-Key", "value": "a\r\nInjected: 1"}}), "auth_header"),
        (json!({"url": rx.url, "auth_header": {"name": "webhook-signature", "value": "v1,forged"}}), "auth_header"),
        (json!({"url": rx.url, "description": "d".repeat(501)}), "description"),
    ] {
        let r = s.post("/webhooks", &s.token, &body).await;
        assert_envelope(&r, 422);
        r.error_at(path);
    }
    assert_envelope(&s.post("/webhooks", &s.token, &json!({"url": rx.url, "colour": "red"})).await, 400);
    let e = subscribe(&s, &s.token, json!({"url": rx.url, "events": ["same.shipment.scheduled"]})).await;
    let id = e["id"].as_i64().unwrap();
    let patch = |body: Value| s.http.patch(s.url(&format!("/webhooks/{id}"))).bearer_auth(&s.token).json(&body);
    let r = s
        .send(patch(
            json!({"events": ["*"], "description": "all", "auth_header": {"name": "X-Key", "value": "abcdefgh"}}),
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["events"], json!(["*"]));
    assert_eq!(r.body["object"]["auth_header"]["value_last4"], "efgh");
    assert!(r.body["object"].get("secret").is_none());
    let r = s.send(patch(json!({"auth_header": null}))).await;
    assert_eq!(r.body["object"]["auth_header"], Value::Null);
    assert_envelope(&s.send(patch(json!({"url": "gopher://x"}))).await, 422);
    // Three orders → three scheduled + three parcel.created deliveries; pages of two.
    for _ in 0..3 {
        order(&s, &s.token, &request(&[500.0])).await;
    }
    rx.delivered(6).await;
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let r = s.get(&format!("/webhooks/{id}/deliveries?limit=2&cursor={cursor}"), &s.token).await;
        assert_eq!(r.status, 200, "{}", r.body);
        for d in r.body["object"]["deliveries"].as_array().unwrap() {
            seen.push(d["id"].as_i64().unwrap());
        }
        match r.body["object"]["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen.len(), 6);
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first: {seen:?}");
    assert_envelope(&s.get(&format!("/webhooks/{id}/deliveries?cursor=nope"), &s.token).await, 422);
    let r = s.send(s.http.delete(s.url(&format!("/webhooks/{id}"))).bearer_auth(&s.token)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_envelope(&s.get(&format!("/webhooks/{id}"), &s.token).await, 404);
    assert_envelope(&s.get(&format!("/webhooks/{id}/deliveries"), &s.token).await, 404);
    // Deleted: later events are not queued for it.
    order(&s, &s.token, &request(&[500.0])).await;
    assert_eq!(s.scalar(&format!("SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = {id}")), 6);
    let _ = ADMIN_TOKEN;
}

/// Internal targets are refused at creation (literal addresses, and a name that resolves to
/// loopback) unless the operator allows private targets.
#[tokio::test]
async fn internal_targets_are_refused() {
    let s = TestServer::start().await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.8/",
        "http://192.168.1.1/",
        "http://[::ffff:127.0.0.1]/",
    ] {
        let r = s.post("/webhooks", &s.token, &json!({"url": url})).await;
        assert_envelope(&r, 422);
        assert!(r.error_at("url")[0].contains("internal address"), "{url}: {}", r.body);
    }
}

/// `/metrics` counts queued and delivered webhook deliveries.
#[tokio::test]
async fn metrics_count_deliveries() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    subscribe(&s, &s.token, json!({"url": rx.url, "events": ["same.shipment.scheduled"]})).await;
    order(&s, &s.token, &request(&[500.0])).await;
    rx.delivered(1).await;
    let scrape = async {
        loop {
            let r = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let text = r.text().await.unwrap();
            if text.contains("dropslot_webhook_attempts_total{outcome=\"delivered\"} 1") {
                return text;
            }
            tokio::task::yield_now().await;
        }
    };
    // The attempt is recorded just after the receiver answers.
    let text = tokio::time::timeout(Duration::from_secs(30), scrape).await.expect("the delivery is counted");
    assert!(text.contains("dropslot_webhook_deliveries_queued_total 1"), "{text}");
    assert!(text.contains("dropslot_webhook_attempt_duration_seconds_count 1"), "{text}");
}

/// `kill -9` while deliveries wait for a retry, then a restart on the same database: every
/// event is delivered, none lost (the outbox rows were committed with the orders).
#[tokio::test(flavor = "multi_thread")]
async fn sqlite_kill_9_with_deliveries_pending_then_restart_delivers_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("hooks.db").display());
    let rx = Receiver::start().await;
    rx.answer_by_default(Answer::status(503));
    let env = [
        ("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE", "1"),
        ("DROPSLOT_WEBHOOK_RETRY_SCHEDULE", "1s,1s,1s,1s,1s,1s,1s,1s,1s,1s"),
    ];
    let (mut child, base, token) = crate::cli::spawn_serve_with(&db, &env);
    let token = token.expect("a demo token");
    let http = reqwest::Client::new();
    let api = format!("{base}{}", crate::common::API);
    let r = http
        .post(format!("{api}/webhooks"))
        .bearer_auth(&token)
        .json(&json!({"url": rx.url, "events": ["same.shipment.scheduled"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let mut codes = BTreeSet::new();
    for _ in 0..20 {
        let r = http.post(format!("{api}/requests/sync")).bearer_auth(&token).json(&request(&[500.0])).send().await;
        let body: Value = r.unwrap().json().await.unwrap();
        codes.insert(tracking(&body["object"]));
    }
    rx.wait_until("failing first attempts", |g| !g.is_empty()).await;
    child.kill().unwrap();
    child.wait().unwrap();
    rx.answer_by_default(Answer::status(200));
    let (mut child, _, _) = crate::cli::spawn_serve_with(&db, &env);
    let got = rx
        .wait_until("every order's event, after the restart", |g| {
            g.iter()
                .filter(|r| r.ok())
                .map(|r| r.json()["data"]["tracking_code"].to_string())
                .collect::<BTreeSet<_>>()
                .len()
                >= 20
        })
        .await;
    let delivered: BTreeSet<String> = got
        .iter()
        .filter(|r| r.ok())
        .map(|r| r.json()["data"]["tracking_code"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(delivered, codes);
    child.kill().unwrap();
    let _ = child.wait();
}

/// A target accepted while private addresses were allowed is refused at delivery once they
/// are not: the name is resolved again for each attempt (so DNS rebinding is caught), and
/// the attempt's error says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_target_that_resolves_inward_is_refused_at_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("rebind.db").display());
    let rx = Receiver::start().await;
    let named = rx.url.replace("127.0.0.1", "localhost");
    let (mut child, base, token) = crate::cli::spawn_serve_with(&db, &[("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE", "1")]);
    let token = token.expect("a demo token");
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}{}/webhooks", crate::common::API))
        .bearer_auth(&token)
        .json(&json!({"url": named, "events": ["same.shipment.scheduled"]}))
        .send()
        .await
        .unwrap();
    let id = r.json::<Value>().await.unwrap()["object"]["id"].as_i64().expect("created");
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, base, _) = crate::cli::spawn_serve_with(&db, &[]);
    let api = format!("{base}{}", crate::common::API);
    let r = http.post(format!("{api}/requests/sync")).bearer_auth(&token).json(&request(&[500.0])).send().await;
    assert_eq!(r.unwrap().status(), 201);
    let poll = async {
        loop {
            let r = http.get(format!("{api}/webhooks/{id}/deliveries")).bearer_auth(&token).send().await.unwrap();
            let log: Value = r.json().await.unwrap();
            if let Some(error) = log["object"]["deliveries"][0]["log"][0]["error"].as_str() {
                return error.to_string();
            }
            tokio::task::yield_now().await;
        }
    };
    let error = tokio::time::timeout(Duration::from_secs(30), poll).await.expect("an attempt is recorded");
    assert!(error.contains("internal address"), "{error}");
    assert!(rx.received().is_empty(), "nothing reached the internal target");
    child.kill().unwrap();
    let _ = child.wait();
}

/// A delivery queued for an endpoint deleted meanwhile is failed when claimed, never sent.
/// On `PostgreSQL` an order that read the endpoint as enabled can commit its deliveries just
/// after the deletion failed the endpoint's queue; this test writes that outcome directly
/// (one due delivery and one behind it in its stream), as the race would leave it.
#[tokio::test]
async fn deliveries_to_a_deleted_endpoint_are_failed_not_sent() {
    let s = TestServer::start_with(FAST).await;
    if s.sqlite_file().is_some() {
        return; // One writer orders the deletion and the order: the race cannot happen.
    }
    let rx = Receiver::start().await;
    let id = subscribe(&s, &s.token, json!({"url": rx.url, "events": ["*"]})).await["id"].as_i64().unwrap();
    order(&s, &s.token, &request(&[500.0])).await;
    rx.delivered(2).await;
    let r = s.send(s.http.delete(s.url(&format!("/webhooks/{id}"))).bearer_auth(&s.token)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let due = s.scalar(&format!(
        "INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms, queued_ms)
         SELECT message_id, endpoint_id, ordering_key, 'pending', 0, 0 FROM webhook_deliveries
         WHERE endpoint_id = {id} ORDER BY id LIMIT 1 RETURNING id"
    ));
    let behind = s.scalar(&format!(
        "INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms, queued_ms)
         SELECT message_id, endpoint_id, ordering_key, 'waiting', 0, 0 FROM webhook_deliveries
         WHERE id = {due} RETURNING id"
    ));
    let failed = format!("SELECT count(*) FROM webhook_deliveries WHERE id IN ({due}, {behind}) AND state = 'failed'");
    let poll = async {
        while s.scalar(&failed) != 2 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), poll).await.expect("the dispatcher fails both deliveries");
    assert_eq!(rx.received().len(), 2, "nothing is sent to a deleted endpoint");
    let tried = format!("SELECT count(*) FROM webhook_attempts WHERE delivery_id IN ({due}, {behind})");
    assert_eq!(s.scalar(&tried), 0, "not even attempted (a deleted endpoint has no secret to sign with)");
}

/// Issue 27 (`PostgreSQL`): a burst of deliveries on a fresh database reads the webhook tables
/// through their indexes only: every claim, lease, promotion, stream lookup and attempt, on a
/// database whose statistics the burst itself has to build. The server's counters are read
/// before and after, each time once the server's connections have ended (a backend reports its
/// counters as it ends; the pool opens new ones), so every scan of the burst is counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_deliveries_reads_the_webhook_tables_through_indexes() {
    let s = TestServer::start_with(FAST).await;
    if s.sqlite_file().is_some() {
        return; // PostgreSQL's planner and counters.
    }
    let receivers =
        [Receiver::start().await, Receiver::start().await, Receiver::start().await, Receiver::start().await];
    for rx in &receivers {
        subscribe(&s, &s.token, json!({"url": rx.url, "events": ["*"]})).await;
    }
    let tables = "'webhook_messages', 'webhook_deliveries', 'webhook_attempts'";
    let url = s.db.url();
    let scans = || async {
        let ended = crate::common::psql(
            &url,
            "SELECT coalesce(string_agg(pid::text, ','), '0') FROM (SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                OFFSET 0) app
             WHERE pg_terminate_backend(pid)",
        );
        let gone = async {
            while s.scalar(&format!("SELECT count(*) FROM pg_stat_activity WHERE pid IN ({ended})")) != 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), gone).await.expect("the server's connections end");
        s.scalar(&format!("SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_user_tables WHERE relname IN ({tables})"))
    };
    let before = scans().await;
    let mut codes = Vec::new();
    for _ in 0..12 {
        codes.push(tracking(&order(&s, &s.token, &request(&[500.0])).await));
    }
    let r = s.scenario("happy", &json!({"drop_off_shipment_unique_ids": codes})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // Per shipment: scheduled, parcel.created and the happy path's five, to every endpoint.
    for rx in &receivers {
        rx.delivered(codes.len() * 7).await;
    }
    // Until the last attempts are recorded; the auditor's own read scans no table either.
    let unfinished = "SET enable_seqscan = off;
        SELECT count(*) FROM webhook_deliveries WHERE state IN ('waiting', 'pending')";
    let recorded = async {
        while s.scalar(unfinished) != 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), recorded).await.expect("every attempt is recorded");
    assert_eq!(scans().await - before, 0, "sequential scans of {tables} during the burst");
}

/// PostgreSQL's queue has no foreign keys (migration 0027), so only a hand-made change can leave
/// a delivery whose message row is missing: the claim fails it with the reason, rather than
/// leaving it pending and unseen, sends nothing for it, and goes on with the others.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_delivery_without_its_message_row_is_failed_not_left_pending() {
    let s = TestServer::start_with(FAST).await;
    if s.sqlite_file().is_some() {
        return; // SQLite keeps the queue's foreign keys: no such row can be written.
    }
    let rx = Receiver::start().await;
    let endpoint = subscribe(&s, &s.token, json!({"url": rx.url, "events": ["*"]})).await;
    let endpoint = endpoint["id"].as_i64().expect("the endpoint's id");
    let orphan = s.scalar(&format!(
        "WITH d AS (
            INSERT INTO webhook_deliveries (message_id, endpoint_id, ordering_key, state, next_attempt_ms, queued_ms)
            VALUES ((SELECT coalesce(max(id), 0) + 1000 FROM webhook_messages), {endpoint}, NULL, 'pending', 0, 0)
            RETURNING id)
         SELECT id FROM d"
    ));
    // An order's two webhooks (scheduled, parcel.created) behind it, delivered.
    order(&s, &s.token, &request(&[500.0])).await;
    rx.delivered(2).await;
    let failed = format!("SELECT count(*) FROM webhook_deliveries WHERE id = {orphan} AND state = 'failed'");
    let settled = async {
        while s.scalar(&failed) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), settled).await.expect("the delivery without its message is failed");
    assert_eq!(
        s.scalar(&format!(
            "SELECT count(*) FROM webhook_deliveries WHERE id = {orphan}
             AND last_error = 'its message or endpoint is missing from the database' AND attempts = 0"
        )),
        1,
        "failed with the reason, never attempted"
    );
    assert_eq!(rx.received().len(), 2, "nothing sent for it");
}

/// Issue 47 item 5: an answer is recorded whoever holds its delivery's claim by then. A
/// delivery is claimed and sent; while its request waits at the receiver, another dispatcher's
/// claim is written over this one's (what a takeover after a lease that ran out leaves); then
/// the receiver answers 200. The delivery is delivered at once, and never sent again: before,
/// only the claim that made an attempt could move its delivery, so it stayed pending and was
/// sent a second time once the newer lease ran out.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_is_recorded_whoever_claimed_the_delivery_since() {
    let s = TestServer::start_with(&format!("{FAST}timeout = \"1s\"\n")).await;
    let rx = Receiver::start().await;
    subscribe(&s, &s.token, json!({"url": rx.url, "events": ["*"]})).await;
    // Requests wait, unanswered, until two are in flight at once.
    rx.gate(2);
    let first = order(&s, &s.token, &request(&[500.0])).await;
    let claimed = async {
        while s.db.scalar("SELECT count(*) FROM webhook_deliveries WHERE claim IS NOT NULL") == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), claimed).await.expect("the first delivery is claimed");
    s.db.execute("UPDATE webhook_deliveries SET claim = claim + 1 WHERE claim IS NOT NULL");
    // A second order's first delivery (another stream) opens the gate: both are answered 200.
    let second = order(&s, &s.token, &request(&[500.0])).await;
    // Each order's scheduled and parcel.created, recorded delivered.
    let recorded = async {
        while s.db.scalar("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'") < 4 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), recorded).await.expect("four deliveries recorded");
    let got = rx.delivered(4).await;
    let all = rx.received();
    let ids: Vec<&str> = all.iter().map(Received::id).collect();
    let distinct: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), distinct.len(), "nothing answered was sent again: {ids:?}");
    let codes: BTreeSet<String> =
        got.iter().map(|r| r.json()["data"]["tracking_code"].as_str().unwrap().to_string()).collect();
    assert_eq!(codes, BTreeSet::from([tracking(&first), tracking(&second)]));
    let pending = s.db.scalar("SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'");
    assert_eq!(pending, 0, "every delivery recorded delivered, none left pending");
}
