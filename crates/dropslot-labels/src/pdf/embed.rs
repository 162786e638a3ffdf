//! The embedded fonts, subset and compressed once per process.
//!
//! Subsetting DejaVu to the fixed character set and deflating it takes a few
//! milliseconds; doing it once in a `LazyLock` leaves each render with a plain
//! copy of ready-made stream bytes (about 20 KB per face).

use std::sync::LazyLock;

use pdf_writer::types::{CidFontType, FontFlags, SystemInfo, UnicodeCmap};
use pdf_writer::{Filter, Finish, Name, Pdf, Rect, Ref, Str};

use crate::font::{BOLD_TTF, Metrics, REGULAR_TTF, Weight, metrics};

pub(super) struct EmbeddedFont {
    /// Subset fonts get a six-letter tag; fixed so output is deterministic.
    base_font: &'static [u8],
    weight: u16,
    metrics: &'static Metrics,
    font_file: Vec<u8>,
    to_unicode: Vec<u8>,
}

static REGULAR: LazyLock<EmbeddedFont> =
    LazyLock::new(|| EmbeddedFont::new(Weight::Regular, REGULAR_TTF, b"DSLBLR+DejaVuSans", 400));
static BOLD: LazyLock<EmbeddedFont> =
    LazyLock::new(|| EmbeddedFont::new(Weight::Bold, BOLD_TTF, b"DSLBLB+DejaVuSans-Bold", 700));

pub(super) fn embedded(weight: Weight) -> &'static EmbeddedFont {
    match weight {
        Weight::Regular => &REGULAR,
        Weight::Bold => &BOLD,
    }
}

const SYSTEM_INFO: SystemInfo<'static> =
    SystemInfo { registry: Str(b"Adobe"), ordering: Str(b"Identity"), supplement: 0 };

/// zlib level for the one-off font streams: they are built once, so spend the time.
const FONT_LEVEL: u8 = 9;

impl EmbeddedFont {
    fn new(weight: Weight, ttf: &[u8], base_font: &'static [u8], os2_weight: u16) -> Self {
        let metrics = metrics(weight);
        // The font is compiled in and the character set fixed: if this fails
        // it fails in every test, never only in production.
        let subset = subsetter::subset(ttf, 0, &metrics.remapper).expect("DejaVu subsets");
        let mut cmap = UnicodeCmap::new(Name(b"Custom"), SYSTEM_INFO);
        for (cid, c) in metrics.cid_chars() {
            cmap.pair(cid, c);
        }
        let cmap = cmap.finish();
        Self {
            base_font,
            weight: os2_weight,
            metrics,
            font_file: miniz_oxide::deflate::compress_to_vec_zlib(&subset, FONT_LEVEL),
            to_unicode: miniz_oxide::deflate::compress_to_vec_zlib(cmap.as_slice(), FONT_LEVEL),
        }
    }

    /// Writes the Type 0 font at `ids[0]` and its four dependent objects at
    /// `ids[1..5]`: CID font, descriptor, font file and `/ToUnicode` map.
    /// Identity-H with CID = subset glyph id keeps the text extractable
    /// through `/ToUnicode` without a custom encoding.
    pub(super) fn write(&self, pdf: &mut Pdf, ids: [Ref; 5]) {
        let [type0, cid, descriptor, file, to_unicode] = ids;
        let m = self.metrics;
        pdf.type0_font(type0)
            .base_font(Name(self.base_font))
            .encoding_predefined(Name(b"Identity-H"))
            .descendant_font(cid)
            .to_unicode(to_unicode);
        let mut font = pdf.cid_font(cid);
        font.subtype(CidFontType::Type2)
            .base_font(Name(self.base_font))
            .system_info(SYSTEM_INFO)
            .font_descriptor(descriptor)
            .default_width(0.0)
            .cid_to_gid_map_predefined(Name(b"Identity"));
        font.widths().consecutive(0, m.widths_by_cid.iter().copied());
        font.finish();
        let [x0, y0, x1, y1] = m.bbox;
        pdf.font_descriptor(descriptor)
            .name(Name(self.base_font))
            .flags(FontFlags::SYMBOLIC)
            .bbox(Rect::new(x0, y0, x1, y1))
            .italic_angle(0.0)
            .ascent(m.ascent)
            .descent(m.descent)
            .cap_height(m.cap_height)
            .weight(self.weight)
            // The usual estimate from the weight class (as typst does).
            .stem_v(10.0 + 0.244 * (f32::from(self.weight) - 50.0))
            .font_file2(file);
        pdf.stream(file, &self.font_file).filter(Filter::FlateDecode);
        pdf.cmap(to_unicode, &self.to_unicode).filter(Filter::FlateDecode);
    }

    /// The text as big-endian CIDs for `Tj`.
    pub(super) fn encode(&self, text: &str) -> Vec<u8> {
        text.chars().flat_map(|c| self.metrics.cid(c).to_be_bytes()).collect()
    }
}
