//! The driver app (`/driver`, CONTRACT §13) in a real Chromium at a phone's width (360 CSS
//! pixels), against the real server: sign-in from the link, loading the van by scanning,
//! deliveries with a drawn signature and a camera photo, a failed stop, taps per stop, the
//! driver's reach, and the offline queue across a reload. Chromium's fake camera stands in for
//! the phone's (`--use-fake-device-for-media-stream`).

use std::path::{Path, PathBuf};

use base64::Engine;
use std::process::Command;

use serde_json::{Value, json};

use crate::browser::Browser;
use crate::common::TestServer;
use crate::driver_api::{DATE, driver, operator, order};
use crate::receiver::Receiver;

/// A small Android phone's CSS pixels.
pub(crate) const PHONE_360: (u32, u32) = (360, 740);
const HOOKS: &str = "[webhooks]\nallow_private = true\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms\"\n";

/// A published day: Ana's and Ben's routes of two stops each, every shipment at the depot.
struct Day {
    s: TestServer,
    live: String,
    ana: String,
    /// Ana's stops in order: (tracking code, parcel codes).
    ana_stops: Vec<(String, Vec<String>)>,
    ben_stops: Vec<(String, Vec<String>)>,
    rx: Receiver,
}

fn stops_of(day: &Value) -> Vec<(String, Vec<String>)> {
    day["routes"][0]["stops"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["shipments"].as_array().unwrap())
        .map(|sh| {
            let codes =
                sh["parcels"].as_array().unwrap().iter().map(|p| p["pick_up_code"].as_str().unwrap().to_string());
            (sh["unique_id"].as_str().unwrap().to_string(), codes.collect())
        })
        .collect()
}

async fn day() -> Day {
    let s = TestServer::start_with(HOOKS).await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let rx = Receiver::start().await;
    let r = s.post("/webhooks", &live, &json!({"url": rx.url, "events": ["same.shipment.delivered"]})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let (_, ana) = driver(&s, &op, "Ana").await;
    let (_, ben) = driver(&s, &op, "Ben").await;
    // Four orders of two parcels, vans of four parcels: two stops each.
    let mut trackings = Vec::new();
    for i in 0..4 {
        trackings.push(order(&s, &live, i).await.0);
    }
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    for t in &trackings {
        for to in ["to_pick_up", "picked_up", "processing"] {
            assert_eq!(s.ops_move(&ops, t, &json!({"to": to})).await.status, 200);
        }
    }
    let ana_stops = stops_of(&s.get("/driver/route", &ana).await.body["object"]);
    let ben_stops = stops_of(&s.get("/driver/route", &ben).await.body["object"]);
    assert_eq!((ana_stops.len(), ben_stops.len()), (2, 2), "{ana_stops:?} {ben_stops:?}");
    Day { s, live, ana, ana_stops, ben_stops, rx }
}

/// A phone whose camera films `video` (a Y4M file) or Chromium's test pattern.
pub(crate) async fn phone(video: Option<&Path>) -> Browser {
    let mut args = vec!["--use-fake-ui-for-media-stream".to_string(), "--use-fake-device-for-media-stream".into()];
    if let Some(v) = video {
        args.push(format!("--use-file-for-fake-video-capture={}", v.display()));
    }
    Browser::start_with(PHONE_360, &args).await
}

/// A one-frame video of a parcel label as printed (its PDF rasterised by poppler at 300 dpi),
/// for the fake camera.
async fn label_video(d: &Day, tracking: &str, dir: &Path) -> PathBuf {
    let label = read(d, tracking).await["parcels"][0]["label"].as_str().unwrap().to_string();
    let pdf = d.s.http.get(&label).send().await.unwrap().bytes().await.unwrap();
    let png = crate::labels::rasterise(&pdf, dir, "label");
    let video = dir.join("label.y4m");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/png_to_y4m.py");
    let out = Command::new("python3").arg(script).arg(png).arg(&video).output().unwrap();
    assert!(out.status.success(), "png_to_y4m.py: {}", String::from_utf8_lossy(&out.stderr));
    video
}

/// The barcodes zxing-cpp reads in an image (format, text).
fn barcodes(image: &[u8], dir: &Path) -> Vec<(String, String)> {
    let path = dir.join("photo.jpg");
    std::fs::write(&path, image).unwrap();
    crate::labels::decode_image(&path)
}

/// Opens the sign-in link and waits for the route's stops.
async fn sign_in(b: &Browser, d: &Day) {
    b.goto(&format!("{}/driver#token={}", d.s.base, d.ana)).await;
    b.wait_until("document.querySelectorAll('li.stop').length === 2").await;
}

pub(crate) async fn check(b: &Browser, name: &str) {
    b.screenshot(name).await;
    b.assert_accessible(name).await;
    // A mobile viewport widens to its content: at 360 px nothing may be wider.
    let w = b.eval("return [document.documentElement.scrollWidth, window.innerWidth]").await;
    assert_eq!(w, json!([PHONE_360.0, PHONE_360.0]), "{name}: the page is wider than the phone");
}

/// Types a code into the scan field, as a driver does when the camera cannot read.
async fn type_code(b: &Browser, code: &str) {
    b.fill("#code", code).await;
    b.tap("#check").await;
}

/// Draws a signature stroke across the pad with the mouse (one press, a zigzag, a release).
async fn sign(b: &Browser) {
    let r = b
        .eval(
            "const p = document.getElementById('signature'); p.scrollIntoView({block: 'center'});
             const r = p.getBoundingClientRect(); return [r.left, r.top, r.width, r.height];",
        )
        .await;
    let n = |i: usize| r[i].as_f64().unwrap();
    let (x, y, w, h) = (n(0), n(1), n(2), n(3));
    let mouse = |kind: &str, fx: f64, fy: f64| json!({"type": kind, "x": x + w * fx, "y": y + h * fy, "button": "left", "buttons": 1, "clickCount": 1});
    b.cdp("Input.dispatchMouseEvent", mouse("mousePressed", 0.1, 0.5)).await;
    for i in 1..=12 {
        let fy = if i % 2 == 0 { 0.3 } else { 0.7 };
        b.cdp("Input.dispatchMouseEvent", mouse("mouseMoved", 0.1 + 0.065 * f64::from(i), fy)).await;
    }
    b.cdp("Input.dispatchMouseEvent", mouse("mouseReleased", 0.9, 0.5)).await;
}

/// Delivers the open stop `seq`: Delivered, a signature, optionally a camera photo, Confirm.
async fn deliver(b: &Browser, seq: usize, photo: bool) {
    b.tap(&format!("li[data-seq='{seq}'] button.deliver")).await;
    b.wait_until("document.getElementById('signature') && document.getElementById('signature').width > 0").await;
    sign(b).await;
    if photo {
        b.tap("#photo").await;
        b.wait_until("document.getElementById('viewfinder') && document.getElementById('viewfinder').readyState >= 2")
            .await;
        b.tap("#shutter").await;
        b.wait_until("document.querySelector('img.preview')").await;
        check(b, "driver-proof").await;
    }
    b.tap("#confirm").await;
    b.wait_until(&format!("document.querySelector(\"li[data-seq='{seq}']\").dataset.taps !== undefined")).await;
}

async fn taps(b: &Browser, seq: usize) -> u64 {
    let v = b.eval(&format!("return Number(document.querySelector(\"li[data-seq='{seq}']\").dataset.taps)")).await;
    v.as_u64().unwrap()
}

/// Waits until the server has taken `n` actions from this page (since it loaded) and nothing
/// waits.
pub(crate) async fn all_sent(b: &Browser, n: usize) {
    b.wait_until(&format!(
        "document.body.dataset.sent === '{n}' && document.getElementById('sync').textContent === 'All sent'"
    ))
    .await;
}

/// What the shipment read says: its status and its proofs.
async fn read(d: &Day, tracking: &str) -> Value {
    let r = d.s.get(&format!("/shipments/{tracking}"), &d.live).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"].clone()
}

fn proof<'a>(events: &'a Value, kind: &str) -> Option<&'a str> {
    let delivered = events.as_array()?.iter().find(|e| e["status"] == "delivered")?;
    delivered["proof_of_delivery"].as_array()?.iter().find(|p| p["type"] == kind)?["value"].as_str()
}

/// The bytes a proof URL serves to the merchant, with their type.
async fn fetch_proof(d: &Day, url: &str) -> (String, Vec<u8>) {
    let res = d.s.http.get(url).bearer_auth(&d.live).send().await.unwrap();
    assert_eq!(res.status(), 200, "{url}");
    let kind = res.headers()["content-type"].to_str().unwrap().to_string();
    (kind, res.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_driver_signs_in_loads_the_van_delivers_and_fails_a_stop() {
    let d = day().await;
    // The phone's camera films the first stop's parcel label.
    let dir = tempfile::tempdir().unwrap();
    let video = label_video(&d, &d.ana_stops[0].0, dir.path()).await;
    let b = phone(Some(&video)).await;
    sign_in(&b, &d).await;
    // The token left the address bar at once and is kept on the phone.
    assert_eq!(b.current_url().await, format!("{}/driver", d.s.base));
    assert_eq!(b.eval("return localStorage.getItem('ds_driver_token')").await, d.ana.as_str());
    let text = b.text("main").await;
    for (tracking, codes) in &d.ana_stops {
        assert!(text.contains(tracking.as_str()) && text.contains(codes[0].as_str()), "{text}");
    }
    for (tracking, _) in &d.ben_stops {
        assert!(!text.contains(tracking.as_str()), "Ben's stop on Ana's phone: {text}");
    }
    assert!(b.attr("li[data-seq='1'] a[href^='tel:']", "href").await.starts_with("tel:+1416555"));
    assert!(b.attr("li[data-seq='1'] a[href^='geo:']", "href").await.starts_with("geo:43.6"));
    // Installable: a manifest, and a service worker that controls the page.
    assert_eq!(b.attr("link[rel=manifest]", "href").await, "/driver/manifest.webmanifest");
    b.wait_until("navigator.serviceWorker.controller !== null").await;
    check(&b, "driver-route").await;

    // Loading: no camera barcode reader in this Chromium, so the codes are typed.
    let detector = b.eval("return 'BarcodeDetector' in window").await;
    assert_eq!(b.count("#scan-camera").await, usize::from(detector == true));
    assert!(b.attr("#start", "disabled").await == "true" || b.count("#start[disabled]").await == 1);
    // Ben's parcel is refused on the spot, and nothing counts as loaded.
    type_code(&b, &d.ben_stops[0].1[0]).await;
    b.wait_until("document.getElementById('notice') && document.getElementById('notice').className === 'alert'").await;
    assert!(b.text("#notice").await.contains("not on your route"), "{}", b.text("#notice").await);
    assert_eq!(b.text("#loaded-count").await, "0 of 4 parcels scanned");
    let codes: Vec<&String> = d.ana_stops.iter().flat_map(|(_, c)| c).collect();
    for (i, code) in codes.iter().enumerate() {
        type_code(&b, code).await;
        b.wait_until(&format!(
            "document.getElementById('loaded-count') && document.getElementById('loaded-count').textContent === '{} of 4 parcels scanned'",
            i + 1
        ))
        .await;
    }
    check(&b, "driver-loaded").await;
    b.tap("#start").await;
    all_sent(&b, 1).await;
    b.wait_until("document.querySelectorAll('button.deliver').length === 2").await;
    for (tracking, _) in &d.ana_stops {
        assert_eq!(read(&d, tracking).await["status"], "in_transit");
    }

    // Stop 1: delivered with a drawn signature and a photo from the camera, in 5 taps.
    deliver(&b, 1, true).await;
    assert_eq!(taps(&b, 1).await, 5);
    all_sent(&b, 2).await;
    let (first, _) = &d.ana_stops[0];
    let shipment = read(&d, first).await;
    assert_eq!(shipment["status"], "delivered", "{shipment}");
    let events = &shipment["events"];
    assert!(proof(events, "receiver_name").unwrap_or_default().starts_with("Receiver "), "{events}");
    let signature = proof(events, "signature").expect("a signature URL").to_string();
    let photo = proof(events, "photo").expect("a photo URL").to_string();
    let (kind, png) = fetch_proof(&d, &signature).await;
    assert_eq!((kind.as_str(), &png[..8]), ("image/png", &b"\x89PNG\r\n\x1a\n"[..]));
    let (kind, jpeg) = fetch_proof(&d, &photo).await;
    assert_eq!((kind.as_str(), &jpeg[..2]), ("image/jpeg", &[0xff, 0xd8][..]));
    // The photo is what the camera saw: the parcel's label, whose barcodes still read.
    let read_back = barcodes(&jpeg, dir.path());
    let custom = read(&d, first).await["parcels"][0]["custom_code"].as_str().unwrap().to_string();
    assert!(read_back.iter().any(|(f, t)| f == "Code128" && *t == custom), "{read_back:?}");
    // The merchant's receiver gets the delivery with the same proof URLs, serving the same bytes.
    let got =
        d.rx.wait_until("the delivery", |g| g.iter().any(|r| r.json()["data"]["unique_id"] == first.as_str())).await;
    let hook = got.iter().find(|r| r.json()["data"]["unique_id"] == first.as_str()).unwrap().json();
    assert_eq!(hook["event"], "same.shipment.delivered");
    let proofs = hook["data"]["proof_of_delivery"].as_array().unwrap().clone();
    for (kind, bytes) in [("signature", &png), ("photo", &jpeg)] {
        let url = proofs.iter().find(|p| p["type"] == kind).unwrap()["value"].as_str().unwrap();
        assert_eq!(&fetch_proof(&d, url).await.1, bytes, "{kind}");
    }
    check(&b, "driver-delivered").await;

    // Stop 2: failed, with a reason from the list, in 3 taps.
    b.tap("li[data-seq='2'] button.fail").await;
    b.wait_until("document.querySelector(\"li[data-seq='2'] .reasons button\")").await;
    b.tap("li[data-seq='2'] .reasons button").await;
    b.wait_until("document.querySelector(\"li[data-seq='2'] .reasons button[aria-pressed=true]\")").await;
    check(&b, "driver-fail").await;
    b.tap("#confirm").await;
    b.wait_until("document.querySelector(\"li[data-seq='2']\").dataset.taps !== undefined").await;
    assert_eq!(taps(&b, 2).await, 3);
    all_sent(&b, 3).await;
    let (second, _) = &d.ana_stops[1];
    let shipment = read(&d, second).await;
    // Failed, and a re-attempt booked in the same transaction (the default policy, CONTRACT §15).
    assert_eq!(shipment["status"], "to_attempt", "{shipment}");
    let failed = shipment["events"].as_array().unwrap().iter().find(|e| e["status"] == "failed");
    assert_eq!(failed.unwrap()["reason"], "Nobody at the address");

    // Another driver's stop is a 404 with this phone's token, whatever the app shows.
    let script = format!(
        "fetch('/scheduled-service/api/v1/driver/shipments/{}/transitions', {{method: 'POST',
            headers: {{'Authorization': 'Bearer ' + localStorage.getItem('ds_driver_token'),
                      'Content-Type': 'application/json', 'Idempotency-Key': 'steal-1'}},
            body: JSON.stringify({{to: 'failed', reason: 'Nobody at the address'}})}})
         .then(r => done(r.status), e => done(String(e)));",
        d.ben_stops[0].0
    );
    assert_eq!(b.eval_async(&script).await, 404);
    assert_eq!(read(&d, &d.ben_stops[0].0).await["status"], "processing");

    // The merchant sees the proof on the dashboard's shipment page (its own session).
    b.goto(&format!("{}/dashboard/sign-in", d.s.base)).await;
    b.fill("#token", &d.live).await;
    b.click("#sign-in button[type=submit]").await;
    b.goto(&format!("{}/dashboard/shipments/{first}", d.s.base)).await;
    b.wait_until(
        "[...document.querySelectorAll('figure.proof img')].filter(i => i.complete && i.naturalWidth > 0).length === 2",
    )
    .await;
    b.assert_accessible("dashboard shipment with proofs").await;
    b.screenshot("dashboard-proof").await;
    b.goto(&format!("{}/driver", d.s.base)).await;
    b.wait_until("document.getElementById('sign-out') && !document.getElementById('sign-out').hidden").await;

    // Signing out forgets the token and the kept route.
    b.tap("#sign-out").await;
    b.wait_until("document.getElementById('sign-in') !== null").await;
    assert_eq!(b.eval("return localStorage.getItem('ds_driver_token')").await, Value::Null);
    check(&b, "driver-sign-in").await;
}

/// The queued actions' files, as base64, from the phone's `IndexedDB`, in queue order.
async fn queued_files(b: &Browser) -> Vec<(String, String, String)> {
    let script = "const r = indexedDB.open('dropslot-driver', 1);
        r.onsuccess = () => {
          const q = r.result.transaction('queue').objectStore('queue').getAll();
          q.onsuccess = async () => {
            const out = [];
            for (const a of q.result) for (const f of a.files || []) {
              const bytes = new Uint8Array(await f.blob.arrayBuffer());
              let s = ''; for (const x of bytes) s += String.fromCharCode(x);
              out.push([a.shipment, f.type, btoa(s)]);
            }
            r.result.close();
            done(out);
          };
        };
        r.onerror = () => done('no database');";
    let v = b.eval_async(script).await;
    v.as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|t| (t[0].as_str().unwrap().into(), t[1].as_str().unwrap().into(), t[2].as_str().unwrap().into()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_driver_offline_deliveries_survive_a_reload_and_arrive_once_in_order() {
    let d = day().await;
    // The route started from the API: this test is about the stops.
    let all: Vec<&String> = d.ana_stops.iter().flat_map(|(_, c)| c).collect();
    let req = d.s.http.post(d.s.url("/driver/route/start")).bearer_auth(&d.ana).header("Idempotency-Key", "start-1");
    assert_eq!(d.s.send(req.json(&json!({"scanned": all}))).await.status, 200);
    let b = phone(None).await;
    sign_in(&b, &d).await;
    b.wait_until("navigator.serviceWorker.controller !== null").await;
    b.wait_until("document.querySelectorAll('button.deliver').length === 2").await;

    // Into a dead zone: both stops delivered, the first with a photo.
    b.cdp("Network.enable", json!({})).await;
    let offline = |on: bool| json!({"offline": on, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1});
    b.cdp("Network.emulateNetworkConditions", offline(true)).await;
    deliver(&b, 1, true).await;
    deliver(&b, 2, false).await;
    b.wait_until("document.getElementById('sync').textContent === 'Offline. 2 to send'").await;
    check(&b, "driver-offline").await;
    let files = queued_files(&b).await;
    let kinds: Vec<(&str, &str)> = files.iter().map(|(s, k, _)| (s.as_str(), k.as_str())).collect();
    let (first, second) = (d.ana_stops[0].0.as_str(), d.ana_stops[1].0.as_str());
    assert_eq!(kinds, [(first, "signature"), (first, "photo"), (second, "signature")]);
    assert_eq!(d.s.scalar("SELECT count(*) FROM shipment_events WHERE status = 'delivered'"), 0);

    // The app reloads without a network (its files from the service worker) and keeps both.
    b.goto(&format!("{}/driver", d.s.base)).await;
    b.wait_until("document.getElementById('sync').textContent === 'Offline. 2 to send'").await;
    assert_eq!(b.count("li.stop").await, 2);
    assert_eq!(queued_files(&b).await, files, "the photo and signatures survive the reload");

    // Back online: both arrive, once each, in the order they were made.
    b.cdp("Network.emulateNetworkConditions", offline(false)).await;
    all_sent(&b, 2).await;
    let delivered = |t: &str| {
        format!(
            "SELECT {{}} FROM shipment_events e JOIN drop_off_shipments d ON d.id = e.shipment_id
             WHERE e.shipment_kind = 'drop_off' AND e.status = 'delivered' AND d.unique_id = '{t}'"
        )
    };
    for t in [first, second] {
        assert_eq!(d.s.scalar(&delivered(t).replace("{}", "count(*)")), 1, "{t} delivered once");
    }
    let (a, z) =
        (d.s.scalar(&delivered(first).replace("{}", "e.id")), d.s.scalar(&delivered(second).replace("{}", "e.id")));
    assert!(a < z, "the first stop's delivery was recorded first");
    // The proofs served are the bytes the phone kept.
    let b64 = base64::engine::general_purpose::STANDARD;
    for (t, kind, bytes) in &files {
        let shipment = read(&d, t).await;
        let url = proof(&shipment["events"], kind).unwrap().to_string();
        assert_eq!(fetch_proof(&d, &url).await.1, b64.decode(bytes).unwrap(), "{t} {kind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_driver_shares_its_position_and_a_parcel_withdrawn_meanwhile_is_shown_not_overwritten() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, _) = s.new_client("Merchant").await;
    let (ana_id, ana) = driver(&s, &op, "Ana").await;
    // Two orders to collect at the merchant: one of a single parcel, one of two.
    let body = json!({
        "pick_up_address": {"text": crate::common::PICK_UP},
        "drop_offs": [{
            "address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "lat": 43.641, "lng": -79.39,
                        "person_name": "Receiver W", "person_phone": "+1 416 555 0100"},
            "scheduled_date": DATE, "time_slot_code": "TOR-DT-PM",
            "parcels": [{"unit": "g", "values": 1000, "custom_code": "WITHDRAWN0000000001"}]
        }]
    });
    let r = s.post("/requests/sync", &live, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let withdrawn = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let (kept, kept_codes) = order(&s, &live, 1).await;
    let r =
        s.post("/ops/plans", &op, &json!({"date": DATE, "depot": "YYZ1", "kind": "pick_up", "time_limit_s": 1})).await;
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);

    let b = phone(None).await;
    // The phone's clock is the service's (pinned) one; its place is the depot's street.
    let now_ms = crate::common::NOW.parse::<jiff::Timestamp>().unwrap().as_millisecond();
    let clock = format!(
        "(() => {{ const shift = {now_ms} - Date.now(); const real = Date.now.bind(Date); Date.now = () => real() + shift; }})();"
    );
    b.cdp("Page.addScriptToEvaluateOnNewDocument", json!({"source": clock})).await;
    b.cdp("Browser.grantPermissions", json!({"permissions": ["geolocation"], "origin": s.base})).await;
    b.cdp("Emulation.setGeolocationOverride", json!({"latitude": 43.6452, "longitude": -79.3806, "accuracy": 12}))
        .await;
    b.goto(&format!("{}/driver#token={ana}", s.base)).await;
    b.wait_until("document.querySelectorAll('li.stop').length >= 1").await;
    assert!(b.text("main").await.contains("Scan each parcel here to pick it up."));

    // With consent, the position reaches the dispatcher.
    b.tap("#share").await;
    b.wait_until("document.getElementById('share').getAttribute('aria-pressed') === 'true'").await;
    let seen = async {
        loop {
            if let Some(p) = s.app.store.latest_position(&ana_id).await.unwrap() {
                return p;
            }
            tokio::task::yield_now().await;
        }
    };
    let p = tokio::time::timeout(std::time::Duration::from_secs(10), seen).await.expect("a position within 10 s");
    assert_eq!((p.lat, p.lng, p.accuracy_m), (43.6452, -79.3806, 12.0));
    assert!((p.at_ms - now_ms).abs() < 60_000, "measured by the phone's clock: {}", p.at_ms);

    // Offline at the merchant: both scanned; meanwhile the merchant withdraws the single parcel.
    b.cdp("Network.enable", json!({})).await;
    let offline = |on: bool| json!({"offline": on, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1});
    b.cdp("Network.emulateNetworkConditions", offline(true)).await;
    type_code(&b, "WITHDRAWN0000000001").await;
    b.wait_until("document.getElementById('sync').textContent === 'Offline. 1 to send'").await;
    type_code(&b, &kept_codes[0]).await;
    b.wait_until("document.getElementById('sync').textContent === 'Offline. 2 to send'").await;
    let r = s.delete_parcel("WITHDRAWN0000000001", &live).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // Back online: the kept one is picked up; the withdrawn one is refused and shown, and its
    // shipment stays deleted.
    b.cdp("Network.emulateNetworkConditions", offline(false)).await;
    all_sent(&b, 1).await;
    b.wait_until("document.getElementById('conflicts') !== null").await;
    let changed = b.text("#conflicts").await;
    assert!(changed.contains(&withdrawn) && changed.contains("was not recorded"), "{changed}");
    assert_eq!(b.count("li.stop.changed").await, 1);
    check(&b, "driver-changed").await;
    let status = |t: String| {
        let s = &s;
        let live = live.clone();
        async move { s.get(&format!("/shipments/{t}"), &live).await.body["object"]["status"].clone() }
    };
    assert_eq!(status(withdrawn.clone()).await, "deleted");
    assert_eq!(status(kept.clone()).await, "picked_up");
}
