//! Run sheets checked with tools that do not trust this crate: poppler counts
//! the pages, extracts the text and rasterises every page at 200 dpi, and
//! zxing-cpp decodes the bars on each page.

mod common;

use common::{
    Decoded, assert_inside, assert_no_overlap, assert_words_clear_of_codes, decode, demo, page_count, page_size,
    page_text, page_words, pdftotext, rasterise_pages, scratch, write,
};
use dropslot_labels::{RunSheet, RunSheetParcel, RunSheetStop, render_run_sheet};

/// Resolutions the bars must scan at: an office printer's coarse end (and
/// the check) and a typical render.
const DPIS: [u32; 2] = [200, 300];
/// The resolution of the other checks.
const DPI: u32 = 200;

/// A stop's text that must appear in route order.
type Field = fn(&RunSheetStop) -> String;

/// The Code 128 payloads zxing-cpp found, sorted; fails on any other symbol.
fn code128s(decoded: &[Decoded], what: &str) -> Vec<String> {
    assert!(decoded.iter().all(|d| d.format == "Code128"), "{what}: unexpected symbols {decoded:?}");
    let mut codes: Vec<String> = decoded.iter().map(|d| d.text.clone()).collect();
    codes.sort();
    codes
}

#[test]
fn run_sheet_renders_in_order_and_every_barcode_scans() {
    let sheet = demo::run_sheet();
    let parcels: Vec<&RunSheetParcel> = sheet.stops.iter().flat_map(|s| &s.parcels).collect();
    assert_eq!(parcels.len(), 40);
    let bytes = render_run_sheet(&sheet);
    assert_eq!(bytes, render_run_sheet(&sheet), "not deterministic");
    let dir = scratch("run-sheet");
    let pdf = write(&dir, "run-sheet.pdf", &bytes);

    let pages = page_count(&pdf);
    assert!((3..=12).contains(&pages), "{pages} pages for 25 stops and 40 parcels");
    assert_eq!(page_size(&pdf), (612.0, 792.0), "US Letter");

    // The header, then every stop's window and ETA, address and receiver, in
    // route order.
    let text = pdftotext(&pdf);
    for needle in ["Route 3 \u{00B7} Ana Silva", "2026-11-27", "YYZ1 \u{00B7} 100 King St W", "Ana Silva", "Van 12"] {
        assert!(text.contains(needle), "header: {needle:?} missing");
    }
    // pdftotext reads a stop's columns one after the other, so each field is
    // checked in route order on its own.
    let fields: [(&str, Field); 3] = [
        ("window", |s| format!("Window {} \u{00B7} ETA {}", s.window, s.eta)),
        ("address", |s| s.address.clone()),
        ("receiver", |s| s.receiver.clone()),
    ];
    for (name, field) in fields {
        let mut at = 0;
        for stop in &sheet.stops {
            let needle = field(stop);
            let found = text[at..]
                .find(&needle)
                .unwrap_or_else(|| panic!("stop {} {name}: {needle:?} not after byte {at}:\n{text}", stop.seq));
            at += found + needle.len();
        }
    }

    // Each page: its number, its text inside the margins without overlaps,
    // and, at each resolution, exactly the barcodes of the parcels listed on
    // it, decoded.
    let texts: Vec<String> = (1..=pages).map(|n| page_text(&pdf, n)).collect();
    let words: Vec<_> = (1..=pages).map(|n| page_words(&pdf, n)).collect();
    for (i, (text, words)) in texts.iter().zip(&words).enumerate() {
        let what = format!("page {}", i + 1);
        assert!(text.contains(&format!("Page {} of {pages}", i + 1)), "{what}: no page number");
        assert_inside(words, 612.0, 792.0, &what);
        assert_no_overlap(words, &what);
    }
    for dpi in DPIS {
        let images = rasterise_pages(&pdf, dpi);
        assert_eq!(images.len(), pages);
        let mut seen = Vec::new();
        for (i, found) in decode(&images).iter().enumerate() {
            let what = format!("page {} at {dpi} dpi", i + 1);
            assert_words_clear_of_codes(&words[i], found, dpi, &what);
            let mut expected: Vec<String> =
                parcels.iter().filter(|p| texts[i].contains(&p.label)).map(|p| p.code.clone()).collect();
            expected.sort();
            assert!(!expected.is_empty() || i + 1 == pages, "{what}: no parcels listed");
            assert_eq!(code128s(found, &what), expected, "{what}: decoded bars differ from the parcels listed");
            seen.extend(expected);
        }
        // Every parcel is on exactly one page.
        let mut all: Vec<String> = parcels.iter().map(|p| p.code.clone()).collect();
        all.sort();
        seen.sort();
        assert_eq!(seen, all, "at {dpi} dpi");
    }
}

#[test]
fn run_sheet_with_a_long_stop_continues_and_scans() {
    let mut sheet = demo::run_sheet();
    sheet.stops.truncate(3);
    sheet.stops[1].parcels = (100..130)
        .map(|n| RunSheetParcel { code: demo::code(n), label: format!("{} \u{00B7} box {}", demo::code(n), n - 99) })
        .collect();
    sheet.stops[2].address = "Suite 4400, 290 Bremner Boulevard North, ".repeat(40);
    sheet.stops[2].receiver = "\u{202E}\u{05E9}\u{05DC}\u{05D5}\u{05DD} \u{1F4E6}\u{FE0F} ^XZ~JR".repeat(20);
    sheet.stops[2].note = "\u{0}\u{7}\r\n".repeat(500);
    let dir = scratch("run-sheet-long");
    let pdf = write(&dir, "long.pdf", &render_run_sheet(&sheet));
    let pages = page_count(&pdf);
    assert!(pages >= 2, "30 parcels on {pages} page");
    let text = pdftotext(&pdf);
    assert!(text.contains("Stop 2 (continued)"), "no continuation line:\n{text}");
    // A note of control characters only prints nothing, not a bare "Note:".
    assert!(!text.contains("Note:"), "empty note shown:\n{text}");
    // The long address wraps into at most three lines.
    let last = page_words(&pdf, pages);
    let mut rows: Vec<i64> = last.iter().filter(|w| w.text.contains("Bremner")).map(|w| w.y1.round() as i64).collect();
    rows.sort_unstable();
    rows.dedup();
    assert!((1..=3).contains(&rows.len()), "address on {} lines", rows.len());

    let images = rasterise_pages(&pdf, DPI);
    let mut seen = Vec::new();
    for (i, found) in decode(&images).iter().enumerate() {
        let what = format!("page {}", i + 1);
        let words = page_words(&pdf, i + 1);
        assert_inside(&words, 612.0, 792.0, &what);
        assert_no_overlap(&words, &what);
        seen.extend(code128s(found, &what));
    }
    let mut all: Vec<String> = sheet.stops.iter().flat_map(|s| &s.parcels).map(|p| p.code.clone()).collect();
    all.sort();
    seen.sort();
    assert_eq!(seen, all);
}

#[test]
fn run_sheet_without_stops_says_so() {
    let sheet = RunSheet { stops: vec![], ..demo::run_sheet() };
    let dir = scratch("run-sheet-empty");
    let pdf = write(&dir, "empty.pdf", &render_run_sheet(&sheet));
    assert_eq!(page_count(&pdf), 1);
    let text = pdftotext(&pdf);
    assert!(text.contains("No stops.") && text.contains("Page 1 of 1"), "{text}");
}
