//! Label links and serving: every pick-up, drop-off and parcel has labels in 4x6 and 4x4,
//! PDF and ZPL, at an unguessable URL that needs no bearer token (printers fetch it).

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::app::App;
use crate::error::{Error, Result};
use crate::orders::wire::LabelLink;
use crate::store::LabelKind;

pub const SIZES: [&str; 2] = ["4x6", "4x4"];
pub const FORMATS: [&str; 2] = ["pdf", "zpl"];

/// Every size × format of one entity's labels, and the 4x6 PDF as its `label`.
pub fn links(base: &str, kind: LabelKind, token: &str) -> (Vec<LabelLink>, String) {
    let noun = match kind {
        LabelKind::PickUp => "Pick-up",
        LabelKind::DropOff => "Drop-off",
        LabelKind::Parcel => "Parcel",
    };
    let mut out = Vec::with_capacity(4);
    for size in SIZES {
        for format in FORMATS {
            out.push(LabelLink {
                name: format!("{noun} label {size} {}", format.to_ascii_uppercase()),
                size,
                format,
                url: format!("{base}/labels/{}/{token}/{size}.{format}", kind.as_path()),
            });
        }
    }
    let label = out[0].url.clone();
    (out, label)
}

pub fn tracking_url(base: &str, tracking_code: &str) -> String {
    format!("{base}/track/{tracking_code}")
}

pub fn icon_url(base: &str, size_code: &str) -> String {
    format!("{base}/static/icons/{size_code}.svg")
}

/// `GET /labels/{kind}/{token}/{size}.{format}`.
pub async fn serve(
    State(app): State<App>,
    Path((kind, token, file)): Path<(String, String, String)>,
) -> Result<Response> {
    let kind = LabelKind::from_path(&kind).ok_or(Error::NotFound)?;
    let (size, format) = file.split_once('.').ok_or(Error::NotFound)?;
    if !SIZES.contains(&size) || !FORMATS.contains(&format) || token.len() != 22 {
        return Err(Error::NotFound);
    }
    let source = app.store.label_source(kind, &token).await?.ok_or(Error::NotFound)?;
    if source.deleted {
        return Err(Error::Gone("This label belongs to a deleted parcel or shipment."));
    }
    // Rendering arrives with the labels crate (issue 3).
    Err(Error::NotFound)
}

/// `GET /static/icons/{code}.svg`: a parcel-box icon with the size's initial.
pub async fn icon(Path(file): Path<String>) -> Result<Response> {
    let code = file.strip_suffix(".svg").ok_or(Error::NotFound)?;
    if code.is_empty() || code.len() > 32 || !code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(Error::NotFound);
    }
    let initial = code.chars().next().map_or('?', |c| c.to_ascii_uppercase());
    let svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64" role="img" aria-label="{code} parcel"><path d="M8 20 32 8l24 12v26L32 58 8 46z" fill="#c8a165" stroke="#6b4f2a" stroke-width="2"/><path d="M8 20l24 12 24-12M32 32v26" fill="none" stroke="#6b4f2a" stroke-width="2"/><text x="32" y="50" font-family="sans-serif" font-size="16" font-weight="bold" text-anchor="middle" fill="#3b2a14">{initial}</text></svg>"##
    );
    let mut res = svg.into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("image/svg+xml"));
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=86400"));
    Ok(res)
}
