-- Live ETAs of the drop-offs on published delivery routes (CONTRACT §14): written when a route
-- is published and again as its driver serves stops or reports positions (one route's rows
-- replaced at once); read by the tracking page, shipment reads and webhook payloads. A served
-- stop has no row. Times are Unix milliseconds.
CREATE TABLE stop_etas (
    shipment_unique_id TEXT PRIMARY KEY,
    route_id           TEXT NOT NULL,
    arrival_ms         BIGINT NOT NULL,
    from_ms            BIGINT NOT NULL,
    to_ms              BIGINT NOT NULL,
    -- 1 when the arrival is after the slot's end (the window is then not clipped to it).
    late               INTEGER NOT NULL CHECK (late IN (0, 1)),
    stops_before       INTEGER NOT NULL,
    updated_ms         BIGINT NOT NULL
);
CREATE INDEX stop_etas_by_route ON stop_etas (route_id);
