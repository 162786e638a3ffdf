//! `/metrics` (issue 12): the exposition parses with the Prometheus project's own `OpenMetrics`
//! parser (`scripts/parse-metrics.py`), its HTTP and order counters move, routes are labelled
//! by template, and `server.metrics_listen` moves the endpoint off the API's listener.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{TestServer, request};

/// The samples of a `/metrics` body, parsed independently; panics if it does not parse.
fn parse(body: &str) -> Vec<Value> {
    parse_as(body, &[])
}

/// The same with the parser `args` (`--classic`: the classic text format's parser).
fn parse_as(body: &str, args: &[&str]) -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/parse-metrics.py");
    let mut child = Command::new("python3")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/test-deps.sh installs prometheus_client)");
    child.stdin.take().expect("stdin").write_all(body.as_bytes()).expect("write");
    let out = child.wait_with_output().expect("parser ends");
    assert!(out.status.success(), "not valid OpenMetrics: {}\n{body}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON from the parser")
}

/// The count in the samples `name` whose labels include `labels` (0 when none).
fn value(samples: &[Value], name: &str, labels: &[(&str, &str)]) -> u64 {
    let sum: f64 = samples
        .iter()
        .filter(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .map(|s| s["value"].as_f64().unwrap_or(0.0))
        .sum();
    sum.round() as u64
}

async fn scrape(s: &TestServer, base: &str) -> (u16, String) {
    let res = s.http.get(format!("{base}/metrics")).send().await.expect("scrape");
    (res.status().as_u16(), res.text().await.expect("body"))
}

#[tokio::test]
async fn metrics_parse_and_count_requests_by_route_template_and_orders() {
    let s = TestServer::start().await;
    let (_, before) = scrape(&s, &s.base).await;
    let before = parse(&before);
    let jobs_before = value(&before, "dropslot_store_batched_jobs_total", &[]);
    let preview = "/scheduled-service/api/v1/requests/preview";
    assert_eq!(value(&before, "dropslot_http_requests_total", &[("route", preview)]), 0);

    assert_eq!(s.preview(&request(&[500.0])).await.status, 200);
    assert_eq!(s.preview(&request(&[500.0])).await.status, 200);
    let o = s.order(&request(&[500.0])).await;
    assert_eq!(o.status, 201);
    let code = o.body["object"]["shipments"][0]["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    assert_eq!(s.get(&format!("/shipments/{code}"), &s.token).await.status, 200);
    assert_eq!(s.get("/shipments/DSNOTHING", &s.token).await.status, 404);
    assert_eq!(s.get("/no/such/path/at/all", &s.token).await.status, 404);

    let (status, body) = scrape(&s, &s.base).await;
    assert_eq!(status, 200);
    let after = parse(&body);
    let requests = "dropslot_http_requests_total";
    assert_eq!(value(&after, requests, &[("method", "POST"), ("route", preview), ("status", "200")]), 2);
    let shipment = "/scheduled-service/api/v1/shipments/{unique_id}";
    assert_eq!(value(&after, requests, &[("route", shipment), ("status", "200")]), 1);
    assert_eq!(value(&after, requests, &[("route", shipment), ("status", "404")]), 1);
    assert_eq!(value(&after, requests, &[("route", "unmatched"), ("status", "404")]), 1);
    assert!(!body.contains(&code) && !body.contains("/no/such/path"), "no id or raw path becomes a label");
    assert_eq!(value(&after, "dropslot_http_request_duration_seconds_count", &[("route", preview)]), 2);
    assert_eq!(value(&after, "dropslot_orders_created_total", &[("kind", "sync")]), 1);
    // The order went through the backend's batched writer (group commit on SQLite, the order
    // batcher on PostgreSQL), which counts its batches and their jobs.
    assert!(value(&after, "dropslot_store_batched_jobs_total", &[]) > jobs_before, "{body}");
    assert!(value(&after, "dropslot_store_write_batches_total", &[]) >= 1);
    assert!(body.contains("dropslot_store_write_queue_depth 0"), "nothing waits now: {body}");
    assert!(body.contains("dropslot_store_connection_waits_total"), "{body}");
}

#[tokio::test]
async fn metrics_listen_serves_metrics_apart_from_the_api() {
    let s = TestServer::start_with("[server]\nmetrics_listen = \"127.0.0.1:0\"\n").await;
    let addr = s.metrics_addr.expect("a metrics listener");
    assert_eq!(scrape(&s, &s.base).await.0, 404, "not beside the API");
    assert_eq!(s.preview(&request(&[500.0])).await.status, 200);
    let (status, body) = scrape(&s, &format!("http://{addr}")).await;
    assert_eq!(status, 200);
    let samples = parse(&body);
    let preview = "/scheduled-service/api/v1/requests/preview";
    assert_eq!(value(&samples, "dropslot_http_requests_total", &[("route", preview)]), 1);
    let api = s.http.get(format!("http://{addr}/scheduled-service/api/v1/orders")).send().await.expect("get");
    assert_eq!(api.status(), 404, "the metrics listener serves nothing else");
}

/// `server.http_metrics = false` stops counting HTTP requests (the switch the load test
/// uses to measure what counting costs); orders are still counted.
#[tokio::test]
async fn http_metrics_can_be_turned_off() {
    let s = TestServer::start_with("[server]\nhttp_metrics = false\n").await;
    assert_eq!(s.preview(&request(&[500.0])).await.status, 200);
    assert_eq!(s.order(&request(&[500.0])).await.status, 201);
    let (status, text) = scrape(&s, &s.base).await;
    assert_eq!(status, 200);
    let samples = parse(&text);
    assert_eq!(value(&samples, "dropslot_http_requests_total", &[]), 0, "{text}");
    assert_eq!(value(&samples, "dropslot_orders_created_total", &[("kind", "sync")]), 1, "{text}");
}

/// Issue 27: `/metrics` honours `Accept`. Prometheus' classic `text/plain; version=0.0.4`
/// gets the classic format, whose `# TYPE` lines name the samples (so its parser types every
/// sample: none is read as untyped), without `OpenMetrics`' `# EOF`; no `Accept` and
/// Prometheus' own preference still get `OpenMetrics`.
#[tokio::test]
async fn metrics_answer_the_classic_format_to_a_classic_scraper() {
    let s = TestServer::start().await;
    assert_eq!(s.order(&request(&[500.0])).await.status, 201);
    let classic = "text/plain; version=0.0.4";
    let res = s.http.get(format!("{}/metrics", s.base)).header("Accept", classic).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with(classic), "{:?}", res.headers());
    let body = res.text().await.unwrap();
    assert!(!body.contains("# EOF"), "{body}");
    let samples = parse_as(&body, &["--classic"]);
    assert!(value(&samples, "dropslot_orders_created_total", &[("kind", "sync")]) == 1, "{body}");
    let untyped: Vec<_> = samples.iter().filter(|s| s["type"] == "unknown" || s["type"] == "untyped").collect();
    assert!(untyped.is_empty(), "samples the classic parser could not type (TYPE names differ): {untyped:?}");
    // Prometheus' own Accept (OpenMetrics first), and none at all: OpenMetrics.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    for accept in [Some(prometheus), None] {
        let mut req = s.http.get(format!("{}/metrics", s.base));
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        let res = req.send().await.unwrap();
        assert!(res.headers()["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
        let body = res.text().await.unwrap();
        assert!(body.ends_with("# EOF\n"), "{body}");
        parse(&body);
    }
}
