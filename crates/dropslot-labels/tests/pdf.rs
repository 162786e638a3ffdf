//! PDF labels checked with tools that do not trust this crate: poppler reads
//! the page size and text and rasterises the page, zxing-cpp decodes the bars.

mod common;

use common::{
    Expect, assert_codes, assert_inside, assert_no_overlap, assert_words_clear_of_codes, decode, demo, media_box,
    page_size, pdftotext, rasterise, run, scratch, words, write,
};
use dropslot_labels::{Label, LabelFormat, LabelSize, render};

/// Resolutions the bars must scan at: a typical office render and the
/// thermal printers' own 203 dpi.
const DPIS: [u32; 2] = [300, 203];

/// Renders `label` in both sizes and checks page size, text, layout bounds
/// and that exactly the expected barcodes decode at every resolution.
fn check(stem: &str, label: &Label, expect: &Expect) {
    let dir = scratch(&format!("pdf-{stem}"));
    for size in LabelSize::ALL {
        let bytes = render(label, size, LabelFormat::Pdf);
        assert!(bytes.starts_with(b"%PDF-1."), "{stem} {size}: not a PDF");
        let (w, h) = size.points();
        assert_eq!(media_box(&bytes), [0.0, 0.0, f64::from(w), f64::from(h)], "{stem} {size}");
        let pdf = write(&dir, &format!("{stem}-{size}.pdf"), &bytes);
        assert_eq!(page_size(&pdf), (f64::from(w), f64::from(h)), "{stem} {size}: pdfinfo page size");

        assert_vector_with_embedded_fonts(&pdf, &format!("{stem} {size}"));
        let text = pdftotext(&pdf);
        for t in &expect.texts {
            assert!(text.contains(t), "{stem} {size}: {t:?} not in extracted text:\n{text}");
        }
        let words = words(&pdf);
        assert_inside(&words, f64::from(w), f64::from(h), &format!("{stem} {size}"));
        assert_no_overlap(&words, &format!("{stem} {size}"));

        let images: Vec<String> = DPIS.iter().map(|&dpi| rasterise(&pdf, dpi)).collect();
        for (decoded, dpi) in decode(&images).into_iter().zip(DPIS) {
            let what = format!("{stem} {size} at {dpi} dpi");
            assert_codes(&decoded, expect, &what);
            assert_words_clear_of_codes(&words, &decoded, dpi, &what);
        }
    }
}

/// Both faces embedded as subsets with a Unicode map (`pdffonts`), and no
/// raster images at all (`pdfimages`): bars and QR modules are vectors.
fn assert_vector_with_embedded_fonts(pdf: &str, what: &str) {
    let fonts = String::from_utf8(run("pdffonts", &[pdf]).stdout).unwrap();
    let rows: Vec<&str> = fonts.lines().skip(2).collect();
    assert_eq!(rows.len(), 2, "{what}: fonts {fonts}");
    for row in rows {
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert!(cols[0].contains("+DejaVuSans"), "{what}: {row}");
        // emb, sub, uni
        assert_eq!(cols[cols.len() - 5..cols.len() - 2], ["yes", "yes", "yes"], "{what}: {row}");
    }
    let images = String::from_utf8(run("pdfimages", &["-list", pdf]).stdout).unwrap();
    assert_eq!(images.lines().count(), 2, "{what}: images found\n{images}");
}

#[test]
fn parcel_label_pdf() {
    let expect = Expect {
        code128: demo::PARCEL_BARCODE.into(),
        qr: None,
        texts: vec![
            "Jane Doe",
            "290 Bremner Blvd, Toronto",
            "M5V 3L9",
            "+1 416 555 0142",
            "Maple Goods Inc.",
            "TOR-DT",
            "YYZ1",
            "2026-11-23",
            "14:00 - 18:00",
            "1 of 2",
            "MEDIUM",
            demo::PARCEL_BARCODE,
            demo::TRACKING_CODE,
        ],
    };
    check("parcel", &Label::Parcel(demo::parcel()), &expect);
}

#[test]
fn drop_off_label_pdf() {
    let expect = Expect {
        code128: demo::TRACKING_CODE.into(),
        qr: Some(demo::TRACKING_URL.into()),
        texts: vec![
            "Jane Doe",
            "290 Bremner Blvd, Toronto",
            "M5V 3L9",
            "Maple Goods Inc.",
            "TOR-DT",
            "YYZ1",
            "2026-11-23",
            "14:00 - 18:00",
            "2 PARCELS",
            demo::TRACKING_CODE,
        ],
    };
    check("drop-off", &Label::DropOff(demo::drop_off()), &expect);
}

#[test]
fn pick_up_label_pdf() {
    let expect = Expect {
        code128: demo::PICK_UP_CODE.into(),
        qr: None,
        texts: vec![
            "Maple Goods Inc.",
            "100 King St W, Toronto",
            "M5X 1A9",
            "2026-11-23",
            "09:00 - 12:00",
            "2 \u{00D7} small",
            "1 \u{00D7} medium",
            "3 PARCELS",
            "DROP-OFFS",
            demo::PICK_UP_CODE,
        ],
    };
    check("pick-up", &Label::PickUp(demo::pick_up()), &expect);
}

#[test]
fn pdf_is_deterministic_and_compact() {
    for (stem, label) in demo::all() {
        for size in LabelSize::ALL {
            let a = render(&label, size, LabelFormat::Pdf);
            assert_eq!(a, render(&label, size, LabelFormat::Pdf), "{stem} {size}");
            // Two subset faces plus the page: far below one whole 700 KB TTF.
            assert!(a.len() < 100_000, "{stem} {size}: {} bytes", a.len());
            let text = String::from_utf8_lossy(&a);
            assert!(!text.contains("/CreationDate") && !text.contains("/ID"), "{stem} {size}: varying metadata");
        }
    }
}
