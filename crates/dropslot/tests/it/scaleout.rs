//! Scale-out (issue 10): two real `dropslot serve` processes on one `PostgreSQL` database,
//! hit at the same moment for the same entities. Each test skips on `SQLite`, whose deployment
//! is one process per file (docs/operations.md).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Child;

use serde_json::{Value, json};

use crate::common::{API, TestDb, request, request_with_codes};
use crate::receiver::{Answer, Received, Receiver};

/// Two `serve` processes on one fresh `PostgreSQL` database, killed when dropped.
struct Cluster {
    procs: Vec<Option<Child>>,
    bases: Vec<String>,
    token: String,
    http: reqwest::Client,
    _config: tempfile::TempDir,
    db: TestDb,
    /// Each process's own environment (what `restart` starts it with again).
    envs: Vec<Vec<(String, String)>>,
}

impl Cluster {
    /// `None` on `SQLite`. `config` is a TOML fragment every process reads (`DROPSLOT_CONFIG`).
    fn start(config: &str) -> Option<Cluster> {
        Self::start_with(config, [&[], &[]])
    }

    /// [`Cluster::start`], with more environment for each process (`DROPSLOT_NOW`, say).
    fn start_with(config: &str, own: [&[(&str, &str)]; 2]) -> Option<Cluster> {
        let db = TestDb::fresh();
        if !matches!(db, TestDb::Postgres { .. }) {
            eprintln!("skipped: scale-out needs DROPSLOT_TEST_DATABASE_URL=postgres://…");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dropslot.toml");
        std::fs::write(&path, crate::common::test_config(config)).unwrap();
        let path = path.display().to_string();
        let env = [("DROPSLOT_CONFIG", path.as_str()), ("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE", "1")];
        let [a, b] = own.map(|own| env.iter().chain(own).copied().collect::<Vec<_>>());
        // One after the other: the first finds the database empty and prints the demo token.
        let (first, base_a, token) = crate::cli::spawn_serve_with(&db.url(), &a);
        let (second, base_b, again) = crate::cli::spawn_serve_with(&db.url(), &b);
        assert!(again.is_none(), "the second process found the database already set up");
        let owned = |e: &[(&str, &str)]| e.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
        let envs = vec![owned(&a), owned(&b)];
        Some(Cluster {
            envs,
            procs: vec![Some(first), Some(second)],
            bases: vec![base_a, base_b],
            token: token.expect("a demo token"),
            http: reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().unwrap(),
            _config: dir,
            db,
        })
    }

    fn api(&self, process: usize, path: &str) -> String {
        format!("{}{API}{path}", self.bases[process % 2])
    }

    /// `POST` to one process: (status, body, whether it was a replay).
    async fn post(&self, process: usize, path: &str, body: &Value, key: Option<&str>) -> (u16, Value, bool) {
        let mut req = self.http.post(self.api(process, path)).bearer_auth(&self.token).json(body);
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        let res = req.send().await.expect("the process answers");
        let status = res.status().as_u16();
        let replayed = res.headers().get("idempotent-replayed").is_some_and(|v| v == "true");
        (status, res.json().await.expect("a JSON body"), replayed)
    }

    /// A counter from one process's `/metrics` (0 when it has not been counted yet).
    async fn metric(&self, process: usize, line: &str) -> i64 {
        let text =
            self.http.get(format!("{}/metrics", self.bases[process])).send().await.unwrap().text().await.unwrap();
        text.lines().find_map(|l| l.strip_prefix(line).and_then(|v| v.trim().parse().ok())).unwrap_or(0)
    }

    fn kill(&mut self, process: usize) {
        if let Some(mut child) = self.procs[process].take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Starts a killed process again, on a port of its own, with its environment.
    fn restart(&mut self, process: usize) {
        assert!(self.procs[process].is_none(), "process {process} is running");
        let env: Vec<(&str, &str)> = self.envs[process].iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (child, base, _) = crate::cli::spawn_serve_with(&self.db.url(), &env);
        self.procs[process] = Some(child);
        self.bases[process] = base;
    }

    /// Subscribes a receiver to every event kind (test mode); the endpoint's id.
    async fn subscribe(&self, url: &str) -> i64 {
        let (status, body, _) = self.post(0, "/webhooks", &json!({"url": url, "events": ["*"]}), None).await;
        assert_eq!(status, 201, "{body}");
        body["object"]["id"].as_i64().expect("an endpoint id")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in 0..self.procs.len() {
            if let Some(mut child) = self.procs[p].take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn tracking(order: &Value) -> String {
    order["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().expect("a tracking code").to_string()
}

/// The webhook-ids that arrived more than once among the 2xx answers.
fn duplicates(got: &[Received]) -> Vec<String> {
    let mut seen = BTreeMap::<&str, usize>::new();
    for r in got.iter().filter(|r| r.ok()) {
        *seen.entry(r.id()).or_default() += 1;
    }
    seen.into_iter().filter(|(_, n)| *n > 1).map(|(id, _)| id.to_string()).collect()
}

/// Each shipment's events arrived in sequence order (the 2xx answers, in arrival order).
fn assert_in_order(got: &[Received]) {
    let mut last = BTreeMap::<String, i64>::new();
    for r in got.iter().filter(|r| r.ok()) {
        let body = r.json();
        let Some(seq) = body["data"]["sequence"].as_i64() else { continue };
        let code = body["data"]["tracking_code"].as_str().unwrap_or_default().to_string();
        let before = last.insert(code.clone(), seq).unwrap_or(0);
        assert!(seq > before, "{code}: event {seq} arrived after event {before}");
    }
}

/// Orders racing for one custom code from both processes at once: exactly one wins, the
/// other gets the CONTRACT's 422 at the parcel's path, and one parcel holds the code.
#[tokio::test(flavor = "multi_thread")]
async fn a_custom_code_raced_from_two_processes_has_one_winner() {
    let Some(c) = Cluster::start("") else { return };
    for round in 0..20 {
        let code = format!("RACE{round:012}");
        let body = request_with_codes(&[&code]);
        let (a, b) = tokio::join!(c.post(0, "/requests/sync", &body, None), c.post(1, "/requests/sync", &body, None));
        let mut statuses = [a.0, b.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [201, 422], "round {round}: {} / {}", a.1, b.1);
        let loser = if a.0 == 422 { &a.1 } else { &b.1 };
        assert!(loser["errors"]["drop_offs.0.parcels.0.custom_code"].is_array(), "{loser}");
        let held = c.db.scalar(&format!("SELECT count(*) FROM parcels WHERE custom_code = '{code}'"));
        assert_eq!(held, 1, "round {round}");
    }
    assert_eq!(c.db.scalar("SELECT count(*) FROM orders"), 20, "the losers left nothing behind");
}

/// 40 orders asking for a 7-stop slot, sent at once to two processes (issue 28): exactly 7
/// are written, whichever process took them, and the rest get the 422 at the slot's path.
#[tokio::test(flavor = "multi_thread")]
async fn a_seven_stop_slot_raced_from_two_processes_takes_seven_orders() {
    let admin = [("DROPSLOT_ADMIN_TOKEN", crate::common::ADMIN_TOKEN)];
    let Some(c) = Cluster::start_with("", [&admin, &admin]) else { return };
    let limit = json!({"zone": "TOR-DT", "time_slot_code": "TOR-DT-EV", "date": "2026-11-23", "stops": 7});
    let res = c.http.put(c.api(1, "/admin/capacity")).bearer_auth(crate::common::ADMIN_TOKEN).json(&limit).send().await;
    assert_eq!(res.unwrap().status(), 200);
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["scheduled_date"] = json!("2026-11-23");
    body["drop_offs"][0]["time_slot_code"] = json!("TOR-DT-EV");
    let sends = (0..40).map(|i| c.post(i % 2, "/requests/sync", &body, None));
    let answers = futures_util::future::join_all(sends).await;
    let by_process: Vec<usize> =
        (0..2).map(|p| answers.iter().skip(p).step_by(2).filter(|a| a.0 == 201).count()).collect();
    assert_eq!(by_process.iter().sum::<usize>(), 7, "accepted per process: {by_process:?}");
    for (status, body, _) in answers.iter().filter(|a| a.0 != 201) {
        assert_eq!(*status, 422, "{body}");
        assert!(body["errors"]["drop_offs.0.time_slot_code"].is_array(), "{body}");
    }
    let written = c.db.scalar("SELECT count(*) FROM drop_off_shipments WHERE slot_code = 'TOR-DT-EV'");
    assert_eq!(written, 7);
    let counted = c.db.scalar("SELECT stops FROM slot_fill WHERE kind = 'drop_off' AND slot_code = 'TOR-DT-EV'");
    assert_eq!(counted, 7, "the counter agrees with the rows");
}

/// The same request with one Idempotency-Key, retried 8 times at once across both
/// processes: one order, and every answer carries its ids.
#[tokio::test(flavor = "multi_thread")]
async fn idempotent_retries_across_two_processes_create_one_order() {
    let Some(c) = Cluster::start("") else { return };
    for round in 0..10 {
        let key = format!("retry-{round}");
        let body = request(&[500.0, 1500.0]);
        let answers =
            futures_util::future::join_all((0..8).map(|i| c.post(i, "/requests/sync", &body, Some(&key)))).await;
        let ids: BTreeSet<String> = answers
            .iter()
            .map(|(status, body, _)| {
                assert_eq!(*status, 201, "round {round}: {body}");
                body["object"]["unique_id"].as_str().expect("an order id").to_string()
            })
            .collect();
        assert_eq!(ids.len(), 1, "round {round}: every answer names the same order: {ids:?}");
        let fresh = answers.iter().filter(|(_, _, replayed)| !replayed).count();
        assert_eq!(fresh, 1, "round {round}: one answer created it, the others are replays");
    }
    assert_eq!(c.db.scalar("SELECT count(*) FROM orders"), 10);
    assert_eq!(c.db.scalar("SELECT count(*) FROM parcels"), 20);
}

/// Events from orders and sandbox moves made on both processes are delivered by both
/// dispatchers together (the receiver holds requests until more are in flight than one
/// process may send to one endpoint), each exactly once, each shipment's in order.
#[tokio::test(flavor = "multi_thread")]
async fn both_dispatchers_share_the_fan_out_without_duplicates() {
    let config = "[webhooks]\nper_endpoint_concurrency = 2\nretry_schedule = \"100ms,100ms,100ms\"\n";
    let Some(c) = Cluster::start(config) else { return };
    let rx = Receiver::start().await;
    // Two per process at most: a third request held at once can only come from the other.
    rx.gate(3);
    c.subscribe(&rx.url).await;
    let mut codes = Vec::new();
    for i in 0..12 {
        let (status, body, _) = c.post(i, "/requests/sync", &request(&[500.0]), None).await;
        assert_eq!(status, 201, "{body}");
        codes.push(tracking(&body));
    }
    for (i, code) in codes.iter().enumerate() {
        let (status, body, _) =
            c.post(i, "/sandbox/scenarios/happy", &json!({"drop_off_shipment_unique_ids": [code]}), None).await;
        assert_eq!(status, 200, "{body}");
    }
    // Per shipment: scheduled, parcel.created, to_pick_up, picked_up, processing,
    // in_transit, delivered.
    let expected = codes.len() * 7;
    let got = rx
        .wait_until(&format!("{expected} distinct deliveries"), |g| {
            g.iter().filter(|r| r.ok()).map(Received::id).collect::<BTreeSet<_>>().len() >= expected
        })
        .await;
    assert_eq!(duplicates(&got), Vec::<String>::new(), "no event was sent twice");
    assert_in_order(&got);
    // Each process counts an attempt once its answer is recorded, just after the receiver's.
    let delivered = "dropslot_webhook_attempts_total{outcome=\"delivered\"}";
    let counted = async {
        loop {
            let (a, b) = (c.metric(0, delivered).await, c.metric(1, delivered).await);
            if usize::try_from(a + b).unwrap() >= expected {
                return (a, b);
            }
            tokio::task::yield_now().await;
        }
    };
    let (a, b) =
        tokio::time::timeout(std::time::Duration::from_secs(30), counted).await.expect("every attempt counted");
    assert!(a > 0 && b > 0, "both dispatchers delivered: {a} and {b}");
    assert_eq!(usize::try_from(a + b).unwrap(), expected, "each delivery was attempted once");
}

/// A process killed with deliveries in flight (its receiver hanging): the other process
/// takes them over once their lease runs out, and delivers every event.
#[tokio::test(flavor = "multi_thread")]
async fn a_process_killed_mid_stream_leaves_its_deliveries_to_the_other() {
    // A lease is the attempt's timeout plus 5 s.
    let config = "[webhooks]\ntimeout = \"1s\"\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms\"\n";
    let Some(mut c) = Cluster::start(config) else { return };
    let rx = Receiver::start().await;
    rx.answer_by_default(Answer { status: 200, hang: true });
    c.subscribe(&rx.url).await;
    let mut codes = BTreeSet::new();
    for i in 0..10 {
        let (status, body, _) = c.post(i, "/requests/sync", &request(&[500.0]), None).await;
        assert_eq!(status, 201, "{body}");
        codes.insert(tracking(&body));
    }
    // Both processes are sending and every request hangs; kill the first mid-stream.
    let held = rx.wait_until("hanging deliveries", |g| g.len() >= 4).await;
    c.kill(0);
    rx.answer_by_default(Answer::status(200));
    let expected = codes.len() * 2;
    let got = rx
        .wait_until(&format!("{expected} events delivered after the kill"), |g| {
            g.iter().filter(|r| r.ok()).map(Received::id).collect::<BTreeSet<_>>().len() >= expected
        })
        .await;
    let delivered: BTreeSet<&str> = got.iter().filter(|r| r.ok()).map(Received::id).collect();
    for r in &held {
        assert!(delivered.contains(r.id()), "{} was in flight at the kill and is delivered", r.id());
    }
    let tracked: BTreeSet<String> = got
        .iter()
        .filter(|r| r.ok() && r.event() == "same.shipment.scheduled")
        .map(|r| r.json()["data"]["tracking_code"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(tracked, codes);
    assert_in_order(&got);
    assert_eq!(duplicates(&got), Vec::<String>::new(), "nothing is sent twice once it succeeded");
}

/// A transaction of the auditor's own (a `psql` session) holding one endpoint's row `FOR NO KEY
/// UPDATE` until released: what any long transaction on that row does to the attempts that
/// must write it (an endpoint's health), such as the last transaction of a process whose death
/// the server has not noticed yet.
struct HeldEndpoint(Child);

impl HeldEndpoint {
    fn take(url: &str, id: i64) -> HeldEndpoint {
        use std::io::{BufRead, Write};
        let mut child = std::process::Command::new("psql")
            .args([url, "-v", "ON_ERROR_STOP=1", "-qtA"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("psql runs");
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "BEGIN; SELECT 'held' FROM webhook_endpoints WHERE id = {id} FOR NO KEY UPDATE;").unwrap();
        child.stdin = Some(stdin);
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "held", "the auditor holds endpoint {id}'s row");
        HeldEndpoint(child)
    }

    fn release(mut self) {
        use std::io::Write;
        let mut stdin = self.0.stdin.take().unwrap();
        writeln!(stdin, "COMMIT;").unwrap();
        drop(stdin);
        assert!(self.0.wait().unwrap().success());
    }
}

impl Drop for HeldEndpoint {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two processes delivering to two endpoints, the row of one held by another session
/// ([`HeldEndpoint`]) with leases of `timeout` + 5 s: eight orders placed through both, until
/// the held endpoint has answered each process at least once (none of those recorded).
struct HeldRow {
    c: Cluster,
    held: Receiver,
    free: Receiver,
    held_id: i64,
    row: HeldEndpoint,
    codes: BTreeSet<String>,
    /// What the held endpoint had received by then.
    answered: Vec<Received>,
}

impl HeldRow {
    /// `None` on `SQLite`.
    async fn start(timeout: &str) -> Option<HeldRow> {
        let config =
            format!("[webhooks]\ntimeout = \"{timeout}\"\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms,100ms\"\n");
        let later = "2026-11-25T12:00:00Z";
        let c = Cluster::start_with(&config, [&[], &[("DROPSLOT_NOW", later)]])?;
        let (held, free) = (Receiver::start().await, Receiver::start().await);
        let (held_id, free_id) = (c.subscribe(&held.url).await, c.subscribe(&free.url).await);
        for id in [held_id, free_id] {
            let (status, body, _) = c.post(0, &format!("/webhooks/{id}/rotate-secret"), &json!({}), None).await;
            assert_eq!(status, 200, "{body}");
        }
        let row = HeldEndpoint::take(&c.db.url(), held_id);
        // Deliveries flow from both processes; each waits for its answer to be recorded.
        let mut codes = BTreeSet::new();
        for i in 0..8 {
            let (status, body, _) = c.post(i, "/requests/sync", &request(&[500.0]), None).await;
            assert_eq!(status, 201, "{body}");
            codes.insert(tracking(&body));
        }
        let answered = held
            .wait_until("answered deliveries from both processes", |g| {
                let from = |p| g.iter().any(|r| r.ok() && sender(r) == p);
                from(0) && from(1)
            })
            .await;
        Some(HeldRow { c, held, free, held_id, row, codes, answered })
    }
}

/// Waits (30 s at most) until every lease taken so far on the deliveries `rows` names (a
/// `WHERE` condition) has run out, by the database's clock.
async fn leases_run_out(c: &Cluster, rows: &str) {
    let leases = c.db.scalar(&format!("SELECT coalesce(max(next_attempt_ms), 0) FROM webhook_deliveries WHERE {rows}"));
    let past = format!("SELECT (extract(epoch FROM clock_timestamp()) * 1000 > {leases})::int");
    let run_out = async {
        while c.db.scalar(&past) == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), run_out).await.expect("the leases run out");
}

/// Which process sent a request: the endpoint's secret was rotated through process 0, whose
/// business clock is inside the previous secret's 24 h, so it signs with both secrets; process
/// 1's clock is two days later, past that window, so it signs with the new one only.
fn sender(r: &Received) -> usize {
    usize::from(r.header("webhook-signature").split(' ').count() == 1)
}

/// Issue 27: a process killed while deliveries flow; the survivor must not send again what its
/// receiver already answered. The endpoint's row is held by another transaction for longer than
/// a lease, so both processes' answered attempts wait to be recorded past their leases. The
/// killed process's are lost with it and are sent again (at least once); the survivor's are
/// still its own: it records them once the row is free and never sends them a second time.
#[tokio::test(flavor = "multi_thread")]
async fn the_survivor_of_a_kill_never_sends_again_what_was_answered() {
    let Some(HeldRow { mut c, held, free, held_id, row, mut codes, answered }) = HeldRow::start("2s").await else {
        return;
    };
    c.kill(0);
    leases_run_out(&c, &format!("endpoint_id = {held_id} AND state = 'pending'")).await;
    // The survivor has claimed since: an event queued now reaches the other endpoint.
    let (status, body, _) = c.post(1, "/requests/sync", &request(&[500.0]), None).await;
    assert_eq!(status, 201, "{body}");
    let last = tracking(&body);
    codes.insert(last.clone());
    free.wait_until("an event queued after the leases ran out", |g| {
        g.iter().any(|r| r.ok() && r.json()["data"]["tracking_code"] == last.as_str())
    })
    .await;
    row.release();
    // Per order: scheduled and parcel.created, to each endpoint.
    let expected = codes.len() * 2;
    let mut resent = BTreeSet::new();
    for rx in [&held, &free] {
        let got = rx
            .wait_until(&format!("{expected} distinct deliveries"), |g| {
                g.iter().filter(|r| r.ok()).map(Received::id).collect::<BTreeSet<_>>().len() >= expected
            })
            .await;
        let mut sent = BTreeMap::<&str, Vec<usize>>::new();
        for r in &got {
            sent.entry(r.id()).or_default().push(sender(r));
        }
        for (id, senders) in &sent {
            assert!(
                senders.len() == 1 || senders[0] == 0,
                "{id} was answered when the survivor sent it, and sent again: {senders:?}"
            );
            if senders.len() > 1 {
                resent.insert((*id).to_string());
            }
        }
        // Each shipment's events first arrived in order (a repeat comes after its successors).
        let mut seen = BTreeSet::new();
        let firsts: Vec<Received> = got.iter().filter(|r| seen.insert(r.id().to_string())).cloned().collect();
        assert_in_order(&firsts);
    }
    // What the killed process had answered but not recorded came again, from the survivor.
    for r in answered.iter().filter(|r| sender(r) == 0) {
        assert!(resent.contains(r.id()), "{} was answered to the killed process and is sent again", r.id());
    }
}

/// Issue 47 item 5, the re-send reported: A is killed while the last transaction of its
/// recording holds the endpoint's row, and the server has not noticed it ended (a network that
/// keeps a dead client's connection open, a backend still waiting on a lock when its client
/// died); A is started again at once. B's answered deliveries wait to be recorded behind that
/// row for longer than their leases. The restarted A claims whatever falls due meanwhile: before,
/// that was B's answered deliveries too (sent again 17.7–18.7 s after the kill with the default
/// 10 s timeout). B now extends the leases of the answers it holds until they are recorded; only
/// what A answered and died with is sent again (at least once).
#[tokio::test(flavor = "multi_thread")]
async fn answers_recorded_late_are_not_sent_again_by_a_restarted_process() {
    let Some(HeldRow { mut c, held, free, held_id, row, mut codes, answered }) = HeldRow::start("1s").await else {
        return;
    };
    c.kill(0);
    c.restart(0);
    leases_run_out(&c, &format!("endpoint_id = {held_id} AND state = 'pending'")).await;
    // The restarted A has claimed since: an event queued through it now reaches the other
    // endpoint from it (B may take some; A takes one within a few orders).
    let mut from_a = false;
    for _ in 0..20 {
        let (status, body, _) = c.post(0, "/requests/sync", &request(&[500.0]), None).await;
        assert_eq!(status, 201, "{body}");
        let code = tracking(&body);
        codes.insert(code.clone());
        let mine = |r: &Received| r.ok() && r.json()["data"]["tracking_code"] == code.as_str();
        let got = free.wait_until("the new order's events", |g| g.iter().filter(|r| mine(r)).count() >= 2).await;
        if got.iter().any(|r| mine(r) && sender(r) == 0) {
            from_a = true;
            break;
        }
    }
    assert!(from_a, "the restarted A claimed deliveries after the leases ran out");
    row.release();
    // Per order: scheduled and parcel.created, to each endpoint.
    let expected = codes.len() * 2;
    let got = held
        .wait_until(&format!("{expected} distinct deliveries"), |g| {
            g.iter().filter(|r| r.ok()).map(Received::id).collect::<BTreeSet<_>>().len() >= expected
        })
        .await;
    let mut sent = BTreeMap::<&str, Vec<(usize, bool)>>::new();
    for r in &got {
        sent.entry(r.id()).or_default().push((sender(r), r.ok()));
    }
    for (id, sends) in &sent {
        if let Some(i) = sends.iter().position(|&(p, ok)| p == 1 && ok) {
            assert_eq!(i + 1, sends.len(), "{id} was answered when B sent it, and sent again: {sends:?}");
        }
    }
    // What A had answered and died with came again.
    for r in answered.iter().filter(|r| sender(r) == 0) {
        assert!(sent[r.id()].len() > 1, "{} was answered to the killed A and is sent again", r.id());
    }
    let recorded = async {
        let all =
            format!("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered' AND endpoint_id = {held_id}");
        while c.db.scalar(&all) < i64::try_from(expected).unwrap() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), recorded).await.expect("every delivery recorded");
}

/// Issue 47: process A is killed (SIGKILL) while its dispatcher holds claims (its requests
/// hang at the receiver), and restarted while those claims' leases still run; B answers its
/// own deliveries and, once A's leases run out, takes over some of A's, which the receiver
/// answers. Whatever A's old claims say, a delivery the receiver answered with a 2xx and that
/// was recorded so is never sent again, by the restarted A or by B.
#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_process_never_sends_again_what_the_other_answered() {
    // A lease is the attempt's timeout plus 5 s.
    let config = "[webhooks]\ntimeout = \"1s\"\nretry_schedule = \"100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms\"\n";
    let later = "2026-11-25T12:00:00Z";
    let Some(mut c) = Cluster::start_with(config, [&[], &[("DROPSLOT_NOW", later)]]) else { return };
    let rx = Receiver::start().await;
    let id = c.subscribe(&rx.url).await;
    let (status, body, _) = c.post(0, &format!("/webhooks/{id}/rotate-secret"), &json!({}), None).await;
    assert_eq!(status, 200, "{body}");
    rx.answer_by_default(Answer { status: 200, hang: true });
    let mut codes = BTreeSet::new();
    for i in 0..12 {
        let (status, body, _) = c.post(i, "/requests/sync", &request(&[500.0]), None).await;
        assert_eq!(status, 201, "{body}");
        codes.insert(tracking(&body));
    }
    // A holds claims (its requests hang); kill it there, and start it again at once.
    let held = rx.wait_until("requests of A hanging", |g| g.iter().filter(|r| sender(r) == 0).count() >= 2).await;
    c.kill(0);
    rx.answer_by_default(Answer::status(200));
    c.restart(0);
    let expected = codes.len() * 2;
    let got = rx
        .wait_until(&format!("{expected} events delivered after the kill"), |g| {
            g.iter().filter(|r| r.ok()).map(Received::id).collect::<BTreeSet<_>>().len() >= expected
        })
        .await;
    let answered_by_b = got.iter().filter(|r| r.ok() && sender(r) == 1).count();
    assert!(answered_by_b > 0, "B answered deliveries after the kill");
    // Every lease ever taken has run out, and both processes have claimed since: an order
    // through each, delivered.
    leases_run_out(&c, "true").await;
    for p in [0, 1] {
        let (status, body, _) = c.post(p, "/requests/sync", &request(&[500.0]), None).await;
        assert_eq!(status, 201, "{body}");
        codes.insert(tracking(&body));
    }
    let expected = codes.len() * 2;
    let got = rx
        .wait_until(&format!("{expected} events delivered"), |g| {
            g.iter().filter(|r| r.ok()).map(Received::id).collect::<BTreeSet<_>>().len() >= expected
        })
        .await;
    let delivered: BTreeSet<&str> = got.iter().filter(|r| r.ok()).map(Received::id).collect();
    for r in &held {
        assert!(delivered.contains(r.id()), "{} was in flight at the kill and is delivered", r.id());
    }
    assert_eq!(duplicates(&got), Vec::<String>::new(), "nothing answered is sent again");
    let finished = c.db.scalar("SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'");
    assert_eq!(finished, i64::try_from(expected).unwrap(), "each delivery recorded delivered once");
}
