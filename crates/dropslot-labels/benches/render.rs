//! Render one 4x6 parcel label as PDF and as ZPL, and the demo run sheet.
//! Targets: PDF ≤ 1 ms, ZPL ≤ 50 µs per label on one core.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use dropslot_labels::{Label, LabelFormat, LabelSize, render, render_run_sheet};

#[path = "../tests/common/demo.rs"]
#[allow(dead_code)] // only the parcel label and the run sheet are benchmarked
mod demo;

fn bench(c: &mut Criterion) {
    let label = Label::Parcel(demo::parcel());
    // The first PDF builds the font subsets (once per process); report that
    // cost separately so it is not hidden in the per-label figures.
    let cold = std::time::Instant::now();
    let bytes = render(&label, LabelSize::FourBySix, LabelFormat::Pdf);
    eprintln!("first PDF render (font subsetting, once per process): {:?}, {} bytes", cold.elapsed(), bytes.len());
    c.bench_function("parcel_4x6_pdf", |b| {
        b.iter(|| render(black_box(&label), LabelSize::FourBySix, LabelFormat::Pdf));
    });
    c.bench_function("parcel_4x6_zpl", |b| {
        b.iter(|| render(black_box(&label), LabelSize::FourBySix, LabelFormat::Zpl));
    });
    // 25 stops, 40 parcels, 6 US Letter pages.
    let sheet = demo::run_sheet();
    c.bench_function("run_sheet_25_stops_pdf", |b| {
        b.iter(|| render_run_sheet(black_box(&sheet)));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
