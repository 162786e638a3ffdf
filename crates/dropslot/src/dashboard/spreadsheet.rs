//! Orders as spreadsheets: the orders list exported as CSV, and orders imported from a CSV
//! file (one row per drop-off and parcel), checked by the API's own validation and submitted
//! as asynchronous order requests (CONTRACT §3.5).
//!
//! Every cell this module writes goes through [`cell`]: a value a spreadsheet would read as
//! a formula (`=`, `+`, `-`, `@`, tab, carriage return first) is prefixed with `'`.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{PageResult, Session, fail};
use crate::app::App;
use crate::error::Error;

/// The orders read per store call while exporting.
const EXPORT_PAGE: usize = 500;

/// A cell as written: text a spreadsheet would evaluate is made inert with a leading `'`.
pub(crate) fn cell(value: &str) -> String {
    match value.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{value}"),
        _ => value.to_string(),
    }
}

/// Rows as a CSV file (comma separated, quoted where needed, UTF-8), every cell escaped.
pub(crate) fn csv_bytes<R: AsRef<[String]>>(
    header: &[&str],
    rows: impl IntoIterator<Item = R>,
) -> Result<Vec<u8>, Error> {
    let io = |e: csv::Error| Error::Internal(format!("writing CSV: {e}"));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header).map_err(io)?;
    for row in rows {
        w.write_record(row.as_ref().iter().map(|v| cell(v))).map_err(io)?;
    }
    w.into_inner().map_err(|e| Error::Internal(format!("writing CSV: {e}")))
}

/// A CSV download named `name`.
pub(crate) fn download(name: &str, bytes: Vec<u8>) -> Response {
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let mut res = (StatusCode::OK, bytes).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    h.insert(header::CONTENT_DISPOSITION, disposition);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    res
}

const EXPORT_HEADER: [&str; 12] = [
    "tracking_code",
    "order",
    "created_at",
    "status",
    "scheduled_date",
    "time_slot",
    "receiver_name",
    "receiver_phone",
    "address",
    "postal_code",
    "custom_codes",
    "total",
];

/// `GET /dashboard/orders.csv`: every order the list's filters (`q`, `status`, `date`) find,
/// one row per drop-off shipment, newest first.
pub(super) async fn export(State(app): State<App>, session: Session, RawQuery(query): RawQuery) -> PageResult {
    let (filter, _, errors, _) = super::orders::filter(query.as_deref().unwrap_or(""));
    if !errors.is_empty() {
        return Err(fail(&session)(Error::Validation(errors)));
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut before = None;
    loop {
        let orders = app
            .store
            .find_orders(session.scope, &filter, before, EXPORT_PAGE)
            .await
            .map_err(|e| fail(&session)(e.into()))?;
        let done = orders.len() < EXPORT_PAGE;
        before = orders.last().map(|o| o.id.0);
        for o in &orders {
            for s in &o.shipments {
                let d = &s.drop_off;
                let codes: Vec<&str> = s.parcels.iter().filter_map(|p| p.custom_code.as_deref()).collect();
                rows.push(vec![
                    d.unique_id.clone(),
                    o.unique_id.clone(),
                    o.created_at.clone(),
                    d.status.as_str().to_string(),
                    d.scheduled_date.clone(),
                    d.slot_name.clone(),
                    d.address.person_name.clone().unwrap_or_default(),
                    d.address.person_phone.clone().unwrap_or_default(),
                    d.address.text.clone(),
                    d.address.postal_code.clone(),
                    codes.join(" "),
                    s.totals.price_with_tax.to_string(),
                ]);
            }
        }
        if done || before.is_none() {
            break;
        }
    }
    let bytes = csv_bytes(&EXPORT_HEADER, rows).map_err(fail(&session))?;
    Ok(download("orders.csv", bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_are_made_inert() {
        for v in ["=1+1", "+33 6", "-2", "@SUM(A1)", "\t=x", "\r=x"] {
            assert_eq!(cell(v), format!("'{v}"));
        }
        assert_eq!(cell("Ana"), "Ana");
        assert_eq!(cell(""), "");
    }
}
