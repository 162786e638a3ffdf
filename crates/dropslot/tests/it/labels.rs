//! Labels as a printer and a scanner meet them: every link of an order answers a real
//! document, and the barcodes decoded from the served PDFs (rasterised by poppler, read by
//! zxing-cpp — nothing of ours) carry the custom code, the pick-up code, the tracking URL.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{TestServer, request_with_codes};
use serde_json::Value;

const CODE: &str = "LABELTEST0000001";

/// (format, text) of every barcode in a PDF's first page.
fn decode_pdf(pdf: &[u8], dir: &Path, name: &str) -> Vec<(String, String)> {
    decode_image(&rasterise(pdf, dir, name))
}

/// The first page of `pdf` as a 300 dpi PNG in `dir` (poppler's `pdftoppm`): its path.
pub(crate) fn rasterise(pdf: &[u8], dir: &Path, name: &str) -> PathBuf {
    let pdf_path = dir.join(format!("{name}.pdf"));
    std::fs::write(&pdf_path, pdf).unwrap();
    let prefix = dir.join(name);
    let status = Command::new("pdftoppm")
        .args(["-r", "300", "-png", "-singlefile"])
        .arg(&pdf_path)
        .arg(&prefix)
        .status()
        .expect("pdftoppm is missing: run scripts/test-deps.sh");
    assert!(status.success());
    prefix.with_extension("png")
}

/// (format, text) of every barcode zxing-cpp reads in the image at `path` (PNG or JPEG):
/// nothing of ours decodes them.
pub(crate) fn decode_image(path: &Path) -> Vec<(String, String)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dropslot-labels/tests/decode.py");
    let out = Command::new("python3").arg(script).arg(path).output().expect("python3");
    assert!(
        out.status.success(),
        "decode.py failed (run scripts/test-deps.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json[path.to_str().unwrap()]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["format"].as_str().unwrap().to_string(), c["text"].as_str().unwrap().to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_label_link_serves_a_scannable_document() {
    let s = TestServer::start().await;
    let mut body = request_with_codes(&[CODE, ""]);
    body["drop_offs"][0]["address"]["sender_name"] = serde_json::json!("Maple Goods Inc.");
    let r = s.order(&body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let sh = &r.body["object"]["shipments"][0];
    let tracking = sh["drop_off_shipment"]["unique_id"].as_str().unwrap().to_string();
    let tracking_url = sh["drop_off_shipment"]["tracking_url"].as_str().unwrap().to_string();
    let pick_up_code = sh["parcels"][1]["pick_up_code"].as_str().unwrap().to_string();
    let pick_up_id = sh["pick_up_shipment"]["unique_id"].as_str().unwrap().to_string();
    let lists = [
        ("pick-up", &sh["pick_up_shipment"]["pick_up_label_urls"], pick_up_id.clone()),
        ("drop-off", &sh["drop_off_shipment"]["pick_up_label_urls"], tracking.clone()),
        ("parcel0", &sh["parcels"][0]["pick_up_label_urls"], CODE.to_string()),
        ("parcel1", &sh["parcels"][1]["pick_up_label_urls"], pick_up_code.clone()),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, links, code128) in lists {
        for link in links.as_array().unwrap() {
            let url = link["url"].as_str().unwrap();
            let res = s.http.get(url).send().await.unwrap();
            assert_eq!(res.status(), 200, "{what} {url}");
            let ct = res.headers()["content-type"].to_str().unwrap().to_string();
            assert!(res.headers().contains_key("content-disposition"));
            let etag = res.headers()["etag"].to_str().unwrap().to_string();
            let bytes = res.bytes().await.unwrap();
            match link["format"].as_str().unwrap() {
                "pdf" => {
                    assert_eq!(ct, "application/pdf");
                    assert!(bytes.starts_with(b"%PDF-"), "{what}");
                }
                "zpl" => {
                    let zpl = String::from_utf8(bytes.to_vec()).unwrap();
                    assert!(zpl.starts_with("^XA") && zpl.trim_end().ends_with("^XZ"), "{what}");
                    let field = format!("^FD{code128}^FS");
                    let after_bc = zpl.split("^BC").nth(1).unwrap_or_else(|| panic!("{what}: no ^BC"));
                    assert!(after_bc.contains(&field), "{what}: Code 128 must carry {code128}");
                    if what == "drop-off" {
                        assert!(
                            zpl.split("^BQ").nth(1).is_some_and(|q| q.contains(&tracking_url)),
                            "QR = tracking URL"
                        );
                    }
                }
                other => panic!("unexpected format {other}"),
            }
            // The same request again can be a 304.
            let again = s.http.get(url).header("if-none-match", &etag).send().await.unwrap();
            assert_eq!(again.status(), 304, "{what}");
        }
        // The served 4x6 PDF, rasterised and decoded independently.
        let label = match what {
            "pick-up" => &sh["pick_up_shipment"]["label"],
            "drop-off" => &sh["drop_off_shipment"]["label"],
            "parcel0" => &sh["parcels"][0]["label"],
            _ => &sh["parcels"][1]["label"],
        };
        let pdf = s.http.get(label.as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
        let codes = decode_pdf(&pdf, dir.path(), what);
        assert!(codes.iter().any(|(f, t)| f.contains("128") && *t == code128), "{what}: {codes:?} lacks {code128}");
        if what == "drop-off" {
            assert!(codes.iter().any(|(f, t)| f.contains("QR") && *t == tracking_url), "{codes:?}");
        }
    }
    // Labels need no bearer token, and a token of another entity kind is not accepted.
    let parcel_url = sh["parcels"][0]["label"].as_str().unwrap();
    let as_drop_off = parcel_url.replace("/labels/parcel/", "/labels/drop-off/");
    assert_eq!(s.http.get(&as_drop_off).send().await.unwrap().status(), 404);
    assert_eq!(s.http.get(parcel_url.replace("4x6.pdf", "8x8.pdf")).send().await.unwrap().status(), 404);
}
