//! Slot capacity as both backends store it (CONTRACT §10): the override rows' columns, the
//! fill counters' keys (`slot_fill`, migration 0010), and an order's reservation, decided by
//! the core (`dropslot_core::quote::capacity::first_misfit`) on what the counters held before
//! the order's own increments.

use crate::{CreateOrderError, Mode, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::quote::capacity::{Load, Override, Reservation, SlotDate, SlotKind};
use jiff::Timestamp;
use jiff::civil::Date;
use std::collections::HashMap;

/// An override row's columns: (kind, place, slot code, date, stops set, stops, parcels set,
/// parcels). A value this binary does not know is corrupt data, never a default.
pub(crate) type OverrideColumns = (String, String, String, String, bool, Option<i64>, bool, Option<i64>);

pub(crate) fn override_row(r: OverrideColumns) -> Result<(SlotDate, Override), StoreError> {
    let (kind, place, slot, date, stops_set, stops, parcels_set, parcels) = r;
    let kind = SlotKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("capacity override kind {kind:?}")))?;
    let date = date.parse().map_err(|e| StoreError::Corrupt(format!("capacity override date {date:?}: {e}")))?;
    let part = |set: bool, value: Option<i64>, what: &str| -> Result<Option<Option<u32>>, StoreError> {
        let value = value
            .map(|v| u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("capacity override {what} {v}"))))
            .transpose()?;
        Ok(set.then_some(value))
    };
    let o = Override { stops: part(stops_set, stops, "stops")?, parcels: part(parcels_set, parcels, "parcels")? };
    Ok((SlotDate { kind, place, slot, date }, o))
}

/// An override's parts as columns: (set, value) each.
pub(crate) fn override_columns(o: Override) -> ((bool, Option<i64>), (bool, Option<i64>)) {
    let part = |p: Option<Option<u32>>| (p.is_some(), p.flatten().map(i64::from));
    (part(o.stops), part(o.parcels))
}

/// A fill counter's key: (kind, place, slot code, date). A pick-up slot's code names it in the
/// whole area (the configuration checks that), so its place is empty: the pick-up's row does
/// not name its city, and migration 0010 counted the existing ones by code and date.
pub(crate) fn counter_key(at: &SlotDate) -> (&'static str, &str, &str, String) {
    let place = match at.kind {
        SlotKind::PickUp => "",
        SlotKind::DropOff => at.place.as_str(),
    };
    (at.kind.as_str(), place, at.slot.as_str(), at.date.to_string())
}

/// The load `reservations` add to each slot, by slot, in a fixed order (the order their
/// counter rows are locked in).
pub(crate) fn loads<'a>(reservations: impl IntoIterator<Item = &'a Reservation>) -> Vec<(&'a SlotDate, Load)> {
    let mut by: std::collections::BTreeMap<&SlotDate, Load> = std::collections::BTreeMap::new();
    for r in reservations {
        let l = by.entry(&r.at).or_default();
        *l = *l + r.want;
    }
    by.into_iter().collect()
}

/// What each slot held before `mine` was added, from its counter as it is now.
pub(crate) fn before(now: &HashMap<SlotDate, Load>, mine: &[(&SlotDate, Load)]) -> HashMap<SlotDate, Load> {
    mine.iter()
        .map(|(at, l)| {
            let n = now.get(*at).copied().unwrap_or_default();
            (
                (*at).clone(),
                Load { stops: n.stops.saturating_sub(l.stops), parcels: n.parcels.saturating_sub(l.parcels) },
            )
        })
        .collect()
}

/// A counter's value as the domain counts it (a value past `u32` is corrupt).
pub(crate) fn count(v: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("slot fill {what} {v}")))
}

/// The answer for the first reservation that does not fit.
pub(crate) fn full(r: &Reservation) -> CreateOrderError {
    CreateOrderError::SlotFull { drop_off: r.drop_off }
}

#[async_trait]
pub trait CapacityStore: Send + Sync + 'static {
    /// The per-date capacity overrides of every slot on the dates `from..=to` (CONTRACT §10).
    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>>;
    /// Sets (replaces) a slot's override on a date.
    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()>;
    /// What each of `slots` holds in `mode`: its drop-off shipments (stops) and their parcels,
    /// or its pick-up shipments, deleted ones not counted. Every slot asked for is answered.
    async fn slot_fill(&self, mode: Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>>;
}

/// Every operation, recorded when the suite asks for it (`crate::trace`).
#[async_trait]
impl<S: CapacityStore> CapacityStore for crate::trace::Traced<S> {
    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>> {
        self.trace.hit("CapacityStore::capacity_overrides");
        self.inner.capacity_overrides(from, to).await
    }

    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()> {
        self.trace.hit("CapacityStore::set_capacity_override");
        self.inner.set_capacity_override(at, o, now).await
    }

    async fn slot_fill(&self, mode: Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>> {
        self.trace.hit("CapacityStore::slot_fill");
        self.inner.slot_fill(mode, slots).await
    }
}

pub(crate) mod postgres;
pub(crate) mod sqlite;
