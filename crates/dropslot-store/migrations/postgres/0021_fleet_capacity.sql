-- Issue 45: slots the fleet can deliver ([capacity] mode = "fleet").
--
-- One version per fleet depot and date: an order's transaction raises it before it places
-- its stops, so each process can tell whether the tentative plan it keeps is current.
CREATE TABLE fleet_days (
    depot   TEXT NOT NULL,
    date    TEXT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (depot, date)
);

-- Each booked drop-off's place in its depot's tentative plan of its date: the driver's route
-- and an order key (a stop goes between two others without renumbering them).
CREATE TABLE fleet_stops (
    drop_off_shipment_id BIGINT PRIMARY KEY,
    depot                TEXT NOT NULL,
    date                 TEXT NOT NULL,
    driver_id            TEXT NOT NULL,
    seq                  DOUBLE PRECISION NOT NULL
);
CREATE INDEX fleet_stops_day ON fleet_stops (depot, date);

-- A booked drop-off the fleet can no longer route, held for the dispatcher
-- ([dispatch] unplaced = "hold", or no later slot with room): since when, and why.
ALTER TABLE drop_off_shipments ADD COLUMN unplaced_at TEXT;
ALTER TABLE drop_off_shipments ADD COLUMN unplaced_reason TEXT;
