//! Building blocks shared by the three label kinds: rules, captions, party
//! (address) blocks, sort-code boxes and the delivery window.
//!
//! Every block gets a fixed box and fits its text into it (wrap, then shrink,
//! then cut with an ellipsis), so the page can never overflow whatever the
//! input.

use super::{ASCENT, Align, Canvas, Style};
use crate::Party;
use crate::font::Weight::{Bold, Regular};

/// Page margin: 1/8 in, inside the unprintable edge of common thermal printers.
pub(super) const MARGIN: f32 = 10.0;
/// Thin rule between zones.
pub(super) const RULE: f32 = 1.2;
/// Heavy rule above the sort codes.
pub(super) const HEAVY: f32 = 2.4;

/// Font sizes for the two label sizes; 4x4 is the compact variant.
#[derive(Clone, Copy)]
pub(super) struct Scale {
    pub compact: bool,
}

impl Scale {
    /// Pick the 4x6 value or the 4x4 one.
    pub fn pick(self, big: f32, small: f32) -> f32 {
        if self.compact { small } else { big }
    }
    pub fn caption(self) -> Style {
        Style::new(Bold, self.pick(7.0, 6.0), 5.5, 1)
    }
}

/// Space between a zone and a rule.
pub(super) fn pad(s: Scale) -> f32 {
    s.pick(5.0, 4.0)
}

/// Ends the zone whose bottom is `y` with a full-width rule; returns the top
/// of the next zone.
pub(super) fn sep(c: &mut Canvas, s: Scale, y: f32, thickness: f32) -> f32 {
    c.rect(MARGIN, y + pad(s), c.width - 2.0 * MARGIN, thickness);
    y + 2.0 * pad(s) + thickness
}

/// Small uppercase caption naming a zone ("SHIP TO"); returns its bottom plus a gap.
pub(super) fn caption(c: &mut Canvas, s: Scale, x: f32, y: f32, w: f32, text: &str, align: Align) -> f32 {
    c.text(x, y, w, s.caption().align(align), text) + s.pick(3.0, 2.5)
}

/// A box on the page: left, top, width, height.
#[derive(Clone, Copy, Debug)]
pub(super) struct Zone {
    pub x: f32,
    pub y: f32,
    pub w: f32,
    pub h: f32,
}

/// Text sizes for a party block.
#[derive(Clone, Copy)]
pub(super) struct PartyFonts {
    pub name: Style,
    pub address: Style,
    pub postal: Style,
    pub phone: Style,
}

impl PartyFonts {
    fn scaled(self, k: f32) -> Self {
        let f = |s: Style| Style { max: s.max * k, min: s.min.min(s.max * k), ..s };
        Self { name: f(self.name), address: f(self.address), postal: f(self.postal), phone: f(self.phone) }
    }
}

/// Caption, name, address and a postal-code/phone row, fitted into `max_h`:
/// the block is laid out at `grow` times the given sizes, then at smaller
/// scales until it fits (each field also wraps and shrinks on its own), so
/// short addresses print big and long ones still fit. Returns the bottom.
pub(super) fn party(c: &mut Canvas, s: Scale, zone: Zone, title: &str, p: &Party, f: PartyFonts, grow: f32) -> f32 {
    let start = c.items.len();
    let mut k = grow;
    loop {
        let bottom = party_at(c, s, zone, title, p, f.scaled(k));
        // At half size every field's maximum fits the zones the labels give
        // (the hostile-input tests check this for every label and size).
        if bottom <= zone.y + zone.h || k <= 0.5 {
            return bottom;
        }
        c.items.truncate(start);
        k -= 0.1;
    }
}

fn party_at(c: &mut Canvas, s: Scale, zone: Zone, title: &str, p: &Party, f: PartyFonts) -> f32 {
    let Zone { x, y, w, .. } = zone;
    let mut y = caption(c, s, x, y, w, title, Align::Left);
    let gap = s.pick(2.5, 1.5);
    let name_bottom = c.text(x, y, w, f.name, &p.name);
    let mut address = f.address;
    if name_bottom > y {
        y = name_bottom + gap;
        // Keep the hierarchy: a long name that had to shrink pulls the
        // address down with it rather than printing under it in larger type.
        if let Some(size) = c.last_text_size() {
            address.max = address.max.min(size);
            address.min = address.min.min(address.max);
        }
    }
    let addr_bottom = c.text(x, y, w, address, &p.address);
    if addr_bottom > y {
        y = addr_bottom + gap;
    }
    // The postal code and the phone share a row without overlapping: each
    // has its own part of the width and shrinks to fit it. The phone (smaller)
    // sits low so both share a baseline.
    let postal_w = w * 0.45;
    let postal_bottom = c.text(x, y, postal_w, f.postal, &p.postal_code);
    let phone_y = if postal_bottom > y { y + ASCENT * (f.postal.max - f.phone.max).max(0.0) } else { y };
    let phone_bottom = c.text(x + postal_w + 4.0, phone_y, w - postal_w - 4.0, f.phone.align(Align::Right), &p.phone);
    postal_bottom.max(phone_bottom)
}

/// A party on one or two small lines: "name · address · postal · phone".
pub(super) fn party_inline(c: &mut Canvas, s: Scale, x: f32, y: f32, w: f32, title: &str, p: &Party) -> f32 {
    let y = caption(c, s, x, y, w, title, Align::Left);
    let address = p.address.replace(['\n', '\r'], ", ");
    let parts = [p.name.trim(), address.trim(), p.postal_code.trim(), p.phone.trim()];
    let line = parts.iter().filter(|t| !t.is_empty()).copied().collect::<Vec<_>>().join(" \u{00B7} ");
    c.text(x, y, w, Style::new(Regular, s.pick(8.0, 7.0), 5.5, 2), &line)
}

/// The sort codes: zone in white on a black box (the code sorters look for),
/// warehouse code large beside it. `w` is the width both share.
pub(super) fn sort_codes(c: &mut Canvas, s: Scale, y: f32, h: f32, w: f32, zone: &str, warehouse: &str) {
    let x = MARGIN;
    let zone_w = (w * 0.62).round();
    c.rect(x, y, zone_w, h);
    let pad = s.pick(5.0, 3.5);
    let cap = s.caption().align(Align::Center).inverse();
    let top = c.text(x + pad, y + pad, zone_w - 2.0 * pad, cap, "ZONE") + 2.0;
    let size = (y + h - pad - top).min(s.pick(46.0, 34.0));
    let style = Style::new(Bold, size, 12.0, 1).align(Align::Center).inverse();
    centred_vertically(c, x + pad, top, zone_w - 2.0 * pad, y + h - pad, style, zone);

    let wx = x + zone_w + pad;
    let ww = w - zone_w - pad;
    let top = caption(c, s, wx, y + pad, ww, "WAREHOUSE", Align::Center);
    let size = (y + h - pad - top).min(s.pick(30.0, 22.0));
    let style = Style::new(Bold, size, 10.0, 1).align(Align::Center);
    centred_vertically(c, wx, top, ww, y + h - pad, style, warehouse);
}

/// Fits single-line text, then moves it down to the middle of `[top, bottom]`.
fn centred_vertically(c: &mut Canvas, x: f32, top: f32, w: f32, bottom: f32, style: Style, text: &str) {
    let end = c.text(x, top, w, style, text);
    if end > top {
        let slack = (bottom - end).max(0.0) / 2.0;
        if let Some(super::Item::Text(t)) = c.items.last_mut() {
            t.y += slack;
        }
    }
}

/// Delivery window: date on the left, time slot on the right.
pub(super) fn when(c: &mut Canvas, s: Scale, y: f32, date_caption: &str, date: &str, slot: &str) -> f32 {
    let half = (c.width - 2.0 * MARGIN) / 2.0;
    let style = Style::new(Bold, s.pick(15.0, 12.0), 8.0, 1);
    let top = caption(c, s, MARGIN, y, half - 4.0, date_caption, Align::Left);
    let a = c.text(MARGIN, top, half - 4.0, style, date);
    let top = caption(c, s, MARGIN + half, y, half, "TIME SLOT", Align::Right);
    let b = c.text(MARGIN + half, top, half, style.align(Align::Right), slot);
    a.max(b).max(top)
}

/// A black band across the top with a title on the left and a note on the right.
pub(super) fn band(c: &mut Canvas, s: Scale, title: &str, note: &str) -> f32 {
    let h = s.pick(24.0, 19.0);
    let w = c.width - 2.0 * MARGIN;
    c.rect(MARGIN, MARGIN, w, h);
    let size = s.pick(14.0, 11.0);
    let y = MARGIN + (h - size) / 2.0;
    let style = Style::new(Bold, size, 8.0, 1).inverse();
    c.text(MARGIN + 6.0, y, w * 0.5 - 6.0, style, title);
    c.text(MARGIN + w * 0.5, y, w * 0.5 - 6.0, style.align(Align::Right), note);
    MARGIN + h
}

pub(super) fn receiver_fonts(s: Scale) -> PartyFonts {
    PartyFonts {
        name: Style::new(Bold, s.pick(22.0, 14.0), s.pick(11.0, 8.0), s.pick(2.0, 1.0) as usize),
        address: Style::new(Regular, s.pick(15.0, 10.0), 7.0, s.pick(4.0, 2.0) as usize),
        postal: Style::new(Bold, s.pick(20.0, 13.0), 9.0, 1),
        phone: Style::new(Regular, s.pick(12.0, 9.0), 7.0, 1),
    }
}

pub(super) fn sender_fonts(s: Scale) -> PartyFonts {
    PartyFonts {
        name: Style::new(Bold, s.pick(9.0, 8.0), 6.5, 1),
        address: Style::new(Regular, s.pick(8.0, 7.0), 6.0, s.pick(2.0, 1.0) as usize),
        postal: Style::new(Bold, s.pick(8.0, 7.0), 6.0, 1),
        phone: Style::new(Regular, s.pick(8.0, 7.0), 6.0, 1),
    }
}
