//! ZPL structure: framing, page size in dots, barcode and QR payloads, and
//! every field inside the label.

mod common;

use common::demo;
use dropslot_labels::{Label, LabelFormat, LabelSize, render};

fn zpl(label: &Label, size: LabelSize) -> String {
    String::from_utf8(render(label, size, LabelFormat::Zpl)).expect("ZPL is UTF-8")
}

/// The `^FD…^FS` data of the field whose commands contain `command`.
fn field_data<'a>(zpl: &'a str, command: &str) -> Vec<&'a str> {
    zpl.lines()
        .filter(|l| l.contains(command))
        .map(|l| {
            let start = l.find("^FD").expect("field data") + 3;
            let end = l[start..].find("^FS").expect("field separator") + start;
            &l[start..end]
        })
        .collect()
}

/// The numbers after `command` up to the next `^`.
fn params(line: &str, command: &str) -> Vec<u32> {
    let start = line.find(command).unwrap() + command.len();
    let rest = &line[start..];
    let rest = &rest[..rest.find('^').unwrap_or(rest.len())];
    rest.split(',').filter_map(|n| n.parse().ok()).collect()
}

#[test]
fn framing_and_page_size() {
    for (stem, label) in demo::all() {
        for (size, ll) in [(LabelSize::FourBySix, "^LL1218"), (LabelSize::FourByFour, "^LL812")] {
            let z = zpl(&label, size);
            assert!(z.starts_with("^XA"), "{stem} {size}");
            assert!(z.trim_end().ends_with("^XZ"), "{stem} {size}");
            for cmd in ["^CI28", "^PW812", ll] {
                assert_eq!(z.matches(cmd).count(), 1, "{stem} {size}: {cmd}");
            }
            assert_eq!(z, zpl(&label, size), "{stem} {size}: not deterministic");
        }
    }
}

#[test]
fn barcodes_carry_exact_payloads() {
    let cases = [
        (Label::Parcel(demo::parcel()), demo::PARCEL_BARCODE, None),
        (Label::DropOff(demo::drop_off()), demo::TRACKING_CODE, Some(demo::TRACKING_URL)),
        (Label::PickUp(demo::pick_up()), demo::PICK_UP_CODE, None),
    ];
    for (label, code, url) in cases {
        for size in LabelSize::ALL {
            let z = zpl(&label, size);
            assert_eq!(field_data(&z, "^BC"), [code], "{size}");
            let qr = field_data(&z, "^BQ");
            match url {
                Some(url) => assert_eq!(qr, [format!("MA,{url}")], "{size}"),
                None => assert!(qr.is_empty(), "{size}"),
            }
            // Module width at least 2 dots, so the printer's bars scan.
            let bc = z.lines().find(|l| l.contains("^BC")).unwrap();
            assert!(params(bc, "^BY")[0] >= 2, "{bc}");
        }
    }
}

#[test]
fn text_fields_show_the_label() {
    let z = zpl(&Label::Parcel(demo::parcel()), LabelSize::FourBySix);
    let texts = field_data(&z, "^A0");
    for t in [
        "Jane Doe",
        "290 Bremner Blvd, Toronto",
        "M5V 3L9",
        "TOR-DT",
        "YYZ1",
        "2026-11-23",
        "14:00 - 18:00",
        "1 of 2",
        "MEDIUM",
    ] {
        assert!(texts.contains(&t), "{t:?} not among {texts:?}");
    }
}

#[test]
fn every_field_is_inside_the_label() {
    for (stem, label) in demo::all() {
        for size in LabelSize::ALL {
            let (w, h) = size.dots();
            for line in zpl(&label, size).lines().filter(|l| l.starts_with("^FO")) {
                let at = params(line, "^FO");
                let (x, y) = (at[0], at[1]);
                assert!(x < w && y < h, "{stem} {size}: {line}");
                if line.contains("^FB") {
                    assert!(x + params(line, "^FB")[0] <= w, "{stem} {size}: {line}");
                }
                if line.contains("^GB") {
                    let gb = params(line, "^GB");
                    assert!(x + gb[0] <= w && y + gb[1] <= h, "{stem} {size}: {line}");
                }
                if line.contains("^BC") {
                    assert!(y + params(line, "^BC")[0] <= h, "{stem} {size}: {line}");
                    // Widest possible encoding (all set B): start, data, check
                    // and stop; plus the 10-module quiet zone on each side.
                    let module = params(line, "^BY")[0];
                    let data = field_data(line, "^BC")[0].len() as u32;
                    let width = (11 * (data + 2) + 13) * module;
                    assert!(x >= 10 * module && x + width + 10 * module <= w, "{stem} {size}: {line}");
                }
            }
        }
    }
}
