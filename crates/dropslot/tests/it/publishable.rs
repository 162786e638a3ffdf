//! Publishable keys (`pk_test_…`, `pk_live_…`), on both backends: created by the admin API
//! and the CLI with the origins they are for, they reach `GET /slots` from those origins (with
//! CORS headers, and a preflight answered) and nothing else: another route is a 403 that says
//! what the key is for, an unlisted origin gets no CORS headers, a secret token sent from a
//! page is refused.

use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, DROP_OFF, TestServer, assert_envelope};

const SHOP: &str = "https://shop.example";

/// A publishable key of client `id` through the admin API.
pub async fn publishable_key(s: &TestServer, id: i64, origins: &[&str]) -> String {
    let body = json!({"kind": "publishable", "origins": origins});
    let r = s.post(&format!("/admin/clients/{id}/tokens"), ADMIN_TOKEN, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["token"].as_str().expect("token").to_string()
}

fn slots_path() -> String {
    format!("/slots?text={}&days=2", DROP_OFF.replace(' ', "%20").replace(',', "%2C"))
}

async fn slots_from(s: &TestServer, key: &str, origin: Option<&str>) -> crate::common::Reply {
    let mut req = s.http.get(s.url(&slots_path())).bearer_auth(key);
    if let Some(o) = origin {
        req = req.header("Origin", o);
    }
    s.send(req).await
}

fn cors(r: &crate::common::Reply) -> Option<&str> {
    r.headers.get("access-control-allow-origin").map(|v| v.to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publishable_key_reaches_slots_from_its_origins_with_cors() {
    let s = TestServer::start().await;
    let (id, test, _, _) = s.new_client("Shop").await;
    let body = json!({"kind": "publishable", "origins": ["https://Shop.Example/", "http://127.0.0.1:8081"]});
    let r = s.post(&format!("/admin/clients/{id}/tokens"), ADMIN_TOKEN, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let created = &r.body["object"];
    assert_eq!((created["kind"].as_str(), created["mode"].as_str()), (Some("publishable"), Some("test")), "{created}");
    assert_eq!(created["origins"], json!([SHOP, "http://127.0.0.1:8081"]));
    let key = created["token"].as_str().unwrap().to_string();
    assert!(key.starts_with("pk_test_"), "{key}");

    // From a listed origin: the slots the secret token sees, with CORS headers.
    let secret = s.get(&slots_path(), &test).await;
    assert_eq!(secret.status, 200, "{}", secret.body);
    assert!(cors(&secret).is_none(), "a server's call gets no CORS headers");
    let r = slots_from(&s, &key, Some(SHOP)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"], secret.body["object"]);
    assert!(!r.body["object"].as_array().unwrap().is_empty());
    assert_eq!(cors(&r), Some(SHOP));
    assert!(r.headers.get_all("vary").iter().any(|v| v.to_str().unwrap().contains("Origin")), "{:?}", r.headers);
    // A bad query is answered with CORS headers too, so the page can show why.
    let r = s.send(s.http.get(s.url("/slots?days=2")).bearer_auth(&key).header("Origin", SHOP)).await;
    assert_envelope(&r, 422);
    assert_eq!(cors(&r), Some(SHOP));

    // The preflight: answered for a listed origin, without CORS headers for another.
    let preflight = |origin: &'static str| {
        s.http
            .request(reqwest::Method::OPTIONS, s.url(&slots_path()))
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "GET")
            .header("Access-Control-Request-Headers", "authorization")
    };
    let r = s.send(preflight(SHOP)).await;
    assert_eq!(r.status, 204);
    assert_eq!(cors(&r), Some(SHOP));
    assert_eq!(r.headers["access-control-allow-headers"], "authorization");
    assert_eq!(r.headers["access-control-allow-methods"], "GET");
    let r = s.send(preflight("https://evil.example")).await;
    assert!(cors(&r).is_none() && !r.headers.contains_key("access-control-allow-headers"), "{:?}", r.headers);

    // Listed and revocable like the other tokens.
    let r = s.get(&format!("/admin/clients/{id}/tokens"), ADMIN_TOKEN).await;
    let listed: Vec<&Value> =
        r.body["object"]["tokens"].as_array().unwrap().iter().filter(|t| t["kind"] == "publishable").collect();
    assert_eq!(listed.len(), 1, "{}", r.body);
    assert_eq!(listed[0]["origins"], json!([SHOP, "http://127.0.0.1:8081"]));
    assert!(!r.body.to_string().contains(&key), "a listing never shows the key");
    let prefix = listed[0]["prefix"].as_str().unwrap();
    assert!(key.starts_with(prefix));
    assert_eq!(s.delete(&format!("/admin/tokens/{prefix}"), ADMIN_TOKEN).await.status, 200);
    assert_envelope(&slots_from(&s, &key, Some(SHOP)).await, 401);
    // A revoked key's origin is no longer answered in a preflight.
    assert!(cors(&s.send(preflight(SHOP)).await).is_none());

    // A live key books against live capacity.
    let body = json!({"kind": "publishable", "mode": "live", "origins": [SHOP]});
    let r = s.post(&format!("/admin/clients/{id}/tokens"), ADMIN_TOKEN, &body).await;
    assert!(r.body["object"]["token"].as_str().unwrap().starts_with("pk_live_"), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publishable_key_is_refused_everywhere_else_and_from_other_origins() {
    let s = TestServer::start().await;
    let (id, test, _, _) = s.new_client("Shop").await;
    let key = publishable_key(&s, id, &[SHOP]).await;

    // From an origin not listed, or with none: a 403, and no CORS headers.
    for origin in [Some("https://evil.example"), Some("null"), Some("https://shop.example.evil.example"), None] {
        let r = slots_from(&s, &key, origin).await;
        assert_envelope(&r, 403);
        assert!(cors(&r).is_none(), "{origin:?}: {:?}", r.headers);
    }
    assert!(
        slots_from(&s, &key, Some("https://evil.example")).await.body["message"]
            .as_str()
            .unwrap()
            .contains("origin is not listed")
    );

    // Every other route: a 403 that says what the key is for.
    let order = crate::common::request(&[500.0]);
    let calls = [
        s.post("/requests/preview", &key, &order).await,
        s.post("/requests/sync", &key, &order).await,
        s.get("/orders", &key).await,
        s.get("/saved-addresses", &key).await,
        s.get("/webhooks", &key).await,
        s.post("/ops/shipments/X/transitions", &key, &json!({"to": "delivered"})).await,
        s.get("/ops/drivers", &key).await,
        s.get("/driver/route", &key).await,
        s.post("/sandbox/scenarios/deliver", &key, &json!({"date": "2026-11-23"})).await,
        s.get(&format!("/admin/clients/{id}/tokens"), &key).await,
    ];
    for r in calls {
        assert_envelope(&r, 403);
        let message = r.body["message"].as_str().unwrap();
        assert!(message.contains("publishable key") && message.contains("GET /slots"), "{message}");
    }
    // An unknown key of that form is a 401, as any unknown token.
    assert_envelope(&s.get("/orders", "pk_test_unknown").await, 401);

    // A secret token sent from a web page: refused, with what to do instead.
    let r = s.send(s.http.get(s.url(&slots_path())).bearer_auth(&test).header("Origin", SHOP)).await;
    assert_envelope(&r, 403);
    assert!(r.body["message"].as_str().unwrap().contains("never be sent from a web page"), "{}", r.body);
    assert!(cors(&r).is_none());

    // Bad keys are refused at their paths.
    for (body, path) in [
        (json!({"kind": "publishable"}), "origins"),
        (json!({"kind": "publishable", "origins": []}), "origins"),
        (json!({"kind": "publishable", "origins": [SHOP, "shop.example"]}), "origins[1]"),
        (json!({"kind": "publishable", "origins": ["https://shop.example/checkout"]}), "origins[0]"),
        (json!({"kind": "publishable", "mode": "prod", "origins": [SHOP]}), "mode"),
        (json!({"kind": "test", "origins": [SHOP]}), "origins"),
        (json!({"kind": "live", "mode": "live"}), "mode"),
    ] {
        let r = s.post(&format!("/admin/clients/{id}/tokens"), ADMIN_TOKEN, &body).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at(path).is_empty(), "{body}: {}", r.body);
    }
    assert_eq!(s.scalar("SELECT count(*) FROM publishable_keys"), 1, "nothing written by a refused request");
}

#[test]
fn publishable_keys_from_the_command_line() {
    use crate::cli::dropslot;
    let test_db = crate::common::TestDb::fresh();
    let db = test_db.url();
    assert!(dropslot(&db, &["migrate"]).status.success());
    let id = String::from_utf8_lossy(&dropslot(&db, &["client", "create", "--name", "Shop"]).stdout).trim().to_string();
    let out = dropslot(&db, &["token", "create", "--client", &id, "--kind", "publishable", "--origin", SHOP]);
    assert!(out.status.success(), "{out:?}");
    let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(key.starts_with("pk_test_"), "{key}");
    let list = String::from_utf8_lossy(&dropslot(&db, &["token", "list", "--client", &id]).stdout).to_string();
    assert!(list.contains("publishable test") && list.contains(SHOP) && !list.contains(&key), "{list}");
    let prefix = list.split('…').next().unwrap().to_string();
    assert!(dropslot(&db, &["token", "revoke", &prefix]).status.success());
    assert!(String::from_utf8_lossy(&dropslot(&db, &["token", "list", "--client", &id]).stdout).contains("revoked"));
    // Usage errors: no origin, an origin with another kind; a bad origin is exit 1 with why.
    let out = dropslot(&db, &["token", "create", "--client", &id, "--kind", "publishable"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = dropslot(&db, &["token", "create", "--client", &id, "--kind", "test", "--origin", SHOP]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = dropslot(&db, &["token", "create", "--client", &id, "--kind", "publishable", "--origin", "shop"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("origin"), "{out:?}");
}

/// Serves `pages` (path, HTML) on `listener`: a merchant's shop, on another origin than
/// dropslot's. It stops when the returned sender is dropped (and after two minutes at most).
fn serve_shop(
    listener: tokio::net::TcpListener,
    pages: Vec<(&'static str, String)>,
) -> tokio::sync::oneshot::Sender<()> {
    let mut app = axum::Router::new();
    for (path, html) in pages {
        app = app.route(path, axum::routing::get(move || async move { axum::response::Html(html) }));
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let stop = async move {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(120), rx).await;
        };
        let _ = axum::serve(listener, app).with_graceful_shutdown(stop).await;
    });
    tx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_the_slot_picker_on_a_shop_page_books_the_chosen_slot() {
    use crate::browser::{Browser, DESKTOP};
    let s = TestServer::start().await;
    let (id, test, _, _) = s.new_client("Corner Shop").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shop = format!("http://{}", listener.local_addr().unwrap());
    let unlisted = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = format!("http://{}", unlisted.local_addr().unwrap());
    let key = publishable_key(&s, id, &[&shop]).await;
    // The demo page of docs/, pointed at this server and key.
    let demo = include_str!("../../../../docs/embed/demo.html")
        .replace("http://127.0.0.1:8080", &s.base)
        .replace("pk_test_REPLACE_WITH_YOUR_KEY", &key);
    let secret = format!(
        r#"<!doctype html><html lang="en"><head><title>Checkout</title></head><body><main><h1>Checkout</h1>
           <form><div id="slots" data-dropslot-slots data-key="{test}" data-address="{DROP_OFF}"></div></form></main>
           <script src="{}/embed/slots.js"></script></body></html>"#,
        s.base
    );
    let _shop = serve_shop(listener, vec![("/", demo.clone()), ("/secret", secret)]);
    let _elsewhere = serve_shop(unlisted, vec![("/", demo)]);
    let listing = s.get(&slots_path().replace("days=2", "days=3"), &test).await;
    let listing = listing.body["object"].as_array().unwrap().clone();
    assert!(listing.len() >= 2, "{listing:?}");

    let b = Browser::start(DESKTOP).await;
    b.goto(&format!("{shop}/")).await;
    b.wait_until("document.querySelector('#slots [role=status]').textContent.includes('Enter the delivery address')")
        .await;
    b.fill("#address", DROP_OFF).await;
    b.wait_until(
        "document.querySelectorAll('#slots input[type=radio]').length > 0
         && document.querySelector('#slots [role=status]').textContent === ''",
    )
    .await;
    let radios = b.eval("return document.querySelectorAll('#slots input[type=radio]').length").await;
    assert_eq!(radios.as_u64(), Some(listing.len() as u64), "one radio button per bookable slot");
    // By keyboard: the space bar checks the first slot, the down arrow the next.
    b.keys("#slots input[type=radio]", "\u{E00D}").await;
    let first = "return document.querySelector('[name=scheduled_date]').value";
    assert_eq!(b.eval(first).await, listing[0]["scheduled_date"]);
    b.keys("#slots input[type=radio]:checked", "\u{E015}").await;
    let want = (listing[1]["scheduled_date"].as_str().unwrap(), listing[1]["time_slot_code"].as_str().unwrap());
    let fields = "return [document.querySelector('[name=scheduled_date]').value, document.querySelector('[name=time_slot_code]').value]";
    assert_eq!(b.eval(fields).await, json!([want.0, want.1]));
    // Every radio button is labelled, in a fieldset with a legend; no axe violation.
    assert_eq!(b.text("#slots fieldset > legend").await, "Delivery time");
    let label = b.eval("return document.querySelector('#slots input[type=radio]:checked').labels[0].textContent").await;
    assert!(
        label.as_str().unwrap().starts_with(&listing[1]["time_slot_datetime_start"].as_str().unwrap()[11..16]),
        "{label}"
    );
    b.assert_accessible("slot picker").await;
    b.screenshot("slot-picker").await;

    // The page's form carries the choice; the merchant's server orders with it.
    b.tap("button[type=submit]").await;
    b.wait_until("document.getElementById('received').textContent.includes('scheduled_date')").await;
    let received: Value = serde_json::from_str(b.text("#received").await.as_str()).unwrap();
    assert_eq!(
        (received["scheduled_date"].as_str(), received["time_slot_code"].as_str()),
        (Some(want.0), Some(want.1))
    );
    let mut order = crate::common::request(&[500.0]);
    order["drop_offs"][0]["scheduled_date"] = received["scheduled_date"].clone();
    order["drop_offs"][0]["time_slot_code"] = received["time_slot_code"].clone();
    let r = s.post("/requests/sync", &test, &order).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let d = &r.body["object"]["shipments"][0]["drop_off_shipment"];
    assert_eq!((d["scheduled_date"].as_str(), d["time_slot"]["code"].as_str()), (Some(want.0), Some(want.1)), "{d}");
    let unasked = s.post("/requests/preview", &test, &crate::common::request(&[500.0])).await;
    let first = &unasked.body["object"]["pick_ups"][0]["drop_offs"][0];
    assert_ne!(
        (first["scheduled_date"].as_str(), first["time_slot_code"].as_str()),
        (Some(want.0), Some(want.1)),
        "the chosen slot is not the one an order gets by default"
    );

    // A secret token in the widget: refused with why, and no request made with it.
    b.goto(&format!("{shop}/secret")).await;
    b.wait_until("document.querySelector('#slots [role=alert]')").await;
    assert!(b.text("#slots [role=alert]").await.contains("Never put it in a web page"));
    let sent = b
        .eval("return performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/slots')).length")
        .await;
    assert_eq!(sent, json!(0));
    let thrown = b.eval("try { DropslotSlots.mount(document.body, {key: 'ds_live_abc'}); return 'mounted'; } catch (e) { return e.message; }").await;
    assert!(thrown.as_str().unwrap().contains("secret token"), "{thrown}");

    // The same page on an origin the key does not list: the browser gets no slot.
    b.goto(&format!("{elsewhere}/")).await;
    b.fill("#address", DROP_OFF).await;
    b.wait_until("document.querySelector('#slots [role=status]').textContent.includes('could not be loaded')").await;
    assert_eq!(b.count("#slots input[type=radio]").await, 0);
}
