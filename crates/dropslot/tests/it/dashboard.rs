//! The dashboard in a real browser: Debian's chromium through chromedriver (fantoccini),
//! against the real server. Every page visited is checked with axe-core (no violation of
//! serious or critical impact), and with `DROPSLOT_SCREENSHOTS` set each is saved at
//! desktop and phone width for docs/dashboard/.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::browser::{Browser, DESKTOP, PHONE};
use crate::common::{ADMIN_TOKEN, TestServer, request_with_codes};
use crate::receiver::Receiver;

const FAST: &str = "[webhooks]\nallow_private = true\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms\"\n";

/// Signs `b` in with `token` through the sign-in form; checks the form's page on the way.
async fn sign_in(b: &Browser, s: &TestServer, token: &str) {
    b.goto(&format!("{}/dashboard/sign-in", s.base)).await;
    b.fill("#token", token).await;
    b.click("#sign-in button[type=submit]").await;
}

/// Checks a page the way every page is checked, and saves its screenshot.
async fn check_page(b: &Browser, name: &str) {
    b.assert_accessible(name).await;
    b.screenshot(name).await;
}

/// No horizontal scrolling of the page itself on a phone (tables scroll in their region).
pub(crate) async fn assert_fits(b: &Browser, name: &str) {
    let wide = b
        .eval(
            "return [...document.querySelectorAll('body *')]
               .filter(e => !e.closest('.scroll') && e.getBoundingClientRect().right > window.innerWidth + 1)
               .map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))",
        )
        .await;
    let fits = b.eval("return document.documentElement.scrollWidth <= window.innerWidth + 1").await;
    assert_eq!(fits, json!(true), "{name} overflows the phone's width: {wide}");
}

/// Reloads `url` until `css` matches `n` elements, within 30 s: for what the dispatcher
/// records after a receiver has answered.
async fn reload_until(b: &Browser, url: &str, css: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        b.goto(url).await;
        if b.count(css).await == n {
            return;
        }
        assert!(Instant::now() < deadline, "{url}: {css} never matched {n}: {}", b.text("main").await);
        tokio::task::yield_now().await;
    }
}

fn tracking(order: &serde_json::Value) -> String {
    order["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().expect("tracking code").to_string()
}

#[tokio::test]
async fn browser_sign_in_find_an_order_by_custom_code_open_its_timeline_and_download_a_label() {
    let s = TestServer::start().await;
    let mut body = request_with_codes(&["FINDME0000000001", "OTHER00000000002"]);
    body["drop_offs"][0]["address"]["person_name"] = json!("Ada Lovelace");
    let o = s.order(&body).await;
    assert_eq!(o.status, 201, "{}", o.body);
    let code = tracking(&o.body["object"]);
    // Another order, which the search must leave out.
    assert_eq!(s.order(&request_with_codes(&["NOTME00000000003"])).await.status, 201);
    // Some history for the timeline.
    let r = s.scenario("picked-pick-up-shipments", &json!({"drop_off_shipment_unique_ids": [code]})).await;
    assert_eq!(r.status, 200, "{}", r.body);

    let b = Browser::start(DESKTOP).await;
    b.goto(&format!("{}/dashboard/orders", s.base)).await;
    assert!(b.current_url().await.ends_with("/dashboard/sign-in"), "signed out: sent to sign in");
    check_page(&b, "sign-in-desktop").await;
    sign_in(&b, &s, &s.token).await;
    assert!(b.current_url().await.ends_with("/dashboard/orders"));
    assert!(b.text(".banner").await.contains("Test mode"), "a test token's session says so");
    assert_eq!(b.count("#orders tbody tr").await, 2);
    check_page(&b, "orders-desktop").await;

    b.fill("#q", "findme0000000001").await;
    b.click(".filters button[type=submit]").await;
    assert_eq!(b.count("#orders tbody tr").await, 1, "only the order with that custom code");
    assert!(b.text("#orders").await.contains("Ada Lovelace"));
    b.click(&format!("#orders a[href='/dashboard/shipments/{code}']")).await;
    assert!(b.current_url().await.ends_with(&format!("/dashboard/shipments/{code}")));
    let timeline = b.text("#timeline").await;
    for step in ["1. Scheduled", "Ready for pick-up", "Picked up"] {
        assert!(timeline.contains(step), "{step} in {timeline}");
    }
    assert!(timeline.contains("by sandbox"), "the actor: {timeline}");
    assert!(b.text("#parcels").await.contains("FINDME0000000001"));
    assert!(b.text("#prices").await.contains('$'));
    assert_eq!(b.attr("#tracking-link", "href").await, format!("{}/track/{code}", s.base));
    assert_eq!(b.count("#scenario-happy").await, 1, "test mode offers the scenarios");
    check_page(&b, "shipment-desktop").await;

    // The label link serves a PDF to whoever holds it (the token in the URL is the key).
    let href = b.attr("#labels a[data-size='4x6'][data-format='pdf']", "href").await;
    let label = s.http.get(&href).send().await.expect("label");
    assert_eq!(label.status(), 200);
    assert_eq!(label.headers()["content-type"], "application/pdf");
    assert!(label.bytes().await.expect("bytes").starts_with(b"%PDF-"));

    b.goto(&format!("{}/dashboard/addresses", s.base)).await;
    assert!(b.text("#addresses").await.contains("100 King St W"));
    check_page(&b, "addresses-desktop").await;
    b.goto(&format!("{}/dashboard/tokens", s.base)).await;
    assert!(b.text("#tokens").await.contains("(this session)"));
    check_page(&b, "tokens-desktop").await;
    b.goto(&format!("{}/dashboard/slots", s.base)).await;
    assert!(b.text("#slots").await.contains("TOR-DT-PM"));
    check_page(&b, "slots-desktop").await;
}

#[tokio::test]
async fn browser_webhook_endpoint_scenario_delivery_log_and_resend() {
    let s = TestServer::start_with(FAST).await;
    let rx = Receiver::start().await;
    let o = s.order(&request_with_codes(&["HOOKED0000000001"])).await;
    assert_eq!(o.status, 201);
    let code = tracking(&o.body["object"]);

    let b = Browser::start(DESKTOP).await;
    sign_in(&b, &s, &s.token).await;
    b.goto(&format!("{}/dashboard/webhooks", s.base)).await;
    b.fill("#url", &rx.url).await;
    b.fill("#description", "Warehouse system").await;
    b.fill("#auth_header_name", "X-Api-Key").await;
    b.fill("#auth_header_value", "k-secret-1234").await;
    b.click("#new-endpoint button[type=submit]").await;
    let secret = b.text("#secret").await;
    assert!(secret.starts_with("whsec_"), "the secret is revealed once: {secret}");
    check_page(&b, "endpoint-created-desktop").await;
    let endpoint = b.current_url().await;
    let id: i64 = s.scalar("SELECT max(id) FROM webhook_endpoints");
    b.goto(&format!("{}/dashboard/webhooks/{id}", s.base)).await;
    assert_eq!(b.count("#secret").await, 0, "and only once (it was {endpoint})");

    // A sandbox scenario from the shipment page: its five events reach the receiver.
    b.goto(&format!("{}/dashboard/shipments/{code}", s.base)).await;
    b.click("#scenario-happy").await;
    assert!(b.text(".notice").await.contains("Scenario applied"));
    assert_eq!(b.text("#status").await, "Delivered");
    let got = rx.delivered(5).await;
    assert!(got.iter().all(|r| r.header("x-api-key") == "k-secret-1234"), "the auth header arrives");
    assert_eq!(crate::receiver::verify(&secret, &got), [true; 5]);

    // The log shows them delivered, with their attempts (the dispatcher records each answer
    // after the receiver has it: reload until it has, within a bound).
    reload_until(&b, &format!("{}/dashboard/webhooks/{id}", s.base), "#deliveries .d-delivered", 5).await;
    let log = b.text("#deliveries").await;
    assert!(log.contains("same.shipment.delivered") && log.contains("200"), "{log}");
    check_page(&b, "endpoint-desktop").await;

    // Resend the newest delivery: the same message, the same webhook-id, once more.
    let newest = got.last().expect("a delivery").id().to_string();
    b.click("#deliveries .resend").await;
    assert!(b.text(".notice").await.contains("queued again"));
    let again = rx.delivered(6).await;
    assert_eq!(again[5].id(), newest);

    // A receiver that answers 410 Gone: its endpoint is disabled at once, and stands out in
    // the list with its state and last error.
    let gone = Receiver::start().await;
    gone.answer_by_default(crate::receiver::Answer::status(410));
    let r = s.post("/webhooks", &s.token, &json!({"url": gone.url, "description": "Old shop"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(s.order(&request_with_codes(&["GONE000000000001"])).await.status, 201);
    gone.wait_until("the 410", |got| !got.is_empty()).await;
    reload_until(&b, &format!("{}/dashboard/webhooks", s.base), "#endpoints tr.failing", 1).await;
    let failing = b.text("#endpoints tr.failing").await;
    assert!(failing.contains("Old shop") && failing.contains("Disabled by the service"), "{failing}");
    assert!(failing.contains("410"), "its last error: {failing}");
    assert!(b.text("#endpoints").await.contains("Warehouse system"));
    check_page(&b, "webhooks-desktop").await;
}

#[tokio::test]
async fn browser_a_revoked_token_ends_its_session_and_a_form_without_csrf_is_refused() {
    let s = TestServer::start().await;
    let b = Browser::start(DESKTOP).await;
    sign_in(&b, &s, &s.token).await;

    // A token created in the page, shown once.
    b.goto(&format!("{}/dashboard/tokens", s.base)).await;
    b.select("#kind", "test").await;
    b.click("#new-token-form button[type=submit]").await;
    let fresh = b.text("#new-token").await;
    assert!(fresh.starts_with("ds_test_"), "{fresh}");

    // The same form without its CSRF token is refused, and creates nothing.
    let tokens = s.scalar("SELECT count(*) FROM tokens");
    b.goto(&format!("{}/dashboard/tokens", s.base)).await;
    b.eval("document.querySelector('#new-token-form input[name=csrf]').remove(); return true").await;
    b.click("#new-token-form button[type=submit]").await;
    assert!(b.text("main").await.contains("did not come from the dashboard"), "{}", b.text("main").await);
    b.assert_accessible("csrf-refused").await;
    assert_eq!(s.scalar("SELECT count(*) FROM tokens"), tokens);

    // A second browser signs in with the new token; revoking it (out of band, through the
    // admin API) ends that session on its next request.
    let other = Browser::start(DESKTOP).await;
    sign_in(&other, &s, &fresh).await;
    assert!(other.current_url().await.ends_with("/dashboard/orders"));
    let prefix = &fresh[..16];
    let r = s.send(s.http.delete(s.url(&format!("/admin/tokens/{prefix}"))).bearer_auth(ADMIN_TOKEN)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    other.goto(&format!("{}/dashboard/webhooks", s.base)).await;
    assert!(other.current_url().await.ends_with("/dashboard/sign-in"), "the session ended with its token");

    // Revoking one's own token in the page signs one out.
    b.goto(&format!("{}/dashboard/tokens", s.base)).await;
    let own = s.token[..16].to_string();
    b.click(&format!("form[action='/dashboard/tokens/{own}/revoke'] button")).await;
    assert!(b.current_url().await.ends_with("/dashboard/sign-in"));
    b.goto(&format!("{}/dashboard/orders", s.base)).await;
    assert!(b.current_url().await.ends_with("/dashboard/sign-in"));
    assert_eq!(s.get("/orders", &s.token).await.status, 401, "and the API refuses it too");
}

#[tokio::test]
async fn browser_another_clients_shipment_is_a_404_page() {
    let s = TestServer::start().await;
    let (_, other, _, _) = s.new_client("Other").await;
    let theirs = s.post("/requests/sync", &other, &request_with_codes(&["THEIRS0000000001"])).await;
    assert_eq!(theirs.status, 201);
    let code = tracking(&theirs.body["object"]);
    let b = Browser::start(DESKTOP).await;
    sign_in(&b, &s, &s.token).await;
    b.goto(&format!("{}/dashboard/shipments/{code}", s.base)).await;
    assert_eq!(b.text("h1").await, "Not found");
    assert!(!b.text("main").await.contains("THEIRS"), "nothing of theirs shows");
    check_page(&b, "not-found-desktop").await;
}

#[tokio::test]
async fn browser_every_page_on_a_phone() {
    let s = TestServer::start_with(FAST).await;
    let o = s.order(&request_with_codes(&["PHONE00000000001"])).await;
    let code = tracking(&o.body["object"]);
    let r = s.post("/webhooks", &s.token, &json!({"url": "http://127.0.0.1:9/hook", "description": "Shop"})).await;
    let id = r.body["object"]["id"].as_i64().expect("endpoint id");
    let b = Browser::start(PHONE).await;
    b.goto(&format!("{}/dashboard/sign-in", s.base)).await;
    check_page(&b, "sign-in-phone").await;
    assert_fits(&b, "sign-in").await;
    sign_in(&b, &s, &s.token).await;
    for (path, name) in [
        ("/dashboard/orders".to_string(), "orders-phone"),
        (format!("/dashboard/shipments/{code}"), "shipment-phone"),
        ("/dashboard/webhooks".to_string(), "webhooks-phone"),
        (format!("/dashboard/webhooks/{id}"), "endpoint-phone"),
        ("/dashboard/tokens".to_string(), "tokens-phone"),
        ("/dashboard/addresses".to_string(), "addresses-phone"),
        ("/dashboard/slots".to_string(), "slots-phone"),
    ] {
        b.goto(&format!("{}{path}", s.base)).await;
        assert!(b.current_url().await.ends_with(&path), "{path}");
        check_page(&b, name).await;
        assert_fits(&b, name).await;
    }
}

#[tokio::test]
async fn browser_the_public_tracking_page_on_a_phone() {
    let s = TestServer::start().await;
    let o = s.order(&request_with_codes(&["TRACKME000000001"])).await;
    let code = tracking(&o.body["object"]);
    let r = s.scenario("delivering-drop-off-shipments", &json!({"drop_off_shipment_unique_ids": [code]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let url = o.body["object"]["shipments"][0]["drop_off_shipment"]["tracking_url"].as_str().expect("url").to_string();
    for (size, name) in [(PHONE, "tracking-phone"), (DESKTOP, "tracking-desktop")] {
        let b = Browser::start(size).await;
        b.goto(&url).await;
        assert!(b.text(".code").await.contains(&code));
        assert_eq!(b.text(".status").await, "Out for delivery");
        assert!(b.count("ol li").await >= 5, "the timeline: {}", b.text("ol").await);
        assert!(!b.text("main").await.contains("Jane Doe"), "no names on the public page");
        check_page(&b, name).await;
        assert_fits(&b, name).await;
    }
}

/// The accessibility check itself can fail: an unlabelled input and an image without text
/// are reported (so a page that passes was really checked).
#[tokio::test]
async fn browser_the_accessibility_check_reports_violations() {
    let b = Browser::start(DESKTOP).await;
    b.goto("data:text/html,<!doctype html><html><body><input type=text><img src=x.png></body></html>").await;
    let ids: Vec<String> = b.violations().await.iter().map(|v| v["id"].as_str().unwrap_or("").to_string()).collect();
    assert!(ids.contains(&"label".to_string()), "{ids:?}");
    assert!(ids.contains(&"image-alt".to_string()), "{ids:?}");
}
