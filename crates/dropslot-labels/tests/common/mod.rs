//! Helpers for the integration tests: run poppler and zxing-cpp on rendered
//! labels. The tools are installed by scripts/test-deps.sh; when one is
//! missing the test fails (never skips) and says so.

#![allow(dead_code)] // each test binary uses a different part

pub mod demo;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const DEPS: &str = "run scripts/test-deps.sh to install poppler-utils and zxing-cpp";

/// A scratch directory for one test, removed when the test passes and kept
/// (for a look at the PDFs and PNGs) when it fails.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("dropslot-labels-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// Runs a tool; a missing tool is a test failure naming the install script.
pub fn run(program: &str, args: &[&str]) -> Output {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("cannot run {program}: {e}; {DEPS}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Rasterises page 1 of `pdf` at `dpi` and returns the PNG's path.
pub fn rasterise(pdf: &str, dpi: u32) -> String {
    let prefix = format!("{}-{dpi}", pdf.trim_end_matches(".pdf"));
    run("pdftoppm", &["-r", &dpi.to_string(), "-png", "-singlefile", pdf, &prefix]);
    format!("{prefix}.png")
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub format: String,
    pub text: String,
    /// Pixel box `[x_min, y_min, x_max, y_max]`.
    pub bbox: [f64; 4],
}

/// Decodes every barcode in each image with zxing-cpp (tests/decode.py).
pub fn decode(images: &[String]) -> Vec<Vec<Decoded>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/decode.py");
    let out = Command::new("python3")
        .arg(script)
        .args(images)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3: {e}; {DEPS}"));
    assert!(
        out.status.success(),
        "decode.py failed ({}): {}; {DEPS}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("decode.py prints JSON");
    images
        .iter()
        .map(|img| {
            json[img.as_str()]
                .as_array()
                .expect("an entry per image")
                .iter()
                .map(|r| Decoded {
                    format: r["format"].as_str().unwrap().to_owned(),
                    text: r["text"].as_str().unwrap().to_owned(),
                    bbox: std::array::from_fn(|i| r["box"][i].as_f64().unwrap()),
                })
                .collect()
        })
        .collect()
}

/// `pdfinfo`'s page size in points.
pub fn page_size(pdf: &str) -> (f64, f64) {
    let out = run("pdfinfo", &[pdf]);
    let info = String::from_utf8_lossy(&out.stdout);
    let line = info.lines().find(|l| l.starts_with("Page size:")).expect("pdfinfo prints the page size");
    let nums: Vec<f64> = line.split_whitespace().filter_map(|t| t.parse().ok()).collect();
    (nums[0], nums[1])
}

/// The page's `/MediaBox`, read from the raw bytes.
pub fn media_box(pdf: &[u8]) -> Vec<f64> {
    let text = String::from_utf8_lossy(pdf);
    let start = text.find("/MediaBox [").expect("a MediaBox") + "/MediaBox [".len();
    let end = start + text[start..].find(']').unwrap();
    text[start..end].split_whitespace().map(|n| n.parse().unwrap()).collect()
}

pub fn pdftotext(pdf: &str) -> String {
    String::from_utf8(run("pdftotext", &[pdf, "-"]).stdout).unwrap()
}

/// A word as `pdftotext -bbox` sees it, in points from the top left.
#[derive(Debug, Clone)]
pub struct Word {
    pub text: String,
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

pub fn words(pdf: &str) -> Vec<Word> {
    parse_words(&String::from_utf8(run("pdftotext", &["-bbox", pdf, "-"]).stdout).unwrap())
}

/// The words of page `n` (1-based) only, for documents of several pages.
pub fn page_words(pdf: &str, n: usize) -> Vec<Word> {
    let n = n.to_string();
    parse_words(&String::from_utf8(run("pdftotext", &["-f", &n, "-l", &n, "-bbox", pdf, "-"]).stdout).unwrap())
}

/// The text of page `n` (1-based).
pub fn page_text(pdf: &str, n: usize) -> String {
    let n = n.to_string();
    String::from_utf8(run("pdftotext", &["-f", &n, "-l", &n, pdf, "-"]).stdout).unwrap()
}

/// `pdfinfo`'s page count.
pub fn page_count(pdf: &str) -> usize {
    let out = run("pdfinfo", &[pdf]);
    let info = String::from_utf8_lossy(&out.stdout);
    let line = info.lines().find(|l| l.starts_with("Pages:")).expect("pdfinfo prints the page count");
    line["Pages:".len()..].trim().parse().expect("a page count")
}

/// Rasterises every page of `pdf` at `dpi`; returns the PNGs in page order.
pub fn rasterise_pages(pdf: &str, dpi: u32) -> Vec<String> {
    let prefix = format!("{}-{dpi}", pdf.trim_end_matches(".pdf"));
    run("pdftoppm", &["-r", &dpi.to_string(), "-png", pdf, &prefix]);
    // pdftoppm names them `<prefix>-<n>.png`, `n` zero-padded to the width of
    // the page count.
    let dir = Path::new(pdf).parent().unwrap();
    let stem = Path::new(&prefix).file_name().unwrap().to_str().unwrap().to_owned() + "-";
    let mut pages: Vec<(usize, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let n = name.strip_prefix(&stem)?.strip_suffix(".png")?.parse().ok()?;
            Some((n, dir.join(&name).to_str().unwrap().to_owned()))
        })
        .collect();
    pages.sort();
    assert_eq!(pages.iter().map(|p| p.0).collect::<Vec<_>>(), (1..=pages.len()).collect::<Vec<_>>(), "{pdf}");
    pages.into_iter().map(|p| p.1).collect()
}

fn parse_words(html: &str) -> Vec<Word> {
    let attr = |tag: &str, name: &str| -> f64 {
        let key = format!("{name}=\"");
        let s = tag.find(&key).unwrap() + key.len();
        tag[s..s + tag[s..].find('"').unwrap()].parse().unwrap()
    };
    html.split("<word ")
        .skip(1)
        .map(|chunk| {
            let close = chunk.find('>').unwrap();
            let tag = &chunk[..close];
            let text = &chunk[close + 1..chunk.find("</word>").unwrap()];
            Word {
                text: text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\""),
                x0: attr(tag, "xMin"),
                y0: attr(tag, "yMin"),
                x1: attr(tag, "xMax"),
                y1: attr(tag, "yMax"),
            }
        })
        .collect()
}

/// What a rendered label must contain.
pub struct Expect {
    pub code128: String,
    pub qr: Option<String>,
    pub texts: Vec<&'static str>,
}

pub fn assert_codes(decoded: &[Decoded], expect: &Expect, what: &str) {
    let bars: Vec<&str> = decoded.iter().filter(|d| d.format == "Code128").map(|d| d.text.as_str()).collect();
    assert_eq!(bars, [expect.code128.as_str()], "{what}: Code 128 decoded {decoded:?}");
    let qrs: Vec<&str> = decoded.iter().filter(|d| d.format == "QRCode").map(|d| d.text.as_str()).collect();
    assert_eq!(qrs, expect.qr.as_slice(), "{what}: QR decoded {decoded:?}");
    assert_eq!(decoded.len(), 1 + usize::from(expect.qr.is_some()), "{what}: unexpected codes {decoded:?}");
}

/// Every word lies inside the page with at least a 5 pt margin: nothing clipped.
pub fn assert_inside(words: &[Word], w: f64, h: f64, what: &str) {
    assert!(!words.is_empty(), "{what}: no text extracted");
    for word in words {
        let inside = word.x0 >= 5.0 && word.y0 >= 5.0 && word.x1 <= w - 5.0 && word.y1 <= h - 5.0;
        assert!(inside, "{what}: {word:?} outside the printable area {w}x{h}");
    }
}

/// No two words overlap (beyond a hair of glyph-box slack).
pub fn assert_no_overlap(words: &[Word], what: &str) {
    for (i, a) in words.iter().enumerate() {
        for b in &words[i + 1..] {
            let dx = a.x1.min(b.x1) - a.x0.max(b.x0);
            let dy = a.y1.min(b.y1) - a.y0.max(b.y0);
            assert!(dx <= 0.5 || dy <= 0.5, "{what}: {a:?} overlaps {b:?}");
        }
    }
}

/// No text inside a decoded symbol's area.
pub fn assert_words_clear_of_codes(words: &[Word], decoded: &[Decoded], dpi: u32, what: &str) {
    let k = 72.0 / f64::from(dpi);
    for d in decoded {
        let [x0, y0, x1, y1] = d.bbox.map(|v| v * k);
        for w in words {
            let dx = w.x1.min(x1) - w.x0.max(x0);
            let dy = w.y1.min(y1) - w.y0.max(y0);
            assert!(dx <= 0.0 || dy <= 0.0, "{what}: {w:?} lies on the {} at {:?}", d.format, [x0, y0, x1, y1]);
        }
    }
}
