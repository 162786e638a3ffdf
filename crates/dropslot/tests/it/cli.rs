//! The operator CLI (CONTRACT §9) as scripts use it: the real binary, real database files,
//! and a real `serve` process answering the tokens the CLI printed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn dropslot(db: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(args)
        .env("DATABASE_URL", db)
        .env_remove("DROPSLOT_CONFIG")
        .output()
        .expect("run dropslot")
}

/// A `serve` process, killed when dropped (also when an assertion fails, so a failing test
/// leaves no server running).
pub struct Serve(pub std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn clients_and_tokens_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let test_db = crate::common::TestDb::fresh();
    let db = test_db.url();
    let out = dropslot(&db, &["migrate"]);
    assert!(out.status.success(), "{out:?}");
    let out = dropslot(&db, &["client", "create", "--name", "Acme Parcels"]);
    assert!(out.status.success(), "{out:?}");
    let id = stdout(&out);
    assert!(id.parse::<i64>().is_ok(), "the id alone on stdout: {id:?}");
    let out = dropslot(&db, &["token", "create", "--client", &id, "--kind", "live"]);
    assert!(out.status.success());
    let token = stdout(&out);
    assert!(token.starts_with("ds_live_") && !token.contains(char::is_whitespace), "{token:?}");
    let list = stdout(&dropslot(&db, &["token", "list", "--client", &id]));
    assert!(list.contains("live") && list.contains("active"), "{list}");
    assert!(!list.contains(&token), "listing never shows the token");
    let prefix = list.split('…').next().unwrap().to_string();
    assert!(token.starts_with(&prefix));
    let out = dropslot(&db, &["token", "revoke", &prefix]);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout(&dropslot(&db, &["token", "list", "--client", &id])).contains("revoked"));
    // Failures: exit 1 with a one-line reason; usage errors: exit 2.
    let out = dropslot(&db, &["token", "revoke", &prefix]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(dropslot(&db, &["token", "create", "--client", "999", "--kind", "test"]).status.code(), Some(1));
    assert_eq!(dropslot(&db, &["token", "create", "--client", &id, "--kind", "root"]).status.code(), Some(2));
    assert_eq!(dropslot(&db, &["frobnicate"]).status.code(), Some(2));
    let out = dropslot("mysql://nope", &["migrate"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim().lines().count(), 1);
    // An empty variable counts as unset (here: the default sqlite file in the working dir).
    let out = Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["migrate"])
        .env("DATABASE_URL", "")
        .env("DROPSLOT_CONFIG", "")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(dir.path().join("dropslot.db").exists());
}

/// Several processes migrating one fresh database at once: each waits for the others (an
/// advisory lock on `PostgreSQL`, the write lock on `SQLite`), and the schema is applied once.
#[test]
fn processes_started_at_once_migrate_once() {
    let test_db = crate::common::TestDb::fresh();
    let db = test_db.url();
    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_dropslot"))
                .args(["migrate"])
                .env("DATABASE_URL", &db)
                .env_remove("DROPSLOT_CONFIG")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn dropslot migrate")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("dropslot migrate ends");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // Every migration the binary ships, once.
    let shipped = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../dropslot-store/migrations/sqlite"))
        .expect("the migrations")
        .count();
    let shipped = i64::try_from(shipped).unwrap();
    assert!(shipped >= 11, "{shipped}");
    assert_eq!(test_db.scalar("SELECT count(*) FROM schema_migrations"), shipped);
    assert_eq!(test_db.scalar("SELECT count(DISTINCT version) FROM schema_migrations"), shipped);
}

/// `dropslot serve` on a fresh port over `db`, clock pinned: the child, its base URL and
/// the demo token it printed (read until it reports listening, at most 30 s).
fn spawn_serve(db: &str) -> (std::process::Child, String, String) {
    let (child, base, token) = spawn_serve_with(db, &[]);
    (child, base, token.expect("a demo token was printed"))
}

/// `serve` with extra environment; the demo token only on an empty database.
pub fn spawn_serve_with(db: &str, env: &[(&str, &str)]) -> (std::process::Child, String, Option<String>) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", db)
        .env("DROPSLOT_NOW", crate::common::NOW)
        .env("DROPSLOT_CONFIG", crate::common::generous_limits_file())
        .env_remove("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE")
        .env_remove("DROPSLOT_WEBHOOK_RETRY_SCHEDULE")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut token, mut listening) = (None, false);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !listening && Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if let Some(t) = line.split_whitespace().find(|w| w.starts_with("ds_test_")) {
            token.get_or_insert_with(|| t.trim_matches('\'').to_string());
        }
        listening |= line.contains("listening on");
    }
    assert!(listening, "serve did not report listening");
    // Keep reading what it prints later (shutdown logs), so its stdout never hits a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, format!("http://127.0.0.1:{port}"), token)
}

/// `serve` on a fresh database prints a demo token that works; a token minted by the CLI
/// against the same file works too; SIGTERM stops the server cleanly.
#[test]
fn serve_prints_a_working_demo_token_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("serve.db").display());
    let (mut child, base, token) = spawn_serve(&db);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let preview = format!("{base}{}/requests/preview", crate::common::API);
        let r = http.post(&preview).bearer_auth(&token).json(&crate::common::request(&[500.0])).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["object"]["price_with_tax"], 50.85);
        // A second client and token made by the CLI while the server runs.
        let id = stdout(&dropslot(&db, &["client", "create", "--name", "Second"]));
        let live = stdout(&dropslot(&db, &["token", "create", "--client", &id, "--kind", "live"]));
        let r = http.post(&preview).bearer_auth(&live).json(&crate::common::request(&[500.0])).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let prefix = live[..16].to_string();
        assert!(dropslot(&db, &["token", "revoke", &prefix]).status.success());
        let r = http.post(&preview).bearer_auth(&live).json(&crate::common::request(&[500.0])).send().await.unwrap();
        assert_eq!(r.status(), 401, "revocation takes effect at once");
    });
    // SIGTERM: a clean exit.
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "serve did not stop after SIGTERM");
        std::thread::park_timeout(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    // A restart on the same database prints no new token.
    let out = Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["serve", "--listen", "nonsense"])
        .env("DATABASE_URL", &db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "an invalid listen address is a clear failure");
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.listen"));
}

/// "Durably committed before its 201": orders fired at a real `serve`, which is killed with
/// SIGKILL mid-burst; every order that got a 201 is in the database afterwards, and no order
/// is partial.
#[test]
fn sqlite_every_acknowledged_order_survives_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("crash.db");
    let db = format!("sqlite://{}", db_path.display());
    let (mut child, base, token) = spawn_serve(&db);
    let url = format!("{base}{}/requests/sync", crate::common::API);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let acknowledged: Vec<String> = rt.block_on(async {
        let http = reqwest::Client::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        for worker in 0..16 {
            let (http, url, token, tx) = (http.clone(), url.clone(), token.clone(), tx.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    let body = crate::common::request_with_codes(&[&format!("CRASH{worker:03}{i:08}")]);
                    let Ok(res) = http.post(&url).bearer_auth(&token).json(&body).send().await else { break };
                    if res.status() != 201 {
                        break;
                    }
                    let Ok(v) = res.json::<serde_json::Value>().await else { break };
                    if tx.send(v["object"]["unique_id"].as_str().unwrap_or_default().to_string()).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Kill the server once 300 orders have been acknowledged, with more in flight.
        let mut ids = Vec::new();
        while let Some(id) = rx.recv().await {
            ids.push(id);
            if ids.len() == 300 {
                child.kill().unwrap();
            }
        }
        ids
    });
    let _ = child.wait();
    assert!(acknowledged.len() >= 300, "{} acknowledged", acknowledged.len());
    let conn = rusqlite::Connection::open(&db_path).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let mut missing = 0;
    for id in &acknowledged {
        let n: i64 = conn.query_row("SELECT count(*) FROM orders WHERE unique_id = ?1", [id], |r| r.get(0)).unwrap();
        missing += usize::from(n != 1);
    }
    assert_eq!(missing, 0, "acknowledged orders lost after kill -9");
    // Atomic: every committed order is whole (one drop-off, one parcel, its events).
    let partial = crate::common::partial_orders(&conn);
    assert_eq!(partial, 0);
}

/// A 5xx is logged once, at error level, with the `X-Request-Id` the client got, the method,
/// the path and the error's detail, which the client never sees. Request spans are at debug
/// level (off by default), so this line is what joins an error to its request.
#[test]
fn a_server_error_is_logged_with_its_request_id_method_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("errors.db");
    let db = format!("sqlite://{}", path.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", &db)
        .env("DROPSLOT_NOW", crate::common::NOW)
        .env("DROPSLOT_CONFIG", crate::common::generous_limits_file())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Every line the server prints, as it prints it.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = |what: &str| {
        rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("the server printed no line {what}"))
    };
    let mut token = None;
    loop {
        let line = next_line("reporting it listens");
        if let Some(t) = line.split_whitespace().find(|w| w.starts_with("ds_test_")) {
            token.get_or_insert_with(|| t.trim_matches('\'').to_string());
        }
        if line.contains("listening on") {
            break;
        }
    }
    let token = token.expect("a demo token");
    // Stored data that does not parse is an error, never a default: the client's settings.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE clients SET settings_json = '{\"pricing\": 7}'", []).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, id, body) = rt.block_on(async {
        let url = format!("http://127.0.0.1:{port}{}/requests/preview", crate::common::API);
        let r = reqwest::Client::new()
            .post(url)
            .bearer_auth(&token)
            .json(&crate::common::request(&[500.0]))
            .send()
            .await
            .unwrap();
        let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
        (r.status(), id, r.text().await.unwrap())
    });
    assert_eq!(status, 500);
    assert!(!body.contains("settings") && !body.contains("pricing"), "no detail reaches the client: {body}");
    let line = loop {
        let line = next_line("about the failed request");
        if line.contains("request failed") {
            break line;
        }
    };
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains(&format!("request_id={id}")), "{line}");
    assert!(line.contains("method=POST"), "{line}");
    assert!(line.contains("path=/scheduled-service/api/v1/requests/preview"), "{line}");
    assert!(line.contains("status=500"), "{line}");
    assert!(line.contains("client 1 settings"), "the detail is in the log: {line}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Two `serve` processes on one database (on either backend): what one caches for previews
/// (the token's principal, the saved address of a pick-up text, or that there is none) is
/// stale as soon as the other commits a change to it, on the very next request.
#[test]
fn two_processes_on_one_database_see_each_others_changes_at_once() {
    let test_db = crate::common::TestDb::fresh();
    let db = test_db.url();
    let (a, base_a, token) = spawn_serve(&db);
    let _a = Serve(a);
    let (b, base_b, none) = spawn_serve_with(&db, &[]);
    let _b = Serve(b);
    assert!(none.is_none(), "the second process finds the demo client");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let api = |base: &str, path: &str| format!("{base}{}{path}", crate::common::API);
        let body = crate::common::request(&[500.0]);
        let saved_id = |base: String| {
            let (http, body, token) = (http.clone(), body.clone(), token.clone());
            async move {
                let r =
                    http.post(api(&base, "/requests/preview")).bearer_auth(&token).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let v: serde_json::Value = r.json().await.unwrap();
                v["object"]["pick_ups"][0]["address"]["saved_address_id"].clone()
            }
        };
        // A has seen the token and that the pick-up text is no saved address.
        assert!(saved_id(base_a.clone()).await.is_null());
        assert!(saved_id(base_a.clone()).await.is_null());
        // B's order saves the address: A's next preview names it.
        let r = http.post(api(&base_b, "/requests/sync")).bearer_auth(&token).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 201);
        let id = saved_id(base_a.clone()).await;
        assert!(id.is_i64(), "A sees B's new saved address at once: {id}");
        // B deletes it: A's next preview no longer names it.
        let r = http.delete(api(&base_b, &format!("/saved-addresses/{id}"))).bearer_auth(&token).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(saved_id(base_a.clone()).await.is_null(), "A sees the deletion at once");
        // A token revoked by a third process (the CLI) fails at once on both.
        let live = stdout(&dropslot(&db, &["token", "create", "--client", "1", "--kind", "live"]));
        let preview = |base: String| {
            let (http, body, live) = (http.clone(), body.clone(), live.clone());
            async move {
                http.post(api(&base, "/requests/preview")).bearer_auth(&live).json(&body).send().await.unwrap().status()
            }
        };
        assert_eq!(preview(base_a.clone()).await, 200);
        // On SQLite, even with the epoch file deleted meanwhile (the servers hold the old one
        // open).
        if let Some(path) = db.strip_prefix("sqlite://") {
            std::fs::remove_file(format!("{path}-epoch")).expect("the epoch file exists");
        }
        assert!(dropslot(&db, &["token", "revoke", &live[..16]]).status.success());
        assert_eq!(preview(base_a.clone()).await, 401, "revoked in another process: refused at once");
        assert_eq!(preview(base_b.clone()).await, 401);
    });
}

/// A PostgreSQL URL that cannot be used says why, in the server's or the system's words,
/// and where (`host:port`), never with the password: a closed port on every backend; a
/// missing database and an unknown role where the suite runs on PostgreSQL.
#[test]
fn postgres_connection_errors_say_why_and_where() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let refused = format!("postgres://postgres:s3cret-pw@127.0.0.1:{closed}/postgres");
    for args in [&["migrate"][..], &["client", "create", "--name", "x"], &["serve", "--listen", "127.0.0.1:0"]] {
        let out = dropslot(&refused, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("connection refused") && err.contains(&format!("127.0.0.1:{closed}")), "{args:?}: {err}");
        assert!(!err.contains("s3cret-pw"), "the password is never printed: {err}");
        assert!(!err.contains("creating a new object"), "the pool's words are not the reason: {err}");
    }
    let Ok(admin) = std::env::var("DROPSLOT_TEST_DATABASE_URL") else { return };
    if !admin.starts_with("postgres") {
        return;
    }
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path("/dropslot_no_such_db");
    let err = String::from_utf8_lossy(&dropslot(url.as_str(), &["migrate"]).stderr).into_owned();
    assert!(err.contains(r#"database "dropslot_no_such_db" does not exist"#), "{err}");
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_username("dropslot_nobody").unwrap();
    url.set_password(Some("s3cret-pw")).unwrap();
    let err = String::from_utf8_lossy(&dropslot(url.as_str(), &["migrate"]).stderr).into_owned();
    assert!(err.contains(r#"role "dropslot_nobody" does not exist"#), "{err}");
    assert!(!err.contains("s3cret-pw"), "{err}");
}

/// While serving, a database that went away is a 503 whose log line says why in the
/// server's words (PostgreSQL only: its database is dropped under the running server).
#[test]
fn postgres_a_database_gone_while_serving_is_a_503_whose_log_line_says_why() {
    let test_db = crate::common::TestDb::fresh();
    let crate::common::TestDb::Postgres { admin, url, name } = &test_db else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("DATABASE_URL", url)
        .env("DROPSLOT_NOW", crate::common::NOW)
        .env_remove("DROPSLOT_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let _server = Serve(child);
    let (tx, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| drop(tx.send(l))));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut token = None;
    while let Ok(line) = log.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if let Some(t) = line.split_whitespace().find(|w| w.starts_with("ds_test_")) {
            token = Some(t.trim_matches('\'').to_string());
        }
        if line.contains("listening on") {
            break;
        }
    }
    let token = token.expect("serve printed a demo token and listens");
    crate::common::psql(admin, &format!("DROP DATABASE {name} WITH (FORCE)"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let preview = format!("http://127.0.0.1:{port}{}/requests/preview", crate::common::API);
    let http = reqwest::Client::new();
    // The pool's connections were closed with the database: the first request may fail on
    // one of them ("connection closed"); the next ones open new connections, which the
    // server refuses, and the log line gives its reason.
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let status =
            rt.block_on(http.post(&preview).bearer_auth(&token).json(&crate::common::request(&[500.0])).send());
        assert_eq!(status.unwrap().status(), 503, "a database that is gone is a retryable 503");
        while let Ok(line) = log.try_recv() {
            seen.push(line);
        }
        // The request's own line (the dispatcher's and the upkeep's background reads log the
        // same reason on lines of their own, possibly first).
        let gone = |l: &String| {
            l.contains("request failed")
                && (l.contains(&format!(r#"database \"{name}\" does not exist"#))
                    || l.contains(&format!(r#"database "{name}" does not exist"#)))
        };
        if let Some(line) = seen.iter().find(|l| gone(l)) {
            assert!(line.contains("cannot connect to PostgreSQL at"), "{line}");
            return;
        }
        // Wait for the server's next log line rather than spinning.
        if let Ok(line) = log.recv_timeout(Duration::from_millis(200)) {
            seen.push(line);
        }
    }
    panic!("no log line gave the server's reason: {seen:#?}");
}
