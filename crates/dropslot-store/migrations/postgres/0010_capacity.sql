-- Issue 28: slot capacity (CONTRACT §10).
--
-- What each slot holds on each date, per mode (test orders fill the sandbox's slots, live
-- orders the fleet's): kept by the writes themselves, in their transactions. An order adds
-- its pick-up stop and each drop-off's stop and parcels; a deleted parcel takes its parcel
-- back, a deleted shipment its stop. An order's reservation updates these rows first, so
-- two orders for one slot (in any process) take its row lock in turn and each sees the
-- other's place. A pick-up slot's code names it in the whole area (the configuration checks
-- that), so its `place` is empty: its city is not on the pick-up's row.
CREATE TABLE slot_fill (
    mode      TEXT NOT NULL CHECK (mode IN ('test', 'live')),
    kind      TEXT NOT NULL CHECK (kind IN ('pick_up', 'drop_off')),
    place     TEXT NOT NULL,
    slot_code TEXT NOT NULL,
    date      TEXT NOT NULL,
    stops     BIGINT NOT NULL CHECK (stops >= 0),
    parcels   BIGINT NOT NULL CHECK (parcels >= 0),
    PRIMARY KEY (mode, kind, place, slot_code, date)
);
INSERT INTO slot_fill (mode, kind, place, slot_code, date, stops, parcels)
SELECT d.mode, 'drop_off', d.zone_code, d.slot_code, d.scheduled_date, count(*),
    coalesce(sum((SELECT count(*) FROM parcels p WHERE p.drop_off_shipment_id = d.id AND p.deleted_at IS NULL)), 0)
FROM drop_off_shipments d WHERE d.status <> 'deleted'
GROUP BY d.mode, d.zone_code, d.slot_code, d.scheduled_date;
INSERT INTO slot_fill (mode, kind, place, slot_code, date, stops, parcels)
SELECT mode, 'pick_up', '', slot_code, scheduled_date, count(*), 0
FROM pick_up_shipments WHERE status <> 'deleted'
GROUP BY mode, slot_code, scheduled_date;

-- The per-date overrides of the configured limits: each part either inherits the
-- configuration (`*_set` false) or replaces it (`*_set` true; NULL = unlimited that date).
CREATE TABLE capacity_overrides (
    kind        TEXT NOT NULL CHECK (kind IN ('pick_up', 'drop_off')),
    -- The city's code (pick-up) or the zone's code (drop-off).
    place       TEXT NOT NULL,
    slot_code   TEXT NOT NULL,
    date        TEXT NOT NULL,
    stops_set   BOOLEAN NOT NULL,
    stops       BIGINT CHECK (stops >= 0),
    parcels_set BOOLEAN NOT NULL,
    parcels     BIGINT CHECK (parcels >= 0),
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (kind, place, slot_code, date),
    CHECK (stops_set OR stops IS NULL),
    CHECK (parcels_set OR parcels IS NULL)
);
CREATE INDEX capacity_overrides_by_date ON capacity_overrides (date);
