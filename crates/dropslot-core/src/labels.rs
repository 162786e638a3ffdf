//! Which part of an order a label shows (CONTRACT §3, docs/labels.md): the drop-off and the
//! parcel a label token names, whether it is deleted (a 410), and a parcel's number among its
//! shipment's live parcels ("2 of 3"). Pure: both backends load the rows and call [`pick`].

/// What a label token resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelTarget {
    PickUp,
    DropOff { drop_off: i64 },
    Parcel { drop_off: i64, parcel: i64 },
}

/// A drop-off shipment of the label's pick-up, in id order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropOffRow {
    pub id: i64,
    pub deleted: bool,
}

/// A parcel of the label's pick-up, by drop-off and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParcelRow {
    pub drop_off: i64,
    pub id: i64,
    pub deleted: bool,
}

/// The parcel a parcel label shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParcelPick {
    /// Its index in the loaded parcel rows.
    pub row: usize,
    /// 1-based position among its shipment's live parcels (0 once it is deleted), and their
    /// count.
    pub index: u32,
    pub count: u32,
}

/// What the label shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelPick {
    /// The entity the token names is deleted: the label is gone.
    pub deleted: bool,
    /// The drop-off it shows (index into the drop-off rows; 0 for a pick-up label).
    pub drop_off_index: usize,
    pub parcel: Option<ParcelPick>,
}

/// Picks what a label for `target` shows from its pick-up's rows. Rows that cannot be
/// (the token's drop-off or parcel missing from its own pick-up) are an error, never a
/// default.
pub fn pick(
    target: LabelTarget,
    pick_up_deleted: bool,
    drop_offs: &[DropOffRow],
    parcels: &[ParcelRow],
) -> Result<LabelPick, String> {
    let drop_off = match target {
        LabelTarget::PickUp => {
            return Ok(LabelPick { deleted: pick_up_deleted, drop_off_index: 0, parcel: None });
        }
        LabelTarget::DropOff { drop_off } | LabelTarget::Parcel { drop_off, .. } => drop_off,
    };
    let drop_off_index = drop_offs
        .iter()
        .position(|d| d.id == drop_off)
        .ok_or_else(|| format!("drop-off shipment {drop_off} is missing from its pick-up"))?;
    let LabelTarget::Parcel { parcel, .. } = target else {
        return Ok(LabelPick { deleted: drop_offs[drop_off_index].deleted, drop_off_index, parcel: None });
    };
    let mine = || parcels.iter().enumerate().filter(move |(_, p)| p.drop_off == drop_off);
    let (row, me) = mine()
        .find(|(_, p)| p.id == parcel)
        .ok_or_else(|| format!("parcel {parcel} is missing from its drop-off shipment {drop_off}"))?;
    let live: Vec<i64> = mine().filter(|(_, p)| !p.deleted).map(|(_, p)| p.id).collect();
    let count = u32::try_from(live.len()).map_err(|_| format!("parcel count {}", live.len()))?;
    let position = live.iter().position(|id| *id == parcel).map_or(0, |x| x + 1);
    let index = u32::try_from(position).map_err(|_| format!("parcel position {position}"))?;
    Ok(LabelPick { deleted: me.deleted, drop_off_index, parcel: Some(ParcelPick { row, index, count }) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DROP_OFFS: [DropOffRow; 2] = [DropOffRow { id: 10, deleted: false }, DropOffRow { id: 11, deleted: true }];

    fn parcels() -> Vec<ParcelRow> {
        vec![
            ParcelRow { drop_off: 10, id: 1, deleted: false },
            ParcelRow { drop_off: 10, id: 2, deleted: true },
            ParcelRow { drop_off: 10, id: 3, deleted: false },
            ParcelRow { drop_off: 11, id: 4, deleted: true },
        ]
    }

    #[test]
    fn a_parcel_is_numbered_among_its_shipments_live_parcels() {
        let p = pick(LabelTarget::Parcel { drop_off: 10, parcel: 3 }, false, &DROP_OFFS, &parcels()).unwrap();
        assert_eq!(
            p,
            LabelPick { deleted: false, drop_off_index: 0, parcel: Some(ParcelPick { row: 2, index: 2, count: 2 }) }
        );
        let gone = pick(LabelTarget::Parcel { drop_off: 10, parcel: 2 }, false, &DROP_OFFS, &parcels()).unwrap();
        assert!(gone.deleted);
        assert_eq!(gone.parcel, Some(ParcelPick { row: 1, index: 0, count: 2 }));
    }

    #[test]
    fn deletion_is_the_named_entitys() {
        assert!(pick(LabelTarget::PickUp, true, &DROP_OFFS, &parcels()).unwrap().deleted);
        assert!(!pick(LabelTarget::DropOff { drop_off: 10 }, true, &DROP_OFFS, &parcels()).unwrap().deleted);
        let d = pick(LabelTarget::DropOff { drop_off: 11 }, false, &DROP_OFFS, &parcels()).unwrap();
        assert_eq!((d.deleted, d.drop_off_index), (true, 1));
    }

    #[test]
    fn rows_that_cannot_be_are_errors() {
        assert!(pick(LabelTarget::DropOff { drop_off: 99 }, false, &DROP_OFFS, &parcels()).is_err());
        assert!(pick(LabelTarget::Parcel { drop_off: 11, parcel: 1 }, false, &DROP_OFFS, &parcels()).is_err());
    }
}
