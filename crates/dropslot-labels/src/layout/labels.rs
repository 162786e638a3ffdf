//! The three label layouts, top to bottom, for both sizes.
//!
//! Zones are fixed-height bands separated by rules. Each zone's content is
//! fitted into its height (see `blocks::party`), so nothing spills into the
//! next zone whatever the text, and the bottom zone (the barcode) always has
//! its room. Heights are in points; 4x6 has 412 pt between the margins, 4x4
//! has 268 pt.

use super::blocks::{
    self, HEAVY, MARGIN, RULE, Scale, Zone, band, caption, party, party_inline, sep, sort_codes, when,
};
use super::{Align, Canvas, Style, block_height};
use crate::font::Weight::{Bold, Regular};
use crate::{DropOffLabel, Label, LabelSize, ParcelLabel, PickUpLabel};

pub(crate) fn build(label: &Label, size: LabelSize) -> Canvas {
    let mut c = Canvas::new(size);
    let s = Scale { compact: size == LabelSize::FourByFour };
    match label {
        Label::Parcel(p) => parcel(&mut c, s, p),
        Label::DropOff(d) => drop_off(&mut c, s, d),
        Label::PickUp(p) => pick_up(&mut c, s, p),
    }
    c
}

/// How much larger than their base sizes the receiver / pick-up address may
/// print when it is short: legibility at arm's length comes first.
const GROW: f32 = 1.2;

fn content_width(c: &Canvas) -> f32 {
    c.width - 2.0 * MARGIN
}

/// The barcode zone from `y` to the bottom margin, keeping `footer` points
/// free under it.
fn barcode_zone(c: &mut Canvas, s: Scale, y: f32, footer: f32, payload: &str) {
    let text_size = s.pick(12.0, 10.0);
    let text_h = 0.25 * text_size + block_height(text_size, 1);
    let bottom = c.height - MARGIN - footer;
    let bar_h = (bottom - y - text_h).min(s.pick(100.0, 70.0));
    // Centre the symbol and its text in the zone when the bars are capped.
    let y = y + ((bottom - y) - (bar_h + text_h)) / 2.0;
    c.barcode(MARGIN, y, content_width(c), bar_h, text_size, payload);
}

fn parcel(c: &mut Canvas, s: Scale, p: &ParcelLabel) {
    let w = content_width(c);
    // Sender on the left, parcel "n of m" and size on the right.
    let top_h = s.pick(52.0, 40.0);
    let right_w = s.pick(84.0, 72.0);
    let left_w = w - right_w - 8.0;
    let sender = blocks::sender_fonts(s);
    party(c, s, Zone { x: MARGIN, y: MARGIN, w: left_w, h: top_h }, "FROM", &p.sender, sender, 1.0);
    c.rect(MARGIN + left_w + 4.0, MARGIN, RULE, top_h);
    let rx = MARGIN + w - right_w;
    let y = caption(c, s, rx, MARGIN, right_w, "PARCEL", Align::Center);
    let of = format!("{} of {}", p.index, p.count);
    let y = c.text(rx, y, right_w, Style::new(Bold, s.pick(20.0, 16.0), 8.0, 1).align(Align::Center), &of);
    let size_style = Style::new(Bold, s.pick(11.0, 9.0), 6.0, 1).align(Align::Center);
    c.text(rx, y + 3.0, right_w, size_style, &p.size_code.to_uppercase());

    let y = sep(c, s, MARGIN + top_h, RULE);
    let to_h = s.pick(112.0, 62.0);
    party(c, s, Zone { x: MARGIN, y, w, h: to_h }, "SHIP TO", &p.receiver, blocks::receiver_fonts(s), GROW);
    let y = sep(c, s, y + to_h, HEAVY);
    let codes_h = s.pick(70.0, 44.0);
    sort_codes(c, s, y, codes_h, w, &p.zone_code, &p.warehouse_code);
    let y = sep(c, s, y + codes_h, RULE);
    let when_h = s.pick(28.0, 22.0);
    when(c, s, y, "DELIVER ON", &p.scheduled_date, &p.time_slot);
    let y = sep(c, s, y + when_h, RULE);

    let track_size = s.pick(8.0, 7.0);
    let footer = track_size + 3.0;
    barcode_zone(c, s, y, footer, &p.barcode);
    if !p.tracking_code.trim().is_empty() {
        let t = format!("TRACKING {}", p.tracking_code.trim());
        let style = Style::new(Regular, track_size, 5.0, 1).align(Align::Center);
        c.text(MARGIN, c.height - MARGIN - track_size, w, style, &t);
    }
}

fn drop_off(c: &mut Canvas, s: Scale, d: &DropOffLabel) {
    let w = content_width(c);
    let y = band(c, s, "DROP-OFF", &count(d.parcel_count, "PARCEL")) + s.pick(5.0, 4.0);
    let from_h = s.pick(50.0, 25.0);
    if s.compact {
        party_inline(c, s, MARGIN, y, w, "FROM", &d.sender);
    } else {
        party(c, s, Zone { x: MARGIN, y, w, h: from_h }, "FROM", &d.sender, blocks::sender_fonts(s), 1.0);
    }
    let y = sep(c, s, y + from_h, RULE);
    let to_h = s.pick(104.0, 62.0);
    party(c, s, Zone { x: MARGIN, y, w, h: to_h }, "SHIP TO", &d.receiver, blocks::receiver_fonts(s), GROW);
    let y = sep(c, s, y + to_h, HEAVY);

    // Sort codes on the left, the tracking QR code on the right.
    let codes_h = s.pick(70.0, 44.0);
    let qr_side = codes_h + 2.0 * blocks::pad(s);
    sort_codes(c, s, y, codes_h, w - qr_side - 2.0, &d.zone_code, &d.warehouse_code);
    c.qr(MARGIN + w - qr_side + blocks::pad(s), y - blocks::pad(s), qr_side, &d.tracking_url);
    let y = sep(c, s, y + codes_h, RULE);
    let when_h = s.pick(28.0, 22.0);
    when(c, s, y, "DELIVER ON", &d.scheduled_date, &d.time_slot);
    let y = sep(c, s, y + when_h, RULE);
    barcode_zone(c, s, y, 0.0, &d.tracking_code);
}

fn pick_up(c: &mut Canvas, s: Scale, p: &PickUpLabel) {
    let w = content_width(c);
    let total: u64 = p.parcels_by_size.iter().map(|(_, n)| u64::from(*n)).sum();
    let y = band(c, s, "PICK-UP", &count(total, "PARCEL")) + s.pick(5.0, 4.0);
    let at_h = s.pick(112.0, 66.0);
    party(c, s, Zone { x: MARGIN, y, w, h: at_h }, "PICK UP AT", &p.address, blocks::receiver_fonts(s), GROW);
    let y = sep(c, s, y + at_h, HEAVY);
    let when_h = s.pick(28.0, 22.0);
    when(c, s, y, "DATE", &p.scheduled_date, &p.time_slot);
    let y = sep(c, s, y + when_h, RULE);

    // Summary: parcels (total and by size) on the left, drop-offs on the right.
    let summary_h = s.pick(66.0, 40.0);
    let right_w = s.pick(90.0, 76.0);
    let left_w = w - right_w - 8.0;
    let top = caption(c, s, MARGIN, y, left_w, "PARCELS", Align::Left);
    let big = Style::new(Bold, s.pick(30.0, 20.0), 10.0, 1);
    let count_w = s.pick(64.0, 46.0);
    c.text(MARGIN, top, count_w - 4.0, big, &total.to_string());
    let breakdown = p
        .parcels_by_size
        .iter()
        .map(|(size, n)| format!("{n} \u{00D7} {}", size.trim()))
        .collect::<Vec<_>>()
        .join("\n");
    let lines = s.pick(4.0, 3.0) as usize;
    let list = Style::new(Regular, s.pick(12.0, 8.5), 6.0, lines);
    c.text(MARGIN + count_w, top, left_w - count_w, list, &breakdown);
    c.rect(MARGIN + left_w + 4.0, y, RULE, summary_h);
    let rx = MARGIN + w - right_w;
    let top = caption(c, s, rx, y, right_w, "DROP-OFFS", Align::Center);
    c.text(rx, top, right_w, big.align(Align::Center), &p.drop_off_count.to_string());
    let y = sep(c, s, y + summary_h, RULE);
    barcode_zone(c, s, y, 0.0, &p.pick_up_code);
}

/// "1 PARCEL", "3 PARCELS".
fn count(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}S"),
    }
}
