//! Orders as spreadsheets in the dashboard: the orders list exported as CSV (formulas made
//! inert), and orders imported from a CSV file.

use serde_json::json;

use crate::common::{TestServer, request};
use crate::dashboard_http::Visitor;

/// A CSV body's records, header first.
fn records(body: &str) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(body.as_bytes())
        .records()
        .map(|r| r.expect("a CSV record").iter().map(str::to_string).collect())
        .collect()
}

#[tokio::test]
async fn the_orders_export_is_csv_with_formulas_made_inert() {
    let s = TestServer::start().await;
    let names = ["=HYPERLINK(\"http://x\")", "+SUM(1)", "-1+2", "@cmd", "Ana, \"the\" Baker"];
    for name in names {
        let mut r = request(&[500.0]);
        r["drop_offs"][0]["address"]["person_name"] = json!(name);
        assert_eq!(s.order(&r).await.status, 201, "{name}");
    }
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;
    let list = v.get("/dashboard/orders").await;
    assert!(list.body.contains("href=\"/dashboard/orders.csv?q=&#38;status=&#38;date=\""), "{}", list.body);

    let csv = v.get("/dashboard/orders.csv").await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    assert_eq!(csv.headers.get("content-type").unwrap(), "text/csv; charset=utf-8");
    assert!(csv.headers.get("content-disposition").unwrap().to_str().unwrap().starts_with("attachment"));
    let rows = records(&csv.body);
    assert_eq!(rows[0][0], "tracking_code");
    let col = rows[0].iter().position(|h| h == "receiver_name").unwrap();
    assert_eq!(rows.len(), 1 + names.len());
    let mut got: Vec<&str> = rows[1..].iter().map(|r| r[col].as_str()).collect();
    got.sort_unstable();
    let mut want = vec!["'=HYPERLINK(\"http://x\")", "'+SUM(1)", "'-1+2", "'@cmd", "Ana, \"the\" Baker"];
    want.sort_unstable();
    assert_eq!(got, want, "formulas prefixed with ', other text as it was (quoted by the CSV writer)");
    for row in &rows[1..] {
        for c in row {
            assert!(!c.starts_with(['=', '+', '-', '@']), "no cell may start a formula: {c}");
        }
    }
    // The list's filters apply; a bad one is the list's 422, not a file.
    let one = records(&v.get("/dashboard/orders.csv?q=baker").await.body);
    assert_eq!(one.len(), 2);
    let bad = v.get("/dashboard/orders.csv?status=lost").await;
    assert_eq!(bad.status, 422);
    assert!(bad.body.contains("<code>status</code>"), "{}", bad.body);
    // Signed out: the sign-in page, no file.
    let mut stranger = Visitor::new(&s);
    assert_eq!(stranger.get("/dashboard/orders.csv").await.status, 303);
}
