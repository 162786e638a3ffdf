//! Font metrics and the fixed character set shared by the PDF and ZPL back ends.
//!
//! Both back ends lay text out with DejaVu Sans metrics so the two formats show
//! the same lines. The character set is fixed (printable ASCII, Latin-1,
//! Latin Extended-A and a little typographic punctuation) so the PDF font
//! subset can be built once and reused for every document; anything outside
//! it is shown as `?` by [`crate::text::clean`].

use std::sync::LazyLock;

use subsetter::GlyphRemapper;

pub(crate) const REGULAR_TTF: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
pub(crate) const BOLD_TTF: &[u8] = include_bytes!("../fonts/DejaVuSans-Bold.ttf");

/// Typographic punctuation worth keeping beyond the Latin blocks: quotes and
/// dashes pasted from word processors, the bullet and ellipsis the layout uses.
const EXTRA: &[char] = &[
    '\u{2013}', '\u{2014}', '\u{2018}', '\u{2019}', '\u{201A}', '\u{201C}', '\u{201D}', '\u{201E}', '\u{2022}',
    '\u{2026}', '\u{20AC}', '\u{2116}', '\u{2122}', '\u{2212}',
];

/// The ellipsis put at the end of text that had to be cut.
pub(crate) const ELLIPSIS: char = '\u{2026}';

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weight {
    Regular,
    Bold,
}

/// Metrics of one face restricted to the fixed character set.
pub(crate) struct Metrics {
    /// `(char, cid, advance in 1/1000 em)`, sorted by char. The CID is the
    /// glyph id in the subset font (see `remapper`).
    glyphs: Vec<(char, u16, f32)>,
    /// Advance in 1/1000 em indexed by CID, for the PDF `/W` array.
    pub widths_by_cid: Vec<f32>,
    /// Old glyph id → subset glyph id; handed to `subsetter`.
    pub remapper: GlyphRemapper,
    pub ascent: f32,
    pub descent: f32,
    pub cap_height: f32,
    pub bbox: [f32; 4],
    /// Index of `?` in `glyphs`: the fallback for anything not in the set.
    fallback: usize,
    /// Whether `glyphs` starts with all of printable ASCII, so those chars
    /// index directly (the common case; measuring text is the layout's
    /// hot loop).
    ascii_direct: bool,
}

static REGULAR: LazyLock<Metrics> = LazyLock::new(|| Metrics::load(REGULAR_TTF));
static BOLD: LazyLock<Metrics> = LazyLock::new(|| Metrics::load(BOLD_TTF));

pub(crate) fn metrics(weight: Weight) -> &'static Metrics {
    match weight {
        Weight::Regular => &REGULAR,
        Weight::Bold => &BOLD,
    }
}

/// Whether `c` can be drawn in both faces.
pub(crate) fn supported(c: char) -> bool {
    REGULAR.index(c).is_some() && BOLD.index(c).is_some()
}

fn charset() -> impl Iterator<Item = char> {
    (0x20..=0x7E_u32).chain(0xA0..=0x17F).filter_map(char::from_u32).chain(EXTRA.iter().copied())
}

impl Metrics {
    fn load(ttf: &[u8]) -> Self {
        // The fonts are compiled in, so failing to parse them is a build defect.
        let face = ttf_parser::Face::parse(ttf, 0).expect("embedded DejaVu font parses");
        let scale = 1000.0 / f32::from(face.units_per_em());
        let mut remapper = GlyphRemapper::new();
        remapper.remap(0); // .notdef must stay glyph 0 in the subset
        let mut widths_by_cid = vec![advance(&face, ttf_parser::GlyphId(0), scale)];
        let mut glyphs = Vec::new();
        for c in charset() {
            let Some(gid) = face.glyph_index(c) else {
                continue;
            };
            let cid = remapper.remap(gid.0);
            let adv = advance(&face, gid, scale);
            if usize::from(cid) == widths_by_cid.len() {
                widths_by_cid.push(adv);
            }
            glyphs.push((c, cid, adv));
        }
        glyphs.sort_by_key(|g| g.0);
        let fallback = glyphs.binary_search_by_key(&'?', |g| g.0).expect("font has '?'");
        let ascii_direct =
            (0x20..=0x7E_u8).enumerate().all(|(i, b)| glyphs.get(i).is_some_and(|g| g.0 == char::from(b)));
        let bb = face.global_bounding_box();
        Self {
            glyphs,
            widths_by_cid,
            remapper,
            ascent: f32::from(face.ascender()) * scale,
            descent: f32::from(face.descender()) * scale,
            cap_height: f32::from(face.capital_height().unwrap_or(face.ascender())) * scale,
            bbox: [
                f32::from(bb.x_min) * scale,
                f32::from(bb.y_min) * scale,
                f32::from(bb.x_max) * scale,
                f32::from(bb.y_max) * scale,
            ],
            fallback,
            ascii_direct,
        }
    }

    fn index(&self, c: char) -> Option<usize> {
        if self.ascii_direct && (' '..='~').contains(&c) {
            return Some(c as usize - 0x20);
        }
        self.glyphs.binary_search_by_key(&c, |g| g.0).ok()
    }

    fn glyph(&self, c: char) -> (char, u16, f32) {
        self.glyphs[self.index(c).unwrap_or(self.fallback)]
    }

    /// CID of `c` in the subset font (the `?` glyph for unsupported chars).
    pub fn cid(&self, c: char) -> u16 {
        self.glyph(c).1
    }

    /// Width of `s` in 1/1000 em (no kerning: the PDF shows text with plain `Tj`).
    pub fn width_em(&self, s: &str) -> f32 {
        s.chars().map(|c| self.glyph(c).2).sum()
    }

    /// Width of `s` in points at `size`.
    pub fn width(&self, s: &str, size: f32) -> f32 {
        self.width_em(s) * size / 1000.0
    }

    /// Every `(cid, char)` pair, for the PDF `/ToUnicode` map; one char per CID.
    pub fn cid_chars(&self) -> impl Iterator<Item = (u16, char)> + '_ {
        let mut seen = vec![false; self.widths_by_cid.len()];
        self.glyphs.iter().filter_map(move |&(c, cid, _)| {
            let slot = seen.get_mut(usize::from(cid))?;
            (!std::mem::replace(slot, true)).then_some((cid, c))
        })
    }
}

fn advance(face: &ttf_parser::Face<'_>, gid: ttf_parser::GlyphId, scale: f32) -> f32 {
    f32::from(face.glyph_hor_advance(gid).unwrap_or(0)) * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charset_is_covered_by_both_faces() {
        for c in charset() {
            assert!(supported(c), "{c:?} missing");
        }
        assert!(!supported('\u{1F4E6}'));
    }

    #[test]
    fn widths_are_sane() {
        let m = metrics(Weight::Regular);
        assert!((m.width_em("M") - 863.0).abs() < 2.0, "{}", m.width_em("M"));
        // Unsupported characters measure as '?'.
        assert!((m.width_em("\u{4E2D}") - m.width_em("?")).abs() < f32::EPSILON);
        assert_eq!(m.widths_by_cid.len(), usize::from(m.remapper.num_gids()));
        assert!(m.ascii_direct);
        for c in charset() {
            assert_eq!(m.glyph(c).0, c);
        }
    }
}
