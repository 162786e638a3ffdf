//! Text normalisation, wrapping and shrink-to-fit, shared by both back ends.
//!
//! Every string a label shows goes through [`clean`] then [`fit`], so the PDF
//! and the ZPL output carry the same lines and neither can overflow its box.

use crate::font::{self, ELLIPSIS, Weight, metrics};

/// Normalises user text for display: control characters become spaces (a
/// newline stays a line break), combining marks and zero-width characters are
/// dropped, characters the embedded font lacks become `?`, and runs of spaces
/// collapse. Never fails.
pub(crate) fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = match c {
            '\n' => '\n',
            '\r' | '\t' | '\u{00A0}' => ' ',
            // Combining diacritics (decomposed accents), zero-width and
            // direction marks, variation selectors (emoji presentation):
            // invisible on their own, so drop rather than show `?`.
            '\u{0300}'..='\u{036F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}' => continue,
            c if c.is_control() => ' ',
            c if font::supported(c) => c,
            _ => '?',
        };
        if c == ' ' && (out.ends_with(' ') || out.ends_with('\n') || out.is_empty()) {
            continue;
        }
        if c == '\n' {
            while out.ends_with(' ') {
                out.pop();
            }
            if out.ends_with('\n') || out.is_empty() {
                continue;
            }
        }
        out.push(c);
    }
    while out.ends_with([' ', '\n']) {
        out.pop();
    }
    out
}

/// Text fitted into a box: the chosen size and the lines to draw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fitted {
    pub size: f32,
    pub lines: Vec<String>,
}

/// Finds the largest size in `[min, max]` (0.5 pt steps) at which `text`
/// wraps into at most `max_lines` lines of `width` points. If even `min` is
/// too big, the text is wrapped at `min` and cut with an ellipsis.
/// `text` must already be [`clean`]ed.
pub(crate) fn fit(text: &str, weight: Weight, max: f32, min: f32, width: f32, max_lines: usize) -> Fitted {
    let max_lines = max_lines.max(1);
    let mut size = max;
    loop {
        let (lines, complete) = wrap(text, weight, width * 1000.0 / size, max_lines);
        if complete || size <= min {
            let lines = if complete { lines } else { ellipsize(lines, weight, width * 1000.0 / size) };
            return Fitted { size, lines };
        }
        size = (size - 0.5).max(min);
    }
}

/// Greedy word wrap in 1/1000 em units. Stops after `limit` lines; the flag
/// says whether all text was placed. Words wider than a line are broken
/// between characters.
fn wrap(text: &str, weight: Weight, width_em: f32, limit: usize) -> (Vec<String>, bool) {
    let m = metrics(weight);
    let space = m.width_em(" ");
    let mut lines: Vec<String> = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut line_w = 0.0;
        for word in para.split(' ').filter(|w| !w.is_empty()) {
            let w = m.width_em(word);
            if !line.is_empty() && line_w + space + w <= width_em {
                line.push(' ');
                line.push_str(word);
                line_w += space + w;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
                if lines.len() > limit {
                    return (lines, false);
                }
            }
            if w <= width_em {
                line.push_str(word);
                line_w = w;
                continue;
            }
            // Break an over-long word; each piece holds at least one char so
            // this always makes progress however narrow the box.
            line_w = 0.0;
            for c in word.chars() {
                let cw = m.width_em(c.encode_utf8(&mut [0; 4]));
                if !line.is_empty() && line_w + cw > width_em {
                    lines.push(std::mem::take(&mut line));
                    line_w = 0.0;
                    if lines.len() > limit {
                        return (lines, false);
                    }
                }
                line.push(c);
                line_w += cw;
            }
        }
        if !line.is_empty() {
            lines.push(line);
        }
        if lines.len() > limit {
            return (lines, false);
        }
    }
    (lines, true)
}

/// Cuts `wrap`'s overfull output to its line budget: the last line (the first
/// one over budget) is dropped and the line before it ends with an ellipsis.
fn ellipsize(mut lines: Vec<String>, weight: Weight, width_em: f32) -> Vec<String> {
    let m = metrics(weight);
    lines.pop();
    let Some(last) = lines.last_mut() else {
        return lines;
    };
    let ell = m.width_em(ELLIPSIS.encode_utf8(&mut [0; 4]));
    while !last.is_empty() && m.width_em(last) + ell > width_em {
        last.pop();
    }
    while last.ends_with(' ') {
        last.pop();
    }
    last.push(ELLIPSIS);
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_normalises() {
        assert_eq!(clean("  Jane\t\tDoe \r\n\n 2nd  line \u{7}"), "Jane Doe\n2nd line");
        assert_eq!(clean("Cafe\u{301} \u{1F4E6}\u{FE0F}"), "Cafe ?");
        assert_eq!(clean("^XZ~JR"), "^XZ~JR");
        assert_eq!(clean(""), "");
        assert_eq!(clean("\n\n"), "");
    }

    #[test]
    fn fit_wraps_and_shrinks() {
        let f = fit("Jane Doe", Weight::Bold, 16.0, 10.0, 200.0, 2);
        assert_eq!(f.lines, ["Jane Doe"]);
        assert!((f.size - 16.0).abs() < f32::EPSILON);

        let long = "word ".repeat(200);
        let f = fit(long.trim(), Weight::Regular, 12.0, 8.0, 200.0, 3);
        assert_eq!(f.lines.len(), 3);
        assert!((f.size - 8.0).abs() < f32::EPSILON);
        assert!(f.lines[2].ends_with(ELLIPSIS));
        for l in &f.lines {
            assert!(metrics(Weight::Regular).width(l, f.size) <= 200.0);
        }
    }

    #[test]
    fn fit_breaks_long_words() {
        let f = fit(&"A".repeat(600), Weight::Regular, 12.0, 12.0, 100.0, 2);
        assert_eq!(f.lines.len(), 2);
        for l in &f.lines {
            assert!(metrics(Weight::Regular).width(l, 12.0) <= 100.0);
        }
        // A box narrower than one glyph still terminates.
        let f = fit("MMM", Weight::Bold, 12.0, 12.0, 1.0, 5);
        assert_eq!(f.lines.len(), 3);
    }
}
