//! Every validation and error path answers with the CONTRACT envelope, the right status and
//! the field path — and writes nothing.

use crate::common::{TestServer, assert_envelope, request, request_with_codes};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_validation_rule_answers_422_at_its_path() {
    let s = TestServer::start().await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut b = request(&[500.0]);
        f(&mut b);
        b
    };
    let long = "x".repeat(501);
    // (body, path, endpoint: true = sync only)
    let cases: Vec<(Value, &str, bool)> = vec![
        (json!({"drop_offs": request(&[1.0])["drop_offs"]}), "pick_up_address", false),
        (json!({"pick_up_address": {"text": crate::common::PICK_UP}}), "drop_offs", false),
        (with(&|b| b["drop_offs"] = json!([])), "drop_offs", false),
        (with(&|b| b["pick_up_address"]["text"] = json!("")), "pick_up_address.text", false),
        (with(&|b| b["pick_up_address"]["text"] = json!(long)), "pick_up_address.text", false),
        (with(&|b| b["pick_up_address"]["text"] = json!("somewhere nice")), "pick_up_address.text", false),
        (with(&|b| b["pick_up_address"]["text"] = json!("Vancouver BC V6B 1A1")), "pick_up_address.text", false),
        (
            with(&|b| b["drop_offs"][0]["address"]["text"] = json!("New York, NY 10001")),
            "drop_offs.0.address.text",
            false,
        ),
        (with(&|b| b["drop_offs"][0]["address"] = Value::Null), "drop_offs.0.address", false),
        (with(&|b| b["drop_offs"][0]["parcels"] = json!([])), "drop_offs.0.parcels", false),
        (with(&|b| b["drop_offs"][0]["parcels"][0]["unit"] = json!("stone")), "drop_offs.0.parcels.0.unit", false),
        (with(&|b| b["drop_offs"][0]["parcels"][0]["unit"] = Value::Null), "drop_offs.0.parcels.0.unit", false),
        (with(&|b| b["drop_offs"][0]["parcels"][0]["values"] = json!(0)), "drop_offs.0.parcels.0.values", false),
        (with(&|b| b["drop_offs"][0]["parcels"][0]["values"] = json!(-5)), "drop_offs.0.parcels.0.values", false),
        (with(&|b| b["drop_offs"][0]["parcels"][0]["values"] = Value::Null), "drop_offs.0.parcels.0.values", false),
        (with(&|b| b["drop_offs"][0]["parcels"][0]["values"] = json!(30_000)), "drop_offs.0.parcels.0.values", false),
        (
            with(&|b| b["drop_offs"][0]["parcels"][0]["custom_code"] = json!("SHORT123")),
            "drop_offs.0.parcels.0.custom_code",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["parcels"][0]["custom_code"] = json!("A".repeat(21))),
            "drop_offs.0.parcels.0.custom_code",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["parcels"][0]["custom_code"] = json!("ABCDEFGH-1234567")),
            "drop_offs.0.parcels.0.custom_code",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["parcels"][0]["custom_code"] = json!("ÄBCDEFGH12345678")),
            "drop_offs.0.parcels.0.custom_code",
            false,
        ),
        (request_with_codes(&["ABCDEFGH12345678", "ABCDEFGH12345678"]), "drop_offs.0.parcels.1.custom_code", false),
        (with(&|b| b["drop_offs"][0]["address"]["person_name"] = Value::Null), "drop_offs.0.address.person_name", true),
        (
            with(&|b| b["drop_offs"][0]["address"]["person_phone"] = json!("  ")),
            "drop_offs.0.address.person_phone",
            true,
        ),
        (
            with(&|b| b["drop_offs"][0]["address"]["person_phone"] = json!("12-34")),
            "drop_offs.0.address.person_phone",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["address"]["person_phone"] = json!("+1 416 555 0100 x7")),
            "drop_offs.0.address.person_phone",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["address"]["person_email"] = json!("jane@")),
            "drop_offs.0.address.person_email",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["address"]["sender_person_email"] = json!("a b@c.d")),
            "drop_offs.0.address.sender_person_email",
            false,
        ),
        (
            with(&|b| b["drop_offs"][0]["address"]["sender_person_phone"] = json!("phone")),
            "drop_offs.0.address.sender_person_phone",
            false,
        ),
        (with(&|b| b["pick_up_address"] = json!({"saved_address_id": 999})), "pick_up_address.saved_address_id", false),
        // Order creation limits (interface Limits table): 1 drop-off, 1–5 parcels.
        (
            with(&|b| {
                let d = b["drop_offs"][0].clone();
                b["drop_offs"] = json!([d.clone(), d]);
            }),
            "drop_offs",
            true,
        ),
        (request(&[500.0; 6]), "drop_offs.0.parcels", true),
    ];
    for (i, (body, path, sync_only)) in cases.iter().enumerate() {
        let r = s.order(body).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at(path).is_empty(), "case {i}: {path}: {}", r.body);
        let r = s.preview(body).await;
        if *sync_only {
            assert_eq!(r.status, 200, "case {i}: preview accepts what only an order needs: {}", r.body);
        } else {
            assert_envelope(&r, 422);
            assert!(!r.error_at(path).is_empty(), "case {i} (preview): {path}: {}", r.body);
        }
    }
    let r = s.order(&cases[29].0).await;
    assert!(r.error_at("drop_offs")[0].contains("asynchronous"), "names the asynchronous endpoint");
    // Several problems at once are all reported.
    let mut b = request(&[0.0, 500.0]);
    b["drop_offs"][0]["parcels"][1]["unit"] = json!("ton");
    b["pick_up_address"]["text"] = json!("");
    let r = s.order(&b).await;
    for p in ["pick_up_address.text", "drop_offs.0.parcels.0.values", "drop_offs.0.parcels.1.unit"] {
        assert!(!r.error_at(p).is_empty());
    }
    // Preview limits: 100 drop-offs of 50 parcels.
    let mut big = request(&[500.0; 51]);
    let r = s.preview(&big).await;
    assert!(!r.error_at("drop_offs.0.parcels").is_empty());
    big["drop_offs"] = json!(vec![request(&[500.0])["drop_offs"][0].clone(); 101]);
    assert!(!s.preview(&big).await.error_at("drop_offs").is_empty());
    big["drop_offs"] = json!(vec![request(&[500.0; 50])["drop_offs"][0].clone(); 100]);
    assert_eq!(s.preview(&big).await.status, 200, "100 × 50 is within the preview limits");
    // Nothing was written by any of it.
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0);
    assert_eq!(s.scalar("SELECT count(*) FROM parcels"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_wrong_types_and_protocol_errors() {
    let s = TestServer::start().await;
    let url = s.url("/requests/sync");
    let post = |body: &'static str, ct: Option<&'static str>| {
        let mut rb = s.http.post(&url).bearer_auth(&s.token).body(body);
        if let Some(ct) = ct {
            rb = rb.header("content-type", ct);
        }
        rb
    };
    assert_envelope(&s.send(post("{\"pick_up_address\": ", Some("application/json"))).await, 400);
    assert_envelope(&s.send(post("[1,2]", Some("application/json"))).await, 400);
    assert_envelope(&s.send(post("{} {}", Some("application/json"))).await, 400);
    assert_envelope(&s.send(post("{}", Some("text/plain"))).await, 415);
    assert_envelope(&s.send(post("{}", None)).await, 415);
    // Wrong JSON types name their path.
    let mut b = request(&[500.0]);
    b["drop_offs"][0]["parcels"][0]["values"] = json!("heavy");
    let r = s.order(&b).await;
    assert_envelope(&r, 400);
    assert!(!r.error_at("drop_offs.0.parcels.0.values").is_empty());
    let mut b = request(&[500.0]);
    b["drop_offs"][0]["address"]["text"] = json!(42);
    assert!(!s.order(&b).await.error_at("drop_offs.0.address.text").is_empty());
    let r = s.order(&json!({"pick_up_address": {"text": crate::common::PICK_UP}, "drop_offs": {"a": 1}})).await;
    assert!(!r.error_at("drop_offs").is_empty());
    // Numbers too large for a double.
    let r =
        s.send(post(r#"{"drop_offs":[{"parcels":[{"unit":"g","values":1e999}]}]}"#, Some("application/json"))).await;
    assert_envelope(&r, 400);
    // Over the body limit.
    let big = format!("{{\"pick_up_address\":{{\"text\":\"{}\"}}}}", "x".repeat(1_100_000));
    let r = s.send(s.http.post(&url).bearer_auth(&s.token).header("content-type", "application/json").body(big)).await;
    assert_envelope(&r, 413);
    // Unknown routes and wrong methods.
    assert_envelope(&s.get("/nope", &s.token).await, 404);
    assert_envelope(&s.send(s.http.get(format!("{}/definitely/not/here", s.base))).await, 404);
    assert_envelope(&s.get("/requests/sync", &s.token).await, 405);
    assert_envelope(&s.send(s.http.put(s.url("/requests/preview")).bearer_auth(&s.token)).await, 405);
    assert_eq!(s.scalar("SELECT count(*) FROM orders"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_decide_who_may_call() {
    let s = TestServer::start().await;
    let body = request(&[500.0]);
    let preview = s.url("/requests/preview");
    assert_envelope(&s.send(s.http.post(&preview).json(&body)).await, 401);
    assert_envelope(&s.post("/requests/preview", "ds_test_not-a-real-token", &body).await, 401);
    assert_envelope(&s.send(s.http.post(&preview).header("authorization", "Basic abc").json(&body)).await, 401);
    assert_envelope(&s.send(s.http.post(&preview).header("authorization", "Bearer").json(&body)).await, 401);
    let (id, test, live, ops) = s.new_client("Acme").await;
    assert_eq!(s.post("/requests/preview", &test, &body).await.status, 200);
    assert_eq!(s.post("/requests/preview", &live, &body).await.status, 200);
    assert_envelope(&s.post("/requests/preview", &ops, &body).await, 403);
    // The token is judged before the body: an ops token with a broken body is still a 403.
    let broken = s.http.post(&preview).bearer_auth(&ops).header("content-type", "application/json").body("{");
    assert_envelope(&s.send(broken).await, 403);
    // Path parameters that do not parse name nothing: an enveloped 404, never plain text.
    assert_envelope(&s.get("/admin/clients/abc/tokens", crate::common::ADMIN_TOKEN).await, 404);
    assert_envelope(&s.get("/saved-addresses/not-a-number", &test).await, 404);
    // The admin token is a bearer token like any other (scheme case-insensitive).
    let r = s
        .send(
            s.http
                .get(s.url(&format!("/admin/clients/{id}/tokens")))
                .header("authorization", format!("bearer {}", crate::common::ADMIN_TOKEN)),
        )
        .await;
    assert_eq!(r.status, 200);
    // Listing shows prefixes and last four characters, never the token.
    let r = s.get(&format!("/admin/clients/{id}/tokens"), crate::common::ADMIN_TOKEN).await;
    let listed = r.body["object"]["tokens"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 3);
    assert!(!r.body.to_string().contains(&test), "a listing never shows a token");
    let prefix = listed[0]["prefix"].as_str().unwrap();
    assert!(test.starts_with(prefix) && test.ends_with(listed[0]["last4"].as_str().unwrap()));
    // Revoked → 401 at once.
    let r = s.delete(&format!("/admin/tokens/{prefix}"), crate::common::ADMIN_TOKEN).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_envelope(&s.post("/requests/preview", &test, &body).await, 401);
    assert_eq!(s.post("/requests/preview", &live, &body).await.status, 200, "other tokens unaffected");
    // The admin API needs the admin token; client tokens are not admin tokens.
    assert_envelope(&s.post("/admin/clients", &live, &json!({"name": "x"})).await, 401);
    assert_envelope(&s.post("/admin/clients", crate::common::ADMIN_TOKEN, &json!({"name": ""})).await, 422);
    assert_envelope(
        &s.post("/admin/clients/999/tokens", crate::common::ADMIN_TOKEN, &json!({"kind": "test"})).await,
        404,
    );
    assert_envelope(
        &s.post(&format!("/admin/clients/{id}/tokens"), crate::common::ADMIN_TOKEN, &json!({"kind": "root"})).await,
        422,
    );
    // Tokens are stored hashed: no token text anywhere in the database (SQLite: the file and
    // its WAL are searched byte for byte; PostgreSQL: every tokens row as text).
    match &s.db {
        crate::common::TestDb::Sqlite { path, .. } => {
            let raw = std::fs::read(path).unwrap();
            let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
            for t in [&test, &live, &ops, &s.token] {
                let needle = t.as_bytes();
                assert!(!raw.windows(needle.len()).any(|w| w == needle), "token stored in clear");
                assert!(!wal.windows(needle.len()).any(|w| w == needle), "token stored in clear (WAL)");
            }
        }
        crate::common::TestDb::Postgres { .. } => {
            for t in [&test, &live, &ops, &s.token] {
                let sql = format!("SELECT count(*) FROM tokens t WHERE strpos(t::text, '{t}') > 0");
                assert_eq!(s.db.scalar(&sql), 0, "token stored in clear");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_health_and_readiness() {
    let s = TestServer::start().await;
    let r = s.send(s.http.get(s.url("/healthz")).header("x-request-id", "trace-me-123")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-request-id"], "trace-me-123", "echoed");
    let a = s.send(s.http.get(s.url("/readyz"))).await;
    assert_eq!(a.status, 200);
    let b = s.send(s.http.get(s.url("/readyz"))).await;
    assert_ne!(a.headers["x-request-id"], b.headers["x-request-id"], "generated per request");
    assert_eq!(a.headers["x-request-id"].len(), 24);
}
