//! A format-neutral description of a label: positioned boxes, text lines,
//! barcodes and QR codes, in PDF points with the origin at the top left.
//!
//! The label layouts in [`labels`] fill a [`Canvas`]; the PDF and ZPL back
//! ends only translate its items, so both formats show the same content.
//! A run sheet ([`run_sheet`]) is a list of canvases, one per PDF page.
//! Barcode and QR modules are whole printer dots (203 dpi) so bars print
//! crisply on thermal printers from either format.

// Layout code talks in x, y, w, h like the page it draws on.
#![allow(clippy::many_single_char_names)]

mod blocks;
mod labels;
mod run_sheet;

pub(crate) use labels::build;
pub(crate) use run_sheet::build as build_run_sheet;

use crate::LabelSize;
use crate::code128;
use crate::font::Weight;
use crate::text::{self, Fitted};

/// One printer dot at 203 dpi, in points.
pub(crate) const DOT: f32 = 72.0 / 203.0;
/// Narrowest Code 128 module we print: 2 dots (0.25 mm) still scans reliably.
const MIN_BAR_DOTS: u32 = 2;
/// Widest module: beyond 4 dots (0.5 mm) bars only waste label space.
const MAX_BAR_DOTS: u32 = 4;
/// Code 128 quiet zone each side, in modules (the standard asks for 10).
const QUIET_BAR: u32 = 10;
/// QR quiet zone each side, in modules.
const QUIET_QR: u32 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Center,
    Right,
}

#[derive(Debug, Clone)]
pub(crate) struct TextItem {
    pub x: f32,
    /// Top of the first line's box (ascender line).
    pub y: f32,
    pub width: f32,
    pub size: f32,
    pub weight: Weight,
    pub align: Align,
    pub lines: Vec<String>,
    /// White text (drawn over a black box).
    pub inverse: bool,
}

impl TextItem {
    /// Distance between baselines.
    pub fn line_height(&self) -> f32 {
        LINE_HEIGHT * self.size
    }
}

/// Baseline-to-baseline distance as a multiple of the font size.
pub(crate) const LINE_HEIGHT: f32 = 1.18;
/// Baseline offset below the top of a line box, as a multiple of the size:
/// DejaVu's ascender (0.928 em). With the descender (0.236 em) this is the
/// font's own box, so blocks that do not overlap by layout do not overlap in
/// any viewer's text selection either.
pub(crate) const ASCENT: f32 = 0.93;
const DESCENT: f32 = 0.24;

/// Height of a block of `n` lines at `size`: first ascent, `n - 1` line
/// advances, and the last descent.
pub(crate) fn block_height(size: f32, n: usize) -> f32 {
    if n == 0 {
        return 0.0;
    }
    (ASCENT + DESCENT) * size + (n - 1) as f32 * LINE_HEIGHT * size
}

#[derive(Debug, Clone)]
pub(crate) struct BarcodeItem {
    pub x: f32,
    pub y: f32,
    pub height: f32,
    /// Module (narrowest bar) width in points, as the PDF draws it.
    pub module: f32,
    /// The same width in 203 dpi dots, for ZPL's `^BY` (labels only).
    pub module_dots: u32,
    /// Modules from start to stop character, `true` = bar.
    pub modules: Vec<bool>,
    /// The sanitised payload, for ZPL's `^FD`.
    pub payload: String,
}

#[derive(Debug, Clone)]
pub(crate) struct QrItem {
    pub x: f32,
    pub y: f32,
    pub module_dots: u32,
    /// Modules per side (without quiet zone).
    pub width: usize,
    /// Row-major, `true` = dark.
    pub dark: Vec<bool>,
    pub data: String,
}

#[derive(Debug, Clone)]
pub(crate) enum Item {
    /// A filled black rectangle: rules and reverse-print boxes.
    Rect {
        x: f32,
        y: f32,
        w: f32,
        h: f32,
    },
    Text(TextItem),
    Barcode(BarcodeItem),
    Qr(QrItem),
}

impl Item {
    /// Moves the item `dy` points down the page.
    pub fn shift(&mut self, dy: f32) {
        match self {
            Item::Rect { y, .. } => *y += dy,
            Item::Text(t) => t.y += dy,
            Item::Barcode(b) => b.y += dy,
            Item::Qr(q) => q.y += dy,
        }
    }
}

/// How a piece of text may be sized.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    pub max: f32,
    pub min: f32,
    pub lines: usize,
    pub weight: Weight,
    pub align: Align,
    pub inverse: bool,
}

impl Style {
    pub const fn new(weight: Weight, max: f32, min: f32, lines: usize) -> Self {
        Self { max, min, lines, weight, align: Align::Left, inverse: false }
    }
    pub const fn align(mut self, align: Align) -> Self {
        self.align = align;
        self
    }
    pub const fn inverse(mut self) -> Self {
        self.inverse = true;
        self
    }
}

pub(crate) struct Canvas {
    pub width: f32,
    pub height: f32,
    pub items: Vec<Item>,
}

impl Canvas {
    pub fn new(size: LabelSize) -> Self {
        let (width, height) = size.points();
        Self::page(width, height)
    }

    /// An empty page of any size (run sheets use paper sizes).
    pub fn page(width: f32, height: f32) -> Self {
        Self { width, height, items: Vec::with_capacity(48) }
    }

    pub fn rect(&mut self, x: f32, y: f32, w: f32, h: f32) {
        self.items.push(Item::Rect { x, y, w, h });
    }

    /// Fits and places `raw` (cleaned first) in a box `w` wide whose top is
    /// `y`; returns the bottom of the text (`y` when there is nothing to show).
    pub fn text(&mut self, x: f32, y: f32, w: f32, style: Style, raw: &str) -> f32 {
        let cleaned = text::clean(raw);
        if cleaned.is_empty() {
            return y;
        }
        let Fitted { size, lines } = text::fit(&cleaned, style.weight, style.max, style.min, w, style.lines);
        let bottom = y + block_height(size, lines.len());
        self.items.push(Item::Text(TextItem {
            x,
            y,
            width: w,
            size,
            weight: style.weight,
            align: style.align,
            lines,
            inverse: style.inverse,
        }));
        bottom
    }

    /// Font size of the text item placed last, if the last item is text.
    pub fn last_text_size(&self) -> Option<f32> {
        match self.items.last() {
            Some(Item::Text(t)) => Some(t.size),
            _ => None,
        }
    }

    /// Places a Code 128 symbol centred in `[x, x + w]`, bars `h` high, with
    /// the human-readable payload under it; returns the bottom. A payload too
    /// long to scan at the narrowest module is printed as text only.
    pub fn barcode(&mut self, x: f32, y: f32, w: f32, h: f32, text_size: f32, raw: &str) -> f32 {
        let payload = code128::sanitize(raw);
        if payload.is_empty() {
            return y;
        }
        // `None` here means too long to encode at all: the text-only case.
        let modules = code128::encode(&payload).unwrap_or_default();
        let avail_dots = (w / DOT).floor() as u32;
        let total = modules.len() as u32 + 2 * QUIET_BAR;
        let module_dots = (avail_dots / total).min(MAX_BAR_DOTS);
        let text_style = Style::new(Weight::Bold, text_size, text_size * 0.7, 2).align(Align::Center);
        if modules.is_empty() || module_dots < MIN_BAR_DOTS {
            let y = self.text(
                x,
                y,
                w,
                Style::new(Weight::Regular, 7.0, 6.0, 1).align(Align::Center),
                "(code too long for a barcode)",
            );
            return self.text(x, y + 3.0, w, text_style, &payload);
        }
        let bar_w = modules.len() as f32 * module_dots as f32 * DOT;
        // Snap the left edge to the dot grid so every module is whole dots.
        let left = snap(x + (w - bar_w) / 2.0);
        let height = snap(h);
        self.items.push(Item::Barcode(BarcodeItem {
            x: left,
            y,
            height,
            module: module_dots as f32 * DOT,
            module_dots,
            modules,
            payload: payload.clone(),
        }));
        self.text(x, y + height + 0.25 * text_size, w, text_style, &payload)
    }

    /// Places a QR code (error correction M) centred in the `side`-point square
    /// at `(x, y)`, quiet zone included. Data that cannot be encoded or would
    /// be too dense to scan is left out.
    pub fn qr(&mut self, x: f32, y: f32, side: f32, raw: &str) {
        let data = qr_data(raw);
        if data.is_empty() {
            return;
        }
        let Ok(code) = qrcode::QrCode::with_error_correction_level(data.as_bytes(), qrcode::EcLevel::M) else {
            return;
        };
        let width = code.width();
        let module_dots = ((side / DOT).floor() as u32 / (width as u32 + 2 * QUIET_QR)).min(8);
        if module_dots < 2 {
            return;
        }
        let qr_side = width as f32 * module_dots as f32 * DOT;
        let dark = code.to_colors().into_iter().map(|c| c == qrcode::Color::Dark).collect();
        self.items.push(Item::Qr(QrItem {
            x: snap(x + (side - qr_side) / 2.0),
            y: snap(y + (side - qr_side) / 2.0),
            module_dots,
            width,
            dark,
            data,
        }));
    }
}

/// Rounds a length in points to whole printer dots.
pub(crate) fn snap(pt: f32) -> f32 {
    (pt / DOT).round() * DOT
}

/// QR payloads are URLs: keep printable ASCII, percent-encode everything else
/// (bytes of non-ASCII characters, spaces, controls) and `^`/`~`, which would
/// start ZPL commands. `%7E` is equivalent to `~` in a URL (RFC 3986 §2.3).
fn qr_data(raw: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(raw.len());
    for b in raw.trim().bytes() {
        if (b'!'..=b'}').contains(&b) && b != b'^' && b != b'\\' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn qr_data_escapes() {
        assert_eq!(super::qr_data("http://x/t/AB12"), "http://x/t/AB12");
        assert_eq!(super::qr_data("a^b~c d\u{e9}"), "a%5Eb%7Ec%20d%C3%A9");
    }
}
