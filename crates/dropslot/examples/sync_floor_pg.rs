//! The floor `POST /requests/sync` is compared with on PostgreSQL (issue 33): a bare
//! tokio-postgres pipeline that writes the same rows as the service's orders, with the same
//! durability (the server's `synchronous_commit`, on) and the same grouping (WRITERS
//! connections, as `[postgres] order_writers`, each committing transactions of GROUP orders,
//! as the store's batches grouped them in the run), and nothing else: no HTTP, no JSON
//! parsing of requests, no validation, no quote, no reads, no queue between tasks.
//!
//! "The same rows": the rows of the newest order in TEMPLATE (the database the service wrote):
//! its order, pick-up shipment and its event, shipment orders, drop-off shipments and their
//! events, parcels and recipient-message rows, copied column for column with the keys
//! remapped and every unique text (`unique_id`, `label_token`, `pick_up_code`, `message_id`)
//! replaced by a fresh one of the same length and shape (`shared/fresh.rs`); the pick-up's
//! saved address goes through the same `INSERT … ON CONFLICT DO NOTHING` the service runs.
//!
//! A transaction is two round trips, the fewest it can be: `BEGIN` with the ids of the
//! group's parent rows (orders, pick-ups, shipment orders, drop-offs: `nextval` of their
//! identity sequences), then every table's rows (one `INSERT … SELECT FROM
//! jsonb_populate_recordset` a table) and the `COMMIT`, sent together.
//!
//! ```text
//! dropslot migrate --database postgres://…/floor
//! dropslot client create --name floor --database postgres://…/floor
//! cargo run --release -p dropslot --example sync_floor_pg -- postgres://…/floor postgres://…/template 20 10 4
//! ```
//!
//! Arguments: DB (migrated, written), TEMPLATE (read), GROUP (orders per transaction),
//! SECONDS, WRITERS (connections). Prints `SYNC_FLOOR orders=… seconds=… per_s=… group=…
//! commits=… writers=…`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use serde_json::{Map, Value};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Statement};

#[path = "shared/fresh.rs"]
mod fresh;
use fresh::{Fresh, UNIQUE};

type Row = Map<String, Value>;

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("sync_floor_pg: connection: {e}");
        }
    });
    client
}

/// A table's template rows, as JSON objects.
async fn rows(t: &Client, table: &str, filter: &str, arg: i64) -> Vec<Row> {
    let sql = format!("SELECT to_jsonb(t)::text FROM {table} t WHERE {filter} ORDER BY id");
    let mut out = Vec::new();
    for r in t.query(&sql, &[&arg]).await.unwrap() {
        let text: String = r.get(0);
        let Value::Object(row) = serde_json::from_str(&text).unwrap() else { panic!("{table}: not an object") };
        out.push(row);
    }
    out
}

fn int(row: &Row, column: &str) -> i64 {
    row.get(column).and_then(Value::as_i64).unwrap_or_else(|| panic!("{column} is {:?}", row.get(column)))
}

/// A template drop-off with the index of its shipment order, its events, parcels and messages.
type DropOff = (Row, usize, Vec<Row>, Vec<Row>, Vec<Row>);

/// The template order's rows, and each child's parent by index.
struct Template {
    order: Row,
    pick_up: Row,
    pick_up_events: Vec<Row>,
    shipment_orders: Vec<Row>,
    drop_offs: Vec<DropOff>,
    saved_address: Row,
}

impl Template {
    async fn read(t: &Client) -> Template {
        let order: i64 = t.query_one("SELECT max(id) FROM orders", &[]).await.unwrap().get(0);
        let order_row = rows(t, "orders", "id = $1", order).await.remove(0);
        let pick_up = rows(t, "pick_up_shipments", "order_id = $1", order).await.remove(0);
        let pick_up_events =
            rows(t, "shipment_events", "shipment_kind = 'pick_up' AND shipment_id = $1", int(&pick_up, "id")).await;
        let shipment_orders = rows(t, "shipment_orders", "order_id = $1", order).await;
        let mut drop_offs = Vec::new();
        let filter = "shipment_order_id IN (SELECT id FROM shipment_orders WHERE order_id = $1)";
        for d in rows(t, "drop_off_shipments", filter, order).await {
            let id = int(&d, "id");
            let so = shipment_orders.iter().position(|s| int(s, "id") == int(&d, "shipment_order_id")).unwrap();
            let events = rows(t, "shipment_events", "shipment_kind = 'drop_off' AND shipment_id = $1", id).await;
            let parcels = rows(t, "parcels", "drop_off_shipment_id = $1", id).await;
            let messages = rows(t, "notifications", "drop_off_id = $1", id).await;
            drop_offs.push((d, so, events, parcels, messages));
        }
        let saved_address = rows(t, "saved_addresses", "id = $1", int(&pick_up, "saved_address_id")).await.remove(0);
        Template { order: order_row, pick_up, pick_up_events, shipment_orders, drop_offs, saved_address }
    }

    fn rows_per_order(&self) -> usize {
        2 + self.pick_up_events.len()
            + self.shipment_orders.len()
            + self.drop_offs.iter().map(|(_, _, e, p, m)| 1 + e.len() + p.len() + m.len()).sum::<usize>()
            + 1
    }
}

/// The tables written, parents first; the first four get their ids from their sequences.
const TABLES: [&str; 7] = [
    "orders",
    "pick_up_shipments",
    "shipment_orders",
    "drop_off_shipments",
    "shipment_events",
    "parcels",
    "notifications",
];

/// One writer's prepared statements.
struct Statements {
    ids: Statement,
    saved: Statement,
    /// By table (`TABLES`); none for a table the template order has no row in.
    inserts: Vec<Option<Statement>>,
}

impl Statements {
    async fn prepare(c: &Client, t: &Template) -> Statements {
        let ids = c
            .prepare(
                "SELECT array(SELECT nextval(pg_get_serial_sequence('orders', 'id')) FROM generate_series(1, $1::int)),
                        array(SELECT nextval(pg_get_serial_sequence('pick_up_shipments', 'id'))
                              FROM generate_series(1, $1::int)),
                        array(SELECT nextval(pg_get_serial_sequence('shipment_orders', 'id'))
                              FROM generate_series(1, $2::int)),
                        array(SELECT nextval(pg_get_serial_sequence('drop_off_shipments', 'id'))
                              FROM generate_series(1, $3::int))",
            )
            .await
            .unwrap();
        let saved = c
            .prepare(
                "INSERT INTO saved_addresses (client_id, mode, text, normalized, created_at, created_offset)
                 SELECT client_id, mode, text, normalized, created_at, created_offset
                 FROM jsonb_populate_record(NULL::saved_addresses, $1::text::jsonb)
                 ON CONFLICT (client_id, mode, normalized) DO NOTHING",
            )
            .await
            .unwrap();
        let like: [Option<&Row>; 7] = [
            Some(&t.order),
            Some(&t.pick_up),
            t.shipment_orders.first(),
            t.drop_offs.first().map(|d| &d.0),
            t.pick_up_events.first().or_else(|| t.drop_offs.iter().find_map(|d| d.2.first())),
            t.drop_offs.iter().find_map(|d| d.3.first()),
            t.drop_offs.iter().find_map(|d| d.4.first()),
        ];
        let mut inserts = Vec::new();
        for (i, (table, row)) in TABLES.iter().zip(like).enumerate() {
            let Some(row) = row else {
                inserts.push(None);
                continue;
            };
            // Parents carry their allocated ids; the others take theirs from the default.
            let cols: Vec<&str> = row.keys().map(String::as_str).filter(|c| i < 4 || *c != "id").collect();
            let cols = cols.join(", ");
            inserts.push(Some(
                c.prepare(&format!(
                    "INSERT INTO {table} ({cols}) SELECT {cols} FROM jsonb_populate_recordset(NULL::{table}, $1::text::jsonb)"
                ))
                .await
                .unwrap(),
            ));
        }
        Statements { ids, saved, inserts }
    }
}

/// `row` with `keys` set and its unique texts renewed.
fn copy(row: &Row, keys: &[(&str, Value)], fresh: &mut Fresh) -> Value {
    let mut out = row.clone();
    for (name, v) in &mut out {
        if let Some((_, k)) = keys.iter().find(|(k, _)| k == name) {
            *v = k.clone();
        } else if let (true, Value::String(old)) = (UNIQUE.contains(&name.as_str()), &*v) {
            *v = Value::String(fresh.next(old));
        }
    }
    Value::Object(out)
}

/// One group's rows, table by table (`TABLES`), as JSON arrays.
fn group_rows(t: &Template, ids: &[Vec<i64>; 4], saved: i64, group: usize, fresh: &mut Fresh) -> Vec<String> {
    let mut tables: [Vec<Value>; 7] = Default::default();
    let (per_so, per_do) = (t.shipment_orders.len(), t.drop_offs.len());
    for k in 0..group {
        let (o, p) = (Value::from(ids[0][k]), Value::from(ids[1][k]));
        tables[0].push(copy(&t.order, &[("id", o.clone())], fresh));
        tables[1].push(copy(
            &t.pick_up,
            &[("id", p.clone()), ("order_id", o.clone()), ("saved_address_id", Value::from(saved))],
            fresh,
        ));
        for e in &t.pick_up_events {
            tables[4].push(copy(e, &[("shipment_id", p.clone())], fresh));
        }
        for (j, so) in t.shipment_orders.iter().enumerate() {
            tables[2].push(copy(so, &[("id", Value::from(ids[2][k * per_so + j])), ("order_id", o.clone())], fresh));
        }
        for (j, (d, so, events, parcels, messages)) in t.drop_offs.iter().enumerate() {
            let id = Value::from(ids[3][k * per_do + j]);
            let so = Value::from(ids[2][k * per_so + so]);
            let row =
                copy(d, &[("id", id.clone()), ("shipment_order_id", so), ("pick_up_shipment_id", p.clone())], fresh);
            let unique = row["unique_id"].clone();
            tables[3].push(row);
            for e in events {
                tables[4].push(copy(e, &[("shipment_id", id.clone())], fresh));
            }
            for x in parcels {
                tables[5].push(copy(x, &[("drop_off_shipment_id", id.clone())], fresh));
            }
            for m in messages {
                tables[6].push(copy(m, &[("drop_off_id", id.clone()), ("shipment_unique_id", unique.clone())], fresh));
            }
        }
    }
    tables.into_iter().map(|rows| Value::Array(rows).to_string()).collect()
}

/// One writer: transactions of `group` orders until `until`; orders and commits written.
async fn writer(url: String, t: Arc<Template>, group: usize, until: Instant, (index, of): (u64, u64)) -> (u64, u64) {
    let c = connect(&url).await;
    let st = Statements::prepare(&c, &t).await;
    let mut fresh = Fresh::striped(index, index, of);
    let saved = Value::Object(t.saved_address.clone()).to_string();
    let saved_id: i64 = {
        c.execute(&st.saved, &[&saved]).await.unwrap();
        let (client, mode, normalized) = (
            int(&t.saved_address, "client_id"),
            t.saved_address["mode"].as_str().unwrap(),
            t.saved_address["normalized"].as_str().unwrap(),
        );
        c.query_one(
            "SELECT id FROM saved_addresses WHERE client_id = $1 AND mode = $2 AND normalized = $3",
            &[&client, &mode, &normalized],
        )
        .await
        .unwrap()
        .get(0)
    };
    let (n, so, d) = (group as i32, (group * t.shipment_orders.len()) as i32, (group * t.drop_offs.len()) as i32);
    let (mut orders, mut commits) = (0u64, 0u64);
    let counts: [&(dyn ToSql + Sync); 3] = [&n, &so, &d];
    let saved_param: [&(dyn ToSql + Sync); 1] = [&saved];
    while Instant::now() < until {
        // Round trip 1: BEGIN and the parents' ids.
        let ((), row) = tokio::try_join!(c.batch_execute("BEGIN"), c.query_one(&st.ids, &counts)).unwrap();
        let ids: [Vec<i64>; 4] = [row.get(0), row.get(1), row.get(2), row.get(3)];
        let tables = group_rows(&t, &ids, saved_id, group, &mut fresh);
        // Round trip 2: the saved address, every table's rows and the COMMIT, pipelined.
        let params: Vec<[&(dyn ToSql + Sync); 1]> = tables.iter().map(|rows| [rows as &(dyn ToSql + Sync)]).collect();
        let inserts = try_join_all(
            std::iter::once(c.execute(&st.saved, &saved_param))
                .chain(st.inserts.iter().zip(&params).filter_map(|(s, p)| Some(c.execute(s.as_ref()?, p)))),
        );
        tokio::try_join!(inserts, c.batch_execute("COMMIT")).unwrap();
        orders += group as u64;
        commits += 1;
    }
    (orders, commits)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, template, group, seconds, writers] = &args[..] else {
        eprintln!("usage: sync_floor_pg DB TEMPLATE GROUP SECONDS WRITERS");
        std::process::exit(2);
    };
    let group: usize = group.parse().expect("GROUP is a number");
    let seconds: f64 = seconds.parse().expect("SECONDS is a number");
    let writers: u64 = writers.parse().expect("WRITERS is a number");
    let t = Arc::new(Template::read(&connect(template).await).await);
    let client = int(&t.order, "client_id");
    let c = connect(db).await;
    let known: bool = c.query_one("SELECT count(*) > 0 FROM clients WHERE id = $1", &[&client]).await.unwrap().get(0);
    assert!(known, "client {client} is not in {db}: create it with `dropslot client create`");
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    let done = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (db, t, done) = (db.clone(), t.clone(), done.clone());
            tokio::spawn(async move {
                let (orders, commits) = writer(db, t, group, until, (w, writers)).await;
                done.fetch_add(orders, Ordering::Relaxed);
                commits
            })
        })
        .collect();
    let mut commits = 0;
    for task in tasks {
        commits += task.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let written = done.load(Ordering::Relaxed);
    println!(
        "SYNC_FLOOR orders={written} seconds={secs:.3} per_s={:.1} group={group} commits={commits} writers={writers} rows_per_order={}",
        written as f64 / secs,
        t.rows_per_order()
    );
}
