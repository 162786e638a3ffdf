//! The six sandbox scenarios end to end (CONTRACT §6): each one's full event sequence, the
//! sandbox-final rule and its 409, the selectors, token kinds and tenant isolation, batches
//! larger than one transaction, and two scenarios racing for one shipment.

use serde_json::{Value, json};

use crate::common::{TestServer, assert_envelope, request};

/// A test order of the demo client: (drop-off id, tracking code).
async fn test_order(s: &TestServer) -> (i64, String) {
    let r = s.order(&request(&[500.0])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let d = &r.body["object"]["shipments"][0]["drop_off_shipment"];
    (d["id"].as_i64().unwrap(), d["unique_id"].as_str().unwrap().to_string())
}

fn statuses(events: &Value) -> Vec<String> {
    events.as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_records_its_whole_path_in_order() {
    let s = TestServer::start().await;
    let walk = ["scheduled", "to_pick_up", "picked_up", "processing", "in_transit"];
    let cases: [(&str, Vec<&str>, i64); 6] = [
        ("happy", [&walk[..], &["delivered"]].concat(), 1),
        ("reattempt", [&walk[..], &["failed", "to_attempt", "in_transit", "delivered"]].concat(), 2),
        ("fail", [&walk[..], &["failed", "return_scheduled", "returned"]].concat(), 1),
        ("bundle-pick-up-shipments", walk[..2].to_vec(), 0),
        ("picked-pick-up-shipments", walk[..3].to_vec(), 0),
        ("delivering-drop-off-shipments", walk.to_vec(), 0),
    ];
    for (name, path, attempts) in cases {
        let (id, tracking) = test_order(&s).await;
        let r = s.scenario(name, &json!({"drop_off_shipment_unique_ids": [tracking]})).await;
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        assert_eq!((r.body["status"].as_str(), r.body["code"].as_i64()), (Some("success"), Some(200)));
        let last = *path.last().unwrap();
        assert_eq!(
            r.body["object"],
            json!({"affected": [{"id": id, "unique_id": tracking, "from": "scheduled", "to": last}], "skipped": []}),
            "{name}"
        );
        let shipment = s.get(&format!("/shipments/{tracking}"), &s.token).await;
        assert_eq!(shipment.status, 200, "{}", shipment.body);
        let o = &shipment.body["object"];
        assert_eq!((o["status"].as_str(), o["attempts"].as_i64()), (Some(last), Some(attempts)), "{name}");
        let events = &o["events"];
        assert_eq!(statuses(events), path, "{name}: every intermediate state, in order");
        for (i, e) in events.as_array().unwrap().iter().enumerate() {
            assert_eq!(e["seq"], i + 1, "{name}: gapless sequence");
            if i > 0 {
                assert_eq!(e["actor"], "sandbox");
                assert_eq!(e["previous_status"], events[i - 1]["status"]);
            }
            match e["status"].as_str().unwrap() {
                "failed" => assert!(e["reason"].as_str().is_some_and(|r| !r.is_empty()), "{e}"),
                "delivered" => assert_eq!(e["proof_of_delivery"][0]["type"], "receiver_name", "{e}"),
                _ => assert_eq!(e["proof_of_delivery"], json!([])),
            }
        }
        // The pick-up leg followed: it is picked up once its drop-off is.
        let pick_up = o["pick_up_shipment"]["id"].as_i64().unwrap();
        let expected_pick_up = if name == "bundle-pick-up-shipments" { "to_pick_up" } else { "picked_up" };
        assert_eq!(
            s.scalar(&format!(
                "SELECT count(*) FROM pick_up_shipments WHERE id = {pick_up} AND status = '{expected_pick_up}'"
            )),
            1,
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_shipment_is_final_for_the_sandbox() {
    let s = TestServer::start().await;
    let (moved, moved_code) = test_order(&s).await;
    let (fresh, _) = test_order(&s).await;
    assert_eq!(s.scenario("bundle-pick-up-shipments", &json!({"drop_off_shipment_ids": [moved]})).await.status, 200);
    // Alone, the moved shipment cannot move again: 409, with the reason in `object`.
    let r = s.scenario("happy", &json!({"drop_off_shipment_ids": [moved]})).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!((r.body["status"].as_str(), r.body["code"].as_i64()), (Some("error"), Some(409)));
    let skipped = &r.body["object"]["skipped"][0];
    assert_eq!((skipped["id"].as_i64(), skipped["status"].as_str()), (Some(moved), Some("to_pick_up")));
    assert!(skipped["reason"].as_str().unwrap().contains("already moved"), "{skipped}");
    // With a fresh one beside it, the fresh one moves and the moved one is skipped.
    let r = s.scenario("happy", &json!({"drop_off_shipment_ids": [moved, fresh]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["affected"][0]["id"], fresh);
    assert_eq!(r.body["object"]["skipped"][0]["unique_id"], moved_code);
    let shipment = s.get(&format!("/shipments/{moved_code}"), &s.token).await;
    assert_eq!(shipment.body["object"]["status"], "to_pick_up", "unchanged by the later scenario");
    // A deleted shipment is skipped with its status.
    let r = s.order(&crate::common::request_with_codes(&["DELETEME12345678"])).await;
    let deleted = r.body["object"]["shipments"][0]["drop_off_shipment"]["id"].as_i64().unwrap();
    assert_eq!(s.delete_parcel("DELETEME12345678", &s.token).await.status, 200);
    let r = s.scenario("happy", &json!({"drop_off_shipment_ids": [deleted]})).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["object"]["skipped"][0]["status"], "deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_tokens_and_tenants() {
    let s = TestServer::start().await;
    let (id_a, code_a) = test_order(&s).await;
    let (id_b, _) = test_order(&s).await;
    let (_, other_test, other_live, other_ops) = s.new_client("Other").await;
    // A live token (and an ops token) is refused before anything is read.
    for token in [&other_live, &other_ops] {
        let r = s.post("/sandbox/scenarios/happy", token, &json!({"date": "2026-11-23"})).await;
        assert_envelope(&r, 403);
    }
    // No selector, or only empty ones: 422 at the body.
    for body in [json!({}), json!({"drop_off_shipment_ids": [], "drop_off_shipment_unique_ids": []})] {
        let r = s.scenario("happy", &body).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at("body").is_empty());
    }
    let r = s.scenario("happy", &json!({"date": "23/11/2026"})).await;
    assert!(!r.error_at("date").is_empty());
    let r = s.scenario("happy", &json!({"drop_off_shipment_ids": ["1"]})).await;
    assert_eq!(r.status, 400, "wrong JSON type: {}", r.body);
    assert_envelope(&s.scenario("sideways", &json!({"date": "2026-11-23"})).await, 404);
    // Another client's ids select nothing and reveal nothing.
    let r = s.post("/sandbox/scenarios/happy", &other_test, &json!({"drop_off_shipment_ids": [id_a, id_b]})).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["object"], json!({"affected": [], "skipped": []}));
    assert_eq!(s.get(&format!("/shipments/{code_a}"), &other_test).await.status, 404);
    assert_eq!(s.get(&format!("/shipments/{code_a}"), &s.token).await.body["object"]["status"], "scheduled");
    // The selectors are ORed: one id, one tracking code and a date that matches nothing.
    let (_, code_c) = test_order(&s).await;
    let r = s
        .scenario(
            "bundle-pick-up-shipments",
            &json!({"drop_off_shipment_ids": [id_a], "drop_off_shipment_unique_ids": [code_c], "date": "2027-01-05"}),
        )
        .await;
    assert_eq!(r.body["object"]["affected"].as_array().map(Vec::len), Some(2), "{}", r.body);
    // A date selects every one of the caller's shipments delivered that day.
    let r = s.scenario("delivering-drop-off-shipments", &json!({"date": "2026-11-23"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["affected"].as_array().map(Vec::len), Some(1), "only the untouched one: {}", r.body);
    assert_eq!(r.body["object"]["affected"][0]["id"], id_b);
    assert_eq!(r.body["object"]["skipped"].as_array().map(Vec::len), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_selections_run_in_batches_and_racing_scenarios_move_a_shipment_once() {
    let s = TestServer::start().await;
    // More than one batch (200 per transaction).
    let mut ids = Vec::new();
    for _ in 0..230 {
        ids.push(test_order(&s).await.0);
    }
    let r = s.scenario("happy", &json!({"drop_off_shipment_ids": ids[..220]})).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["object"]["affected"].as_array().map(Vec::len), Some(220));
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE status = 'delivered'"), 220);
    assert_eq!(s.scalar("SELECT count(*) FROM shipment_events WHERE shipment_kind = 'drop_off'"), 230 + 220 * 5);
    // Two scenarios at once over the same ten shipments: each moves exactly once.
    let rest = json!({"drop_off_shipment_ids": ids[220..]});
    let (a, b) = tokio::join!(s.scenario("fail", &rest), s.scenario("reattempt", &rest));
    let moved = |r: &crate::common::Reply| r.body["object"]["affected"].as_array().map_or(0, Vec::len);
    assert_eq!(moved(&a) + moved(&b), 10, "{} / {}", a.body, b.body);
    assert_eq!(s.scalar("SELECT count(*) FROM drop_off_shipments WHERE status IN ('returned', 'delivered')"), 230);
    // No half-moved shipment: every one is at the end of some scenario, events gapless.
    assert_eq!(
        s.scalar(
            "SELECT count(*) FROM (SELECT shipment_kind, shipment_id, max(seq) AS m, count(*) AS n FROM shipment_events
             GROUP BY shipment_kind, shipment_id) AS e WHERE m <> n"
        ),
        0
    );
}
