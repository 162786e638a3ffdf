//! `dropslot backup` as an operator runs it: the real binary copying the file of a real
//! `serve` that keeps taking orders, then a `serve` on the copy. `SQLite` only; on
//! `PostgreSQL` the command refuses and names `pg_dump`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::cli::{Serve, dropslot, spawn_serve_with};
use crate::common::{API, TestDb, request};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

/// Files in `dir` whose name holds `.tmp`: what a backup leaves behind when it cleans up badly.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect()
}

/// Orders stream into a real `serve` from eight workers; the backup runs while they go on.
/// Every order acknowledged before the command started is in the copy, the copy is whole
/// (integrity check, no partial order), and a `serve` on it answers a preview and a read.
#[test]
fn sqlite_a_backup_under_a_stream_of_orders_holds_every_acknowledged_order() {
    let test_db = TestDb::fresh();
    let TestDb::Sqlite { path, .. } = &test_db else { return };
    let db = test_db.url();
    let (child, base, token) = spawn_serve_with(&db, &[]);
    let server = Serve(child);
    let token = token.expect("a demo token on the fresh database");
    let copy = path.with_file_name("backup-copy.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (before, during, out) = rt.block_on(async {
        let http = reqwest::Client::new();
        let url = format!("{base}{API}/requests/sync");
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let (http, url, token, tx, stop) = (http.clone(), url.clone(), token.clone(), tx.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let res = http.post(&url).bearer_auth(&token).json(&request(&[500.0])).send().await.unwrap();
                        assert_eq!(res.status(), 201, "the server keeps taking orders during the backup");
                        let v: Value = res.json().await.unwrap();
                        let id = v["object"]["unique_id"].as_str().expect("unique_id").to_string();
                        if tx.send(id).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        // Acknowledged (a 201 read in full) before the command starts: these must be copied.
        let mut before = Vec::new();
        while before.len() < 200 {
            before.push(rx.recv().await.expect("the workers acknowledge orders"));
        }
        while let Ok(id) = rx.try_recv() {
            before.push(id);
        }
        let (db, copy) = (db.clone(), copy.to_str().unwrap().to_string());
        let out = tokio::task::spawn_blocking(move || dropslot(&db, &["backup", &copy])).await.unwrap();
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.await.unwrap();
        }
        let mut during = 0;
        while rx.recv().await.is_some() {
            during += 1;
        }
        (before, during, out)
    });
    drop(server);

    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let size = std::fs::metadata(&copy).unwrap().len();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.starts_with(&copy.display().to_string()), "{line}");
    assert!(line.contains(&format!("{size} bytes")) && line.contains(" pages"), "{line}");
    assert!(temporaries(copy.parent().unwrap()).is_empty(), "{:?}", temporaries(copy.parent().unwrap()));

    let conn = rusqlite::Connection::open(&copy).expect("the copy opens");
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let mut missing = Vec::new();
    for id in &before {
        let n: i64 = conn.query_row("SELECT count(*) FROM orders WHERE unique_id = ?1", [id], |r| r.get(0)).unwrap();
        if n != 1 {
            missing.push(id);
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged orders not in the copy: {missing:?}",
        missing.len(),
        before.len()
    );
    // One snapshot: no order without its pick-up, drop-off and parcel.
    let partial = crate::common::partial_orders(&conn);
    assert_eq!(partial, 0, "{during} orders were acknowledged while the backup ran or after");
    drop(conn);

    // Restored: a server on the copy knows the token and the orders.
    let restored = format!("sqlite://{}", copy.display());
    let (child, base, demo) = spawn_serve_with(&restored, &[]);
    let _restored = Serve(child);
    assert!(demo.is_none(), "the copy holds the demo client: no new one");
    rt.block_on(async {
        let http = reqwest::Client::new();
        let r = http
            .post(format!("{base}{API}/requests/preview"))
            .bearer_auth(&token)
            .json(&request(&[500.0]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let order = &before[before.len() / 2];
        let r = http.get(format!("{base}{API}/orders/{order}")).bearer_auth(&token).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["object"]["unique_id"].as_str(), Some(order.as_str()), "{v}");
    });
}

/// An existing file is never replaced without `--force`: exit 1, one line naming the flag,
/// the file untouched and no temporary left; with `--force` it becomes the copy.
#[test]
fn sqlite_backup_refuses_an_existing_path_without_force() {
    let test_db = TestDb::fresh();
    let TestDb::Sqlite { path, .. } = &test_db else { return };
    let db = test_db.url();
    assert!(dropslot(&db, &["migrate"]).status.success());
    let target = path.with_file_name("existing.db");
    std::fs::write(&target, b"last night's backup").unwrap();
    let shown = target.to_str().unwrap();

    let out = dropslot(&db, &["backup", shown]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("dropslot: ") && err.contains("already exists") && err.contains("--force"), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&target).unwrap(), b"last night's backup");
    assert!(temporaries(target.parent().unwrap()).is_empty());

    let out = dropslot(&db, &["backup", "--force", shown]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let copy = rusqlite::Connection::open(&target).unwrap();
    let migrations: i64 = copy.query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0)).unwrap();
    assert_eq!(migrations, test_db.scalar("SELECT count(*) FROM schema_migrations"));

    // Nor is the database itself, even with `--force`.
    let out = dropslot(&db, &["backup", "--force", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the database itself"), "{}", stderr(&out));
}

/// On `PostgreSQL` the command refuses at once, pointing to `pg_dump` and the operations
/// guide, and writes no file.
#[test]
fn postgres_backup_is_refused_with_the_pg_dump_hint() {
    let test_db = TestDb::fresh();
    let TestDb::Postgres { url, .. } = &test_db else { return };
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("backup.db");
    let out = dropslot(url, &["backup", target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("dropslot: ") && err.contains("pg_dump") && err.contains("docs/operations.md"), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file, partial or whole");
}
