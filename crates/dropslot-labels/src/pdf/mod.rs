//! PDF back end: one page per canvas (a label is one, a run sheet many),
//! vector text in the embedded DejaVu subset, bars and QR modules as filled
//! rectangles. No dates, ids or other varying data are written, so equal
//! input gives equal bytes.

mod embed;

use pdf_writer::{Content, Filter, Finish, Name, Pdf, Rect, Ref, Str};

use crate::font::{Weight, metrics};
use crate::layout::{ASCENT, Align, BarcodeItem, Canvas, DOT, Item, QrItem, TextItem};

const REGULAR: Name<'static> = Name(b"F1");
const BOLD: Name<'static> = Name(b"F2");

/// zlib level for the page content: level 1 already shrinks the repetitive
/// operators by ~4x at a fraction of the time of the default level.
const CONTENT_LEVEL: u8 = 1;

pub(crate) fn write(canvas: &Canvas) -> Vec<u8> {
    write_pages(std::slice::from_ref(canvas))
}

/// Writes one page per canvas, in order; each page has its canvas's size.
pub(crate) fn write_pages(canvases: &[Canvas]) -> Vec<u8> {
    let catalog = Ref::new(1);
    let pages = Ref::new(2);
    let regular_ids = [5, 6, 7, 8, 9].map(Ref::new);
    let bold_ids = [10, 11, 12, 13, 14].map(Ref::new);
    // Page i is object `page_ref(i)`, its content stream the object after it.
    // The first page keeps ids 3 and 4 so a one-page document numbers its
    // objects as the label writer always has.
    let page_ref = |i: usize| Ref::new(if i == 0 { 3 } else { 15 + 2 * (i as i32 - 1) });

    let mut pdf = Pdf::with_capacity(64 * 1024 + canvases.len() * 8 * 1024);
    pdf.catalog(catalog).pages(pages);
    let kids: Vec<Ref> = (0..canvases.len()).map(page_ref).collect();
    pdf.pages(pages).kids(kids.iter().copied()).count(kids.len() as i32);
    for (canvas, &page) in canvases.iter().zip(&kids) {
        let mut p = pdf.page(page);
        p.media_box(Rect::new(0.0, 0.0, canvas.width, canvas.height)).parent(pages).contents(page.next());
        p.resources().fonts().pair(REGULAR, regular_ids[0]).pair(BOLD, bold_ids[0]);
        p.finish();
    }
    for (canvas, &page) in canvases.iter().zip(&kids) {
        let content = content(canvas);
        let compressed = miniz_oxide::deflate::compress_to_vec_zlib(&content, CONTENT_LEVEL);
        pdf.stream(page.next(), &compressed).filter(Filter::FlateDecode);
    }

    embed::embedded(Weight::Regular).write(&mut pdf, regular_ids);
    embed::embedded(Weight::Bold).write(&mut pdf, bold_ids);
    pdf.finish()
}

fn content(canvas: &Canvas) -> Vec<u8> {
    let mut c = Content::new();
    let h = canvas.height;
    c.set_fill_gray(0.0);
    for item in &canvas.items {
        match item {
            Item::Rect { x, y, w, h: rh } => {
                c.rect(*x, h - y - rh, *w, *rh).fill_nonzero();
            }
            Item::Text(t) => text(&mut c, h, t),
            Item::Barcode(b) => barcode(&mut c, h, b),
            Item::Qr(q) => qr(&mut c, h, q),
        }
    }
    c.finish().into_vec()
}

fn text(c: &mut Content, page_h: f32, t: &TextItem) {
    let font = embed::embedded(t.weight);
    let m = metrics(t.weight);
    if t.inverse {
        c.set_fill_gray(1.0);
    }
    c.begin_text();
    c.set_font(if t.weight == Weight::Bold { BOLD } else { REGULAR }, t.size);
    for (i, line) in t.lines.iter().enumerate() {
        let lw = m.width(line, t.size);
        let x = match t.align {
            Align::Left => t.x,
            Align::Center => t.x + (t.width - lw) / 2.0,
            Align::Right => t.x + t.width - lw,
        };
        let baseline = t.y + ASCENT * t.size + i as f32 * t.line_height();
        c.set_text_matrix([1.0, 0.0, 0.0, 1.0, x, page_h - baseline]);
        c.show(Str(&font.encode(line)));
    }
    c.end_text();
    if t.inverse {
        c.set_fill_gray(0.0);
    }
}

/// Calls `f(start, len)` for each run of `true` in `cells`.
fn runs(cells: &[bool], mut f: impl FnMut(usize, usize)) {
    let mut i = 0;
    while i < cells.len() {
        if cells[i] {
            let len = cells[i..].iter().take_while(|&&b| b).count();
            f(i, len);
            i += len;
        } else {
            i += 1;
        }
    }
}

fn barcode(c: &mut Content, page_h: f32, b: &BarcodeItem) {
    let module = b.module;
    let bottom = page_h - b.y - b.height;
    runs(&b.modules, |start, len| {
        c.rect(b.x + start as f32 * module, bottom, len as f32 * module, b.height);
    });
    c.fill_nonzero();
}

fn qr(c: &mut Content, page_h: f32, q: &QrItem) {
    let module = q.module_dots as f32 * DOT;
    for (row, cells) in q.dark.chunks(q.width.max(1)).enumerate() {
        let y = page_h - q.y - (row + 1) as f32 * module;
        runs(cells, |start, len| {
            c.rect(q.x + start as f32 * module, y, len as f32 * module, module);
        });
    }
    c.fill_nonzero();
}
