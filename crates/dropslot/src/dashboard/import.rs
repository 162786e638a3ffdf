//! Orders imported from a CSV file (one row per drop-off and parcel): every row is checked
//! by the API's own validation and pricing (`orders::prepare` on the request bodies
//! `POST /requests/async` takes) and the custom codes against the store before anything is
//! written; a clean file is queued as asynchronous order requests (CONTRACT §3.5) through
//! `orders::asynchronous::enqueue`. Consecutive rows with the same pick-up address and date
//! make one request of up to the client's `async_drop_offs`. The progress page and the
//! result file name the requests in their query (`r=<request_id>-<first row>`); each is
//! read back under the session's scope, so a query can only show the client's own.

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Multipart, RawQuery, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::spreadsheet::{csv_bytes, download};
use super::{Frame, PageResult, Session, error_page, fail, page, same_secret, see_other};
use crate::app::App;
use crate::error::Error;
use crate::orders::asynchronous::{codes_free, enqueue, queue_error};
use crate::orders::request::{Purpose, RequestPayload};
use crate::orders::{Terms, prepare};
use dropslot_store::{LabelKind, RequestStatus};

/// The largest file read (the dashboard's body limit for an upload).
pub const UPLOAD_LIMIT: usize = 10 * 1024 * 1024;
const MAX_ROWS: usize = 10_000;
/// The most requests one file may make (the progress page's query names each).
const MAX_REQUESTS: usize = 200;
/// The most problems listed on the page.
const SHOWN_PROBLEMS: usize = 500;

/// The columns, in the template's order, with what each holds.
const COLUMNS: [(&str, &str); 8] = [
    ("pick_up_address", "Where the courier collects the parcel: street, city and postal code."),
    ("receiver_name", "The receiver's name."),
    ("receiver_phone", "The receiver's phone: an optional +, then 7–15 digits."),
    ("address", "The drop-off address: street, city and postal code."),
    ("weight_g", "The parcel's weight in grams."),
    ("custom_code", "Optional: your code for the parcel, 16–20 letters and digits, unique."),
    ("scheduled_date", "Optional: the delivery date, YYYY-MM-DD."),
    ("time_slot_code", "Optional: a drop-off slot's code (the Slots page lists them)."),
];

const TEMPLATE_ROWS: [[&str; 8]; 2] = [
    [
        "100 King St W, Toronto, ON M5X 1A9",
        "Ana Baker",
        "+1 416 555 0100",
        "290 Bremner Blvd, Toronto, ON M5V 3L9",
        "500",
        "",
        "",
        "",
    ],
    [
        "100 King St W, Toronto, ON M5X 1A9",
        "Li Chen",
        "+1 416 555 0101",
        "290 Bremner Blvd, Toronto, ON M5V 3L9",
        "1200",
        "SHOP00000000000001",
        "",
        "",
    ],
];

#[derive(Template)]
#[template(path = "dashboard/import.html")]
struct ImportPage {
    frame: Option<Frame>,
    csrf: String,
    per_request: usize,
    max_mb: usize,
    max_rows: usize,
    columns: &'static [(&'static str, &'static str)],
    errors: Vec<(String, String)>,
    problems: Vec<Problem>,
    problems_total: usize,
}

/// A problem at a row (as a spreadsheet numbers it: the header is row 1) and column.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Problem {
    pub row: String,
    pub column: String,
    pub message: String,
}

fn terms(app: &App, session: &Session) -> Result<Terms, Error> {
    let (prices, limits, _) = crate::auth::client_terms(app, &session.principal)?;
    Ok(Terms { scope: session.scope, prices, limits })
}

fn import_page(
    app: &App,
    session: &Session,
    status: StatusCode,
    errors: Vec<(String, String)>,
    mut problems: Vec<Problem>,
) -> axum::response::Response {
    let per_request = terms(app, session).map(|t| t.limits.async_drop_offs).unwrap_or_default();
    let problems_total = problems.len();
    problems.truncate(SHOWN_PROBLEMS);
    let body = ImportPage {
        frame: Some(session.frame("imports")),
        csrf: session.csrf.clone(),
        per_request,
        max_mb: UPLOAD_LIMIT / (1024 * 1024),
        max_rows: MAX_ROWS,
        columns: &COLUMNS,
        errors,
        problems,
        problems_total,
    };
    page(status, body.render())
}

/// `GET /dashboard/imports`: the upload form, the columns and the template.
pub(super) async fn form(State(app): State<App>, session: Session) -> PageResult {
    Ok(import_page(&app, &session, StatusCode::OK, Vec::new(), Vec::new()))
}

/// `GET /dashboard/imports/template.csv`.
pub(super) async fn template(_session: Session) -> PageResult {
    let header: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
    let rows = TEMPLATE_ROWS.iter().map(|r| r.iter().map(ToString::to_string).collect::<Vec<_>>());
    let bytes = csv_bytes(&header, rows).map_err(|e| error_page(None, &e))?;
    Ok(download("dropslot-orders-template.csv", bytes))
}

/// One data row: its number and its cells by column.
struct Row {
    number: usize,
    cells: [String; 8],
}

impl Row {
    fn get(&self, column: usize) -> Option<&str> {
        Some(self.cells[column].trim()).filter(|v| !v.is_empty())
    }
}

fn problem(row: impl std::fmt::Display, column: &str, message: impl Into<String>) -> Problem {
    Problem { row: row.to_string(), column: column.to_string(), message: message.into() }
}

/// The file's rows, read by the `csv` crate: UTF-8 with or without a BOM, comma or semicolon
/// separated (whichever the header uses), quoted fields. A file that is not such text is a
/// problem at row 1, never a panic.
fn read_rows(bytes: &[u8]) -> Result<Vec<Row>, Vec<Problem>> {
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let not_text =
        || vec![problem(1, "", "This is not a CSV text file: save the sheet as CSV (UTF-8) and upload that.")];
    if text.contains(&0) {
        return Err(not_text());
    }
    let Ok(text) = std::str::from_utf8(text) else { return Err(not_text()) };
    let first = text.lines().next().unwrap_or("");
    let delimiter = if first.matches(';').count() > first.matches(',').count() { b';' } else { b',' };
    let mut reader = csv::ReaderBuilder::new().delimiter(delimiter).flexible(true).from_reader(text.as_bytes());
    let header =
        reader.headers().map_err(|e| vec![problem(1, "", format!("The header row cannot be read: {e}"))])?.clone();
    let names: Vec<String> = header.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
    let mut at = [usize::MAX; 8];
    let mut problems = Vec::new();
    for (c, (name, _)) in COLUMNS.iter().enumerate() {
        match names.iter().position(|n| n == name) {
            Some(i) => at[c] = i,
            None if c < 5 => {
                problems.push(problem(1, name, "This column is missing from the header row (see the template)."));
            }
            None => {}
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let number = i + 2;
        if rows.len() == MAX_ROWS {
            return Err(vec![problem(number, "", format!("A file holds at most {MAX_ROWS} rows; split it."))]);
        }
        let record = record.map_err(|e| vec![problem(number, "", format!("This row cannot be read: {e}"))])?;
        if record.iter().all(|c| c.trim().is_empty()) {
            continue;
        }
        let cells = std::array::from_fn(|c| record.get(at[c]).unwrap_or("").to_string());
        rows.push(Row { number, cells });
    }
    if rows.is_empty() {
        return Err(vec![problem(2, "", "The file has no rows below its header.")]);
    }
    Ok(rows)
}

/// The column an API field path of drop-off `i` (or of the pick-up) names.
fn column_of(rest: &str) -> &'static str {
    if rest.starts_with("address.person_name") {
        "receiver_name"
    } else if rest.starts_with("address.person_phone") {
        "receiver_phone"
    } else if rest.starts_with("address") {
        "address"
    } else if rest.starts_with("parcels.0.custom_code") {
        "custom_code"
    } else if rest.starts_with("parcels") {
        "weight_g"
    } else if rest.starts_with("scheduled_date") {
        "scheduled_date"
    } else if rest.starts_with("time_slot_code") {
        "time_slot_code"
    } else {
        ""
    }
}

/// The rows of one request, and the request body `POST /requests/async` would take.
struct Chunk<'a> {
    rows: Vec<&'a Row>,
    body: Value,
}

impl Chunk<'_> {
    fn span(&self) -> String {
        match (self.rows.first(), self.rows.last()) {
            (Some(a), Some(b)) if a.number != b.number => format!("{}–{}", a.number, b.number),
            (Some(a), _) => a.number.to_string(),
            _ => String::new(),
        }
    }

    /// API field errors as problems at their rows and columns.
    fn problems(&self, e: &Error) -> Vec<Problem> {
        let fields = match e {
            Error::Validation(f) | Error::BadRequest { errors: f, .. } => super::field_list(f),
            other => return vec![problem(self.span(), "", other.to_string())],
        };
        fields
            .into_iter()
            .map(|(path, message)| {
                let mut parts = path.splitn(3, '.');
                match (parts.next(), parts.next().and_then(|i| i.parse::<usize>().ok()), parts.next()) {
                    (Some("drop_offs"), Some(i), rest) if i < self.rows.len() => {
                        problem(self.rows[i].number, column_of(rest.unwrap_or("")), message)
                    }
                    (Some("pick_up_address"), ..) => problem(self.span(), "pick_up_address", message),
                    _ => problem(self.span(), "", message),
                }
            })
            .collect()
    }
}

/// Consecutive rows with the same pick-up address and date, at most `per` a request.
fn chunks<'a>(rows: &'a [Row], per: usize, problems: &mut Vec<Problem>) -> Vec<Chunk<'a>> {
    let mut out: Vec<Chunk<'a>> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for row in rows {
        let weight = match row.get(4).map(|w| w.replace(',', ".").parse::<f64>()) {
            None => Value::Null,
            Some(Ok(g)) if g.is_finite() => json!(g),
            Some(_) => {
                problems.push(problem(row.number, "weight_g", "The weight must be a number of grams."));
                continue;
            }
        };
        if let Some(code) = row.get(5) {
            if let Some(first) = seen.insert(code.to_ascii_uppercase(), row.number) {
                problems.push(problem(
                    row.number,
                    "custom_code",
                    format!("The custom code is already used by another parcel (row {first} of this file)."),
                ));
            }
        }
        let drop_off = json!({
            "address": {"text": row.get(3), "person_name": row.get(1), "person_phone": row.get(2)},
            "parcels": [{"unit": "g", "values": weight, "custom_code": row.get(5)}],
            "scheduled_date": row.get(6),
            "time_slot_code": row.get(7),
        });
        let key = (row.get(0), row.get(6));
        match out.last_mut() {
            Some(c) if c.rows.len() < per && (c.rows[0].get(0), c.rows[0].get(6)) == key => {
                c.rows.push(row);
                if let Some(d) = c.body["drop_offs"].as_array_mut() {
                    d.push(drop_off);
                }
            }
            _ => out.push(Chunk {
                rows: vec![row],
                body: json!({"pick_up_address": {"text": row.get(0)}, "drop_offs": [drop_off]}),
            }),
        }
    }
    out
}

/// `POST /dashboard/imports` (multipart: `csrf`, `file`): checks every row; with a problem,
/// the page lists them all by row and column and nothing is written; a clean file is
/// queued and the browser sent to its progress page.
pub(super) async fn upload(
    State(app): State<App>,
    session: Session,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> PageResult {
    let refuse = |e: Error| {
        import_page(&app, &session, e.status(), vec![(String::new(), super::error_words(&e, "").1)], Vec::new())
    };
    let too_large = || {
        let why = format!("The file is too large: upload at most {} MB.", UPLOAD_LIMIT / (1024 * 1024));
        import_page(&app, &session, StatusCode::PAYLOAD_TOO_LARGE, vec![("file".into(), why)], Vec::new())
    };
    let unreadable =
        |why: String| refuse(Error::BadRequest { message: why, errors: crate::error::FieldErrors::default() });
    let mut multipart =
        multipart.map_err(|_| unreadable("Upload the file with the form (multipart/form-data).".into()))?;
    let (mut csrf, mut file) = (None, None);
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => return Err(unreadable(format!("The upload cannot be read: {e}"))),
        };
        let name = field.name().unwrap_or("").to_string();
        let bytes = match field.bytes().await {
            Ok(b) => b,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => return Err(unreadable(format!("The upload cannot be read: {e}"))),
        };
        match name.as_str() {
            "csrf" => csrf = Some(String::from_utf8_lossy(&bytes).into_owned()),
            "file" => file = Some(bytes),
            _ => {}
        }
    }
    if !csrf.is_some_and(|t| same_secret(t.trim(), &session.csrf)) {
        return Err(error_page(
            Some(&session),
            &Error::Forbidden(
                "This form has expired or did not come from the dashboard. Go back, reload the page and try again.",
            ),
        ));
    }
    let Some(file) = file.filter(|f| !f.is_empty()) else {
        return Err(refuse(Error::invalid("file", "Choose a CSV file to upload.")));
    };
    let unclean = |problems| import_page(&app, &session, StatusCode::UNPROCESSABLE_ENTITY, Vec::new(), problems);
    let rows = read_rows(&file).map_err(unclean)?;
    let terms = terms(&app, &session).map_err(fail(&session))?;
    let mut problems = Vec::new();
    let chunks = chunks(&rows, terms.limits.async_drop_offs.max(1), &mut problems);
    if chunks.len() > MAX_REQUESTS {
        return Err(unclean(vec![problem(
            "",
            "pick_up_address",
            format!(
                "This file makes more than {MAX_REQUESTS} orders: put rows with the same pick-up address and date next to each other."
            ),
        )]));
    }
    let now = app.clock.now();
    let mut ready = Vec::with_capacity(chunks.len());
    for chunk in &chunks {
        let payload: RequestPayload = serde_json::from_value(chunk.body.clone())
            .map_err(|e| fail(&session)(Error::Internal(format!("an import's request body: {e}"))))?;
        match prepare(&app, &terms, payload, Purpose::AsyncOrder, now).await {
            Ok(prepared) => match codes_free(&app, &terms, &prepared).await {
                Ok(()) => ready.push(prepared),
                Err(e) => problems.extend(chunk.problems(&e)),
            },
            Err(e @ (Error::Validation(_) | Error::BadRequest { .. })) => {
                problems.extend(chunk.problems(&e));
                // The codes are checked even when another rule failed, so every problem shows at once.
                for (i, row) in chunk.rows.iter().enumerate() {
                    if let Some(code) = row.get(5).and_then(dropslot_core::ids::CustomCode::parse) {
                        if app
                            .store
                            .parcel_by_custom_code(terms.scope, &code)
                            .await
                            .map_err(|e| fail(&session)(e.into()))?
                            .is_some()
                        {
                            problems.extend(chunk.problems(&crate::orders::custom_code_taken(i, 0)));
                        }
                    }
                }
            }
            Err(e) => return Err(fail(&session)(e)),
        }
    }
    // A duplicate within one request is already the API's problem at that cell.
    let mut seen = std::collections::HashSet::new();
    problems.retain(|p| p.column != "custom_code" || seen.insert(p.row.clone()));
    if !problems.is_empty() {
        problems.sort_by_key(|p| {
            (p.row.split('–').next().and_then(|r| r.parse::<usize>().ok()).unwrap_or(0), p.column.clone())
        });
        return Err(unclean(problems));
    }
    let mut queued = Vec::with_capacity(ready.len());
    for (chunk, prepared) in chunks.into_iter().zip(ready) {
        let first = chunk.rows[0].number;
        match enqueue(&app, &terms, prepared, chunk.body, None, now).await.map_err(fail(&session))? {
            Ok(q) => queued.push(format!("{}-{first}", q.request_id)),
            // A code taken between the check and the queue: what was queued stays queued.
            Err(e) => return Err(fail(&session)(queue_error(e))),
        }
    }
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for r in &queued {
        query.append_pair("r", r);
    }
    Ok(see_other(&format!("/dashboard/imports/progress?{}", query.finish())))
}

/// One request of an import, read back.
struct Tracked {
    rows: String,
    first: usize,
    request_id: String,
    state: &'static str,
    errors: Vec<String>,
    order: String,
    count: usize,
}

/// The requests a progress query names, in order, read under the session's scope (an
/// unknown or another client's id is the 404 page).
async fn tracked(app: &App, session: &Session, query: &str) -> Result<Vec<Tracked>, axum::response::Response> {
    let not_found = || error_page(Some(session), &Error::NotFound);
    let mut out = Vec::new();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        if k != "r" {
            continue;
        }
        if out.len() == MAX_REQUESTS {
            return Err(not_found());
        }
        let (id, first) = v.rsplit_once('-').ok_or_else(not_found)?;
        let first: usize = first.parse().map_err(|_| not_found())?;
        if id.is_empty() || id.len() > 64 {
            return Err(not_found());
        }
        let r = app
            .store
            .order_request(session.scope, id)
            .await
            .map_err(|e| fail(session)(e.into()))?
            .ok_or_else(not_found)?;
        let errors = match &r.errors_json {
            Some(json) => serde_json::from_str::<HashMap<String, Vec<String>>>(json)
                .map(|m| m.into_iter().flat_map(|(p, ms)| ms.into_iter().map(move |m| format!("{p}: {m}"))).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let count = r.drop_offs_count;
        out.push(Tracked {
            rows: if count > 1 { format!("{first}–{}", first + count - 1) } else { first.to_string() },
            first,
            request_id: r.request_id,
            state: r.status.as_str(),
            errors,
            order: r.order_unique_id.unwrap_or_default(),
            count,
        });
    }
    if out.is_empty() { Err(not_found()) } else { Ok(out) }
}

#[derive(Template)]
#[template(path = "dashboard/import_progress.html")]
struct ProgressPage {
    frame: Option<Frame>,
    /// The requests' part of the query (`r=…`), without `auto`.
    query: String,
    /// Reload by itself (asked for with `auto=1`; never unasked, WCAG 2.2.1).
    auto: bool,
    done: bool,
    rows_total: usize,
    rows_done: usize,
    rows_failed: usize,
    requests: Vec<Tracked>,
}

fn ended(state: &str) -> bool {
    state == RequestStatus::Completed.as_str() || state == RequestStatus::Failed.as_str()
}

/// `GET /dashboard/imports/progress?r=…[&auto=1]`: how far the import's requests are; with
/// `auto=1` it reloads itself until every one has ended.
pub(super) async fn progress(State(app): State<App>, session: Session, RawQuery(query): RawQuery) -> PageResult {
    let query = query.unwrap_or_default();
    let requests = tracked(&app, &session, &query).await?;
    let auto = url::form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k == "auto" && v == "1");
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k == "r"))
        .finish();
    let sum = |f: &dyn Fn(&Tracked) -> bool| requests.iter().filter(|r| f(r)).map(|r| r.count).sum::<usize>();
    let body = ProgressPage {
        frame: Some(session.frame("imports")),
        done: requests.iter().all(|r| ended(r.state)),
        rows_total: sum(&|_| true),
        rows_done: sum(&|r| ended(r.state)),
        rows_failed: sum(&|r| r.state == RequestStatus::Failed.as_str()),
        auto,
        query,
        requests,
    };
    Ok(page(StatusCode::OK, body.render()))
}

const RESULT_HEADER: [&str; 8] =
    ["row", "custom_code", "receiver_name", "state", "tracking_code", "tracking_url", "label_url", "problem"];

/// `GET /dashboard/imports/result.csv?r=…`: a row per imported row, with its tracking code,
/// tracking link and drop-off label (4x6 PDF) once written, or why its request failed.
pub(super) async fn result(State(app): State<App>, session: Session, RawQuery(query): RawQuery) -> PageResult {
    let requests = tracked(&app, &session, query.as_deref().unwrap_or("")).await?;
    let base = &app.settings.base_url;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in &requests {
        let order = if r.order.is_empty() {
            None
        } else {
            app.store.order(session.scope, &r.order).await.map_err(|e| fail(&session)(e.into()))?
        };
        for i in 0..r.count {
            let row = (r.first + i).to_string();
            let shipment = order.as_ref().and_then(|o| o.shipments.iter().find(|s| s.drop_off_index == i));
            rows.push(match shipment {
                Some(s) => vec![
                    row,
                    s.parcels.first().and_then(|p| p.custom_code.clone()).unwrap_or_default(),
                    s.drop_off.address.person_name.clone().unwrap_or_default(),
                    r.state.to_string(),
                    s.drop_off.unique_id.clone(),
                    crate::labels::tracking_url(base, &s.drop_off.unique_id),
                    crate::labels::links(base, LabelKind::DropOff, &s.drop_off.label_token).1,
                    String::new(),
                ],
                None => vec![
                    row,
                    String::new(),
                    String::new(),
                    r.state.to_string(),
                    String::new(),
                    String::new(),
                    String::new(),
                    r.errors.join("; "),
                ],
            });
        }
    }
    let bytes = csv_bytes(&RESULT_HEADER, rows).map_err(fail(&session))?;
    Ok(download("dropslot-import-result.csv", bytes))
}

/// The upload's route: the multipart body may be as large as [`UPLOAD_LIMIT`].
pub(super) fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new()
        .route("/dashboard/imports", get(form).post(upload).layer(axum::extract::DefaultBodyLimit::max(UPLOAD_LIMIT)))
        .route("/dashboard/imports/template.csv", get(template))
        .route("/dashboard/imports/progress", get(progress))
        .route("/dashboard/imports/result.csv", get(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_read_with_a_bom_semicolons_and_quotes() {
        let file = "\u{feff}pick_up_address;receiver_name;receiver_phone;address;weight_g\n\"A; 1\";\"Ana \"\"B\"\"\";+1;\"X\nY\";5\n";
        let rows = read_rows(file.as_bytes()).map_err(|p| format!("{p:?}")).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].cells[0], "A; 1");
        assert_eq!(rows[0].cells[1], "Ana \"B\"");
        assert_eq!(rows[0].cells[3], "X\nY");
        assert!(read_rows(b"\x00\x01\x02").is_err());
        assert!(read_rows(&[0xff, 0xfe, 0x41]).is_err());
    }
}
