//! The day as it runs (CONTRACT §16, issue 46), on both backends: an order booked after the
//! publish goes into a route whose van is still at the depot (never a started one), and its
//! driver's next read lists it; one no such route can take goes to `unassigned` with its
//! reason and is rebooked; a driver out hands their route over, or is left out of a
//! re-plan, and a started route keeps its stops.

use serde_json::{Value, json};

use crate::common::{TestServer, assert_envelope};
use crate::driver_api::{DATE, driver, operator, order, shipments_of};

/// The plan's routes as (route id, driver id, shipments in order).
async fn routes(s: &TestServer, op: &str, id: &str) -> (Value, Vec<(String, String, Vec<String>)>) {
    let r = s.get(&format!("/ops/plans/{id}"), op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let routes = r.body["object"]["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|route| {
            let shipments = route["stops"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|st| st["shipment_unique_ids"].as_array().into_iter().flatten())
                .map(|u| u.as_str().unwrap().to_string())
                .collect();
            (route["id"].as_str().unwrap().to_string(), route["driver_id"].as_str().unwrap().to_string(), shipments)
        })
        .collect();
    (r.body["object"].clone(), routes)
}

fn unassigned(plan: &Value) -> Vec<(String, String)> {
    plan["unassigned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["shipment_unique_id"].as_str().unwrap().to_string(), u["reason"].as_str().unwrap().to_string()))
        .collect()
}

/// Publishes the delivery plan of `DATE` over `drivers` (ids); its id.
async fn publish(s: &TestServer, op: &str, drivers: &[&str]) -> String {
    let body = json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1, "driver_ids": drivers});
    let r = s.post("/ops/plans", op, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), op, &json!({})).await.status, 200);
    id
}

/// The van of `shipments` leaves the depot: each goes `in_transit` (the route has started).
async fn leave(s: &TestServer, ops: &str, shipments: &[String]) {
    for tracking in shipments {
        s.ops_moves(ops, tracking, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_booked_after_publish_joins_a_route_not_started_and_never_a_started_one() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    // Two vans of four parcels; every order is two parcels.
    let (ana_id, ana) = driver(&s, &op, "Ana").await;
    let (ben_id, ben) = driver(&s, &op, "Ben").await;
    let (first, _) = order(&s, &live, 0).await;
    let id = publish(&s, &op, &[&ana_id, &ben_id]).await;
    let (_, before) = routes(&s, &op, &id).await;
    let (started, waiting) = match before.iter().find(|r| r.2.contains(&first)) {
        Some(r) if r.1 == ana_id => ((ana_id.clone(), ana.clone()), (ben_id.clone(), ben.clone())),
        _ => ((ben_id.clone(), ben.clone()), (ana_id.clone(), ana.clone())),
    };
    // The first order's van leaves: it has room for one more, but never gets it.
    leave(&s, &ops, std::slice::from_ref(&first)).await;

    // Booked after the publish: in the waiting van's route when the order is answered, and on
    // its driver's next read; the started route is as it was.
    let (late, _) = order(&s, &live, 1).await;
    let (plan, after) = routes(&s, &op, &id).await;
    let into = after.iter().find(|r| r.2.contains(&late)).unwrap_or_else(|| panic!("{late} routed: {plan}"));
    assert_eq!(into.1, waiting.0, "the van still at the depot takes it");
    let on_started = after.iter().find(|r| r.1 == started.0).unwrap();
    assert_eq!(on_started.2, vec![first.clone()], "the started route is unchanged");
    assert!(shipments_of(&s.get("/driver/route", &waiting.1).await.body["object"]).contains(&late));
    assert!(!shipments_of(&s.get("/driver/route", &started.1).await.body["object"]).contains(&late));
    // Its ETA window is set (the route was re-timed).
    let eta = s.get(&format!("/shipments/{late}"), &live).await;
    assert!(eta.body["object"]["eta"].is_object(), "{}", eta.body);

    // The waiting van takes one more (four parcels), then no route not started has room: the
    // next goes to `unassigned` with the reason, and is rebooked into a later slot.
    let (second, _) = order(&s, &live, 2).await;
    let (_, after) = routes(&s, &op, &id).await;
    assert!(after.iter().any(|r| r.1 == waiting.0 && r.2.contains(&second)));
    let (full, _) = order(&s, &live, 3).await;
    let (plan, after) = routes(&s, &op, &id).await;
    assert!(!after.iter().any(|r| r.2.contains(&full)), "{plan}");
    assert!(
        unassigned(&plan)
            .contains(&(full.clone(), "no route not started yet can take it without breaking a rule".into())),
        "{plan}"
    );
    let moved = s.get(&format!("/shipments/{full}"), &live).await;
    let slot = moved.body["object"]["drop_off_shipment"]["time_slot"]["code"].as_str().unwrap().to_string();
    let date = moved.body["object"]["drop_off_shipment"]["scheduled_date"].as_str().unwrap().to_string();
    assert_ne!((date.as_str(), slot.as_str()), (DATE, "TOR-DT-PM"), "rebooked out of the full slot");

    // Every van gone: a late order waits for the dispatcher with that reason.
    let waiting_shipments: Vec<String> = after.iter().find(|r| r.1 == waiting.0).unwrap().2.clone();
    leave(&s, &ops, &waiting_shipments).await;
    let (last, _) = order(&s, &live, 4).await;
    let (plan, _) = routes(&s, &op, &id).await;
    assert!(
        unassigned(&plan).contains(&(last.clone(), "booked after every route of the plan had left the depot".into())),
        "{plan}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_out_hands_the_route_over_or_is_left_out_and_a_started_route_keeps_its_stops() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (ana_id, ana) = driver(&s, &op, "Ana").await;
    let (ben_id, ben) = driver(&s, &op, "Ben").await;
    let (cy_id, cy) = driver(&s, &op, "Cy").await;
    let mut booked = Vec::new();
    for i in 0..3 {
        booked.push(order(&s, &live, i).await.0);
    }
    // Ana and Ben drive; Cy is spare.
    let id = publish(&s, &op, &[&ana_id, &ben_id]).await;
    let (_, before) = routes(&s, &op, &id).await;
    let ana_route = before.iter().find(|r| r.1 == ana_id).unwrap().clone();
    let ben_route = before.iter().find(|r| r.1 == ben_id).unwrap().clone();
    assert!(!ana_route.2.is_empty() && !ben_route.2.is_empty(), "{before:?}");
    leave(&s, &ops, &ana_route.2).await;

    // Ana's van has left: her route keeps its driver.
    let r = s.post(&format!("/ops/routes/{}/reassign", ana_route.0), &op, &json!({"driver_id": cy_id})).await;
    assert_envelope(&r, 409);
    // Checked field by field, and only for operators.
    let r = s.post(&format!("/ops/routes/{}/reassign", ben_route.0), &op, &json!({"driver_id": "DRVnobody"})).await;
    assert_envelope(&r, 422);
    r.error_at("driver_id");
    let r = s.post(&format!("/ops/routes/{}/reassign", ben_route.0), &op, &json!({"driver_id": ben_id})).await;
    r.error_at("driver_id");
    // (A missing field's status is issue 47's; its path is named already.)
    let r = s.post(&format!("/ops/routes/{}/reassign", ben_route.0), &op, &json!({})).await;
    r.error_at("driver_id");
    assert_envelope(
        &s.post(&format!("/ops/routes/{id}.DRVnobody/reassign"), &op, &json!({"driver_id": cy_id})).await,
        404,
    );
    let r = s.post(&format!("/ops/routes/{}/reassign", ben_route.0), &live, &json!({"driver_id": cy_id})).await;
    assert!(r.status == 401 || r.status == 403, "{}", r.status);

    // Ben calls in sick before loading: Cy takes his whole route; Ben's token no longer
    // reaches it.
    let r = s.post(&format!("/ops/routes/{}/reassign", ben_route.0), &op, &json!({"driver_id": cy_id})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, after) = routes(&s, &op, &id).await;
    let cy_route = after.iter().find(|r| r.1 == cy_id).unwrap();
    assert_eq!(cy_route.0, format!("{id}.{cy_id}"));
    assert_eq!(cy_route.2, ben_route.2, "the same stops, in the same order");
    assert!(after.iter().find(|r| r.1 == ben_id).unwrap().2.is_empty());
    assert_eq!(shipments_of(&s.get("/driver/route", &cy).await.body["object"]), ben_route.2);
    assert!(shipments_of(&s.get("/driver/route", &ben).await.body["object"]).is_empty());
    let theirs = &ben_route.2[0];
    let delivered = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "R"}]});
    let req = s.http.post(s.url(&format!("/driver/shipments/{theirs}/transitions"))).bearer_auth(&ben);
    assert_envelope(&s.send(req.header("Idempotency-Key", "k1").json(&delivered)).await, 404);

    // Cy is out too: a re-plan without him puts each of his stops on another route not
    // started (Ben's, empty now) or in `unassigned` with a reason; Ana's started route keeps
    // its stops, however much room it has.
    let r = s.post(&format!("/ops/plans/{id}/optimize"), &op, &json!({"exclude_driver_ids": ["DRVnobody"]})).await;
    assert_envelope(&r, 422);
    r.error_at("exclude_driver_ids.0");
    let r = s
        .post(&format!("/ops/plans/{id}/optimize"), &op, &json!({"exclude_driver_ids": [cy_id], "time_limit_s": 1}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (plan, after) = routes(&s, &op, &id).await;
    assert!(!after.iter().any(|r| r.1 == cy_id), "Cy has no route: {plan}");
    assert!(shipments_of(&s.get("/driver/route", &cy).await.body["object"]).is_empty());
    assert_eq!(after.iter().find(|r| r.1 == ana_id).unwrap().2, ana_route.2, "the started route is unchanged");
    let left = unassigned(&plan);
    for shipment in &ben_route.2 {
        let routed = after.iter().any(|r| r.1 == ben_id && r.2.contains(shipment));
        let waits = left.iter().any(|(u, reason)| u == shipment && !reason.is_empty());
        assert!(routed || waits, "{shipment} is routed or waits with a reason: {plan}");
        assert!(!after.iter().any(|r| r.1 == ana_id && r.2.contains(shipment)), "never onto the started van");
    }
    // Everyone out but the started van: every stop not on it waits with the reason.
    let r = s
        .post(&format!("/ops/plans/{id}/optimize"), &op, &json!({"exclude_driver_ids": [ben_id], "time_limit_s": 1}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let (plan, after) = routes(&s, &op, &id).await;
    assert_eq!(after.len(), 1, "{plan}");
    assert_eq!(after[0].2, ana_route.2);
    let _ = ana;
}

/// The plan page's "driver out" forms do what the API does: a route handed over, a driver left
/// out of a re-plan, and a refusal (a route already on the road) shown in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_page_hands_a_route_over_and_leaves_a_driver_out() {
    use crate::dashboard_http::Visitor;
    use reqwest::StatusCode;
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (ana_id, _) = driver(&s, &op, "Ana").await;
    let (ben_id, _) = driver(&s, &op, "Ben").await;
    let (cy_id, _) = driver(&s, &op, "Cy").await;
    for i in 0..3 {
        order(&s, &live, i).await;
    }
    let id = publish(&s, &op, &[&ana_id, &ben_id]).await;
    let (_, before) = routes(&s, &op, &id).await;
    let ana_route = before.iter().find(|r| r.1 == ana_id).unwrap().clone();
    let ben_route = before.iter().find(|r| r.1 == ben_id).unwrap().clone();
    leave(&s, &ops, &ana_route.2).await;

    let mut v = Visitor::new(&s);
    let form = v.get("/ops/sign-in").await;
    let csrf = form.csrf();
    assert_eq!(v.post("/ops/sign-in", &[("csrf", &csrf), ("token", &op)]).await.status, StatusCode::SEE_OTHER);
    let page = v.get(&format!("/ops/plans/{id}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("A driver out") && page.body.contains("Hand the route over"), "{}", page.body);
    let csrf = page.csrf();

    let r = v
        .post(
            &format!("/ops/plans/{id}/reassign"),
            &[("csrf", &csrf), ("route_id", &ana_route.0), ("driver_id", &cy_id)],
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.body.contains("This route has started"), "{}", r.body);
    let r = v
        .post(
            &format!("/ops/plans/{id}/reassign"),
            &[("csrf", &csrf), ("route_id", &ben_route.0), ("driver_id", &cy_id)],
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let (_, after) = routes(&s, &op, &id).await;
    assert_eq!(after.iter().find(|r| r.1 == cy_id).unwrap().2, ben_route.2);

    let r = v.post(&format!("/ops/plans/{id}/exclude"), &[("csrf", &csrf), ("driver_id", &cy_id)]).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let (_, after) = routes(&s, &op, &id).await;
    assert!(!after.iter().any(|r| r.1 == cy_id));
    assert_eq!(after.iter().find(|r| r.1 == ana_id).unwrap().2, ana_route.2);
    // Without the session's token nothing changes.
    let r = v.post(&format!("/ops/plans/{id}/exclude"), &[("csrf", "forged"), ("driver_id", &ana_id)]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}
