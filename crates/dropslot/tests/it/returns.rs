//! When a delivery fails (CONTRACT §15), from the plans' and the driver's side, over real
//! HTTP: a failure through the driver API books a re-attempt that the next day's delivery plan
//! takes and the driver's start carries; a return is a stop of the return date's pick-up plan
//! at the merchant's pick-up address, handed back with the name of who took it, or cancelled
//! after its last failed return; a shipment moved after its route was published stays at the
//! depot and is shown as moved; the recipient's instruction reaches the driver and the run
//! sheet. The clock starts on Monday 2026-11-23 07:00 in Toronto and is moved by the tests.

use serde_json::{Value, json};

use crate::common::{PICK_UP, Reply, TestServer, assert_envelope};
use crate::plans::{DATE, driver, operator};

const TUESDAY: &str = "2026-11-24";
/// Monday 14:30 in Toronto: out with the parcels, the morning's pick-up slots closed.
const MONDAY_AFTERNOON: &str = "2026-11-23T19:30:00Z";
/// Tuesday 07:00 in Toronto: the day's plans are made.
const TUESDAY_MORNING: &str = "2026-11-24T12:00:00Z";
const RETURN_POLICY: &str = "[attempts]\nafter_failure = \"return\"\n";

/// A server with an operator, a merchant (its client id, live and ops tokens) and driver Ana
/// (every day, 08:00–22:00, a van of 10 parcels).
struct Fleet {
    s: TestServer,
    op: String,
    client: i64,
    live: String,
    ops: String,
    ana: String,
    ana_id: String,
}

async fn fleet(config: &str) -> Fleet {
    let s = TestServer::start_with(config).await;
    let op = operator(&s).await;
    let (client, _, live, ops) = s.new_client("Merchant").await;
    let (ana_id, ana) = driver(&s, &op, "Ana", 10, ("08:00", "22:00")).await;
    Fleet { s, op, client, live, ops, ana, ana_id }
}

impl Fleet {
    /// A live order for Monday's 14:00–18:00 slot at point `i`, two parcels; its tracking code
    /// and its parcels' pick-up codes.
    async fn order(&self, i: usize) -> (String, Vec<String>) {
        self.order_on(DATE, i).await
    }

    /// As [`Fleet::order`], for `date`.
    async fn order_on(&self, date: &str, i: usize) -> (String, Vec<String>) {
        let body = json!({
            "pick_up_address": {"text": PICK_UP},
            "drop_offs": [{
                "address": {"text": format!("{} Front St W, Toronto, ON M5V 2T6", 100 + i),
                            "lat": 43.640 + 0.003 * i as f64, "lng": -79.39,
                            "person_name": format!("Receiver {i}"), "person_phone": "+1 416 555 0100"},
                "scheduled_date": date, "time_slot_code": "TOR-DT-PM",
                "parcels": [{"unit": "g", "values": 1000}, {"unit": "g", "values": 900}]
            }]
        });
        let r = self.s.post("/requests/sync", &self.live, &body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let sh = &r.body["object"]["shipments"][0];
        let codes = sh["parcels"].as_array().unwrap().iter().map(|p| p["pick_up_code"].as_str().unwrap().to_string());
        (sh["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string(), codes.collect())
    }

    /// A plan of `kind` for `date` over Ana alone, published; the plan as answered.
    async fn publish(&self, kind: &str, date: &str) -> Value {
        let body = json!({"date": date, "depot": "YYZ1", "kind": kind, "driver_ids": [self.ana_id], "time_limit_s": 1});
        let r = self.s.post("/ops/plans", &self.op, &body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.body["object"]["id"].as_str().unwrap();
        let r = self.s.post(&format!("/ops/plans/{id}/publish"), &self.op, &json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["object"].clone()
    }

    /// The merchant's ops staff take the shipment to the depot (`processing`).
    async fn to_depot(&self, tracking: &str) {
        for to in ["to_pick_up", "picked_up", "processing"] {
            let r = self.s.ops_move(&self.ops, tracking, &json!({"to": to})).await;
            assert_eq!(r.status, 200, "{to}: {}", r.body);
        }
    }

    async fn day(&self) -> Value {
        let r = self.s.get("/driver/route", &self.ana).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["object"].clone()
    }

    async fn start(&self, key: &str, scanned: &[&String]) -> Reply {
        let req = self.s.http.post(self.s.url("/driver/route/start")).bearer_auth(&self.ana);
        self.s.send(req.header("Idempotency-Key", key).json(&json!({"scanned": scanned}))).await
    }

    async fn driver_move(&self, token: &str, tracking: &str, key: &str, body: &Value) -> Reply {
        let req = self.s.http.post(self.s.url(&format!("/driver/shipments/{tracking}/transitions"))).bearer_auth(token);
        self.s.send(req.header("Idempotency-Key", key).json(body)).await
    }

    /// The recipient leaves `text` as the delivery instruction of `tracking` (the change page's
    /// store call; the page itself is built elsewhere).
    async fn instruct(&self, tracking: &str, text: &str) {
        let change = dropslot_store::DeliveryChange { instruction: Some(text.into()), ..Default::default() };
        let target = dropslot_store::ChangeTarget::Code(tracking.to_string());
        let (now, by) = (self.s.app.clock.now(), dropslot_core::attempts::Changer::Recipient);
        let outcome = self.s.app.store.change_delivery(target, change, by, now).await;
        assert!(matches!(outcome, Ok(dropslot_store::ChangeOutcome::Changed(_))), "{outcome:?}");
    }

    /// The run sheet of `route` (a plan's route as answered): its barcodes and its text.
    async fn sheet(&self, route: &Value) -> (Vec<(String, String)>, String) {
        let path = format!("/ops/routes/{}/sheet.pdf", route["id"].as_str().unwrap());
        let res = self.s.http.get(self.s.url(&path)).bearer_auth(&self.op).send().await.unwrap();
        assert_eq!(res.status(), 200);
        crate::plans::scan_pdf(&res.bytes().await.unwrap())
    }

    fn at(&self, t: &str) {
        self.s.app.clock.set(t.parse().unwrap());
    }
}

/// Every stop of the day's routes (or a plan's), depots left out.
fn stops(routes: &Value) -> Vec<Value> {
    routes["routes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["stops"].as_array().unwrap().iter().cloned())
        .filter(|s| s["kind"] != "depot")
        .collect()
}

/// The driver's view of shipment `tracking` on the day's stops.
fn shipment<'a>(day: &'a Value, tracking: &str) -> &'a Value {
    crate::driver_api::day_shipments(day)
        .find(|sh| sh["unique_id"] == tracking)
        .unwrap_or_else(|| panic!("{tracking} is not on {day}"))
}

fn statuses(r: &Reply) -> Vec<String> {
    r.body["object"]["events"].as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap().to_string()).collect()
}

const FAILED: &str = "Nobody at the address";

/// Monday: the order is planned, published, started and failed by the driver.
async fn failed_on_monday(f: &Fleet) -> (String, Vec<String>, Reply) {
    let (tracking, codes) = f.order(0).await;
    f.publish("delivery", DATE).await;
    f.to_depot(&tracking).await;
    let r = f.start("start-mon", &codes.iter().collect::<Vec<_>>()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(shipment(&r.body["object"], &tracking)["status"], "in_transit");
    f.at(MONDAY_AFTERNOON);
    let r = f.driver_move(&f.ana, &tracking, "fail-mon", &json!({"to": "failed", "reason": FAILED})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    (tracking, codes, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_drop_off_is_planned_again_on_the_next_day_and_delivered() {
    let f = fleet("").await;
    let (tracking, codes, r) = failed_on_monday(&f).await;
    // The failure's own transaction booked the re-attempt: Tuesday, the same zone's slot.
    assert_eq!(r.body["object"]["status"], "to_attempt", "{}", r.body);
    assert_eq!(r.body["object"]["drop_off_shipment"]["scheduled_date"], TUESDAY);
    assert_eq!(statuses(&r)[4..], ["in_transit", "failed", "to_attempt"]);
    // Monday's route still lists it, as moved to Tuesday.
    let moved = shipment(&f.day().await, &tracking)["moved_to"].clone();
    assert_eq!((moved["date"].as_str(), moved["slot"].as_str()), (Some(TUESDAY), Some("14:00 - 18:00")), "{moved}");

    // Tuesday: the delivery plan of the date takes the re-attempt like any other shipment.
    f.at(TUESDAY_MORNING);
    let plan = f.publish("delivery", TUESDAY).await;
    let planned = stops(&plan);
    assert_eq!(planned.len(), 1, "{plan}");
    assert_eq!(
        (planned[0]["kind"].as_str(), &planned[0]["shipment_unique_ids"]),
        (Some("drop_off"), &json!([tracking]))
    );
    assert_eq!(planned[0]["window"]["from"], "2026-11-24T14:00:00-05:00");
    let day = f.day().await;
    assert_eq!(day["date"], TUESDAY);
    let sh = shipment(&day, &tracking);
    assert_eq!((sh["status"].as_str(), &sh["moved_to"]), (Some("to_attempt"), &Value::Null), "{sh}");
    // The start wants its parcels and takes it out again.
    let r = f.start("start-tue", &[&codes[0]]).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("scanned")[0].contains(&codes[1]), "{}", r.body);
    let r = f.start("start-tue", &codes.iter().collect::<Vec<_>>()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(shipment(&r.body["object"], &tracking)["status"], "in_transit");
    let delivered = json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "Receiver 0"}]});
    let r = f.driver_move(&f.ana, &tracking, "deliver-tue", &delivered).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["object"]["status"].as_str(), r.body["object"]["attempts"].as_i64()),
        (Some("delivered"), Some(2))
    );
    assert_eq!(statuses(&r)[7..], ["in_transit", "delivered"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_and_returns_stay_out_of_delivery_plans() {
    // `hold`: a failed shipment waits for its merchant's decision.
    let f = fleet("[attempts]\nafter_failure = \"hold\"\n").await;
    let (held, _) = f.order(0).await;
    let (returning, _) = f.order(1).await;
    let (waiting, _) = f.order(2).await;
    for tracking in [&held, &returning, &waiting] {
        f.to_depot(tracking).await;
    }
    let failed = json!({"to": "failed", "reason": FAILED});
    for (tracking, moves) in [
        (&held, vec![json!({"to": "in_transit"}), failed.clone()]),
        (&returning, vec![json!({"to": "in_transit"}), failed.clone(), json!({"to": "return_scheduled"})]),
    ] {
        for m in moves {
            let r = f.s.ops_move(&f.ops, tracking, &m).await;
            assert_eq!(r.status, 200, "{m}: {}", r.body);
        }
    }
    let body = json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "driver_ids": [f.ana_id], "time_limit_s": 1});
    let r = f.s.post("/ops/plans", &f.op, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let mut planned: Vec<String> = stops(&r.body["object"])
        .iter()
        .flat_map(|s| s["shipment_unique_ids"].as_array().unwrap().iter().map(|u| u.as_str().unwrap().to_string()))
        .collect();
    planned
        .extend(r.body["object"]["unassigned"].as_array().unwrap().iter().map(|u| u["shipment_unique_id"].to_string()));
    assert_eq!(planned, [waiting], "neither {held} (failed) nor {returning} (returning)");
}

/// Policy `return`: Monday's failure books a return into Tuesday's first pick-up slot.
async fn returning_on_tuesday(f: &Fleet) -> (String, Vec<String>, Value) {
    let (tracking, codes, r) = failed_on_monday(f).await;
    assert_eq!(r.body["object"]["status"], "return_scheduled", "{}", r.body);
    f.at(TUESDAY_MORNING);
    let plan = f.publish("pick_up", TUESDAY).await;
    (tracking, codes, plan)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_is_a_stop_of_the_pick_up_plan_handed_back_with_who_took_it() {
    let f = fleet(RETURN_POLICY).await;
    let (_, ben) = driver(&f.s, &f.op, "Ben", 10, ("08:00", "22:00")).await;
    let (tracking, codes, plan) = returning_on_tuesday(&f).await;
    let planned = stops(&plan);
    assert_eq!(planned.len(), 1, "{plan}");
    let stop = &planned[0];
    assert_eq!((stop["kind"].as_str(), &stop["shipment_unique_ids"]), (Some("return"), &json!([tracking])));
    assert_eq!(stop["address"], PICK_UP, "at the order's pick-up address");
    assert_eq!(
        (stop["window"]["from"].as_str(), stop["window"]["to"].as_str()),
        (Some("2026-11-24T09:00:00-05:00"), Some("2026-11-24T12:00:00-05:00"))
    );
    assert_eq!(stop["parcels"], 2);

    // The driver's route lists it with the parcels to hand back.
    let day = f.day().await;
    let listed = stops(&day);
    assert_eq!((listed[0]["kind"].as_str(), listed[0]["receiver"].as_str().is_some()), (Some("return"), true));
    let sh = shipment(&day, &tracking);
    assert_eq!(
        (sh["status"].as_str(), &sh["moved_to"], &sh["instruction"]),
        (Some("return_scheduled"), &Value::Null, &Value::Null)
    );
    let listed: Vec<&str> =
        sh["parcels"].as_array().unwrap().iter().map(|p| p["pick_up_code"].as_str().unwrap()).collect();
    assert_eq!(listed, codes.iter().map(String::as_str).collect::<Vec<_>>());
    // The van takes the returns out: their parcels are scanned at the start, nothing moves.
    let r = f.start("start-pick-up", &[]).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("scanned")[0].contains(&codes[0]), "{}", r.body);
    let r = f.start("start-pick-up", &codes.iter().collect::<Vec<_>>()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(shipment(&r.body["object"], &tracking)["status"], "return_scheduled");

    // Another driver's token does not reach it; a hand-back without a name is refused.
    let named =
        json!({"to": "returned", "proof_of_delivery": [{"type": "receiver_name", "value": "Sam at the front desk"}]});
    assert_envelope(&f.driver_move(&ben, &tracking, "back-ben", &named).await, 404);
    for body in [
        json!({"to": "returned"}),
        json!({"to": "returned", "proof_of_delivery": [{"type": "photo", "value": "a photo is no name"}]}),
    ] {
        let r = f.driver_move(&f.ana, &tracking, "back-nameless", &body).await;
        assert_envelope(&r, 422);
        assert!(r.error_at("proof_of_delivery")[0].contains("who took them"), "{}", r.body);
    }
    let r = f.driver_move(&f.ana, &tracking, "back", &named).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["status"], "returned");
    let last = r.body["object"]["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["proof_of_delivery"], json!([{"type": "receiver_name", "value": "Sam at the front desk"}]));
    let again = f.driver_move(&f.ana, &tracking, "back", &named).await;
    assert_eq!((again.status.as_u16(), again.headers["idempotent-replayed"].to_str().unwrap()), (200, "true"));

    // The run sheet prints the return stop with the parcels to hand back as barcodes.
    let route = plan["routes"].as_array().unwrap().iter().find(|r| r["driver_id"] == f.ana_id.as_str()).unwrap();
    let (scanned, text) = f.sheet(route).await;
    let mut found: Vec<String> = scanned.into_iter().map(|(_, code)| code).collect();
    found.sort();
    let mut expected = codes.clone();
    expected.sort();
    assert_eq!(found, expected, "{text}");
    assert!(text.contains("RETURN") && text.contains(&tracking), "{text}");

    // The dispatcher's plan page marks it, in the table and on the map.
    let mut v = crate::dashboard_http::Visitor::new(&f.s);
    let csrf = v.get("/ops/sign-in").await.csrf();
    assert_eq!(v.post("/ops/sign-in", &[("csrf", &csrf), ("token", &f.op)]).await.status, 303);
    let page = v.get(&format!("/ops/plans/{}", plan["id"].as_str().unwrap())).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("A1 <span class=\"tag\">Return</span>"), "{}", page.body);
    assert_eq!(page.body.matches("<g class=\"stop return\">").count(), 1, "{}", page.body);
    assert!(page.body.contains("A return stop (parcels handed back to the merchant)"), "{}", page.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_return_failed_twice_is_cancelled() {
    let f = fleet(RETURN_POLICY).await;
    let (tracking, _, _) = returning_on_tuesday(&f).await;
    let closed = json!({"to": "failed", "reason": "Merchant closed"});
    // The first failed hand-back books the return again: the afternoon's pick-up slot.
    let r = f.driver_move(&f.ana, &tracking, "back-1", &closed).await;
    assert_eq!((r.status.as_u16(), r.body["object"]["status"].as_str()), (200, Some("return_scheduled")), "{}", r.body);
    let moved = shipment(&f.day().await, &tracking)["moved_to"].clone();
    assert_eq!((moved["date"].as_str(), moved["slot"].as_str()), (Some(TUESDAY), Some("12:00 - 15:00")), "{moved}");
    assert_eq!(moved["window"]["from"], "2026-11-24T12:00:00-05:00");
    // A second pick-up plan of the day takes it in its new slot; failed again, it is cancelled.
    let plan = f.publish("pick_up", TUESDAY).await;
    let planned = stops(&plan);
    assert_eq!((planned.len(), planned[0]["kind"].as_str()), (1, Some("return")), "{plan}");
    assert_eq!(planned[0]["window"]["from"], "2026-11-24T12:00:00-05:00");
    let r = f.driver_move(&f.ana, &tracking, "back-2", &closed).await;
    assert_eq!((r.status.as_u16(), r.body["object"]["status"].as_str()), (200, Some("cancelled")), "{}", r.body);
    let last = r.body["object"]["events"].as_array().unwrap().last().unwrap().clone();
    assert!(last["reason"].as_str().unwrap().contains("return failed 2 time(s)"), "{last}");
    assert_eq!(
        f.s.scalar(&format!("SELECT return_attempts FROM drop_off_shipments WHERE unique_id = '{tracking}'")),
        2
    );
    // Final: nothing more to do at either stop.
    let day = f.day().await;
    assert!(
        day["routes"].as_array().unwrap().iter().all(|r| r["stops"][0]["shipments"][0]["status"] == "cancelled"),
        "{day}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_off_moved_to_another_day_after_publishing_stays_at_the_depot() {
    let f = fleet("").await;
    let (staying, staying_codes) = f.order(0).await;
    let (moving, moving_codes) = f.order(1).await;
    f.publish("delivery", DATE).await;
    f.to_depot(&staying).await;
    f.to_depot(&moving).await;
    // The merchant moves one to Tuesday (the reschedule's store call, as its page makes it).
    let now = f.s.app.clock.now();
    let area = &f.s.app.settings.area;
    let tuesday: jiff::civil::Date = TUESDAY.parse().unwrap();
    let offer = dropslot_core::attempts::asked_offer(area, "TOR-DT", tuesday, "TOR-DT-PM", tuesday, now).unwrap();
    let scope =
        dropslot_store::Scope { client: dropslot_core::ids::ClientId(f.client), mode: dropslot_store::Mode::Live };
    let change = dropslot_store::DeliveryChange { slot: Some(offer), ..Default::default() };
    let target = dropslot_store::ChangeTarget::Tenant(scope, moving.clone());
    let outcome = f.s.app.store.change_delivery(target, change, dropslot_core::attempts::Changer::Merchant, now).await;
    assert!(matches!(outcome, Ok(dropslot_store::ChangeOutcome::Changed(_))), "{outcome:?}");

    // Shown to the driver as moved, not dropped; the start neither wants nor moves it.
    let day = f.day().await;
    let sh = shipment(&day, &moving);
    assert_eq!((sh["status"].as_str(), sh["moved_to"]["date"].as_str()), (Some("processing"), Some(TUESDAY)), "{sh}");
    assert_eq!(shipment(&day, &staying)["moved_to"], Value::Null);
    let r = f.start("start", &staying_codes.iter().collect::<Vec<_>>()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(shipment(&r.body["object"], &staying)["status"], "in_transit");
    assert_eq!(shipment(&r.body["object"], &moving)["status"], "processing", "left at the depot");
    assert_eq!(f.s.scalar("SELECT count(*) FROM shipment_events WHERE status = 'in_transit'"), 1);
    // Its parcels still scan (the driver is told where they go), and they are no one's load.
    assert_eq!(f.s.post("/driver/scans", &f.ana, &json!({"code": moving_codes[0]})).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipients_instruction_reaches_the_driver_at_its_next_read_and_the_run_sheet() {
    let f = fleet("").await;
    let (told, _) = f.order(0).await;
    let (silent, _) = f.order(1).await;
    let plan = f.publish("delivery", DATE).await;
    assert_eq!(shipment(&f.day().await, &told)["instruction"], Value::Null);
    // The recipient leaves an instruction on the change page (its store call).
    let text = "Leave it at the back door, code 4412";
    f.instruct(&told, text).await;
    let day = f.day().await;
    assert_eq!(shipment(&day, &told)["instruction"], text);
    assert_eq!(shipment(&day, &silent)["instruction"], Value::Null);
    // The route's run sheet prints it.
    let (_, sheet) = f.sheet(&plan["routes"][0]).await;
    assert!(sheet.contains(&format!("Instruction: {text}")), "{sheet}");
    assert_eq!(sheet.matches("Instruction:").count(), 1, "{sheet}");
}

/// The app on a phone: Tuesday's two routes of Ana, a pick-up route with a return stop beside
/// a pick-up at the same merchant, and a delivery whose recipient left an instruction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_a_return_is_handed_back_with_a_name_and_an_instruction_is_shown() {
    let f = fleet(RETURN_POLICY).await;
    let (returning, _, _) = failed_on_monday(&f).await;
    f.at(TUESDAY_MORNING);
    let (told, _) = f.order_on(TUESDAY, 1).await;
    let text = "Ring twice, the bell is broken";
    f.instruct(&told, text).await;
    let pick_ups = f.publish("pick_up", TUESDAY).await;
    let kinds: Vec<String> = stops(&pick_ups).iter().map(|s| s["kind"].as_str().unwrap().to_string()).collect();
    assert_eq!(kinds.len(), 2, "a pick-up and a return at one merchant are two stops: {pick_ups}");
    f.publish("delivery", TUESDAY).await;

    let b = crate::driver_app::phone(None).await;
    b.goto(&format!("{}/driver#token={}", f.s.base, f.ana)).await;
    b.wait_until("document.querySelectorAll('li.stop').length === 3").await;
    // The instruction stands out on its stop; the return stop offers its two actions.
    let shown = b.text(&format!("[data-shipment='{told}'] .instruction")).await;
    assert_eq!(shown, format!("Instruction: {text}"));
    let at = format!("[data-shipment='{returning}']");
    assert_eq!(b.count(&format!("{at} button.handback")).await, 1);
    assert_eq!(b.text(&format!("{at} button.fail")).await, "Could not hand back");
    crate::driver_app::check(&b, "driver-return").await;
    // Handed back: the name of who took the parcels is asked for, then sent.
    b.tap(&format!("{at} button.handback")).await;
    b.wait_until("document.getElementById('taker') !== null").await;
    b.tap("#confirm").await;
    b.wait_until("document.querySelector('.sheet .alert') !== null").await;
    assert!(b.text(".sheet .alert").await.contains("who took the parcels"));
    b.fill("#taker", "Sam at the front desk").await;
    crate::driver_app::check(&b, "driver-hand-back").await;
    b.tap("#confirm").await;
    crate::driver_app::all_sent(&b, 1).await;
    let r = f.s.get(&format!("/shipments/{returning}"), &f.live).await;
    assert_eq!(r.body["object"]["status"], "returned", "{}", r.body);
    let last = r.body["object"]["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["proof_of_delivery"], json!([{"type": "receiver_name", "value": "Sam at the front desk"}]));
    b.wait_until(&format!("document.querySelector(\"{at} .status\").textContent === 'returned'")).await;
}
