//! Proof-of-delivery files (CONTRACT §13) on both backends: a driver uploads a PNG or JPEG
//! (checked by content, at most 5 MB, once per key), a delivery attaches it in the move, and
//! only the shipment's merchant reads it, by the API, from the webhook's URL and in the
//! dashboard.

use reqwest::header::COOKIE;
use serde_json::{Value, json};

use crate::common::{API, Reply, TestServer, assert_envelope};
use crate::dashboard_http::Visitor;
use crate::driver_api::{DATE, driver, operator, order, shipments_of};
use crate::receiver::Receiver;

const MB5: usize = 5 * 1024 * 1024;

/// A `side`×`side` grey PNG of shade `shade`, padded by a private ancillary chunk (which a
/// decoder skips) to exactly `total` bytes when given.
fn png_image(side: u32, shade: u8, total: Option<usize>) -> Vec<u8> {
    let encode = |pad: Option<usize>| {
        let mut out = Vec::new();
        let mut e = png::Encoder::new(&mut out, side, side);
        e.set_color(png::ColorType::Grayscale);
        let mut w = e.write_header().unwrap();
        if let Some(n) = pad {
            w.write_chunk(png::chunk::ChunkType(*b"paDd"), &vec![0x5a; n]).unwrap();
        }
        w.write_image_data(&vec![shade; (side * side) as usize]).unwrap();
        w.finish().unwrap();
        out
    };
    let plain = encode(None);
    match total {
        None => plain,
        // A chunk is its length, type and CRC (12 bytes) around its data.
        Some(total) => {
            let padded = encode(Some(total - plain.len() - 12));
            assert_eq!(padded.len(), total);
            padded
        }
    }
}

fn jpeg_image() -> Vec<u8> {
    let mut out = Vec::new();
    let pixels: Vec<u8> = (0..64 * 48 * 3).map(|i| (i * 13 % 251) as u8).collect();
    jpeg_encoder::Encoder::new(&mut out, 85).encode(&pixels, 64, 48, jpeg_encoder::ColorType::Rgb).unwrap();
    out
}

async fn upload(s: &TestServer, token: &str, key: Option<&str>, content_type: &str, bytes: Vec<u8>) -> Reply {
    let mut req = s.http.post(s.url("/driver/proofs")).bearer_auth(token).header("Content-Type", content_type);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    s.send(req.body(bytes)).await
}

/// The URL of a stored proof.
async fn uploaded(s: &TestServer, token: &str, key: &str, content_type: &str, bytes: Vec<u8>) -> String {
    let r = upload(s, token, Some(key), content_type, bytes).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["url"].as_str().unwrap().to_string()
}

fn token_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

/// `GET url` with `token` (none: no `Authorization`): status, headers and the bytes.
async fn fetch(s: &TestServer, url: &str, token: Option<&str>) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut req = s.http.get(url);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    let res = req.send().await.unwrap();
    let (status, headers) = (res.status().as_u16(), res.headers().clone());
    (status, headers, res.bytes().await.unwrap().to_vec())
}

/// A published plan of today for the live orders, and the drop-offs brought to `in_transit`.
async fn on_the_way(s: &TestServer, op: &str, ops: &str, trackings: &[String]) {
    let r =
        s.post("/ops/plans", op, &json!({"date": DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), op, &json!({})).await.status, 200);
    for tracking in trackings {
        for to in ["to_pick_up", "picked_up", "processing", "in_transit"] {
            assert_eq!(s.ops_move(ops, tracking, &json!({"to": to})).await.status, 200);
        }
    }
}

async fn deliver(s: &TestServer, driver: &str, tracking: &str, key: &str, proof: Value) -> Reply {
    let req = s
        .http
        .post(s.url(&format!("/driver/shipments/{tracking}/transitions")))
        .bearer_auth(driver)
        .header("Idempotency-Key", key)
        .json(&json!({"to": "delivered", "proof_of_delivery": proof}));
    s.send(req).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_upload_is_checked_by_content_limited_to_5_mb_and_taken_once_per_key() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, test, live, ops) = s.new_client("Merchant").await;
    let (_, ana) = driver(&s, &op, "Ana").await;

    let signature = png_image(40, 0, None);
    let r = upload(&s, &ana, Some("sig-1"), "image/png", signature.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let url = r.body["object"]["url"].as_str().unwrap().to_string();
    assert!(url.starts_with(&format!("{}{API}/proofs/", s.base)), "{url}");
    assert_eq!(token_of(&url).len(), 43, "32 random bytes, base64url");
    assert!(r.headers.get("idempotent-replayed").is_none());
    // The same key and image: the same URL again; the same key with another image: refused.
    let again = upload(&s, &ana, Some("sig-1"), "image/png", signature.clone()).await;
    assert_eq!(again.status, 201, "{}", again.body);
    assert_eq!(again.body["object"]["url"], url.as_str());
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_envelope(&upload(&s, &ana, Some("sig-1"), "image/png", png_image(40, 9, None)).await, 409);
    let photo = uploaded(&s, &ana, "photo-1", "image/jpeg", jpeg_image()).await;
    assert_ne!(photo, url);
    assert_eq!(s.scalar("SELECT count(*) FROM proofs"), 2);

    // Checked by content: text, a truncated PNG, a PNG sent as JPEG, a JPEG sent as PNG.
    let text = upload(&s, &ana, Some("bad-1"), "image/png", b"just some text, not a picture".to_vec()).await;
    assert_envelope(&text, 422);
    assert!(text.error_at("body")[0].contains("not a PNG image"), "{}", text.body);
    let truncated = upload(&s, &ana, Some("bad-2"), "image/png", signature[..signature.len() - 20].to_vec()).await;
    assert_envelope(&truncated, 422);
    assert!(truncated.error_at("body")[0].contains("damaged or truncated"), "{}", truncated.body);
    let jpeg = jpeg_image();
    let cut = upload(&s, &ana, Some("bad-3"), "image/jpeg", jpeg[..jpeg.len() / 2].to_vec()).await;
    assert!(cut.error_at("body")[0].contains("JPEG image is damaged"), "{}", cut.body);
    let swapped = upload(&s, &ana, Some("bad-4"), "image/jpeg", signature.clone()).await;
    assert_envelope(&swapped, 422);
    assert!(swapped.error_at("body")[0].contains("PNG image sent as image/jpeg"), "{}", swapped.body);
    let swapped = upload(&s, &ana, Some("bad-5"), "image/png", jpeg_image()).await;
    assert!(swapped.error_at("body")[0].contains("JPEG image sent as image/png"), "{}", swapped.body);
    // Too many pixels: refused from the header.
    let mut wide = Vec::new();
    let mut e = png::Encoder::new(&mut wide, 8001, 1);
    e.set_color(png::ColorType::Grayscale);
    e.write_header().unwrap().write_image_data(&[7; 8001]).unwrap();
    let wide = upload(&s, &ana, Some("bad-6"), "image/png", wide).await;
    assert!(wide.error_at("body")[0].contains("8001×1"), "{}", wide.body);
    let gif = upload(&s, &ana, Some("bad-7"), "image/gif", b"GIF89a".to_vec()).await;
    assert_envelope(&gif, 415);
    gif.error_at("header.Content-Type");
    upload(&s, &ana, None, "image/png", signature.clone()).await.error_at("header.Idempotency-Key");
    assert_eq!(s.scalar("SELECT count(*) FROM proofs"), 2, "nothing refused was stored");

    // Exactly 5 MB is taken; one byte more is a 413, refused from its Content-Length.
    let r = upload(&s, &ana, Some("big-1"), "image/png", png_image(8, 1, Some(MB5))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = upload(&s, &ana, Some("big-2"), "image/png", png_image(8, 2, Some(MB5 + 1))).await;
    assert_envelope(&r, 413);
    assert_eq!(s.scalar("SELECT count(*) FROM proofs"), 3);
    assert_eq!(s.scalar("SELECT size FROM proofs WHERE key = 'big-1'"), MB5 as i64);

    // Driver tokens only.
    for token in [live.as_str(), test.as_str(), ops.as_str(), op.as_str()] {
        assert_envelope(&upload(&s, token, Some("k"), "image/png", signature.clone()).await, 403);
    }
    let anonymous =
        s.http.post(s.url("/driver/proofs")).header("Content-Type", "image/png").header("Idempotency-Key", "k");
    assert_envelope(&s.send(anonymous.body(signature)).await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_attaches_its_proofs_and_only_its_merchant_reads_them() {
    let s = TestServer::start_with("[webhooks]\nallow_private = true\nretry_schedule = \"100ms,100ms\"\n").await;
    let op = operator(&s).await;
    let (_, test, live, ops) = s.new_client("Merchant").await;
    let (_, _, other_live, _) = s.new_client("Other Merchant").await;
    let rx = Receiver::start().await;
    let hook = json!({"url": rx.url, "events": ["same.shipment.delivered"]});
    assert_eq!(s.post("/webhooks", &live, &hook).await.status, 201);
    let (_, ana) = driver(&s, &op, "Ana").await;
    let (_, ben) = driver(&s, &op, "Ben").await;
    let mut trackings = Vec::new();
    for i in 0..4 {
        trackings.push(order(&s, &live, i).await.0);
    }
    on_the_way(&s, &op, &ops, &trackings).await;
    let mine = shipments_of(&s.get("/driver/route", &ana).await.body["object"]);
    assert!(mine.len() >= 2, "{mine:?}");

    let (signature, photo) = (png_image(32, 10, None), jpeg_image());
    let sig_url = uploaded(&s, &ana, "sig", "image/png", signature.clone()).await;
    let photo_url = uploaded(&s, &ana, "photo", "image/jpeg", photo.clone()).await;
    let bens = uploaded(&s, &ben, "sig", "image/png", png_image(32, 20, None)).await;

    // Another driver's proof, free text, a proof named twice: refused at the value, nothing moves.
    let r = deliver(&s, &ana, &mine[0], "d0", json!([{"type": "signature", "value": bens}])).await;
    assert_envelope(&r, 422);
    r.error_at("proof_of_delivery.0.value");
    let r = deliver(&s, &ana, &mine[0], "d1", json!([{"type": "signature", "value": "sig/123.png"}])).await;
    assert!(r.error_at("proof_of_delivery.0.value")[0].contains("POST /driver/proofs"), "{}", r.body);
    let twice = json!([{"type": "photo", "value": photo_url}, {"type": "photo", "value": photo_url}]);
    deliver(&s, &ana, &mine[0], "d2", twice).await.error_at("proof_of_delivery.1.value");
    assert_eq!(s.scalar("SELECT count(*) FROM proofs WHERE shipment_unique_id IS NOT NULL"), 0);

    let proof = json!([
        {"type": "receiver_name", "value": "Receiver 0"},
        {"type": "signature", "value": sig_url},
        {"type": "photo", "value": photo_url},
    ]);
    let r = deliver(&s, &ana, &mine[0], "d3", proof.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let read = s.get(&format!("/shipments/{}", mine[0]), &live).await;
    let events = read.body["object"]["events"].as_array().unwrap();
    assert_eq!(events.last().unwrap()["proof_of_delivery"], proof, "{}", read.body);
    let attached =
        format!("SELECT count(*) FROM proofs WHERE shipment_unique_id = '{}' AND client_id IS NOT NULL", mine[0]);
    assert_eq!(s.scalar(&attached), 2);
    // A replay of the move attaches nothing twice; the proofs cannot serve another delivery.
    assert_eq!(deliver(&s, &ana, &mine[0], "d3", proof.clone()).await.headers["idempotent-replayed"], "true");
    let r = deliver(&s, &ana, &mine[1], "d4", json!([{"type": "signature", "value": sig_url}])).await;
    assert!(r.error_at("proof_of_delivery.0.value")[0].contains("another delivery"), "{}", r.body);

    // The merchant reads the same bytes with their type; nobody else does.
    let (status, headers, bytes) = fetch(&s, &sig_url, Some(&live)).await;
    assert_eq!((status, bytes == signature), (200, true));
    assert_eq!(headers["content-type"], "image/png");
    assert!(headers["cache-control"].to_str().unwrap().starts_with("private, max-age="));
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let etag = headers["etag"].to_str().unwrap().to_string();
    let cached = s.http.get(&sig_url).bearer_auth(&live).header("If-None-Match", &etag).send().await.unwrap();
    assert_eq!(cached.status(), 304);
    let (status, headers, bytes) = fetch(&s, &photo_url, Some(&live)).await;
    assert_eq!((status, bytes == photo, headers["content-type"].to_str().unwrap()), (200, true, "image/jpeg"));
    for token in [other_live.as_str(), test.as_str()] {
        assert_eq!(fetch(&s, &sig_url, Some(token)).await.0, 404, "another client, or the test mode");
    }
    assert_eq!(fetch(&s, &bens, Some(&live)).await.0, 404, "an unattached proof");
    assert_eq!(fetch(&s, &format!("{}{API}/proofs/{}", s.base, "x".repeat(43)), Some(&live)).await.0, 404);
    assert_eq!(fetch(&s, &sig_url, None).await.0, 401);
    for token in [ops.as_str(), op.as_str(), ana.as_str()] {
        assert_eq!(fetch(&s, &sig_url, Some(token)).await.0, 403);
    }

    // The webhook carries the URLs, and they serve the same images.
    let got = rx.delivered(1).await;
    let data = got[0].json()["data"].clone();
    assert_eq!(
        (got[0].event(), data["unique_id"].as_str()),
        ("same.shipment.delivered".into(), Some(mine[0].as_str()))
    );
    assert_eq!(data["proof_of_delivery"], proof);
    for (i, expected) in [(1, &signature), (2, &photo)] {
        let url = data["proof_of_delivery"][i]["value"].as_str().unwrap();
        assert_eq!(&fetch(&s, url, Some(&live)).await.2, expected);
    }

    // The dashboard shows the images from its own route, to the merchant's session only.
    let mut v = Visitor::new(&s);
    assert_eq!(v.sign_in(&live).await.status, 303);
    let page = v.get(&format!("/dashboard/shipments/{}", mine[0])).await;
    assert_eq!(page.status, 200);
    let sig_src = format!("/dashboard/proofs/{}", token_of(&sig_url));
    let photo_src = format!("/dashboard/proofs/{}", token_of(&photo_url));
    assert!(page.body.contains(&format!("<img src=\"{sig_src}\" alt=\"Signature of the receiver\">")), "{}", page.body);
    assert!(
        page.body.contains(&format!("<img src=\"{photo_src}\" alt=\"Photo taken at the delivery\">")),
        "{}",
        page.body
    );
    assert!(page.body.contains("Proof: receiver name: Receiver 0"), "{}", page.body);
    let cookie = format!("ds_session={}", v.cookie("ds_session").unwrap());
    let res = s.http.get(format!("{}{sig_src}", s.base)).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(
        (res.status().as_u16(), res.headers()["content-type"].to_str().unwrap().to_string()),
        (200, "image/png".into())
    );
    assert_eq!(res.bytes().await.unwrap().to_vec(), signature);
    let mut stranger = Visitor::new(&s);
    stranger.sign_in(&other_live).await;
    assert_eq!(stranger.get(&sig_src).await.status, 404);
    assert_ne!(Visitor::new(&s).get(&sig_src).await.status, 200, "no session: the sign-in page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_carries_at_most_10_mb_of_proofs_and_a_driver_at_most_50_unattached() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (_, ana) = driver(&s, &op, "Ana").await;
    let (tracking, _) = order(&s, &live, 0).await;
    on_the_way(&s, &op, &ops, std::slice::from_ref(&tracking)).await;

    // Three photos of 4 MB: 12 MB for one delivery is refused; two of them (8 MB) are taken.
    let mut photos = Vec::new();
    for i in 0..3u8 {
        photos.push(uploaded(&s, &ana, &format!("p{i}"), "image/png", png_image(8, i, Some(4 << 20))).await);
    }
    let all: Vec<Value> = photos.iter().map(|u| json!({"type": "photo", "value": u})).collect();
    let r = deliver(&s, &ana, &tracking, "d1", Value::Array(all.clone())).await;
    assert_envelope(&r, 422);
    assert!(r.error_at("proof_of_delivery")[0].contains("at most 10 MB"), "{}", r.body);
    let sig = uploaded(&s, &ana, "s1", "image/png", png_image(8, 1, None)).await;
    let sig2 = uploaded(&s, &ana, "s2", "image/png", png_image(8, 2, None)).await;
    let two = json!([{"type": "signature", "value": sig}, {"type": "signature", "value": sig2}]);
    deliver(&s, &ana, &tracking, "d2", two).await.error_at("proof_of_delivery");
    let r = deliver(&s, &ana, &tracking, "d3", Value::Array(all[..2].to_vec())).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // 50 unattached proofs per driver (3 are so far); the 51st is a 429 saying what frees one.
    let held = s.scalar("SELECT count(*) FROM proofs WHERE shipment_unique_id IS NULL");
    assert_eq!(held, 3);
    for i in held..50 {
        let r = upload(&s, &ana, Some(&format!("u{i}")), "image/png", png_image(4, i as u8, None)).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = upload(&s, &ana, Some("u50"), "image/png", png_image(4, 200, None)).await;
    assert_envelope(&r, 429);
    assert!(r.body["message"].as_str().unwrap().contains("50 images"), "{}", r.body);
    assert!(r.headers.contains_key("retry-after"));
    // A replay of a stored one is still answered.
    assert_eq!(upload(&s, &ana, Some("u10"), "image/png", png_image(4, 10, None)).await.status, 201);

    // After 2 days the unattached ones are purged (the attached ones stay), which frees room.
    let now = "2026-11-23T12:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
    assert_eq!(s.app.store.purge_proofs(now - 2 * 86_400_000).await.unwrap(), 0);
    assert_eq!(s.app.store.purge_proofs(now + 1).await.unwrap(), 50);
    assert_eq!(s.scalar("SELECT count(*) FROM proofs"), 2);
    assert_eq!(upload(&s, &ana, Some("u51"), "image/png", png_image(4, 201, None)).await.status, 201);
}

/// Two deliveries at once naming the same proof: the check in the move's transaction lets
/// exactly one of them have it; the other is refused whole (its shipment does not move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deliveries_racing_for_one_proof_attach_it_once() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let (_, _, live, ops) = s.new_client("Merchant").await;
    let (_, ana) = driver(&s, &op, "Ana").await;
    let (a, _) = order(&s, &live, 0).await;
    let (b, _) = order(&s, &live, 1).await;
    on_the_way(&s, &op, &ops, &[a.clone(), b.clone()]).await;
    for round in 0..3 {
        let url = uploaded(&s, &ana, &format!("race-{round}"), "image/png", png_image(8, round, None)).await;
        let proof = json!([{"type": "signature", "value": url}]);
        let (key_a, key_b) = (format!("a-{round}"), format!("b-{round}"));
        let (ra, rb) =
            tokio::join!(deliver(&s, &ana, &a, &key_a, proof.clone()), deliver(&s, &ana, &b, &key_b, proof.clone()));
        let mut statuses = [ra.status.as_u16(), rb.status.as_u16()];
        statuses.sort_unstable();
        if round == 0 {
            assert_eq!(statuses, [200, 422], "{} / {}", ra.body, rb.body);
            let loser = if ra.status == 422 { &ra } else { &rb };
            assert!(loser.error_at("proof_of_delivery.0.value")[0].contains("another delivery"), "{}", loser.body);
            let winner = if ra.status == 200 { &a } else { &b };
            let attached = format!("SELECT count(*) FROM proofs WHERE shipment_unique_id = '{winner}'");
            assert_eq!(s.scalar(&attached), 1);
            assert_eq!(s.scalar("SELECT count(*) FROM shipment_events WHERE status = 'delivered'"), 1);
            // The loser is still in transit: it is delivered with a proof of its own.
            let (loser_id, key) = if ra.status == 200 { (&b, "b-own") } else { (&a, "a-own") };
            let own = uploaded(&s, &ana, "own", "image/png", png_image(8, 99, None)).await;
            let r = deliver(&s, &ana, loser_id, key, json!([{"type": "signature", "value": own}])).await;
            assert_eq!(r.status, 200, "{}", r.body);
        } else {
            // Both delivered now: the state machine refuses both, and nothing is attached.
            assert_eq!(statuses, [409, 409], "{} / {}", ra.body, rb.body);
            assert_eq!(
                s.scalar(&format!(
                    "SELECT count(*) FROM proofs WHERE key = 'race-{round}' AND shipment_unique_id IS NULL"
                )),
                1
            );
        }
    }
}
