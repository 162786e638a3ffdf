//! Stored data is read strictly: a row that does not parse is a logged 500, never a default,
//! and the schema's history cannot be changed under a database.

use serde_json::Value;

use crate::common::{TestServer, request};

/// A stored address that no longer parses serves a 500 envelope, not a blank label with a 200.
/// `SQLite` only: the row is damaged in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_stored_row_that_does_not_parse_is_an_error_not_a_default() {
    let s = TestServer::start().await;
    let r = s.order(&request(&[500.0])).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let shipment = &r.body["object"]["shipments"][0];
    let label = shipment["drop_off_shipment"]["label"].as_str().unwrap().to_string();
    assert_eq!(s.http.get(&label).send().await.unwrap().status(), 200);
    let Some(db) = s.sqlite_file() else { return };
    db.execute("UPDATE drop_off_shipments SET address_json = '{\"text\": 5}'", []).unwrap();
    let res = s.http.get(&label).send().await.unwrap();
    assert_eq!(res.status(), 500);
    let body: Value = res.json().await.unwrap();
    assert_eq!((body["status"].as_str(), body["message"].as_str()), (Some("error"), Some("Internal server error.")));
    // The pick-up label names its sender from the drop-off's stored address: the same error.
    let pick_up = shipment["pick_up_shipment"]["label"].as_str().unwrap();
    assert_eq!(s.http.get(pick_up).send().await.unwrap().status(), 500);
}

fn dropslot(db: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dropslot"))
        .args(args)
        .env("DATABASE_URL", db)
        .output()
        .expect("run dropslot")
}

/// An applied migration whose SQL has changed, or one this binary does not know, stops every
/// command with one line; a database from before checksums gets them recorded.
#[test]
fn sqlite_migrations_are_checked_against_what_was_applied() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let url = format!("sqlite://{}", path.display());
    assert!(dropslot(&url, &["migrate"]).status.success());
    let db = rusqlite::Connection::open(&path).unwrap();
    let recorded: String =
        db.query_row("SELECT checksum FROM schema_migrations WHERE version = 1", [], |r| r.get(0)).unwrap();
    assert_eq!(recorded.len(), 64, "a SHA-256 in hex");
    // A database migrated before checksums existed: the column is added and filled.
    db.execute_batch("ALTER TABLE schema_migrations DROP COLUMN checksum").unwrap();
    assert!(dropslot(&url, &["migrate"]).status.success());
    let again: String =
        db.query_row("SELECT checksum FROM schema_migrations WHERE version = 1", [], |r| r.get(0)).unwrap();
    assert_eq!(again, recorded);
    // An applied migration that changed since.
    db.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1", []).unwrap();
    let o = dropslot(&url, &["migrate"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("migration 1 (init) has changed since it was applied"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // A migration from a newer binary.
    db.execute("UPDATE schema_migrations SET checksum = ?1 WHERE version = 1", [&recorded]).unwrap();
    db.execute(
        "INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (999, 'future', 'x', 'y')",
        [],
    )
    .unwrap();
    let o = dropslot(&url, &["client", "create", "--name", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("migration 999 (future), which this binary does not know"));
}

/// `PostgreSQL`: cached principals and saved addresses are used only under the cache epoch
/// just read (one read shared by the requests waiting for it). With its counter row gone, a
/// request whose token is cached is a 500, never served from the cache; with the row back,
/// requests are served again (the shared reader survived the failed read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_missing_cache_epoch_refuses_requests_until_it_is_back() {
    let s = TestServer::start().await;
    if s.sqlite_file().is_some() {
        return; // SQLite's epoch is a file (cli::two_processes_on_one_database_…).
    }
    let body = request(&[500.0]);
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.scalar("WITH d AS (DELETE FROM cache_epoch RETURNING 1) SELECT count(*) FROM d"), 1);
    for _ in 0..3 {
        let r = s.preview(&body).await;
        crate::common::assert_envelope(&r, 500);
    }
    assert_eq!(
        s.scalar("WITH i AS (INSERT INTO cache_epoch (id, n) VALUES (1, 7) RETURNING 1) SELECT count(*) FROM i"),
        1
    );
    let r = s.preview(&body).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// `PostgreSQL` where autovacuum does not reach a table (turned off for it here, as it is on
/// this project's CI servers): the service analyses it once enough of it has changed and
/// vacuums it once enough of it is dead (issue 27), so its cached plans follow its size and
/// the dead rows do not pile up. Without the upkeep, neither `last_analyze` nor
/// `last_vacuum` is ever set (autovacuum sets only the `last_auto…` columns). A table once
/// analysed is not analysed again within the minute (`ANALYSE_EVERY`), though its changes
/// pass the threshold again: the vacuum comes alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_the_service_analyses_and_vacuums_its_hot_tables() {
    let s = TestServer::start().await;
    if s.sqlite_file().is_some() {
        return; // PostgreSQL's statistics.
    }
    s.scalar("ALTER TABLE drop_off_shipments SET (autovacuum_enabled = false); SELECT 0");
    let stamps = "SELECT (last_analyze IS NOT NULL)::int * 10 + (last_vacuum IS NOT NULL)::int
        FROM pg_stat_user_tables WHERE relname = 'drop_off_shipments'";
    assert_eq!(s.scalar(stamps), 0, "nothing analysed or vacuumed the table yet");
    // 2,400 shipments (24 asynchronous orders of 100): past the table's floor of 2,000
    // changes plus a tenth of its rows.
    for _ in 0..24 {
        let r = s.post("/requests/async", &s.token, &crate::async_orders::large(100)).await;
        assert_eq!(r.status, 202, "{}", r.body);
    }
    let written = async {
        while s.scalar("SELECT count(*) FROM drop_off_shipments") < 2400 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), written).await.expect("the orders are written");
    let codes: Vec<Value> =
        crate::common::psql(&s.db.url(), "SELECT string_agg(unique_id, ',') FROM drop_off_shipments")
            .trim()
            .split(',')
            .map(|c| Value::String(c.to_string()))
            .collect();
    let analysed = async {
        while s.scalar(stamps) < 10 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), analysed).await.expect("the table is analysed");
    // Each move rewrites its shipment's row: 2,400 dead rows, past the same threshold.
    for chunk in codes.chunks(1000) {
        let r = s.scenario("happy", &serde_json::json!({"drop_off_shipment_unique_ids": chunk})).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let vacuumed = async {
        while s.scalar(stamps) % 10 == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), vacuumed).await.expect("the table is vacuumed");
    // The moves' 2,400 changes passed the analyse threshold as they passed the vacuum's: a
    // round without the pace would have run `VACUUM (ANALYZE)` (or an `ANALYZE` before).
    let analyses = "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'drop_off_shipments'";
    assert!(
        s.scalar("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'drop_off_shipments'") > 2240,
        "the moves' changes are past the analyse threshold"
    );
    assert_eq!(s.scalar(analyses), 1, "analysed once within the minute");
}
