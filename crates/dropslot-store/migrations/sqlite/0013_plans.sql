-- Day plans (CONTRACT §12). A plan's routes and stops are one JSON document (the core's
-- dispatch::Plan, frozen keys), read and written whole; what other queries need is in columns.
-- At most one plan per depot, date and kind is open (being solved, or a draft): the partial
-- unique index decides a race between two dispatchers or two processes.
CREATE TABLE plans (
    id         TEXT PRIMARY KEY,
    depot      TEXT NOT NULL,
    date       TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('pick_up', 'delivery')),
    status     TEXT NOT NULL CHECK (status IN ('solving', 'draft', 'published')),
    -- Raised by every write: a move or a publish made on an older read is refused.
    version    INTEGER NOT NULL DEFAULT 0,
    -- Unix milliseconds: a plan left 'solving' by a crashed process is taken over after a lease.
    started_ms INTEGER NOT NULL,
    plan_json  TEXT
);
CREATE UNIQUE INDEX plans_one_open ON plans (depot, date, kind) WHERE status IN ('solving', 'draft');
CREATE INDEX plans_by_date ON plans (date);

-- The routes of published plans, for their drivers (the driver app) and run sheets.
CREATE TABLE published_routes (
    id        TEXT PRIMARY KEY,
    plan_id   TEXT NOT NULL REFERENCES plans (id),
    driver_id TEXT NOT NULL,
    date      TEXT NOT NULL
);
CREATE INDEX published_routes_by_driver ON published_routes (driver_id, date);
CREATE INDEX published_routes_by_plan ON published_routes (plan_id);

-- Each shipment is in at most one published route: the primary key says so.
CREATE TABLE published_stops (
    shipment_unique_id TEXT PRIMARY KEY,
    route_id           TEXT NOT NULL REFERENCES published_routes (id),
    plan_id            TEXT NOT NULL
);
CREATE INDEX published_stops_by_plan ON published_stops (plan_id);

-- A plan reads its depot's shipments of one date.
CREATE INDEX drop_off_shipments_by_day ON drop_off_shipments (scheduled_date, warehouse);
CREATE INDEX pick_up_shipments_by_day ON pick_up_shipments (scheduled_date);
