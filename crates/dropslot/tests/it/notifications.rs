//! Recipient notifications end to end (CONTRACT §14): a real SMTP server (aiosmtpd, started
//! by the test: `tests/smtp_server.py`) logs every accepted message by Message-ID, a real
//! HTTP receiver plays the SMS provider; the service runs in-process, and as a child process
//! for the kill test. Both backends, by `DROPSLOT_TEST_DATABASE_URL`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::common::{ADMIN_TOKEN, API, NOW, TestDb, TestServer, request};
use crate::receiver::{Answer, Receiver};

const EMAIL: &str = "jane@example.com";
const FAST: &str = "200ms,200ms,200ms,200ms,200ms,200ms";
const SMS_USER: &str = "AC0123456789";
const SMS_PASSWORD: &str = "sms-secret";
/// How long any wait for the sender lasts before the test fails.
const WAIT: Duration = Duration::from_secs(30);

/// The real SMTP server, stopped when dropped (the change page's tests read its messages too).
pub(crate) struct Smtp {
    child: Option<Child>,
    port: u16,
    log: std::path::PathBuf,
    dir: tempfile::TempDir,
    /// The service's `notifications.lease`.
    lease: &'static str,
    /// The service's retry schedule (`webhooks.retry_schedule`, which messages follow too).
    schedule: &'static str,
    /// How many messages the server has logged (its "accepted" lines), across restarts.
    accepted: Arc<watch::Sender<usize>>,
    /// How many sessions it holds open unlogged (its "held" lines; `--hold-until`).
    held: Arc<watch::Sender<usize>>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Smtp {
    /// A port nothing listens on yet, and where the server will log.
    fn planned() -> Smtp {
        let dir = tempfile::tempdir().unwrap();
        Smtp {
            child: None,
            port: free_port(),
            log: dir.path().join("smtp.jsonl"),
            dir,
            lease: "2m",
            schedule: FAST,
            accepted: Arc::new(watch::Sender::new(0)),
            held: Arc::new(watch::Sender::new(0)),
        }
    }

    pub(crate) fn start() -> Smtp {
        let mut s = Smtp::planned();
        s.listen(&[]);
        s
    }

    /// Starts the server on the planned port (`extra`: `--hang-until FILE`, `--hold-until FILE`).
    fn listen(&mut self, extra: &[&str]) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/smtp_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", &self.port.to_string(), "--log", &self.log.display().to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs (scripts/test-deps.sh installs aiosmtpd)");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the SMTP server started");
        let (accepted, held) = (self.accepted.clone(), self.held.clone());
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                if l == "accepted" {
                    accepted.send_modify(|n| *n += 1);
                } else if l == "held" {
                    held.send_modify(|n| *n += 1);
                }
            }
        });
        self.child = Some(child);
    }

    fn release_file(&self) -> std::path::PathBuf {
        self.dir.path().join("release")
    }

    pub(crate) fn messages(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Waits until the server has logged `n` messages; all it logged.
    pub(crate) async fn wait_for(&self, n: usize, what: &str) -> Vec<Value> {
        let mut accepted = self.accepted.subscribe();
        let arrived = matches!(tokio::time::timeout(WAIT, accepted.wait_for(|got| *got >= n)).await, Ok(Ok(_)));
        let got = self.messages();
        assert!(arrived, "{what}: {} of {n} messages arrived: {got:?}", got.len());
        got
    }

    /// Waits until the server holds `n` sessions open, unlogged (`--hold-until`).
    async fn wait_held(&self, n: usize) {
        let mut held = self.held.subscribe();
        let got = tokio::time::timeout(WAIT, held.wait_for(|got| *got >= n)).await;
        assert!(matches!(got, Ok(Ok(_))), "{} of {n} sessions were held open", *self.held.borrow());
    }

    fn fragment(&self, sms_url: &str) -> String {
        format!(
            "[webhooks]\nallow_private = true\nretry_schedule = \"{}\"\n\
             [notifications]\nlease = \"{}\"\n[notifications.smtp]\nhost = \"127.0.0.1\"\nport = {}\nsecurity = \"none\"\n\
             from = \"Dropslot Courier <courier@dropslot.test>\"\n\
             [notifications.sms]\nurl = \"{sms_url}\"\nfrom = \"+15550009999\"\n",
            self.schedule, self.lease, self.port
        )
    }
}

impl Drop for Smtp {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The service with both channels configured (SMS credentials as the environment gives them).
pub(crate) async fn start(smtp: &Smtp, sms: &Receiver) -> TestServer {
    start_plus(smtp, sms, "").await
}

/// As [`start`], with `extra` configuration after.
pub(crate) async fn start_plus(smtp: &Smtp, sms: &Receiver, extra: &str) -> TestServer {
    TestServer::start_edited(&format!("{}\n{extra}", smtp.fragment(&sms.url)), |s| {
        if let Some(sms) = s.notifications.sms.as_mut() {
            sms.user = Some(SMS_USER.into());
            sms.password = Some(SMS_PASSWORD.into());
        }
    })
    .await
}

fn order_body(email: &str) -> Value {
    let mut body = request(&[500.0]);
    body["drop_offs"][0]["address"]["person_email"] = json!(email);
    body
}

/// A live order for `email`; its tracking code.
async fn order(s: &TestServer, live: &str, email: &str) -> String {
    let r = s.post("/requests/sync", live, &order_body(email)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()
}

async fn listed(s: &TestServer, token: &str, tracking: &str) -> Vec<Value> {
    let r = s.get(&format!("/shipments/{tracking}/notifications"), token).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["object"]["notifications"].as_array().unwrap().clone()
}

/// Waits until the shipment lists a message of `trigger` and `channel` that `done` accepts.
async fn wait_listed(
    s: &TestServer,
    token: &str,
    tracking: &str,
    (trigger, channel): (&str, &str),
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    // Woken by each outcome the sender records; read again only then.
    let mut recorded = s.app.notifications_recorded.subscribe();
    loop {
        recorded.borrow_and_update();
        let all = listed(s, token, tracking).await;
        if let Some(n) = all.iter().find(|n| n["trigger"] == trigger && n["channel"] == channel && done(n)) {
            return n.clone();
        }
        let woken = tokio::time::timeout_at(deadline, recorded.changed()).await;
        assert!(woken.is_ok(), "{trigger}/{channel} never reached the state wanted: {all:?}");
    }
}

fn of<'a>(messages: &'a [Value], rcpt: &str, subject_part: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["rcpt_tos"][0] == rcpt && m["subject"].as_str().unwrap().contains(subject_part))
        .collect()
}

fn form(body: &str) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes()).into_owned().collect()
}

/// Each trigger's e-mail arrives once, with the tracking link and the opt-out headers; the
/// SMS arrives as a form POST with basic auth; the list masks recipients, is tenant-isolated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_trigger_sends_one_email_and_one_sms() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    let delivered = order(&s, &live, EMAIL).await;
    let failed = order(&s, &live, EMAIL).await;
    let got = smtp.wait_for(2, "the scheduled messages").await;
    for m in &got {
        assert!(m["subject"].as_str().unwrap().contains("is scheduled"), "{m}");
        assert_eq!(m["list_unsubscribe_post"], "List-Unsubscribe=One-Click");
        assert!(m["list_unsubscribe"].as_str().unwrap().contains("/notifications/opt-out/"), "{m}");
        assert!(m["text"].as_str().unwrap().contains(" between "), "the date and slot: {m}");
    }
    s.ops_moves(&ops, &delivered, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    let r = s
        .ops_move(
            &ops,
            &delivered,
            &json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "Ruth Receiver"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    s.ops_moves(&ops, &failed, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    let r = s.ops_move(&ops, &failed, &json!({"to": "failed", "reason": "Nobody at home"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = smtp.wait_for(6, "every trigger's e-mail").await;
    // Nothing more comes: the SMS of all six arrives, and the e-mail count stays.
    let texts = sms.wait_until("six SMS", |g| g.len() >= 6).await;
    assert_eq!(smtp.messages().len(), 6, "one e-mail per (shipment, trigger)");
    let ids: std::collections::HashSet<&str> = got.iter().map(|m| m["message_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 6, "a Message-ID per message");
    for m in &got {
        let text = m["text"].as_str().unwrap();
        assert!(text.contains("/track/"), "the tracking link: {text}");
        assert!(m["from"].as_str().unwrap().contains("courier@dropslot.test"), "{m}");
    }
    assert_eq!(of(&got, EMAIL, "out for delivery").len(), 2);
    let done = of(&got, EMAIL, "was delivered");
    assert_eq!(done.len(), 1);
    assert!(done[0]["text"].as_str().unwrap().contains("received by Ruth Receiver"), "{}", done[0]);
    assert!(done[0]["text"].as_str().unwrap().contains(&format!("/track/{delivered}")));
    let fail = of(&got, EMAIL, "could not deliver");
    assert_eq!(fail.len(), 1);
    let fail_text = fail[0]["text"].as_str().unwrap();
    assert!(fail_text.contains("Nobody at home") && fail_text.contains("We will try again"), "{fail_text}");
    // SMS: Twilio's form, basic auth from the environment.
    let basic = format!("Basic {}", base64_encode(&format!("{SMS_USER}:{SMS_PASSWORD}")));
    for t in &texts {
        assert_eq!(t.header("authorization"), basic);
        assert!(t.header("content-type").starts_with("application/x-www-form-urlencoded"));
        let f = form(&t.body);
        assert_eq!(f["From"], "+15550009999");
        assert_eq!(f["To"], "+1 416 555 0100");
        assert!(f["Body"].contains("/track/"), "{}", f["Body"]);
    }
    // The list: states, masked recipients; another client's token sees a 404.
    let all = listed(&s, &live, &delivered).await;
    assert_eq!(all.len(), 6, "{all:?}");
    for n in &all {
        assert_eq!(n["state"], "sent", "{n}");
        assert_eq!(n["attempts"], 1);
        let masked = n["recipient"].as_str().unwrap();
        assert!(masked == "j•••@example.com" || masked == "+1 •••• 0100", "{masked}");
    }
    // The counter moves when the sender records an outcome, after the message left: wait for
    // the last one's record (the failure's e-mail) before reading it.
    for trigger in ["scheduled", "out_for_delivery", "failed"] {
        wait_listed(&s, &live, &failed, (trigger, "email"), |n| n["state"] == "sent").await;
    }
    let metrics = s.http.get(format!("{}/metrics", s.base)).send().await.unwrap().text().await.unwrap();
    let sent = metrics
        .lines()
        .find_map(|l| l.strip_prefix("dropslot_notification_attempts_total{channel=\"email\",outcome=\"sent\"} "))
        .unwrap_or_else(|| panic!("the attempts are counted: {metrics}"));
    assert_eq!(sent.trim(), "6");
    let (_, _, other, _) = s.new_client("Other Shop").await;
    assert_eq!(s.get(&format!("/shipments/{delivered}/notifications"), &other).await.status, 404);
}

fn base64_encode(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The mail's opt-out link shows a form (following it opts nobody out); posting it stops the
/// next message to that address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opting_out_from_the_mail_link_stops_the_next_message() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    let tracking = order(&s, &live, EMAIL).await;
    let got = smtp.wait_for(1, "the scheduled message").await;
    let link = got[0]["list_unsubscribe"].as_str().unwrap().trim_matches(['<', '>']).to_string();
    assert!(got[0]["text"].as_str().unwrap().contains(&link), "the text carries the link too");
    let page = s.http.get(&link).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<form method=\"post\""), "a confirm form");
    s.ops_moves(&ops, &tracking, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    smtp.wait_for(2, "following the link opted nobody out").await;
    let done = s.http.post(&link).send().await.unwrap();
    assert_eq!(done.status(), 200);
    assert!(done.text().await.unwrap().contains("opted out"));
    let r = s
        .ops_move(
            &ops,
            &tracking,
            &json!({"to": "delivered", "proof_of_delivery": [{"type": "receiver_name", "value": "Ruth"}]}),
        )
        .await;
    assert_eq!(r.status, 200);
    wait_listed(&s, &live, &tracking, ("delivered", "email"), |n| n["state"] == "opted_out").await;
    // The SMS (another recipient) still goes: once it is sent, the e-mail count is final.
    wait_listed(&s, &live, &tracking, ("delivered", "sms"), |n| n["state"] == "sent").await;
    assert_eq!(smtp.messages().len(), 2, "nothing after the opt-out");
    let bogus = s.http.post(s.url("/notifications/opt-out/not-a-token")).send().await.unwrap();
    assert_eq!(bogus.status(), 404);
}

/// Test mode never sends: its messages are recorded `test_mode`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_mode_sends_nothing_and_records_test_mode() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let r = s.post("/requests/sync", &s.token, &order_body("tess@example.com")).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let tracking = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let all = listed(&s, &s.token, &tracking).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().all(|n| n["state"] == "test_mode"), "{all:?}");
    // Shown on the dashboard's shipment page, masked.
    let mut v = crate::dashboard_http::Visitor::new(&s);
    v.sign_in(&s.token).await;
    let page = v.get(&format!("/dashboard/shipments/{tracking}")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("Recipient messages") && page.body.contains("data-state=\"test_mode\""),
        "{}",
        page.body
    );
    assert!(page.body.contains("t•••@example.com") && !page.body.contains("tess@example.com"), "masked");
    // A live message after it arrives, alone.
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    order(&s, &live, EMAIL).await;
    let got = smtp.wait_for(1, "the live message").await;
    sms.wait_until("the live SMS", |g| !g.is_empty()).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["rcpt_tos"][0], EMAIL);
    assert_eq!(sms.received().len(), 1, "no SMS of test mode");
}

/// An SMS carries its message's own reference, fixed when it was enqueued: the same at every
/// attempt (a repeat after a crash takes the same path), in the `Idempotency-Key` header and
/// in the form field `reference_field` names, so a provider that takes a client reference
/// drops a repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sms_carries_the_same_reference_at_every_attempt() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    // Refused once (tried again), then taken.
    sms.plan([Answer::status(503)]);
    let s = start_plus(&smtp, &sms, "reference_field = \"client_ref\"").await;
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let tracking = order(&s, &live, EMAIL).await;
    wait_listed(&s, &live, &tracking, ("scheduled", "sms"), |n| n["state"] == "sent" && n["attempts"] == 2).await;
    let got = sms.received();
    assert_eq!(got.iter().map(|r| r.answered).collect::<Vec<_>>(), [503, 200]);
    let reference = got[0].header("idempotency-key").to_string();
    assert!(reference.starts_with("n_") && reference.ends_with("@dropslot"), "{reference}");
    for r in &got {
        assert_eq!(r.header("idempotency-key"), reference);
        assert_eq!(form(&r.body).get("client_ref"), Some(&reference), "{}", r.body);
    }
    let stored = s.db.scalar(&format!(
        "SELECT count(*) FROM notifications WHERE channel = 'sms' AND shipment_unique_id = '{tracking}'
            AND message_id = '<{reference}>'"
    ));
    assert_eq!(stored, 1, "the reference is the message's own, fixed when it was enqueued");
}

/// SMTP down, then up: the message is retried, and arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtp_down_then_up_retries_and_delivers_once() {
    let mut smtp = Smtp::planned();
    // Long enough for a slow machine to start the SMTP server before the retries run out.
    smtp.schedule = "200ms,200ms,500ms,1s,2s,3s,3s,3s,3s,3s,3s,3s";
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let tracking = order(&s, &live, EMAIL).await;
    // Tried and refused twice (an attempt counts from its `sending` mark: wait for it to end).
    let n = wait_listed(&s, &live, &tracking, ("scheduled", "email"), |n| {
        n["attempts"].as_i64() >= Some(2) && n["state"] == "pending"
    })
    .await;
    assert!(n["last_error"].as_str().unwrap().contains("could not be reached"), "{n}");
    smtp.listen(&[]);
    let n = wait_listed(&s, &live, &tracking, ("scheduled", "email"), |n| n["state"] == "sent").await;
    let got = smtp.messages();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(n["attempts"].as_i64().unwrap() >= 3, "{n}");
    assert!(!n["sent_at"].is_null());
}

/// An address the order API lets through but SMTP cannot take is `failed` with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_recipient_is_failed_with_its_reason() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let tracking = order(&s, &live, "ja(ne)@example.com").await;
    let n = wait_listed(&s, &live, &tracking, ("scheduled", "email"), |n| n["state"] == "failed").await;
    assert!(n["last_error"].as_str().unwrap().contains("address is not valid"), "{n}");
    assert_eq!(n["attempts"], 0, "never handed over");
    assert!(smtp.messages().is_empty());
}

/// The settings: read and written whole, validated; a trigger switched off sends nothing and
/// is recorded `disabled`; the sender name is the mail's From name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_switch_a_trigger_off_and_name_the_sender() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    let r = s.get("/notifications/settings", &live).await;
    assert_eq!(r.status, 200);
    let defaults = json!({"sender_name": "", "email": true, "sms": true,
        "triggers": {"scheduled": true, "out_for_delivery": true, "delivered": true, "failed": true, "rescheduled": true,
            "new_time": true, "next_stop": false}});
    assert_eq!(r.body["object"], defaults);
    let put = |body: Value| {
        let req = s.http.put(s.url("/notifications/settings")).bearer_auth(&live).json(&body);
        s.send(req)
    };
    let mut bad = defaults.clone();
    bad["colour"] = json!("red");
    assert_eq!(put(bad).await.status, 400, "unknown field");
    let mut bad = defaults.clone();
    bad["sender_name"] = json!("Corner\r\nBcc: x@y.z");
    let r = put(bad).await;
    assert_eq!(r.status, 422);
    assert!(!r.error_at("sender_name").is_empty(), "{}", r.body);
    let mut off = defaults.clone();
    off["sender_name"] = json!("Corner Shop");
    off["sms"] = json!(false);
    off["triggers"]["scheduled"] = json!(false);
    let r = put(off.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.get("/notifications/settings", &live).await.body["object"], off);
    let tracking = order(&s, &live, EMAIL).await;
    let all = listed(&s, &live, &tracking).await;
    assert!(all.iter().all(|n| n["state"] == "disabled"), "{all:?}");
    s.ops_moves(&ops, &tracking, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    let got = smtp.wait_for(1, "the out-for-delivery message").await;
    wait_listed(&s, &live, &tracking, ("out_for_delivery", "email"), |n| n["state"] == "sent").await;
    assert_eq!(got.len(), 1, "the scheduled one was off");
    assert!(got[0]["subject"].as_str().unwrap().contains("out for delivery"));
    assert!(got[0]["from"].as_str().unwrap().starts_with("Corner Shop"), "{}", got[0]["from"]);
    assert!(sms.received().is_empty(), "SMS switched off");
}

/// Without channels configured, messages are recorded `not_configured`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_channels_messages_are_not_configured() {
    let s = TestServer::start().await;
    let (_, _, live, _) = s.new_client("Corner Shop").await;
    let tracking = order(&s, &live, EMAIL).await;
    let all = listed(&s, &live, &tracking).await;
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|n| n["state"] == "not_configured"), "{all:?}");
}

/// A started `serve` process whose stdout (its log) is kept.
struct Serve {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
    /// How many lines the log holds (what `wait_log` watches).
    lines: Arc<watch::Sender<usize>>,
}

impl Serve {
    fn start(db: &str, config: &std::path::Path) -> Serve {
        let port = free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_dropslot"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .env("DATABASE_URL", db)
            .env("DROPSLOT_NOW", NOW)
            .env("DROPSLOT_CONFIG", config)
            .env("DROPSLOT_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "debug")
            .env_remove("DROPSLOT_WEBHOOKS_ALLOW_PRIVATE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::new(watch::Sender::new(0));
        let stderr = child.stderr.take().unwrap();
        let (kept, counted) = (log.clone(), lines.clone());
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                kept.lock().unwrap().push(l);
                counted.send_modify(|n| *n += 1);
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let (kept, counted) = (log.clone(), lines.clone());
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if l.contains("listening on") {
                    let _ = tx.send(());
                }
                kept.lock().unwrap().push(l);
                counted.send_modify(|n| *n += 1);
            }
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("serve reports listening");
        Serve { child, base: format!("http://127.0.0.1:{port}"), log, lines }
    }

    /// Waits until a line of the log contains `needle`.
    async fn wait_log(&self, needle: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut lines = self.lines.subscribe();
        loop {
            lines.borrow_and_update();
            if self.log.lock().unwrap().iter().any(|l| l.contains(needle)) {
                return;
            }
            let woken = tokio::time::timeout_at(deadline, lines.changed()).await;
            assert!(woken.is_ok(), "the log never said {needle:?}");
        }
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn post(http: &reqwest::Client, url: String, token: &str, body: &Value) -> Value {
    let r = http.post(url).bearer_auth(token).json(body).send().await.unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert!(status.is_success(), "{status}: {body}");
    body
}

/// The kill tests' setup: the service as a child process on a fresh database, with a live
/// token of a client it made.
struct KillRig {
    db: TestDb,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
    http: reqwest::Client,
    live: String,
}

impl KillRig {
    async fn start(smtp: &Smtp, sms: &Receiver) -> (KillRig, Serve) {
        let db = TestDb::fresh();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("dropslot.toml");
        let limits = std::fs::read_to_string(crate::common::generous_limits_file()).unwrap();
        std::fs::write(&config, format!("{limits}\n{}", smtp.fragment(&sms.url))).unwrap();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        let first = Serve::start(&db.url(), &config);
        let client =
            post(&http, format!("{}{API}/admin/clients", first.base), ADMIN_TOKEN, &json!({"name": "Shop"})).await;
        let id = client["object"]["id"].as_i64().unwrap();
        // Orders of several drop-offs (a burst of messages enqueued in one transaction).
        let limits = json!({"limits": {"order_drop_offs": 8, "order_parcels_per_drop_off": 5, "preview_drop_offs": 100,
            "preview_parcels_per_drop_off": 50}});
        let url = format!("{}{API}/admin/clients/{id}/settings", first.base);
        let r = http.put(url).bearer_auth(ADMIN_TOKEN).json(&limits).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let url = format!("{}{API}/admin/clients/{id}/tokens", first.base);
        let token = post(&http, url, ADMIN_TOKEN, &json!({"kind": "live"})).await;
        let live = token["object"]["token"].as_str().unwrap().to_string();
        (KillRig { db, config, _dir: dir, http, live }, first)
    }

    /// An order for `email` through `serve`; its tracking code.
    async fn order(&self, serve: &Serve, email: &str) -> String {
        let url = format!("{}{API}/requests/sync", serve.base);
        let body = post(&self.http, url, &self.live, &order_body(email)).await;
        body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()
    }

    /// One order of a drop-off for each of `emails` (their messages are enqueued in one
    /// transaction, so the sender claims them together); their tracking codes.
    async fn burst(&self, serve: &Serve, emails: &[String]) -> Vec<String> {
        let mut body = order_body(EMAIL);
        let one = body["drop_offs"][0].clone();
        body["drop_offs"] = emails
            .iter()
            .map(|e| {
                let mut d = one.clone();
                d["address"]["person_email"] = json!(e);
                d
            })
            .collect();
        let url = format!("{}{API}/requests/sync", serve.base);
        let body = post(&self.http, url, &self.live, &body).await;
        let shipments = body["object"]["shipments"].as_array().unwrap();
        shipments.iter().map(|s| s["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string()).collect()
    }

    /// The shipment's e-mail as `serve` lists it.
    async fn email(&self, serve: &Serve, tracking: &str) -> Value {
        let url = format!("{}{API}/shipments/{tracking}/notifications", serve.base);
        let r = self.http.get(url).bearer_auth(&self.live).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        body["object"]["notifications"].as_array().unwrap().iter().find(|n| n["channel"] == "email").unwrap().clone()
    }

    /// Waits until `serve` lists the shipment's e-mail in a state `done` accepts (read again
    /// at each line of its log: each outcome is logged).
    async fn wait_email(&self, serve: &Serve, tracking: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        let mut lines = serve.lines.subscribe();
        loop {
            lines.borrow_and_update();
            let n = self.email(serve, tracking).await;
            if done(&n) {
                return n;
            }
            let woken = tokio::time::timeout_at(deadline, lines.changed()).await;
            assert!(woken.is_ok(), "{tracking}: the e-mail never reached the state wanted: {n}");
        }
    }
}

fn copies(all: &[Value], message_id: &str) -> usize {
    all.iter().filter(|m| m["message_id"] == message_id).count()
}

/// Killed (SIGKILL) after the SMTP server accepted the message and before the service heard
/// its "250": the restarted service cannot tell it from a message that never arrived, so it
/// sends it once more, with the same Message-ID (what lets the recipient's provider drop the
/// copy), and lists it with its repeat; later messages flow, and no recipient address ever
/// appears in the service's log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_acceptance_and_ack_repeats_it_once_with_its_message_id() {
    let mut smtp = Smtp::planned();
    smtp.lease = "2s";
    smtp.listen(&["--hang-until", &smtp.release_file().display().to_string()]);
    let sms = Receiver::start().await;
    let (rig, mut first) = KillRig::start(&smtp, &sms).await;
    let tracking = rig.order(&first, EMAIL).await;
    let got = smtp.wait_for(1, "the message, accepted and held").await;
    let held = got[0]["message_id"].as_str().unwrap().to_string();
    // The server has the message; the service waits for its "250". Kill it there.
    first.kill();
    std::fs::write(smtp.release_file(), "").unwrap();
    let db = &rig.db;
    assert_eq!(db.scalar("SELECT count(*) FROM notifications WHERE channel = 'email' AND state = 'sending'"), 1);
    let second = Serve::start(&db.url(), &rig.config);
    rig.order(&second, "ken@example.com").await;
    // The killed attempt's lease ends: the restarted sender sends it again, and says so.
    let all = smtp.wait_for(3, "the repeat and the next message, after the restart").await;
    second.wait_log("are sent again, with their Message-ID").await;
    assert_eq!(copies(&all, &held), 2, "the repeat carries the first attempt's Message-ID: {all:?}");
    // The restarted sender has taken everything due since: the first order's SMS too.
    sms.wait_until("both orders' SMS", |g| g.len() >= 2).await;
    let listed = rig.wait_email(&second, &tracking, |n| n["state"] == "sent").await;
    assert_eq!(listed["state"], "sent", "{listed}");
    assert_eq!((listed["attempts"].as_i64(), listed["repeated_after_crash"].as_i64()), (Some(2), Some(1)), "{listed}");
    assert_eq!(db.scalar("SELECT count(*) FROM notifications WHERE channel = 'email' AND state = 'sent'"), 2);
    assert_eq!(smtp.messages().len(), 3, "one repeat for the one crash");
    let logs = [first.log.lock().unwrap().clone(), second.log.lock().unwrap().clone()].concat();
    assert!(logs.iter().any(|l| l.contains("notification")), "the log was captured: {logs:?}");
    for l in &logs {
        for secret in ["jane@", "ken@", "example.com", "555 0100", "5550100"] {
            assert!(!l.contains(secret), "a recipient in the log: {l}");
        }
    }
}

/// Issue 47: SIGKILL during a burst of e-mails, while the SMTP server holds each session open
/// before it has taken the message. Each message whose session was open at the kill is sent
/// by the restarted service, once, with the Message-ID it was enqueued with, and listed with
/// two attempts, one of them a repeat after the crash. A message already cut off by as many
/// crashes as it is repeated is `uncertain` instead, and not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_whose_smtp_session_was_open_at_a_kill_are_sent_after_the_restart() {
    let mut smtp = Smtp::planned();
    smtp.lease = "2s";
    smtp.listen(&["--hold-until", &smtp.release_file().display().to_string()]);
    let sms = Receiver::start().await;
    let (rig, mut first) = KillRig::start(&smtp, &sms).await;
    let burst = 4;
    let emails: Vec<String> = (0..burst).map(|i| format!("r{i}@example.com")).collect();
    let codes = rig.burst(&first, &emails).await;
    assert_eq!(codes.len(), burst);
    // Every e-mail's session is open, its message not yet taken: kill the service there.
    smtp.wait_held(burst).await;
    first.kill();
    std::fs::write(smtp.release_file(), "").unwrap();
    let db = &rig.db;
    let open = db.scalar("SELECT count(*) FROM notifications WHERE channel = 'email' AND state = 'sending'");
    assert_eq!(open, i64::try_from(burst).unwrap(), "every e-mail was being handed over at the kill");
    // One of them has had its repeats already (earlier crashes): it stays `uncertain`.
    let spent = &codes[0];
    db.execute(&format!(
        "UPDATE notifications SET repeated_after_crash = {} WHERE channel = 'email' AND shipment_unique_id = '{spent}'",
        dropslot_core::notifications::CRASH_REPEATS
    ));
    let second = Serve::start(&db.url(), &rig.config);
    let all = smtp.wait_for(burst - 1, "the messages open at the kill, after the restart").await;
    second.wait_log("are sent again, with their Message-ID").await;
    second.wait_log("turned uncertain").await;
    for code in &codes[1..] {
        let listed = rig.wait_email(&second, code, |n| n["state"] == "sent").await;
        let counts = (listed["attempts"].as_i64(), listed["repeated_after_crash"].as_i64());
        assert_eq!(counts, (Some(2), Some(1)), "{listed}");
    }
    let spent = rig.email(&second, spent).await;
    assert_eq!(spent["state"], "uncertain", "a message past its repeats is not sent again: {spent}");
    let ids: Vec<String> = all.iter().map(|m| format!("'{}'", m["message_id"].as_str().unwrap())).collect();
    let enqueued = db.scalar(&format!(
        "SELECT count(DISTINCT message_id) FROM notifications WHERE message_id IN ({})",
        ids.join(", ")
    ));
    assert_eq!(
        enqueued,
        i64::try_from(burst - 1).unwrap(),
        "each sent with the Message-ID it was enqueued with: {all:?}"
    );
    assert_eq!(smtp.messages().len(), burst - 1, "one copy each: {all:?}");
}

/// "Out for delivery" says when: the live window of the shipment's published route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_for_delivery_carries_the_live_eta_window() {
    let smtp = Smtp::start();
    let sms = Receiver::start().await;
    let s = start(&smtp, &sms).await;
    let op = crate::driver_api::operator(&s).await;
    let (_, _, live, ops) = s.new_client("Corner Shop").await;
    crate::driver_api::driver(&s, &op, "Ana").await;
    let body = json!({
        "pick_up_address": {"text": crate::common::PICK_UP},
        "drop_offs": [{
            "address": {"text": "290 Bremner Blvd, Toronto, ON M5V 3L9", "lat": 43.642, "lng": -79.387,
                        "person_name": "Jane", "person_phone": "+1 416 555 0100", "person_email": EMAIL},
            "scheduled_date": crate::driver_api::DATE, "time_slot_code": "TOR-DT-PM",
            "parcels": [{"unit": "g", "values": 1000}]
        }]
    });
    let r = s.post("/requests/sync", &live, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let tracking = r.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let plan = json!({"date": crate::driver_api::DATE, "depot": "YYZ1", "kind": "delivery", "time_limit_s": 1});
    let r = s.post("/ops/plans", &op, &plan).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["object"]["id"].as_str().unwrap().to_string();
    assert_eq!(s.post(&format!("/ops/plans/{id}/publish"), &op, &json!({})).await.status, 200);
    let window = s.get(&format!("/shipments/{tracking}"), &live).await.body["object"]["eta"].clone();
    let clock = |v: &Value| v.as_str().unwrap()[11..16].to_string();
    let (from, to) = (clock(&window["from"]), clock(&window["to"]));
    s.ops_moves(&ops, &tracking, &["to_pick_up", "picked_up", "processing", "in_transit"]).await;
    let got = smtp.wait_for(2, "scheduled, then out for delivery").await;
    let out = of(&got, EMAIL, "out for delivery");
    assert_eq!(out.len(), 1, "{got:?}");
    let text = out[0]["text"].as_str().unwrap();
    assert!(text.contains(&format!("expects to arrive between {from} and {to}")), "{window}: {text}");
}
