//! Client reads and the public tracking page end to end: shapes, tenant and mode isolation,
//! cursor pagination under concurrent inserts, and what the tracking page never shows.

use std::collections::HashSet;

use serde_json::json;

use crate::common::{ADMIN_TOKEN, TestServer, assert_envelope, request, request_with_codes};

const CODE: &str = "READBACK00000001";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_reads_back_as_it_was_created_plus_its_state() {
    let s = TestServer::start().await;
    let created = s.order(&request_with_codes(&[CODE, "READBACK00000002"])).await;
    assert_eq!(created.status, 201);
    let c = &created.body["object"];
    let order_id = c["unique_id"].as_str().unwrap();
    let tracking = c["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap();
    let r = s.get(&format!("/orders/{order_id}"), &s.token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let o = &r.body["object"];
    assert_eq!((o["unique_id"].as_str(), o["created_at"].as_str()), (Some(order_id), c["created_at"].as_str()));
    // Every field of the creation response, unchanged, plus status, attempts and events.
    let mut read = o["shipments"][0].clone();
    for extra in ["status", "pick_up_status", "attempts", "max_attempts", "located_by", "events"] {
        assert!(read.as_object_mut().unwrap().remove(extra).is_some(), "{extra}");
    }
    assert_eq!(read, c["shipments"][0]);
    assert_eq!(o["shipments"][0]["status"], "scheduled");
    assert_eq!(o["shipments"][0]["events"][0]["at"], "2026-11-23T07:00:00-05:00", "local offset");
    let r = s.get(&format!("/shipments/{tracking}"), &s.token).await;
    assert_eq!(r.body["object"]["drop_off_shipment"], c["shipments"][0]["drop_off_shipment"]);
    // A parcel by its custom code; after deleting the other parcel it leaves the read.
    let r = s.get(&format!("/parcels/find/by-custom-code/{CODE}"), &s.token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["object"]["tracking_code"].as_str(), r.body["object"]["status"].as_str()),
        (Some(tracking), Some("scheduled"))
    );
    assert_eq!(r.body["object"]["pick_up_code"], c["shipments"][0]["parcels"][0]["pick_up_code"]);
    assert_eq!(s.delete_parcel("READBACK00000002", &s.token).await.status, 200);
    let r = s.get(&format!("/shipments/{tracking}"), &s.token).await;
    assert_eq!(r.body["object"]["parcels"].as_array().map(Vec::len), Some(1));
    assert_eq!(r.body["object"]["parcel_count"], json!({"SAME": {"small": 1}}));
    assert_envelope(&s.get("/parcels/find/by-custom-code/READBACK00000002", &s.token).await, 404);
    assert_envelope(&s.get("/parcels/find/by-custom-code/short", &s.token).await, 422);
    // Another client, or the same client's live token, sees none of it.
    let (_, other_test, _, _) = s.new_client("Other").await;
    let r = s.post("/admin/clients/1/tokens", ADMIN_TOKEN, &json!({"kind": "live"})).await;
    let own_live = r.body["object"]["token"].as_str().unwrap().to_string();
    for token in [&other_test, &own_live] {
        for path in [
            format!("/orders/{order_id}"),
            format!("/shipments/{tracking}"),
            format!("/parcels/find/by-custom-code/{CODE}"),
        ] {
            assert_envelope(&s.get(&path, token).await, 404);
        }
    }
    assert_eq!(s.get("/orders", &other_test).await.body["object"], json!({"orders": [], "next_cursor": null}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_newest_first_and_stable_under_concurrent_inserts() {
    let s = TestServer::start().await;
    let mut before = Vec::new();
    for _ in 0..25 {
        let r = s.order(&request(&[500.0])).await;
        before.push(r.body["object"]["unique_id"].as_str().unwrap().to_string());
    }
    let one = request(&[500.0]);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => "/orders?limit=10".to_string(),
            Some(c) => format!("/orders?limit=10&cursor={c}"),
        };
        // Orders keep arriving between pages.
        let (page, _) = tokio::join!(s.get(&path, &s.token), s.order(&one));
        assert_eq!(page.status, 200, "{}", page.body);
        let o = &page.body["object"];
        seen.extend(o["orders"].as_array().unwrap().iter().map(|x| x["unique_id"].as_str().unwrap().to_string()));
        match o["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    // Every order that existed before paging began appears once, newest first.
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no order twice");
    let old: Vec<&String> = seen.iter().filter(|u| before.contains(u)).collect();
    let expected: Vec<&String> = before.iter().rev().collect();
    assert_eq!(old, expected);
    for bad in ["limit=0", "limit=101", "cursor=nonsense", "limit=5&limit=6", "offset=3"] {
        assert_envelope(&s.get(&format!("/orders?{bad}"), &s.token).await, 422);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracking_page_shows_progress_and_no_personal_data() {
    let s = TestServer::start().await;
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["person_email"] = json!("jane@example.com");
    let r = s.order(&body).await;
    let d = &r.body["object"]["shipments"][0]["drop_off_shipment"];
    let tracking = d["unique_id"].as_str().unwrap().to_string();
    let url = d["tracking_url"].as_str().unwrap().to_string();
    assert_eq!(
        s.scenario("delivering-drop-off-shipments", &json!({"drop_off_shipment_unique_ids": [tracking]})).await.status,
        200
    );
    // HTML: the status and timeline, the date, slot and city; no name, phone, e-mail or street.
    let res = s.http.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("style-src 'sha256-") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert_eq!(h["vary"], "Accept");
    assert!(h["cache-control"].to_str().unwrap().contains("max-age"));
    let html = res.text().await.unwrap();
    for shown in ["Out for delivery", "2026-11-23", "Toronto", &tracking, "data-status=\"in_transit\""] {
        assert!(html.contains(shown), "missing {shown}");
    }
    for hidden in ["Jane", "416", "555", "jane@example.com", "Bremner", "King St", "m5v", "M5V"] {
        assert!(!html.contains(hidden), "leaks {hidden}");
    }
    assert!(!html.contains("<script"), "no JavaScript");
    // JSON: CONTRACT §8's shape exactly.
    let r = s.send(s.http.get(&url).header("Accept", "application/json")).await;
    assert_eq!(r.status, 200);
    let keys: HashSet<&str> = r.body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, HashSet::from(["tracking_code", "status", "scheduled_date", "time_slot", "city", "events"]));
    assert_eq!((r.body["status"].as_str(), r.body["city"].as_str()), (Some("in_transit"), Some("Toronto")));
    let events = r.body["events"].as_array().unwrap();
    assert_eq!(events.len(), 5);
    assert_eq!(events[0], json!({"status": "scheduled", "at": "2026-11-23T07:00:00-05:00"}));
    assert!(!r.body.to_string().contains("Jane"));
    // Unknown codes: a 404 page, or the JSON error envelope.
    let res = s.http.get(format!("{}/track/DSUNKNOWN0000", s.base)).send().await.unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert!(res.text().await.unwrap().contains("could not find"));
    assert_envelope(
        &s.send(s.http.get(format!("{}/track/DSUNKNOWN0000", s.base)).header("Accept", "application/json")).await,
        404,
    );
    assert_eq!(s.http.get(format!("{}/track/%3Cscript%3E", s.base)).send().await.unwrap().status(), 404);
}
