//! Long, empty and hostile strings: rendering never panics, PDF text stays on
//! the page and inside its line budget, the bars still scan, and ZPL output
//! carries no command the user typed.

mod common;

use common::{
    Expect, assert_codes, assert_inside, assert_no_overlap, assert_words_clear_of_codes, decode, rasterise, scratch,
    words, write,
};
use dropslot_labels::{DropOffLabel, Label, LabelFormat, LabelSize, ParcelLabel, Party, PickUpLabel, render};

/// A 600-character address; "Bremner" marks the words that came from it.
fn long_address() -> String {
    let unit = "Suite 4400, 290 Bremner Boulevard North, ";
    let mut s = unit.repeat(600 / unit.len() + 1);
    s.truncate(600);
    s
}

fn hostile_party() -> Party {
    Party {
        name: "^XZ~JR Evil^FO0,0^GB812,812,812^FS \u{1F4E6}\u{FE0F} Zo\u{eb} \u{0141}\u{f3}d\u{17a} \u{4E2D}\u{6587} \\& end".into(),
        address: long_address(),
        postal_code: "M5V\u{0} 3L9\u{7}\r\n~DG".into(),
        phone: "+1 416 555 0142 ext. 12345678901234567890123456789012345678901234567890".into(),
    }
}

fn hostile_labels() -> Vec<(&'static str, Label, &'static str, Option<String>)> {
    let long = "TOR-DOWNTOWN-WATERFRONT-".repeat(10);
    let parcel = ParcelLabel {
        sender: hostile_party(),
        receiver: hostile_party(),
        scheduled_date: "2026-11-23 \u{1F600}".into(),
        time_slot: "14:00 - 18:00 ^XZ".repeat(5),
        zone_code: long.clone(),
        warehouse_code: "~JR^XZ".into(),
        index: u32::MAX,
        count: u32::MAX,
        size_code: "extra-extra-large-oversized-pallet".into(),
        barcode: "AB^CD~EF>GH\\IJ".into(),
        tracking_code: "\u{1F4E6}".repeat(50),
    };
    let drop_off = DropOffLabel {
        tracking_code: "DOK7M2Q9XR4TB".into(),
        tracking_url: "http://127.0.0.1:8080/track/DOK7M2Q9XR4TB?x=^XZ~JR".into(),
        sender: hostile_party(),
        receiver: hostile_party(),
        scheduled_date: String::new(),
        time_slot: "\u{0}\u{1}\u{2}".into(),
        zone_code: long.clone(),
        warehouse_code: long,
        parcel_count: 0,
    };
    let pick_up = PickUpLabel {
        pick_up_code: "PUH3X8W2N6QJ".into(),
        address: hostile_party(),
        scheduled_date: "^XZ".into(),
        time_slot: "~JR".into(),
        parcels_by_size: (0..40).map(|i| (format!("size-^{i}~"), u32::MAX)).collect(),
        drop_off_count: u32::MAX,
    };
    vec![
        ("parcel", Label::Parcel(parcel), "AB?CD?EF?GH?IJ", None),
        (
            "drop-off",
            Label::DropOff(drop_off),
            "DOK7M2Q9XR4TB",
            Some("http://127.0.0.1:8080/track/DOK7M2Q9XR4TB?x=%5EXZ%7EJR".into()),
        ),
        ("pick-up", Label::PickUp(pick_up), "PUH3X8W2N6QJ", None),
    ]
}

/// Address lines allowed on the receiver / pick-up block.
fn max_address_lines(size: LabelSize) -> usize {
    match size {
        LabelSize::FourBySix => 4,
        LabelSize::FourByFour => 2,
    }
}

#[test]
fn hostile_pdf_fits_and_scans() {
    let dir = scratch("hostile-pdf");
    for (stem, label, code, qr) in hostile_labels() {
        for size in LabelSize::ALL {
            let what = format!("{stem} {size}");
            let bytes = render(&label, size, LabelFormat::Pdf);
            let pdf = write(&dir, &format!("{stem}-{size}.pdf"), &bytes);
            let (w, h) = size.points();
            let words = words(&pdf);
            assert_inside(&words, f64::from(w), f64::from(h), &what);
            assert_no_overlap(&words, &what);

            // The long address wraps into at most N lines per block (sender
            // blocks have fewer), each a distinct baseline.
            let mut rows: Vec<i64> =
                words.iter().filter(|w| w.text.contains("Bremner")).map(|w| w.y1.round() as i64).collect();
            rows.sort_unstable();
            rows.dedup();
            let blocks = if stem == "pick-up" { 1 } else { 2 };
            assert!(!rows.is_empty(), "{what}: address not shown");
            assert!(rows.len() <= blocks * max_address_lines(size), "{what}: address on {} lines", rows.len());

            let png = rasterise(&pdf, 300);
            let decoded = decode(std::slice::from_ref(&png)).remove(0);
            let expect = Expect { code128: code.into(), qr: qr.clone(), texts: vec![] };
            assert_codes(&decoded, &expect, &what);
            assert_words_clear_of_codes(&words, &decoded, 300, &what);
        }
    }
}

#[test]
fn hostile_zpl_has_only_our_commands() {
    const OURS: [&str; 16] =
        ["XA", "CI28", "PW", "LL", "LH0,0", "FO", "A0N", "FB", "FR", "FD", "FS", "GB", "BY", "BCN", "BQN", "XZ"];
    for (stem, label, code, qr) in hostile_labels() {
        for size in LabelSize::ALL {
            let what = format!("{stem} {size}");
            let zpl = String::from_utf8(render(&label, size, LabelFormat::Zpl)).expect("ZPL is UTF-8");
            assert!(!zpl.contains('~'), "{what}: a ~ command prefix survived");
            for cmd in zpl.split('^').skip(1) {
                assert!(OURS.iter().any(|c| cmd.starts_with(c)), "{what}: unexpected command ^{cmd}");
            }
            assert_eq!(zpl.matches("^XZ").count(), 1, "{what}");
            assert!(zpl.trim_end().ends_with("^XZ"), "{what}");
            assert!(zpl.contains(&format!("^FD{code}^FS")), "{what}: barcode payload");
            if let Some(url) = &qr {
                assert!(zpl.contains(&format!("^FDMA,{url}^FS")), "{what}: QR payload");
            }
            // The text survives, minus the command characters.
            assert!(zpl.contains("XZJR Evil"), "{what}");
        }
    }
}

#[test]
fn empty_labels_render() {
    let labels = [
        Label::Parcel(ParcelLabel::default()),
        Label::DropOff(DropOffLabel::default()),
        Label::PickUp(PickUpLabel::default()),
    ];
    let dir = scratch("empty");
    for (i, label) in labels.iter().enumerate() {
        for size in LabelSize::ALL {
            let pdf = write(&dir, &format!("{i}-{size}.pdf"), &render(label, size, LabelFormat::Pdf));
            assert_eq!(common::page_size(&pdf), (f64::from(size.points().0), f64::from(size.points().1)));
            let zpl = String::from_utf8(render(label, size, LabelFormat::Zpl)).unwrap();
            assert!(zpl.starts_with("^XA") && zpl.trim_end().ends_with("^XZ"));
            // No payload, no symbol.
            assert!(!zpl.contains("^BC") && !zpl.contains("^BQ"), "{zpl}");
        }
    }
}

#[test]
fn too_long_barcode_is_text_only() {
    let label = Label::PickUp(PickUpLabel { pick_up_code: "X".repeat(80), ..PickUpLabel::default() });
    for size in LabelSize::ALL {
        let zpl = String::from_utf8(render(&label, size, LabelFormat::Zpl)).unwrap();
        assert!(!zpl.contains("^BC"), "a barcode too dense to scan was printed");
        assert!(zpl.contains("code too long"));
        let _ = render(&label, size, LabelFormat::Pdf);
    }
}
