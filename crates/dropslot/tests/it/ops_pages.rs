//! The dispatcher's pages at `/ops` (CONTRACT §12): over plain HTTP, the rules a browser
//! hides (who may sign in, the cookie, CSRF, pages without a session); in a real browser, the
//! board's counts, a plan made from the board, its table and drawn map, a move, a refused
//! move naming its rule, publishing, and the drivers with their sign-in links. Every page is
//! checked with axe at desktop and phone width; with `DROPSLOT_SCREENSHOTS` set each is saved
//! (docs/ops/). The clock and the orders are those of `plans.rs`: Monday 2026-11-23, YYZ1.

use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, SET_COOKIE};
use serde_json::{Value, json};

use crate::browser::{Browser, DESKTOP, PHONE};
use crate::common::{ADMIN_TOKEN, TestServer};
use crate::dashboard_http::{Page, Visitor};
use crate::plans::{DATE, day, driver, operator, place};

/// Signs `v` in at `/ops` with `token` through the form; the sign-in answer.
async fn sign_in(v: &mut Visitor<'_>, token: &str) -> Page {
    let form = v.get("/ops/sign-in").await;
    assert_eq!(form.status, 200, "{}", form.body);
    let csrf = form.csrf();
    v.post("/ops/sign-in", &[("csrf", &csrf), ("token", token)]).await
}

#[tokio::test]
async fn pages_need_an_operator_session_and_every_form_its_csrf_token() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, driver_token) = driver(&s, &op, "Ana", 12, ("08:00", "22:00")).await;
    let mut v = Visitor::new(&s);
    for path in ["/ops/board", "/ops/drivers", "/ops/plans/PLN0000000000", "/ops"] {
        let r = v.get(path).await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{path}");
        assert!(r.location() == "/ops/sign-in" || r.location() == "/ops/board", "{path}: {}", r.location());
    }
    // A client's token, a driver's, a revoked or unknown one: refused in words, no session.
    let r = sign_in(&mut v, &s.token).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.body.contains("API token: it signs in to the merchant dashboard"), "{}", r.body);
    let r = sign_in(&mut v, &driver_token).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(r.body.contains("driver") && r.body.contains("operator token"), "{}", r.body);
    let r = sign_in(&mut v, "ds_operator_nonsense").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(v.cookie("ds_ops_session").is_none());
    assert_eq!(s.scalar("SELECT count(*) FROM ops_sessions"), 0);
    // The sign-in form's own CSRF value is required.
    let r = v.post("/ops/sign-in", &[("csrf", "forged"), ("token", &op)]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);

    let r = sign_in(&mut v, &op).await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/ops/board"), "{}", r.body);
    let set: Vec<String> = r.headers.get_all(SET_COOKIE).iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let cookie = set.iter().find(|c| c.starts_with("ds_ops_session=")).expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ops"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    let board = v.get("/ops/board").await;
    assert_eq!(board.status, 200, "{}", board.body);
    let csp = board.headers.get(CONTENT_SECURITY_POLICY).and_then(|h| h.to_str().ok()).unwrap_or("");
    assert!(csp.contains("default-src 'none'") && !csp.contains("script-src"), "{csp}");
    assert!(board.body.contains("YYZ1") && board.body.contains(DATE), "today in Toronto, first depot");

    // A form without the session's token changes nothing.
    let before = s.get("/ops/drivers", &op).await.body["object"]["drivers"].as_array().map(Vec::len);
    let form = [("name", "Eve"), ("phone", "+1 416 555 0100"), ("depot", "YYZ1"), ("vehicle_name", "Van")];
    let r = v.post("/ops/drivers", &[&form[..], &[("csrf", "forged")]].concat()).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    let r = v.post("/ops/plans", &[("date", DATE), ("depot", "YYZ1"), ("kind", "delivery")]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert_eq!(s.get("/ops/drivers", &op).await.body["object"]["drivers"].as_array().map(Vec::len), before);
    assert_eq!(s.get(&format!("/ops/plans?date={DATE}"), &op).await.body["object"]["plans"], json!([]));

    // A dashboard session does not open /ops (its cookie is another table's).
    let mut client = Visitor::new(&s);
    assert_eq!(client.sign_in(&s.token).await.status, StatusCode::SEE_OTHER);
    let r = client.get("/ops/board").await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/ops/sign-in"));

    // Revoking the operator token ends its sessions; so does signing out.
    let mut other = Visitor::new(&s);
    assert_eq!(sign_in(&mut other, &op).await.status, StatusCode::SEE_OTHER);
    let csrf = v.get("/ops/board").await.csrf();
    let r = v.post("/ops/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!((r.status, r.location()), (StatusCode::SEE_OTHER, "/ops/sign-in"));
    assert_eq!(v.get("/ops/board").await.status, StatusCode::SEE_OTHER);
    assert_eq!(other.get("/ops/board").await.status, 200);
    let prefix = &op[..20];
    let r = s.send(s.http.delete(s.url(&format!("/admin/tokens/{prefix}"))).bearer_auth(ADMIN_TOKEN)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(other.get("/ops/board").await.status, StatusCode::SEE_OTHER, "a revoked token's session is over");
}

/// Checks a page the way every page is checked, and saves its screenshot.
async fn check_page(b: &Browser, name: &str) {
    b.assert_accessible(name).await;
    b.screenshot(name).await;
}

/// No horizontal scrolling of the page itself on a phone (tables scroll in their region).
async fn assert_fits(b: &Browser, name: &str) {
    let fits = b.eval("return document.documentElement.scrollWidth <= window.innerWidth + 1").await;
    assert_eq!(fits, json!(true), "{name} overflows the phone's width");
}

async fn browser_sign_in(b: &Browser, s: &TestServer, token: &str, page: &str) {
    b.goto(&format!("{}/ops/board", s.base)).await;
    assert!(b.current_url().await.ends_with("/ops/sign-in"), "signed out: sent to sign in");
    check_page(b, page).await;
    b.fill("#token", token).await;
    b.click("#sign-in button[type=submit]").await;
}

fn used_routes(plan: &Value) -> Vec<&Value> {
    plan["routes"].as_array().unwrap().iter().filter(|r| r["stops"].as_array().unwrap().len() > 2).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_dispatcher_board_plan_map_move_publish_and_drivers() {
    let d = day().await;
    let s = &d.s;
    let b = Browser::start(DESKTOP).await;
    browser_sign_in(&b, s, &d.op, "sign-in-desktop").await;
    assert!(b.current_url().await.ends_with("/ops/board"), "{}", b.current_url().await);
    check_page(&b, "board-desktop").await;
    // Ten live orders today at YYZ1: ten drop-offs in zone TOR-DT's two slots, ten pick-ups.
    assert_eq!(b.text("#total-shipments").await, "20");
    assert_eq!(b.text("#total-published").await, "0");
    let counts = b.text("#counts tbody").await;
    assert!(counts.contains("Delivery TOR-DT TOR-DT-PM 6 0 6"), "{counts}");
    assert!(counts.contains("Delivery TOR-DT TOR-DT-EV 4 0 4"), "{counts}");
    assert!(counts.contains("Pick-up"), "{counts}");

    // A plan from the board's form: the API's code path, then its page.
    b.fill("#plan-limit", "1").await;
    b.select("#plan-kind", "delivery").await;
    b.click("#new-plan button[type=submit]").await;
    let url = b.current_url().await;
    let id = url.rsplit('/').next().unwrap().to_string();
    assert!(id.starts_with("PLN"), "{url}: {}", b.text("main").await);
    let plan = s.get(&format!("/ops/plans/{id}"), &d.op).await.body["object"].clone();
    let used = used_routes(&plan);
    let visits: usize = used.iter().map(|r| r["stops"].as_array().unwrap().len() - 2).sum();
    assert_eq!(b.count("svg#map polyline.route").await, used.len(), "one line per used route");
    assert_eq!(b.count("svg#map g.stop circle").await, visits, "a numbered marker per stop");
    assert_eq!(b.count("svg#map g.depot").await, 1);
    assert_eq!(b.count(".legend li").await, used.len() + 1);
    assert_eq!(b.count("table.stops tbody tr").await, visits + 2 * used.len(), "each stop and the depot twice");
    assert_eq!(b.text("#plan-status").await, "draft");
    check_page(&b, "plan-desktop").await;

    // A move that breaks a window: the rule, in words, on the page; nothing written.
    let evening = &d.shipments[9];
    let (route, at) = place(&plan, evening).unwrap();
    let afternoon = &d.shipments[0];
    let position = at + usize::from(place(&plan, afternoon).unwrap().0 != route);
    b.select("#move-shipment", afternoon).await;
    b.select("#move-route", &route).await;
    b.fill("#move-position", &position.to_string()).await;
    b.click("#move button[type=submit]").await;
    let errors = b.text(".errors").await;
    assert!(errors.contains("Rule `window`") && errors.contains("after its window closes"), "{errors}");
    check_page(&b, "plan-move-refused-desktop").await;
    assert_eq!(s.get(&format!("/ops/plans/{id}"), &d.op).await.body["object"], plan, "nothing written");

    // A move that keeps the rules: from the fuller route to the emptier, first stop.
    let load =
        |r: &Value| -> i64 { r["stops"].as_array().unwrap().iter().map(|s| s["parcels"].as_i64().unwrap()).sum() };
    let routes = plan["routes"].as_array().unwrap();
    let (fuller, emptier) =
        if load(&routes[0]) >= load(&routes[1]) { (&routes[0], &routes[1]) } else { (&routes[1], &routes[0]) };
    let moving = d.shipments[..6]
        .iter()
        .find(|u| place(&plan, u).is_some_and(|(r, _)| r == fuller["id"].as_str().unwrap()))
        .expect("an afternoon stop on the fuller route");
    let target = emptier["id"].as_str().unwrap();
    b.select("#move-shipment", moving).await;
    b.select("#move-route", target).await;
    b.fill("#move-position", "1").await;
    b.click("#move button[type=submit]").await;
    assert_eq!(b.count(".errors").await, 0, "{}", b.text("main").await);
    let moved = s.get(&format!("/ops/plans/{id}"), &d.op).await.body["object"].clone();
    assert_eq!(place(&moved, moving), Some((target.to_string(), 1)));

    // Publish: the board counts them as in published routes.
    b.click("#publish button[type=submit]").await;
    assert_eq!(b.text("#plan-status").await, "published");
    assert_eq!(b.count("#publish").await, 0, "published once");
    let assigned = moved["cost"]["shipments_assigned"].as_i64().unwrap();
    b.goto(&format!("{}/ops/board?depot=YYZ1&date={DATE}", s.base)).await;
    assert_eq!(b.text("#total-published").await, assigned.to_string());
    assert!(b.text("#plans tbody tr").await.contains("published"));

    // Drivers: add one, its link shown once; a new link for another replaces its old one.
    b.goto(&format!("{}/ops/drivers", s.base)).await;
    assert_eq!(b.count("#drivers tbody tr").await, 2);
    check_page(&b, "drivers-desktop").await;
    b.fill("#d-name", "Dee").await;
    b.fill("#d-phone", "+1 416 555 0142").await;
    b.click("#new-driver button[type=submit]").await;
    let link = b.text("#link").await;
    assert!(link.contains("/driver#token=ds_driver_"), "{link}");
    assert_eq!(b.count("#drivers tbody tr").await, 3);
    check_page(&b, "drivers-created-desktop").await;
    let old = &d.drivers[0].1;
    assert_eq!(s.get("/ops/drivers", old).await.status, 403, "a driver's token, still valid");
    b.click("#drivers tbody tr:first-child form.reissue button").await;
    assert!(b.text("#sign-in-link").await.contains("stopped working"));
    let new_link = b.text("#link").await;
    assert_ne!(new_link, link);
    let r = s.get("/ops/drivers", old).await;
    assert_eq!(r.status, 401, "the old driver token is revoked: {}", r.body);

    // The same pages on a phone.
    let p = Browser::start(PHONE).await;
    browser_sign_in(&p, s, &d.op, "sign-in-phone").await;
    for (path, name) in [
        ("/ops/board".to_string(), "board-phone"),
        (format!("/ops/plans/{id}"), "plan-phone"),
        ("/ops/drivers".into(), "drivers-phone"),
    ] {
        p.goto(&format!("{}{path}", s.base)).await;
        check_page(&p, name).await;
        assert_fits(&p, name).await;
    }
}
