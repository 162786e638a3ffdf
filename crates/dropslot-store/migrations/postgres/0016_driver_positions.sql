-- Where drivers are (CONTRACT §13): the phone reports its position at most every 30 s while a
-- route runs. Kept 30 days, then deleted by the service's upkeep. Times are Unix milliseconds:
-- `at` as the phone measured it, `received_ms` when the service took it (the age that counts).
CREATE TABLE driver_positions (
    driver_id   TEXT NOT NULL,
    -- The request's Idempotency-Key: a replay records nothing twice.
    key         TEXT NOT NULL,
    lat         DOUBLE PRECISION NOT NULL,
    lng         DOUBLE PRECISION NOT NULL,
    accuracy_m  DOUBLE PRECISION NOT NULL,
    at_ms       BIGINT NOT NULL,
    received_ms BIGINT NOT NULL,
    PRIMARY KEY (driver_id, key)
);
CREATE INDEX driver_positions_by_time ON driver_positions (driver_id, at_ms);
CREATE INDEX driver_positions_by_age ON driver_positions (received_ms);
