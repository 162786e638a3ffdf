//! `dropslot addresses import FILE` (CONTRACT §11): streams an address-point file (CSV or
//! `OpenAddresses` GeoJSON lines, told apart by its first non-empty line) into the store in
//! batches, one transaction each, with progress after every batch.
//!
//! - Streamed: a reader thread reads and parses one line at a time and hands over one batch
//!   at a time (at most two batches wait), so memory stays a few batches whatever the file's
//!   size, and parsing overlaps the writes.
//! - Idempotent: the store skips a point it already holds (same folded number, street, unit,
//!   postal prefix and city), so a re-run adds nothing.
//! - A malformed line stops the import with the file, its line number and what is wrong;
//!   the batches committed before it stay (a re-run after the fix skips them), the batch
//!   that holds it is not written.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use dropslot_core::geo::points::{AddressPoint, Format, Line};
use dropslot_store::DynStore;

/// The longest line read: an address point is far shorter, and a file without line breaks
/// must not be read whole into memory.
const MAX_LINE: u64 = 1 << 20;

/// What an import did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Points read from the file (lines that are neither blank nor the header).
    pub read: u64,
    /// Points new to the store.
    pub added: u64,
    /// Well-formed lines without a house number or street name: nothing can match them.
    pub skipped: u64,
}

/// Imports `path` (`-` for standard input) in batches of `batch` points, calling `progress`
/// after each committed batch. The error is one line: `FILE:LINE: what is wrong`, or the
/// store's error.
pub async fn run(
    store: &DynStore,
    path: &Path,
    batch: usize,
    mut progress: impl FnMut(&Progress, Format),
) -> Result<Progress, String> {
    let input: Box<dyn BufRead + Send> = if path.as_os_str() == "-" {
        Box::new(std::io::BufReader::with_capacity(1 << 16, std::io::stdin()))
    } else {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Box::new(std::io::BufReader::with_capacity(1 << 16, file))
    };
    let shown = if path.as_os_str() == "-" { PathBuf::from("<stdin>") } else { path.to_path_buf() };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Batch, String>>(2);
    let reader = tokio::task::spawn_blocking(move || read_batches(input, &shown, batch.max(1), &tx));
    let mut done = Progress::default();
    let mut format = None;
    while let Some(next) = rx.recv().await {
        let next = next?;
        format = Some(next.format);
        done.read += next.read;
        done.skipped += next.skipped;
        if !next.points.is_empty() {
            done.added += store.import_address_points(next.points).await.map_err(|e| e.to_string())?;
        }
        progress(&done, next.format);
    }
    reader.await.map_err(|e| format!("the reader stopped: {e}"))?;
    if format.is_none() {
        return Err(format!("{}: no address points (the file is empty)", path.display()));
    }
    Ok(done)
}

/// One batch, parsed: its points and how many lines it read and skipped.
struct Batch {
    format: Format,
    points: Vec<AddressPoint>,
    read: u64,
    skipped: u64,
}

impl Batch {
    fn new(format: Format, size: usize) -> Batch {
        Batch { format, points: Vec::with_capacity(size), read: 0, skipped: 0 }
    }
}

/// The reader thread: lines into batches, sent as they fill; stops at the first error
/// (which it sends) or when the receiver is gone.
fn read_batches(
    mut input: Box<dyn BufRead + Send>,
    path: &Path,
    size: usize,
    tx: &tokio::sync::mpsc::Sender<Result<Batch, String>>,
) {
    let send = |b: Result<Batch, String>| tx.blocking_send(b).is_ok();
    // Made when the first non-empty line has told the format.
    let mut batch: Option<Batch> = None;
    let mut buf = Vec::with_capacity(512);
    let mut line_no = 0u64;
    loop {
        line_no += 1;
        let at = |e: &str| format!("{}:{line_no}: {e}", path.display());
        buf.clear();
        match (&mut input).take(MAX_LINE + 1).read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(n) if n as u64 > MAX_LINE => {
                send(Err(at(&format!("the line is longer than {} KiB", MAX_LINE / 1024))));
                return;
            }
            Ok(_) => {}
            Err(e) => {
                send(Err(at(&e.to_string())));
                return;
            }
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            send(Err(at("the line is not UTF-8 text")));
            return;
        };
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        let b = match batch.as_mut() {
            Some(b) => b,
            None => match Format::detect(line) {
                // A CSV file's first line is its header; a GeoJSON line is a point.
                Ok(Format::Csv) => {
                    batch = Some(Batch::new(Format::Csv, size));
                    continue;
                }
                Ok(f) => batch.insert(Batch::new(f, size)),
                Err(e) => {
                    send(Err(at(&e)));
                    return;
                }
            },
        };
        match b.format.read(line) {
            Ok(Line::Point(p)) => b.points.push(p),
            Ok(Line::Skipped(_)) => b.skipped += 1,
            Err(e) => {
                send(Err(at(&e)));
                return;
            }
        }
        b.read += 1;
        if b.read as usize >= size {
            let full = std::mem::replace(b, Batch::new(b.format, size));
            if !send(Ok(full)) {
                return;
            }
        }
    }
    if let Some(last) = batch {
        send(Ok(last));
    }
}

/// The progress line: what was read and written so far, and the rate.
pub fn progress_line(p: &Progress, format: Format, started: Instant) -> String {
    let secs = started.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { p.read as f64 / secs } else { 0.0 };
    format!(
        "address points ({}): {} read, {} new, {} skipped; {:.1} s, {:.0} points/s",
        format.name(),
        p.read,
        p.added,
        p.skipped,
        secs,
        rate
    )
}
