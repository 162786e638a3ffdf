//! Slot capacity on `SQLite` (CONTRACT §10): the per-date overrides, the fill counters, an
//! order's reservation and a deletion's release, in the writer's transaction (the one writer
//! thread orders them all, so no lock is needed).

use crate::capacity::{OverrideColumns, before, count, counter_key, full, loads, override_columns, override_row};
use crate::sqlite::{SqliteStore, map_err};
use crate::{CapacityStore, CreateOrderError, Mode, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::quote::capacity::{Load, Override, Reservation, SlotDate, SlotKind, first_misfit};
use jiff::Timestamp;
use jiff::civil::Date;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;

#[async_trait]
impl CapacityStore for SqliteStore {
    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>> {
        parsed(self.read(|c| override_rows(c, from, to))?)
    }

    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()> {
        self.writer.write(move |c| set_override(c, &at, o, now)).await
    }

    async fn slot_fill(&self, mode: crate::Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>> {
        loaded(self.read_blocking(move |c| fill(c, mode, &slots)).await?)
    }
}

const OVERRIDE_COLUMNS: &str = "kind, place, slot_code, date, stops_set, stops, parcels_set, parcels";

fn columns(r: &rusqlite::Row<'_>) -> rusqlite::Result<OverrideColumns> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

/// The rows of the overrides on the dates `from..=to`.
pub(crate) fn override_rows(c: &Connection, from: Date, to: Date) -> rusqlite::Result<Vec<OverrideColumns>> {
    c.prepare_cached(&format!("SELECT {OVERRIDE_COLUMNS} FROM capacity_overrides WHERE date >= ?1 AND date <= ?2"))?
        .query_map(params![from.to_string(), to.to_string()], columns)?
        .collect()
}

/// Parsed override rows.
pub(crate) fn parsed(rows: Vec<OverrideColumns>) -> Result<HashMap<SlotDate, Override>, StoreError> {
    rows.into_iter().map(override_row).collect()
}

/// The overrides of `slots`.
pub(crate) fn overrides_of(c: &Connection, slots: &[&SlotDate]) -> Result<HashMap<SlotDate, Override>, StoreError> {
    let mut s = c
        .prepare_cached(&format!(
            "SELECT {OVERRIDE_COLUMNS} FROM capacity_overrides WHERE kind = ?1 AND place = ?2 AND slot_code = ?3 AND date = ?4"
        ))
        .map_err(map_err)?;
    let mut rows = Vec::new();
    for at in slots {
        let found: Vec<OverrideColumns> = s
            .query_map(params![at.kind.as_str(), at.place, at.slot, at.date.to_string()], columns)
            .and_then(Iterator::collect)
            .map_err(map_err)?;
        rows.extend(found);
    }
    parsed(rows)
}

pub(crate) fn set_override(c: &Connection, at: &SlotDate, o: Override, now: Timestamp) -> Result<(), StoreError> {
    let ((stops_set, stops), (parcels_set, parcels)) = override_columns(o);
    c.prepare_cached(
        "INSERT INTO capacity_overrides (kind, place, slot_code, date, stops_set, stops, parcels_set, parcels, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (kind, place, slot_code, date) DO UPDATE SET stops_set = excluded.stops_set,
            stops = excluded.stops, parcels_set = excluded.parcels_set, parcels = excluded.parcels,
            updated_at = excluded.updated_at",
    )
    .and_then(|mut s| {
        s.execute(params![
            at.kind.as_str(),
            at.place,
            at.slot,
            at.date.to_string(),
            stops_set,
            stops,
            parcels_set,
            parcels,
            now.to_string()
        ])
    })
    .map_err(map_err)?;
    Ok(())
}

/// What each of `slots` holds in `mode`.
pub(crate) fn fill(c: &Connection, mode: Mode, slots: &[SlotDate]) -> rusqlite::Result<Vec<(SlotDate, (i64, i64))>> {
    let mut s = c.prepare_cached(
        "SELECT stops, parcels FROM slot_fill WHERE mode = ?1 AND kind = ?2 AND place = ?3 AND slot_code = ?4 AND date = ?5",
    )?;
    let mut out = Vec::with_capacity(slots.len());
    for at in slots {
        let (kind, place, code, date) = counter_key(at);
        let held =
            s.query_row(params![mode.as_str(), kind, place, code, date], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        out.push((at.clone(), held.unwrap_or((0, 0))));
    }
    Ok(out)
}

/// Counters as loads.
pub(crate) fn loaded(rows: Vec<(SlotDate, (i64, i64))>) -> Result<HashMap<SlotDate, Load>, StoreError> {
    rows.into_iter()
        .map(|(at, (stops, parcels))| {
            Ok((at, Load { stops: count(stops, "stops")?, parcels: count(parcels, "parcels")? }))
        })
        .collect()
}

/// An order's reservation, in the writer's transaction: its slots' counters raised by its
/// load, then the core's rule decides on what they held before, with the date's overrides
/// over the configured limits. A refusal rolls the counters back with the order (the job's
/// savepoint).
pub(crate) fn reserve(c: &Connection, mode: Mode, reservations: &[Reservation]) -> Result<(), CreateOrderError> {
    if reservations.is_empty() {
        return Ok(());
    }
    let mine = loads(reservations);
    let mut now = Vec::with_capacity(mine.len());
    for (at, load) in &mine {
        now.push(((*at).clone(), raise(c, mode, at, *load)?));
    }
    let slots: Vec<&SlotDate> = mine.iter().map(|(at, _)| *at).collect();
    let overrides = overrides_of(c, &slots)?;
    let used = before(&loaded(now)?, &mine);
    match first_misfit([reservations], &overrides, &used) {
        Some((_, r)) => Err(full(r)),
        None => Ok(()),
    }
}

/// Raises `at`'s counter in `mode` by `load` (a row made for a slot that held nothing): what it
/// holds now, (stops, parcels). An order's reservation and a failure's follow-up take their
/// places this way.
pub(crate) fn raise(c: &Connection, mode: Mode, at: &SlotDate, load: Load) -> Result<(i64, i64), StoreError> {
    let (kind, place, code, date) = counter_key(at);
    c.prepare_cached(
        "INSERT INTO slot_fill (mode, kind, place, slot_code, date, stops, parcels) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (mode, kind, place, slot_code, date)
         DO UPDATE SET stops = stops + excluded.stops, parcels = parcels + excluded.parcels
         RETURNING stops, parcels",
    )
    .and_then(|mut s| {
        s.query_row(params![mode.as_str(), kind, place, code, date, load.stops, load.parcels], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
    })
    .map_err(map_err)
}

/// A deletion's release: the deleted parcel's place, and its drop-off's stop and the
/// pick-up's stop when they were deleted with it.
pub(crate) fn release(
    c: &Connection,
    parcel: i64,
    drop_off_deleted: bool,
    pick_up_deleted: bool,
) -> Result<(), StoreError> {
    c.prepare_cached(
        "UPDATE slot_fill SET parcels = parcels - 1, stops = stops - ?2
         WHERE (mode, kind, place, slot_code, date) = (
            SELECT d.mode, ?3, d.zone_code, d.slot_code, d.scheduled_date
            FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id WHERE p.id = ?1)",
    )
    .and_then(|mut s| s.execute(params![parcel, i64::from(drop_off_deleted), SlotKind::DropOff.as_str()]))
    .map_err(map_err)?;
    if pick_up_deleted {
        c.prepare_cached(
            "UPDATE slot_fill SET stops = stops - 1
             WHERE (mode, kind, place, slot_code, date) = (
                SELECT u.mode, ?2, '', u.slot_code, u.scheduled_date
                FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
                    JOIN pick_up_shipments u ON u.id = d.pick_up_shipment_id
                WHERE p.id = ?1)",
        )
        .and_then(|mut s| s.execute(params![parcel, SlotKind::PickUp.as_str()]))
        .map_err(map_err)?;
    }
    Ok(())
}
