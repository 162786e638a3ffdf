//! Rate limits (issue 12): per token and class, per client in its terms, per address for
//! public URLs; a 429 in the error envelope with `Retry-After`, `RateLimit-Policy` and
//! `RateLimit`; the bucket refills as the (injected) clock moves, no sleeping.

use serde_json::json;

use crate::common::{ADMIN_TOKEN, Reply, TestServer, assert_envelope, request};

const TIGHT: &str = "[rate_limits]\npreview = { per_second = 1, burst = 3 }\n\
orders = { per_second = 1, burst = 2 }\nother = { per_second = 1, burst = 50 }\n\
[public_rate_limit]\nper_second = 1\nburst = 2\n";

/// Sends `send` until a 429 (at most `most` times): the answers before it, and the 429.
async fn until_refused<F, Fut>(most: usize, send: F) -> (usize, Reply)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Reply>,
{
    for i in 0..most {
        let r = send().await;
        if r.status == 429 {
            return (i, r);
        }
        assert!(r.status.is_success() || r.status == 404, "{}", r.body);
    }
    panic!("no 429 in {most} requests");
}

fn header<'a>(r: &'a Reply, name: &str) -> &'a str {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn over_the_limit_is_a_429_with_its_headers_and_the_bucket_refills() {
    let s = TestServer::start_with(TIGHT).await;
    // The burst of 3 passes (real time may add one more on a slow machine), then 429.
    let body = request(&[500.0]);
    let (passed, r) = until_refused(10, || s.preview(&body)).await;
    assert!((3..=4).contains(&passed), "{passed} passed");
    assert_envelope(&r, 429);
    assert!(r.body["message"].as_str().unwrap_or("").contains("rate limit"), "{}", r.body);
    assert!(header(&r, "retry-after").parse::<u64>().is_ok_and(|s| s >= 1), "{:?}", r.headers);
    assert_eq!(header(&r, "ratelimit-policy"), "\"preview\";q=3;w=3");
    assert!(header(&r, "ratelimit").starts_with("\"preview\";r=0;t="), "{:?}", r.headers);

    // Other classes and other tokens have their own buckets.
    assert_eq!(s.get("/orders", &s.token).await.status, 200);
    let (_, other, _, _) = s.new_client("Other").await;
    assert_eq!(s.post("/requests/preview", &other, &request(&[500.0])).await.status, 200);

    // Ten seconds later (on the service clock) the bucket is full again.
    s.app.clock.advance(jiff::SignedDuration::from_secs(10));
    for _ in 0..3 {
        assert_eq!(s.preview(&body).await.status, 200);
    }
    let metrics = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("dropslot_rate_limited_total{class=\"preview\"} 1"), "{metrics}");
}

#[tokio::test]
async fn a_clients_terms_set_its_own_limits_and_orders_are_limited_before_their_body() {
    let s = TestServer::start_with(TIGHT).await;
    let (id, test, _, _) = s.new_client("Busy").await;
    let terms = json!({"rate_limits": {
        "preview": {"per_second": 1, "burst": 3},
        "orders": {"per_second": 1, "burst": 5},
        "other": {"per_second": 1, "burst": 50}}});
    let r =
        s.send(s.http.put(s.url(&format!("/admin/clients/{id}/settings"))).bearer_auth(ADMIN_TOKEN).json(&terms)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let body = request(&[500.0]);
    let (passed, _) = until_refused(10, || s.post("/requests/sync", &test, &body)).await;
    assert!((5..=6).contains(&passed), "the client's own burst of 5: {passed}");
    let (passed, refused) = until_refused(10, || s.order(&body)).await;
    assert!((2..=3).contains(&passed), "the configured burst of 2: {passed}");
    assert_eq!(header(&refused, "ratelimit-policy"), "\"orders\";q=2;w=2");
    // Refused before the body is read: even a malformed body gets the 429, not a 400.
    let bad = s
        .send(
            s.http
                .post(s.url("/requests/sync"))
                .bearer_auth(&s.token)
                .body("{not json")
                .header("content-type", "application/json"),
        )
        .await;
    assert_eq!(bad.status, 429);
    let orders = s.scalar("SELECT count(*) FROM orders");
    assert!((7..=9).contains(&orders), "only the accepted orders exist: {orders}");

    let bad_terms = json!({"rate_limits": {"preview": {"per_second": 5, "burst": 0},
        "orders": {"per_second": 1, "burst": 1}, "other": {"per_second": 1, "burst": 1}}});
    let r = s
        .send(s.http.put(s.url(&format!("/admin/clients/{id}/settings"))).bearer_auth(ADMIN_TOKEN).json(&bad_terms))
        .await;
    assert_envelope(&r, 422);
    assert!(r.body["errors"]["rate_limits"].is_array(), "{}", r.body);
}

#[tokio::test]
async fn label_and_tracking_urls_are_limited_per_address() {
    let s = TestServer::start_with(TIGHT).await;
    let (passed, r) = until_refused(10, || s.send(s.http.get(s.url("/track/DSNOSUCHCODE")))).await;
    assert!((2..=3).contains(&passed), "the burst of 2 (404s count too): {passed}");
    assert_envelope(&r, 429);
    assert_eq!(header(&r, "ratelimit-policy"), "\"public\";q=2;w=2");
    let label = s.send(s.http.get(s.url("/labels/parcel/nosuchtoken/4x6.pdf"))).await;
    assert_eq!(label.status, 429, "labels share the address's bucket");
    assert_eq!(s.get("/orders", &s.token).await.status, 200, "the API is not limited by address");
}

/// Issue 27: a successful answer tells the client its bucket before its first 429
/// (`RateLimit-Policy` and `RateLimit`, draft-ietf-httpapi-ratelimit-headers), counting down
/// request by request; an error after the check (a 422) carries them too; a public URL,
/// which no token limits, carries none of the token's.
#[tokio::test]
async fn successful_answers_carry_the_rate_limit_headers() {
    let s = TestServer::start_with(TIGHT).await;
    let body = request(&[500.0]);
    let first = s.preview(&body).await;
    assert_eq!(first.status, 200);
    assert_eq!(header(&first, "ratelimit-policy"), "\"preview\";q=3;w=3");
    let r1 = header(&first, "ratelimit").to_string();
    assert!(r1.starts_with("\"preview\";r=2;t="), "{r1}");
    // What remains counts down (real time refills one a second, so allow for a slow step).
    let remaining = |r: &Reply| -> u32 {
        let value = header(r, "ratelimit");
        value.split(";r=").nth(1).and_then(|v| v.split(';').next()?.parse().ok()).unwrap_or_else(|| panic!("{value}"))
    };
    let second = s.preview(&body).await;
    assert!(remaining(&second) <= 2, "{:?}", second.headers);
    let mut bad = body.clone();
    bad["drop_offs"][0]["parcels"][0]["values"] = json!(-1);
    let refused = s.preview(&bad).await;
    assert_eq!(refused.status, 422);
    assert!(remaining(&refused) < remaining(&first), "{:?}", refused.headers);
    // Another class has its own bucket and policy.
    let list = s.get("/orders", &s.token).await;
    assert_eq!(header(&list, "ratelimit-policy"), "\"other\";q=50;w=50");
    let health = s.http.get(format!("{}/healthz", s.base)).send().await.unwrap();
    assert!(health.headers().get("ratelimit").is_none());
}
