//! `POST /requests/sync` and `DELETE /parcels/find/by-custom-code/{code}` end to end: the
//! response, what lands in the database, idempotency, tenant isolation, deletion rules and
//! the custom-code race.

use std::collections::HashSet;

use crate::common::{TestServer, cents, request, request_with_codes};
use serde_json::{Value, json};

const CODE_A: &str = "ABCDEFGH12345678";
const CODE_B: &str = "ZYXWVUTS98765432";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_comes_back_with_ids_tracking_and_labels() {
    let s = TestServer::start().await;
    let mut body = request_with_codes(&[CODE_A, ""]);
    body["drop_offs"][0]["parcels"][1]["values"] = json!(3000);
    body["drop_offs"][0]["address"]["person_email"] = json!("jane@example.com");
    body["drop_offs"][0]["address"]["sender_name"] = json!("Maple Goods Inc.");
    let r = s.order(&body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!((r.body["status"].as_str(), r.body["code"].as_i64()), (Some("success"), Some(201)));
    let o = &r.body["object"];
    assert!(o["unique_id"].as_str().unwrap().starts_with("ORD"));
    assert_eq!(o["created_at"], "2026-11-23T07:00:00-05:00", "pinned clock, Toronto offset");
    let sh = &o["shipments"][0];
    assert!(sh["shipment_order_id"].is_i64());
    let pu = &sh["pick_up_shipment"];
    let d = &sh["drop_off_shipment"];
    assert!(pu["id"].is_i64() && d["id"].is_i64());
    assert_eq!(pu["scheduled_date"], "2026-11-23");
    assert_eq!(d["time_slot"], json!({"code": "TOR-DT-PM"}));
    assert!(d["user_ref_id"].is_null());
    let tracking = d["unique_id"].as_str().unwrap();
    assert_eq!(d["tracking_url"], format!("{}/track/{tracking}", s.base));
    // Labels: 4 links each (4x6/4x4 × pdf/zpl), `label` = the 4x6 PDF, unguessable tokens.
    let mut tokens = HashSet::new();
    for links in [&pu["pick_up_label_urls"], &d["pick_up_label_urls"], &sh["parcels"][0]["pick_up_label_urls"]] {
        let links = links.as_array().unwrap();
        let combos: HashSet<(String, String)> =
            links.iter().map(|l| (l["size"].as_str().unwrap().into(), l["format"].as_str().unwrap().into())).collect();
        assert_eq!(combos.len(), 4);
        for size in ["4x6", "4x4"] {
            for fmt in ["pdf", "zpl"] {
                assert!(combos.contains(&(size.into(), fmt.into())));
            }
        }
        let url = links[0]["url"].as_str().unwrap();
        let token = url.rsplit('/').nth(1).unwrap();
        assert!(token.len() >= 22, "≥ 128 bits: {token}");
        tokens.insert(token.to_string());
    }
    assert_eq!(tokens.len(), 3, "every entity has its own label token");
    assert!(pu["label"].as_str().unwrap().ends_with("/4x6.pdf"));
    // The drop-off address: submitted fields plus geocoding, lat/lng as numbers.
    let a = &sh["drop_off_address"];
    assert_eq!(a["person_email"], "jane@example.com");
    assert_eq!(a["sender_name"], "Maple Goods Inc.");
    assert_eq!(a["postal_code"], "m5v 3l9");
    assert!(a["lat"].is_f64() && a["lng"].is_f64(), "{a}");
    assert_eq!(a["region"], "ON");
    assert_eq!(sh["parcel_count"], json!({"SAME": {"small": 1, "medium": 1}}));
    let parcels = sh["parcels"].as_array().unwrap();
    assert_eq!(parcels[0]["custom_code"], CODE_A);
    assert!(parcels[1]["custom_code"].is_null());
    assert_eq!(parcels[1]["parcel_size_code"], "medium");
    assert_eq!((parcels[0]["drop_off_index"].as_i64(), parcels[0]["pick_up_index"].as_str()), (Some(0), Some("0")));
    assert_ne!(parcels[0]["pick_up_code"], parcels[1]["pick_up_code"]);
    // 9 + 12 = 21 → minimum 45 → 5.85 tax.
    assert_eq!(
        (cents(&sh["actual_total_price"]), cents(&sh["total_price"]), cents(&sh["price_with_tax"])),
        (2100, 4500, 5085)
    );
    assert_eq!(cents(&sh["actual_total_tax"]), 273);
    // What landed: one of each row, its events, the saved pick-up address.
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1);
    assert_eq!(s.scalar("SELECT count(*) FROM parcels"), 2);
    assert_eq!(s.scalar("SELECT count(*) FROM shipment_events WHERE status = 'scheduled'"), 2);
    assert_eq!(s.scalar("SELECT price_with_tax FROM shipment_orders"), 5085);
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE status = 'scheduled'"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_replays_or_conflicts() {
    let s = TestServer::start().await;
    let body = request_with_codes(&[CODE_A]);
    let send = |key: &'static str, b: Value| {
        s.send(s.http.post(s.url("/requests/sync")).bearer_auth(&s.token).header("Idempotency-Key", key).json(&b))
    };
    let first = send("order-1", body.clone()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert!(!first.headers.contains_key("idempotent-replayed"));
    // Same key, same body (keys reordered): the original response, nothing new written.
    let reordered: Value = serde_json::from_str(&format!(
        r#"{{"drop_offs": {}, "pick_up_address": {}}}"#,
        body["drop_offs"], body["pick_up_address"]
    ))
    .unwrap();
    let again = send("order-1", reordered).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, first.body, "same ids, same everything");
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1);
    // Same key, another body → 409.
    let r = send("order-1", request(&[700.0])).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["status"], "error");
    // Without the key the same body is a new order (and here its custom code is taken).
    assert_eq!(s.order(&body).await.status, 422);
    // After 24 h the key is free again.
    s.app.clock.advance(jiff::SignedDuration::from_hours(25));
    let later = send("order-1", request(&[700.0])).await;
    assert_eq!(later.status, 201, "{}", later.body);
    assert_ne!(later.body["object"]["unique_id"], first.body["object"]["unique_id"]);
    // Keys are per client: another client may use the same key.
    let (_, other, _, _) = s.new_client("Other").await;
    let r = s
        .send(
            s.http
                .post(s.url("/requests/sync"))
                .bearer_auth(&other)
                .header("Idempotency-Key", "order-1")
                .json(&request(&[700.0])),
        )
        .await;
    assert_eq!(r.status, 201);
    assert!(!r.headers.contains_key("idempotent-replayed"));
    let r = send(Box::leak("k".repeat(256).into_boxed_str()), request(&[1.0])).await;
    assert_eq!(r.status, 422);
    assert!(!r.error_at("header.Idempotency-Key").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_reprices_and_the_last_parcel_deletes_the_shipment() {
    let s = TestServer::start().await;
    let mut body = request_with_codes(&[CODE_A, CODE_B, "QQQQQQQQ11112222", "RRRRRRRR33334444", "SSSSSSSS55556666"]);
    for i in 0..5 {
        body["drop_offs"][0]["parcels"][i]["values"] = json!(4000); // medium, 12.00 each
    }
    let r = s.order(&body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(s.scalar("SELECT total_price FROM shipment_orders"), 6000);
    let r = s.delete_parcel(CODE_A, &s.token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"status": "success", "code": 200, "message": r.body["message"], "object": {}}));
    // 4 × 12 = 48 > 45; tax 6.24.
    assert_eq!(s.scalar("SELECT actual_total_price FROM shipment_orders"), 4800);
    assert_eq!(s.scalar("SELECT price_with_tax FROM shipment_orders"), 5424);
    // Deleted once is gone: 404, never a second deletion.
    assert_eq!(s.delete_parcel(CODE_A, &s.token).await.status, 404);
    for c in [CODE_B, "QQQQQQQQ11112222", "RRRRRRRR33334444"] {
        assert_eq!(s.delete_parcel(c, &s.token).await.status, 200);
    }
    // One medium parcel left: 12.00, charged the 45.00 minimum.
    assert_eq!(s.scalar("SELECT actual_total_price FROM shipment_orders"), 1200);
    assert_eq!(s.scalar("SELECT total_price FROM shipment_orders"), 4500);
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE status = 'scheduled'"), 1);
    let r = s.delete_parcel("SSSSSSSS55556666", &s.token).await;
    assert_eq!(r.status, 200);
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE status = 'deleted'"), 1);
    assert_eq!(
        s.scalar("SELECT count(*) FROM pick_up_shipments WHERE status = 'deleted'"),
        1,
        "all its drop-offs are deleted"
    );
    assert_eq!(s.scalar("SELECT total_price FROM shipment_orders"), 0, "a deleted shipment is not charged");
    assert_eq!(s.scalar("SELECT count(*) FROM shipment_events WHERE status = 'deleted'"), 2);
    // A deleted parcel frees its code.
    assert_eq!(s.order(&request_with_codes(&[CODE_A])).await.status, 201);
    // Malformed codes are a 422 at the path.
    let r = s.delete_parcel("short", &s.token).await;
    assert_eq!(r.status, 422);
    assert!(!r.error_at("path.custom_code").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_after_pick_up_is_a_conflict_and_deleted_labels_are_gone() {
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let r = s.post("/requests/sync", &live, &request_with_codes(&[CODE_A, CODE_B])).await;
    assert_eq!(r.status, 201);
    let shipment = &r.body["object"]["shipments"][0];
    let tracking = shipment["drop_off_shipment"]["unique_id"].as_str().unwrap();
    let parcel_label = shipment["parcels"][0]["label"].as_str().unwrap().to_string();
    let pick_up_code = shipment["parcels"][1]["pick_up_code"].as_str().unwrap();
    // to_pick_up still allows deletion…
    assert_eq!(s.ops_move(&ops, tracking, &json!({"to": "to_pick_up"})).await.status, 200);
    assert_eq!(s.delete(&format!("/parcels/find/by-custom-code/{CODE_A}"), &live).await.status, 200);
    let gone = s.send(s.http.get(&parcel_label)).await;
    assert_eq!(gone.status, 410, "a deleted parcel's label answers 410");
    // …after the driver's pick-up scan it does not.
    let r = s.post(&format!("/ops/parcels/{pick_up_code}/pick-up-scan"), &ops, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.delete(&format!("/parcels/find/by-custom-code/{CODE_B}"), &live).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body["message"].as_str().unwrap().contains("picked_up"));
    assert_eq!(s.scalar("SELECT count(*) FROM parcels WHERE deleted_at IS NULL"), 1, "nothing changed");
    // An unknown or wrong label token is a 404, not a hint.
    let wrong = parcel_label.replace(parcel_label.rsplit('/').nth(1).unwrap(), "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(s.send(s.http.get(&wrong)).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_and_modes_are_isolated() {
    let s = TestServer::start().await;
    let (_, test, live, _) = s.new_client("Acme").await;
    assert_eq!(s.order(&request_with_codes(&[CODE_A])).await.status, 201);
    // Another client's custom code is a 404, and it can use the same code itself.
    assert_eq!(s.delete(&format!("/parcels/find/by-custom-code/{CODE_A}"), &test).await.status, 404);
    assert_eq!(s.post("/requests/sync", &test, &request_with_codes(&[CODE_A])).await.status, 201);
    // Live data never sees test data: same client, other mode.
    assert_eq!(s.delete(&format!("/parcels/find/by-custom-code/{CODE_A}"), &live).await.status, 404);
    assert_eq!(s.post("/requests/sync", &live, &request_with_codes(&[CODE_A])).await.status, 201);
    assert_eq!(s.delete(&format!("/parcels/find/by-custom-code/{CODE_A}"), &live).await.status, 200);
    assert_eq!(s.delete(&format!("/parcels/find/by-custom-code/{CODE_A}"), &test).await.status, 200);
    assert_eq!(
        s.scalar("SELECT count(*) FROM parcels WHERE deleted_at IS NULL"),
        1,
        "the demo client's parcel remains"
    );
    // Saved addresses are per client too.
    let r = s.get("/saved-addresses", &test).await;
    assert_eq!(r.body["object"]["saved_addresses"].as_array().unwrap().len(), 1);
    let id = r.body["object"]["saved_addresses"][0]["id"].as_i64().unwrap();
    let demo = s.get("/saved-addresses", &s.token).await;
    let demo_id = demo.body["object"]["saved_addresses"][0]["id"].as_i64().unwrap();
    assert_ne!(id, demo_id);
    assert_eq!(s.get(&format!("/saved-addresses/{demo_id}"), &test).await.status, 404);
    assert_eq!(s.delete(&format!("/saved-addresses/{demo_id}"), &test).await.status, 404);
    let mut by_id = request(&[500.0]);
    by_id["pick_up_address"] = json!({"saved_address_id": demo_id});
    assert_eq!(s.post("/requests/preview", &test, &by_id).await.status, 422, "another client's saved address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pick_up_addresses_are_saved_and_reused() {
    let s = TestServer::start().await;
    assert!(s.preview(&request(&[500.0])).await.body["object"]["pick_ups"][0]["address"]["saved_address_id"].is_null());
    assert_eq!(s.order(&request(&[500.0])).await.status, 201);
    // Same address, other spelling: one saved address, used twice.
    let mut respelled = request(&[500.0]);
    respelled["pick_up_address"]["text"] = json!("100 KING ST W,  TORONTO ON, M5X 1A9");
    assert_eq!(s.order(&respelled).await.status, 201);
    let list = s.get("/saved-addresses", &s.token).await;
    let saved = list.body["object"]["saved_addresses"].as_array().unwrap().clone();
    assert_eq!(saved.len(), 1, "{}", list.body);
    assert_eq!(saved[0]["use_count"], 2);
    let id = saved[0]["id"].as_i64().unwrap();
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(r.body["object"]["pick_ups"][0]["address"]["saved_address_id"], id);
    // Referenced by id in place of text, for preview and order.
    let mut by_id = request(&[500.0]);
    by_id["pick_up_address"] = json!({"saved_address_id": id});
    let r = s.preview(&by_id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["pick_ups"][0]["address"]["text"], crate::common::PICK_UP);
    assert_eq!(s.order(&by_id).await.status, 201);
    // Deleted: gone from the list, and referencing it is a 422.
    assert_eq!(s.delete(&format!("/saved-addresses/{id}"), &s.token).await.status, 200);
    assert_eq!(s.get("/saved-addresses", &s.token).await.body["object"]["saved_addresses"], json!([]));
    assert_eq!(s.order(&by_id).await.status, 422);
    assert_eq!(s.scalar("SELECT count(*) FROM pick_up_shipments"), 3, "orders keep their pick-ups");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_orders_racing_for_one_custom_code_exactly_one_wins() {
    let s = TestServer::start().await;
    let body = request_with_codes(&["RACERACERACE0001"]);
    let mut tasks = Vec::new();
    for _ in 0..24 {
        let (http, url, token, body) = (s.http.clone(), s.url("/requests/sync"), s.token.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let res = http.post(url).bearer_auth(token).json(&body).send().await.unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap())
        }));
    }
    let mut created = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            201 => created += 1,
            422 => assert!(body["errors"]["drop_offs.0.parcels.0.custom_code"].is_array(), "{body}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(created, 1);
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 1, "the losers left no partial order");
    assert_eq!(s.scalar("SELECT count(*) FROM pick_up_shipments"), 1);
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments"), 1);
    assert_eq!(s.scalar("SELECT count(*) FROM shipment_events"), 2);
    let saved = s.get("/saved-addresses", &s.token).await;
    assert_eq!(
        saved.body["object"]["saved_addresses"][0]["use_count"], 1,
        "the losers' uses rolled back: {}",
        saved.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_distinct_orders_all_land() {
    let s = TestServer::start().await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (http, url, token) = (s.http.clone(), s.url("/requests/sync"), s.token.clone());
        let body = request_with_codes(&[&format!("PARALLEL{i:08}")]);
        tasks.push(tokio::spawn(async move {
            http.post(url).bearer_auth(token).json(&body).send().await.unwrap().status().as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 201);
    }
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 64);
    assert_eq!(s.scalar("SELECT count(DISTINCT unique_id) FROM drop_off_shipments"), 64);
}
