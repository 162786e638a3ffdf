//! The run sheet's layout: a header on the first page, then one block per stop
//! (head, then a row per parcel), paginated onto US Letter pages.
//!
//! Each block is first laid out on its own from y = 0, so its height is known,
//! then moved onto a page. A block that does not fit the rest of a page starts
//! the next one; only a block taller than a whole page is split, between
//! parcel rows, with a "(continued)" line heading the next page.

use super::{Align, Canvas, Item, Style};
use crate::font::Weight::{Bold, Regular};
use crate::{RunSheet, RunSheetParcel, RunSheetStop};
use crate::{code128, text};

/// US Letter portrait. A 0.5 in margin keeps the content inside A4 (595 pt
/// wide) too, when a Letter page is printed there at actual size.
const PAGE_W: f32 = 612.0;
const PAGE_H: f32 = 792.0;
const MARGIN: f32 = 36.0;
const WIDTH: f32 = PAGE_W - 2.0 * MARGIN;
/// Where the body starts, under the running header on every page.
const BODY_TOP: f32 = MARGIN + 22.0;
const BODY_BOTTOM: f32 = PAGE_H - MARGIN;

/// The column the sequence number sits in, left of the stop's details.
const SEQ_W: f32 = 48.0;
const DETAIL_X: f32 = MARGIN + SEQ_W;
const DETAIL_W: f32 = WIDTH - SEQ_W;
/// The bars' column, quiet zones included; the parcel's label is right of it.
const BAR_COL: f32 = 320.0;
/// Bar height: 0.42 in, about 15 % of a 12-character symbol's length.
const BAR_H: f32 = 30.0;
/// Module widths tried in turn. 1.44 pt (1/50 in, 0.51 mm) is a whole number
/// of dots at 200, 300 and 600 dpi and GS1's minimum for logistics labels;
/// the narrower ones keep longer codes scannable. Never below 1 pt.
const MODULES: [f32; 3] = [1.44, 1.2, 1.0];
/// The bars' left edge sits on a 1/50 in grid so that, with a 1.44 pt module,
/// every edge falls on a whole pixel at 200, 300 and 600 dpi: no grey edges
/// for a rasteriser or a scanner to round either way.
const GRID: f32 = 1.44;
/// Code 128 quiet zone each side, in modules.
const QUIET: f32 = 10.0;
const ROW_GAP: f32 = 8.0;
const RULE: f32 = 0.6;

/// Items laid out from y = 0, and the height they take (gaps included).
struct Block {
    items: Vec<Item>,
    height: f32,
}

impl Block {
    fn draw(f: impl FnOnce(&mut Canvas) -> f32) -> Self {
        let mut c = Canvas::page(PAGE_W, PAGE_H);
        let height = f(&mut c);
        Self { items: c.items, height }
    }
}

/// The pages being filled and the top of the free space on the last one.
struct Pagination {
    pages: Vec<Canvas>,
    y: f32,
    /// Whether the last page has a block on it yet.
    empty: bool,
}

impl Pagination {
    fn room(&self) -> f32 {
        BODY_BOTTOM - self.y
    }

    fn next_page(&mut self) {
        self.pages.push(Canvas::page(PAGE_W, PAGE_H));
        self.y = BODY_TOP;
        self.empty = true;
    }

    fn place(&mut self, block: Block) {
        if self.pages.is_empty() {
            self.next_page();
        }
        let dy = self.y;
        let Some(page) = self.pages.last_mut() else { return };
        page.items.extend(block.items.into_iter().map(|mut item| {
            item.shift(dy);
            item
        }));
        self.y += block.height;
        self.empty = false;
    }
}

pub(crate) fn build(sheet: &RunSheet) -> Vec<Canvas> {
    let mut pages = Pagination { pages: Vec::new(), y: BODY_TOP, empty: true };
    pages.next_page();
    let top = header(&mut pages.pages[0], sheet);
    pages.y = top;
    if sheet.stops.is_empty() {
        pages.pages[0].text(MARGIN, top + 12.0, WIDTH, Style::new(Bold, 14.0, 14.0, 1), "No stops.");
    }
    for stop in &sheet.stops {
        place_stop(&mut pages, stop);
    }
    let count = pages.pages.len();
    for (i, page) in pages.pages.iter_mut().enumerate() {
        running_header(page, sheet, i + 1, count);
    }
    pages.pages
}

/// Keeps a stop on one page whenever a page can hold it. A page with no stop
/// on it yet (the first, under the header, or one just started) takes the
/// stop whatever its size: moving it on would only leave that page blank.
fn place_stop(pages: &mut Pagination, stop: &RunSheetStop) {
    let head = stop_head(stop);
    let rows: Vec<Block> = stop.parcels.iter().map(parcel_row).collect();
    let end = Block::draw(|c| {
        c.rect(MARGIN, 6.0, WIDTH, RULE);
        12.0 + RULE
    });
    let total = head.height + rows.iter().map(|r| r.height).sum::<f32>() + end.height;
    let first_row = rows.first().map_or(0.0, |r| r.height);
    let fresh_page = BODY_BOTTOM - BODY_TOP;
    if !pages.empty && total > pages.room() && (total <= fresh_page || head.height + first_row > pages.room()) {
        pages.next_page();
    }
    pages.place(head);
    for row in rows {
        if row.height > pages.room() {
            pages.next_page();
            pages.place(continued(stop));
        }
        pages.place(row);
    }
    if end.height <= pages.room() {
        pages.place(end);
    }
}

/// Title and date, then depot, driver and vehicle, then the summary; returns
/// where the stops start.
fn header(c: &mut Canvas, sheet: &RunSheet) -> f32 {
    let date_w = 140.0;
    let title = c.text(MARGIN, BODY_TOP, WIDTH - date_w - 8.0, Style::new(Bold, 20.0, 12.0, 2), &sheet.title);
    let date_style = Style::new(Bold, 16.0, 10.0, 1).align(Align::Right);
    let date = c.text(MARGIN + WIDTH - date_w, BODY_TOP + 2.0, date_w, date_style, &sheet.date);
    let y = title.max(date).max(BODY_TOP + 20.0) + 8.0;

    let columns = [("DEPOT", &sheet.depot, 0.5), ("DRIVER", &sheet.driver, 0.25), ("VEHICLE", &sheet.vehicle, 0.25)];
    let mut x = MARGIN;
    let mut bottom = y;
    for (caption, value, share) in columns {
        let w = WIDTH * share - 8.0;
        let top = c.text(x, y, w, caption_style(), caption) + 2.0;
        bottom = bottom.max(c.text(x, top, w, Style::new(Regular, 10.0, 7.0, 2), value));
        x += WIDTH * share;
    }
    let y = c.text(MARGIN, bottom + 8.0, WIDTH, Style::new(Bold, 11.0, 8.0, 2), &sheet.summary).max(bottom) + 6.0;
    c.rect(MARGIN, y, WIDTH, 1.5);
    y + 1.5 + 10.0
}

fn caption_style() -> Style {
    Style::new(Bold, 7.0, 6.0, 1)
}

/// "Route 3 · Ana Silva · 2026-11-27" and "Page n of m" above a rule.
fn running_header(c: &mut Canvas, sheet: &RunSheet, n: usize, count: usize) {
    let style = Style::new(Regular, 8.0, 6.0, 1);
    c.text(MARGIN, MARGIN, WIDTH - 110.0, style, &join(&[&sheet.title, &sheet.date]));
    c.text(MARGIN + WIDTH - 100.0, MARGIN, 100.0, style.align(Align::Right), &format!("Page {n} of {count}"));
    c.rect(MARGIN, MARGIN + 12.0, WIDTH, RULE);
}

/// Sequence number large on the left; kind, window and ETA; address;
/// receiver and phone; the recipient's instruction, in bold; note.
fn stop_head(stop: &RunSheetStop) -> Block {
    Block::draw(|c| {
        let seq = c.text(MARGIN, 0.0, SEQ_W - 6.0, Style::new(Bold, 22.0, 9.0, 1), &stop.seq.to_string());
        let kind_w = DETAIL_W * 0.4;
        let kind = c.text(DETAIL_X, 0.0, kind_w - 6.0, Style::new(Bold, 12.0, 8.0, 1), &stop.kind.to_uppercase());
        let when = join(&[&labelled("Window", &stop.window), &labelled("ETA", &stop.eta)]);
        let style = Style::new(Bold, 12.0, 8.0, 1).align(Align::Right);
        let when = c.text(DETAIL_X + kind_w, 0.0, DETAIL_W - kind_w, style, &when);
        let mut y = kind.max(when) + 4.0;
        y = gap(c.text(DETAIL_X, y, DETAIL_W, Style::new(Regular, 11.0, 8.0, 3), &stop.address), y, 3.0);
        let name_w = DETAIL_W * 0.6;
        let name = c.text(DETAIL_X, y, name_w - 6.0, Style::new(Bold, 10.5, 7.5, 1), &stop.receiver);
        let style = Style::new(Regular, 10.0, 7.0, 1).align(Align::Right);
        let phone = c.text(DETAIL_X + name_w, y, DETAIL_W - name_w, style, &stop.phone);
        y = gap(name.max(phone), y, 3.0);
        let instruction = labelled("Instruction:", &stop.instruction);
        y = gap(c.text(DETAIL_X, y, DETAIL_W, Style::new(Bold, 10.0, 7.0, 4), &instruction), y, 3.0);
        let note = labelled("Note:", &stop.note);
        y = gap(c.text(DETAIL_X, y, DETAIL_W, Style::new(Regular, 9.0, 7.0, 3), &note), y, 3.0);
        y.max(seq) + 4.0
    })
}

/// `bottom + space` if something was drawn (`bottom > top`), else `top`.
fn gap(bottom: f32, top: f32, space: f32) -> f32 {
    if bottom > top { bottom + space } else { top }
}

/// `label value`, or nothing when the value would print as nothing (blank or
/// only control characters).
fn labelled(label: &str, value: &str) -> String {
    let value = text::clean(value);
    if value.is_empty() { String::new() } else { format!("{label} {value}") }
}

/// The parts that print as something, joined with " · ".
fn join(parts: &[&str]) -> String {
    parts.iter().map(|p| text::clean(p)).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" \u{00B7} ")
}

/// The first line on a page that carries on a stop from the page before.
fn continued(stop: &RunSheetStop) -> Block {
    Block::draw(|c| {
        let line = join(&[&format!("Stop {} (continued)", stop.seq), &stop.receiver]);
        c.text(MARGIN, 0.0, WIDTH, Style::new(Bold, 9.0, 7.0, 1), &line) + 8.0
    })
}

/// A parcel's Code 128 at the widest module that fits the bar column, quiet
/// zones inside it, and its label to the right, centred on the bars.
fn parcel_row(parcel: &RunSheetParcel) -> Block {
    Block::draw(|c| {
        let payload = code128::sanitize(&parcel.code);
        let label = if parcel.label.trim().is_empty() { payload.clone() } else { parcel.label.clone() };
        let label_x = DETAIL_X + BAR_COL;
        let label_w = DETAIL_W - BAR_COL;
        let label_style = Style::new(Bold, 10.0, 7.0, 2);
        if payload.is_empty() {
            // No code at all: the label alone, as a short row.
            let bottom = c.text(label_x, 0.0, label_w, label_style, &label);
            return bottom.max(12.0) + ROW_GAP;
        }
        // `None` means too long to encode at all, like too long for the column.
        let modules = code128::encode(&payload).unwrap_or_default();
        let n = modules.len() as f32;
        let module = MODULES.into_iter().find(|m| (n + 2.0 * QUIET) * m <= BAR_COL);
        let Some(module) = module.filter(|_| !modules.is_empty()) else {
            let note = Style::new(Regular, 7.0, 6.0, 1);
            let y = c.text(DETAIL_X, 0.0, BAR_COL - 8.0, note, "(code too long for a barcode)");
            let y = c.text(DETAIL_X, y + 2.0, BAR_COL - 8.0, Style::new(Bold, 9.0, 6.0, 2), &payload);
            let bottom = c.text(label_x, 0.0, label_w, label_style, &label);
            return y.max(bottom) + ROW_GAP;
        };
        c.items.push(Item::Barcode(super::BarcodeItem {
            x: (DETAIL_X / GRID).ceil() * GRID + QUIET * module,
            y: 0.0,
            height: BAR_H,
            module,
            module_dots: (module / super::DOT).round() as u32,
            modules,
            payload,
        }));
        let bottom = c.text(label_x, 0.0, label_w, label_style, &label);
        // Centre the label on the bars.
        match c.items.last_mut() {
            Some(Item::Text(t)) if bottom > 0.0 => t.y = ((BAR_H - bottom) / 2.0).max(0.0),
            _ => {}
        }
        BAR_H.max(bottom) + ROW_GAP
    })
}

#[cfg(test)]
mod tests {
    use super::super::block_height;
    use super::*;

    #[test]
    fn blocks_fit_a_page() {
        // Pagination relies on the longest header, stop head and row fitting
        // the first page, and on a "(continued)" line and a row fitting any.
        let long = "Y ".repeat(5000);
        let parcel = RunSheetParcel { code: "X".repeat(200), label: long.clone() };
        let row = parcel_row(&parcel);
        let stop = RunSheetStop {
            seq: u32::MAX,
            kind: long.clone(),
            window: long.clone(),
            eta: long.clone(),
            address: long.clone(),
            receiver: long.clone(),
            phone: long.clone(),
            note: long.clone(),
            instruction: long.clone(),
            parcels: vec![],
        };
        let sheet = RunSheet {
            title: long.clone(),
            date: long.clone(),
            depot: long.clone(),
            driver: long.clone(),
            vehicle: long.clone(),
            summary: long,
            stops: vec![],
        };
        let first_page_top = header(&mut Canvas::page(PAGE_W, PAGE_H), &sheet);
        assert!(first_page_top + stop_head(&stop).height + row.height < BODY_BOTTOM);
        assert!(continued(&stop).height + row.height < BODY_BOTTOM - BODY_TOP);
        assert!(block_height(10.0, 2) < BAR_H, "a two-line label fits beside the bars");
    }
}
