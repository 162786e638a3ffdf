//! Label links and serving: every pick-up, drop-off and parcel has labels in 4x6 and 4x4,
//! PDF and ZPL, at an unguessable URL that needs no bearer token (printers fetch it).

mod render;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dropslot_labels::{LabelFormat, LabelSize};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::error::{Error, ErrorEnvelope, Result};
use crate::http::PathParam;
use dropslot_store::LabelKind;

const SIZES: [&str; 2] = ["4x6", "4x4"];
/// Each format as its URL names it and as a link's name does.
const FORMATS: [(&str, &str); 2] = [("pdf", "PDF"), ("zpl", "ZPL")];

/// Every size × format of one entity's labels, and the 4x6 PDF as its `label`.
/// One entry of a `pick_up_label_urls` list.
#[derive(serde::Serialize, Clone, utoipa::ToSchema)]
pub struct LabelLink {
    pub name: String,
    /// `4x6` or `4x4`.
    #[schema(example = "4x6")]
    pub size: &'static str,
    /// `pdf` or `zpl`.
    #[schema(example = "pdf")]
    pub format: &'static str,
    /// Unguessable; needs no bearer token.
    pub url: String,
}

pub fn routes() -> axum::Router<App> {
    use axum::routing::get;
    axum::Router::new().route("/labels/{kind}/{token}/{file}", get(serve)).route("/static/icons/{file}", get(icon))
}

pub fn links(base: &str, kind: LabelKind, token: &str) -> (Vec<LabelLink>, String) {
    let noun = match kind {
        LabelKind::PickUp => "Pick-up",
        LabelKind::DropOff => "Drop-off",
        LabelKind::Parcel => "Parcel",
    };
    // Joined with `concat`, one allocation each: `format!` grew each URL twice, and an order
    // answers with four links for each of its pick-up, drop-offs and parcels (issue 49).
    let mut out = Vec::with_capacity(4);
    for size in SIZES {
        for (format, shown) in FORMATS {
            out.push(LabelLink {
                name: [noun, " label ", size, " ", shown].concat(),
                size,
                format,
                url: [base, "/labels/", kind.as_path(), "/", token, "/", size, ".", format].concat(),
            });
        }
    }
    let label = out[0].url.clone();
    (out, label)
}

pub fn tracking_url(base: &str, tracking_code: &str) -> String {
    [base, "/track/", tracking_code].concat()
}

pub fn icon_url(base: &str, size_code: &str) -> String {
    [base, "/static/icons/", size_code, ".svg"].concat()
}

/// `GET /labels/{kind}/{token}/{size}.{format}`: rendered on demand (deterministic, so the
/// `ETag` is a digest of what is printed and a printer's re-fetch can be a 304).
#[utoipa::path(get, path = "/labels/{kind}/{token}/{file}", tag = "Labels", operation_id = "get_label",
    summary = "A label document",
    description = "The URLs come from order creation and reads (`pick_up_label_urls`, `label`). The token in the URL is the credential: no bearer token. Rate limited per client address.",
    params(
        ("kind" = String, Path, description = "`pick-up`, `drop-off` or `parcel`."),
        ("token" = String, Path, description = "The label's unguessable token."),
        ("file" = String, Path, description = "`<size>.<format>`: `4x6` or `4x4`, `pdf` or `zpl` (`4x6.pdf`)."),
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` from an earlier fetch: 304 when unchanged."),
    ),
    responses(
        (status = 200, description = "The label.",
            content((Vec<u8> = "application/pdf"), (String = "application/x-zpl")),
            headers(
                ("ETag" = String, description = "A digest of what the label prints."),
                ("Content-Disposition" = String, description = "`inline` for PDF, `attachment` for ZPL, with a file name."),
                ("Cache-Control" = String, description = "`private, no-cache`: revalidate with `If-None-Match`."),
            )),
        (status = 304, description = "Unchanged since the `ETag` sent.", headers(("ETag" = String))),
        (status = 404, description = "An unknown kind, size, format or token.", body = ErrorEnvelope),
        (status = 410, description = "The parcel or shipment was deleted.", body = ErrorEnvelope),
        (status = 429, description = "Over the rate limit of this client address.", body = ErrorEnvelope),
    ))]
async fn serve(
    State(app): State<App>,
    _: crate::ratelimit::PublicLimit,
    headers: HeaderMap,
    PathParam((kind, token, file)): PathParam<(String, String, String)>,
) -> Result<Response> {
    let kind = LabelKind::from_path(&kind).ok_or(Error::NotFound)?;
    let (size, format) = file.split_once('.').ok_or(Error::NotFound)?;
    let (Ok(size), Ok(format)) = (size.parse::<LabelSize>(), format.parse::<LabelFormat>()) else {
        return Err(Error::NotFound);
    };
    if token.len() != dropslot_core::ids::URL_TOKEN_LEN {
        return Err(Error::NotFound);
    }
    let source = app.store.label_source(kind, &token).await?.ok_or(Error::NotFound)?;
    if source.deleted {
        return Err(Error::Gone("This label belongs to a deleted parcel or shipment."));
    }
    let label = render::label_for(&source, &app.settings.base_url).map_err(|e| Error::Internal(e.into()))?;
    let etag = etag(&label, size, format);
    if headers.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == etag.as_bytes()) {
        let mut res = StatusCode::NOT_MODIFIED.into_response();
        res.headers_mut().insert(header::ETAG, header_value(&etag)?);
        return Ok(res);
    }
    let bytes = tokio::task::spawn_blocking(move || dropslot_labels::render(&label, size, format))
        .await
        .map_err(|e| Error::Internal(format!("label rendering failed: {e}")))?;
    let disposition = format!(
        "{}; filename=\"{}-{}-{}.{}\"",
        if format == LabelFormat::Pdf { "inline" } else { "attachment" },
        kind.as_path(),
        token.get(..8).unwrap_or("label"),
        size.as_str(),
        format.extension()
    );
    let mut res = bytes.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    h.insert(header::CONTENT_DISPOSITION, header_value(&disposition)?);
    h.insert(header::ETAG, header_value(&etag)?);
    // Labels change when a parcel is deleted (counts): revalidate, never serve stale.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    Ok(res)
}

fn header_value(s: &str) -> Result<HeaderValue> {
    HeaderValue::from_str(s).map_err(|e| Error::Internal(e.to_string()))
}

/// A digest of everything the label prints, its size and format, and the renderer version.
fn etag(label: &dropslot_labels::Label, size: LabelSize, format: LabelFormat) -> String {
    let digest = Sha256::new()
        .chain_update(format!("{label:?}"))
        .chain_update(size.as_str())
        .chain_update(format.as_str())
        .chain_update(env!("CARGO_PKG_VERSION"))
        .finalize();
    format!("\"{}\"", dropslot_core::ids::hex(&digest[..12]))
}

/// `GET /static/icons/{code}.svg`: a parcel-box icon with the size's initial.
#[utoipa::path(get, path = "/static/icons/{file}", tag = "Labels", operation_id = "get_size_icon",
    summary = "A parcel-size icon (the `icon_url` of `parcel_summary`)",
    params(("file" = String, Path, description = "`<size code>.svg`, e.g. `small.svg`.")),
    responses(
        (status = 200, description = "The icon.", content_type = "image/svg+xml", body = String),
        (status = 404, description = "Not `<letters, digits, - or _>.svg`.", body = ErrorEnvelope),
    ))]
async fn icon(PathParam(file): PathParam<String>) -> Result<Response> {
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

#[cfg(test)]
mod tests {
    use dropslot_store::LabelKind;

    /// Each entity's four links, named and addressed as the interface shows them, the 4x6 PDF
    /// first (its `label`).
    #[test]
    fn links_name_and_address_every_size_and_format() {
        let (links, label) = super::links("https://x.test", LabelKind::Parcel, "tok");
        let got: Vec<(&str, &str, &str, &str)> =
            links.iter().map(|l| (l.name.as_str(), l.size, l.format, l.url.as_str())).collect();
        let path = LabelKind::Parcel.as_path();
        let url = |file: &str| format!("https://x.test/labels/{path}/tok/{file}");
        let (a, b, c, d) = (url("4x6.pdf"), url("4x6.zpl"), url("4x4.pdf"), url("4x4.zpl"));
        assert_eq!(
            got,
            [
                ("Parcel label 4x6 PDF", "4x6", "pdf", a.as_str()),
                ("Parcel label 4x6 ZPL", "4x6", "zpl", b.as_str()),
                ("Parcel label 4x4 PDF", "4x4", "pdf", c.as_str()),
                ("Parcel label 4x4 ZPL", "4x4", "zpl", d.as_str()),
            ]
        );
        assert_eq!(label, a);
        assert_eq!(super::tracking_url("https://x.test", "ABC"), "https://x.test/track/ABC");
        assert_eq!(super::icon_url("https://x.test", "small"), "https://x.test/static/icons/small.svg");
    }
}
