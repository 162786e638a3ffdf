//! The recipient's change page end to end (CONTRACT §15): reached by the link the tracking page
//! and every recipient message carry, posted as a plain form over real HTTP, read back over the
//! API, the admin capacity view, a real webhook receiver and a real SMTP server; and once in a
//! real browser at phone size (axe-clean, no script). Both backends by
//! `DROPSLOT_TEST_DATABASE_URL` once the store's PostgreSQL half of the change lands.

use serde_json::{Value, json};

use crate::browser::{Browser, PHONE};
use crate::common::{ADMIN_TOKEN, TestServer, request};
use crate::receiver::{Received, Receiver};

const HOOKS: &str = "[webhooks]\nallow_private = true\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms\"\n";

/// A page's answer: its status, `Location` and body (redirects are not followed).
struct Page {
    status: u16,
    location: String,
    html: String,
}

async fn fetch(req: reqwest::RequestBuilder) -> Page {
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    let location = res.headers().get("location").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    Page { status, location, html: res.text().await.expect("body") }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn get(url: &str) -> Page {
    fetch(no_redirects().get(url)).await
}

/// Posts the change form's `fields` to the page at `url`.
async fn post(url: &str, fields: &[(&str, &str)]) -> Page {
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(fields).finish();
    fetch(no_redirects().post(url).header("content-type", "application/x-www-form-urlencoded").body(body)).await
}

/// A live order of `token`'s client: its tracking code.
async fn order(s: &TestServer, token: &str, body: &Value) -> String {
    let r = s.post("/requests/sync", token, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()
}

/// The change page's address, as the tracking page links it.
async fn change_link(s: &TestServer, code: &str) -> String {
    let html = get(&format!("{}/track/{code}", s.base)).await.html;
    let start = html.find("id=\"change\" href=\"").unwrap_or_else(|| panic!("no change link on {html}")) + 18;
    let path = &html[start..start + html[start..].find('"').unwrap()];
    assert!(path.starts_with(&format!("/track/{code}/change/")), "{path}");
    format!("{}{path}", s.base)
}

/// The slot choices of a page: (value, checked).
fn choices(html: &str) -> Vec<(String, bool)> {
    html.split("name=\"slot\" value=\"")
        .skip(1)
        .map(|rest| {
            let end = rest.find('"').unwrap();
            (rest[..end].to_string(), rest[end..].starts_with("\" checked"))
        })
        .collect()
}

/// The value of the hidden `expect` field (the slot the page showed).
fn expect_of(html: &str) -> String {
    let start = html.find("name=\"expect\" value=\"").expect("an expect field") + 21;
    html[start..start + html[start..].find('"').unwrap()].to_string()
}

/// The shipment's date and slot code, read back over the API.
async fn booked(s: &TestServer, token: &str, code: &str) -> (String, String) {
    let r = s.get(&format!("/shipments/{code}"), token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = &r.body["object"]["drop_off_shipment"];
    (d["scheduled_date"].as_str().unwrap().to_string(), d["time_slot"]["code"].as_str().unwrap().to_string())
}

/// What live orders hold in a drop-off slot (stops), by the admin capacity view.
async fn fill(s: &TestServer, slot: &str) -> u64 {
    let (date, code) = slot.split_once('/').unwrap();
    let r = s.get(&format!("/admin/capacity?date={date}"), ADMIN_TOKEN).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let slots = r.body["object"]["slots"].as_array().unwrap();
    let one = slots.iter().find(|v| v["zone"] == "TOR-DT" && v["time_slot_code"] == code).expect("the slot");
    one["fill"]["stops"].as_u64().unwrap()
}

#[tokio::test]
async fn a_wrong_token_is_the_unknown_codes_404_and_the_page_shows_nothing_personal() {
    let s = TestServer::start().await;
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["person_email"] = json!("jane@example.com");
    let r = s.order(&body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let shipment = &r.body["object"]["shipments"][0];
    let code = shipment["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let link = change_link(&s, &code).await;
    let page = get(&link).await;
    assert_eq!(page.status, 200, "{}", page.html);
    for shown in [code.as_str(), "Scheduled", "2026", "maxlength=\"500\"", "<fieldset", "<legend", "name=\"expect\""] {
        assert!(page.html.contains(shown), "missing {shown}: {}", page.html);
    }
    let price = shipment["actual_price_with_tax"].to_string();
    for hidden in ["Jane", "jane@", "416", "555", "Bremner", "King St", "M5V", "M5X", "$", "price", price.as_str()] {
        assert!(!page.html.contains(hidden), "leaks {hidden}");
    }
    assert!(!page.html.contains("<script"), "no script");
    let res = no_redirects().get(&link).send().await.unwrap();
    let h = res.headers();
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["referrer-policy"], "no-referrer", "the address holds the token");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("form-action 'self'") && csp.contains("default-src 'none'") && !csp.contains("script"),
        "{csp}"
    );
    // A wrong token, another code's token, or an unknown code: the unknown code's page.
    let unknown = get(&format!("{}/track/DSUNKNOWN0000", s.base)).await;
    assert_eq!(unknown.status, 404);
    let token = link.rsplit('/').next().unwrap();
    let flipped = format!("{}{}", &token[..31], if token.ends_with('0') { '1' } else { '0' });
    let other = order(&s, &s.token, &request(&[500.0])).await;
    for wrong in [
        format!("{}/track/{code}/change/{flipped}", s.base),
        format!("{}/track/{other}/change/{token}", s.base),
        format!("{}/track/DSUNKNOWN0000/change/{token}", s.base),
        format!("{}/track/{code}/change/{}", s.base, &token[..30]),
        format!("{}/track/{code}/change/{}", s.base, token.to_uppercase()),
    ] {
        let p = get(&wrong).await;
        assert_eq!((p.status, &p.html), (404, &unknown.html), "{wrong}");
    }
    // A form posted with a wrong token changes nothing.
    let before = booked(&s, &s.token, &code).await;
    let (slot, _) = choices(&page.html).into_iter().find(|(_, checked)| !checked).expect("another slot");
    let p = post(&format!("{}/track/{code}/change/{flipped}", s.base), &[("slot", &slot), ("instruction", "x")]).await;
    assert_eq!(p.status, 404);
    assert_eq!(booked(&s, &s.token, &code).await, before);
}

#[tokio::test]
async fn a_new_slot_moves_the_shipment_gives_the_old_place_back_and_tells_the_webhook() {
    let s = TestServer::start_with(HOOKS).await;
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let rx = Receiver::start().await;
    let r = s.post("/webhooks", &live, &json!({"url": rx.url, "events": ["same.shipment.rescheduled"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let code = order(&s, &live, &request(&[500.0])).await;
    let link = change_link(&s, &code).await;
    let page = get(&link).await;
    let held = expect_of(&page.html);
    let (old_date, old_slot) = booked(&s, &live, &code).await;
    assert_eq!(held, format!("{old_date}/{old_slot}"));
    let all = choices(&page.html);
    assert_eq!(all.iter().filter(|(_, c)| *c).map(|(v, _)| v.as_str()).collect::<Vec<_>>(), [held.as_str()]);
    assert!(all.len() > 2, "the horizon's slots: {all:?}");
    assert!(all.iter().all(|(v, _)| v[..10] >= held[..10]), "none before the pick-up's date: {all:?}");
    let (to, _) = all.iter().find(|(v, _)| !v.starts_with(&old_date)).expect("a slot on another day").clone();
    assert_eq!((fill(&s, &held).await, fill(&s, &to).await), (1, 0));
    let p = post(&link, &[("slot", &to), ("instruction", "Leave it at the back door"), ("expect", &held)]).await;
    assert_eq!(p.status, 303, "{}", p.html);
    assert!(p.location.ends_with("?saved") && p.location.contains(&format!("/track/{code}/change/")), "{}", p.location);
    let (new_date, new_slot) = to.split_once('/').unwrap();
    assert_eq!(booked(&s, &live, &code).await, (new_date.to_string(), new_slot.to_string()));
    assert_eq!((fill(&s, &held).await, fill(&s, &to).await), (0, 1), "the old place is given back");
    let confirmed = get(&format!("{}{}", s.base, p.location)).await;
    assert_eq!(confirmed.status, 200);
    assert!(confirmed.html.contains("Saved.") && confirmed.html.contains("Leave it at the back door"));
    assert_eq!(expect_of(&confirmed.html), to);
    // The webhook: previous and new, changed by the recipient.
    let got = rx.wait_until("the rescheduled event", |g| g.iter().any(Received::ok)).await;
    let d = &got[0].json()["data"];
    assert_eq!(got[0].event(), "same.shipment.rescheduled");
    assert_eq!((d["changed_by"].as_str(), d["leg"].as_str()), (Some("recipient"), Some("delivery")), "{d}");
    assert_eq!(d["tracking_code"], code.as_str());
    assert_eq!(
        (d["previous"]["scheduled_date"].as_str(), d["previous"]["time_slot"]["code"].as_str()),
        (Some(old_date.as_str()), Some(old_slot.as_str()))
    );
    assert_eq!(
        (d["new"]["scheduled_date"].as_str(), d["new"]["time_slot"]["code"].as_str()),
        (Some(new_date), Some(new_slot))
    );
    // Two forms of the same page: the second one is told it changed meanwhile, and loses.
    let again = all.iter().find(|(v, _)| *v != to && *v != held).unwrap().0.clone();
    let p = post(&link, &[("slot", &again), ("instruction", ""), ("expect", &held)]).await;
    assert_eq!(p.status, 409, "{}", p.html);
    assert!(p.html.contains("changed meanwhile"), "{}", p.html);
    assert_eq!(booked(&s, &live, &code).await, (new_date.to_string(), new_slot.to_string()));
    assert!(get(&link).await.html.contains("Leave it at the back door"), "nothing of the loser was saved");
    assert_eq!(rx.received().len(), 1, "one rescheduled event");
}

#[tokio::test]
async fn a_full_slot_is_refused_and_its_fill_stays() {
    let s = TestServer::start().await;
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let code = order(&s, &live, &request(&[500.0])).await;
    let link = change_link(&s, &code).await;
    let page = get(&link).await;
    let held = expect_of(&page.html);
    let (target, _) = choices(&page.html).into_iter().find(|(_, checked)| !checked).unwrap();
    let (date, slot) = target.split_once('/').unwrap();
    let r = s
        .send(
            s.http
                .put(s.url("/admin/capacity"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"zone": "TOR-DT", "time_slot_code": slot, "date": date, "stops": 1})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let page = get(&link).await;
    assert!(page.html.contains("1 place left"), "what remains is shown: {}", page.html);
    // Another order takes the last place meanwhile.
    let mut other = request(&[500.0]);
    other["drop_offs"][0]["scheduled_date"] = json!(date);
    other["drop_offs"][0]["time_slot_code"] = json!(slot);
    order(&s, &live, &other).await;
    assert_eq!(fill(&s, &target).await, 1);
    let p = post(&link, &[("slot", &target), ("instruction", ""), ("expect", &held)]).await;
    assert_eq!(p.status, 422, "{}", p.html);
    assert!(p.html.contains("just filled up") && p.html.contains("id=\"slot-error\""), "{}", p.html);
    assert_eq!(fill(&s, &target).await, 1, "the full slot's fill is unchanged");
    assert_eq!(fill(&s, &held).await, 1, "the place held is kept");
    assert_eq!(booked(&s, &live, &code).await, held.split_once('/').map(|(d, c)| (d.into(), c.into())).unwrap());
    assert!(choices(&get(&link).await.html).iter().all(|(v, _)| *v != target), "a full slot is not offered");
    // A slot that is not offered (unknown, or closed) is refused too.
    for bad in [format!("{date}/NOPE"), "2026-11-20/TOR-DT-PM".to_string(), "someday".to_string()] {
        let p = post(&link, &[("slot", &bad), ("expect", &held)]).await;
        assert_eq!(p.status, 422, "{bad}: {}", p.html);
        assert!(p.html.contains("cannot be chosen"), "{}", p.html);
    }
}

#[tokio::test]
async fn instructions_are_checked_and_out_for_delivery_closes_the_slot_but_not_the_instruction() {
    let s = TestServer::start().await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    let code = order(&s, &live, &request(&[500.0])).await;
    let link = change_link(&s, &code).await;
    s.ops_moves(&ops, &code, &["to_pick_up", "picked_up", "processing"]).await;
    let page = get(&link).await;
    let held = expect_of(&page.html);
    let other = choices(&page.html).into_iter().find(|(_, c)| !c).unwrap().0;
    let too_long = "é".repeat(501);
    for (bad, why) in [(too_long.as_str(), "At most 500 characters"), ("ring\u{7}bell", "Control characters")] {
        let p = post(&link, &[("slot", &held), ("instruction", bad), ("expect", &held)]).await;
        assert_eq!(p.status, 422, "{}", p.html);
        assert!(p.html.contains("Delivery instruction: ") && p.html.contains(why), "{}", p.html);
        assert!(p.html.contains("aria-invalid=\"true\""), "the field is marked");
    }
    let longest = "é".repeat(500);
    assert_eq!(post(&link, &[("slot", &held), ("instruction", &longest), ("expect", &held)]).await.status, 303);
    // Out for delivery: no new slot, said in words; the instruction still works.
    s.ops_moves(&ops, &code, &["in_transit"]).await;
    let page = get(&link).await;
    assert_eq!(page.status, 200);
    assert!(page.html.contains("already out for delivery"), "{}", page.html);
    assert!(choices(&page.html).is_empty() && page.html.contains("name=\"instruction\""), "{}", page.html);
    let p = post(&link, &[("slot", &other), ("instruction", "x"), ("expect", &held)]).await;
    assert_eq!(p.status, 409, "{}", p.html);
    assert!(p.html.contains("already out for delivery"), "{}", p.html);
    assert_eq!(booked(&s, &live, &code).await, held.split_once('/').map(|(d, c)| (d.into(), c.into())).unwrap());
    let p = post(&link, &[("instruction", "Gate code 4412"), ("expect", &held)]).await;
    assert_eq!(p.status, 303, "{}", p.html);
    assert!(get(&link).await.html.contains("Gate code 4412"));
    // Served: nothing is left to change.
    let r = s
        .ops_move(
            &ops,
            &code,
            &json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "Ruth Receiver"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let p = post(&link, &[("instruction", "too late"), ("expect", &held)]).await;
    assert_eq!(p.status, 409, "{}", p.html);
    assert!(p.html.contains("has been delivered"), "{}", p.html);
    let page = get(&link).await;
    assert!(page.html.contains("has been delivered") && !page.html.contains("<form"), "{}", page.html);
    assert!(!get(&format!("{}/track/{code}", s.base)).await.html.contains("id=\"change\""), "no link once served");
}

/// Every message links the same change page as the tracking page; the failed message says
/// when the next attempt is, and its link offers slots again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_links_the_change_page_and_the_failed_one_names_the_next_attempt() {
    let smtp = crate::notifications::Smtp::start();
    let sms = Receiver::start().await;
    let s = crate::notifications::start(&smtp, &sms).await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["person_email"] = json!("jane@example.com");
    let code = order(&s, &live, &body).await;
    let link = change_link(&s, &code).await;
    let token = link.rsplit('/').next().unwrap().to_string();
    s.ops_moves(&ops, &code, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    let r = s.ops_move(&ops, &code, &json!({"to": "failed", "reason": "Nobody at home"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mails = smtp.wait_for(3, "scheduled, out for delivery and failed").await;
    let texts = sms.wait_until("three SMS", |g| g.len() >= 3).await;
    for m in &mails {
        let text = m["text"].as_str().unwrap();
        assert!(text.contains(&format!("Change the delivery time or leave an instruction: {link}")), "{text}");
        assert!(m["html"].as_str().unwrap().contains(&token), "{m}");
    }
    for t in &texts {
        let form: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(t.body.as_bytes()).into_owned().collect();
        assert!(form["Body"].contains(&format!("Change: {link}")), "{}", form["Body"]);
    }
    let (date, _) = booked(&s, &live, &code).await;
    let failed = mails.iter().find(|m| m["subject"].as_str().unwrap().contains("could not deliver")).unwrap();
    let text = failed["text"].as_str().unwrap();
    assert!(text.contains(&format!("We will try again on {date}")) && text.contains(&link), "{text}");
    // The link of the failed message offers the re-attempt's slots again.
    let page = get(&link).await;
    assert!(page.html.contains("Delivery to be retried"), "{}", page.html);
    assert_eq!(expect_of(&page.html).split_once('/').unwrap().0, date);
    assert!(!choices(&page.html).is_empty(), "{}", page.html);
}

/// The page on a phone: reached from the tracking page's link, axe-clean, and a new slot
/// chosen and saved by the plain form (the page has no script, and its policy allows none).
#[tokio::test]
async fn browser_the_change_page_on_a_phone() {
    let s = TestServer::start().await;
    let code = order(&s, &s.token, &request(&[500.0])).await;
    let b = Browser::start(PHONE).await;
    b.goto(&format!("{}/track/{code}", s.base)).await;
    b.click("#change").await;
    assert!(b.current_url().await.contains(&format!("/track/{code}/change/")));
    assert_eq!(b.eval("return document.scripts.length").await, json!(0));
    b.assert_accessible("change page").await;
    crate::dashboard::assert_fits(&b, "change page").await;
    b.screenshot("change-phone").await;
    let chosen = b.attr("input[name=slot]:not(:checked)", "value").await;
    b.tap(&format!("input[name=slot][value='{chosen}']")).await;
    b.fill("#instruction", "Leave it with the concierge").await;
    b.click("button[type=submit]").await;
    assert!(b.current_url().await.ends_with("?saved"));
    assert!(b.text("#note").await.starts_with("Saved."), "{}", b.text("main").await);
    assert_eq!(b.attr("input[name=slot]:checked", "value").await, chosen);
    assert_eq!(b.text("#current-instruction").await, "Leave it with the concierge");
    b.assert_accessible("change page, saved").await;
    b.screenshot("change-saved-phone").await;
    let (date, slot) = chosen.split_once('/').unwrap();
    assert_eq!(booked(&s, &s.token, &code).await, (date.to_string(), slot.to_string()));
}

/// The recipient (on one process) and the merchant (on another) change the same shipment at
/// the same moment, on PostgreSQL: one wins, the other is told it changed meanwhile; then two
/// shipments into a slot with one place left, one through each process: one gets it. Skipped on
/// SQLite, whose deployment is one process per file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recipient_and_merchant_at_once_across_two_processes() {
    let s = TestServer::start().await;
    if s.sqlite_file().is_some() {
        eprintln!("skipped: two processes need DROPSLOT_TEST_DATABASE_URL=postgres://…");
        return;
    }
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let (mut other, base_b, _) = crate::cli::spawn_serve_with(&s.db.url(), &[]);
    for round in 0..4 {
        let code = order(&s, &live, &request(&[500.0])).await;
        let link = change_link(&s, &code).await.replacen(&s.base, &base_b, 1);
        let page = get(&link).await;
        let expect = expect_of(&page.html);
        let to = json!({"scheduled_date": "2026-11-25", "time_slot_code": "TOR-DT-PM"});
        let path = format!("/shipments/{code}/reschedule");
        let merchant = s.post(&path, &live, &to);
        let fields = [("slot", "2026-11-26/TOR-DT-PM"), ("expect", expect.as_str())];
        let recipient = post(&link, &fields);
        let (m, r) = tokio::join!(merchant, recipient);
        let won = [m.status.as_u16() == 200, r.status == 303];
        let why = format!("round {round}: {} / {} {}", m.body, r.status, r.html);
        assert!(won[0] || m.status.as_u16() == 409, "the merchant wins or is told: {why}");
        assert!(won[1] || r.status == 409, "the recipient wins or is told: {why}");
        let now = booked(&s, &live, &code).await;
        match won {
            // Changed one after the other (the merchant read the recipient's slot first): the
            // merchant's is the last.
            [true, _] => assert_eq!(now, ("2026-11-25".into(), "TOR-DT-PM".into()), "{why}"),
            [false, true] => assert_eq!(now, ("2026-11-26".into(), "TOR-DT-PM".into()), "{why}"),
            [false, false] => panic!("neither was made: {why}"),
        }
        if !won[1] {
            assert!(r.html.contains("changed"), "the recipient is told in words: {}", r.html);
        }
        // The shipment holds one place, where it is, whatever the order: every round's shipment
        // is in one of the two slots.
        let held = fill(&s, "2026-11-25/TOR-DT-PM").await + fill(&s, "2026-11-26/TOR-DT-PM").await;
        assert_eq!(held, round + 1, "{why}");
    }
    // One place left in a slot: one shipment through each process.
    let one =
        json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-EV", "date": "2026-11-27", "stops": 1, "parcels": null});
    assert_eq!(s.send(s.http.put(s.url("/admin/capacity")).bearer_auth(ADMIN_TOKEN).json(&one)).await.status, 200);
    let (x, y) = (order(&s, &live, &request(&[500.0])).await, order(&s, &live, &request(&[500.0])).await);
    let link = change_link(&s, &y).await.replacen(&s.base, &base_b, 1);
    let expect = expect_of(&get(&link).await.html);
    let to = json!({"scheduled_date": "2026-11-27", "time_slot_code": "TOR-DT-EV"});
    let path = format!("/shipments/{x}/reschedule");
    let merchant = s.post(&path, &live, &to);
    let fields = [("slot", "2026-11-27/TOR-DT-EV"), ("expect", expect.as_str())];
    let recipient = post(&link, &fields);
    let (m, r) = tokio::join!(merchant, recipient);
    let won = [m.status.as_u16() == 200, r.status == 303];
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{} / {} {}", m.body, r.status, r.html);
    assert!(m.status.as_u16() == 422 || r.status == 422, "the other finds it full");
    assert_eq!(fill(&s, "2026-11-27/TOR-DT-EV").await, 1, "never more than the limit");
    other.kill().unwrap();
    other.wait().unwrap();
}
