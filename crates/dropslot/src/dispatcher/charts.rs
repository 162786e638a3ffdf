//! Charts drawn on the server as inline SVG (CONTRACT §17): horizontal bars, one a row, each
//! labelled and valued in text, so a chart reads without script, prints, and fits a phone
//! (the `viewBox` scales). Each chart has a title and a description for screen readers, and
//! the page's tables hold the same figures.

use std::fmt::Write;

/// One bar: its label, its value (drawn against the chart's `max`) and the value as written.
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub text: String,
}

// Narrow, so that the text stays readable where a phone scales the chart down.
const WIDTH: f64 = 420.0;
const LABEL: f64 = 110.0;
const VALUE: f64 = 140.0;
const ROW: f64 = 30.0;
/// The bars' colour: 4.5:1 and more against white (the dashboard's accent).
const FILL: &str = "#0a5cad";

/// A horizontal bar chart `id` with a title and a description; `max` is a full bar (at
/// least the largest value). With no bar, one line says so.
pub fn bars(id: &str, title: &str, desc: &str, bars: &[Bar], max: f64) -> String {
    let rows = bars.len().max(1);
    #[allow(clippy::cast_precision_loss)]
    let height = ROW * rows as f64 + 10.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart" id="{id}" role="img" aria-labelledby="{id}-t {id}-d" viewBox="0 0 {WIDTH} {height}" width="100%" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg"><title id="{id}-t">{}</title><desc id="{id}-d">{}</desc>"#,
        escape(title),
        escape(desc)
    );
    if bars.is_empty() {
        let _ = write!(svg, r##"<text x="0" y="20" font-size="15" fill="#1d2433">Nothing to show yet.</text>"##);
    }
    let span = WIDTH - LABEL - VALUE;
    let max = bars.iter().map(|b| b.value).fold(max, f64::max);
    for (i, b) in bars.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let y = ROW * i as f64 + 5.0;
        let w = if max > 0.0 { (b.value.max(0.0) / max * span).max(1.0) } else { 1.0 };
        let _ = write!(
            svg,
            r##"<text x="{lx}" y="{ty}" font-size="14" text-anchor="end" fill="#1d2433">{label}</text><rect x="{LABEL}" y="{y}" width="{w:.1}" height="{h}" fill="{FILL}"/><text x="{vx:.1}" y="{ty}" font-size="14" fill="#1d2433">{text}</text>"##,
            lx = LABEL - 8.0,
            ty = y + 15.0,
            label = escape(&shorten(&b.label, 14)),
            h = ROW - 10.0,
            vx = LABEL + w + 6.0,
            text = escape(&b.text),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A label cut to `n` characters (the table beside the chart holds it whole).
fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n - 1).collect::<String>()) }
}

/// Text as SVG (XML) content or an attribute value.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_escapes_its_labels_and_scales_its_bars() {
        let svg = bars(
            "c",
            "T",
            "D",
            &[
                Bar { label: "<script>".into(), value: 2.0, text: "2".into() },
                Bar { label: "b".into(), value: 1.0, text: "1".into() },
            ],
            0.0,
        );
        assert!(svg.contains("&lt;script&gt;") && !svg.contains("<script>"), "{svg}");
        assert!(svg.contains(r#"width="170.0""#) && svg.contains(r#"width="85.0""#), "{svg}");
        assert!(bars("e", "T", "D", &[], 1.0).contains("Nothing to show yet."));
    }
}
