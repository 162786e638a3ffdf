//! Regression tests for the defects a hostile tester found in the client API core (issue 6):
//! each fails on the code before its fix. Over real HTTP (raw TCP where the HTTP client would
//! hide the behaviour) or through the real binary.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::common::{ADMIN_TOKEN, TestServer, assert_envelope, cents, request, request_with_codes};
use serde_json::{Value, json};

/// Sends a body as given (not re-serialised), with optional extra headers.
async fn post_raw(
    s: &TestServer,
    path: &str,
    token: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> crate::common::Reply {
    let mut req =
        s.http.post(s.url(path)).bearer_auth(token).header("Content-Type", "application/json").body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    s.send(req).await
}

/// Defect 1: a body that a typed parse accepts but a value parse refuses used to get the
/// fingerprint of an empty body, so a different order replayed the first one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_never_replays_a_different_order() {
    let s = TestServer::start().await;
    for (junk, path) in
        [("1e400".to_string(), "meta"), (format!("{}{}", "[".repeat(200), "]".repeat(200)), "meta.0.0.0")]
    {
        let key = format!("order-{}", junk.len());
        let mut bodies = Vec::new();
        for receiver in ["Jane Doe", "John Roe"] {
            let mut b = request(&[500.0]);
            b["drop_offs"][0]["address"]["person_name"] = json!(receiver);
            let text = b.to_string();
            bodies.push(format!("{},\"meta\":{junk}}}", &text[..text.len() - 1]));
        }
        for body in &bodies {
            let r = post_raw(&s, "/requests/sync", &s.token, body, &[("Idempotency-Key", &key)]).await;
            assert_envelope(&r, 400);
            assert!(!r.headers.contains_key("idempotent-replayed"));
            let at = r.body["errors"].as_object().unwrap().keys().next().unwrap().clone();
            assert!(at.starts_with(path), "{at} / {}", r.body);
        }
    }
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0, "nothing was created");
    // The same receiver change without the junk is two different orders under two keys, and
    // the same key with the second body is a 409, not a replay.
    let mut b = request(&[500.0]);
    let r = post_raw(&s, "/requests/sync", &s.token, &b.to_string(), &[("Idempotency-Key", "k")]).await;
    assert_eq!(r.status, 201, "{}", r.body);
    b["drop_offs"][0]["address"]["person_name"] = json!("John Roe");
    let r = post_raw(&s, "/requests/sync", &s.token, &b.to_string(), &[("Idempotency-Key", "k")]).await;
    assert_envelope(&r, 409);
}

/// Defect 5: errors in the integrator's words, at the field's own path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_speak_json_not_rust() {
    let s = TestServer::start().await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut b = request(&[500.0]);
        f(&mut b);
        b.to_string()
    };
    let cases = [
        (with(&|b| b["pick_up_address"] = json!("x")), "pick_up_address", "Must be an object, not a string."),
        (
            with(&|b| b["pick_up_address"] = json!(["100 King St W M5X 1A9"])),
            "pick_up_address",
            "Must be an object, not an array.",
        ),
        (
            with(&|b| b["drop_offs"][0]["parcels"][0]["values"] = json!("5")),
            "drop_offs.0.parcels.0.values",
            "Must be a number, not a string.",
        ),
        (
            with(&|b| b["pick_up_address"]["saved_address_id"] = json!(1.5)),
            "pick_up_address.saved_address_id",
            "Must be an integer, not a decimal number.",
        ),
        (with(&|b| b["drop_offs"] = json!({})), "drop_offs", "Must be an array, not an object."),
        ("[]".to_string(), "body", "Must be an object, not an array."),
        ("[[1]]".to_string(), "body", "Must be an object, not an array."),
    ];
    for (body, path, message) in cases {
        let r = post_raw(&s, "/requests/preview", &s.token, &body, &[]).await;
        assert_envelope(&r, 400);
        assert_eq!(r.error_at(path), vec![message.to_string()], "{body}");
        let text = r.body.to_string();
        assert!(!text.contains("struct") && !text.contains("i64") && !text.contains("f64"), "{text}");
    }
    // A duplicated key is named at its path.
    let dup = request(&[500.0]).to_string().replacen("\"text\":", "\"text\":\"M5V 3L9\",\"text\":", 1);
    let r = post_raw(&s, "/requests/preview", &s.token, &dup, &[]).await;
    assert_envelope(&r, 400);
    assert_eq!(r.body["message"], "A key appears more than once in an object.");
    assert_eq!(r.body["errors"].as_object().unwrap().len(), 1, "{}", r.body);
    assert!(
        r.body["errors"].as_object().unwrap().keys().all(|k| k.split('.').next_back() == Some("text")),
        "{}",
        r.body
    );
    // 401 says how to authenticate.
    let r = s.send(s.http.post(s.url("/requests/preview")).json(&request(&[500.0]))).await;
    assert_envelope(&r, 401);
    assert_eq!(r.headers["www-authenticate"], "Bearer realm=\"dropslot\"");
    // Headers that must come once.
    let r = s
        .send(
            s.http
                .post(s.url("/requests/preview"))
                .header("Authorization", format!("Bearer {}", s.token))
                .header("Authorization", "Bearer someone-else")
                .json(&request(&[500.0])),
        )
        .await;
    assert_envelope(&r, 400);
    r.error_at("header.Authorization");
    let r = s
        .send(
            s.http
                .post(s.url("/requests/sync"))
                .bearer_auth(&s.token)
                .header("Idempotency-Key", "a")
                .header("Idempotency-Key", "b")
                .json(&request(&[500.0])),
        )
        .await;
    assert_envelope(&r, 400);
    r.error_at("header.Idempotency-Key");
    // A compressed body is refused, not parsed as JSON.
    let r = post_raw(&s, "/requests/preview", &s.token, "{}", &[("Content-Encoding", "gzip")]).await;
    assert_envelope(&r, 415);
    assert!(r.body["message"].as_str().unwrap().contains("Content-Encoding"));
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0);
}

/// Issue 27: a request whose headers say two things is refused, never served by its first
/// value: two `Content-Type`s (differing or equal), and two differing `Content-Length`s,
/// which close the connection, since where the body ends is in doubt. (Equal ones are one
/// length, as RFC 9112 §6.3 allows: hyper reads them as one value.) Nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_headers_are_refused() {
    let s = TestServer::start().await;
    let body = request(&[500.0]).to_string();
    for second in ["text/plain", "application/json"] {
        let r = post_raw(&s, "/requests/sync", &s.token, &body, &[("Content-Type", second)]).await;
        assert_envelope(&r, 400);
        r.error_at("header.Content-Type");
    }
    let mut c = connect(&s);
    write!(
        c,
        "POST /scheduled-service/api/v1/requests/sync HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {n}\r\nContent-Length: {m}\r\n\r\n{body}",
        s.token,
        n = body.len(),
        m = body.len() - 1
    )
    .unwrap();
    let (response, _) = read_until_closed(&mut c, Duration::from_secs(5));
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    assert!(response.to_ascii_lowercase().contains("connection: close"), "{response}");
    assert_eq!(body_of(&response)["status"], "error", "{response}");
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0);
}

/// Defect 6 and `docs/api.md` "Checks run in this order": a request that fails several
/// checks is answered by the first of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_run_in_the_documented_order() {
    let s = TestServer::start().await;
    let (_, _, _, ops) = s.new_client("Order").await;
    let send = |path: &str, token: Option<&str>, content_type: &str, body: String, key: Option<&str>| {
        let mut req = s.http.post(s.url(path)).header("Content-Type", content_type).body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        s.send(req)
    };
    // Requests that declare a 2 MiB body and send none: every check before the body read must
    // answer without waiting for it (raw TCP, so no client is left writing a refused body).
    let declared = |path: &str, token: Option<&str>, content_type: &str| {
        let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        let head = format!(
            "POST {}{path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: {content_type}\r\nContent-Length: 2097152\r\n\r\n",
            crate::common::API
        );
        let mut c = connect(&s);
        c.write_all(head.as_bytes()).unwrap();
        let (status, body) = read_response(&mut c);
        assert_eq!(body["code"], status, "{body}");
        status
    };
    // 1. route, before the token.
    assert_eq!(declared("/nowhere", None, "text/plain"), 404);
    // 2. token, before the media type and size.
    assert_eq!(declared("/requests/sync", None, "text/plain"), 401);
    // 3. token kind, before the body is looked at (an ops token gets nothing read).
    assert_eq!(declared("/requests/sync", Some(&ops), "text/plain"), 403);
    // 4. media type, then size (from the declared length), then JSON.
    assert_eq!(declared("/requests/sync", Some(&s.token), "text/plain"), 415);
    assert_eq!(declared("/requests/sync", Some(&s.token), "application/json"), 413);
    assert_envelope(&send("/requests/sync", Some(&s.token), "application/json", "{".into(), Some("\tk")).await, 400);
    // 5. the Idempotency-Key (a tab is not printable), before validation.
    let r = send("/requests/sync", Some(&s.token), "application/json", "{}".into(), Some("a\tb")).await;
    assert_envelope(&r, 422);
    assert_eq!(r.body["errors"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["header.Idempotency-Key"]);
    // 6. validation.
    let r = send("/requests/sync", Some(&s.token), "application/json", "{}".into(), Some("k")).await;
    assert_envelope(&r, 422);
    r.error_at("pick_up_address");
    // The admin API reads `Authorization` like the client API: the scheme is case-insensitive.
    let r = s
        .send(
            s.http
                .post(s.url("/admin/clients"))
                .header("Authorization", format!("bearer {ADMIN_TOKEN}"))
                .json(&json!({"name": "Lower"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// Defect 6: a weight just over a size limit is over it (no rounding to the milligram first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_just_over_a_limit_are_over_it() {
    let s = TestServer::start().await;
    let r = s.preview(&request(&[25_000.000_1])).await;
    assert_envelope(&r, 422);
    r.error_at("drop_offs.0.parcels.0.values");
    let r = s.preview(&request(&[2_000.000_1, 25_000.0])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let parcels = r.body["object"]["pick_ups"][0]["drop_offs"][0]["parcels"].as_array().expect("parcels");
    let sizes: Vec<&str> = parcels.iter().map(|p| p["parcel_size_code"].as_str().unwrap()).collect();
    assert_eq!(sizes, ["medium", "xlarge"]);
}

/// Defect 4: an amount the admin API accepts can never turn its client into 500s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_settings_that_are_accepted_read_back() {
    let s = TestServer::start().await;
    let (id, test, _, _) = s.new_client("Big spender").await;
    let settings = |min: Value, price: Value| {
        json!({"pricing": {"min_price": min, "payment_type": {"id": 1, "code": "invoice", "name": "Monthly invoice"},
            "sizes": [{"code": "small", "name": "Small", "max_grams": 25000, "price": price, "note": "Any"}]}})
    };
    let put = |body: Value| {
        s.send(s.http.put(s.url(&format!("/admin/clients/{id}/settings"))).bearer_auth(ADMIN_TOKEN).json(&body))
    };
    let r = put(settings(json!("10000000000.03"), json!("9.00"))).await;
    assert_envelope(&r, 422);
    r.error_at("pricing.min_price");
    let r = put(settings(json!("45.00"), json!(90_000_000_000_000_000_u64))).await;
    assert_envelope(&r, 422);
    r.error_at("pricing.sizes.0.price");
    let r = put(settings(json!("45.001"), json!("9.00"))).await;
    assert_envelope(&r, 422);
    // The client still works: nothing was stored.
    assert_eq!(s.post("/requests/preview", &test, &request(&[500.0])).await.status, 200);
    // The largest amounts are accepted, read back and priced exactly.
    let r = put(settings(json!(999_999.99), json!("1000000.00"))).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = s.post("/requests/preview", &test, &request(&[500.0, 500.0])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(cents(&r.body["object"]["actual_total_price"]), 200_000_000);
    assert_eq!(cents(&r.body["object"]["min_price"]), 99_999_999);
}

/// Defect 7: with a negotiated drop-off limit above 1, the order charges what its preview
/// quoted: the minimum price applies once per order, also after a deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_charges_what_its_preview_quoted() {
    let s = TestServer::start().await;
    let (id, test, _, _) = s.new_client("Multi").await;
    let limits = json!({"limits": {"order_drop_offs": 3, "order_parcels_per_drop_off": 5, "preview_drop_offs": 100, "preview_parcels_per_drop_off": 50}});
    let r = s
        .send(s.http.put(s.url(&format!("/admin/clients/{id}/settings"))).bearer_auth(ADMIN_TOKEN).json(&limits))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut body = request_with_codes(&["AAAAAAAAAAAAAAAA01"]);
    let second = json!({"address": body["drop_offs"][0]["address"].clone(), "parcels": [{"unit": "kg", "values": 3, "custom_code": "AAAAAAAAAAAAAAAA02"}]});
    body["drop_offs"].as_array_mut().unwrap().push(second);
    let preview = s.post("/requests/preview", &test, &body).await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    let p = &preview.body["object"];
    let order = s.post("/requests/sync", &test, &body).await;
    assert_eq!(order.status, 201, "{}", order.body);
    let shipments = order.body["object"]["shipments"].as_array().unwrap();
    assert_eq!(shipments.len(), 2);
    for field in [
        "actual_total_price",
        "actual_total_tax",
        "actual_price_with_tax",
        "total_price",
        "total_tax",
        "price_with_tax",
    ] {
        let sum: i64 = shipments.iter().map(|sh| cents(&sh[field])).sum();
        assert_eq!(sum, cents(&p[field]), "{field}: the order charges what the preview quoted");
    }
    assert_eq!(cents(&p["total_price"]), 4500, "9.00 + 12.00 is under the minimum");
    // Deleting one drop-off's only parcel leaves the other carrying the whole minimum.
    assert_eq!(s.delete_parcel("AAAAAAAAAAAAAAAA01", &test).await.status, 200);
    assert_eq!(s.scalar("SELECT sum(total_price) FROM shipment_orders"), 4500);
    assert_eq!(s.scalar("SELECT sum(price_with_tax) FROM shipment_orders"), 5085);
    assert_eq!(s.delete_parcel("AAAAAAAAAAAAAAAA02", &test).await.status, 200);
    assert_eq!(s.scalar("SELECT sum(price_with_tax) FROM shipment_orders"), 0, "a deleted order is not charged");
}

/// Defect 7: a drop-off city's own weekdays are honoured: a Monday pick-up whose drop-off
/// city does not operate on Mondays is booked on Tuesday, for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_off_cities_are_booked_on_days_they_operate() {
    let slots = |prefix: &str| {
        format!(
            "[[zones.drop_off_slots]]\ncode = \"{prefix}-PM\"\nname = \"14:00 - 18:00\"\nfrom_time = 840\nto_time = 1080\nclosing_margin = 0\n"
        )
    };
    let city = |code: &str, name: &str, weekdays: &str| {
        format!(
            "[[cities]]\ncode = \"{code}\"\nname = \"{name}\"\nregion = \"ON\"\ntime_zone = \"America/Toronto\"\nweekdays = {weekdays}\nholidays = []\n\n[[cities.pick_up_slots]]\ncode = \"{code}-AM\"\nname = \"09:00 - 12:00\"\nfrom_time = 540\nto_time = 720\nclosing_margin = 60\n\n"
        )
    };
    let fragment = format!(
        "{}{}[[zones]]\ncode = \"TOR-DT\"\ncity = \"toronto\"\nwarehouse = \"YYZ1\"\npostal_prefixes = [\"M5\"]\n\n{}\n[[zones]]\ncode = \"MIS\"\ncity = \"mississauga\"\nwarehouse = \"YYZ3\"\npostal_prefixes = [\"L5\"]\n\n{}",
        city("toronto", "Toronto", r#"["mon", "tue", "wed", "thu", "fri", "sat"]"#),
        city("mississauga", "Mississauga", r#"["tue", "wed", "thu", "fri", "sat"]"#),
        slots("TOR"),
        slots("MIS"),
    );
    let s = TestServer::start_with(&fragment).await;
    let r = s.preview(&request(&[500.0])).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["pick_ups"][0]["scheduled_date"], "2026-11-23", "Monday, within Toronto");
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["text"] = json!("100 City Centre Dr, Mississauga, ON L5B 2C9");
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let pu = &r.body["object"]["pick_ups"][0];
    assert_eq!(pu["scheduled_date"], "2026-11-24", "{pu}");
    assert_eq!(pu["drop_offs"][0]["scheduled_date"], "2026-11-24", "{pu}");
}

// ---- connections, readiness and the binary ---------------------------------------------

/// Reads from a raw connection until the server closes it; returns what arrived and how
/// long it took. Bounded by `limit`: a connection still open then is a failure.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let start = Instant::now();
    stream.set_read_timeout(Some(limit)).expect("timeout");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "connection still open after {:?}: {e}; read so far: {}",
                start.elapsed(),
                String::from_utf8_lossy(&out)
            ),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

/// Reads one response (head and `content-length` body) without waiting for the connection
/// to close; returns its status and JSON body.
fn read_response(c: &mut TcpStream) -> (u64, Value) {
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = c.read(&mut buf).expect("a response within 5 s");
        assert!(n > 0, "closed before a whole response: {}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse::<usize>().unwrap())
                })
                .expect("content-length");
            if body.len() >= length {
                let status = head[9..12].parse().unwrap();
                return (status, serde_json::from_str(&body[..length]).unwrap());
            }
        }
    }
}

fn connect(s: &TestServer) -> TcpStream {
    TcpStream::connect(s.base.trim_start_matches("http://")).expect("connect")
}

fn body_of(response: &str) -> Value {
    serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap_or("")).unwrap_or(Value::Null)
}

const FAST: &str = "[server]\nheader_read_timeout_seconds = 1\nbody_read_timeout_seconds = 1\nrequest_timeout_seconds = 5\nidle_timeout_seconds = 1\n";
/// Idle longer than the header timeout, so a trickled head must be cut at the latter.
const SLOW_IDLE: &str = "[server]\nheader_read_timeout_seconds = 1\nbody_read_timeout_seconds = 1\nrequest_timeout_seconds = 5\nidle_timeout_seconds = 3\n";

/// Defect 2: idle, trickled and over-declared connections are closed within their timeouts,
/// while normal requests keep being answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_others_are_served() {
    let s = TestServer::start_with(SLOW_IDLE).await;
    let limit = Duration::from_secs(6);
    let normal = async {
        // Normal requests keep working the whole time.
        for _ in 0..10 {
            let r = s.preview(&request(&[500.0])).await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    };
    let slow = {
        let base = s.base.clone();
        let token = s.token.clone();
        tokio::task::spawn_blocking(move || {
            let addr = base.trim_start_matches("http://").to_string();
            let open = || TcpStream::connect(&addr).expect("connect");
            let t0 = Instant::now();
            // A crowd of silent connections: all closed after the idle timeout.
            let mut idle: Vec<TcpStream> = (0..50).map(|_| open()).collect();
            // A body shorter than its Content-Length: 408 with the envelope, then closed.
            let mut short = open();
            write!(short, "POST /scheduled-service/api/v1/requests/preview HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"pick").unwrap();
            // A kept-alive connection after one answered request.
            let mut kept = open();
            write!(kept, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();

            // Every deadline is measured from t0, when all of them had started.
            // Headers trickled a byte at a time, never finished. After each byte, wait up to
            // 100 ms for the condition under test: the server closing the connection.
            let mut trickle = open();
            trickle.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            let head = b"POST /scheduled-service/api/v1/requests/preview HTTP/1.1\r\nHost: x\r\nX-Slow: ";
            let mut closed = false;
            for b in head.iter().cycle().take(60) {
                let mut buf = [0u8; 64];
                closed = match trickle.write_all(&[*b]).and_then(|()| trickle.read(&mut buf)) {
                    Ok(0) => true,
                    Ok(n) => panic!("answered a trickled head: {}", String::from_utf8_lossy(&buf[..n])),
                    Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
                };
                if closed {
                    break;
                }
            }
            assert!(closed, "still open after 60 trickled bytes");
            assert!(t0.elapsed() < Duration::from_millis(2_500), "cut off while still trickling: {:?}", t0.elapsed());
            let (text, _) = read_until_closed(&mut short, limit);
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
            assert_eq!(body_of(&text)["code"], 408, "{text}");
            assert!(text.to_ascii_lowercase().contains("x-request-id:"), "{text}");
            assert!(t0.elapsed() < Duration::from_millis(2_500), "{:?}", t0.elapsed());
            let (text, _) = read_until_closed(&mut kept, limit);
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            let kept_for = t0.elapsed();
            assert!(kept_for > Duration::from_millis(2_500), "kept alive for the idle timeout (3 s): {kept_for:?}");
            for c in &mut idle {
                let (text, _) = read_until_closed(c, limit);
                assert!(text.is_empty());
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        })
    };
    let ((), slow) = tokio::join!(normal, slow);
    slow.expect("slow clients");
    // And the server still answers afterwards.
    assert_eq!(s.preview(&request(&[500.0])).await.status, 200);
}

/// Defect 2: connections over the cap are answered 503 with the envelope, not left hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_503() {
    let s = TestServer::start_with(&format!("{FAST}max_connections = 3\n")).await;
    let held: Vec<TcpStream> = (0..3).map(|_| connect(&s)).collect();
    // The three are accepted in order; the fourth finds no room.
    let mut extra = connect(&s);
    let (text, _) = read_until_closed(&mut extra, Duration::from_secs(3));
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert_eq!(body_of(&text)["code"], 503);
    assert!(text.contains("retry-after: 1"), "{text}");
    drop(held);
}

/// Defect 8: requests hyper cannot parse are answered with the envelope and a request id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_errors_carry_the_envelope() {
    let s = TestServer::start_with(FAST).await;
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    // More headers than hyper takes (100): refused whatever way the bytes arrive. (One huge
    // header is not deterministic: hyper's adaptive reads may take it whole before checking.)
    let many = (0..150).fold(String::new(), |mut h, i| {
        let _ = write!(h, "X-H{i}: v\r\n");
        h
    });
    let big_headers = format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n");
    let malformed = "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".to_string();
    for (request, code) in [(long_uri, 414_u16), (big_headers, 431), (malformed, 400)] {
        let mut c = connect(&s);
        let _ = c.write_all(request.as_bytes());
        let (text, _) = read_until_closed(&mut c, Duration::from_secs(3));
        assert!(text.starts_with(&format!("HTTP/1.1 {code} ")), "{code}: {}", &text[..text.len().min(200)]);
        let body = body_of(&text);
        assert_eq!((body["status"].as_str(), body["code"].as_u64()), (Some("error"), Some(u64::from(code))), "{text}");
        assert!(text.contains("\r\nx-request-id: "), "{text}");
    }
    // The connection handling still serves well-formed requests.
    assert_eq!(s.preview(&request(&[500.0])).await.status, 200);
}

/// Defect 3: while another process holds the database's write lock, writes answer 503 (not
/// 500) and `/readyz` says not ready; it is ready again by itself once writes succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_readiness_follows_whether_the_database_takes_writes() {
    let s = TestServer::start().await;
    assert_eq!(s.get("/readyz", "").await.status, 200);
    // SQLite only: another connection takes the file's write lock.
    let Some(lock) = s.sqlite_file() else { return };
    lock.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let r = s.get("/readyz", "").await;
    assert_envelope(&r, 503);
    let r = s.order(&request(&[500.0])).await;
    assert_envelope(&r, 503);
    assert_eq!(r.headers["retry-after"], "1");
    lock.execute_batch("ROLLBACK").expect("unlock");
    let r = s.get("/readyz", "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.order(&request(&[500.0])).await.status, 201);
}

/// Defect 3: the port answers 503 "starting" (and `/healthz` 200) while the store is still
/// being opened and migrated, then serves. `SQLite` only: a second connection holds the file's
/// write lock so that migrations wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_port_answers_503_while_starting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    // Another process holds the write lock, so migrations wait for it.
    let lock = rusqlite::Connection::open(&path).unwrap();
    lock.execute_batch(
        "PRAGMA journal_mode = WAL; CREATE TABLE other (x); BEGIN EXCLUSIVE; INSERT INTO other VALUES (1);",
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let overrides = dropslot_core::config::Overrides {
        database: Some(format!("sqlite://{}", path.display())),
        now: Some(crate::common::NOW.into()),
        ..Default::default()
    };
    let settings = dropslot::Settings::from_toml_fragment("", &overrides).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let starting = tokio::spawn(dropslot::start(settings, listener, async move {
        let _ = tokio::time::timeout(Duration::from_secs(60), stopped).await;
    }));
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}{}/requests/preview", crate::common::API))
        .json(&request(&[500.0]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    assert!(r.headers().contains_key("x-request-id"));
    let body: Value = r.json().await.unwrap();
    assert_eq!((body["status"].as_str(), body["code"].as_u64()), (Some("error"), Some(503)));
    assert_eq!(http.get(format!("{base}/healthz")).send().await.unwrap().status(), 200);
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(ready.headers()["retry-after"], "1", "a load balancer learns when to look again");
    lock.execute_batch("COMMIT").unwrap();
    let running = starting.await.unwrap().expect("started once the lock is released");
    let (_, token) = running.demo.clone().unwrap();
    let r = http
        .post(format!("{base}{}/requests/preview", crate::common::API))
        .bearer_auth(token)
        .json(&request(&[500.0]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(http.get(format!("{base}/readyz")).send().await.unwrap().status(), 200);
    let _ = stop.send(());
    running.finished().await;
}

fn binary(args: &[&str], as_nobody: bool) -> std::process::Output {
    let exe = env!("CARGO_BIN_EXE_dropslot");
    let mut cmd = if as_nobody {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", exe]);
        c
    } else {
        std::process::Command::new(exe)
    };
    cmd.args(args).env_remove("DATABASE_URL").env("DROPSLOT_NOW", crate::common::NOW).output().expect("run dropslot")
}

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Defect 3: `serve` refuses to start, with one line, on a database it cannot write.
#[test]
fn serve_refuses_a_database_it_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let url = format!("sqlite://{}", path.display());
    let o = binary(&["--database", &url, "migrate"], false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Read-only for whoever runs serve: as root (root ignores file modes) run it as nobody.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = binary(&["--database", &url, "serve", "--listen", "127.0.0.1:0"], is_root());
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(o.status.code(), Some(1), "stdout: {}", String::from_utf8_lossy(&o.stdout));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("dropslot:")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("cannot write to the database")
            || lines[0].contains("readonly")
            || lines[0].contains("unable to open"),
        "{stderr}"
    );
}

/// Defect 6: a sqlite URL with a query string is refused (no file named `d.db?mode=ro`), and
/// a path that is not a regular file leaves nothing behind.
#[test]
fn database_urls_that_cannot_mean_a_file_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/d.db?mode=ro", dir.path().display());
    let o = binary(&["--database", &url, "migrate"], false);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("query string"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file was created");
    let journal = std::path::Path::new("/dev/null-journal");
    if journal.exists() && is_root() {
        let _ = std::fs::remove_file(journal);
    }
    let had = journal.exists();
    let o = binary(&["--database", "sqlite:///dev/null", "migrate"], false);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a regular file"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(had || !journal.exists(), "left /dev/null-journal behind");
}

/// Issue 27: a client that writes its whole body before reading (Python's urllib and many
/// HTTP libraries) gets the early refusal's envelope, not a broken pipe: the server reads
/// and discards what is still in flight before it closes (a lingering close). A 2 MiB body
/// refused at once for its declared length (413), for its missing token (401) and for its
/// media type (415), several times each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_refusal_reaches_a_client_that_sends_its_whole_body_first() {
    let s = TestServer::start().await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let token = s.token.clone();
    let cases: [(&str, &str, u16); 3] = [
        ("Authorization: Bearer TOKEN\r\nContent-Type: application/json\r\n", "413", 413),
        ("Content-Type: application/json\r\n", "401", 401),
        ("Authorization: Bearer TOKEN\r\nContent-Type: text/plain\r\n", "415", 415),
    ];
    tokio::task::spawn_blocking(move || {
        let body = vec![b' '; 2 << 20];
        for (headers, name, status) in cases {
            for attempt in 0..4 {
                let mut c = TcpStream::connect(&addr).unwrap();
                c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                let head = format!(
                    "POST /scheduled-service/api/v1/requests/sync HTTP/1.1\r\nHost: x\r\n{}Content-Length: {}\r\n\r\n",
                    headers.replace("TOKEN", &token),
                    body.len()
                );
                c.write_all(head.as_bytes()).unwrap();
                // The whole body before reading a byte, as urllib does.
                c.write_all(&body).unwrap_or_else(|e| panic!("{name}, attempt {attempt}: writing the body: {e}"));
                let (response, _) = read_until_closed(&mut c, Duration::from_secs(10));
                assert!(response.starts_with(&format!("HTTP/1.1 {status}")), "{name}, attempt {attempt}: {response:?}");
                assert_eq!(body_of(&response)["code"], status, "{response}");
            }
        }
    })
    .await
    .unwrap();
}

/// Issue 47 item 2: a body over each limited route's limit by 1 MB, written whole before a
/// byte is read, gets its 413 every time (20 tries a route): the lingering close reads up to
/// twice the largest limit any route takes (a 5 MiB proof), not a fixed 4 MiB that left the
/// end of a 6 MB proof unread and the client with a broken pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_a_megabyte_over_each_routes_limit_gets_its_413_from_a_client_that_writes_first() {
    let s = TestServer::start().await;
    let op = crate::driver_api::operator(&s).await;
    let (_, driver) = crate::driver_api::driver(&s, &op, "Ana").await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let routes: [(String, String, usize); 2] = [
        (
            "/scheduled-service/api/v1/requests/sync".into(),
            format!("Authorization: Bearer {}\r\nContent-Type: application/json\r\n", s.token),
            1_048_576,
        ),
        (
            "/scheduled-service/api/v1/driver/proofs".into(),
            format!("Authorization: Bearer {driver}\r\nContent-Type: image/png\r\nIdempotency-Key: big\r\n"),
            5 * 1024 * 1024,
        ),
    ];
    tokio::task::spawn_blocking(move || {
        for (path, headers, limit) in routes {
            let body = vec![b' '; limit + 1_000_000];
            for attempt in 0..20 {
                let mut c = TcpStream::connect(&addr).unwrap();
                c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                let head =
                    format!("POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: {}\r\n\r\n", body.len());
                c.write_all(head.as_bytes()).unwrap();
                c.write_all(&body).unwrap_or_else(|e| panic!("{path}, attempt {attempt}: writing the body: {e}"));
                let (response, _) = read_until_closed(&mut c, Duration::from_secs(10));
                assert!(response.starts_with("HTTP/1.1 413"), "{path}, attempt {attempt}: {response:?}");
                assert_eq!(body_of(&response)["code"], 413, "{response}");
            }
        }
    })
    .await
    .unwrap();
}
