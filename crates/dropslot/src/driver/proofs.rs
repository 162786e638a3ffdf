//! `POST /driver/proofs`: a driver uploads a signature or photo, once per `Idempotency-Key`
//! (what a proof may be, and who reads it: `crate::proofs`). The body is the image itself,
//! checked by content off the async workers, at most two at a time (a decode of a large photo
//! takes a core and up to ~120 MB for a moment).

use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::auth::staff::DriverCaller;
use crate::error::{Envelope, Error, ErrorEnvelope, Result, envelope};
use crate::http::BodyLimits;
use crate::proofs::content::{self, Format};
use crate::proofs::{MAX_BYTES, ProofUrl, UNATTACHED_KEPT_MS, UNATTACHED_PER_DRIVER};
use dropslot_store::{NewProof, ProofSaved};

/// Image checks running at once, process-wide.
static DECODES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

#[utoipa::path(post, path = "/driver/proofs", tag = "Driver", operation_id = "driver_proof",
    summary = "Upload a proof of delivery (signature or photo)",
    description = "The body is the image itself, `Content-Type: image/png` or `image/jpeg`, at most 5 MB (5,242,880 bytes), at most 8,000 pixels a side and 40 megapixels. It is checked by its content (its first bytes and a full decode). The answer's `url` is what the delivery names in `proof_of_delivery` (`{\"type\": \"signature\"|\"photo\", \"value\": url}`) of `POST /driver/shipments/{unique_id}/transitions`, which attaches it to that shipment; an image no delivery names is deleted after 2 days. A driver holds at most 50 such unattached images. `Idempotency-Key` is required: the same key with the same image answers the same URL again (with `Idempotent-Replayed: true`), with another image a 409.",
    security(("driver_token" = [])),
    request_body(description = "The image file.", content(
        (crate::proofs::ImageFile = "image/png"),
        (crate::proofs::ImageFile = "image/jpeg"),
    )),
    params(("Idempotency-Key" = String, Header, pattern = "^[ -~]{1,255}$", description = "1–255 printable ASCII characters, one per image (required).")),
    responses(
        (status = 201, description = "Stored (or stored before under this key): the proof's URL.", body = Envelope<ProofUrl>,
            headers(("Idempotent-Replayed" = String, description = "`true` when this answers an earlier upload with the same key."))),
        (status = 400, description = "`Authorization` or `Content-Type` was sent more than once.", body = ErrorEnvelope),
        (status = 403, description = "Another kind of token.", body = ErrorEnvelope),
        (status = 408, description = "The image did not arrive in time.", body = ErrorEnvelope),
        (status = 409, description = "The key was used for another image.", body = ErrorEnvelope),
        (status = 413, description = "The image is over 5 MB (refused from its `Content-Length` before it is read).", body = ErrorEnvelope),
        (status = 415, description = "Not `image/png` or `image/jpeg` (`header.Content-Type`), or compressed (`Content-Encoding`).", body = ErrorEnvelope),
        (status = 422, description = "At `body`: not an image of the declared type (a PNG sent as JPEG is named), damaged or truncated, or too many pixels; at `header.Idempotency-Key`: missing or malformed.", body = ErrorEnvelope),
        (status = 429, description = "Over this token's rate limit, or the driver holds 50 images no delivery names yet (deliver with them, or wait for them to expire).", body = ErrorEnvelope),
    ))]
#[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
pub(super) async fn upload(State(app): State<App>, caller: DriverCaller, req: Request) -> Result<Response> {
    let key = super::required_key(req.headers())?;
    let declared = crate::http::single(req.headers(), &CONTENT_TYPE, "Content-Type")?
        .and_then(|v| v.to_str().ok())
        .and_then(Format::from_content_type)
        .ok_or_else(|| {
            Error::MediaType(
                "A proof is a PNG or JPEG image: send it with Content-Type: image/png or image/jpeg.".into(),
            )
        })?;
    let limits = BodyLimits { size: MAX_BYTES, read_timeout: app.settings.net.body_read_timeout };
    let bytes = crate::http::read_body(req, &app, limits).await?;
    if bytes.is_empty() {
        return Err(Error::invalid("body", "The body is empty: send the image file itself."));
    }
    let permit = DECODES.acquire().await.map_err(|_| Error::Unavailable("shutting down"))?;
    let checked = bytes.clone();
    // The permit goes with the decode: a client that hangs up does not free it early.
    let verdict = tokio::task::spawn_blocking(move || {
        let _decoding = permit;
        content::check(declared, &checked)
    })
    .await
    .map_err(|e| Error::Internal(format!("image check: {e}")))?;
    verdict.map_err(|refusal| Error::invalid("body", refusal.to_string()))?;

    let digest = Sha256::new().chain_update(declared.mime()).chain_update([0]).chain_update(&bytes).finalize();
    let request_hash = dropslot_core::ids::hex(&digest);
    let token = crate::proofs::new_token();
    let now_ms = app.clock.now().as_millisecond();
    let proof = NewProof {
        token: token.clone(),
        driver_id: caller.driver_id,
        key,
        request_hash,
        content_type: declared.mime().into(),
        bytes: bytes.to_vec(),
        created_ms: now_ms,
    };
    let answer = |token: &str| ProofUrl { url: crate::proofs::url(&app.settings.base_url, token) };
    match app.store.save_proof(proof, UNATTACHED_PER_DRIVER).await? {
        ProofSaved::Saved => Ok(envelope(201, "Proof stored.", &answer(&token)).into_response()),
        ProofSaved::Replayed(earlier) => {
            Ok(super::replayed(envelope(201, "Proof stored.", &answer(&earlier)).into_response()))
        }
        ProofSaved::KeyReused => Err(super::key_reused()),
        ProofSaved::TooMany => Err(Error::QuotaFull {
            message: format!(
                "You hold {UNATTACHED_PER_DRIVER} images that no delivery names yet: record the deliveries they are for \
                 (each image is deleted {} days after its upload if none names it).",
                UNATTACHED_KEPT_MS / 86_400_000
            ),
            retry_after: 3600,
        }),
    }
}
