//! A label's rows as both backends load them, and the one assembly of the `LabelSource`
//! from them: which drop-off and parcel it shows is the core's decision
//! (`dropslot_core::labels::pick`); this only copies the chosen rows.

use dropslot_core::labels::{DropOffRow, LabelTarget, ParcelRow, pick};

use super::{LabelDropOff, LabelKind, LabelParcel, LabelSource, StoreError, StoredPickUpAddress};

/// Everything a label of one pick-up may show, loaded in one read transaction.
pub(crate) struct LabelRows {
    pub kind: LabelKind,
    pub target: LabelTarget,
    pub pick_up_unique_id: String,
    pub pick_up_address: StoredPickUpAddress,
    pub pick_up_date: String,
    pub pick_up_slot_name: String,
    pub pick_up_deleted: bool,
    /// The pick-up's drop-off shipments in id order: id, what the label prints, deleted.
    pub drop_offs: Vec<(i64, LabelDropOff, bool)>,
    /// Its parcels by drop-off and position.
    pub parcels: Vec<LabelParcelRow>,
}

pub(crate) struct LabelParcelRow {
    pub drop_off: i64,
    pub id: i64,
    pub pick_up_code: String,
    pub custom_code: Option<String>,
    pub size_code: String,
    pub deleted: bool,
}

/// The label's source: every drop-off with the sizes of its live parcels, and what the
/// core picked.
pub(crate) fn assemble(rows: LabelRows) -> Result<LabelSource, StoreError> {
    let drop_off_rows: Vec<DropOffRow> =
        rows.drop_offs.iter().map(|(id, _, deleted)| DropOffRow { id: *id, deleted: *deleted }).collect();
    let parcel_rows: Vec<ParcelRow> =
        rows.parcels.iter().map(|p| ParcelRow { drop_off: p.drop_off, id: p.id, deleted: p.deleted }).collect();
    let picked = pick(rows.target, rows.pick_up_deleted, &drop_off_rows, &parcel_rows).map_err(StoreError::Corrupt)?;
    let parcel = picked.parcel.map(|p| {
        let row = &rows.parcels[p.row];
        LabelParcel {
            pick_up_code: row.pick_up_code.clone(),
            custom_code: row.custom_code.clone(),
            size_code: row.size_code.clone(),
            index: p.index,
            count: p.count,
        }
    });
    let drop_offs = rows
        .drop_offs
        .into_iter()
        .map(|(id, mut d, _)| {
            d.parcel_sizes =
                rows.parcels.iter().filter(|p| p.drop_off == id && !p.deleted).map(|p| p.size_code.clone()).collect();
            d
        })
        .collect();
    Ok(LabelSource {
        kind: rows.kind,
        deleted: picked.deleted,
        pick_up_unique_id: rows.pick_up_unique_id,
        pick_up_address: rows.pick_up_address,
        pick_up_date: rows.pick_up_date,
        pick_up_slot_name: rows.pick_up_slot_name,
        drop_offs,
        parcel,
        drop_off_index: picked.drop_off_index,
    })
}

/// The core's target for a token's (drop-off, parcel) ids.
pub(crate) fn target(drop_off: Option<i64>, parcel: Option<i64>) -> LabelTarget {
    match (drop_off, parcel) {
        (Some(drop_off), Some(parcel)) => LabelTarget::Parcel { drop_off, parcel },
        (Some(drop_off), None) => LabelTarget::DropOff { drop_off },
        (None, _) => LabelTarget::PickUp,
    }
}
