//! Orders as spreadsheets in the dashboard: the orders list exported as CSV (formulas made
//! inert), and orders imported from a CSV file.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::json;

use crate::common::{DROP_OFF, PICK_UP, TestServer, request, request_with_codes};
use crate::dashboard_http::Visitor;
use crate::receiver::Receiver;

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

/// Rows of the large import.
const N: usize = 5000;

const HEADER: &str =
    "pick_up_address,receiver_name,receiver_phone,address,weight_g,custom_code,scheduled_date,time_slot_code";

/// A data row of the import file (comma separated, addresses quoted: they hold commas).
fn row(name: &str, address: &str, grams: &str, code: &str) -> String {
    format!("\"{PICK_UP}\",{name},+1 416 555 0100,\"{address}\",{grams},{code},,")
}

/// Signs in and uploads `file` from the import page.
async fn upload(v: &mut Visitor<'_>, file: &[u8]) -> crate::dashboard_http::Page {
    let form = v.get("/dashboard/imports").await;
    assert_eq!(form.status, 200, "{}", form.body);
    v.upload("/dashboard/imports", &form.csrf(), "orders.csv", file).await
}

fn count(s: &TestServer, table: &str) -> i64 {
    s.scalar(&format!("SELECT count(*) FROM {table}"))
}

#[tokio::test]
async fn a_bad_file_is_refused_by_row_and_column_and_creates_nothing() {
    let s = TestServer::start().await;
    s.order(&request_with_codes(&["TAKEN00000000000001"])).await;
    let orders_before = count(&s, "orders");
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;

    // The template downloads and is itself a clean file's header.
    let t = v.get("/dashboard/imports/template.csv").await;
    assert_eq!(t.status, 200);
    assert!(t.body.starts_with(HEADER), "{}", t.body);

    // A row with a postal code outside the area, in the API's own words (its preview's).
    let bad_address = "1 Main St, Vancouver, BC V6B 1A1";
    let mut api = request(&[500.0]);
    api["drop_offs"][0]["address"]["text"] = json!(bad_address);
    let preview = s.post("/requests/preview", &s.token, &api).await;
    assert_eq!(preview.status, 422, "{}", preview.body);
    let api_message =
        preview.body["errors"]["drop_offs.0.address.text"][0].as_str().expect("the API's message").to_string();
    let file = [
        HEADER.to_string(),
        row("Ana", DROP_OFF, "500", "FRESH00000000000001"),
        row("Bob", bad_address, "500", ""),
        row("Cy", DROP_OFF, "500", "FRESH00000000000001"),
        row("Di", DROP_OFF, "500", "TAKEN00000000000001"),
        row("Ed", DROP_OFF, "heavy", ""),
    ]
    .join("\n");
    let page = upload(&mut v, file.as_bytes()).await;
    assert_eq!(page.status, 422, "{}", page.body);
    let problems = problems(&page.body);
    assert!(problems.contains(&("3".into(), "address".into(), api_message.clone())), "{problems:?} {api_message}");
    assert!(
        problems.iter().any(|(r, c, m)| r == "4" && c == "custom_code" && m.contains("row 2")),
        "in-file duplicate: {problems:?}"
    );
    assert!(
        problems.contains(&(
            "5".into(),
            "custom_code".into(),
            "The custom code is already used by another parcel.".into()
        )),
        "a code another parcel holds: {problems:?}"
    );
    assert!(problems.iter().any(|(r, c, _)| r == "6" && c == "weight_g"), "{problems:?}");
    assert!(!problems.iter().any(|(r, _, _)| r == "2"), "row 2 is clean: {problems:?}");
    assert_eq!((count(&s, "orders"), count(&s, "order_requests")), (orders_before, 0), "nothing was created");

    // A binary file.
    let page = upload(&mut v, &[0x89, b'P', b'N', b'G', 0, 0, 0, 13, 0xff, 0xfe]).await;
    assert_eq!(page.status, 422);
    assert!(page.body.contains("This is not a CSV text file"), "{}", page.body);

    // 20 MB: over the upload limit, the page says so with the API's 413 words.
    let mut big = HEADER.as_bytes().to_vec();
    while big.len() < 20 * 1024 * 1024 {
        big.extend_from_slice(format!("\n{}", row("Ana", DROP_OFF, "500", "")).as_bytes());
    }
    let page = upload(&mut v, &big).await;
    assert_eq!(page.status, 413, "{}", &page.body[..page.body.len().min(2000)]);
    assert!(page.body.contains("too large"), "{}", page.body);

    // Without the form's CSRF token: refused.
    let page = v.upload("/dashboard/imports", "forged", "orders.csv", file.as_bytes()).await;
    assert_eq!(page.status, 403);
    assert_eq!((count(&s, "orders"), count(&s, "order_requests")), (orders_before, 0), "still nothing");
}

/// The (row, column, message) cells of the problems table.
fn problems(body: &str) -> Vec<(String, String, String)> {
    let Some(start) = body.find("<table id=\"problems\">") else { return Vec::new() };
    let table = &body[start..body[start..].find("</table>").map_or(body.len(), |e| start + e)];
    let text = |cell: &str| {
        let mut out = String::new();
        let mut tag = false;
        for c in cell.chars() {
            match c {
                '<' => tag = true,
                '>' => tag = false,
                c if !tag => out.push(c),
                _ => {}
            }
        }
        out.trim()
            .replace("&#39;", "'")
            .replace("&#x27;", "'")
            .replace("&quot;", "\"")
            .replace("&#34;", "\"")
            .replace("&amp;", "&")
            .replace("&#38;", "&")
    };
    table
        .split("<tr>")
        .skip(2)
        .filter_map(|tr| {
            let cells: Vec<String> = tr.split("<td").skip(1).map(|c| text(&format!("<td{c}"))).collect();
            (cells.len() == 3).then(|| (cells[0].clone(), cells[1].clone(), cells[2].clone()))
        })
        .collect()
}

/// The request ids a progress page's address names (`r=<id>-<first row>`).
fn request_ids(location: &str) -> Vec<String> {
    let query = location.split_once('?').map_or("", |(_, q)| q);
    url::form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "r")
        .map(|(_, v)| v.rsplit_once('-').expect("id-row").0.to_string())
        .collect()
}

/// Waits (on the `same.request.completed` webhooks, no polling) until every request ended.
async fn all_ended(receiver: &Receiver, ids: &[String]) {
    receiver
        .wait_until("the import's requests", |got| {
            let ended: BTreeSet<String> = got
                .iter()
                .filter(|r| r.ok() && r.event() == "same.request.completed")
                .filter_map(|r| r.json()["data"]["request_id"].as_str().map(str::to_string))
                .collect();
            ids.iter().all(|id| ended.contains(id))
        })
        .await;
}

#[tokio::test]
async fn a_5000_row_file_is_checked_queued_and_its_result_lists_every_tracking_code() {
    let s = TestServer::start_with("[webhooks]\nallow_private = true\n").await;
    let receiver = Receiver::start().await;
    let hook = s.post("/webhooks", &s.token, &json!({"url": receiver.url, "events": ["same.request.completed"]})).await;
    assert_eq!(hook.status, 201, "{}", hook.body);
    let mut v = Visitor::new(&s);
    v.sign_in(&s.token).await;

    // UTF-8 with a BOM, semicolons, quoted fields (one holding the separator and a quote).
    let mut file =
        String::from("\u{feff}pick_up_address;receiver_name;receiver_phone;address;weight_g;custom_code\r\n");
    for i in 0..N {
        let name = if i == 0 { "\"Baker; \"\"Ana\"\"\"".to_string() } else { format!("Receiver {i}") };
        let grams = 100 + i % 900;
        writeln!(file, "\"{PICK_UP}\";{name};+1 416 555 0100;\"{DROP_OFF}\";{grams};IMP{i:016}\r").unwrap();
    }
    let page = upload(&mut v, file.as_bytes()).await;
    assert_eq!(page.status, 303, "{}", &page.body[..page.body.len().min(4000)]);
    let location = page.location().to_string();
    assert!(location.starts_with("/dashboard/imports/progress?"), "{location}");
    let ids = request_ids(&location);
    assert_eq!(ids.len(), N / 100, "rows in requests of 100 drop-offs");

    all_ended(&receiver, &ids).await;
    let done = v.get(&location).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains(&format!("{N} of {N} rows done")), "{}", done.body);
    assert!(!done.body.contains("http-equiv=\"refresh\""), "a finished import stops reloading");
    let auto = v.get(&format!("{location}&auto=1")).await;
    assert!(!auto.body.contains("http-equiv=\"refresh\""), "even when asked to reload");
    let result_href = location.replace("/progress?", "/result.csv?");
    assert!(done.body.contains("/dashboard/imports/result.csv?"), "{}", done.body);

    // 5,000 shipments read back (one by one by the store on PostgreSQL): a longer wait than
    // the visitor's 30 s.
    let slow = |path: &str| {
        reqwest::Client::new()
            .get(format!("{}{path}", s.base))
            .header("cookie", format!("ds_session={}", v.cookie("ds_session").unwrap_or_default()))
            .timeout(std::time::Duration::from_secs(180))
            .send()
    };
    let result = slow(&result_href).await.expect("the result file");
    assert_eq!(result.status(), 200);
    let rows = records(&result.text().await.expect("its body"));
    assert_eq!(
        rows[0],
        ["row", "custom_code", "receiver_name", "state", "tracking_code", "tracking_url", "label_url", "problem"]
    );
    assert_eq!(rows.len(), N + 1);
    assert_eq!(rows[1][..4], ["2".to_string(), format!("IMP{:016}", 0), "Baker; \"Ana\"".into(), "completed".into()]);
    assert_eq!(rows[N][0], (N + 1).to_string());
    assert_eq!(rows[N][1], format!("IMP{:016}", N - 1));
    let codes: BTreeSet<&str> = rows[1..].iter().map(|r| r[4].as_str()).collect();
    assert_eq!(codes.len(), N, "a tracking code per row");
    assert!(rows[1][5].ends_with(&format!("/track/{}", rows[1][4])), "{:?}", rows[1]);
    assert!(rows[1][6].contains("/labels/"), "{:?}", rows[1]);
    // The label link serves the label.
    let label = reqwest::get(&rows[1][6]).await.expect("label");
    assert_eq!(label.status(), 200);
    assert_eq!(s.scalar("SELECT count(*) FROM parcels WHERE custom_code LIKE 'IMP%'"), N as i64);
    // And the export lists them all.
    let export = records(&slow("/dashboard/orders.csv").await.expect("the export").text().await.expect("its body"));
    assert_eq!(export.len(), N + 1);
}

#[tokio::test]
async fn browser_upload_a_spreadsheet_see_its_problems_then_its_progress_and_result() {
    use crate::browser::{Browser, DESKTOP};
    let s = TestServer::start().await;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let bad = dir.path().join("bad.csv");
    let good = dir.path().join("orders.csv");
    let rows = |second: &str| {
        [
            HEADER.to_string(),
            row("Ana Baker", DROP_OFF, "500", ""),
            second.to_string(),
            row("Li Chen", DROP_OFF, "800", ""),
        ]
        .join("\n")
    };
    std::fs::write(&bad, rows(&row("Bob", "1 Main St, Vancouver, BC V6B 1A1", "-2", ""))).unwrap();
    std::fs::write(&good, rows(&row("Bob Stone", DROP_OFF, "1200", "SHOP00000000000042"))).unwrap();

    let b = Browser::start(DESKTOP).await;
    b.goto(&format!("{}/dashboard/sign-in", s.base)).await;
    b.fill("#token", &s.token).await;
    b.click("#sign-in button[type=submit]").await;
    b.click("#import").await;
    assert!(b.current_url().await.ends_with("/dashboard/imports"));
    b.assert_accessible("import").await;
    b.screenshot("import-desktop").await;

    b.choose_file("#file", &bad).await;
    b.click("form[action='/dashboard/imports'] button[type=submit]").await;
    assert_eq!(b.count("#problems tbody tr").await, 2, "{}", b.text("main").await);
    assert!(b.text("#problems").await.contains("weight_g"));
    b.assert_accessible("import problems").await;
    b.screenshot("import-problems-desktop").await;
    assert_eq!(count(&s, "order_requests"), 0);

    b.choose_file("#file", &good).await;
    b.click("form[action='/dashboard/imports'] button[type=submit]").await;
    assert!(b.current_url().await.contains("/dashboard/imports/progress?r="), "{}", b.current_url().await);
    b.assert_accessible("import progress").await;
    b.screenshot("import-progress-desktop").await;
    // Asked to, the page reloads itself (a meta refresh, no script) until the worker has
    // written every order; then it stops.
    if b.count("#auto-on").await == 1 {
        b.click("#auto-on").await;
    }
    b.wait_until("document.querySelector('#result') !== null").await;
    assert!(b.text("#summary").await.contains("3 of 3 rows done"), "{}", b.text("#summary").await);
    b.assert_accessible("import finished").await;
    b.screenshot("import-finished-desktop").await;
    assert_eq!(s.scalar("SELECT count(*) FROM parcels WHERE custom_code = 'SHOP00000000000042'"), 1);
    assert!(b.attr("#result", "href").await.contains("/dashboard/imports/result.csv?r="));
}
