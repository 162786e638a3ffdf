//! Realistic demo labels (Toronto), shared by the tests, the snapshot example
//! and the benchmark.

use dropslot_labels::{DropOffLabel, Label, ParcelLabel, Party, PickUpLabel};

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
