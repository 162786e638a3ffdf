//! Micro-benchmarks of the pure request path: validation (with geocoding) and the quote.
//!
//! `cargo bench -p dropslot --bench quote`
//!
//! Inputs: the embedded default configuration, the embedded geocoder, a pinned instant
//! (2026-11-23T12:00:00Z, a Monday morning, so every slot is open) and two requests:
//! 1 drop-off × 3 parcels and 20 drop-offs × 5 parcels.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use dropslot::orders::request::{Purpose, RequestPayload, Rules, ValidRequest, validate};
use dropslot_core::config::{Overrides, Settings};
use dropslot_core::geo::Geocoder;
use dropslot_core::quote::capacity::Capacity;
use dropslot_core::quote::quote;
use jiff::Timestamp;

const NOW: &str = "2026-11-23T12:00:00Z";

/// Drop-off addresses across the four Toronto zones.
const DROP_OFFS: &[&str] = &[
    "290 Bremner Blvd, Toronto, ON M5V 3L9",
    "1 Austin Terrace, Toronto, ON M5R 1X8",
    "2075 Bayview Ave, Toronto, ON M4N 3M5",
    "5100 Yonge St, North York, ON M2N 5V7",
    "55 Mill St, Toronto, ON M5A 3C4",
    "1 Brimley Rd S, Scarborough, ON M1M 3W3",
    "100 Queen St W, Toronto, ON M5H 2N2",
    "3401 Dufferin St, Toronto, ON M6A 2T9",
    "1000 Gerrard St E, Toronto, ON M4M 3G6",
    "200 Bloor St E, Toronto, ON M4W 3L1",
];

fn request_json(drop_offs: usize, parcels: usize) -> String {
    let drops: Vec<String> = (0..drop_offs)
        .map(|i| {
            let parcels: Vec<String> =
                (0..parcels).map(|j| format!(r#"{{"unit":"g","values":{}}}"#, 500 + 700 * ((i + j) % 10))).collect();
            format!(
                r#"{{"address":{{"text":"{}","person_name":"Jane Doe","person_phone":"+1 416 555 0100"}},"parcels":[{}]}}"#,
                DROP_OFFS[i % DROP_OFFS.len()],
                parcels.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"pick_up_address":{{"text":"100 King St W, Toronto, ON M5X 1A9"}},"drop_offs":[{}]}}"#,
        drops.join(",")
    )
}

fn payload(json: &str) -> RequestPayload {
    serde_json::from_str::<RequestPayload>(json).expect("benchmark request parses")
}

fn benches(c: &mut Criterion) {
    let settings = Settings::load(&Overrides::default()).expect("default settings load");
    let geocoder = Geocoder::embedded();
    let now: Timestamp = NOW.parse().unwrap();
    let empty = Capacity::empty();
    let rules = Rules {
        purpose: Purpose::Preview,
        prices: &settings.pricing,
        limits: settings.limits,
        geocoder: &geocoder,
        area: &settings.area,
    };
    let valid = |json: &str| -> ValidRequest { validate(payload(json), &rules).expect("benchmark request is valid") };

    let small_json = request_json(1, 3);
    let large_json = request_json(20, 5);
    let small = valid(&small_json).quote_request();
    let large = valid(&large_json).quote_request();
    // Both quote fine at the pinned instant (otherwise the figures would measure an error path).
    quote(&small, &settings.pricing, &settings.area, now, &Capacity::empty()).expect("small request quotes");
    quote(&large, &settings.pricing, &settings.area, now, &Capacity::empty()).expect("large request quotes");

    let mut g = c.benchmark_group("quote");
    g.bench_function("1x3", |b| {
        b.iter(|| {
            quote(
                black_box(&small),
                black_box(&settings.pricing),
                black_box(&settings.area),
                black_box(now),
                black_box(&empty),
            )
        });
    });
    g.bench_function("20x5", |b| {
        b.iter(|| {
            quote(
                black_box(&large),
                black_box(&settings.pricing),
                black_box(&settings.area),
                black_box(now),
                black_box(&empty),
            )
        });
    });
    g.finish();

    let mut g = c.benchmark_group("validate");
    // The payload is consumed by `validate`, so it is rebuilt per iteration outside the timing.
    g.bench_function("1x3", |b| {
        b.iter_batched(|| payload(&small_json), |p| validate(p, black_box(&rules)), criterion::BatchSize::SmallInput);
    });
    g.finish();

    // For context: JSON parsing of the same small body (what the HTTP extractor does first).
    let mut g = c.benchmark_group("parse");
    g.bench_function("1x3", |b| b.iter(|| payload(black_box(&small_json))));
    g.finish();
}

criterion_group!(quote_benches, benches);
criterion_main!(quote_benches);
