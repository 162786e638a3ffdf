//! The dashboard's rules over plain HTTP, where a browser would hide them: the cookie's
//! flags, idle expiry on the injected clock, CSRF refusals that change nothing, the headers
//! of every page, and tenant isolation. The browser tests (`dashboard.rs`) drive the pages.

use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};

use serde_json::json;

use crate::common::{TestServer, request, request_with_codes};

/// A browser's worth of state over reqwest: the cookies the server set, redirects not
/// followed so each answer can be checked.
pub struct Visitor<'a> {
    pub s: &'a TestServer,
    http: reqwest::Client,
    cookies: Vec<(String, String)>,
}

pub struct Page {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers.get(LOCATION).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
    /// The first hidden `csrf` field's value.
    pub fn csrf(&self) -> String {
        let at = self.body.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
        self.body[at..].split('"').next().unwrap_or_default().to_string()
    }
}

impl<'a> Visitor<'a> {
    pub fn new(s: &'a TestServer) -> Visitor<'a> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("client");
        Visitor { s, http, cookies: Vec::new() }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    async fn take(&mut self, req: reqwest::RequestBuilder) -> Page {
        let req = if self.cookies.is_empty() { req } else { req.header(COOKIE, self.cookie_header()) };
        let res = req.send().await.expect("request");
        for set in res.headers().get_all(SET_COOKIE) {
            let text = set.to_str().expect("ascii cookie");
            let (pair, attrs) = text.split_once(';').unwrap_or((text, ""));
            let (k, v) = pair.split_once('=').expect("name=value");
            self.cookies.retain(|(n, _)| n != k);
            if !attrs.contains("Max-Age=0") {
                self.cookies.push((k.to_string(), v.to_string()));
            }
        }
        Page { status: res.status(), headers: res.headers().clone(), body: res.text().await.expect("body") }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let req = self.http.get(format!("{}{path}", self.s.base));
        self.take(req).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let req = self.http.post(format!("{}{path}", self.s.base)).form(form);
        self.take(req).await
    }

    /// Posts a multipart form: the `csrf` field, then `bytes` as the file field `file`.
    pub async fn upload(&mut self, path: &str, csrf: &str, file_name: &str, bytes: &[u8]) -> Page {
        let boundary = "dropslot-test-boundary-7MA4YWxkTrZu0gW";
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n{csrf}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\nContent-Type: text/csv\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let req = self
            .http
            .post(format!("{}{path}", self.s.base))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body);
        self.take(req).await
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Signs in with `token` through the form; the sign-in answer.
    pub async fn sign_in(&mut self, token: &str) -> Page {
        let form = self.get("/dashboard/sign-in").await;
        assert_eq!(form.status, 200);
        let csrf = form.csrf();
        self.post("/dashboard/sign-in", &[("csrf", &csrf), ("token", token)]).await
    }
}

#[tokio::test]
async fn a_session_is_a_strict_http_only_cookie_that_ends_when_idle() {
    let s = TestServer::start().await;
    let mut v = Visitor::new(&s);
    let r = v.get("/dashboard/orders").await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/dashboard/sign-in"), "signed out → sign-in");

    let r = v.sign_in(&s.token).await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/dashboard/orders"), "{}", r.body);
    let set = r.headers.get_all(SET_COOKIE).iter().map(|v| v.to_str().unwrap().to_string()).collect::<Vec<_>>();
    let session = set.iter().find(|c| c.starts_with("ds_session=")).expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/dashboard"] {
        assert!(session.contains(flag), "{session}");
    }
    assert!(!session.contains("Secure"), "the test server's base URL is http: {session}");
    assert!(v.cookie("ds_session").is_some_and(|c| c.len() >= 43), "32 random bytes");
    assert_eq!(s.scalar("SELECT count(*) FROM dashboard_sessions"), 1);

    let page = v.get("/dashboard/orders").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let csp = page.headers.get(CONTENT_SECURITY_POLICY).and_then(|h| h.to_str().ok()).unwrap_or("");
    assert!(csp.contains("default-src 'none'") && !csp.contains("script-src"), "no script may run: {csp}");
    assert_eq!(page.headers.get("cache-control").and_then(|h| h.to_str().ok()), Some("no-store"));
    assert!(page.body.contains("Test mode"), "a test token's session shows the banner");

    // 29 minutes idle: still signed in (and that request renews it); 31 more: gone.
    s.app.clock.advance(jiff::SignedDuration::from_mins(29));
    assert_eq!(v.get("/dashboard/orders").await.status, 200);
    s.app.clock.advance(jiff::SignedDuration::from_mins(29));
    assert_eq!(v.get("/dashboard/orders").await.status, 200, "each request renews the idle time");
    s.app.clock.advance(jiff::SignedDuration::from_mins(31));
    let r = v.get("/dashboard/orders").await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/dashboard/sign-in"));
}

#[tokio::test]
async fn sign_in_refuses_a_missing_csrf_value_a_bad_token_and_an_ops_token() {
    let s = TestServer::start().await;
    let (_, _, _, ops) = s.new_client("Other").await;
    let mut v = Visitor::new(&s);
    // No sign-in cookie and no form value: refused, and nothing is stored.
    let r = v.post("/dashboard/sign-in", &[("token", &s.token)]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    // A value in the form that is not the cookie's.
    v.get("/dashboard/sign-in").await;
    let r = v.post("/dashboard/sign-in", &[("csrf", "forged"), ("token", &s.token)]).await;
    assert_eq!(r.status, 403);
    for bad in ["ds_test_nope", ops.as_str(), ""] {
        let r = v.sign_in(bad).await;
        assert_eq!(r.status, 401, "{bad}: {}", r.body);
        assert!(r.body.contains("not valid"), "{}", r.body);
    }
    assert_eq!(s.scalar("SELECT count(*) FROM dashboard_sessions"), 0);
}

#[tokio::test]
async fn a_form_without_its_csrf_token_is_refused_and_changes_nothing() {
    let s = TestServer::start().await;
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let tokens = s.scalar("SELECT count(*) FROM tokens");
    for form in [vec![("kind", "live")], vec![("kind", "live"), ("csrf", "not-the-token")]] {
        let r = v.post("/dashboard/tokens", &form).await;
        assert_eq!(r.status, 403, "{}", r.body);
        assert!(r.body.contains("did not come from the dashboard"), "{}", r.body);
    }
    assert_eq!(s.scalar("SELECT count(*) FROM tokens"), tokens, "no token was created");
    // With it, the form works and shows the token once, but a test session makes test
    // tokens only: a test token must not lead to live access.
    let csrf = v.get("/dashboard/tokens").await.csrf();
    let r = v.post("/dashboard/tokens", &[("kind", "live"), ("csrf", &csrf)]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(s.scalar("SELECT count(*) FROM tokens"), tokens);
    let r = v.post("/dashboard/tokens", &[("kind", "test"), ("csrf", &csrf)]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains("ds_test_"), "the new token is shown");
    assert_eq!(s.scalar("SELECT count(*) FROM tokens"), tokens + 1);
    assert!(!v.get("/dashboard/tokens").await.body.contains("id=\"new-token\""), "and only once");

    // A live session makes live tokens, and a test session cannot revoke them.
    let (_, test, live, _) = s.new_client("Other").await;
    let mut l = Visitor::new(&s);
    l.sign_in(&live).await;
    let csrf = l.get("/dashboard/tokens").await.csrf();
    let r = l.post("/dashboard/tokens", &[("kind", "live"), ("csrf", &csrf)]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let mut t = Visitor::new(&s);
    t.sign_in(&test).await;
    let csrf = t.get("/dashboard/tokens").await.csrf();
    let r = t.post(&format!("/dashboard/tokens/{}/revoke", &live[..16]), &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(s.get("/orders", &live).await.status, 200, "still valid");
}

#[tokio::test]
async fn another_clients_entities_are_404_pages() {
    let s = TestServer::start_with("[webhooks]\nallow_private = true\n").await;
    let (_, other_test, _, _) = s.new_client("Other").await;
    let theirs = s.post("/requests/sync", &other_test, &request_with_codes(&["THEIRS0000000001"])).await;
    assert_eq!(theirs.status, 201, "{}", theirs.body);
    let code = theirs.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let hook = s.post("/webhooks", &other_test, &serde_json::json!({"url": "http://127.0.0.1:9/hook"})).await;
    assert_eq!(hook.status, 201, "{}", hook.body);
    let hook_id = hook.body["object"]["id"].as_i64().expect("id");

    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let csrf = v.get("/dashboard/orders").await.csrf();
    for path in [format!("/dashboard/shipments/{code}"), format!("/dashboard/webhooks/{hook_id}")] {
        let r = v.get(&path).await;
        assert_eq!(r.status, 404, "{path}: {}", r.body);
        assert!(r.body.contains("Not found"), "{}", r.body);
    }
    let r = v.post(&format!("/dashboard/shipments/{code}/parcels/THEIRS0000000001/delete"), &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 404);
    let r = v.post(&format!("/dashboard/webhooks/{hook_id}/delete"), &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 404);
    // Ids that are not ids are the same 404 page, not an API error.
    for path in ["/dashboard/webhooks/abc", "/dashboard/webhooks/0", "/dashboard/webhooks/99999999999999999999"] {
        let r = v.get(path).await;
        assert_eq!(r.status, 404, "{path}");
        assert!(r.body.contains("<h1>Not found</h1>"), "{path}: {}", r.body);
    }
    let r = v.post("/dashboard/addresses/x/delete", &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 404);
    assert!(r.body.contains("<h1>Not found</h1>"));
    assert_eq!(
        s.scalar("SELECT count(*) FROM parcels WHERE deleted_at IS NULL AND custom_code = 'THEIRS0000000001'"),
        1
    );
    assert_eq!(s.scalar("SELECT count(*) FROM webhook_endpoints WHERE deleted_at IS NULL"), 1);
    // The search finds only this client's orders.
    let mine = s.order(&request(&[500.0])).await;
    assert_eq!(mine.status, 201);
    let list = v.get("/dashboard/orders?q=THEIRS0000000001").await;
    assert!(list.body.contains("No orders match"), "{}", list.body);
}

#[tokio::test]
async fn the_order_search_filters_by_code_name_status_and_date() {
    let s = TestServer::start().await;
    let mut a = request_with_codes(&["FINDME0000000001"]);
    a["drop_offs"][0]["address"]["person_name"] = serde_json::json!("Ada Lovelace");
    let a = s.order(&a).await;
    let b = s.order(&request(&[700.0])).await;
    let code = |r: &crate::common::Reply| {
        r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()
    };
    let (ca, cb) = (code(&a), code(&b));
    let date = a.body["object"]["shipments"][0]["drop_off_shipment"]["scheduled_date"].as_str().unwrap().to_string();
    assert_eq!(s.scenario("happy", &serde_json::json!({"drop_off_shipment_unique_ids": [cb]})).await.status, 200);

    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let shows = |body: &str| (body.contains(&ca), body.contains(&cb));
    assert_eq!(shows(&v.get("/dashboard/orders").await.body), (true, true));
    assert_eq!(
        shows(&v.get("/dashboard/orders?q=findme0000000001").await.body),
        (true, false),
        "custom code, any case"
    );
    assert_eq!(shows(&v.get("/dashboard/orders?q=lovel").await.body), (true, false), "part of the receiver's name");
    assert_eq!(shows(&v.get(&format!("/dashboard/orders?q={cb}")).await.body), (false, true), "tracking code");
    assert_eq!(shows(&v.get("/dashboard/orders?status=delivered").await.body), (false, true));
    assert_eq!(shows(&v.get("/dashboard/orders?status=scheduled").await.body), (true, false));
    assert_eq!(shows(&v.get(&format!("/dashboard/orders?date={date}")).await.body), (true, true));
    assert_eq!(shows(&v.get("/dashboard/orders?date=2031-01-01").await.body), (false, false));
    assert_eq!(shows(&v.get("/dashboard/orders?q=%25").await.body), (false, false), "% is a character, not a wildcard");
    // What a client typed is shown as text, never as markup.
    let mut c = request(&[500.0]);
    c["drop_offs"][0]["address"]["person_name"] = serde_json::json!("<b onmouseover=x>Bold</b>");
    assert_eq!(s.order(&c).await.status, 201);
    let list = v.get("/dashboard/orders?q=bold").await;
    assert!(
        list.body.contains("&lt;b onmouseover=x&gt;Bold&lt;/b&gt;") || list.body.contains("&#60;b"),
        "{}",
        list.body
    );
    assert!(!list.body.contains("<b onmouseover"), "escaped");
    let bad = v.get("/dashboard/orders?status=lost&date=tomorrow").await;
    assert_eq!(bad.status, 422);
    assert!(bad.body.contains("<code>status</code>") && bad.body.contains("<code>date</code>"), "{}", bad.body);
}

#[tokio::test]
async fn the_forms_act_through_the_apis_own_rules() {
    let s = TestServer::start_with("[webhooks]\nallow_private = true\n").await;
    let o = s.order(&request_with_codes(&["KEEP000000000001", "DROP000000000002"])).await;
    assert_eq!(o.status, 201);
    let code = o.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let page = v.get(&format!("/dashboard/shipments/{code}")).await;
    let csrf = page.csrf();
    assert!(page.body.contains("/parcels/DROP000000000002/delete"), "a deletable parcel has its button");

    // Delete a parcel: gone from the shipment, the shipment re-priced, as through the API.
    let r = v.post(&format!("/dashboard/shipments/{code}/parcels/DROP000000000002/delete"), &[("csrf", &csrf)]).await;
    assert_eq!(
        (r.status, r.location()),
        (StatusCode::SEE_OTHER, format!("/dashboard/shipments/{code}?done=deleted").as_str())
    );
    assert_eq!(s.scalar("SELECT count(*) FROM parcels WHERE deleted_at IS NULL"), 1);
    let api = s.get(&format!("/shipments/{code}"), &s.token).await;
    assert_eq!(api.body["object"]["parcels"].as_array().map(Vec::len), Some(1));
    assert!(v.get(&format!("/dashboard/shipments/{code}?done=deleted")).await.body.contains("Parcel deleted."));

    // An endpoint with an invalid URL and an unknown kind: the API's paths, on the page.
    let bad = v.post("/dashboard/webhooks", &[("csrf", &csrf), ("url", "ftp://x"), ("events", "same.nothing")]).await;
    assert_eq!(bad.status, 422);
    assert!(bad.body.contains("<code>url</code>") && bad.body.contains("<code>events.0</code>"), "{}", bad.body);
    assert_eq!(s.scalar("SELECT count(*) FROM webhook_endpoints"), 0);
    // A good one: the secret is in this answer only.
    let made = v
        .post(
            "/dashboard/webhooks",
            &[("csrf", &csrf), ("url", "http://127.0.0.1:9/in"), ("events", "same.shipment.delivered")],
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert!(made.body.contains("whsec_"));
    let id = s.scalar("SELECT max(id) FROM webhook_endpoints");
    let show = v.get(&format!("/dashboard/webhooks/{id}")).await;
    assert!(!show.body.contains("whsec_"), "the secret is never shown again");
    // Edit, disable, enable, rotate, test, delete.
    let r = v
        .post(
            &format!("/dashboard/webhooks/{id}"),
            &[("csrf", &csrf), ("url", "http://127.0.0.1:9/new"), ("events", "*"), ("description", "Shop")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let api = s.get(&format!("/webhooks/{id}"), &s.token).await;
    assert_eq!(
        (api.body["object"]["url"].as_str(), api.body["object"]["events"].clone()),
        (Some("http://127.0.0.1:9/new"), json!(["*"]))
    );
    assert_eq!(v.post(&format!("/dashboard/webhooks/{id}/disable"), &[("csrf", &csrf)]).await.status, 303);
    assert_eq!(s.get(&format!("/webhooks/{id}"), &s.token).await.body["object"]["status"], "disabled");
    let refused = v.post(&format!("/dashboard/webhooks/{id}/test"), &[("csrf", &csrf)]).await;
    assert_eq!(refused.status, 409, "a disabled endpoint gets no test event");
    assert_eq!(v.post(&format!("/dashboard/webhooks/{id}/enable"), &[("csrf", &csrf)]).await.status, 303);
    let rotated = v.post(&format!("/dashboard/webhooks/{id}/rotate-secret"), &[("csrf", &csrf)]).await;
    assert!(rotated.body.contains("whsec_") && rotated.body.contains("also signs for 24 hours"));
    assert_eq!(v.post(&format!("/dashboard/webhooks/{id}/test"), &[("csrf", &csrf)]).await.status, 303);
    assert_eq!(s.scalar("SELECT count(*) FROM webhook_deliveries"), 1, "the test event is queued");
    assert_eq!(v.post(&format!("/dashboard/webhooks/{id}/delete"), &[("csrf", &csrf)]).await.status, 303);
    assert_eq!(s.get(&format!("/webhooks/{id}"), &s.token).await.status, 404);

    // Saved addresses: listed, then deleted.
    let addr = s.scalar("SELECT max(id) FROM saved_addresses");
    assert!(v.get("/dashboard/addresses").await.body.contains("100 King St W"));
    let r = v.post(&format!("/dashboard/addresses/{addr}/delete"), &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 303);
    assert_eq!(s.get(&format!("/saved-addresses/{addr}"), &s.token).await.status, 404);

    // Sign-out ends the session on the server, not only in this browser.
    let cookie = v.cookie("ds_session").unwrap().to_string();
    assert_eq!(v.post("/dashboard/sign-out", &[("csrf", &csrf)]).await.location(), "/dashboard/sign-in");
    assert_eq!(s.scalar("SELECT count(*) FROM dashboard_sessions"), 0);
    let replay = s.http.get(format!("{}/dashboard/orders", s.base)).header(COOKIE, format!("ds_session={cookie}"));
    let replay = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .execute(replay.build().unwrap())
        .await
        .unwrap();
    assert_eq!(replay.status(), StatusCode::SEE_OTHER, "an old cookie signs nobody in");
}

/// The slots page shows each slot's limits and what the signed-in mode's orders hold in it
/// (issue 28): a limit set for a date and an order in that slot appear on it, and the slot
/// reads full once its limit is reached.
#[tokio::test]
async fn the_slots_page_shows_limits_and_fill() {
    let s = TestServer::start().await;
    let limit = serde_json::json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-PM", "date": "2026-11-23", "stops": 1});
    let r = s.send(s.http.put(s.url("/admin/capacity")).bearer_auth(crate::common::ADMIN_TOKEN).json(&limit)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let before = v.get("/dashboard/slots").await;
    assert_eq!(before.status, 200);
    let row = |body: &str| -> String {
        let start = body.find("TOR-DT-PM").expect("the slot's row");
        body[start..start + body[start..].find("</tr>").unwrap()].to_string()
    };
    assert!(row(&before.body).contains("0 / 1") && row(&before.body).contains("open"), "{}", row(&before.body));
    assert_eq!(s.order(&request(&[500.0])).await.status, 201);
    let after = v.get("/dashboard/slots").await;
    assert!(row(&after.body).contains("1 / 1") && row(&after.body).contains("full"), "{}", row(&after.body));
    assert!(after.body.contains("aria-current=\"page\">Slots"), "the nav marks the page");
}
