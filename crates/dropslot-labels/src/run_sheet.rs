//! Run sheets: the printable list a driver takes on a route, as plain data and
//! one pure function that renders it as a multi-page US Letter PDF.
//!
//! The sheet reuses the labels' PDF writer, embedded fonts, text fitting and
//! Code 128, so it has the same guarantees: deterministic bytes, no panic
//! whatever the strings hold. Layout and pagination are in
//! `layout/run_sheet.rs`; docs/labels.md ("Run sheets") explains the choices.

use crate::{layout, pdf};

/// A route's run sheet. Every field is display text, formatted by the caller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSheet {
    /// E.g. `Route 3 · Ana Silva`.
    pub title: String,
    /// E.g. `2026-11-27`.
    pub date: String,
    /// Depot name and address.
    pub depot: String,
    pub driver: String,
    pub vehicle: String,
    /// E.g. `14 stops · 31 parcels · 42.5 km · 5 h 10 min`.
    pub summary: String,
    /// In driving order.
    pub stops: Vec<RunSheetStop>,
}

/// One stop of the route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSheetStop {
    /// Position in the route, printed large.
    pub seq: u32,
    /// `Drop-off`, `Pick-up`, `Return` or `Depot`.
    pub kind: String,
    /// Time window, e.g. `14:00–18:00`.
    pub window: String,
    /// Planned arrival, e.g. `14:32`.
    pub eta: String,
    /// May contain newlines, which become line breaks.
    pub address: String,
    /// Receiver (or pick-up contact) name.
    pub receiver: String,
    pub phone: String,
    pub note: String,
    /// The recipient's delivery instruction (safe place, door code), printed in bold under
    /// the receiver; nothing when empty.
    pub instruction: String,
    pub parcels: Vec<RunSheetParcel>,
}

/// A parcel to hand over or collect at a stop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSheetParcel {
    /// Code 128 payload, e.g. a 12-character pick-up code: printable ASCII
    /// without `^ ~ > \` (others print as `?`, as on the labels).
    pub code: String,
    /// Printed beside the bars, e.g. `PK7M2Q9XR4TB · 2.4 kg`; the code itself
    /// when empty.
    pub label: String,
}

/// Renders `sheet` as a PDF: US Letter portrait, as many pages as needed.
///
/// Deterministic and panic-free for any string content and any number of
/// stops and parcels.
pub fn render_run_sheet(sheet: &RunSheet) -> Vec<u8> {
    pdf::write_pages(&layout::build_run_sheet(sheet))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::layout::{Canvas, Item, build_run_sheet};

    fn stop(seq: u32, parcels: usize) -> RunSheetStop {
        RunSheetStop {
            seq,
            kind: "Drop-off".into(),
            window: "14:00\u{2013}18:00".into(),
            eta: "14:32".into(),
            address: "290 Bremner Blvd, Toronto ON M5V 3L9".into(),
            receiver: "Jane Doe".into(),
            phone: "+1 416 555 0142".into(),
            note: "Leave with the concierge.".into(),
            instruction: "Door code 4412".into(),
            parcels: (0..parcels)
                .map(|i| RunSheetParcel {
                    code: format!("PK7M2Q9XR{i:03}"),
                    label: format!("PK7M2Q9XR{i:03} · 2.4 kg"),
                })
                .collect(),
        }
    }

    fn sheet(stops: Vec<RunSheetStop>) -> RunSheet {
        RunSheet {
            title: "Route 3 \u{00B7} Ana Silva".into(),
            date: "2026-11-27".into(),
            depot: "YYZ1 \u{00B7} 100 King St W, Toronto".into(),
            driver: "Ana Silva".into(),
            vehicle: "Van 12 (ABC 123)".into(),
            summary: "14 stops \u{00B7} 31 parcels \u{00B7} 42.5 km \u{00B7} 5 h 10 min".into(),
            stops,
        }
    }

    /// Every item lies within the page's margins.
    fn assert_on_body(pages: &[Canvas]) {
        for (n, page) in pages.iter().enumerate() {
            for item in &page.items {
                let (top, bottom) = match item {
                    Item::Text(t) => (t.y, t.y + crate::layout::block_height(t.size, t.lines.len())),
                    Item::Barcode(b) => (b.y, b.y + b.height),
                    Item::Rect { y, h, .. } => (*y, *y + *h),
                    Item::Qr(_) => unreachable!(),
                };
                assert!(top >= 36.0 - 0.01 && bottom <= 792.0 - 36.0 + 0.01, "page {n}: {item:?} off the body");
            }
        }
    }

    fn texts(page: &Canvas) -> Vec<String> {
        page.items
            .iter()
            .filter_map(|i| match i {
                Item::Text(t) => Some(t.lines.join(" ")),
                _ => None,
            })
            .collect()
    }

    fn barcodes(pages: &[Canvas]) -> Vec<String> {
        pages
            .iter()
            .flat_map(|p| &p.items)
            .filter_map(|i| match i {
                Item::Barcode(b) => Some(b.payload.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn deterministic() {
        let s = sheet((1..=12).map(|i| stop(i, 3)).collect());
        let a = render_run_sheet(&s);
        assert!(a.starts_with(b"%PDF-1."));
        assert_eq!(a, render_run_sheet(&s));
        let text = String::from_utf8_lossy(&a);
        assert!(!text.contains("/CreationDate") && !text.contains("/ID"), "varying metadata");
    }

    #[test]
    fn no_stops_is_one_page_saying_so() {
        let pages = build_run_sheet(&sheet(vec![]));
        assert_eq!(pages.len(), 1);
        assert!(texts(&pages[0]).iter().any(|t| t == "No stops."));
        assert!(texts(&pages[0]).iter().any(|t| t == "Page 1 of 1"));
        let _ = render_run_sheet(&RunSheet::default());
    }

    #[test]
    fn page_count_grows_with_stops() {
        let mut last = 0;
        for n in [1, 5, 10, 20, 40, 80] {
            let pages = build_run_sheet(&sheet((1..=n).map(|i| stop(i, 2)).collect()));
            assert!(pages.len() >= last, "{n} stops: {} pages after {last}", pages.len());
            last = pages.len();
            for (i, p) in pages.iter().enumerate() {
                let footer = format!("Page {} of {}", i + 1, pages.len());
                assert!(texts(p).contains(&footer), "{n} stops, page {i}: no {footer:?}");
            }
        }
        assert!(last >= 10, "80 stops with 160 parcels on {last} pages");
    }

    #[test]
    fn every_parcel_once_in_order_and_on_the_page() {
        // One stop with more parcels than a page holds continues on the next.
        let mut stops: Vec<_> = (1..=6).map(|i| stop(i, 2)).collect();
        stops.insert(2, stop(99, 40));
        let s = sheet(stops);
        let pages = build_run_sheet(&s);
        let want: Vec<String> = s.stops.iter().flat_map(|st| st.parcels.iter().map(|p| p.code.clone())).collect();
        assert_eq!(barcodes(&pages), want);
        assert!(pages.iter().any(|p| texts(p).iter().any(|t| t.contains("99 (continued)"))));
        assert_on_body(&pages);
    }

    #[test]
    fn bars_are_at_least_one_point_with_quiet_zones() {
        let mut s = sheet(vec![stop(1, 3)]);
        s.stops[0].parcels.push(RunSheetParcel { code: "AB12CD34EF56GH78IJ90".into(), label: String::new() });
        let pages = build_run_sheet(&s);
        let bars: Vec<_> = pages[0]
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Barcode(b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(bars.len(), 4);
        for b in bars {
            assert!(b.module >= 1.0, "{} pt modules", b.module);
            let quiet = 10.0 * b.module;
            let right = b.x + b.modules.len() as f32 * b.module + quiet;
            // Nothing else on the page intrudes on the symbol or its quiet zones.
            for other in &pages[0].items {
                let (x0, y0, x1, y1) = match other {
                    Item::Text(t) => {
                        (t.x, t.y, t.x + t.width, t.y + crate::layout::block_height(t.size, t.lines.len()))
                    }
                    Item::Rect { x, y, w, h } => (*x, *y, x + w, y + h),
                    _ => continue,
                };
                let dx = x1.min(right) - x0.max(b.x - quiet);
                let dy = y1.min(b.y + b.height) - y0.max(b.y);
                assert!(dx <= 0.0 || dy <= 0.0, "{other:?} in the quiet zone of {}", b.payload);
            }
        }
    }

    #[test]
    fn hostile_strings_never_panic() {
        let huge = "W".repeat(10_000);
        let spaced = "word ".repeat(2_000);
        let nasty = [
            String::new(),
            huge.clone(),
            spaced.clone(),
            "\u{0}\u{1}\u{7}\r\n\t\u{1b}[31m".into(),
            "\u{202E}\u{05E9}\u{05DC}\u{05D5}\u{05DD} \u{0645}\u{0631}\u{062D}\u{0628}\u{0627}".into(),
            "\u{1F4E6}\u{FE0F}\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467} Zo\u{eb}".into(),
            "^XZ~JR>\\".into(),
            "\n\n\n".into(),
        ];
        for s in &nasty {
            let st = RunSheetStop {
                seq: u32::MAX,
                kind: s.clone(),
                window: s.clone(),
                eta: s.clone(),
                address: s.clone(),
                receiver: s.clone(),
                phone: s.clone(),
                note: s.clone(),
                instruction: s.clone(),
                parcels: vec![
                    RunSheetParcel { code: s.clone(), label: s.clone() },
                    RunSheetParcel { code: "PK7M2Q9XR4TB".into(), label: s.clone() },
                ],
            };
            let sheet = RunSheet {
                title: s.clone(),
                date: s.clone(),
                depot: s.clone(),
                driver: s.clone(),
                vehicle: s.clone(),
                summary: s.clone(),
                stops: vec![st.clone(), st],
            };
            let pages = build_run_sheet(&sheet);
            assert!(!pages.is_empty() && pages.len() <= 3, "{} pages", pages.len());
            assert!(barcodes(&pages).iter().filter(|b| *b == "PK7M2Q9XR4TB").count() == 2);
            assert!(render_run_sheet(&sheet).starts_with(b"%PDF-1."));
        }
    }

    /// Any text: printable Unicode, control characters and line breaks.
    fn any_text() -> impl Strategy<Value = String> {
        prop_oneof!["\\PC{0,60}", "[\\x00-\\x1f a-z\\u{202E}\\u{1F4E6}]{0,40}", "[A-Za-z ,]{0,400}"]
    }

    fn any_stop() -> impl Strategy<Value = RunSheetStop> {
        let parcels = prop::collection::vec(("[A-Z0-9]{1,24}", any_text()), 0..6);
        (any::<u32>(), any_text(), any_text(), any_text(), parcels).prop_map(|(seq, kind, address, note, parcels)| {
            RunSheetStop {
                seq,
                window: kind.clone(),
                eta: note.clone(),
                receiver: address.clone(),
                phone: kind.clone(),
                instruction: note.clone(),
                kind,
                address,
                note,
                parcels: parcels.into_iter().map(|(code, label)| RunSheetParcel { code, label }).collect(),
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn any_sheet_lays_out_every_code_in_order(
            title in any_text(),
            summary in any_text(),
            stops in prop::collection::vec(any_stop(), 0..10),
        ) {
            let sheet = RunSheet { title, summary, depot: "YYZ1".into(), stops, ..RunSheet::default() };
            let pages = build_run_sheet(&sheet);
            let want: Vec<String> =
                sheet.stops.iter().flat_map(|s| s.parcels.iter().map(|p| p.code.clone())).collect();
            prop_assert_eq!(barcodes(&pages), want);
            assert_on_body(&pages);
            for (i, p) in pages.iter().enumerate() {
                let footer = format!("Page {} of {}", i + 1, pages.len());
                prop_assert!(texts(p).contains(&footer));
            }
            prop_assert_eq!(render_run_sheet(&sheet), render_run_sheet(&sheet));
        }
    }
}
