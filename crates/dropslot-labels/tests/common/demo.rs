//! Realistic demo labels (Toronto), shared by the tests, the snapshot example
//! and the benchmark.

use dropslot_labels::{DropOffLabel, Label, ParcelLabel, Party, PickUpLabel, RunSheet, RunSheetParcel, RunSheetStop};

pub const TRACKING_CODE: &str = "DOK7M2Q9XR4TB";
pub const TRACKING_URL: &str = "http://127.0.0.1:8080/track/DOK7M2Q9XR4TB";
pub const PICK_UP_CODE: &str = "PUH3X8W2N6QJ";
pub const PARCEL_BARCODE: &str = "PUH3X8W2N6QJ01";

pub fn sender() -> Party {
    Party {
        name: "Maple Goods Inc.".into(),
        address: "100 King St W, Toronto".into(),
        postal_code: "M5X 1A9".into(),
        phone: "+1 416 555 0100".into(),
    }
}

pub fn receiver() -> Party {
    Party {
        name: "Jane Doe".into(),
        address: "290 Bremner Blvd, Toronto".into(),
        postal_code: "M5V 3L9".into(),
        phone: "+1 416 555 0142".into(),
    }
}

pub fn parcel() -> ParcelLabel {
    ParcelLabel {
        sender: sender(),
        receiver: receiver(),
        scheduled_date: "2026-11-23".into(),
        time_slot: "14:00 - 18:00".into(),
        zone_code: "TOR-DT".into(),
        warehouse_code: "YYZ1".into(),
        index: 1,
        count: 2,
        size_code: "medium".into(),
        barcode: PARCEL_BARCODE.into(),
        tracking_code: TRACKING_CODE.into(),
    }
}

pub fn drop_off() -> DropOffLabel {
    DropOffLabel {
        tracking_code: TRACKING_CODE.into(),
        tracking_url: TRACKING_URL.into(),
        sender: sender(),
        receiver: receiver(),
        scheduled_date: "2026-11-23".into(),
        time_slot: "14:00 - 18:00".into(),
        zone_code: "TOR-DT".into(),
        warehouse_code: "YYZ1".into(),
        parcel_count: 2,
    }
}

pub fn pick_up() -> PickUpLabel {
    PickUpLabel {
        pick_up_code: PICK_UP_CODE.into(),
        address: sender(),
        scheduled_date: "2026-11-23".into(),
        time_slot: "09:00 - 12:00".into(),
        parcels_by_size: vec![("small".into(), 2), ("medium".into(), 1)],
        drop_off_count: 2,
    }
}

/// `(file stem, label)` for each kind.
pub fn all() -> Vec<(&'static str, Label)> {
    vec![
        ("parcel", Label::Parcel(parcel())),
        ("drop-off", Label::DropOff(drop_off())),
        ("pick-up", Label::PickUp(pick_up())),
    ]
}

const STREETS: [&str; 25] = [
    "290 Bremner Blvd",
    "100 Queens Quay E",
    "55 Mill St",
    "1 Dundas St W",
    "60 Front St W",
    "483 Queen St W",
    "20 Bay St",
    "199 Church St",
    "777 Bay St",
    "35 Carl Hall Rd",
    "600 Spadina Ave",
    "161 Bay St",
    "10 Dundas St E",
    "150 King St W",
    "2 Bloor St W",
    "81 Bay St",
    "25 York St",
    "1 Yonge St",
    "220 Yonge St",
    "40 Bay St",
    "317 Dundas St W",
    "100 Front St W",
    "5 Fairview Mall Dr",
    "1 Austin Terrace",
    "9 Trinity St",
];

const NAMES: [&str; 25] = [
    "Jane Doe",
    "Omar Haddad",
    "Li Wei",
    "Zo\u{eb} \u{0141}\u{f3}d\u{17a}",
    "Priya Natarajan",
    "Marc Tremblay",
    "Aisha Bello",
    "Tom\u{e1}s Garc\u{ed}a",
    "Hannah Schmidt",
    "Kenji Sato",
    "Fatima Khan",
    "Lucas Oliveira",
    "Grace O'Neil",
    "Dmitri Ivanov",
    "Chlo\u{e9} Roy",
    "Samuel Mensah",
    "Eva Nov\u{e1}kov\u{e1}",
    "Noah Cohen",
    "Amara Okafor",
    "Mateo Rossi",
    "Ingrid Berg",
    "Yusuf \u{d6}zt\u{fc}rk",
    "Sofia Lindqvist",
    "Ravi Patel",
    "Nora Byrne",
];

/// Parcels per stop: 40 in all, with a 5-parcel stop, two stops without any
/// and a depot stop at each end.
const PARCELS: [usize; 25] = [0, 2, 1, 3, 1, 2, 1, 5, 1, 2, 1, 1, 2, 1, 3, 1, 2, 1, 1, 2, 1, 3, 1, 2, 0];

/// Deterministic 12-character codes in the pick-up code alphabet.
pub fn code(n: usize) -> String {
    const ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut x = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..12)
        .map(|_| {
            x ^= x >> 29;
            x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            char::from(ALPHABET[(x >> 40) as usize % ALPHABET.len()])
        })
        .collect()
}

/// A 25-stop, 40-parcel route in Toronto: run sheet tests and snapshot.
pub fn run_sheet() -> RunSheet {
    let mut next = 0;
    let stops: Vec<RunSheetStop> = (0..25)
        .map(|i| {
            let parcels = (0..PARCELS[i])
                .map(|_| {
                    next += 1;
                    // One longer code (a parcel barcode) so a narrower module is used too.
                    let c = if next == 7 { format!("{}0107", code(next)) } else { code(next) };
                    RunSheetParcel { label: format!("{c} \u{00B7} {}.{} kg", 1 + next % 9, next % 10), code: c }
                })
                .collect();
            let depot = i == 0 || i == 24;
            let hour = 9 + i / 4;
            RunSheetStop {
                seq: i as u32 + 1,
                kind: if depot {
                    "Depot"
                } else if i % 5 == 3 {
                    "Pick-up"
                } else {
                    "Drop-off"
                }
                .into(),
                window: format!("{:02}:00\u{2013}{:02}:00", hour, hour + 4),
                eta: format!("{hour:02}:{:02}", (i * 13) % 60),
                address: format!("{}, Toronto ON", STREETS[i]),
                receiver: NAMES[i].into(),
                phone: format!("+1 416 555 01{i:02}"),
                note: if i % 4 == 2 { "Buzz 1402; leave with the concierge if out.".into() } else { String::new() },
                instruction: String::new(),
                parcels,
            }
        })
        .collect();
    RunSheet {
        title: "Route 3 \u{00B7} Ana Silva".into(),
        date: "2026-11-27".into(),
        depot: "YYZ1 \u{00B7} 100 King St W, Toronto ON M5X 1A9".into(),
        driver: "Ana Silva".into(),
        vehicle: "Van 12 \u{00B7} ABC 123".into(),
        summary: "25 stops \u{00B7} 40 parcels \u{00B7} 42.5 km \u{00B7} 5 h 10 min".into(),
        stops,
    }
}
