//! Test harness: the real server on 127.0.0.1:0 over a fresh database, with a pinned clock,
//! driven over real HTTP. Each server stops when its `TestServer` is dropped.
//!
//! The backend comes from `DROPSLOT_TEST_DATABASE_URL`: unset or `sqlite:` gives each test a
//! fresh temporary `SQLite` file; `postgres://…` gives each test a database of its own on
//! that server, created and dropped by the test. Assertions about stored rows go through [`TestServer::scalar`],
//! a small auditor that runs portable SQL on whichever backend the test uses, never through
//! a backend's own file.

use std::time::Duration;

use dropslot::App;
use dropslot_core::config::{Overrides, Settings};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub const API: &str = "/scheduled-service/api/v1";
pub const ADMIN_TOKEN: &str = "admin-token-for-tests-0123456789";
/// Monday 2026-11-23, 07:00 in Toronto: the 09:00 pick-up slot is still open.
pub const NOW: &str = "2026-11-23T12:00:00Z";

/// The database a test runs on.
pub enum TestDb {
    Sqlite {
        path: std::path::PathBuf,
        _dir: tempfile::TempDir,
    },
    /// A database of its own on the server `DROPSLOT_TEST_DATABASE_URL` names, created for
    /// the test and dropped after it.
    Postgres {
        admin: String,
        url: String,
        name: String,
    },
}

impl TestDb {
    /// A fresh, empty database of the backend `DROPSLOT_TEST_DATABASE_URL` names.
    pub fn fresh() -> TestDb {
        match std::env::var("DROPSLOT_TEST_DATABASE_URL").ok().filter(|u| !u.is_empty()) {
            None => Self::sqlite(),
            Some(u) if u.starts_with("sqlite:") => Self::sqlite(),
            Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => Self::postgres(&u),
            Some(u) => panic!("DROPSLOT_TEST_DATABASE_URL={u:?}: the harness has no such backend"),
        }
    }

    fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        TestDb::Sqlite { path: dir.path().join("dropslot.db"), _dir: dir }
    }

    fn postgres(admin: &str) -> TestDb {
        let name = format!("dropslot_test_{:016x}", rand_u64());
        psql(admin, &format!("CREATE DATABASE {name}"));
        let mut url = url::Url::parse(admin).expect("DROPSLOT_TEST_DATABASE_URL parses");
        url.set_path(&name);
        TestDb::Postgres { admin: admin.to_string(), url: url.to_string(), name }
    }

    pub fn url(&self) -> String {
        match self {
            TestDb::Sqlite { path, .. } => format!("sqlite://{}", path.display()),
            TestDb::Postgres { url, .. } => url.clone(),
        }
    }

    /// One integer from portable SQL (`SELECT count(*) FROM orders`), read as an auditor
    /// would: its own connection, outside the server.
    pub fn scalar(&self, sql: &str) -> i64 {
        match self {
            TestDb::Sqlite { path, .. } => {
                rusqlite::Connection::open(path).expect("open db").query_row(sql, [], |r| r.get(0)).expect(sql)
            }
            TestDb::Postgres { url, .. } => {
                let out = psql(url, sql);
                out.trim().parse().unwrap_or_else(|_| panic!("{sql}: not an integer: {out:?}"))
            }
        }
    }
}

impl TestDb {
    /// Runs one statement from its own connection, as `scalar` reads: to leave the state a
    /// test needs and cannot make happen on cue (what a `kill -9` at a given instant leaves).
    pub fn execute(&self, sql: &str) {
        match self {
            TestDb::Sqlite { path, .. } => {
                rusqlite::Connection::open(path).expect("open db").execute_batch(sql).expect(sql);
            }
            TestDb::Postgres { url, .. } => {
                psql(url, sql);
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let TestDb::Postgres { admin, name, .. } = self {
            // Best effort: a failed drop leaves a database named dropslot_test_*, not a failure.
            let _ = std::process::Command::new("psql")
                .args([admin.as_str(), "-qtAc", &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")])
                .output();
        }
    }
}

/// Runs one statement with `psql` (the auditor's own connection); its output, trimmed.
/// Orders in a SQLite file that are not whole (a one-drop-off, one-parcel order without its
/// pick-up, drop-off or parcel): 0 when every committed order is atomic.
pub fn partial_orders(conn: &rusqlite::Connection) -> i64 {
    conn.query_row(
        "SELECT count(*) FROM orders o WHERE
           (SELECT count(*) FROM pick_up_shipments p WHERE p.order_id = o.id) <> 1
        OR (SELECT count(*) FROM shipment_orders s JOIN drop_off_shipments d ON d.shipment_order_id = s.id
             JOIN parcels x ON x.drop_off_shipment_id = d.id WHERE s.order_id = o.id) <> 1",
        [],
        |r| r.get(0),
    )
    .expect("the audit query")
}

pub fn psql(url: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qtAc", sql])
        .output()
        .expect("psql runs (scripts/test.sh installs PostgreSQL)");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

/// Rate limits no test reaches unless it means to (see `ratelimit.rs` for one that does):
/// `scripts/high-limits.toml`, which the load and fuzzing scripts use too.
pub const GENEROUS_LIMITS: &str = include_str!("../../../../scripts/high-limits.toml");

/// The configuration file holding [`GENEROUS_LIMITS`], for the tests that run the binary.
pub fn generous_limits_file() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/high-limits.toml")
}

/// A test's configuration: `fragment`, then each table of [`GENEROUS_LIMITS`] the fragment
/// does not set itself. Generous rate limits unless the test sets its own (a pinned clock
/// refills little, and many tests send hundreds of requests with one token); capacity on
/// limits unless it sets `[capacity]` (a new database's default is the fleet, which a test
/// of something else must not depend on); no demo fleet unless it sets `[demo]`.
pub fn test_config(fragment: &str) -> String {
    let mut sections: Vec<Vec<&str>> = Vec::new();
    for line in GENEROUS_LIMITS.lines() {
        if line.starts_with('[') || sections.is_empty() {
            sections.push(Vec::new());
        }
        sections.last_mut().expect("a section").push(line);
    }
    let mut config = format!("{fragment}\n");
    for section in sections {
        let header = section[0];
        let rates = header.contains("rate_limit") && fragment.contains("rate_limit");
        if !header.starts_with('[') || (!rates && !fragment.contains(header)) {
            config.push_str(&section.join("\n"));
            config.push('\n');
        }
    }
    config
}

pub struct TestServer {
    pub base: String,
    pub app: App,
    pub http: reqwest::Client,
    pub db: TestDb,
    /// The demo client's test token.
    pub token: String,
    /// The `/metrics` listener's address, when `server.metrics_listen` gave it its own.
    pub metrics_addr: Option<std::net::SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

/// An error answer in the CONTRACT §2 envelope, with this status and a request id.
pub fn assert_envelope(r: &Reply, code: u16) {
    assert_eq!(r.status.as_u16(), code, "{}", r.body);
    assert_eq!(r.body["status"], "error", "{}", r.body);
    assert_eq!(r.body["code"], code, "{}", r.body);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
    assert!(r.body["errors"].is_object(), "{}", r.body);
    assert_eq!(r.body["object"], json!({}));
    assert!(r.headers.contains_key("x-request-id"));
}

impl Reply {
    /// The message list at an error path, or panics with the whole body.
    pub fn error_at(&self, path: &str) -> Vec<String> {
        match self.body["errors"].get(path) {
            Some(Value::Array(v)) => v.iter().map(|m| m.as_str().unwrap_or_default().to_string()).collect(),
            _ => panic!("no error at {path:?} in {}", self.body),
        }
    }
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with("").await
    }

    /// Starts with a TOML fragment merged over the embedded default configuration.
    pub async fn start_with(fragment: &str) -> TestServer {
        Self::start_edited(fragment, |_| {}).await
    }

    /// Like [`TestServer::start_with`], with the settings changed by `edit` before the start
    /// (what the environment would set: credentials).
    pub async fn start_edited(fragment: &str, edit: impl FnOnce(&mut Settings)) -> TestServer {
        let db = TestDb::fresh();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let overrides = Overrides {
            database: Some(db.url()),
            base_url: Some(format!("http://{addr}")),
            now: Some(NOW.into()),
            admin_token: Some(ADMIN_TOKEN.into()),
            ..Overrides::default()
        };
        let fragment = test_config(fragment);
        let mut settings = Settings::from_toml_fragment(&fragment, &overrides).expect("settings");
        edit(&mut settings);
        let (tx, rx) = oneshot::channel::<()>();
        // Bounded: a test never outlives two minutes of serving.
        let stop = async move {
            let _ = tokio::time::timeout(Duration::from_secs(120), rx).await;
        };
        let running = dropslot::start(settings, listener, stop).await.expect("start");
        let (_, token) = running.demo.clone().expect("empty database");
        let app = running.app.clone();
        let metrics_addr = running.metrics_addr;
        TestServer {
            metrics_addr,
            base: format!("http://{addr}"),
            app,
            http: reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client"),
            db,
            token,
            shutdown: Some(tx),
        }
    }

    pub fn url(&self, path: &str) -> String {
        if path.starts_with('/')
            && !path.starts_with(API)
            && !path.starts_with("/labels")
            && !path.starts_with("/static")
            && !path.starts_with("/healthz")
            && !path.starts_with("/readyz")
            && !path.starts_with("/track")
        {
            format!("{}{API}{path}", self.base)
        } else {
            format!("{}{path}", self.base)
        }
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        let res = req.send().await.expect("request");
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Reply { status, headers, body }
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Reply {
        self.send(self.http.post(self.url(path)).bearer_auth(token).json(body)).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.send(self.http.get(self.url(path)).bearer_auth(token)).await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Reply {
        self.send(self.http.delete(self.url(path)).bearer_auth(token).header("X-Requested-With", "XMLHttpRequest"))
            .await
    }

    pub async fn delete_parcel(&self, code: &str, token: &str) -> Reply {
        self.delete(&format!("/parcels/find/by-custom-code/{code}"), token).await
    }

    pub async fn preview(&self, body: &Value) -> Reply {
        self.post("/requests/preview", &self.token, body).await
    }

    pub async fn order(&self, body: &Value) -> Reply {
        self.post("/requests/sync", &self.token, body).await
    }

    /// An ops move of a live shipment: `POST /ops/shipments/{tracking}/transitions`.
    pub async fn ops_move(&self, ops: &str, tracking: &str, body: &Value) -> Reply {
        self.post(&format!("/ops/shipments/{tracking}/transitions"), ops, body).await
    }

    /// Ops moves of a live shipment in order, each of them a 200.
    pub async fn ops_moves(&self, ops: &str, tracking: &str, to: &[&str]) {
        for to in to {
            let r = self.ops_move(ops, tracking, &json!({"to": to})).await;
            assert_eq!(r.status, 200, "{to}: {}", r.body);
        }
    }

    /// A sandbox scenario with the demo test token.
    pub async fn scenario(&self, name: &str, body: &Value) -> Reply {
        self.post(&format!("/sandbox/scenarios/{name}"), &self.token, body).await
    }

    /// A sandbox scenario with any token.
    pub async fn scenario_with(&self, token: &str, name: &str, body: &Value) -> Reply {
        self.post(&format!("/sandbox/scenarios/{name}"), token, body).await
    }

    /// A new client through the admin API, with a token of each kind: (id, test, live, ops).
    pub async fn new_client(&self, name: &str) -> (i64, String, String, String) {
        let r = self.post("/admin/clients", ADMIN_TOKEN, &json!({"name": name})).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.body["object"]["id"].as_i64().expect("id");
        let mut tokens = Vec::new();
        for kind in ["test", "live", "ops"] {
            let r = self.post(&format!("/admin/clients/{id}/tokens"), ADMIN_TOKEN, &json!({"kind": kind})).await;
            assert_eq!(r.status, 201, "{}", r.body);
            tokens.push(r.body["object"]["token"].as_str().expect("token").to_string());
        }
        let ops = tokens.pop().unwrap_or_default();
        let live = tokens.pop().unwrap_or_default();
        let test = tokens.pop().unwrap_or_default();
        (id, test, live, ops)
    }

    /// See [`TestDb::scalar`].
    pub fn scalar(&self, sql: &str) -> i64 {
        self.db.scalar(sql)
    }

    /// The `SQLite` file itself, for the tests that are about `SQLite` (locks, corruption);
    /// `None` on another backend, where such a test has nothing to check.
    pub fn sqlite_file(&self) -> Option<rusqlite::Connection> {
        match &self.db {
            TestDb::Sqlite { path, .. } => Some(rusqlite::Connection::open(path).expect("open db")),
            TestDb::Postgres { .. } => None,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub const PICK_UP: &str = "100 King St W, Toronto, ON M5X 1A9";
pub const DROP_OFF: &str = "290 Bremner Blvd, Toronto, ON M5V 3L9";

/// One drop-off with parcels of these weights in grams, with the fields an order needs.
pub fn request(weights: &[f64]) -> Value {
    let parcels: Vec<Value> = weights.iter().map(|w| json!({"unit": "g", "values": w})).collect();
    json!({
        "pick_up_address": {"text": PICK_UP},
        "drop_offs": [{
            "address": {"text": DROP_OFF, "person_name": "Jane Doe", "person_phone": "+1 416 555 0100"},
            "parcels": parcels
        }]
    })
}

/// One drop-off whose parcels carry these custom codes.
pub fn request_with_codes(codes: &[&str]) -> Value {
    let mut r = request(&vec![500.0; codes.len()]);
    for (i, c) in codes.iter().enumerate() {
        r["drop_offs"][0]["parcels"][i]["custom_code"] = json!(c);
    }
    r
}

/// Money fields are JSON numbers; compare in cents.
pub fn cents(v: &Value) -> i64 {
    (v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")) * 100.0).round() as i64
}
