//! Run sheets checked with tools that do not trust this crate: poppler counts
//! the pages, extracts the text and rasterises every page at 200 dpi, and
//! zxing-cpp decodes the bars on each page.

mod common;

use common::{
    Decoded, assert_inside, assert_no_overlap, assert_words_clear_of_codes, decode, page_count, page_size, page_text,
    page_words, pdftotext, rasterise_pages, scratch, write,
};
use dropslot_labels::{RunSheet, RunSheetParcel, RunSheetStop, render_run_sheet};

/// An office printer's coarse end; the bars must scan at this.
const DPI: u32 = 200;

const STREETS: [&str; 25] = [
    "290 Bremner Blvd",
    "100 Queens Quay E",
    "55 Mill St",
    "1 Dundas St W",
    "60 Front St W",
    "483 Queen St W",
    "20 Bay St",
    "199 Church St",
    "777 Bay St",
    "35 Carl Hall Rd",
    "600 Spadina Ave",
    "161 Bay St",
    "10 Dundas St E",
    "150 King St W",
    "2 Bloor St W",
    "81 Bay St",
    "25 York St",
    "1 Yonge St",
    "220 Yonge St",
    "40 Bay St",
    "317 Dundas St W",
    "100 Front St W",
    "5 Fairview Mall Dr",
    "1 Austin Terrace",
    "9 Trinity St",
];

const NAMES: [&str; 25] = [
    "Jane Doe",
    "Omar Haddad",
    "Li Wei",
    "Zo\u{eb} \u{0141}\u{f3}d\u{17a}",
    "Priya Natarajan",
    "Marc Tremblay",
    "Aisha Bello",
    "Tom\u{e1}s Garc\u{ed}a",
    "Hannah Schmidt",
    "Kenji Sato",
    "Fatima Khan",
    "Lucas Oliveira",
    "Grace O'Neil",
    "Dmitri Ivanov",
    "Chlo\u{e9} Roy",
    "Samuel Mensah",
    "Eva Nov\u{e1}kov\u{e1}",
    "Noah Cohen",
    "Amara Okafor",
    "Mateo Rossi",
    "Ingrid Berg",
    "Yusuf \u{d6}zt\u{fc}rk",
    "Sofia Lindqvist",
    "Ravi Patel",
    "Nora Byrne",
];

/// Parcels per stop: 40 in all, with a 5-parcel stop, two stops without any
/// and a depot stop at each end.
const PARCELS: [usize; 25] = [0, 2, 1, 3, 1, 2, 1, 5, 1, 2, 1, 1, 2, 1, 3, 1, 2, 1, 1, 2, 1, 3, 1, 2, 0];

/// Deterministic 12-character codes in the pick-up code alphabet.
fn code(n: usize) -> String {
    const ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut x = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..12)
        .map(|_| {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            char::from(ALPHABET[(x >> 40) as usize % ALPHABET.len()])
        })
        .collect()
}

fn demo_sheet() -> RunSheet {
    let mut next = 0;
    let stops: Vec<RunSheetStop> = (0..25)
        .map(|i| {
            let parcels = (0..PARCELS[i])
                .map(|_| {
                    next += 1;
                    // One longer code (a parcel barcode) so a narrower module is used too.
                    let c = if next == 7 { format!("{}0107", code(next)) } else { code(next) };
                    RunSheetParcel { label: format!("{c} \u{00B7} {}.{} kg", 1 + next % 9, next % 10), code: c }
                })
                .collect();
            let depot = i == 0 || i == 24;
            let hour = 9 + i / 4;
            RunSheetStop {
                seq: i as u32 + 1,
                kind: if depot {
                    "Depot"
                } else if i % 5 == 3 {
                    "Pick-up"
                } else {
                    "Drop-off"
                }
                .into(),
                window: format!("{:02}:00\u{2013}{:02}:00", hour, hour + 4),
                eta: format!("{hour:02}:{:02}", (i * 13) % 60),
                address: format!("{}, Toronto ON", STREETS[i]),
                receiver: NAMES[i].into(),
                phone: format!("+1 416 555 01{i:02}"),
                note: if i % 4 == 2 { "Buzz 1402; leave with the concierge if out.".into() } else { String::new() },
                parcels,
            }
        })
        .collect();
    RunSheet {
        title: "Route 3 \u{00B7} Ana Silva".into(),
        date: "2026-11-27".into(),
        depot: "YYZ1 \u{00B7} 100 King St W, Toronto ON M5X 1A9".into(),
        driver: "Ana Silva".into(),
        vehicle: "Van 12 \u{00B7} ABC 123".into(),
        summary: "25 stops \u{00B7} 40 parcels \u{00B7} 42.5 km \u{00B7} 5 h 10 min".into(),
        stops,
    }
}

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
    let sheet = demo_sheet();
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
    // and exactly the barcodes of the parcels listed on it, decoded.
    let images = rasterise_pages(&pdf, DPI);
    assert_eq!(images.len(), pages);
    let decoded = decode(&images);
    let mut seen = Vec::new();
    for (i, found) in decoded.iter().enumerate() {
        let n = i + 1;
        let what = format!("page {n} at {DPI} dpi");
        let page = page_text(&pdf, n);
        assert!(page.contains(&format!("Page {n} of {pages}")), "{what}: no page number");
        let words = page_words(&pdf, n);
        assert_inside(&words, 612.0, 792.0, &what);
        assert_no_overlap(&words, &what);
        assert_words_clear_of_codes(&words, found, DPI, &what);

        let mut expected: Vec<String> =
            parcels.iter().filter(|p| page.contains(&p.label)).map(|p| p.code.clone()).collect();
        expected.sort();
        assert!(!expected.is_empty() || n == pages, "{what}: no parcels listed");
        assert_eq!(code128s(found, &what), expected, "{what}: decoded bars differ from the parcels listed");
        seen.extend(expected);
    }
    // Every parcel is on exactly one page.
    let mut all: Vec<String> = parcels.iter().map(|p| p.code.clone()).collect();
    all.sort();
    seen.sort();
    assert_eq!(seen, all);
}

#[test]
fn run_sheet_with_a_long_stop_continues_and_scans() {
    let mut sheet = demo_sheet();
    sheet.stops.truncate(3);
    sheet.stops[1].parcels = (100..130)
        .map(|n| RunSheetParcel { code: code(n), label: format!("{} \u{00B7} box {}", code(n), n - 99) })
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
    let sheet = RunSheet { stops: vec![], ..demo_sheet() };
    let dir = scratch("run-sheet-empty");
    let pdf = write(&dir, "empty.pdf", &render_run_sheet(&sheet));
    assert_eq!(page_count(&pdf), 1);
    let text = pdftotext(&pdf);
    assert!(text.contains("No stops.") && text.contains("Page 1 of 1"), "{text}");
}
