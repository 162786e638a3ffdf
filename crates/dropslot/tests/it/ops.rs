//! The operations API end to end: every transition of the CONTRACT §4 table, every forbidden
//! one with its 409, the attempt limit, proofs and reasons, pick-up scans, token kinds.

use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, TestServer, assert_envelope, request};

const ALL: [&str; 12] = [
    "scheduled",
    "to_pick_up",
    "picked_up",
    "processing",
    "in_transit",
    "delivered",
    "failed",
    "to_attempt",
    "return_scheduled",
    "returned",
    "cancelled",
    "deleted",
];

/// A live order of `live`'s client: (tracking code, first parcel's pick-up code).
async fn live_order(s: &TestServer, live: &str) -> (String, String) {
    let r = s.post("/requests/sync", live, &request(&[500.0])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let sh = &r.body["object"]["shipments"][0];
    (
        sh["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string(),
        sh["parcels"][0]["pick_up_code"].as_str().unwrap().to_string(),
    )
}

/// A server whose failures wait for a decision (`[attempts] after_failure = "hold"`, CONTRACT
/// §15), so the ops API can walk the whole table by hand.
async fn holding() -> TestServer {
    TestServer::start_with("[attempts]\nafter_failure = \"hold\"").await
}

/// The body that makes a move to `to` acceptable (a proof, a reason).
fn body(to: &str) -> Value {
    match to {
        "delivered" => json!({"to": to, "proof_of_delivery": [{"type": "signature", "value": "sig/123.png"}]}),
        "failed" => json!({"to": to, "reason": "Nobody at home"}),
        _ => json!({"to": to, "reason": "scan"}),
    }
}

/// Walks `path` with ops moves; before each move, every status the table forbids from
/// there is tried first and must be a 409 that names the allowed ones.
async fn walk(
    s: &TestServer,
    ops: &str,
    tracking: &str,
    path: &[&str],
    allowed_from: &dyn Fn(&str) -> Vec<&'static str>,
) {
    let mut status = "scheduled";
    for to in path {
        let allowed = allowed_from(status);
        // A `failed` of a return stop is not a move of the table but a failed return (CONTRACT
        // §15: booked again or cancelled), which `attempts.rs` tests.
        let failed_return = |t: &&&str| status == "return_scheduled" && **t == "failed";
        for forbidden in ALL.iter().filter(|t| !allowed.contains(t) && !failed_return(t)) {
            let r = s.ops_move(ops, tracking, &body(forbidden)).await;
            assert_envelope(&r, 409);
            let message = r.body["message"].as_str().unwrap();
            for a in &allowed {
                assert!(message.contains(a), "{status} -> {forbidden}: {message} should name {a}");
            }
        }
        let r = s.ops_move(ops, tracking, &body(to)).await;
        assert_eq!(r.status, 200, "{status} -> {to}: {}", r.body);
        assert_eq!(r.body["object"]["status"], *to);
        status = to;
    }
}

/// The table as the CONTRACT gives it, with the default of 3 attempts handled by the test.
fn table(status: &str) -> Vec<&'static str> {
    match status {
        "scheduled" => vec!["to_pick_up", "deleted"],
        "to_pick_up" => vec!["picked_up", "deleted"],
        "picked_up" => vec!["processing"],
        "processing" => vec!["in_transit"],
        // CONTRACT §15: a booked re-attempt may be sent back instead.
        "to_attempt" => vec!["in_transit", "return_scheduled"],
        "in_transit" => vec!["delivered", "failed"],
        "failed" => vec!["to_attempt", "return_scheduled", "cancelled"],
        "return_scheduled" => vec!["returned", "cancelled"],
        _ => vec![],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transition_and_every_forbidden_one() {
    let s = holding().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let paths: [&[&str]; 3] = [
        &["to_pick_up", "picked_up", "processing", "in_transit", "failed", "to_attempt", "in_transit", "delivered"],
        &["to_pick_up", "picked_up", "processing", "in_transit", "failed", "return_scheduled", "returned"],
        &["to_pick_up", "picked_up", "processing", "in_transit", "failed", "cancelled"],
    ];
    for path in paths {
        let (tracking, _) = live_order(&s, &live).await;
        // A shipment is deleted by its client (by custom code), never by a move.
        let r = s.ops_move(&ops, &tracking, &body("deleted")).await;
        assert_envelope(&r, 409);
        assert!(r.body["message"].as_str().unwrap().contains("deleting its parcels"), "{}", r.body);
        walk(&s, &ops, &tracking, path, &|st| table(st)).await;
        // A final status never changes.
        for to in ALL {
            assert_envelope(&s.ops_move(&ops, &tracking, &body(to)).await, 409);
        }
    }
    // return_scheduled → cancelled, and the shape of the answer.
    let (tracking, _) = live_order(&s, &live).await;
    for to in ["to_pick_up", "picked_up", "processing", "in_transit", "failed", "return_scheduled", "cancelled"] {
        assert_eq!(s.ops_move(&ops, &tracking, &body(to)).await.status, 200, "{to}");
    }
    let r = s.get(&format!("/shipments/{tracking}"), &live).await;
    let o = &r.body["object"];
    assert_eq!((o["status"].as_str(), o["attempts"].as_i64()), (Some("cancelled"), Some(1)));
    let events = o["events"].as_array().unwrap();
    assert_eq!(events.len(), 8);
    assert!(events[1..].iter().all(|e| e["actor"] == "ops"));
    assert_eq!(events[5]["reason"], "Nobody at home");
    assert_eq!(events[5]["attempt"], 1);
    assert!(o["drop_off_shipment"]["tracking_url"].as_str().unwrap().ends_with(&tracking));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempt_limit_and_what_a_move_must_carry() {
    let s = holding().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let (tracking, _) = live_order(&s, &live).await;
    for to in ["to_pick_up", "picked_up", "processing", "in_transit"] {
        assert_eq!(s.ops_move(&ops, &tracking, &body(to)).await.status, 200);
    }
    // delivered needs a proof, failed a reason: 422 at the field, nothing written.
    let r = s.ops_move(&ops, &tracking, &json!({"to": "delivered"})).await;
    assert!(!r.error_at("proof_of_delivery").is_empty());
    let r = s.ops_move(&ops, &tracking, &json!({"to": "failed", "reason": "  "})).await;
    assert!(!r.error_at("reason").is_empty());
    let r = s.ops_move(&ops, &tracking, &json!({"to": "lost"})).await;
    assert!(r.error_at("to")[0].contains("in_transit"));
    let r = s
        .ops_move(&ops, &tracking, &json!({"to": "delivered", "proof_of_delivery": [{"type": "dna", "value": "x"}]}))
        .await;
    assert!(r.status == 400 || r.status == 422, "{}", r.body);
    // Three failed attempts (the default maximum), then only return or cancel remain.
    for attempt in 1..=3 {
        assert_eq!(s.ops_move(&ops, &tracking, &body("failed")).await.status, 200, "attempt {attempt}");
        if attempt < 3 {
            assert_eq!(s.ops_move(&ops, &tracking, &body("to_attempt")).await.status, 200);
            assert_eq!(s.ops_move(&ops, &tracking, &body("in_transit")).await.status, 200);
        }
    }
    let r = s.ops_move(&ops, &tracking, &body("to_attempt")).await;
    assert_envelope(&r, 409);
    let message = r.body["message"].as_str().unwrap();
    assert!(message.contains("3 delivery attempt") && message.contains("return_scheduled, cancelled"), "{message}");
    let r = s.get(&format!("/shipments/{tracking}"), &live).await;
    assert_eq!((r.body["object"]["attempts"].as_i64(), r.body["object"]["max_attempts"].as_i64()), (Some(3), Some(3)));
    // A client with a negotiated maximum of 1: its new shipments get one attempt.
    let (client, _, live1, _) = s.new_client("One Try").await;
    let limits = json!({"limits": {"order_drop_offs": 1, "order_parcels_per_drop_off": 5, "preview_drop_offs": 100,
        "preview_parcels_per_drop_off": 50, "max_delivery_attempts": 1}});
    assert_eq!(
        s.send(s.http.put(s.url(&format!("/admin/clients/{client}/settings"))).bearer_auth(ADMIN_TOKEN).json(&limits))
            .await
            .status,
        200
    );
    let (tracking, _) = live_order(&s, &live1).await;
    for to in ["to_pick_up", "picked_up", "processing", "in_transit", "failed"] {
        assert_eq!(s.ops_move(&ops, &tracking, &body(to)).await.status, 200);
    }
    assert_envelope(&s.ops_move(&ops, &tracking, &body("to_attempt")).await, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pick_up_scans_tokens_and_visibility() {
    let s = TestServer::start().await;
    let (_, test, live, ops) = s.new_client("Maple Goods").await;
    let (tracking, pick_up_code) = live_order(&s, &live).await;
    // Only ops tokens: test and live tokens get 403, no token 401.
    for token in [&test, &live, &s.token] {
        assert_envelope(&s.ops_move(token, &tracking, &body("to_pick_up")).await, 403);
    }
    assert_envelope(
        &s.send(s.http.post(s.url(&format!("/ops/shipments/{tracking}/transitions"))).json(&body("to_pick_up"))).await,
        401,
    );
    // The ops token of one client moves every client's live shipments (the courier's staff)…
    let (_, _, _, other_ops) = s.new_client("Courier Staff").await;
    let r = s.post(&format!("/ops/parcels/{pick_up_code}/pick-up-scan"), &other_ops, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let events = r.body["object"]["events"].as_array().unwrap();
    let seen: Vec<&str> = events.iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(seen, ["scheduled", "to_pick_up", "picked_up"]);
    assert_eq!(s.scalar("SELECT count(*) FROM pick_up_shipments WHERE status = 'picked_up'"), 1);
    // …a second scan is a conflict; unknown codes are 404…
    assert_envelope(&s.post(&format!("/ops/parcels/{pick_up_code}/pick-up-scan"), &ops, &json!({})).await, 409);
    assert_envelope(&s.post("/ops/parcels/P0000000000/pick-up-scan", &ops, &json!({})).await, 404);
    assert_envelope(&s.ops_move(&ops, "DSNOSUCHCODE00", &body("to_pick_up")).await, 404);
    // …and test shipments are the sandbox's: invisible to ops.
    let r = s.order(&request(&[500.0])).await;
    let test_tracking = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap();
    assert_envelope(&s.ops_move(&ops, test_tracking, &body("to_pick_up")).await, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_is_published() {
    let s = TestServer::start().await;
    let r = s.send(s.http.get(s.url("/shipment-states"))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let o = &r.body["object"];
    assert_eq!(o["statuses"].as_array().map(Vec::len), Some(12));
    let finals: Vec<&str> = o["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["final"] == true)
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(finals, ["delivered", "returned", "cancelled", "deleted"]);
    for edge in o["drop_off"]["transitions"].as_array().unwrap() {
        let to: Vec<&str> = edge["to"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert_eq!(to, table(edge["from"].as_str().unwrap()), "{edge}");
    }
    assert_eq!(o["drop_off"]["transitions"].as_array().map(Vec::len), Some(8));
    assert_eq!(o["attempts"]["default_max"], 3);
    assert_eq!(o["pick_up"]["transitions"][1], json!({"from": "to_pick_up", "to": ["picked_up", "deleted"]}));
}

/// Moves sent at once (on PostgreSQL they share transactions, `store/postgres/moves.rs`): one
/// order's drop-offs share a pick-up leg, which follows the first of them once; a shipment
/// asked twice at once moves once (the other move finds it moved: a 409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_at_once_share_a_pick_up_leg_and_take_a_shipment_once() {
    let s = TestServer::start().await;
    let (id, _, live, ops) = s.new_client("Maple Goods").await;
    let limits = json!({"limits": {"order_drop_offs": 6, "order_parcels_per_drop_off": 5, "preview_drop_offs": 100, "preview_parcels_per_drop_off": 50}});
    let r = s
        .send(s.http.put(s.url(&format!("/admin/clients/{id}/settings"))).bearer_auth(ADMIN_TOKEN).json(&limits))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut order = request(&[500.0]);
    let drop_off = order["drop_offs"][0].clone();
    for _ in 0..5 {
        order["drop_offs"].as_array_mut().unwrap().push(drop_off.clone());
    }
    let r = s.post("/requests/sync", &live, &order).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let trackings: Vec<String> = r.body["object"]["shipments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sh| sh["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(trackings.len(), 6);
    for to in ["to_pick_up", "picked_up"] {
        // Each shipment asked twice, all at once.
        let b = body(to);
        let moves = trackings.iter().chain(&trackings).map(|t| s.ops_move(&ops, t, &b));
        let replies = futures_util::future::join_all(moves).await;
        for (i, t) in trackings.iter().enumerate() {
            let (a, b) = (&replies[i], &replies[i + trackings.len()]);
            let mut statuses = [a.status, b.status];
            statuses.sort_unstable();
            assert_eq!(statuses, [200, 409], "{t} to {to}: {} / {}", a.body, b.body);
            let moved = if a.status == 200 { a } else { b };
            let o = &moved.body["object"];
            assert_eq!(o["drop_off_shipment"]["unique_id"], t.as_str());
            assert_eq!((o["status"].as_str(), o["pick_up_status"].as_str()), (Some(to), Some(to)), "{}", moved.body);
            let events: Vec<&str> = moved.body["object"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["status"].as_str().unwrap())
                .collect();
            assert_eq!(events.last(), Some(&to), "{}", moved.body);
        }
        let pick_up_events = s.scalar(&format!(
            "SELECT count(*) FROM shipment_events WHERE shipment_kind = 'pick_up' AND status = '{to}'"
        ));
        assert_eq!(pick_up_events, 1, "the pick-up leg follows once to {to}");
        let drop_off_events = s.scalar(&format!(
            "SELECT count(*) FROM shipment_events WHERE shipment_kind = 'drop_off' AND status = '{to}'"
        ));
        assert_eq!(drop_off_events, 6);
    }
    // Every shipment's events are numbered 1, 2, 3 (scheduled, to_pick_up, picked_up).
    assert_eq!(
        s.scalar("SELECT count(*) FROM shipment_events WHERE shipment_kind = 'drop_off' AND seq BETWEEN 1 AND 3"),
        18
    );
}
