//! What follows a failed delivery (CONTRACT §15), end to end on the backend under test: ops
//! failures re-attempt a live shipment into a later slot, the last one books a return, and a
//! return stop that fails twice is cancelled; each decided in the failure's own transaction,
//! with the slots' places taken and given back once.

use serde_json::{Value, json};

use crate::common::{TestServer, request};

/// An ops move of `tracking` to `to` that must be taken; the shipment it answers with.
async fn moved(s: &TestServer, ops: &str, tracking: &str, to: &str) -> Value {
    let body = if to == "failed" { json!({"to": to, "reason": "Nobody at home"}) } else { json!({"to": to}) };
    let r = s.ops_move(ops, tracking, &body).await;
    assert_eq!(r.status, 200, "{to}: {}", r.body);
    r.body["object"].clone()
}

fn status(o: &Value) -> &str {
    o["status"].as_str().unwrap_or_default()
}

fn date(o: &Value) -> String {
    o["drop_off_shipment"]["scheduled_date"].as_str().expect("scheduled_date").to_string()
}

/// The last `n` events' (status, actor).
fn last_events(o: &Value, n: usize) -> Vec<(String, String)> {
    let events = o["events"].as_array().expect("events");
    events[events.len().saturating_sub(n)..]
        .iter()
        .map(|e| (e["status"].as_str().unwrap().to_string(), e["actor"].as_str().unwrap().to_string()))
        .collect()
}

fn pair(status: &str, actor: &str) -> (String, String) {
    (status.to_string(), actor.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_reattempt_then_return_then_cancel() {
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Maple Goods").await;
    let r = s.post("/requests/sync", &live, &request(&[500.0])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let tracking = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let booked = date(&r.body["object"]["shipments"][0]);
    let pick_up_stops =
        || s.scalar("SELECT coalesce(sum(stops), 0) FROM slot_fill WHERE mode = 'live' AND kind = 'pick_up'");
    let drop_off_stops =
        || s.scalar("SELECT coalesce(sum(stops), 0) FROM slot_fill WHERE mode = 'live' AND kind = 'drop_off'");
    assert_eq!((pick_up_stops(), drop_off_stops()), (1, 1), "the order's own places");
    for to in ["to_pick_up", "picked_up", "processing", "in_transit"] {
        moved(&s, &ops, &tracking, to).await;
    }

    // Two failures with attempts left: each re-attempted (`to_attempt`, by the service) in a
    // slot from the next operating day, which takes a place (the failed slot's was used).
    let mut previous = booked.clone();
    for attempt in 1..=2 {
        let o = moved(&s, &ops, &tracking, "failed").await;
        assert_eq!(status(&o), "to_attempt", "attempt {attempt}: {o}");
        assert_eq!(o["attempts"], attempt);
        assert!(date(&o) > booked, "attempt {attempt}: re-attempt on {} after {booked}", date(&o));
        assert!(date(&o) >= previous, "attempt {attempt}: {} before {previous}", date(&o));
        assert_eq!(last_events(&o, 2), [pair("failed", "ops"), pair("to_attempt", "system")]);
        assert_eq!(drop_off_stops(), 1 + attempt);
        previous = date(&o);
        assert_eq!(status(&moved(&s, &ops, &tracking, "in_transit").await), "in_transit");
    }

    // The third (the default maximum): a return to the sender, booked into a pick-up slot.
    let o = moved(&s, &ops, &tracking, "failed").await;
    assert_eq!(status(&o), "return_scheduled", "{o}");
    assert_eq!(o["attempts"], 3);
    assert_eq!(last_events(&o, 2), [pair("failed", "ops"), pair("return_scheduled", "system")]);
    assert_eq!((pick_up_stops(), drop_off_stops()), (2, 3), "the return takes one pick-up stop");
    let returns = format!("SELECT count(*) FROM drop_off_shipments WHERE unique_id = '{tracking}'");
    assert_eq!(s.scalar(&format!("{returns} AND return_date IS NOT NULL AND return_attempts = 0")), 1);

    // The return stop fails: booked again into a later pick-up slot (its place moved, not
    // added), the shipment still `return_scheduled`.
    let o = moved(&s, &ops, &tracking, "failed").await;
    assert_eq!(status(&o), "return_scheduled", "{o}");
    assert_eq!(pick_up_stops(), 2);
    assert_eq!(s.scalar(&format!("{returns} AND return_date IS NOT NULL AND return_attempts = 1")), 1);

    // It fails again (the default maximum of two): cancelled, its place given back.
    let o = moved(&s, &ops, &tracking, "failed").await;
    assert_eq!(status(&o), "cancelled", "{o}");
    assert_eq!(last_events(&o, 1), [pair("cancelled", "ops")]);
    assert_eq!((pick_up_stops(), drop_off_stops()), (1, 3));
    assert_eq!(s.scalar(&format!("{returns} AND return_date IS NULL AND return_attempts = 2")), 1);
    // A final status: nothing follows.
    let r = s.ops_move(&ops, &tracking, &json!({"to": "failed", "reason": "Nobody at home"})).await;
    assert_eq!(r.status, 409, "{}", r.body);

    // Every status change is one event: scheduled … in_transit, three failures with their
    // follow-ups and the two in_transit between, and the cancellation (a failed return stop
    // booked again records none: its webhook is `same.shipment.rescheduled`).
    let events = format!(
        "SELECT count(*) FROM shipment_events e JOIN drop_off_shipments d ON d.id = e.shipment_id
         WHERE e.shipment_kind = 'drop_off' AND d.unique_id = '{tracking}'"
    );
    assert_eq!(s.scalar(&events), 5 + 3 * 2 + 2 + 1);
}

/// The decisions of the merchant and the recipient (`AttemptStore`, which the service's routes
/// will call), on the store itself: each one transaction with its status change, its place
/// taken in the new slot and the old one given back only where its attempt was not made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merchant_and_the_recipient_decide() {
    use dropslot_core::attempts::{AfterFailure, Changer, Policy, change_offers, return_offers};
    use dropslot_core::quote::capacity::Override;
    use dropslot_store::{ChangeOutcome, ChangeTarget, DeliveryChange, Mode, Scope, StoredShipment, Visibility};

    fn changed(outcome: ChangeOutcome) -> Box<StoredShipment> {
        match outcome {
            ChangeOutcome::Changed(s) => s,
            other => panic!("not changed: {other:?}"),
        }
    }

    let s = TestServer::start().await;
    let (client, _, live, ops) = s.new_client("Maple Goods").await;
    let store = &s.app.store;
    let scope = Scope { client: dropslot_core::ids::ClientId(client), mode: Mode::Live };
    let now = s.app.clock.now();

    // The policy: none until set, then as set (a second set replaces it).
    assert_eq!(store.attempt_policy(scope).await.unwrap(), None);
    let hold = Policy { max_attempts: 3, after_failure: AfterFailure::Return, max_return_attempts: 1 };
    store.set_attempt_policy(scope, hold, now).await.unwrap();
    let hold = Policy { max_attempts: 2, after_failure: AfterFailure::Hold, ..hold };
    store.set_attempt_policy(scope, hold, now).await.unwrap();
    assert_eq!(store.attempt_policy(scope).await.unwrap(), Some(hold));

    // `hold`: a failure waits for the merchant, with the policy's maximum of attempts.
    let r = s.post("/requests/sync", &live, &request(&[500.0])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let tracking = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    for to in ["to_pick_up", "picked_up", "processing", "in_transit"] {
        moved(&s, &ops, &tracking, to).await;
    }
    let o = moved(&s, &ops, &tracking, "failed").await;
    assert_eq!((status(&o), o["max_attempts"].as_i64()), ("failed", Some(2)), "{o}");
    let drop_off_stops =
        || s.scalar("SELECT coalesce(sum(stops), 0) FROM slot_fill WHERE mode = 'live' AND kind = 'drop_off'");
    let pick_up_stops =
        || s.scalar("SELECT coalesce(sum(stops), 0) FROM slot_fill WHERE mode = 'live' AND kind = 'pick_up'");
    assert_eq!((drop_off_stops(), pick_up_stops()), (1, 1));

    let shipment = store.shipment(Visibility::Ops, &tracking).await.unwrap().unwrap();
    let area = &s.app.settings.area;
    let zone = area.zone(area.zone_by_code(&shipment.drop_off.zone_code).unwrap());
    let today = now.to_zoned(area.city(zone.city).tz.clone()).date();
    let current = (shipment.drop_off.scheduled_date.clone(), shipment.drop_off.slot_code.clone());
    let offers: Vec<_> = change_offers(area, &zone.code, today, now)
        .into_iter()
        .filter(|o| (o.at.date.to_string(), o.at.slot.clone()) != current)
        .collect();
    assert!(offers.len() >= 3, "slots to choose from");
    let mine = ChangeTarget::Tenant(scope, tracking.clone());
    let to = |i: usize, expect: Option<(String, String)>| DeliveryChange {
        slot: Some(offers[i].clone()),
        instruction: None,
        expect,
    };

    // Another client's shipment is not found; a slot seen before a change is stale.
    let other = Scope { client: dropslot_core::ids::ClientId(client + 1000), mode: Mode::Live };
    let r = store.change_delivery(ChangeTarget::Tenant(other, tracking.clone()), to(0, None), Changer::Merchant, now);
    assert!(matches!(r.await.unwrap(), ChangeOutcome::NotFound));
    let seen = Some(("2026-01-01".to_string(), "X".to_string()));
    match store.change_delivery(mine.clone(), to(0, seen), Changer::Merchant, now).await.unwrap() {
        ChangeOutcome::Stale(date, slot) => assert_eq!((date, slot), current.clone()),
        other => panic!("{other:?}"),
    }
    // A slot closed by its date's override is full: nothing written.
    let full = Override { stops: Some(Some(0)), parcels: None };
    store.set_capacity_override(offers[2].at.clone(), full, now).await.unwrap();
    assert!(matches!(
        store.change_delivery(mine.clone(), to(2, None), Changer::Merchant, now).await.unwrap(),
        ChangeOutcome::Full
    ));
    assert_eq!(drop_off_stops(), 1);

    // The merchant reschedules the failed shipment: `to_attempt` in the new slot, which takes
    // a place (the failed slot's was used).
    let sh = changed(
        store.change_delivery(mine.clone(), to(0, Some(current.clone())), Changer::Merchant, now).await.unwrap(),
    );
    assert_eq!(sh.drop_off.status.as_str(), "to_attempt");
    assert_eq!(
        (sh.drop_off.scheduled_date.clone(), sh.drop_off.slot_code.clone()),
        (offers[0].at.date.to_string(), offers[0].at.slot.clone())
    );
    assert_eq!(sh.events.last().map(|e| e.actor.as_str()), Some("client"));
    assert_eq!(drop_off_stops(), 2);
    // The recipient, by tracking code: another slot (the one not attempted is given back)
    // and an instruction; an empty one clears it.
    let change = DeliveryChange { instruction: Some("Back door, code 4412".into()), ..to(1, None) };
    let sh = changed(
        store.change_delivery(ChangeTarget::Code(tracking.clone()), change, Changer::Recipient, now).await.unwrap(),
    );
    assert_eq!(sh.drop_off.slot_code, offers[1].at.slot);
    assert_eq!(sh.drop_off.instruction.as_deref(), Some("Back door, code 4412"));
    assert_eq!(drop_off_stops(), 2);
    let clear = DeliveryChange { instruction: Some(String::new()), ..DeliveryChange::default() };
    let sh = changed(
        store.change_delivery(ChangeTarget::Code(tracking.clone()), clear, Changer::Recipient, now).await.unwrap(),
    );
    assert_eq!(sh.drop_off.instruction, None);

    // A return with no pick-up slot with room (every one closed by an override of 0 stops)
    // writes nothing (the re-attempt keeps its place).
    let city = &area.city(zone.city).code;
    let closed = dropslot_core::quote::capacity::Override { stops: Some(Some(0)), parcels: None };
    for o in return_offers(area, city, now) {
        store.set_capacity_override(o.at.clone(), closed, now).await.unwrap();
    }
    let r = store.return_to_sender(scope, &tracking, now).await.unwrap();
    assert!(matches!(r, ChangeOutcome::NoRoom), "{r:?}");
    assert_eq!((drop_off_stops(), pick_up_stops()), (2, 1));
    for o in return_offers(area, city, now) {
        store.set_capacity_override(o.at, dropslot_core::quote::capacity::Override::default(), now).await.unwrap();
    }
    // The merchant sends it back: `return_scheduled` in a pick-up slot, the re-attempt's place
    // given back; a return's delivery slot can no longer change.
    let sh = changed(store.return_to_sender(scope, &tracking, now).await.unwrap());
    assert_eq!(sh.drop_off.status.as_str(), "return_scheduled");
    assert!(sh.drop_off.return_slot.is_some());
    assert_eq!((drop_off_stops(), pick_up_stops()), (1, 2));
    assert!(matches!(
        store.change_delivery(mine.clone(), to(0, None), Changer::Merchant, now).await.unwrap(),
        ChangeOutcome::Closed(s) if s.as_str() == "return_scheduled"
    ));

    // The board lists the day's failure, and the return due.
    let day = jiff::SignedDuration::from_hours(12);
    let board = store.failures(&zone.warehouse, now - day, now + day, today).await.unwrap();
    assert_eq!(
        board.failed.iter().map(|l| (l.unique_id.as_str(), l.reason.as_deref())).collect::<Vec<_>>(),
        [(tracking.as_str(), Some("Nobody at home"))]
    );
    assert_eq!(board.returns.iter().map(|l| l.unique_id.as_str()).collect::<Vec<_>>(), [tracking.as_str()]);
    assert!(board.reattempts.is_empty());

    // The merchant cancels the return: its pick-up stop given back; once only.
    let sh = changed(store.cancel_shipment(scope, &tracking, now).await.unwrap());
    assert_eq!((sh.drop_off.status.as_str(), sh.drop_off.return_slot.is_none()), ("cancelled", true));
    assert_eq!((drop_off_stops(), pick_up_stops()), (1, 1));
    assert!(matches!(store.cancel_shipment(scope, &tracking, now).await.unwrap(), ChangeOutcome::Refused(_)));
    assert_eq!(pick_up_stops(), 1);
}
