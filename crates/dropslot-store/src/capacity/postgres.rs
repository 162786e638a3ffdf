//! Slot capacity on `PostgreSQL` (CONTRACT §10): the per-date overrides, the fill counters,
//! the reservations of a batch of orders and a deletion's release, each in its unit of work's
//! transaction. Several processes write orders at once: a batch raises its slots' counters in
//! one statement and in a fixed order, last before its commit, so it holds their rows until it
//! commits and another batch for the same slot waits there, then sees this one's places (two
//! batches cannot deadlock on them, and hold them for little more than the commit).

use crate::capacity::{OverrideColumns, before, count, counter_key, full, loads, override_columns, override_row};
use crate::postgres::sql::Sql;
use crate::postgres::{PgStore, map_err};
use crate::{CapacityStore, CreateOrderError, Mode, NewOrder, Scope, StoreError, StoreResult};
use async_trait::async_trait;
use dropslot_core::quote::capacity::{Load, Override, SlotDate, SlotKind, first_misfit};
use jiff::Timestamp;
use jiff::civil::Date;
use std::collections::HashMap;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

#[async_trait]
impl CapacityStore for PgStore {
    async fn capacity_overrides(&self, from: Date, to: Date) -> StoreResult<HashMap<SlotDate, Override>> {
        overrides_between(&self.conn().await?, from, to).await
    }

    async fn set_capacity_override(&self, at: SlotDate, o: Override, now: Timestamp) -> StoreResult<()> {
        set_override(&self.conn().await?, &at, o, now).await
    }

    async fn slot_fill(&self, mode: crate::Mode, slots: Vec<SlotDate>) -> StoreResult<HashMap<SlotDate, Load>> {
        fill(&self.conn().await?, mode, &slots).await
    }
}

const OVERRIDE_COLUMNS: &str = "kind, place, slot_code, date, stops_set, stops, parcels_set, parcels";

fn columns(r: &Row) -> Result<OverrideColumns, StoreError> {
    let get = |e: tokio_postgres::Error| StoreError::Corrupt(format!("capacity override: {e}"));
    Ok((
        r.try_get(0).map_err(get)?,
        r.try_get(1).map_err(get)?,
        r.try_get(2).map_err(get)?,
        r.try_get(3).map_err(get)?,
        r.try_get(4).map_err(get)?,
        r.try_get(5).map_err(get)?,
        r.try_get(6).map_err(get)?,
        r.try_get(7).map_err(get)?,
    ))
}

fn parsed(rows: &[Row]) -> Result<HashMap<SlotDate, Override>, StoreError> {
    rows.iter().map(|r| override_row(columns(r)?)).collect()
}

/// The overrides on the dates `from..=to`.
pub(crate) async fn overrides_between(
    c: &impl Sql,
    from: Date,
    to: Date,
) -> Result<HashMap<SlotDate, Override>, StoreError> {
    let rows = c
        .query(
            &format!("SELECT {OVERRIDE_COLUMNS} FROM capacity_overrides WHERE date >= $1 AND date <= $2"),
            &[&from.to_string(), &to.to_string()],
        )
        .await
        .map_err(map_err)?;
    parsed(&rows)
}

pub(crate) async fn set_override(c: &impl Sql, at: &SlotDate, o: Override, now: Timestamp) -> Result<(), StoreError> {
    let ((stops_set, stops), (parcels_set, parcels)) = override_columns(o);
    c.execute(
        "INSERT INTO capacity_overrides (kind, place, slot_code, date, stops_set, stops, parcels_set, parcels, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (kind, place, slot_code, date) DO UPDATE SET stops_set = excluded.stops_set,
            stops = excluded.stops, parcels_set = excluded.parcels_set, parcels = excluded.parcels,
            updated_at = excluded.updated_at",
        &[&at.kind.as_str(), &at.place, &at.slot, &at.date.to_string(), &stops_set, &stops, &parcels_set, &parcels, &now],
    )
    .await
    .map_err(map_err)?;
    Ok(())
}

/// What each of `slots` holds in `mode` (deleted shipments and parcels not counted): one
/// What each of `slots` holds in `mode`.
pub(crate) async fn fill(c: &impl Sql, mode: Mode, slots: &[SlotDate]) -> Result<HashMap<SlotDate, Load>, StoreError> {
    let keys: Vec<_> = slots.iter().map(counter_key).collect();
    let kinds: Vec<&str> = keys.iter().map(|k| k.0).collect();
    let places: Vec<&str> = keys.iter().map(|k| k.1).collect();
    let codes: Vec<&str> = keys.iter().map(|k| k.2).collect();
    let dates: Vec<&str> = keys.iter().map(|k| k.3.as_str()).collect();
    let rows = c
        .query_typed(
            "SELECT k.ord, f.stops, f.parcels
             FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS k (kind, place, slot_code, date, ord)
             JOIN slot_fill f ON f.mode = $1 AND f.kind = k.kind AND f.place = k.place AND f.slot_code = k.slot_code
                AND f.date = k.date",
            &[
                (&mode.as_str(), Type::TEXT),
                (&kinds, Type::TEXT_ARRAY),
                (&places, Type::TEXT_ARRAY),
                (&codes, Type::TEXT_ARRAY),
                (&dates, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    let mut out: HashMap<SlotDate, Load> = slots.iter().map(|s| (s.clone(), Load::default())).collect();
    for r in &rows {
        let (ord, load) = ordinal_load(r)?;
        let at = slots.get(ord).ok_or_else(|| StoreError::Corrupt("slot fill: an unknown ordinal".into()))?;
        out.insert(at.clone(), load);
    }
    Ok(out)
}

/// A row of (ordinal from 1, stops, parcels): the 0-based index and the load.
fn ordinal_load(r: &Row) -> Result<(usize, Load), StoreError> {
    let get = |i: usize| -> Result<i64, StoreError> {
        r.try_get(i).map_err(|e| StoreError::Corrupt(format!("slot fill: {e}")))
    };
    let ord = usize::try_from(get(0)? - 1).map_err(|_| StoreError::Corrupt("slot fill: an unknown ordinal".into()))?;
    Ok((ord, Load { stops: count(get(1)?, "stops")?, parcels: count(get(2)?, "parcels")? }))
}

/// The reservations of a batch of orders, in its transaction, after the rest of it is written
/// (`crate::orders::postgres::insert_orders`): every slot's counter raised by the batch's load (one statement,
/// slots in a fixed order), then, mode by mode, the orders decided in turn by the core's rule on what the
/// counters held before the batch, with the dates' overrides over the configured limits. An
/// order that does not fit fails the call (the batch is rolled back, counters included, and
/// written again order by order, so each gets its own answer).
pub(crate) async fn reserve(c: &impl Sql, orders: &[(Scope, &NewOrder)]) -> Result<(), CreateOrderError> {
    let mut keys: Vec<(Mode, &SlotDate, Load)> = Vec::new();
    for mode in [Mode::Test, Mode::Live] {
        let mine = loads(orders.iter().filter(|(s, _)| s.mode == mode).flat_map(|(_, o)| o.reservations.iter()));
        keys.extend(mine.into_iter().map(|(at, l)| (mode, at, l)));
    }
    if keys.is_empty() {
        return Ok(());
    }
    let modes: Vec<&str> = keys.iter().map(|(m, _, _)| m.as_str()).collect();
    let counters: Vec<_> = keys.iter().map(|(_, at, _)| counter_key(at)).collect();
    let kinds: Vec<&str> = counters.iter().map(|k| k.0).collect();
    let places: Vec<&str> = counters.iter().map(|k| k.1).collect();
    let codes: Vec<&str> = counters.iter().map(|k| k.2).collect();
    let dates: Vec<&str> = counters.iter().map(|k| k.3.as_str()).collect();
    let stops: Vec<i64> = keys.iter().map(|(_, _, l)| i64::from(l.stops)).collect();
    let parcels: Vec<i64> = keys.iter().map(|(_, _, l)| i64::from(l.parcels)).collect();
    // The place an override names (a pick-up slot's city), beside the counter's.
    let named: Vec<&str> = keys.iter().map(|(_, at, _)| at.place.as_str()).collect();
    // One statement: the counters raised and the dates' overrides read (a round trip less per
    // batch: issue 28's paired runs on PostgreSQL).
    let rows = c
        .query_typed(
            "WITH up AS (
                INSERT INTO slot_fill (mode, kind, place, slot_code, date, stops, parcels)
                SELECT mode, kind, place, slot_code, date, stops, parcels
                FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
                    WITH ORDINALITY AS u (mode, kind, place, slot_code, date, stops, parcels, ord)
                ORDER BY ord
                ON CONFLICT (mode, kind, place, slot_code, date)
                DO UPDATE SET stops = slot_fill.stops + excluded.stops, parcels = slot_fill.parcels + excluded.parcels
                RETURNING mode, kind, place, slot_code, date, stops, parcels
             )
             SELECT u.ord, up.stops, up.parcels, o.stops_set, o.stops, o.parcels_set, o.parcels
             FROM up JOIN unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $8::text[])
                WITH ORDINALITY AS u (mode, kind, place, slot_code, date, named, ord)
                ON u.mode = up.mode AND u.kind = up.kind AND u.place = up.place AND u.slot_code = up.slot_code
                    AND u.date = up.date
             LEFT JOIN capacity_overrides o
                ON o.kind = u.kind AND o.place = u.named AND o.slot_code = u.slot_code AND o.date = u.date",
            &[
                (&modes, Type::TEXT_ARRAY),
                (&kinds, Type::TEXT_ARRAY),
                (&places, Type::TEXT_ARRAY),
                (&codes, Type::TEXT_ARRAY),
                (&dates, Type::TEXT_ARRAY),
                (&stops, Type::INT8_ARRAY),
                (&parcels, Type::INT8_ARRAY),
                (&named, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(map_err)?;
    if rows.len() != keys.len() {
        return Err(StoreError::Corrupt(format!("{} of {} slot counters raised", rows.len(), keys.len())).into());
    }
    let mut raised: HashMap<(Mode, &SlotDate), Load> = HashMap::new();
    let mut overrides: HashMap<SlotDate, Override> = HashMap::new();
    for r in &rows {
        let (ord, load) = ordinal_load(r)?;
        let (mode, at, _) = keys.get(ord).ok_or_else(|| StoreError::Corrupt("slot fill: an unknown ordinal".into()))?;
        raised.insert((*mode, *at), load);
        let get = |e: tokio_postgres::Error| StoreError::Corrupt(format!("capacity override: {e}"));
        if let Some(stops_set) = r.try_get::<_, Option<bool>>(3).map_err(get)? {
            let (kind, place, slot, date) = (at.kind.as_str(), at.place.clone(), at.slot.clone(), at.date.to_string());
            let columns = (
                kind.to_string(),
                place,
                slot,
                date,
                stops_set,
                r.try_get(4).map_err(get)?,
                r.try_get(5).map_err(get)?,
                r.try_get(6).map_err(get)?,
            );
            let (at, o) = override_row(columns)?;
            overrides.insert(at, o);
        }
    }
    for mode in [Mode::Test, Mode::Live] {
        let mine: Vec<(&SlotDate, Load)> =
            keys.iter().filter(|(m, _, _)| *m == mode).map(|(_, at, l)| (*at, *l)).collect();
        if mine.is_empty() {
            continue;
        }
        let now: HashMap<SlotDate, Load> =
            raised.iter().filter(|((m, _), _)| *m == mode).map(|((_, at), l)| ((*at).clone(), *l)).collect();
        let orders = orders.iter().filter(|(s, _)| s.mode == mode).map(|(_, o)| o.reservations.as_slice());
        if let Some((_, r)) = first_misfit(orders, &overrides, &before(&now, &mine)) {
            return Err(full(r));
        }
    }
    Ok(())
}

/// A deletion's release: the deleted parcel's place, and its drop-off's stop and the
/// pick-up's stop when they were deleted with it.
pub(crate) async fn release(
    c: &impl Sql,
    parcel: i64,
    drop_off_deleted: bool,
    pick_up_deleted: bool,
) -> Result<(), StoreError> {
    c.execute_typed(
        "UPDATE slot_fill SET parcels = parcels - 1, stops = stops - $2
         WHERE (mode, kind, place, slot_code, date) = (
            SELECT d.mode, $3, d.zone_code, d.slot_code, d.scheduled_date
            FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id WHERE p.id = $1)",
        &[(&parcel, Type::INT8), (&i64::from(drop_off_deleted), Type::INT8), (&SlotKind::DropOff.as_str(), Type::TEXT)],
    )
    .await
    .map_err(map_err)?;
    if pick_up_deleted {
        c.execute_typed(
            "UPDATE slot_fill SET stops = stops - 1
             WHERE (mode, kind, place, slot_code, date) = (
                SELECT u.mode, $2, '', u.slot_code, u.scheduled_date
                FROM parcels p JOIN drop_off_shipments d ON d.id = p.drop_off_shipment_id
                    JOIN pick_up_shipments u ON u.id = d.pick_up_shipment_id
                WHERE p.id = $1)",
            &[(&parcel, Type::INT8), (&SlotKind::PickUp.as_str(), Type::TEXT)],
        )
        .await
        .map_err(map_err)?;
    }
    Ok(())
}
