//! Writes PNG snapshots of the demo labels for the docs:
//!
//! ```sh
//! cargo run -p dropslot-labels --example snapshots -- docs/labels
//! ```
//!
//! Renders each label kind as a 4x6 PDF (and 4x4 with `--all`) into a
//! temporary directory, then rasterises it at 150 dpi with poppler's
//! `pdftoppm` (see scripts/test-deps.sh) into `<out>/<kind>-<size>.png`,
//! and page 1 of the demo run sheet at 100 dpi into `<out>/run-sheet.png`.
//! `--keep` keeps the temporary PDF and ZPL files for a look.

#[path = "../tests/common/demo.rs"]
mod demo;

use std::path::PathBuf;
use std::process::Command;

use dropslot_labels::{LabelFormat, LabelSize, render, render_run_sheet};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = args.iter().any(|a| a == "--all");
    let keep = args.iter().any(|a| a == "--keep");
    let out = PathBuf::from(args.iter().find(|a| !a.starts_with("--")).map_or("docs/labels", String::as_str));
    std::fs::create_dir_all(&out)?;
    let tmp = std::env::temp_dir().join(format!("dropslot-labels-snapshots-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let sizes: &[LabelSize] = if all { &LabelSize::ALL } else { &[LabelSize::FourBySix] };
    for (stem, label) in demo::all() {
        for &size in sizes {
            let name = format!("{stem}-{size}");
            let pdf = tmp.join(format!("{name}.pdf"));
            std::fs::write(&pdf, render(&label, size, LabelFormat::Pdf))?;
            std::fs::write(tmp.join(format!("{name}.zpl")), render(&label, size, LabelFormat::Zpl))?;
            let status = Command::new("pdftoppm")
                .args(["-r", "150", "-png", "-singlefile"])
                .arg(&pdf)
                .arg(out.join(&name))
                .status()
                .map_err(|e| format!("pdftoppm: {e} (run scripts/test-deps.sh)"))?;
            if !status.success() {
                return Err(format!("pdftoppm failed on {}", pdf.display()).into());
            }
            println!("{}", out.join(format!("{name}.png")).display());
        }
    }
    // Page 1 of the demo run sheet (US Letter) at 100 dpi.
    let pdf = tmp.join("run-sheet.pdf");
    std::fs::write(&pdf, render_run_sheet(&demo::run_sheet()))?;
    let status = Command::new("pdftoppm")
        .args(["-r", "100", "-png", "-singlefile", "-f", "1", "-l", "1"])
        .arg(&pdf)
        .arg(out.join("run-sheet"))
        .status()
        .map_err(|e| format!("pdftoppm: {e} (run scripts/test-deps.sh)"))?;
    if !status.success() {
        return Err(format!("pdftoppm failed on {}", pdf.display()).into());
    }
    println!("{}", out.join("run-sheet.png").display());
    if keep {
        println!("PDF and ZPL files kept in {}", tmp.display());
    } else {
        std::fs::remove_dir_all(&tmp)?;
    }
    Ok(())
}
