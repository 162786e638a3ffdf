//! ZPL II back end for 203 dpi printers, written by hand.
//!
//! Positions come from the shared layout (points → dots). Text is already
//! wrapped with DejaVu Sans metrics, which run wider than the printer's
//! condensed font 0, so each `^FB` block gets explicit line breaks and never
//! re-wraps past its line count. User text cannot inject commands: `^` and
//! `~` (the command prefixes) are removed and `\` (the `^FB` escape) doubled.

use std::fmt::Write;

use crate::LabelSize;
use crate::layout::{Align, BarcodeItem, Canvas, DOT, Item, LINE_HEIGHT, QrItem, TextItem};

pub(crate) fn write(canvas: &Canvas, size: LabelSize) -> String {
    let (w, h) = size.dots();
    let mut z = String::with_capacity(4096);
    // ^CI28: field data is UTF-8. ^LH0,0: positions are from the label's top left.
    let _ = write!(z, "^XA\n^CI28\n^PW{w}\n^LL{h}\n^LH0,0\n");
    for item in &canvas.items {
        match item {
            Item::Rect { x, y, w, h } => {
                let (w, h) = (dots(*w).max(1), dots(*h).max(1));
                // A box whose border is as thick as its short side is filled.
                let _ = writeln!(z, "^FO{},{}^GB{w},{h},{}^FS", dots(*x), dots(*y), w.min(h));
            }
            Item::Text(t) => text(&mut z, t),
            Item::Barcode(b) => barcode(&mut z, b),
            Item::Qr(q) => qr(&mut z, q),
        }
    }
    z.push_str("^XZ\n");
    z
}

/// Points to whole dots, never negative.
fn dots(pt: f32) -> u32 {
    (pt / DOT).round().max(0.0) as u32
}

fn text(z: &mut String, t: &TextItem) {
    let lines: Vec<String> = t.lines.iter().map(|l| escape(l)).collect();
    if lines.iter().all(String::is_empty) {
        return;
    }
    let size = dots(t.size).max(10);
    // ^FB's spacing is added to the font height between lines.
    let spacing = dots((LINE_HEIGHT - 1.0) * t.size);
    let justify = match t.align {
        Align::Left => 'L',
        Align::Center => 'C',
        Align::Right => 'R',
    };
    let _ = write!(
        z,
        "^FO{},{}^A0N,{size},{size}^FB{},{},{spacing},{justify},0",
        dots(t.x),
        dots(t.y),
        dots(t.width).max(1),
        lines.len(),
    );
    if t.inverse {
        z.push_str("^FR");
    }
    let _ = writeln!(z, "^FD{}^FS", lines.join("\\&"));
}

/// Field data for `^FB` text: drop `^`/`~`, double `\`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '^' | '~' => {}
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

fn barcode(z: &mut String, b: &BarcodeItem) {
    let height = dots(b.height).max(1);
    // Mode A: the printer picks character sets (and adds the check digit);
    // the payload is already limited to printable ASCII without ^ ~ > \.
    let _ = writeln!(
        z,
        "^FO{},{}^BY{},2,{height}^BCN,{height},N,N,N,A^FD{}^FS",
        dots(b.x),
        dots(b.y),
        b.module_dots,
        b.payload
    );
}

fn qr(z: &mut String, q: &QrItem) {
    // Model 2, magnification = module size in dots; "MA," = error correction
    // M, automatic data mode. The data has no ^ or ~ (see layout::qr_data).
    let _ = writeln!(z, "^FO{},{}^BQN,2,{}^FDMA,{}^FS", dots(q.x), dots(q.y), q.module_dots.min(10), q.data);
}

#[cfg(test)]
mod tests {
    #[test]
    fn escape_strips_commands() {
        assert_eq!(super::escape("^XZ~JR a\\b"), "XZJR a\\\\b");
    }
}
