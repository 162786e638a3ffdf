//! The fleet (CONTRACT §12) from the outside: operator tokens from the admin API and the CLI,
//! drivers created, read, listed, changed, deleted and their sign-in links re-issued, every
//! driver rule at its path, and which token reaches what (401 for an unknown token, 403 for a
//! valid token of the wrong kind).

use serde_json::{Value, json};

use crate::cli::dropslot;
use crate::common::{ADMIN_TOKEN, Reply, TestServer, assert_envelope};

/// A new operator token through the admin API.
async fn operator(s: &TestServer) -> String {
    let r = s.send(s.http.post(s.url("/admin/operator-tokens")).bearer_auth(ADMIN_TOKEN)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["object"]["kind"], "operator");
    r.body["object"]["token"].as_str().expect("token").to_string()
}

fn driver_body() -> Value {
    json!({
        "name": "Sam Rivera",
        "phone": "+1 416 555 0199",
        "depot": "YYZ1",
        "vehicle": {"name": "Van 3", "capacity_parcels": 120, "capacity_kg": 800},
        "shift": {"start": "08:00", "end": "18:00"},
        "weekdays": ["fri", "mon", "tue"]
    })
}

async fn patch(s: &TestServer, path: &str, token: &str, body: &Value) -> Reply {
    s.send(s.http.patch(s.url(path)).bearer_auth(token).json(body)).await
}

/// The driver token in a sign-in link's fragment.
fn token_of(url: &str) -> String {
    let (_, token) = url.split_once("/driver#token=").unwrap_or_else(|| panic!("not a sign-in link: {url}"));
    assert!(token.starts_with("ds_driver_") && token.len() == 10 + 43, "{token}");
    token.to_string()
}

async fn create(s: &TestServer, operator: &str, body: &Value) -> Value {
    let r = s.post("/ops/drivers", operator, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_tokens_from_the_admin_api_are_listed_and_revoked() {
    let s = TestServer::start().await;
    let token = operator(&s).await;
    assert!(token.starts_with("ds_operator_") && token.len() == 12 + 43, "{token}");
    assert_eq!(s.get("/ops/drivers", &token).await.status, 200);
    let r = s.get("/admin/operator-tokens", ADMIN_TOKEN).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = &r.body["object"]["tokens"][0];
    let prefix = listed["prefix"].as_str().expect("prefix");
    assert!(token.starts_with(prefix) && token.ends_with(listed["last4"].as_str().expect("last4")), "{listed}");
    assert_eq!(listed["revoked_at"], Value::Null);
    assert!(!r.body.to_string().contains(&token), "a listing never shows a token");
    assert_eq!(s.scalar("SELECT count(*) FROM staff_tokens WHERE kind = 'operator'"), 1);
    // Only its hash is stored.
    assert_eq!(s.scalar(&format!("SELECT count(*) FROM staff_tokens WHERE prefix = '{token}'")), 0);
    // Without the admin token: 401 (a client or operator token is no admin token).
    assert_envelope(&s.get("/admin/operator-tokens", &token).await, 401);
    let r = s.delete(&format!("/admin/tokens/{prefix}"), ADMIN_TOKEN).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_envelope(&s.get("/ops/drivers", &token).await, 401);
    assert_envelope(&s.delete(&format!("/admin/tokens/{prefix}"), ADMIN_TOKEN).await, 404);
    let r = s.get("/admin/operator-tokens", ADMIN_TOKEN).await;
    assert!(r.body["object"]["tokens"][0]["revoked_at"].is_string(), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drivers_are_created_read_listed_changed_and_deleted() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let d = create(&s, &op, &driver_body()).await;
    let id = d["id"].as_str().expect("id").to_string();
    assert!(id.starts_with("DRV") && id.len() == 23, "{id}");
    assert_eq!(d["name"], "Sam Rivera");
    assert_eq!(d["depot"], "YYZ1");
    assert_eq!(d["vehicle"], json!({"name": "Van 3", "capacity_parcels": 120, "capacity_kg": 800}));
    assert_eq!(d["shift"], json!({"start": "08:00", "end": "18:00"}));
    assert_eq!(d["weekdays"], json!(["mon", "tue", "fri"]), "Monday first");
    let url = d["sign_in_url"].as_str().expect("sign_in_url");
    assert!(url.starts_with(&format!("{}/driver#token=", s.base)), "{url}");
    let first = token_of(url);

    // Read and list: never a sign-in link again.
    let r = s.get(&format!("/ops/drivers/{id}"), &op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["phone"], "+1 416 555 0199");
    assert!(r.body["object"].get("sign_in_url").is_none(), "{}", r.body);
    let mut other = driver_body();
    other["depot"] = json!("YYZ2");
    other["name"] = json!("Alex Chen");
    let other_id = create(&s, &op, &other).await["id"].as_str().expect("id").to_string();
    let ids = |r: &Reply| -> Vec<String> {
        r.body["object"]["drivers"]
            .as_array()
            .expect("drivers")
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = s.get("/ops/drivers", &op).await;
    assert_eq!(ids(&all), [id.as_str(), other_id.as_str()], "{}", all.body);
    assert!(!all.body.to_string().contains("sign_in_url"));
    assert_eq!(ids(&s.get("/ops/drivers?depot=YYZ2", &op).await), [other_id.as_str()]);
    assert!(ids(&s.get("/ops/drivers?depot=NOPE", &op).await).is_empty());
    let r = s.get("/ops/drivers?depots=YYZ1", &op).await;
    assert_envelope(&r, 422);
    r.error_at("query.depots");

    // Change: only the fields given, nested ones too; the whole is checked again.
    let r = patch(
        &s,
        &format!("/ops/drivers/{id}"),
        &op,
        &json!({"vehicle": {"capacity_kg": 650}, "shift": {"end": "17:30"}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["vehicle"], json!({"name": "Van 3", "capacity_parcels": 120, "capacity_kg": 650}));
    assert_eq!(r.body["object"]["shift"], json!({"start": "08:00", "end": "17:30"}));
    assert_eq!(r.body["object"]["name"], "Sam Rivera");
    let r = patch(&s, &format!("/ops/drivers/{id}"), &op, &json!({"shift": {"start": "18:00"}})).await;
    assert_envelope(&r, 422);
    r.error_at("shift.end");
    let r = patch(&s, &format!("/ops/drivers/{id}"), &op, &json!({"depot": "YYZ2", "weekdays": ["sat"]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.get(&format!("/ops/drivers/{id}"), &op).await.body["object"]["weekdays"], json!(["sat"]));
    assert_eq!(ids(&s.get("/ops/drivers?depot=YYZ2", &op).await), [id.as_str(), other_id.as_str()]);
    assert_envelope(&patch(&s, "/ops/drivers/DRVNOPE", &op, &json!({"name": "X"})).await, 404);

    // Re-issue: a new driver token, the old one revoked. A driver token is valid but of the
    // wrong kind on the operators' routes (403); a revoked one is unknown (401).
    assert_envelope(&s.get("/ops/drivers", &first).await, 403);
    let r = s.post(&format!("/ops/drivers/{id}/token"), &op, &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let second = token_of(r.body["object"]["sign_in_url"].as_str().expect("sign_in_url"));
    assert_ne!(first, second);
    assert_envelope(&s.get("/ops/drivers", &first).await, 401);
    assert_envelope(&s.get("/ops/drivers", &second).await, 403);
    assert_eq!(s.scalar("SELECT count(*) FROM staff_tokens WHERE kind = 'driver' AND revoked_at IS NULL"), 2);
    let r = s.get("/admin/operator-tokens", ADMIN_TOKEN).await;
    assert_eq!(r.body["object"]["tokens"].as_array().map(Vec::len), Some(1), "driver tokens are not operator tokens");
    assert_envelope(&s.post("/ops/drivers/DRVNOPE/token", &op, &json!({})).await, 404);

    // Delete: its tokens stop working at once, and it is gone from every read.
    let r = s.delete(&format!("/ops/drivers/{id}"), &op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"], json!({}));
    assert_envelope(&s.get("/ops/drivers", &second).await, 401);
    assert_envelope(&s.get(&format!("/ops/drivers/{id}"), &op).await, 404);
    assert_envelope(&patch(&s, &format!("/ops/drivers/{id}"), &op, &json!({"name": "X"})).await, 404);
    assert_envelope(&s.post(&format!("/ops/drivers/{id}/token"), &op, &json!({})).await, 404);
    assert_envelope(&s.delete(&format!("/ops/drivers/{id}"), &op).await, 404);
    assert_eq!(ids(&s.get("/ops/drivers", &op).await), [other_id]);
    assert_eq!(s.scalar("SELECT count(*) FROM staff_tokens WHERE kind = 'driver' AND revoked_at IS NULL"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_driver_rule_is_refused_at_its_path() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let with = |path: &[&str], value: Value| {
        let mut body = driver_body();
        let mut at = &mut body;
        for key in &path[..path.len() - 1] {
            at = &mut at[*key];
        }
        let last = path[path.len() - 1];
        if value.is_null() {
            at.as_object_mut().expect("object").remove(last);
        } else {
            at[last] = value;
        }
        body
    };
    let long = "x".repeat(201);
    let cases: Vec<(Value, &str)> = vec![
        (with(&["name"], json!("   ")), "name"),
        (with(&["name"], json!(long)), "name"),
        (with(&["name"], Value::Null), "name"),
        (with(&["phone"], json!("555-01")), "phone"),
        (with(&["phone"], json!("+1 416 555 0199 ext 4")), "phone"),
        (with(&["depot"], json!("YYZ9")), "depot"),
        (with(&["depot"], Value::Null), "depot"),
        (with(&["vehicle"], Value::Null), "vehicle.name"),
        (with(&["vehicle", "name"], json!("")), "vehicle.name"),
        (with(&["vehicle", "capacity_parcels"], json!(0)), "vehicle.capacity_parcels"),
        (with(&["vehicle", "capacity_parcels"], json!(10_001)), "vehicle.capacity_parcels"),
        (with(&["vehicle", "capacity_kg"], json!(-5)), "vehicle.capacity_kg"),
        (with(&["vehicle", "capacity_kg"], json!(100_001)), "vehicle.capacity_kg"),
        (with(&["shift", "start"], json!("8:00")), "shift.start"),
        (with(&["shift", "start"], json!("24:00")), "shift.start"),
        (with(&["shift", "end"], json!("07:59")), "shift.end"),
        (with(&["shift", "end"], json!("08:00")), "shift.end"),
        (with(&["shift"], Value::Null), "shift.start"),
        (with(&["weekdays"], json!([])), "weekdays"),
        (with(&["weekdays"], json!(["mon", "funday"])), "weekdays.1"),
        (with(&["weekdays"], json!(["mon", "tue", "mon"])), "weekdays.2"),
    ];
    for (body, path) in cases {
        let r = s.post("/ops/drivers", &op, &body).await;
        assert_envelope(&r, 422);
        assert!(!r.error_at(path).is_empty(), "{path}: {}", r.body);
    }
    // The edges are accepted.
    let edges = with(&["vehicle"], json!({"name": "V", "capacity_parcels": 10_000, "capacity_kg": 100_000}));
    create(&s, &op, &with(&["shift"], json!({"start": "00:00", "end": "23:59"}))).await;
    create(&s, &op, &edges).await;
    // Wrong JSON types and unknown fields: 400 at their path, as everywhere in the API.
    for (body, path) in [
        (with(&["vehicle", "capacity_parcels"], json!(1.5)), "vehicle.capacity_parcels"),
        (with(&["vehicle", "capacity_parcels"], json!("12")), "vehicle.capacity_parcels"),
        (with(&["weekdays"], json!("mon")), "weekdays"),
        (with(&["vehicle", "colour"], json!("red")), "vehicle.colour"),
        (with(&["nickname"], json!("Sammy")), "nickname"),
    ] {
        let r = s.post("/ops/drivers", &op, &body).await;
        assert_envelope(&r, 400);
        assert!(!r.error_at(path).is_empty(), "{path}: {}", r.body);
    }
    // Nothing refused was written.
    assert_eq!(s.scalar("SELECT count(*) FROM drivers"), 2);
    assert_eq!(s.scalar("SELECT count(*) FROM staff_tokens WHERE kind = 'driver'"), 2);
}

/// Which token reaches what: operator tokens the fleet only; driver tokens nothing yet; every
/// client token (ops included) keeps its own reach and gets 403 on the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_reach_only_their_own_endpoints() {
    let s = TestServer::start().await;
    let (_, test, live, ops) = s.new_client("Acme").await;
    let op = operator(&s).await;
    let d = create(&s, &op, &driver_body()).await;
    let driver = token_of(d["sign_in_url"].as_str().expect("sign_in_url"));
    let driver_path = format!("/ops/drivers/{}", d["id"].as_str().expect("id"));

    // The fleet: operator tokens only.
    for (name, token) in [("test", &test), ("live", &live), ("ops", &ops), ("demo test", &s.token), ("driver", &driver)]
    {
        let r = s.post("/ops/drivers", token, &driver_body()).await;
        assert_envelope(&r, 403);
        assert!(r.body["message"].as_str().unwrap_or_default().contains("operator tokens only"), "{name}: {}", r.body);
        assert_envelope(&s.get("/ops/drivers", token).await, 403);
        // A client never sees a driver, not even that it exists.
        let r = s.get(&driver_path, token).await;
        assert_envelope(&r, 403);
        assert!(!r.body.to_string().contains("Sam Rivera"), "{name}");
        assert_envelope(&patch(&s, &driver_path, token, &json!({"name": "X"})).await, 403);
        assert_envelope(&s.delete(&driver_path, token).await, 403);
        assert_envelope(&s.post(&format!("{driver_path}/token"), token, &json!({})).await, 403);
    }
    for unknown in
        ["ds_operator_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "ds_driver_nope", "ds_test_nope", "nonsense"]
    {
        assert_envelope(&s.get("/ops/drivers", unknown).await, 401);
        assert_envelope(&s.post("/requests/preview", unknown, &crate::common::request(&[500.0])).await, 401);
        assert_envelope(&s.ops_move(unknown, "DSNOPE", &json!({"to": "in_transit"})).await, 401);
    }
    assert_envelope(&s.send(s.http.get(s.url("/ops/drivers"))).await, 401);
    assert_eq!(s.scalar("SELECT count(*) FROM drivers"), 1, "no refused token created a driver");

    // Staff tokens reach nothing of the client API nor the §6 operations API.
    for (name, token) in [("operator", &op), ("driver", &driver)] {
        let r = s.post("/requests/preview", token, &crate::common::request(&[500.0])).await;
        assert_envelope(&r, 403);
        assert!(
            r.body["message"].as_str().unwrap_or_default().contains("cannot call the client API"),
            "{name}: {}",
            r.body
        );
        assert_envelope(&s.get("/orders", token).await, 403);
        assert_envelope(&s.get("/webhooks", token).await, 403);
        assert_envelope(&s.scenario_with(token, "happy", &json!({"date": "2026-11-23"})).await, 403);
        let r = s.ops_move(token, "DSNOPE", &json!({"to": "in_transit"})).await;
        assert_envelope(&r, 403);
        assert!(r.body["message"].as_str().unwrap_or_default().contains("ops tokens only"), "{name}: {}", r.body);
        assert_envelope(&s.post("/ops/parcels/PNOPE/pick-up-scan", token, &json!({})).await, 403);
    }

    // Client tokens keep exactly their reach: ops moves for ops tokens, the client API for
    // test and live ones.
    assert_envelope(&s.ops_move(&ops, "DSNOPE", &json!({"to": "in_transit"})).await, 404);
    assert_envelope(&s.ops_move(&live, "DSNOPE", &json!({"to": "in_transit"})).await, 403);
    assert_envelope(&s.post("/requests/preview", &ops, &crate::common::request(&[500.0])).await, 403);
    assert_eq!(s.post("/requests/preview", &live, &crate::common::request(&[500.0])).await.status, 200);
    assert_eq!(s.get("/orders", &test).await.status, 200);

    // A revoked operator token is unknown everywhere.
    let r = s.get("/admin/operator-tokens", ADMIN_TOKEN).await;
    let prefix = r.body["object"]["tokens"][0]["prefix"].as_str().expect("prefix").to_string();
    assert_eq!(s.delete(&format!("/admin/tokens/{prefix}"), ADMIN_TOKEN).await.status, 200);
    assert_envelope(&s.get("/ops/drivers", &op).await, 401);
    assert_envelope(&s.get("/orders", &op).await, 401);
}

/// `dropslot token create --kind operator`, `token list --kind`, `token revoke` and `dropslot
/// driver create|list`, against a running server on the same database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_tokens_and_drivers_from_the_command_line() {
    let s = TestServer::start().await;
    let db = s.db.url();
    let stdout = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
    let out = dropslot(&db, &["token", "create", "--kind", "operator"]);
    assert!(out.status.success(), "{out:?}");
    let op = stdout(&out);
    assert!(op.starts_with("ds_operator_") && !op.contains(char::is_whitespace), "the token alone: {op:?}");
    assert_eq!(s.get("/ops/drivers", &op).await.status, 200);
    // Usage errors: an operator token takes no client, a client token needs one; driver tokens
    // come only with a driver.
    for args in [
        &["token", "create", "--client", "1", "--kind", "operator"][..],
        &["token", "create", "--kind", "test"],
        &["token", "create", "--kind", "driver"],
        &["token", "list"],
        &["token", "list", "--client", "1", "--kind", "operator"],
    ] {
        let out = dropslot(&db, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }

    let create = |extra: &[&str]| {
        let mut args = vec![
            "driver",
            "create",
            "--name",
            "Sam Rivera",
            "--phone",
            "+1 416 555 0199",
            "--depot",
            "YYZ1",
            "--capacity-parcels",
            "120",
            "--capacity-kg",
            "800",
            "--shift",
            "08:00-18:00",
            "--weekdays",
            "mon,tue,wed",
        ];
        args.extend_from_slice(extra);
        dropslot(&db, &args)
    };
    let out = create(&[]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "the id, then the sign-in link: {text}");
    assert!(lines[0].starts_with("DRV"), "{text}");
    let driver = token_of(lines[1]);
    assert_envelope(&s.get("/ops/drivers", &driver).await, 403);
    let r = s.get(&format!("/ops/drivers/{}", lines[0]), &op).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["object"]["weekdays"], json!(["mon", "tue", "wed"]));
    // A rule broken: exit 1 with a one-line reason naming the field; a malformed flag: exit 2.
    let out = dropslot(
        &db,
        &[
            "driver",
            "create",
            "--name",
            "Sam",
            "--phone",
            "+1 416 555 0199",
            "--depot",
            "YYZ9",
            "--capacity-parcels",
            "1",
            "--capacity-kg",
            "1",
            "--shift",
            "08:00-18:00",
            "--weekdays",
            "mon",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.trim().lines().count() == 1 && err.contains("depot"), "{err}");
    assert_eq!(create(&["--shift", "0800"]).status.code(), Some(2));
    assert_eq!(s.scalar("SELECT count(*) FROM drivers"), 1);

    let list = stdout(&dropslot(&db, &["driver", "list"]));
    assert!(
        list.starts_with(lines[0]) && list.contains("Sam Rivera\tYYZ1") && list.contains("08:00-18:00\tmon,tue,wed"),
        "{list}"
    );
    assert!(stdout(&dropslot(&db, &["driver", "list", "--depot", "YYZ2"])).is_empty());
    let drivers = stdout(&dropslot(&db, &["token", "list", "--kind", "driver"]));
    assert!(drivers.contains(lines[0]) && drivers.contains("active") && !drivers.contains(&driver), "{drivers}");

    let listed = stdout(&dropslot(&db, &["token", "list", "--kind", "operator"]));
    assert!(listed.contains("operator") && listed.contains("active") && !listed.contains(&op), "{listed}");
    let prefix = listed.split('…').next().expect("prefix").to_string();
    assert!(op.starts_with(&prefix), "{listed}");
    let out = dropslot(&db, &["token", "revoke", &prefix]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&dropslot(&db, &["token", "list", "--kind", "operator"])).contains("revoked"));
    assert_envelope(&s.get("/ops/drivers", &op).await, 401);
    assert_eq!(dropslot(&db, &["token", "revoke", &prefix]).status.code(), Some(1));
}

/// Races: concurrent re-issues leave exactly one live driver token, and concurrent changes of
/// different fields lose none of the changes they answered 200 for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reissues_and_changes_lose_nothing() {
    let s = TestServer::start().await;
    let op = operator(&s).await;
    let id = create(&s, &op, &driver_body()).await["id"].as_str().expect("id").to_string();
    let path = format!("/ops/drivers/{id}");
    let (reissue, empty) = (format!("{path}/token"), json!({}));
    let reissues = (0..8).map(|_| s.post(&reissue, &op, &empty));
    let links: Vec<String> = futures_util::future::join_all(reissues)
        .await
        .into_iter()
        .map(|r| {
            assert_eq!(r.status, 200, "{}", r.body);
            r.body["object"]["sign_in_url"].as_str().expect("sign_in_url").to_string()
        })
        .collect();
    assert_eq!(s.scalar("SELECT count(*) FROM staff_tokens WHERE kind = 'driver' AND revoked_at IS NULL"), 1);
    let mut live = 0;
    for link in &links {
        match s.get("/ops/drivers", &token_of(link)).await.status.as_u16() {
            403 => live += 1,
            401 => {}
            other => panic!("a driver token answered {other}"),
        }
    }
    assert_eq!(live, 1, "exactly one of the re-issued links works");

    let changes = [
        json!({"name": "Samantha Rivera"}),
        json!({"phone": "+1 647 555 0100"}),
        json!({"vehicle": {"name": "Van 9"}}),
        json!({"vehicle": {"capacity_kg": 700}}),
        json!({"shift": {"end": "16:00"}}),
        json!({"weekdays": ["wed"]}),
    ];
    let sent = changes.iter().map(|c| patch(&s, &path, &op, c));
    let answers = futures_util::future::join_all(sent).await;
    let d = s.get(&path, &op).await.body["object"].clone();
    let mut applied = 0;
    for (change, r) in changes.iter().zip(&answers) {
        match r.status.as_u16() {
            200 => {
                applied += 1;
                for (key, value) in change.as_object().expect("object") {
                    match value.as_object() {
                        Some(inner) => {
                            for (k, v) in inner {
                                assert_eq!(&d[key][k], v, "{change} was answered 200 but is lost: {d}");
                            }
                        }
                        None => assert_eq!(&d[key], value, "{change} was answered 200 but is lost: {d}"),
                    }
                }
            }
            409 => assert_envelope(r, 409),
            other => panic!("{change}: {other} {}", r.body),
        }
    }
    assert!(applied > 0, "{answers:?}", answers = answers.iter().map(|r| r.status).collect::<Vec<_>>());
}
