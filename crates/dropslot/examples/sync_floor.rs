//! The floor `POST /requests/sync` is compared with on SQLite (issue 33): a bare in-process
//! rusqlite writer that writes the same rows as the service's orders, with the same
//! durability (WAL, `synchronous = FULL`, foreign keys on) and the same grouping (a
//! `BEGIN IMMEDIATE` transaction of GROUP orders, each in its own savepoint, as the store's
//! group-commit writer does), and nothing else: no HTTP, no JSON, no validation, no quote, no
//! reads, no channel between threads.
//!
//! "The same rows": the rows of the newest order in TEMPLATE (a database the service wrote,
//! opened read-only): its order, pick-up shipment and its event, shipment orders, drop-off
//! shipments and their events, parcels and recipient-message rows, copied column for column
//! with the keys remapped and every unique text (`unique_id`, `label_token`, `pick_up_code`,
//! `message_id`) replaced by a fresh one of the same length and shape (time-ordered, then
//! random characters, as the service's: see `shared/fresh.rs`); the pick-up's saved
//! address goes through the same upsert the service runs.
//!
//! ```text
//! dropslot migrate --database sqlite:///tmp/floor.db
//! dropslot client create --name floor --database sqlite:///tmp/floor.db
//! cargo run --release -p dropslot --example sync_floor -- /tmp/floor.db /tmp/template.db 50 10
//! ```
//!
//! Arguments: DB (migrated, written), TEMPLATE (read), GROUP (orders per transaction),
//! SECONDS. Prints `SYNC_FLOOR orders=… seconds=… per_s=… group=… commits=…`.

use std::time::{Duration, Instant};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, params_from_iter};

#[path = "shared/fresh.rs"]
mod fresh;
use fresh::{Fresh, UNIQUE};

/// One table's template rows of the newest order, as columns and values.
struct Template {
    table: &'static str,
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
}

impl Template {
    fn read(t: &Connection, table: &'static str, filter: &str, args: &[i64]) -> Template {
        let mut st = t.prepare(&format!("SELECT * FROM {table} WHERE {filter} ORDER BY id")).unwrap();
        let columns: Vec<String> = st.column_names().iter().map(ToString::to_string).collect();
        let n = columns.len();
        let rows = st
            .query_map(params_from_iter(args), |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        Template { table, columns, rows }
    }

    fn insert_sql(&self) -> String {
        let cols: Vec<&str> = self.columns.iter().map(String::as_str).filter(|c| *c != "id").collect();
        let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
        format!("INSERT INTO {} ({}) VALUES ({})", self.table, cols.join(", "), marks.join(", "))
    }

    fn id(&self, row: usize) -> i64 {
        match self.rows[row][self.col("id")] {
            Value::Integer(i) => i,
            ref v => panic!("{}.id is {v:?}", self.table),
        }
    }

    fn col(&self, name: &str) -> usize {
        self.columns.iter().position(|c| c == name).unwrap_or_else(|| panic!("{}.{name}", self.table))
    }
}

/// Inserts `row` of `rows`, with `keys` (column → value) overriding and unique texts renewed;
/// the new row's id.
fn insert(c: &Connection, rows: &Template, row: usize, keys: &[(&str, Value)], fresh: &mut Fresh) -> i64 {
    let mut values = Vec::with_capacity(rows.columns.len());
    for (i, name) in rows.columns.iter().enumerate() {
        if name == "id" {
            continue;
        }
        let v = &rows.rows[row][i];
        if let Some((_, k)) = keys.iter().find(|(k, _)| k == name) {
            values.push(k.clone());
        } else if let (true, Value::Text(old)) = (UNIQUE.contains(&name.as_str()), v) {
            values.push(Value::Text(fresh.next(old)));
        } else {
            values.push(v.clone());
        }
    }
    c.prepare_cached(&rows.insert_sql()).unwrap().execute(params_from_iter(values)).unwrap();
    c.last_insert_rowid()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, template, group, seconds] = &args[..] else {
        eprintln!("usage: sync_floor DB TEMPLATE GROUP SECONDS");
        std::process::exit(2);
    };
    let group: usize = group.parse().expect("GROUP is a number");
    let seconds: f64 = seconds.parse().expect("SECONDS is a number");
    let t = Connection::open_with_flags(template, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let order: i64 = t.query_row("SELECT max(id) FROM orders", [], |r| r.get(0)).expect("the template holds an order");
    let orders = Template::read(&t, "orders", "id = ?1", &[order]);
    let pick_ups = Template::read(&t, "pick_up_shipments", "order_id = ?1", &[order]);
    let pick_up = pick_ups.id(0);
    let shipment_orders = Template::read(&t, "shipment_orders", "order_id = ?1", &[order]);
    let drop_offs = Template::read(
        &t,
        "drop_off_shipments",
        "shipment_order_id IN (SELECT id FROM shipment_orders WHERE order_id = ?1)",
        &[order],
    );
    let pick_up_events =
        Template::read(&t, "shipment_events", "shipment_kind = 'pick_up' AND shipment_id = ?1", &[pick_up]);
    let per_drop_off: Vec<(Template, Template, Template)> = (0..drop_offs.rows.len())
        .map(|i| {
            let d = drop_offs.id(i);
            (
                Template::read(&t, "shipment_events", "shipment_kind = 'drop_off' AND shipment_id = ?1", &[d]),
                Template::read(&t, "parcels", "drop_off_shipment_id = ?1", &[d]),
                Template::read(&t, "notifications", "drop_off_id = ?1", &[d]),
            )
        })
        .collect();
    let (client, mode, text, normalized): (i64, String, String, String) = t
        .query_row(
            "SELECT client_id, mode, text, normalized FROM saved_addresses WHERE id = ?1",
            [pick_ups.rows[0][pick_ups.col("saved_address_id")].clone()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let rows_per_order = 2
        + pick_up_events.rows.len()
        + shipment_orders.rows.len()
        + drop_offs.rows.len()
        + per_drop_off.iter().map(|(e, p, n)| e.rows.len() + p.rows.len() + n.rows.len()).sum::<usize>()
        + 1;

    let c = Connection::open(db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
    )
    .unwrap();
    // The client the template's rows belong to (`dropslot client create` on the fresh database).
    let known: bool = c.query_row("SELECT count(*) > 0 FROM clients WHERE id = ?1", [client], |r| r.get(0)).unwrap();
    assert!(known, "client {client} is not in {db}: create it with `dropslot client create`");
    let mut fresh = Fresh::striped(order as u64, 0, 1);
    let (mut written, mut commits) = (0u64, 0u64);
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    while Instant::now() < until {
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        for _ in 0..group {
            c.execute_batch("SAVEPOINT job").unwrap();
            let created_at = orders.rows[0][orders.col("created_at")].clone();
            let saved: i64 = c
                .prepare_cached(
                    "INSERT INTO saved_addresses (client_id, mode, text, normalized, created_at, last_used_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                     ON CONFLICT (client_id, mode, normalized)
                     DO UPDATE SET use_count = use_count + 1, last_used_at = excluded.last_used_at
                     RETURNING id",
                )
                .unwrap()
                .query_row(rusqlite::params![client, mode, text, normalized, created_at], |r| r.get(0))
                .unwrap();
            let o = insert(&c, &orders, 0, &[], &mut fresh);
            let p = insert(
                &c,
                &pick_ups,
                0,
                &[("order_id", Value::Integer(o)), ("saved_address_id", Value::Integer(saved))],
                &mut fresh,
            );
            for i in 0..pick_up_events.rows.len() {
                insert(&c, &pick_up_events, i, &[("shipment_id", Value::Integer(p))], &mut fresh);
            }
            for (i, (events, parcels, messages)) in per_drop_off.iter().enumerate() {
                let so = insert(&c, &shipment_orders, i, &[("order_id", Value::Integer(o))], &mut fresh);
                let unique = match &drop_offs.rows[i][drop_offs.col("unique_id")] {
                    Value::Text(old) => Value::Text(fresh.next(old)),
                    v => panic!("drop_off_shipments.unique_id is {v:?}"),
                };
                let d = insert(
                    &c,
                    &drop_offs,
                    i,
                    &[
                        ("shipment_order_id", Value::Integer(so)),
                        ("pick_up_shipment_id", Value::Integer(p)),
                        ("unique_id", unique.clone()),
                    ],
                    &mut fresh,
                );
                for j in 0..events.rows.len() {
                    insert(&c, events, j, &[("shipment_id", Value::Integer(d))], &mut fresh);
                }
                for j in 0..parcels.rows.len() {
                    insert(&c, parcels, j, &[("drop_off_shipment_id", Value::Integer(d))], &mut fresh);
                }
                for j in 0..messages.rows.len() {
                    insert(
                        &c,
                        messages,
                        j,
                        &[("drop_off_id", Value::Integer(d)), ("shipment_unique_id", unique.clone())],
                        &mut fresh,
                    );
                }
            }
            c.execute_batch("RELEASE job").unwrap();
            written += 1;
        }
        c.execute_batch("COMMIT").unwrap();
        commits += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "SYNC_FLOOR orders={written} seconds={secs:.3} per_s={:.1} group={group} commits={commits} rows_per_order={rows_per_order}",
        written as f64 / secs
    );
}
